# Sourced after common.sh by tests that run `lazyblk serve`: every server a test starts is
# killed when it exits (this replaces common.sh's trap; $T is still removed).
SERVERS=()
serve_cleanup() {
  local p
  for p in "${SERVERS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap serve_cleanup EXIT

# start_server NAME URI ARGS...: lazyblk serve ARGS in the background (output in
# $T/NAME.out/.err, pid in SRV); returns once it said "serving ... over NBD" (checked: URI
# answers at once).
start_server() {
  local name=$1 uri=$2; shift 2
  # emptied here, not only by the redirection in the child: a server of the same NAME
  # before it left its "serving" line there, which the wait below could otherwise read
  # before the child has truncated the file
  : >"$T/$name.out"
  : >"$T/$name.err"
  "$LAZYBLK" serve "$@" >"$T/$name.out" 2>"$T/$name.err" &
  SRV=$!
  SERVERS+=("$SRV")
  local rc=0
  wait_for_state -p "$SRV" grep -q "^serving .* over NBD on " "$T/$name.out" 2>/dev/null || rc=$?
  [ "$rc" -ne 2 ] || { cat "$T/$name.err" >&2; die "$name: server exited"; }
  [ "$rc" -eq 0 ] || die "$name: no 'serving ... over NBD' line"
  # that line is the readiness signal: the very first connection after it is served
  local why
  why=$(nbdinfo --size "$uri" 2>&1 >/dev/null) || {
    cat "$T/$name.err" >&2
    die "$name: said it was serving, but $uri does not answer: $why"
  }
}

# stop_server PID NAME: SIGTERM, exit status 0, statistics printed.
stop_server() {
  local pid=$1 name=$2 rc=0
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$T/$name.err" >&2; die "$name: exit $rc after SIGTERM"; }
  grep -q "^requests " "$T/$name.out" || die "$name: no statistics at exit"
}
