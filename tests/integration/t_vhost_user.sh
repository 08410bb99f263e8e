#!/bin/bash
# lazyblk serve --vhost-user with QEMU as the real client: QEMU (TCG) boots Debian's stock
# cloud kernel with lazyblk's initramfs, its root disk a vhost-user-blk-pci device backed by
# the lazy image. Checks: the guest's checksums of the image's files match the host's, a
# guest write lands (the same server exports the disk over NBD at the same time: e2fsck -fn
# of that copy is clean, debugfs reads the file), garbage on the socket is refused with a log
# line while the server goes on, and a server killed with -9 mid-run and restarted lets a
# QEMU with `reconnect=1` go on: the guest sees a pause, not I/O errors.
. "$(dirname "$0")/lib/common.sh"

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (qemu-system-x86)"
command -v e2fsck >/dev/null && command -v debugfs >/dev/null || skip "e2fsprogs not installed"
command -v nbdcopy >/dev/null || skip "nbdcopy not installed (libnbd-bin)"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP ||
  skip "$BUSYBOX is not a static busybox (install busybox-static)"
. "$TESTLIB/kernel.sh"

# ---- usage ---------------------------------------------------------------------------------
"$LAZYBLK" serve --help | grep -q -- "--vhost-user PATH" || die "serve --help lacks --vhost-user"
expect_error "no transport" "missing --nbd unix:PATH, --nbd tcp:HOST:PORT or --vhost-user PATH" -- \
  "$LAZYBLK" serve "$T/none.layout" --store "$T/s"
expect_error "vhost-user, no layout" "none.layout: No such file or directory" -- \
  "$LAZYBLK" serve "$T/none.layout" --store "$T/s" --vhost-user "$T/x.sock"

kernel_require
echo "kernel: $KERNEL"

# ---- the image -----------------------------------------------------------------------------
R=$T/root
mkdir -p "$R/bin" "$R/data/sub"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh echo cat ls sha256sum dd seq sleep sync rm mv mkdir; do ln -s busybox "$R/bin/$a"; done
head -c 3000000 /dev/urandom >"$R/data/big"      # three chunks
head -c 300000 /dev/urandom >"$R/data/x"
echo "small file" >"$R/data/sub/small"
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M --journal 4M >/dev/null
(cd "$R" && sha256sum data/big data/x data/sub/small) | sed 's#  data/#  /data/#' >"$T/want.sums"

initrd() { # initrd OUT ARGS...
  local out=$1; shift
  "$LAZYBLK" initramfs --kernel "$KERNEL" --cache-dir "$T/cache" -o "$out" "$@"
}
VU_SOCK=$T/vu.sock
NBD=$T/nbd.sock
SERVE=("$T/img.layout" --store "$T/store" --overlay "$T/ov")

# ---- garbage on the socket: refused with one log line, the server goes on ---------------------
vu_serve s0 "${SERVE[@]}" --vhost-user "$VU_SOCK"
python3 - "$VU_SOCK" <<'PYEOF'
import socket, struct, sys
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); s.settimeout(10); return s
s = conn(); s.sendall(struct.pack("<III", 99, 1, 0))                 # an unknown request
assert s.recv(1) == b"", "unknown request: connection not closed"
s = conn(); s.sendall(struct.pack("<III", 2, 1, 4) + b"\0" * 4)      # SET_FEATURES, 4 bytes
assert s.recv(1) == b"", "bad size: connection not closed"
s = conn(); s.sendall(struct.pack("<III", 1, 1, 0))                  # GET_FEATURES: answered
h = s.recv(20)
assert len(h) == 20 and struct.unpack("<III", h[:12]) == (1, 5, 8), h
assert struct.unpack("<Q", h[12:])[0] & (1 << 32), "no VIRTIO_F_VERSION_1"
PYEOF
grep -q "request 99: unknown or unsupported request; dropping the connection" "$T/s0.err" ||
  { cat "$T/s0.err" >&2; die "no log line for the unknown request"; }
grep -q "SET_FEATURES: bad payload size" "$T/s0.err" || die "no log line for the bad size"
echo "ok: malformed messages dropped with a log line, the server still answers"
vu_stop "$VU_PID" s0

