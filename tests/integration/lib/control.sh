# Sourced after common.sh by the tests that talk to a control socket (serve --control,
# run --control) and watch the counting test guest (testguest.mode=count):
#
#   ctl SOCK BYTES          send BYTES (a literal \0 becomes a NUL byte) to the socket, end
#                           the connection, print every reply (a server that hangs up on
#                           unread bytes is fine)
#   ctl_req SOCK REQUEST    one request (a newline added), its answer (with socat, if
#                           installed and REQUEST has no \0)
#   counts LOG              the "guest: count N" values printed so far, one a line; whole
#                           lines only (the guest ends each with \r\n, and a running VM may be
#                           in the middle of the last one)
#   last_count LOG          the last of them
#   wait_count LOG N PID    until the guest printed count N (the VM PID must stay alive)
#   consecutive LOG [WHAT]  the counts are 1, 2, 3, ... without a gap or a repeat (WHAT names
#                           the run in the failure)

ctl() {
  python3 - "$@" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].replace("\\0", "\0").encode("latin-1"))
s.shutdown(socket.SHUT_WR)
out = b""
while True:
    try:
        got = s.recv(65536)
    except ConnectionResetError:  # the server hung up on unread bytes
        break
    if not got:
        break
    out += got
sys.stdout.write(out.decode("latin-1"))
PY
}
# (socat where there is one: in the nested VM of nested.sh a python3 start takes seconds,
# while the guest goes on)
ctl_req() {
  if command -v socat >/dev/null && [[ $2 != *'\0'* ]]; then
    printf '%s\n' "$2" | socat -t 600 - "UNIX-CONNECT:$1"
  else
    ctl "$1" "$2"$'\n'
  fi
}

counts() { sed -n 's/^guest: count \([0-9][0-9]*\)\r$/\1/p' "$1"; }
last_count() { counts "$1" | tail -n 1; }
_count_ge() { [ "$(last_count "$1")" -ge "$2" ] 2>/dev/null; }
wait_count() {
  local rc=0
  wait_for_state -p "$3" _count_ge "$1" "$2" && return 0 || rc=$?
  [ "$rc" -ne 2 ] || { tail -n 20 "$1" "$1.err" >&2; die "the VM ended"; }
  tail -n 5 "$1" >&2
  die "the guest did not reach count $2 (at $(last_count "$1"))"
}
consecutive() {
  counts "$1" | awk 'NR != $1 { print "count line " NR " is " $1; bad = 1; exit } END { exit bad }' ||
    die "${2:+$2: }the counts are not 1, 2, 3, ..."
}
