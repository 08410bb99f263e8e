#!/bin/bash
# Images that travel, end to end (issue 16, acceptance line 1): a private docker-registry on
# loopback and two independent hosts, "host A" and "host B" (each its own store, initramfs
# cache, layouts and overlay under $T/A and $T/B; they share nothing but the registry).
#
#   step                                                   acceptance line 1 ("End to end ...")
#   1  a multi-layer image built with umoci from Debian     "skopeo copy a multi-layer image
#      packages (busybox-static, hello, the guest script),   (built with umoci from Debian
#      an index with linux/amd64 and a synthetic             packages, with an image index
#      linux/arm64/v8, skopeo copy --all to the registry     holding amd64 and arm64 entries)"
#   2  A: import docker://…:TAG (--insecure), mkfs; the     "host A imports it with docker://
#      amd64 image chosen (its files in the manifest and     (amd64 chosen)"
#      the guest, the arm64 marker /ARCH-arm64 in neither)
#   3  A: serve --vhost-user --overlay, QEMU TCG boots      "boots it in the QEMU TCG guest,
#      Debian's cloud kernel with lazyblk's initramfs;       writes and deletes files"
#      /e2e/run.sh write: MiBs of random data, small
#      files, an overwrite in the middle of an existing
#      file, a rename, deletes of files and directories
#      (of lower layers too), sync; then it prints its
#      list: sha256 of every regular file, every
#      directory and symlink. A's disk (through NBD) is
#      kept as the reference and e2fsck -fn clean.
#   4  A: snapshot the overlay: the dirty blocks' data,     (the reference of "within 1.2× of the
#      zstd -3 (the chunks' codec and default level,         compressed dirty blocks")
#      cas/chunk.c, import --level) = DIRTY_Z
#   5  A: commit OVERLAY --layout a.layout → c.layout       "commits"
#   6  A: push a.layout by tag :base, then c.layout by      "pushes by tag"; "the bytes pushed for
#      tag :committed; the commit's uploaded_bytes and the   the commit are within 1.2× of the
#      registry's growth ≤ 1.2 × DIRTY_Z + an allowance      compressed dirty blocks"
#      for the documents (32 KiB + 300 bytes per chunk of
#      the chain), and ≥ the random data the guest wrote
#   7  B: serve oci://…/REPO:committed with an empty store, "host B serves the committed image
#      QEMU boots it, /e2e/run.sh list prints the list:      by tag with an empty cache and boots
#      identical to A's; B's store holds both layouts of     it: the guest sees exactly A's
#      the chain, its chunks came from the registry          changes (checksums)"
#   8  B: export oci://…/REPO:committed: e2fsck -fn clean,  "e2fsck -fn is clean on B's export"
#      and byte for byte A's disk of step 3
. "$(dirname "$0")/lib/common.sh"

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (qemu-system-x86)"
for tool in e2fsck nbdcopy skopeo umoci zstd curl python3 dpkg-deb; do
  command -v "$tool" >/dev/null || skip "$tool is not installed (scripts/deps.sh)"
done
[ -x /bin/busybox ] && ! grep -q INTERP <<<"$(readelf -l /bin/busybox 2>/dev/null)" ||
  skip "/bin/busybox is not a static busybox (install busybox-static)"
. "$TESTLIB/remote.sh"
need_registry
. "$TESTLIB/kernel.sh"
. "$TESTLIB/umoci_image.sh"
kernel_require
echo "kernel: $KERNEL"
VU_SMP=1
# kernel.sh's vu_serve installs vu_cleanup as the EXIT trap: it must stop the registry too
vu_cleanup() {
  local p
  for p in "${VU_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  remote_cleanup
}

# How host A imports (step 2): `import docker://` (A_IMPORT=docker), or, to tell a pull
# problem from the rest (A_IMPORT=skopeo in the environment), skopeo copies the amd64 image
# to an OCI layout and `import oci:` reads it.
A_IMPORT=${A_IMPORT:-docker}

REPO=lazyblk/e2e
TAG=v1
A=$T/A
B=$T/B
mkdir -p "$A" "$B"
VU_SOCK=$T/vu.sock
t0=$(date +%s)

