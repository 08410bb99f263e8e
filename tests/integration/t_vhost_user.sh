#!/bin/bash
# lazyblk serve --vhost-user with QEMU as the real client: QEMU (TCG) boots Debian's stock
# cloud kernel with lazyblk's initramfs, its root disk a vhost-user-blk-pci device backed by
# the lazy image. Checks: the guest's checksums of the image's files match the host's, a
# guest write lands (the same server exports the disk over NBD at the same time: e2fsck -fn
# of that copy is clean, debugfs reads the file), garbage on the socket is refused with a log
# line while the server goes on, and a server killed with -9 mid-run and restarted lets a
# QEMU with `reconnect=1` go on: the guest sees a pause, not I/O errors. Then the same with
# requests in flight: QEMU negotiated INFLIGHT_SHMFD (it holds the server's in-flight memfd),
# the server is frozen until that region shows a request popped and not completed, killed
# with -9 right then, and the restarted server resubmits it: the guest's O_DIRECT writes and
# reads of 4 MiB files all checksum right, no I/O errors on the console.
. "$(dirname "$0")/lib/common.sh"

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (qemu-system-x86)"
command -v e2fsck >/dev/null && command -v debugfs >/dev/null || skip "e2fsprogs not installed"
command -v nbdcopy >/dev/null || skip "nbdcopy not installed (libnbd-bin)"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP ||
  skip "$BUSYBOX is not a static busybox (install busybox-static)"
. "$TESTLIB/kernel.sh"

# ---- usage ---------------------------------------------------------------------------------
"$LAZYBLK" serve --help >"$T/help.txt" # a file: under pipefail, an early grep -q exit is a SIGPIPE
grep -q -- "--vhost-user PATH" "$T/help.txt" || die "serve --help lacks --vhost-user"
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
for a in sh echo cat ls sha256sum dd seq sleep sync rm mv mkdir cut; do ln -s busybox "$R/bin/$a"; done
head -c 3000000 /dev/urandom >"$R/data/big"      # three chunks
head -c 300000 /dev/urandom >"$R/data/x"
head -c 4194304 /dev/urandom >"$R/data/m"         # O_DIRECT copies: a multiple of 1 MiB
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

# ---- 3: kill -9 while requests are in flight; the restarted server resubmits them -----------
# lazyblk -v: the server logs the in-flight region and the resubmissions
printf '#!/bin/sh\nexec "%s" -v "$@"\n' "$LAZYBLK" >"$T/lazyblk-v"
chmod +x "$T/lazyblk-v"
msum=$(sha256sum <"$R/data/m" | cut -d' ' -f1)
N3=40
initrd "$T/i3" -- /bin/sh -c "for i in \$(seq 1 $N3); do f=/data/d\$((i % 4)); dd if=/data/m of=\$f bs=1M oflag=direct 2>/dev/null || echo dd-write-failed-\$i; echo 3 > /proc/sys/vm/drop_caches; echo copy\$i \$(dd if=\$f bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1); done; sync"

