#!/bin/bash
# lazyblk serve --raw FILE: a plain disk file exported as it is, through the same NBD and
# vhost-user servers as a lazy image (the raw disk of blkd/disk/disk.h). Checks: usage errors
# (one line each); nbdinfo (size, flags, base:allocation only) and its map against the
# file's own holes; nbdcopy of the export equals the file byte for byte; writes, zeroes and
# trims through NBD land in the file, nbdcopy writes a whole disk back; --read-only refuses
# writes and leaves the file alone; statistics (SIGUSR1, exit, --stats-json) and the control
# socket; then QEMU (TCG) boots Debian's kernel with an ext4 image file as its vhost-user-blk
# root disk, served by --raw (and over NBD by the same server): the guest's checksums of the
# image's files and of a raw read of /dev/vda match the file, its write lands in the file
# (e2fsck -fn clean). The QEMU part is skipped (a SKIP line) when the kernel cannot be had.
. "$(dirname "$0")/lib/common.sh"

for tool in nbdinfo nbdcopy qemu-io python3; do
  command -v "$tool" >/dev/null || skip "t_serve_raw: $tool not installed"
done
. "$TESTLIB/serve.sh"

# ---- usage -------------------------------------------------------------------------------------
"$LAZYBLK" serve --help >"$T/help.txt"
grep -q "^       lazyblk serve --raw FILE \[--read-only\]" "$T/help.txt" || die "serve --help: no --raw usage"
grep -q -- "--raw FILE " "$T/help.txt" || die "serve --help: no --raw option"
: >"$T/empty.img"
truncate -s 1M "$T/small.img"
S=(--nbd "unix:$T/x.sock")
expect_error "missing file" "$T/none.img: No such file or directory" -- \
  "$LAZYBLK" serve --raw "$T/none.img" "${S[@]}"
expect_error "a directory" "$T: Is a directory" -- "$LAZYBLK" serve --raw "$T" "${S[@]}"
expect_error "an empty file" "$T/empty.img: not a disk" -- "$LAZYBLK" serve --raw "$T/empty.img" "${S[@]}"
expect_error "not a file" "/dev/null: not a disk" -- "$LAZYBLK" serve --raw /dev/null "${S[@]}"
expect_rc 1 "$LAZYBLK" serve --raw "$T/none.img" "${S[@]}"
if [ "$(id -u)" != 0 ]; then
  cp "$T/small.img" "$T/ro.img"; chmod 444 "$T/ro.img"
  expect_error "not writable" "serve it with --read-only?" -- "$LAZYBLK" serve --raw "$T/ro.img" "${S[@]}"
fi
expect_error "--raw and a layout" "unexpected argument 'x.layout' (--raw FILE is the disk" -- \
  "$LAZYBLK" serve --raw "$T/small.img" x.layout "${S[@]}"
