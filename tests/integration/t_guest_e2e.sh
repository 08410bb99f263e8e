#!/bin/bash
# End to end with a real Linux guest (issue 7): QEMU (TCG) boots Debian's stock cloud kernel
# with lazyblk's initramfs; the lazy image, served by `lazyblk serve --vhost-user`, is its
# root. Inside, a script (in the image: /e2e/run.sh) checksums every regular file and
# compares with a list the host generated from the manifest (`lazyblk manifest show`: path,
# and the sha256 of the content read from the source tree), then creates, renames, deletes,
# overwrites and fsyncs files, and records the state it left. Three boots:
#   1  verify the image, writes (round 1)      server stopped with SIGTERM, restarted
#   2  verify round 1, writes (round 2)         server killed with -9, restarted
#   3  verify round 2
# After boots 1 and 2 the host checks, through the restarted server's NBD export, that the
# lazyblk:dirty map covers every block the guest wrote (debugfs says which), that e2fsck -fn
# of the disk is clean, and that `lazyblk overlay show` counts the dirty blocks.
. "$(dirname "$0")/lib/common.sh"

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (qemu-system-x86)"
command -v e2fsck >/dev/null && command -v debugfs >/dev/null || skip "e2fsprogs not installed"
command -v nbdcopy >/dev/null && command -v nbdinfo >/dev/null || skip "libnbd-bin not installed"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! grep -q INTERP <<<"$(readelf -l "$BUSYBOX" 2>/dev/null)" ||
  skip "$BUSYBOX is not a static busybox (install busybox-static)"
. "$TESTLIB/kernel.sh"
kernel_require
echo "kernel: $KERNEL"
VU_SMP=1

# ---- the image: busybox, a varied tree, blobs across chunk boundaries -------------------------
R=$T/root
mkdir -p "$R/bin" "$R/e2e"
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
python3 - "$R" <<'PYEOF'
import os, random, sys
root = sys.argv[1]; rnd = random.Random(7)
def w(p, n):
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f: f.write(rnd.randbytes(n))
for d in range(10):
    for i in range(25):
        w("%s/tree/d%02d/f%03d" % (root, d, i), rnd.choice([0, 1, 100, 4095, 4096, 4097, rnd.randrange(70000)]))
    os.symlink("f000", "%s/tree/d%02d/link" % (root, d))
w(root + "/tree/with space/a file", 5000)
os.link(root + "/tree/d00/f001", root + "/tree/d00/hardlink")
w(root + "/blobs/b3m", 3 * 1048576 + 123)
w(root + "/blobs/b1m", 1048576)
os.makedirs(root + "/tree/empty")
PYEOF
cat >"$R/e2e/run.sh" <<'GUEST'
#!/bin/sh
# /e2e/run.sh N: boot N of t_guest_e2e.sh (see there). Prints "e2e-boot-N: ok" at the end.
N=$1
fail() { echo "e2e-fail: $*"; exit 1; }
files() { find / -xdev -type f ! -path '/e2e/*' ! -path '/out/*' | sort; }
cd / || fail "cd /"
if [ "$N" = 1 ]; then
  mkdir -p /out
  files >/out/have
  cut -c67- /e2e/expected.sha256 | sort >/out/want
  cmp -s /out/have /out/want || { diff /out/want /out/have | head; fail "the file set differs from the manifest"; }
  sha256sum -c -s /e2e/expected.sha256 ||
    { sha256sum -c /e2e/expected.sha256 2>&1 | grep -v ': OK$' | head; fail "checksums differ from the manifest"; }
  echo "e2e-verified: $(wc -l </out/want) files match the manifest"
else
  sha256sum -c -s /out/after.sha256 ||
    { sha256sum -c /out/after.sha256 2>&1 | grep -v ': OK$' | head; fail "the state left by boot $((N - 1)) differs"; }
  files >/out/have
  cut -c67- /out/after.sha256 | sort >/out/want
  cmp -s /out/have /out/want || { diff /out/want /out/have | head; fail "the file set left by boot $((N - 1)) differs"; }
  echo "e2e-verified: $(wc -l </out/want) files as boot $((N - 1)) left them"
