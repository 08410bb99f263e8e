#!/bin/bash
# lazyblk serve --vhost-user with QEMU as the real client: QEMU (TCG) boots Debian's stock
# cloud kernel with lazyblk's initramfs, its root disk a vhost-user-blk-pci device backed by
# the lazy image. Checks: the guest's checksums of the image's files match the host's, a
# guest write lands (the same server exports the disk over NBD at the same time: e2fsck -fn
# of that copy is clean, debugfs reads the file), garbage on the socket is refused with a log
# line while the server goes on, and a server killed with -9 mid-run and restarted lets a
# QEMU with `reconnect=1` go on: the guest sees a pause, not I/O errors. Then the same with
# requests in flight, made to happen rather than waited for: the image's chunks come from a
# remote through lib/faultproxy.py, whose gate holds the GET of one chunk, so a guest read
# (then a guest's partial-block write, which reads its block first) is provably in the
# server, marked in QEMU's in-flight region (INFLIGHT_SHMFD), when the server is killed
# with -9; the restarted server resubmits it: the read and the write land, the guest's
# O_DIRECT copies of a 4 MiB file all checksum right, no I/O errors on the console. (It used
# to freeze the server at random moments until a request happened to be in flight: on a
# loaded machine that failed, "no request in flight in 144 attempts".)
. "$(dirname "$0")/lib/common.sh"

command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 not installed (qemu-system-x86)"
command -v e2fsck >/dev/null && command -v debugfs >/dev/null || skip "e2fsprogs not installed"
command -v nbdcopy >/dev/null || skip "nbdcopy not installed (libnbd-bin)"
command -v nginx >/dev/null || skip "nginx is not installed (scripts/deps.sh)"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! grep -q INTERP <<<"$(readelf -l "$BUSYBOX" 2>/dev/null)" ||
  skip "$BUSYBOX is not a static busybox (install busybox-static)"
. "$TESTLIB/remote.sh"
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
head -c 1048576 /dev/urandom >"$R/data/h1"        # read by the guest while held (part 3)
head -c 1048576 /dev/urandom >"$R/data/h2"        # written (512 bytes) while held (part 3)
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
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); s.settimeout(60); return s
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

# ---- 3: kill -9 while a request is held in flight; the restarted server resubmits it ------
# The image is served lazily: its chunks come from nginx through faultproxy, no read-ahead.
# The proxy's gate holds the GET of /data/h1's first chunk: the guest's O_DIRECT read of h1
# is then in the server (popped off the ring, marked in QEMU's in-flight region, waiting for
# the remote) for as long as the test wants, and the server is killed there. The next
# server resubmits it; the gate then holds /data/h2's first chunk, which the guest's 512-byte
# O_DIRECT write into h2 must read first (read-modify-write of its 4 KiB block): a write in
# flight, killed the same way, resubmitted by a third server. No moment is waited for.
# lazyblk -v: the server logs the in-flight region and the resubmissions
printf '#!/bin/sh\nexec "%s" -v "$@"\n' "$LAZYBLK" >"$T/lazyblk-v"
chmod +x "$T/lazyblk-v"
msum=$(sha256sum <"$R/data/m" | cut -d' ' -f1)
h1sum=$(sha256sum <"$R/data/h1" | cut -d' ' -f1)
cp "$R/data/h2" "$T/h2.want"
dd if="$R/data/x" of="$T/h2.want" bs=512 count=1 seek=3 conv=notrunc status=none
h2sum=$(sha256sum <"$T/h2.want" | cut -d' ' -f1)
h1chunk=$(first_chunk "$T/img.manifest" /data/h1)
h2chunk=$(first_chunk "$T/img.manifest" /data/h2)
N3=8
initrd "$T/i3" -- /bin/sh -c "echo h1 \$(dd if=/data/h1 bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1); dd if=/data/x of=/data/h2 bs=512 count=1 seek=3 conv=notrunc oflag=direct 2>/dev/null || echo dd-write-failed-h2; for i in \$(seq 1 $N3); do f=/data/d\$((i % 4)); dd if=/data/m of=\$f bs=1M oflag=direct 2>/dev/null || echo dd-write-failed-\$i; echo 3 > /proc/sys/vm/drop_caches; echo copy\$i \$(dd if=\$f bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1); done; echo h2 \$(dd if=/data/h2 bs=1M iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1); sync"
start_nginx "$T/store"
start_proxy "$NGINX_URL" --mode "gate:$h1chunk"
# a held GET must not time out in the server meanwhile (the default is 30 s a try)
SERVE3=("$T/img.layout" --store "$T/cache3" --remote "$PROXY_URL/" --readahead 0
  --fetch-timeout 900 --overlay "$T/ov3")

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

