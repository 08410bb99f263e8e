#!/bin/bash
# serve under a supervisor: --pidfile (the pid once serving, locked against a second
# server, removed at exit), sd_notify (READY=1 and STOPPING=1 on $NOTIFY_SOCKET, a path or
# an abstract @name), --exit-with-parent (the parent killed: serve stops), and --run CMD
# (nbdkit's captive mode: $uri and friends, serve stops when CMD exits, with its status).
. "$(dirname "$0")/lib/common.sh"
for tool in nbdinfo python3; do
  command -v "$tool" >/dev/null || skip "t_serve_daemon: $tool is not installed"
done
. "$TESTLIB/serve.sh"

mkdir -p "$T/src"
head -c 300000 /dev/urandom >"$T/src/a.bin"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/m" >/dev/null
"$LAZYBLK" mkfs "$T/m" -o "$T/l" --size 128M >/dev/null
head -c 1M /dev/zero >"$T/raw"
SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"

# wait_for COND... (common.sh): until COND holds, within the common deadline (120 s)
alive() { kill -0 "$1" 2>/dev/null; }
dead() { ! kill -0 "$1" 2>/dev/null; }

# ---- --pidfile: this server's pid once it serves; a second server of it is refused; gone
# after SIGTERM
start_server pf "$NBD" "$T/l" --store "$T/store" --nbd "unix:$SOCK" --pidfile "$T/pid"
[ "$(cat "$T/pid")" = "$SRV" ] || die "pid file holds '$(cat "$T/pid")', want $SRV"
expect_error "pid file held" "--pidfile $T/pid: held by process $SRV" -- \
  "$LAZYBLK" serve --raw "$T/raw" --nbd "unix:$T/other.sock" --pidfile "$T/pid"
[ "$(cat "$T/pid")" = "$SRV" ] || die "the refused server touched the pid file"
stop_server "$SRV" pf
[ ! -e "$T/pid" ] || die "the pid file is left after SIGTERM"
echo "pidfile ok"

# ---- what another local user may have put at the pid file's or --stats-json's path (issue
# 24 follow-up, item 5): a link is not written through (on 18dca29 ftruncate emptied its
# target and the pid went there; --stats-json's fopen("w") overwrote it), a FIFO is refused,
# and at exit only the file this server made is removed. (--run true: serve exits at once.)
printf precious >"$T/victim"
ln -s "$T/victim" "$T/pid.link"
expect_error "pid file: a link" "--pidfile $T/pid.link: a symbolic link (not followed)" -- \
  "$LAZYBLK" serve --raw "$T/raw" --pidfile "$T/pid.link" --run true
[ "$(cat "$T/victim")" = precious ] || die "the pid file's link target was written"
mkfifo "$T/pid.fifo"
expect_error "pid file: a FIFO" "--pidfile $T/pid.fifo: not a regular file" -- \
  timeout -k 10 60 "$LAZYBLK" serve --raw "$T/raw" --pidfile "$T/pid.fifo" --run true
ln -s "$T/victim" "$T/stats.link"
( umask 002; "$LAZYBLK" serve --raw "$T/raw" --stats-json "$T/stats.link" --run true ) \
  >/dev/null 2>"$T/err" || die "serve --stats-json over a link: $(cat "$T/err")"
[ "$(cat "$T/victim")" = precious ] || die "--stats-json wrote through a link: $(cat "$T/victim")"
[ -f "$T/stats.link" ] && [ ! -L "$T/stats.link" ] || die "--stats-json: the link not replaced"
python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$T/stats.link" ||
  die "--stats-json: not JSON: $(cat "$T/stats.link")"
[ "$(stat -c %a "$T/stats.link")" = 644 ] ||
  die "--stats-json under umask 002: mode $(stat -c %a "$T/stats.link"), want 644 (FS_DATA_MODE)"
mkfifo "$T/stats.fifo"
expect_error "--stats-json: a FIFO" "--stats-json $T/stats.fifo: not a regular file" -- \
  timeout -k 10 60 "$LAZYBLK" serve --raw "$T/raw" --stats-json "$T/stats.fifo" --run true
[ -p "$T/stats.fifo" ] || die "--stats-json replaced a FIFO"
# the pid file replaced while the server runs: the new file stays at exit
start_server pf2 "$NBD" "$T/l" --store "$T/store" --nbd "unix:$SOCK" --pidfile "$T/pid"
printf 'not yours\n' >"$T/pid.new" && mv "$T/pid.new" "$T/pid"
stop_server "$SRV" pf2
[ "$(cat "$T/pid" 2>/dev/null)" = "not yours" ] || die "serve removed a pid file it did not make"
rm -f "$T/pid"
echo "pidfile and stats-json paths ok"