fi
if [ "$N" -lt 3 ]; then
  mkdir -p /new$N/deep/er || fail mkdir
  dd if=/dev/urandom of=/new$N/big bs=64k count=40 2>/dev/null || fail dd
  for i in $(seq 1 40); do echo "round $N file $i" >/new$N/deep/er/f$i || fail "write f$i"; done
  if [ "$N" = 1 ]; then
    mv /tree/d03/f000 /new1/renamed || fail mv
    mv "/tree/with space" /tree/moved-dir || fail "mv dir"
    rm /tree/d05/f001 && rm -r /tree/d07 || fail rm
    dd if=/dev/urandom of=/blobs/b3m bs=4096 seek=10 count=3 conv=notrunc 2>/dev/null || fail overwrite
  else
    mv /new1/big /new2/big-from-1 && rm -r /new1/deep && rm /tree/d00/hardlink || fail "mv/rm"
    dd if=/dev/urandom of=/blobs/b3m bs=4096 seek=100 count=2 conv=notrunc 2>/dev/null || fail overwrite
  fi
  sync /new$N/big /blobs/b3m || fail fsync   # fsync(2) of each file
  files | while read -r f; do sha256sum "$f"; done >/out/after.sha256.tmp || fail "list"
  mv /out/after.sha256.tmp /out/after.sha256 && sync /out/after.sha256 && sync || fail sync
  echo "e2e-wrote: round $N, $(wc -l </out/after.sha256) files now"
fi
echo "e2e-boot-$N: ok"
GUEST
chmod 755 "$R/e2e/run.sh"

# the expected list: every regular file of the manifest, hashed from the source tree
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/pre.manifest" >/dev/null
manifest_list() { # manifest_list MANIFEST: "sha256  /path" of its regular files (and hard links) outside /e2e
  "$LAZYBLK" manifest show "$1" | python3 -c '
import hashlib, json, os, sys
root = sys.argv[1]
for e in json.load(sys.stdin)["entries"]:
    p = root + e["path"]   # hard links to regular files count too
    if e["path"].startswith("/e2e/") or e["type"] not in ("file", "hardlink"):
        continue
    if e["type"] == "file" or (os.path.isfile(p) and not os.path.islink(p)):
        print("%s  %s" % (hashlib.sha256(open(p, "rb").read()).hexdigest(), e["path"]))
' "$R"
}
manifest_list "$T/pre.manifest" >"$R/e2e/expected.sha256"
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/img.manifest" >/dev/null
manifest_list "$T/img.manifest" | cmp -s - "$R/e2e/expected.sha256" || die "the expected list changed"
nfiles=$(wc -l <"$R/e2e/expected.sha256")
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 256M --journal 8M >/dev/null
echo "image: $nfiles regular files (+ /e2e), $(du -sb "$R" | cut -f1) bytes of tree"

VU_SOCK=$T/vu.sock
NBD=$T/nbd.sock
URI="nbd+unix:///?socket=$NBD"
SERVE=("$T/img.layout" --store "$T/store" --overlay "$T/ov")
boot() { # boot N
  local rc=0 s
  "$LAZYBLK" initramfs --kernel "$KERNEL" --cache-dir "$T/cache" -o "$T/i$1" -- /bin/sh /e2e/run.sh "$1"
  s=$(date +%s%N)
  qemu_vu "b$1" "$T/i$1" "$VU_SOCK" || rc=$?
  vu_check_boot "b$1" "$rc"
  grep -q "e2e-boot-$1: ok" "$T/b$1.log" || { grep "e2e-" "$T/b$1.log" >&2; tail -20 "$T/b$1.log" >&2; die "boot $1 failed"; }
  [ "$(vu_exit_status "b$1")" = 0 ] || die "boot $1: exit status '$(vu_exit_status "b$1")'"
  echo "boot $1: $(tr -d '\r' <"$T/b$1.log" | grep -E '^e2e-(verified|wrote)' | tr '\n' ';' | sed 's/;$//') ($(( ($(date +%s%N) - s) / 1000000 )) ms)"
}