# held_kill SRV: the gate holds a GET of SRV's; the request it serves is in the in-flight
# region: the server is stopped, the region must show it, and the server is killed with -9
held_kill() {
  local n
  kill -STOP "$VU_PID"
  n=$(inflight_count "$IFD" $geom)
  [ "$n" -gt 0 ] || { cat "$T/$1.err" >&2; die "$1: a request is held at the remote, but the in-flight region shows none"; }
  vu_kill9 "$VU_PID"
  echo "killed $1 with -9 while the remote held its GET: $n request(s) in flight"
}
# resubmitted SRV: the restarted server SRV took the region back and re-ran what it holds
resubmitted() {
  wait_for -p "$VU_PID" has "$T/$1.err" "resubmitting" ||
    { cat "$T/$1.err" >&2; die "$1: nothing resubmitted"; }
  grep "resubmitting" "$T/$1.err"
  grep "resuming at used index" "$T/$1.err" || true
  IFD=$(inflight_fd "$QEMU") || die "b3: QEMU dropped its in-flight memfd"
}

LAZYBLK=$T/lazyblk-v vu_serve s5 "${SERVE3[@]}" --vhost-user "$VU_SOCK"
rc=0
qemu_vu b3 "$T/i3" "$VU_SOCK" ",reconnect=1" &
QPID=$!
# the guest's read of /data/h1 waits at the proxy: a request in flight in s5
proxy_wait gate_waiting 1 "$QPID"
QEMU=$(qemu_of "$QPID") || die "b3: no QEMU process under $QPID"
IFD=$(inflight_fd "$QEMU") || die "b3: QEMU holds no lazyblk-inflight memfd: INFLIGHT_SHMFD not negotiated"
geom=$(sed -n 's/.*in-flight tracking: \([0-9]*\) queues of \([0-9]*\) entries.*/\1 \2/p' "$T/s5.err" | tail -1)
[ -n "$geom" ] || { cat "$T/s5.err" >&2; die "s5: no 'in-flight tracking' line"; }
echo "ok: QEMU negotiated INFLIGHT_SHMFD: it holds $(readlink "$IFD") ($geom: queues, entries)"
held_kill s5
# the next gate: h2's block (h1's held GET goes on to a dead client and is dropped)
proxy_mode "gate:$h2chunk"
LAZYBLK=$T/lazyblk-v vu_serve s6 "${SERVE3[@]}" --vhost-user "$VU_SOCK"
resubmitted s6
# the guest got its h1 read and now writes into h2: the write's block read is held
proxy_wait gate_held 2 "$QPID"
proxy_wait gate_waiting 1 "$QPID"
held_kill s6
proxy_mode pass
LAZYBLK=$T/lazyblk-v vu_serve s7 "${SERVE3[@]}" --vhost-user "$VU_SOCK"
srv=s7
resubmitted s7
wait "$QPID" || rc=$?
vu_check_boot b3 "$rc"
[ "$(vu_exit_status b3)" = 0 ] || die "b3: exit status '$(vu_exit_status b3)'"
! grep -q "dd-write-failed" "$T/b3.log" || die "b3: a guest dd failed"
grep -qx "h1 $h1sum" < <(tr -d '\r' <"$T/b3.log") ||
  { tr -d '\r' <"$T/b3.log" | grep "^h1" >&2; die "b3: the resubmitted read of /data/h1 is wrong"; }
grep -qx "h2 $h2sum" < <(tr -d '\r' <"$T/b3.log") ||
  { tr -d '\r' <"$T/b3.log" | grep "^h2" >&2; die "b3: /data/h2 after the resubmitted write is wrong"; }
n=$(tr -d '\r' <"$T/b3.log" | grep -c "^copy[0-9]* $msum$")
[ "$n" -eq "$N3" ] || { tr -d '\r' <"$T/b3.log" | grep "^copy" >&2; die "b3: $n of $N3 O_DIRECT copies checksummed right"; }
echo "ok: killed -9 with a read, then a write, held in flight; resubmitted by the next server: /data/h1 reads right, the 512-byte write into /data/h2 landed, all $N3 O_DIRECT copies (4 MiB, written and read back) right, no I/O errors"
vu_stop "$VU_PID" "$srv"
vu_serve s9 "${SERVE3[@]}" --nbd "unix:$NBD" --vhost-user "$VU_SOCK"
nbdcopy "nbd+unix:///?socket=$NBD" "$T/disk3.raw"
vu_stop "$VU_PID" s9
e2fsck -fn "$T/disk3.raw" >"$T/fsck3" 2>&1 || { cat "$T/fsck3" >&2; die "e2fsck -fn after the in-flight kills"; }
echo "ok: e2fsck -fn clean after the in-flight kills"
