# Sourced: linkem_start OUT ERR ARGS... runs $LINKEM (tests/tools/linkem) with
# `--listen 127.0.0.1:0 ARGS...`, its stdout in OUT and stderr in ERR, and returns once it
# printed its readiness line: LINKEM_PID and LINKEM_PORT (the port it listens on) are set.
# On failure it calls the caller's die() with linkem's stderr. Used by the linkem test and
# the benches (bench/linkem.sh, bench/lib/coldlib.sh).
linkem_start() {
  local out=$1 err=$2
  shift 2
  : >"$out"
  "${LINKEM:?LINKEM must name the linkem binary}" --listen 127.0.0.1:0 "$@" >"$out" 2>"$err" &
  LINKEM_PID=$!
  LINKEM_PORT=""
  local end=$((SECONDS + 120)) # a generous deadline for a state: a loaded machine is slow
  while [ "$SECONDS" -lt "$end" ]; do
    LINKEM_PORT=$(sed -n 's/^linkem: listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$out")
    [ -n "$LINKEM_PORT" ] && return 0
    kill -0 "$LINKEM_PID" 2>/dev/null || die "linkem exited at start: $(cat "$err")"
    sleep 0.025
  done
  die "linkem printed no 'linkem: listening on 127.0.0.1:PORT' line: $(cat "$out" "$err")"
}