# ---- step 1: the image, its index, the registry ---------------------------------------------
X=$T/extra # the last layer of the amd64 image: the guest script and data to change
mkdir -p "$X/e2e" "$X/data/small" "$X/data/dir/sub"
head -c 1048576 /dev/urandom >"$X/data/blob"
for i in 1 2 3 4 5 6; do echo "small $i" >"$X/data/small/f$i"; done
for i in 1 2 3; do head -c $((i * 5000)) /dev/urandom >"$X/data/dir/sub/r$i"; done
cat >"$X/e2e/run.sh" <<'GUEST'
#!/bin/sh
# /e2e/run.sh MODE: the guest side of tests/integration/t_images_e2e.sh (see there).
#   write  host A: change the disk, sync, then print the list
#   list   host B: print the list
# The list, sorted by path: "SHA256  PATH" for every regular file, "dir PATH" for every
# directory, "link PATH -> TARGET" for every symlink, between "e2e-list-begin" and
# "e2e-list-end N SHA256" (its line count and its sha256: the host checks the console did
# not mangle it).
set -u
fail() { echo "e2e-fail: $*"; exit 1; }
echo 1 >/proc/sys/kernel/printk 2>/dev/null   # no kernel messages inside the list
cd / || fail "cd /"
if [ "$1" = write ]; then
  [ -f /data/blob ] && [ -f /usr/bin/hello ] && [ ! -e /ARCH-arm64 ] || fail "not the amd64 image"
  mkdir -p /new/small/deeper || fail mkdir
  dd if=/dev/urandom of=/new/big bs=65536 count=48 2>/dev/null || fail "dd /new/big"
  i=0
  while [ $i -lt 100 ]; do
    echo "small file $i, written by the guest on host A" >/new/small/f$i || fail "write f$i"
    i=$((i + 1))
  done
  dd if=/dev/urandom of=/new/small/deeper/r bs=1000 count=7 2>/dev/null || fail "dd r"
  dd if=/dev/urandom of=/data/blob bs=4096 seek=100 count=4 conv=notrunc 2>/dev/null ||
    fail "overwrite /data/blob"
  printf 'patched by the guest' | dd of=/usr/bin/hello bs=1 seek=5000 conv=notrunc 2>/dev/null ||
    fail "overwrite /usr/bin/hello"
  mv /data/small/f4 /new/renamed || fail mv
  rm /data/small/f1 /data/small/f2 /bin/ed || fail rm
  rm -r /data/dir /usr/share/doc/hello || fail "rm -r"
  sync || fail sync
fi
list() {
  find / -xdev | sort | while read -r p; do
    if [ -L "$p" ]; then echo "link $p -> $(readlink "$p")"
    elif [ -d "$p" ]; then echo "dir $p"
    elif [ -f "$p" ]; then sha256sum "$p"
    else echo "other $p"
    fi
  done
}
L=$(list) || fail list
echo "e2e-list-begin"
echo "$L"
echo "e2e-list-end $(echo "$L" | wc -l) $(echo "$L" | sha256sum | cut -d' ' -f1)"
echo "e2e-done: $1"
GUEST
chmod 755 "$X/e2e/run.sh"
build_multiarch_image "$T/oci" "$TAG" "$X"
start_registry
REG=127.0.0.1:$REG_PORT
skopeo copy -q --all --dest-tls-verify=false "oci:$T/oci:$TAG" "docker://$REG/$REPO:$TAG" ||
  die "skopeo copy --all to the registry failed"
curl -fsS -H "Accept: application/vnd.oci.image.index.v1+json" \
  "http://$REG/v2/$REPO/manifests/$TAG" | python3 -c '
import json, sys
ix = json.load(sys.stdin)
p = sorted("%s/%s" % (m["platform"]["os"], m["platform"]["architecture"]) for m in ix["manifests"])
assert p == ["linux/amd64", "linux/arm64"], p' || die "the registry does not hold the two-platform index"
echo "step 1: $REPO:$TAG in the registry: an index of linux/amd64 (3 layers) and linux/arm64/v8 ($(( $(date +%s) - t0 )) s)"