# check_disk N PATH[:FIRST:COUNT]...: through the NBD export: e2fsck -fn clean, and every
# block of each PATH (or its file blocks FIRST..FIRST+COUNT-1) is in the lazyblk:dirty map.
check_disk() {
  local n=$1; shift
  nbdcopy "$URI" "$T/disk$n.raw"
  e2fsck -fn "$T/disk$n.raw" >"$T/fsck$n" 2>&1 || { cat "$T/fsck$n" >&2; die "e2fsck -fn after boot $n"; }
  nbdinfo --map=lazyblk:dirty "$URI" | awk '$3 == 1 { print $1, $2 }' >"$T/dirty$n"
  python3 - "$T/disk$n.raw" "$T/dirty$n" "$@" <<'PYEOF'
import subprocess, sys
disk, dirtyf, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
dirty = [tuple(map(int, l.split())) for l in open(dirtyf)]
bs = int(subprocess.run(["dumpe2fs", "-h", disk], capture_output=True, text=True).stdout
         .split("Block size:")[1].split()[0])
total = 0
for spec in specs:
    path, *rng = spec.split(":")
    out = subprocess.run(["debugfs", "-R", "blocks " + path, disk], capture_output=True, text=True).stdout
    blocks = [int(b) for b in out.split()]
    assert blocks, "debugfs: no blocks for " + path
    if rng:
        blocks = blocks[int(rng[0]):int(rng[0]) + int(rng[1])]
    for b in blocks:
        off = b * bs
        if not any(o <= off and off + bs <= o + l for o, l in dirty):
            sys.exit("block %d of %s (disk offset %d) is not in the dirty map" % (b, path, off))
    total += len(blocks)
print("dirty map: covers the %d blocks the guest wrote to %s; %d dirty extents, %d bytes"
      % (total, ", ".join(specs), len(dirty), sum(l for _, l in dirty)))
PYEOF
  echo "ok: after boot $n, e2fsck -fn of the served disk is clean"
}

# ---- boot 1, a clean stop ---------------------------------------------------------------------
vu_serve s1 "${SERVE[@]}" --vhost-user "$VU_SOCK"
boot 1
vu_stop "$VU_PID" s1
show=$("$LAZYBLK" overlay show --json "$T/ov")
d1=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["dirty_blocks"])' "$show")
[ "$d1" -gt 640 ] || die "overlay show after boot 1: $d1 dirty blocks, want > 640 (2.5 MiB written): $show"
echo "ok: overlay show after boot 1: $d1 dirty blocks"
vu_serve s2 "${SERVE[@]}" --vhost-user "$VU_SOCK" --nbd "unix:$NBD"
check_disk 1 /new1/big /new1/deep/er/f1 /new1/deep/er/f40 /blobs/b3m:10:3
debugfs -R "ls -l /tree" "$T/disk1.raw" 2>/dev/null >"$T/ls1"
grep -q " d06 *$" "$T/ls1" && ! grep -q " d07 *$" "$T/ls1" || die "debugfs: /tree/d07 still there (or d06 gone)"
debugfs -R "stat /new1/renamed" "$T/disk1.raw" >/dev/null 2>&1 || die "debugfs: /new1/renamed missing"

# ---- boot 2, then kill -9 --------------------------------------------------------------------
boot 2
vu_kill9 "$VU_PID"
echo "server killed with -9 after boot 2"
vu_serve s3 "${SERVE[@]}" --vhost-user "$VU_SOCK" --nbd "unix:$NBD"
check_disk 2 /new2/big /new2/big-from-1 /new2/deep/er/f7 /blobs/b3m:100:2

# ---- boot 3: everything boot 2 wrote is there ----------------------------------------------------
boot 3
vu_stop "$VU_PID" s3
"$LAZYBLK" overlay show "$T/ov" | head -5
echo "ok: $nfiles files verified against the manifest in the guest; writes, renames, deletes and fsyncs survived a SIGTERM and a kill -9 of the server"