for opt in "--store $T/s" "-s $T/s" "--overlay $T/ov" "--remote http://127.0.0.1:1/" \
           "--cache-size 1G" "--mem-cache 1G" "--no-plain" "--prefetch $T/t" "--prefetch-all" \
           "--trace-record $T/t" "--manifest $T/m" "--fetch-retries 1" "--readahead 4"; do
  # shellcheck disable=SC2086 # the option and its value, split on purpose
  set -- $opt
  name=${1#-}; name=${name#-}; [ "$name" = s ] && name=store
  expect_error "--raw with $1" "--$name does not go with --raw" -- \
    "$LAZYBLK" serve --raw "$T/small.img" "$@" "${S[@]}"
  expect_rc 2 "$LAZYBLK" serve --raw "$T/small.img" "$@" "${S[@]}"
done
expect_error "--raw ''" "bad --raw ''" -- "$LAZYBLK" serve --raw "" "${S[@]}"
expect_error "--raw, no transport" "missing --nbd unix:PATH, --nbd tcp:HOST:PORT or --vhost-user PATH" -- \
  "$LAZYBLK" serve --raw "$T/small.img"
[ ! -e "$T/x.sock" ] || die "a refused serve left a socket"

# ---- a sparse 64 MiB disk file: data in a few places, holes elsewhere ------------------------
D=$T/disk.raw
truncate -s 64M "$D"
for at in 0 5 17 40; do  # MiB
  head -c $((768 << 10)) /dev/urandom | dd of="$D" bs=1M seek="$at" conv=notrunc status=none
done
head -c 4096 /dev/urandom | dd of="$D" bs=4096 seek=$(((64 << 8) - 1)) conv=notrunc status=none
size=$(stat -c %s "$D")
cp --sparse=always "$D" "$T/orig.raw"

# extents of a file from SEEK_DATA/SEEK_HOLE, as nbdinfo --map prints them (offset length flags)
file_map() {
  python3 - "$1" <<'PYEOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
size, pos, out = os.fstat(fd).st_size, 0, []
while pos < size:
    try:
        data = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError:
        data = size
    if data > pos:
        out.append((pos, data - pos, 3))
        pos = data
        continue
    hole = os.lseek(fd, pos, os.SEEK_HOLE)
    out.append((pos, hole - pos, 0))
    pos = hole
for o, n, f in out:
    print(o, n, f)
PYEOF
}

sock=$T/nbd.sock
uri="nbd+unix:///?socket=$sock"
start_server rw "$uri" --raw "$D" --nbd "unix:$sock" --stats-json "$T/stats.json" \
  --control "$T/ctl.sock" --export-name plain
grep -q "^serving $D (64.0 MiB) over NBD on unix:$sock at nbd+unix:///plain?socket=$sock$" "$T/rw.out" ||
  die "serving line: $(cat "$T/rw.out")"
[ "$(nbdinfo --size "$uri")" = "$size" ] || die "nbdinfo size $(nbdinfo --size "$uri") != $size"
nbdinfo "$uri" >"$T/info.txt"
for want in "export-size: $size" "can_multi_conn: true" "can_flush: true" "can_fua: true" \
            "can_trim: true" "can_zero: true" "can_df: true" "is_read_only: false" \
            "block_size_minimum: 512" "block_size_preferred: 4096" \
            "block_size_maximum: 33554432" "description: lazyblk raw disk file"; do
  grep -qF "$want" "$T/info.txt" || die "nbdinfo lacks '$want': $(cat "$T/info.txt")"
done
nbdinfo --list "$uri" >"$T/list.txt"
grep -q 'export="plain"' "$T/list.txt" || die "export name: $(cat "$T/list.txt")"
grep -q "base:allocation" "$T/list.txt" || die "no base:allocation: $(cat "$T/list.txt")"
! grep -q "lazyblk:dirty" "$T/list.txt" || die "a plain file offers lazyblk:dirty"
# the allocation map is the file's: holes where it has none
nbdinfo --map "$uri" | awk '{ print $1, $2, $3 }' >"$T/map.txt"
file_map "$D" >"$T/map.want"
cmp -s "$T/map.txt" "$T/map.want" ||
  die "map: $(tr '\n' ';' <"$T/map.txt") want $(tr '\n' ';' <"$T/map.want")"
grep -q " 3$" "$T/map.txt" && grep -q " 0$" "$T/map.txt" || die "map without holes or data"
echo "ok: nbdinfo: size, flags, base:allocation only, the map is the file's ($(wc -l <"$T/map.txt") extents)"

# reads: nbdcopy (several connections, with block status) equals the file byte for byte
nbdcopy "$uri" "$T/copy.raw"
cmp "$T/copy.raw" "$D" || die "nbdcopy of the export differs from the file"
nbdcopy --no-extents --connections=1 "$uri" "$T/copy1.raw"
cmp "$T/copy1.raw" "$D" || die "nbdcopy --no-extents differs from the file"
echo "ok: nbdcopy of the export equals the file"

# writes: data, zeroes (NO_HOLE), zeroes that may unmap, a trim, a 512-byte write; in the file
qemu-io -f raw "$uri" -c "write -P 0xab 1M 64k" -c "write -z 5M 64k" -c "write -z -u 17M 128k" \
  -c "discard 40M 256k" -c "write -P 0xcd 30M 512" -c "flush" >/dev/null || die "qemu-io writes"
python3 - "$T/orig.raw" "$T/want.raw" <<'PYEOF'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
def put(off, b): d[off:off + len(b)] = b
put(1 << 20, b"\xab" * 65536)
put(5 << 20, bytes(65536))
put(17 << 20, bytes(131072))
put(40 << 20, bytes(262144))
put(30 << 20, b"\xcd" * 512)
open(sys.argv[2], "wb").write(d)
PYEOF
cmp "$D" "$T/want.raw" || die "the file after writes through NBD differs from the expectation"
nbdinfo --map "$uri" | awk -v a=$((17 << 20)) -v b=$((40 << 20)) \
  '($1 <= a && a < $1 + $2) || ($1 <= b && b < $1 + $2) { print $3 }' >"$T/holes.txt"
[ "$(tr '\n' ' ' <"$T/holes.txt")" = "3 3 " ] || die "unmapped zeroes and trim not holes: $(cat "$T/holes.txt")"
# a whole disk written back with nbdcopy (a changed megabyte, the rest as it is)
cp "$T/want.raw" "$T/new.raw"
head -c 1048576 /dev/urandom | dd of="$T/new.raw" bs=1M seek=20 conv=notrunc status=none
nbdcopy "$T/new.raw" "$uri"
cmp "$D" "$T/new.raw" || die "nbdcopy into the export: the file differs"
echo "ok: writes, zeroes, trims and an nbdcopy through NBD are in the file (trims and unmapped zeroes as holes)"

# the control socket: flush and stats through the disk; no snapshots of a plain file
python3 - "$T/ctl.sock" >"$T/ctl.out" <<'PYEOF' || die "control socket: $(cat "$T/ctl.out")"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
f = s.makefile("rwb")
def ask(line):
    f.write(line.encode() + b"\n"); f.flush()
    return f.readline().decode().rstrip("\n")
assert ask("flush") == "ok"
st = json.loads(ask("stats"))
assert st["reads"] > 0 and st["writes"] > 0 and st["flushes"] > 0, st
r = ask("snapshot /tmp/x.delta")
assert r == "error /tmp/x.delta: this disk takes no snapshots", r
r = ask("trace stop")
assert r.startswith("error not recording a trace"), r
print("control: ok")
PYEOF
[ ! -e /tmp/x.delta ] || die "a snapshot file appeared"

# statistics on SIGUSR1, at exit and as JSON
kill -USR1 "$SRV"
wait_for has "$T/rw.out" "^requests " || die "no statistics on SIGUSR1"
stop_server "$SRV" rw
[ ! -e "$sock" ] && [ ! -e "$T/ctl.sock" ] || die "sockets left behind"
python3 - "$T/stats.json" <<'PYEOF' || die "stats JSON: $(cat "$T/stats.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["reads"] > 0 and s["writes"] > 0 and s["write_zeroes"] > 0 and s["discards"] > 0, s
assert s["read_bytes"] > 0 and s["write_bytes"] > 0 and s["errors"] == 0, s
PYEOF
cmp "$D" "$T/new.raw" || die "the file changed at exit"
echo "ok: statistics (SIGUSR1, exit, JSON), control socket"

# ---- --read-only: advertised, writes refused, the file left alone (opened O_RDONLY) ---------
sum=$(sha256sum <"$D")
chmod 444 "$D"
start_server ro "$uri" --raw "$D" --read-only --nbd "unix:$sock"
grep -q "^serving $D (64.0 MiB, read-only) over NBD" "$T/ro.out" || die "ro: $(cat "$T/ro.out")"
nbdinfo "$uri" | grep -q "is_read_only: true" || die "read-only not advertised"
expect_rc 1 qemu-io -f raw "$uri" -c "write -P 1 0 4k"
python3 "$TESTLIB/nbdc.py" ro-write "$sock" || die "the read-only export accepted a write"
nbdcopy "$uri" "$T/rocopy.raw"
cmp "$T/rocopy.raw" "$T/new.raw" || die "read-only copy differs"
stop_server "$SRV" ro
[ "$(sha256sum <"$D")" = "$sum" ] || die "the read-only export changed the file"
chmod 644 "$D"
echo "ok: --read-only"

# ---- QEMU over vhost-user: an ext4 image file as the guest's root disk --------------------
vu_skip() { echo "SKIP: t_serve_raw: QEMU over vhost-user: $*"; echo "serve --raw: ok (without QEMU)"; exit 0; }
command -v qemu-system-x86_64 >/dev/null || vu_skip "qemu-system-x86_64 not installed"
command -v e2fsck >/dev/null && command -v debugfs >/dev/null || vu_skip "e2fsprogs not installed"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! grep -q INTERP <<<"$(readelf -l "$BUSYBOX" 2>/dev/null)" ||
  vu_skip "$BUSYBOX is not a static busybox (install busybox-static)"
. "$TESTLIB/kernel.sh"
kc=$(kernel_cache) || vu_skip "no writable kernel cache directory"
KERNEL=$(fetch_kernel "$kc") || vu_skip "cannot fetch linux-image-cloud-amd64 (no network or apt?)"
echo "kernel: $KERNEL"

R=$T/root
mkdir -p "$R/bin" "$R/data"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh echo cat sha256sum dd sync; do ln -s busybox "$R/bin/$a"; done
head -c 3000000 /dev/urandom >"$R/data/big"
echo "small file" >"$R/data/small"
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 64M --journal 4M >/dev/null
ROOT=$T/root.raw
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$ROOT" >/dev/null
# 1 MiB of /data/big's blocks, read raw from /dev/vda by the guest
first=$(debugfs -R "bmap /data/big 0" "$ROOT" 2>/dev/null)
last=$(debugfs -R "bmap /data/big 255" "$ROOT" 2>/dev/null)
[ "$last" = $((first + 255)) ] || die "/data/big is not contiguous ($first..$last)"
vda_sum=$(dd if="$ROOT" bs=4096 skip="$first" count=256 status=none | sha256sum | cut -d' ' -f1)
(cd "$R" && sha256sum data/big data/small) | sed 's#  data/#  /data/#' >"$T/want.sums"
"$LAZYBLK" initramfs --kernel "$KERNEL" --cache-dir "$T/cache" -o "$T/initrd" -- /bin/sh -c \
  "sha256sum /data/big /data/small; echo vda \$(dd if=/dev/vda bs=4096 skip=$first count=256 2>/dev/null | sha256sum); echo written-over-vhost-user > /data/new; sync"

VU_SOCK=$T/vu.sock
NBD=$T/nbd2.sock
vu_serve s1 --raw "$ROOT" --vhost-user "$VU_SOCK" --nbd "unix:$NBD"
wait_for -p "$VU_PID" has "$T/s1.out" "over vhost-user on $VU_SOCK" || true
grep -q "^serving $ROOT (64.0 MiB) over vhost-user on $VU_SOCK$" "$T/s1.out" ||
  die "s1: serving line: $(cat "$T/s1.out")"
s=$(date +%s%N); rc=0
qemu_vu b1 "$T/initrd" "$VU_SOCK" || rc=$?
vu_check_boot b1 "$rc"
[ "$(vu_exit_status b1)" = 0 ] || die "b1: exit status '$(vu_exit_status b1)'"
echo "b1: guest booted from the raw file, ran and powered off in $(( ($(date +%s%N) - s) / 1000000 )) ms"
while read -r sum path; do
  grep -qF "$sum  $path" "$T/b1.log" || { tail -20 "$T/b1.log" >&2; die "b1: guest checksum of $path differs"; }
done <"$T/want.sums"
grep -q "^vda $vda_sum " < <(tr -d '\r' <"$T/b1.log") ||
  { tail -20 "$T/b1.log" >&2; die "b1: the guest's raw read of /dev/vda differs from the file"; }
echo "ok: the guest's checksums of /data/big, /data/small and of 1 MiB of /dev/vda match the file"
# the same server over NBD: the same bytes as the file
nbdcopy "nbd+unix:///?socket=$NBD" "$T/vu.raw"
cmp "$T/vu.raw" "$ROOT" || die "NBD copy of the vhost-user disk differs from the file"
vu_stop "$VU_PID" s1
e2fsck -fn "$ROOT" >"$T/fsck" 2>&1 || { cat "$T/fsck" >&2; die "e2fsck -fn of the file after the boot"; }
[ "$(debugfs -R 'cat /data/new' "$ROOT" 2>/dev/null)" = "written-over-vhost-user" ] ||
  die "debugfs: the guest's /data/new is not in the file"
echo "ok: the guest's write is in the file, e2fsck -fn clean"
echo "serve --raw: ok"