# ---- 1: checksums, a write; the same server exports the disk over NBD -----------------------
initrd "$T/i1" -- /bin/sh -c 'sha256sum /data/big /data/x /data/sub/small; echo written-over-vhost-user > /data/new; sync'
vu_serve s1 "${SERVE[@]}" --vhost-user "$VU_SOCK" --nbd "unix:$NBD"
grep -q "over vhost-user on $VU_SOCK" "$T/s1.out" || die "s1: no 'serving' line"
s=$(date +%s%N); rc=0
qemu_vu b1 "$T/i1" "$VU_SOCK" || rc=$?
vu_check_boot b1 "$rc"
echo "b1: guest booted, ran and powered off in $(( ($(date +%s%N) - s) / 1000000 )) ms"
[ "$(vu_exit_status b1)" = 0 ] || die "b1: exit status '$(vu_exit_status b1)'"
grep -F "virtio_blk virtio" "$T/b1.log" | tr -d '\r' | head -2
while read -r sum path; do
  grep -qF "$sum  $path" "$T/b1.log" || { tail -20 "$T/b1.log" >&2; die "b1: guest checksum of $path differs"; }
done <"$T/want.sums"
echo "ok: guest checksums of /data/big, /data/x, /data/sub/small match the host's"
nbdcopy "nbd+unix:///?socket=$NBD" "$T/disk1.raw"
e2fsck -fn "$T/disk1.raw" >"$T/fsck1" 2>&1 || { cat "$T/fsck1" >&2; die "e2fsck -fn after boot 1"; }
[ "$(debugfs -R 'cat /data/new' "$T/disk1.raw" 2>/dev/null)" = "written-over-vhost-user" ] ||
  die "debugfs: /data/new"
vu_stop "$VU_PID" s1
echo "ok: the guest's write is on the disk (exported over NBD by the same server), e2fsck -fn clean"

# ---- 2: kill -9 of the server under a running guest; QEMU reconnects -------------------------
initrd "$T/i2" -- /bin/sh -c 'for i in $(seq 1 16); do dd if=/data/x of=/data/y$i bs=64k 2>/dev/null; sync; echo 3 > /proc/sys/vm/drop_caches; sha256sum /data/y$i; sleep 0.3; done'
vu_serve s2 "${SERVE[@]}" --vhost-user "$VU_SOCK"
rc=0
qemu_vu b2 "$T/i2" "$VU_SOCK" ",reconnect=1" &
QPID=$!
for _ in $(seq 1 600); do grep -q "/data/y4" "$T/b2.log" 2>/dev/null && break; sleep 0.1; done
grep -q "/data/y4" "$T/b2.log" || { kill "$QPID"; tail -20 "$T/b2.log" >&2; die "b2: guest did not get to y4"; }
vu_kill9 "$VU_PID"
killed=$(date +%s%N)
sleep 1.5
vu_serve s3 "${SERVE[@]}" --vhost-user "$VU_SOCK"
wait "$QPID" || rc=$?
vu_check_boot b2 "$rc"
[ "$(vu_exit_status b2)" = 0 ] || die "b2: exit status '$(vu_exit_status b2)'"
xsum=$(grep "/data/x" "$T/want.sums" | cut -d' ' -f1)
n=$(tr -d '\r' <"$T/b2.log" | grep -c "^$xsum  /data/y")
[ "$n" -eq 16 ] || { tail -20 "$T/b2.log" >&2; die "b2: $n of 16 copies checksummed right"; }
echo "ok: server killed with -9 after the guest's 4th copy, restarted 1.5 s later; QEMU reconnected, all 16 copies right ($(( ($(date +%s%N) - killed) / 1000000 )) ms from the kill to the guest's power-off)"
vu_stop "$VU_PID" s3
vu_serve s4 "${SERVE[@]}" --nbd "unix:$NBD" --vhost-user "$VU_SOCK"
nbdcopy "nbd+unix:///?socket=$NBD" "$T/disk2.raw"
vu_stop "$VU_PID" s4
e2fsck -fn "$T/disk2.raw" >"$T/fsck2" 2>&1 || { cat "$T/fsck2" >&2; die "e2fsck -fn after the reconnect"; }
echo "ok: e2fsck -fn clean after the reconnect"