# ---- step 2: host A imports it ----------------------------------------------------------------
host_a_import() {
  if [ "$A_IMPORT" = docker ]; then
    "$LAZYBLK" import "docker://$REG/$REPO:$TAG" --insecure --store "$A/store" -o "$A/a.manifest" \
      >/dev/null 2>"$T/import.err" ||
      { cat "$T/import.err" >&2; die "host A: import docker://$REG/$REPO:$TAG failed"; }
  else # FALLBACK (see A_IMPORT)
    skopeo copy -q --src-tls-verify=false --override-os linux --override-arch amd64 \
      "docker://$REG/$REPO:$TAG" "oci:$A/pull:$TAG" || die "host A: skopeo copy from the registry failed"
    "$LAZYBLK" import "oci:$A/pull:$TAG" --store "$A/store" -o "$A/a.manifest" \
      >/dev/null 2>"$T/import.err" || { cat "$T/import.err" >&2; die "host A: import oci: failed"; }
  fi
}
host_a_import
"$LAZYBLK" manifest show "$A/a.manifest" | python3 -c '
import json, sys
p = {e["path"] for e in json.load(sys.stdin)["entries"]}
assert "/e2e/run.sh" in p and "/bin/busybox" in p and "/usr/bin/hello" in p, "amd64 files missing"
assert "/ARCH-arm64" not in p, "the arm64 image was imported"' || die "host A did not import the amd64 image"
"$LAZYBLK" mkfs "$A/a.manifest" -o "$A/a.layout" --size 64M --journal 4M >/dev/null
echo "step 2: host A imported the amd64 image ($A_IMPORT), mkfs → a.layout"

# ---- step 3: host A boots it, the guest writes and deletes ----------------------------------
# boot HOST MODE: QEMU boots the disk served on $VU_SOCK, running /e2e/run.sh MODE (the
# initramfs cached in HOST's own directory); the list it printed goes to $T/HOST.list.
boot() {
  local h=$1 mode=$2 rc=0 s
  "$LAZYBLK" initramfs --kernel "$KERNEL" --cache-dir "$T/$h/initramfs" -o "$T/$h/initrd" \
    -- /bin/sh /e2e/run.sh "$mode" >/dev/null
  s=$(date +%s%N)
  qemu_vu "$h-boot" "$T/$h/initrd" "$VU_SOCK" || rc=$?
  vu_check_boot "$h-boot" "$rc"
  grep -q "^e2e-done: $mode" "$T/$h-boot.log" ||
    { grep "e2e-" "$T/$h-boot.log" >&2 || true; tail -20 "$T/$h-boot.log" >&2; die "host $h: boot failed"; }
  [ "$(vu_exit_status "$h-boot")" = 0 ] || die "host $h: exit status '$(vu_exit_status "$h-boot")'"
  python3 - "$T/$h-boot.log" "$T/$h.list" <<'PYEOF' || die "host $h: no intact list on the console"
import hashlib, sys
lines = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r", "").split("\n")
b = lines.index("e2e-list-begin")
e = next(i for i in range(b, len(lines)) if lines[i].startswith("e2e-list-end "))
body, (_, n, sha) = lines[b + 1:e], lines[e].split()
text = "\n".join(body) + "\n"
if len(body) != int(n) or hashlib.sha256(text.encode()).hexdigest() != sha:
    sys.exit("the list on the console is not the list the guest printed (%d lines, want %s)" % (len(body), n))
open(sys.argv[2], "w").write(text)
PYEOF
  echo "host $h: boot ($mode) $(( ($(date +%s%N) - s) / 1000000 )) ms, $(grep -c '^[0-9a-f]\{64\}  ' "$T/$h.list") regular files listed"
}
vu_serve a-serve "$A/a.layout" --store "$A/store" --overlay "$A/ov" --vhost-user "$VU_SOCK"
boot A write
vu_stop "$VU_PID" a-serve
for want in "^[0-9a-f]{64}  /new/big$" "^[0-9a-f]{64}  /new/small/f99$" "^[0-9a-f]{64}  /new/renamed$" \
  "^[0-9a-f]{64}  /bin/busybox$" "^link /bin/sh -> "; do
  grep -Eq "$want" "$T/A.list" || die "host A's list lacks /$want/"
