#!/bin/bash
# linkem (tests/tools/linkem.c, built by make next to the lazyblk binary as
# $(BUILD)/tools/linkem, or $LINKEM): bytes forwarded exactly in both directions through
# the emulated link (several concurrent connections, each half-closing: the echo server
# only sends its trailer after the forwarded end of stream), a small buffer (backpressure,
# ring wrap-around), the byte and connection counts printed on SIGTERM, a client reset,
# an upstream that refuses, bad options (exit 2, one line). No timing assertions.
. "$(dirname "$0")/lib/common.sh"
LINKEM=${LINKEM:-$(dirname "$LAZYBLK")/tools/linkem}
PEERS=$TESTLIB/linkem_peers.py
. "$TESTLIB/../../../scripts/lib/linkem.sh"
[ -x "$LINKEM" ] || skip "linkem not built ($LINKEM): run make"

PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT

# upstream echo server
python3 "$PEERS" server "$T/echo.port" >"$T/echo.log" 2>&1 &
ECHO_PID=$!
PIDS+=("$ECHO_PID")
wait_for -p "$ECHO_PID" test -s "$T/echo.port" || die "echo server did not start"
ECHO_PORT=$(cat "$T/echo.port")

# start_linkem NAME ARGS...: sets LK_PID and LK_PORT (from the readiness line)
start_linkem() {
  local name=$1
  shift
  linkem_start "$T/$name.out" "$T/$name.err" "$@"
  LK_PID=$LINKEM_PID LK_PORT=$LINKEM_PORT
  PIDS+=("$LK_PID")
}

# stop_linkem NAME PID: SIGTERM, exit 0, gone; SUMMARY = its last stdout line
stop_linkem() {
  local name=$1 pid=$2 rc=0
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$T/$name.err" >&2; die "$name: linkem exited $rc on SIGTERM"; }
  ! kill -0 "$pid" 2>/dev/null || die "$name: linkem still running"
  SUMMARY=$(tail -1 "$T/$name.out")
}

# 1. a modest link: 6 connections x 2 MB echoed, 2 ms one-way delay, 200 Mbit/s
N=6 SIZE=2000000
start_linkem main --connect "127.0.0.1:$ECHO_PORT" --rate 200mbit --delay 2ms
MAIN_PID=$LK_PID
python3 "$PEERS" clients "$LK_PORT" "$N" "$SIZE" || die "main: bytes differ"
# one more, alone, after the others (connections come and go)
python3 "$PEERS" clients "$LK_PORT" 1 300000 || die "main: bytes differ (second round)"
echo "ok: $N x $SIZE bytes and 1 x 300000 echoed exactly through 200mbit/2ms"
stop_linkem main "$MAIN_PID"; summary=$SUMMARY
up=$((N * SIZE + 300000)) down=$((N * SIZE + 300000 + (N + 1) * 4))
want="linkem: up $up bytes, down $down bytes, $((N + 1)) connections"
[ "$summary" = "$want" ] || die "main: summary '$summary', want '$want'"
[ ! -s "$T/main.err" ] || die "main: stderr: $(cat "$T/main.err")"
echo "ok: $summary"

# 2. a small buffer (64 KiB: backpressure, wrap-around), no rate limit, no delay
start_linkem small --connect "127.0.0.1:$ECHO_PORT" --buffer 64k
SMALL_PID=$LK_PID
python3 "$PEERS" clients "$LK_PORT" 4 3000000 || die "small: bytes differ"
stop_linkem small "$SMALL_PID"; summary=$SUMMARY
want="linkem: up 12000000 bytes, down 12000016 bytes, 4 connections"
[ "$summary" = "$want" ] || die "small: summary '$summary', want '$want'"
echo "ok: --buffer 64k: $summary"

# 3. a client reset closes the pair (the echo server sees its connection end); linkem
# keeps serving
start_linkem reset --connect "127.0.0.1:$ECHO_PORT" --delay 1ms
RESET_PID=$LK_PID
closed0=$(grep -c '^closed' "$T/echo.log" || true)
python3 "$PEERS" reset "$LK_PORT"
more_closed() { [ "$(grep -c '^closed' "$T/echo.log" || true)" -gt "$closed0" ]; }
wait_for more_closed || true
[ "$(grep -c '^closed' "$T/echo.log" || true)" -gt "$closed0" ] ||
  die "reset: the upstream connection stayed open"
RESET_LINE=$(grep '^closed' "$T/echo.log" | sed -n "$((closed0 + 1))p")
python3 "$PEERS" clients "$LK_PORT" 2 100000 || die "reset: no service after a reset"
stop_linkem reset "$RESET_PID"; summary=$SUMMARY
[[ "$summary" =~ ^linkem:\ up\ [0-9]+\ bytes,\ down\ [0-9]+\ bytes,\ 3\ connections$ ]] ||
  die "reset: summary '$summary'"
echo "ok: a reset closes the pair (upstream: $RESET_LINE); $summary"

# 4. an upstream that refuses: the client's connection is closed, linkem keeps running and
# counts it
DEAD_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_linkem refused --connect "127.0.0.1:$DEAD_PORT"
REF_PID=$LK_PID
python3 "$PEERS" refused "$LK_PORT" >/dev/null || die "refused: first client"
python3 "$PEERS" refused "$LK_PORT" >/dev/null || die "refused: second client"
kill -0 "$REF_PID" 2>/dev/null || die "refused: linkem exited"
stop_linkem refused "$REF_PID"; summary=$SUMMARY
[ "$summary" = "linkem: up 0 bytes, down 0 bytes, 2 connections" ] ||
  die "refused: summary '$summary'"
grep -qx 'linkem: 2 upstream connects failed' "$T/refused.out" || die "refused: no failure count"
[ "$(wc -l <"$T/refused.err")" -eq 2 ] && ! grep -v '^linkem: connect 127' "$T/refused.err" ||
  die "refused: stderr: $(cat "$T/refused.err")"
echo "ok: refused upstream: $(head -1 "$T/refused.err"); $summary"

# 5. bad options: exit 2, one line "linkem: ..." on stderr
bad() {
  local rc=0 lines
  "$LINKEM" "$@" >"$T/bad.out" 2>"$T/bad.err" </dev/null || rc=$?
  [ "$rc" -eq 2 ] || die "bad '$*': exit $rc, want 2"
  lines=$(wc -l <"$T/bad.err")
  [ "$lines" -eq 1 ] || die "bad '$*': $lines stderr lines: $(cat "$T/bad.err")"
  grep -q '^linkem: ' "$T/bad.err" || die "bad '$*': $(cat "$T/bad.err")"
  [ ! -s "$T/bad.out" ] || die "bad '$*': stdout: $(cat "$T/bad.out")"
  echo "ok: $* -> $(cat "$T/bad.err")"
}
C="--connect 127.0.0.1:$ECHO_PORT"
L="--listen 127.0.0.1:0"
bad
bad $L
bad $C
bad $L $C --rate fast
bad $L $C --rate -5mbit
bad $L $C --rate 25mbits
bad $L $C --delay 10
bad $L $C --delay 10parsecs
bad $L $C --buffer 12
bad $L $C --buffer 4X
bad $L $C --rate
bad $L $C --bogus
bad $L $C extra
bad --listen 127.0.0.1 $C
bad --listen 127.0.0.1:99999 $C
bad $L --connect 127.0.0.1:0
bad $L --connect no-such-host.invalid:80
grep -q -- '--rate' <<<"$("$LINKEM" --help)" || die "--help"
echo "ok: --help"

kill -0 "$ECHO_PID" 2>/dev/null || die "echo server died"
echo "t_linkem: all ok"