# the QEMU under pid $1 (timeout's child), and its in-flight memfd (the one this server made)
qemu_of() {
  local p=$1 c
  for _ in 1 2 3 4; do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = qemu-system-x86 ] && { echo "$p"; return 0; }
    c=$(cat /proc/"$p"/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -1)
    [ -n "$c" ] || return 1
    p=$c
  done
  return 1
}
inflight_fd() {
  local f
  for f in /proc/"$1"/fd/*; do
    case $(readlink "$f" 2>/dev/null) in "/memfd:lazyblk-inflight"*) echo "$f"; return 0;; esac
  done
  return 1
}
# inflight_count FILE NQ QSIZE: requests marked in flight in the region
inflight_count() {
  python3 - "$@" <<'PYEOF'
import struct, sys
path, nq, qs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = (16 + 16 * qs + 63) & ~63
data = open(path, "rb").read(per * nq)
n = 0
for q in range(nq):
    base = q * per
    if struct.unpack_from("<H", data, base + 8)[0] != 1:
        continue
    n += sum(1 for i in range(qs) if data[base + 16 + 16 * i] == 1)
print(n)
PYEOF
}

LAZYBLK=$T/lazyblk-v vu_serve s5 "${SERVE[@]}" --vhost-user "$VU_SOCK"
rc=0
qemu_vu b3 "$T/i3" "$VU_SOCK" ",reconnect=1" &
QPID=$!
for _ in $(seq 1 600); do grep -q "^copy1 " "$T/b3.log" 2>/dev/null && break; sleep 0.1; done
grep -q "^copy1 " "$T/b3.log" || { kill "$QPID"; tail -20 "$T/b3.log" >&2; die "b3: guest did not get to its first copy"; }
QEMU=$(qemu_of "$QPID") || die "b3: no QEMU process under $QPID"
IFD=$(inflight_fd "$QEMU") || die "b3: QEMU holds no lazyblk-inflight memfd: INFLIGHT_SHMFD not negotiated"
geom=$(sed -n 's/.*in-flight tracking: \([0-9]*\) queues of \([0-9]*\) entries.*/\1 \2/p' "$T/s5.err" | tail -1)
[ -n "$geom" ] || { cat "$T/s5.err" >&2; die "s5: no 'in-flight tracking' line"; }
echo "ok: QEMU negotiated INFLIGHT_SHMFD: it holds $(readlink "$IFD") ($geom: queues, entries)"
# freeze the server at random moments until its region shows a request in flight; kill it then
kills=0; tries=0; srv=s5
while [ "$kills" -lt 2 ] && [ "$tries" -lt 600 ] && ! grep -q "^copy$N3 " "$T/b3.log"; do
  tries=$((tries + 1))
  kill -STOP "$VU_PID"
  n=$(inflight_count "$IFD" $geom 2>/dev/null || echo 0)
  if [ "$n" -gt 0 ]; then
    vu_kill9 "$VU_PID"
    kills=$((kills + 1))
    echo "killed $srv with -9 with $n request(s) in flight (attempt $tries)"
    srv=s$((5 + kills))
    LAZYBLK=$T/lazyblk-v vu_serve "$srv" "${SERVE[@]}" --vhost-user "$VU_SOCK"
    for _ in $(seq 1 100); do grep -q "resubmitting" "$T/$srv.err" && break; sleep 0.1; done
    grep "resubmitting" "$T/$srv.err" || { cat "$T/$srv.err" >&2; die "$srv: nothing resubmitted"; }
    grep "resuming at used index" "$T/$srv.err" || true
    IFD=$(inflight_fd "$QEMU") || die "b3: QEMU dropped its in-flight memfd"
  else
    kill -CONT "$VU_PID"
    sleep "0.0$(( RANDOM % 5 + 1 ))"
  fi
done
[ "$kills" -gt 0 ] || { kill "$QPID"; die "b3: no request in flight in $tries attempts"; }
wait "$QPID" || rc=$?
vu_check_boot b3 "$rc"
[ "$(vu_exit_status b3)" = 0 ] || die "b3: exit status '$(vu_exit_status b3)'"
! grep -q "dd-write-failed" "$T/b3.log" || die "b3: a guest dd failed"
n=$(tr -d '\r' <"$T/b3.log" | grep -c "^copy[0-9]* $msum$")
[ "$n" -eq "$N3" ] || { tr -d '\r' <"$T/b3.log" | grep "^copy" >&2; die "b3: $n of $N3 O_DIRECT copies checksummed right"; }
echo "ok: killed -9 $kills time(s) with requests in flight, resubmitted by the next server; all $N3 O_DIRECT copies (4 MiB, written and read back) right, no I/O errors"
vu_stop "$VU_PID" "$srv"
vu_serve s9 "${SERVE[@]}" --nbd "unix:$NBD" --vhost-user "$VU_SOCK"
nbdcopy "nbd+unix:///?socket=$NBD" "$T/disk3.raw"
vu_stop "$VU_PID" s9
e2fsck -fn "$T/disk3.raw" >"$T/fsck3" 2>&1 || { cat "$T/fsck3" >&2; die "e2fsck -fn after the in-flight kills"; }
echo "ok: e2fsck -fn clean after the in-flight kills"