done
for gone in " /data/dir" " /usr/share/doc/hello" " /data/small/f1$" " /data/small/f4$" " /bin/ed " \
  " /ARCH-arm64"; do
  ! grep -q -- "$gone" "$T/A.list" || die "host A's list still has '$gone'"
done
# A's disk as the guest left it, through NBD (no new command involved): the reference
NBD=$T/nbd.sock
start_server a-nbd "nbd+unix:///?socket=$NBD" "$A/a.layout" --store "$A/store" --overlay "$A/ov" \
  --nbd "unix:$NBD"
nbdcopy "nbd+unix:///?socket=$NBD" "$A/disk.raw"
stop_server "$SRV" a-nbd
e2fsck -fn "$A/disk.raw" >"$T/fsck-a" 2>&1 || { cat "$T/fsck-a" >&2; die "e2fsck -fn of host A's disk"; }
echo "step 3: host A's guest wrote and deleted; its disk is e2fsck -fn clean"

# ---- step 4: the compressed dirty blocks ------------------------------------------------------
"$LAZYBLK" snapshot "$A/ov" -o "$A/d.delta" >/dev/null
# the delta (docs/formats.md, "The delta"): a 4096-byte header (dirty_blocks: u64 LE at
# offset 64), then the dirty blocks' data, dirty_blocks × 4096 bytes in disk order
python3 - "$A/d.delta" "$A/dirty.bin" >"$A/delta.counts" <<'PYEOF' || die "cannot read the delta"
import struct, sys
with open(sys.argv[1], "rb") as f:
    h = f.read(4096)
    assert h[:8] == b"LZBKDLTA" and struct.unpack_from("<I", h, 8)[0] == 1, "not a delta v1"
    dirty, zeroed = struct.unpack_from("<QQ", h, 64)
    with open(sys.argv[2], "wb") as o:
        for _ in range(dirty):
            o.write(f.read(4096))
print(dirty, zeroed)
PYEOF
read -r DIRTY ZEROED <"$A/delta.counts"
[ "$(stat -c %s "$A/dirty.bin")" -eq $((DIRTY * 4096)) ] || die "delta: short data section"
DIRTY_Z=$(zstd -3 -q -c "$A/dirty.bin" | wc -c)
RANDOM_BYTES=$((48 * 65536 + 7000 + 4 * 4096)) # /new/big, /new/small/deeper/r, /data/blob
[ "$DIRTY" -ge $((RANDOM_BYTES / 4096)) ] || die "delta: $DIRTY dirty blocks, fewer than the guest wrote"
echo "step 4: $DIRTY dirty blocks ($((DIRTY * 4096)) bytes; $ZEROED zeroed), zstd -3: $DIRTY_Z bytes"

# ---- step 5: host A commits -------------------------------------------------------------------
host_a_commit() {
  "$LAZYBLK" commit "$A/ov" --layout "$A/a.layout" --store "$A/store" -o "$A/c.layout" --json \
    >"$A/commit.json" || die "host A: commit failed"
}
host_a_commit
# layout_digest FILE: sha256 of its 4096-byte header block
layout_digest() { head -c 4096 "$1" | sha256sum | cut -d' ' -f1; }
json_expr "$A/commit.json" "s['blocks'] in ($DIRTY + $ZEROED, $DIRTY) and
  s['layout_digest'] in ('$(layout_digest "$A/c.layout")', 'sha256:$(layout_digest "$A/c.layout")')"
echo "step 5: committed: $(cat "$A/commit.json")"

# ---- step 6: host A pushes the base, then the commit, by tag -----------------------------------
# reg_bytes: the bytes of every blob the registry stores (chunks, layouts, manifests, indexes)
reg_bytes() { find "$REG_ROOT/docker/registry/v2/blobs" -type f -name data -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }
"$LAZYBLK" push "$A/a.layout" --store "$A/store" --remote "oci://$REG/$REPO:base" --json \
  >"$A/push-base.json" || die "host A: push of the base by tag failed"
