#!/bin/bash
# lazyblk serve --vhost-user against a hostile front-end (tests/integration/lib/vu_front.py),
# no guest needed:
#  - guest memory in a memfd not sealed against shrinking is refused with one log line (the
#    front-end then truncates it and starts a queue: a server that had mapped it would die of
#    SIGBUS), and the server goes on serving the next front-end; sealed memory is accepted,
#    cannot be truncated, and serves a request;
#  - a front-end that fills the socket with requests and never reads the replies does not keep
#    SIGTERM from stopping the server, and is dropped (one log line) after 5 s of not reading;
#  - a call eventfd whose counter is full does not block the queue (nor, so, the stop).
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/kernel.sh"   # vu_serve, vu_stop (no kernel needed here)

FRONT=$TESTLIB/vu_front.py
python3 -c 'import os, socket; os.eventfd, os.memfd_create, socket.send_fds' 2>/dev/null ||
  skip "python3 3.10 or later needed (os.eventfd, os.memfd_create, socket.send_fds)"
truncate -s 4M "$T/disk.raw"
VU_SOCK=$T/vu.sock

# ---- guest memory that can shrink: refused, the server survives ------------------------------
vu_serve s1 --raw "$T/disk.raw" --vhost-user "$VU_SOCK"
python3 "$FRONT" unsealed "$VU_SOCK" || { cat "$T/s1.err" >&2; die "unsealed memfd"; }
kill -0 "$VU_PID" 2>/dev/null || { cat "$T/s1.err" >&2; die "the server died (SIGBUS?)"; }
n=$(grep -c "SET_MEM_TABLE refused: memory region 0: its file is not sealed against shrinking (F_SEAL_SHRINK; QEMU: memory-backend-memfd with seal=on)" "$T/s1.err" || true)
[ "$n" = 1 ] || { cat "$T/s1.err" >&2; die "unsealed memfd: $n log lines, want 1"; }
echo "ok: unsealed guest memory refused: $(grep -o 'SET_MEM_TABLE refused.*' "$T/s1.err")"
# the next front-end, with sealed memory: accepted, not truncatable, served
out=$(python3 "$FRONT" sealed "$VU_SOCK") || { cat "$T/s1.err" >&2; die "sealed memfd"; }
[ "$out" = "serial ${out#serial }" ] && [ -n "${out#serial }" ] || die "sealed: output '$out'"
echo "ok: sealed guest memory accepted, ftruncate fails with EPERM, a request served ($out)"
vu_stop "$VU_PID" s1

# ---- a front-end that never reads its replies: SIGTERM still stops the server ---------------
vu_serve s2 --raw "$T/disk.raw" --vhost-user "$VU_SOCK"
python3 "$FRONT" noread "$VU_SOCK" >"$T/noread.out" 2>"$T/noread.err" &
FRONT_PID=$!
VU_PIDS+=("$FRONT_PID")
rc=0
wait_for -p "$FRONT_PID" has "$T/noread.out" full || rc=$?
[ "$rc" -ne 2 ] || { cat "$T/noread.err" >&2; die "noread: front-end exited"; }
[ "$rc" -eq 0 ] || die "noread: the socket did not fill up"
kill -TERM "$VU_PID"
gone() { ! kill -0 "$1" 2>/dev/null; }
wait_for gone "$VU_PID" || { cat "$T/s2.err" >&2; die "the server ignored SIGTERM for ${LAZYBLK_TEST_WAIT:-120} s (stuck in a reply)"; }
rc=0
wait "$VU_PID" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/s2.err" >&2; die "s2: exit $rc after SIGTERM"; }
kill "$FRONT_PID" 2>/dev/null || true
wait "$FRONT_PID" 2>/dev/null || true
echo "ok: a front-end that never reads its replies does not keep SIGTERM from stopping the server"

# ---- and one that stops reading for longer than the reply timeout is dropped ----------------
vu_serve s3 --raw "$T/disk.raw" --vhost-user "$VU_SOCK"
python3 "$FRONT" noread "$VU_SOCK" >"$T/noread3.out" 2>"$T/noread3.err" &
FRONT_PID=$!
VU_PIDS+=("$FRONT_PID")
wait_for has "$T/s3.err" "the master has not read its replies" || true
n=$(grep -c "vhost-user: GET_FEATURES: the master has not read its replies for 5 s; dropping the connection" "$T/s3.err" || true)
[ "$n" = 1 ] || { cat "$T/s3.err" >&2; die "noread: $n log lines for the dropped front-end, want 1"; }
kill "$FRONT_PID" 2>/dev/null || true
wait "$FRONT_PID" 2>/dev/null || true
python3 "$FRONT" sealed "$VU_SOCK" >/dev/null || { cat "$T/s3.err" >&2; die "s3: not serving after the drop"; }
echo "ok: it is dropped with one log line after 5 s, and the next front-end is served"
vu_stop "$VU_PID" s3

# ---- a call eventfd that cannot take another notification: the queue does not block on it --
vu_serve s4 --raw "$T/disk.raw" --vhost-user "$VU_SOCK"
python3 "$FRONT" fullcall "$VU_SOCK" >"$T/fullcall.out" 2>"$T/fullcall.err" &
FRONT_PID=$!
VU_PIDS+=("$FRONT_PID")
# the second request is completed only by a queue thread past the first one's notification
rc=0
wait_for -p "$FRONT_PID" has "$T/fullcall.out" "completed 2" || rc=$?
[ "$rc" -ne 2 ] || { cat "$T/fullcall.err" "$T/s4.err" >&2; die "fullcall: front-end exited"; }
[ "$rc" -eq 0 ] || die "fullcall: the queue blocked on the full call eventfd (no second completion)"
kill -TERM "$VU_PID"
wait_for gone "$VU_PID" || { cat "$T/s4.err" >&2; die "the server ignored SIGTERM for ${LAZYBLK_TEST_WAIT:-120} s (its queue blocked on a full call eventfd)"; }
rc=0
wait "$VU_PID" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/s4.err" >&2; die "s4: exit $rc after SIGTERM"; }
kill "$FRONT_PID" 2>/dev/null || true
wait "$FRONT_PID" 2>/dev/null || true
echo "ok: a full call eventfd does not block the queue; SIGTERM stops the server"
