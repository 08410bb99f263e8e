#!/bin/bash
# mkfs end to end: a real Python installation, an edge-case tree (every kind of entry, a
# 100,000-entry directory, files over 4 GiB, extent trees, xattr blocks, ACLs) and an OCI
# image from umoci each become a layout whose exported disk is clean for e2fsck -fn,
# whose htrees debugfs reads, and which the kernel mounts showing exactly the manifest.
# Then: read-write use of the disk stays clean, determinism, and bad input.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/edge_tree.sh"
. "$TESTLIB/ext4check.sh"
[ -e /dev/loop-control ] || skip "no loop device support"

# 1. a real tree: this machine's Python installation (Debian's, and the one on PATH)
mkdir -p "$T/py"
for d in /usr/lib/python3.11 /usr/lib/python3 "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')"; do
  [ -d "$d" ] && [ ! -e "$T/py/$(basename "$d")" ] && cp -a "$d" "$T/py/"
done
n=$(find "$T/py" | wc -l)
[ "$n" -ge 1000 ] || die "too few files for the real-tree corpus ($n)"
"$LAZYBLK" import "$T/py" --store "$T/store" -o "$T/py.manifest"
check_layout python "$T/py.manifest" "$T/store"

# 2. the edge-case tree
make_edge_tree "$T/edge" 1
"$LAZYBLK" import "$T/edge" --store "$T/store" -o "$T/edge.manifest"
check_layout edge "$T/edge.manifest" "$T/store"
debugfs -R "stat /islands" "$T/edge.raw" 2>/dev/null | grep -q "(ETB0)" ||
  die "/islands should have an extent tree"

# 3. an OCI image with two layers (a whiteout and an opaque directory)
if command -v umoci >/dev/null; then
  O=$T/oci
  umoci init --layout "$O" && umoci new --image "$O:t"
  umoci unpack --image "$O:t" "$T/bundle" >/dev/null
  cp -a /usr/share/doc/dpkg /usr/share/doc/bash "$T/bundle/rootfs/" 2>/dev/null || true
  mkdir -p "$T/bundle/rootfs/etc" && echo one >"$T/bundle/rootfs/etc/a" && echo two >"$T/bundle/rootfs/etc/b"
  umoci repack --image "$O:t" "$T/bundle" >/dev/null
  rm -f "$T/bundle/rootfs/etc/a" && echo three >"$T/bundle/rootfs/etc/c"
  umoci repack --image "$O:t" "$T/bundle" >/dev/null
  "$LAZYBLK" import "oci:$O:t" --store "$T/store" -o "$T/oci.manifest"
  check_layout oci "$T/oci.manifest" "$T/store"
fi

# 4. read-write: thousands of creates, renames, deletes and a 1 GiB write stay clean
"$LAZYBLK" mkfs "$T/py.manifest" -o "$T/rw.layout" --size 3G
"$LAZYBLK" export "$T/rw.layout" --store "$T/store" -o "$T/rw.raw"
mount -o loop "$T/rw.raw" "$T/mnt"
mkdir "$T/mnt/new"
for i in $(seq 1 3000); do echo "file $i" >"$T/mnt/new/f$i"; done
for i in $(seq 1 1000); do mv "$T/mnt/new/f$i" "$T/mnt/new/renamed-$i"; done
for i in $(seq 1001 2000); do rm "$T/mnt/new/f$i"; done
find "$T/mnt" -name '*.py' -path '*email*' -delete
dd if=/dev/zero of="$T/mnt/big" bs=1M count=1024 status=none conv=fsync
umount "$T/mnt"
e2fsck_clean rw "$T/rw.raw"
echo "ok: read-write use stays clean"

# 5. determinism: the same manifest and options give a byte-identical layout
"$LAZYBLK" mkfs "$T/py.manifest" -o "$T/again.layout"
cmp "$T/python.layout" "$T/again.layout" || die "mkfs is not deterministic"
"$LAZYBLK" mkfs "$T/py.manifest" -o "$T/other.layout" --uuid 01234567-89ab-cdef-0123-456789abcdef --label py
dumpe2fs -h "$T/python.raw" 2>/dev/null | grep -q "UUID" || die "no UUID"
echo "ok: deterministic"