r0=$(reg_bytes)
"$LAZYBLK" push "$A/c.layout" --store "$A/store" --remote "oci://$REG/$REPO:committed" --json \
  >"$A/push-commit.json" || die "host A: push of the commit by tag failed"
REG_GROWTH=$(( $(reg_bytes) - r0 ))
curl -fsS -H "Accept: application/vnd.oci.image.index.v1+json" \
  "http://$REG/v2/$REPO/manifests/committed" | python3 -c '
import json, sys
ix = json.load(sys.stdin)
assert ix.get("artifactType") == "application/vnd.lazyblk.image.v1", ix' ||
  die "tag :committed is not a lazyblk image"
PUSHED=$(json_get "$A/push-commit.json" uploaded_bytes)
CHAIN_CHUNKS=$(json_get "$A/push-commit.json" chunks)
# The limit: 1.2 × the compressed dirty blocks, plus the documents the commit adds: its layout
# (4 KiB header, runs, chunk table, parent hint: well under 16 KiB for this commit), the image
# manifest and the index (~1 KiB each) and the chunk manifests, which list every chunk of the
# chain (< 300 bytes a chunk): ALLOW = 32 KiB + 300 bytes × the chain's chunks. Checked both
# on what push says it uploaded and on what the registry's storage grew by.
ALLOW=$(( 32768 + 300 * CHAIN_CHUNKS ))
LIMIT=$(( DIRTY_Z * 12 / 10 + ALLOW ))
echo "step 6: pushed for the commit: $PUSHED bytes (uploaded_bytes), the registry grew by" \
  "$REG_GROWTH bytes; compressed dirty blocks $DIRTY_Z; limit 1.2 × $DIRTY_Z + $ALLOW = $LIMIT" \
  "(base push: $(json_get "$A/push-base.json" uploaded_bytes) bytes; c.layout $(stat -c %s "$A/c.layout") bytes)"
[ "$PUSHED" -le "$LIMIT" ] || die "the commit pushed $PUSHED bytes, more than $LIMIT"
[ "$REG_GROWTH" -le "$LIMIT" ] || die "the registry grew by $REG_GROWTH bytes for the commit, more than $LIMIT"
[ "$PUSHED" -ge "$RANDOM_BYTES" ] ||
  die "the commit pushed $PUSHED bytes, less than the $RANDOM_BYTES random bytes the guest wrote"

# ---- step 7: host B serves the committed image by tag, empty store, and boots it -------------
[ ! -e "$B/store" ] || die "host B's store is not empty"
host_b_serve() {
  vu_serve b-serve "oci://$REG/$REPO:committed" --store "$B/store" --vhost-user "$VU_SOCK" \
    --overlay "$B/ov" --stats-json "$B/serve-stats.json"
}
host_b_serve
for l in "$A/c.layout" "$A/a.layout"; do
  [ -f "$B/store/layouts/$(layout_digest "$l").layout" ] ||
    die "host B: $(basename "$l") (the chain of :committed) not fetched into its store's layouts/"
done
boot B list
vu_stop "$VU_PID" b-serve
json_expr "$B/serve-stats.json" 's["remote_fetches"] > 0 and s["verify_failures"] == 0'
cmp -s "$T/A.list" "$T/B.list" ||
  { diff "$T/A.list" "$T/B.list" | head -20 >&2 || true; die "host B's guest does not see exactly A's changes"; }
echo "step 7: host B's guest lists exactly what A's left ($(wc -l <"$T/B.list") lines)"

# ---- step 8: host B exports it: e2fsck -fn clean, A's disk byte for byte -----------------------
"$LAZYBLK" export "oci://$REG/$REPO:committed" --store "$B/store" -o "$B/b.raw" >/dev/null ||
  die "host B: export by reference failed"
e2fsck -fn "$B/b.raw" >"$T/fsck-b" 2>&1 || { cat "$T/fsck-b" >&2; die "e2fsck -fn of host B's export"; }
cmp "$B/b.raw" "$A/disk.raw" || die "host B's export differs from host A's disk"
echo "ok: an image pulled by host A, changed in a guest, committed and pushed by tag, booted by host B" \
  "from the registry with A's changes exactly ($(( $(date +%s) - t0 )) s)"