# ---- NOTIFY_SOCKET: READY=1 (with a STATUS) once serving, STOPPING=1 at SIGTERM; a path
# and an abstract name
notify_recv() {  # ADDR OUT: receive two datagrams on ADDR (a path, or @name) into OUT
  python3 - "$1" "$2" <<'EOF' &
import socket, sys
addr, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + addr[1:] if addr.startswith("@") else addr)
open(out + ".bound", "w").close()
s.settimeout(60)
with open(out, "w") as f:
    for _ in range(2):
        f.write(s.recv(4096).decode() + "\n--\n")
        f.flush()
EOF
  RECV=$!
  wait_for test -e "$2.bound" || die "the notify receiver did not start"
}
for addr in "$T/notify" "@lazyblk-t-$$-$RANDOM"; do
  notify_recv "$addr" "$T/n.txt"
  NOTIFY_SOCKET=$addr start_server nt "$NBD" --raw "$T/raw" --nbd "unix:$SOCK"
  wait_for grep -q '^READY=1$' "$T/n.txt" || die "$addr: no READY=1: $(cat "$T/n.txt")"
  grep -q '^STATUS=serving ' "$T/n.txt" || die "$addr: no STATUS: $(cat "$T/n.txt")"
  grep -q 'STOPPING' "$T/n.txt" && die "$addr: STOPPING=1 before the stop"
  stop_server "$SRV" nt
  wait "$RECV" || die "$addr: the receiver failed"
  grep -q '^STOPPING=1$' "$T/n.txt" || die "$addr: no STOPPING=1: $(cat "$T/n.txt")"
  rm -f "$T/n.txt" "$T/n.txt.bound"
  echo "notify $addr ok"
done

# ---- --exit-with-parent: serve started by a shell that is then killed stops by itself
bash -c "'$LAZYBLK' serve --raw '$T/raw' --nbd 'unix:$SOCK' --exit-with-parent \
  >'$T/ewp.out' 2>'$T/ewp.err' & echo \$! >'$T/ewp.pid'; wait" &
parent=$!
wait_for test -s "$T/ewp.pid" || die "no pid from the parent shell"
child=$(cat "$T/ewp.pid")
SERVERS+=("$child")
wait_for grep -q '^serving ' "$T/ewp.out" || die "--exit-with-parent: not serving"
alive "$child" || die "--exit-with-parent: serve died early"
kill -9 "$parent"
wait "$parent" 2>/dev/null || true
wait_for dead "$child" || die "--exit-with-parent: serve outlived its parent"
grep -q "^requests " "$T/ewp.out" || die "--exit-with-parent: no orderly stop (statistics)"
echo "exit-with-parent ok"

# ---- --run: the command gets the URI, serve exits with its status; without --nbd a private
# socket (removed at exit)
out=$("$LAZYBLK" serve "$T/l" --store "$T/store" --run 'nbdinfo --size "$uri"') ||
  die "--run nbdinfo: exit $?"
grep -qx "$((128 << 20))" <<<"$out" || die "--run nbdinfo: no size printed: $out"
uri=$(sed -n 's/^serving .* at \(nbd+unix:[^ ]*\)$/\1/p' <<<"$out")
sock=${uri#*socket=}
[ -n "$sock" ] && [ ! -e "$sock" ] && [ ! -e "$(dirname "$sock")" ] ||
  die "--run: the private socket or its directory is left: $uri"
expect_rc 3 "$LAZYBLK" serve --raw "$T/raw" --run 'exit 3'
expect_rc 0 "$LAZYBLK" serve --raw "$T/raw" --nbd tcp:0 --export-name 'x y' \
  --run 'test "$uri" = "nbd://127.0.0.1:$port/x%20y" && test "$nbd" = "$uri" &&
         test "$exportname" = "x y" && test -z "${unixsocket-}" && nbdinfo --size "$uri"'
expect_rc 0 "$LAZYBLK" serve --raw "$T/raw" --nbd "unix:$SOCK" \
  --run 'test "$unixsocket" = "'"$SOCK"'" && test -z "${port-}" && nbdinfo --size "$uri"'
# a command killed by a signal: 128 + the signal, as a shell says it
expect_rc 143 "$LAZYBLK" serve --raw "$T/raw" --run 'kill -TERM $$'
# serve stopped while the command runs: the command is stopped too, and its status returned
"$LAZYBLK" serve --raw "$T/raw" --run 'echo $$ >"'"$T"'/cmd.pid"; exec sleep 60' \
  >"$T/rs.out" 2>&1 &
SRV=$!
SERVERS+=("$SRV")
wait_for test -s "$T/cmd.pid" || die "--run: the command did not start"
kill -TERM "$SRV"
rc=0
wait "$SRV" || rc=$?
[ "$rc" -eq 143 ] || die "--run: serve stopped by SIGTERM exits $rc, want 143 (the command's)"
dead "$(cat "$T/cmd.pid")" || die "--run: the command outlived serve"
expect_error "--run with vhost-user only" "--run needs an NBD export" -- \
  "$LAZYBLK" serve --raw "$T/raw" --vhost-user "$T/vu.sock" --run true
expect_rc 2 "$LAZYBLK" serve --raw "$T/raw" --vhost-user "$T/vu.sock" --run true
echo "run ok"
echo "PASS"