# 5b. --order: the listed files' data comes first, in the given order
ordered=$("$LAZYBLK" manifest show "$T/py.manifest" | python3 -c '
import json, sys
files = [e["path"] for e in json.load(sys.stdin)["entries"] if e["type"] == "file" and e["size"] > 8192 and "path" in e]
print(files[-1]); print(files[len(files) // 2])')
echo "$ordered" >"$T/order.txt"
echo "/no/such/file" >>"$T/order.txt"
"$LAZYBLK" mkfs "$T/py.manifest" -o "$T/order.layout" --order "$T/order.txt" 2>"$T/order.err"
grep -q "no/such/file is not in the image" "$T/order.err" || die "--order: no warning for a missing path"
"$LAZYBLK" export "$T/order.layout" --store "$T/store" -o "$T/order.raw"
e2fsck_clean order "$T/order.raw"
first=$(echo "$ordered" | head -1); second=$(echo "$ordered" | tail -1)
b1=$(debugfs -R "bmap $first 0" "$T/order.raw" 2>/dev/null)
b2=$(debugfs -R "bmap $second 0" "$T/order.raw" 2>/dev/null)
broot=$(debugfs -R "bmap / 0" "$T/order.raw" 2>/dev/null)
[ "$b1" -lt "$b2" ] && [ "$b2" -lt "$broot" ] || die "--order not honoured: $b1 $b2 root $broot"
echo "ok: --order places $first at block $b1, before the root directory ($broot)"

# 6. bad input
expect_error "size too small" "too small" -- "$LAZYBLK" mkfs "$T/py.manifest" -o "$T/x.layout" --size 16M
expect_error "no output" "missing -o" -- "$LAZYBLK" mkfs "$T/py.manifest"
expect_error "bad uuid" "--uuid" -- "$LAZYBLK" mkfs "$T/py.manifest" -o "$T/x.layout" --uuid nope
expect_error "bad manifest" "bad magic" -- "$LAZYBLK" mkfs "$T/python.layout" -o "$T/x.layout"
expect_error "too few inodes" "too few" -- "$LAZYBLK" mkfs "$T/py.manifest" -o "$T/x.layout" --inodes 100
# every bad --journal is a usage error (exit 2), one line naming the valid range; 0 is one
# too (the filesystem always has a journal), not the default
expect_usage() {
  local name=$1 rc=0
  expect_error "$@"
  "${@:4}" >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || die "$name: exit $rc, want 2 (usage error)"
}
for j in 0 1K 4095K 5G lots -1; do
  expect_usage "--journal $j" "from 4M to 4G" -- \
    "$LAZYBLK" mkfs "$T/py.manifest" -o "$T/x.layout" --journal "$j"
done
expect_error "--order of a missing file" "nosuch.txt" -- \
  "$LAZYBLK" mkfs "$T/py.manifest" -o "$T/x.layout" --order "$T/nosuch.txt"
mkdir -p "$T/bad/lost+found-parent"
python3 - "$T/bad" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1] + '/long.tar', 'w', format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo('d/' + 'n' * 256); i.size = 1; t.addfile(i, io.BytesIO(b'x'))
with tarfile.open(sys.argv[1] + '/lpf.tar', 'w', format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo('lost+found'); i.size = 1; t.addfile(i, io.BytesIO(b'x'))
PY
"$LAZYBLK" import "$T/bad/long.tar" --store "$T/store" -o "$T/long.manifest"
expect_error "name over 255 bytes" "longer than 255" -- "$LAZYBLK" mkfs "$T/long.manifest" -o "$T/x.layout"
"$LAZYBLK" import "$T/bad/lpf.tar" --store "$T/store" -o "$T/lpf.manifest"
expect_error "lost+found not a dir" "lost+found" -- "$LAZYBLK" mkfs "$T/lpf.manifest" -o "$T/x.layout"
[ ! -e "$T/x.layout" ] || die "a layout was written for bad input"
echo "mkfs: all good"
