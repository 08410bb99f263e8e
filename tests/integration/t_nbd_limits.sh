#!/bin/bash
# The NBD server against clients that hold on: silent clients filling every slot, a
# slow-loris handshake, a client idle after the handshake, clients past --max-connections,
# and SIGTERM with all of them connected (lib/nbdhostile.py). The server cuts them at the
# handshake deadline or the idle limit and goes on serving well-behaved clients; nothing
# here asserts timing beyond "eventually, within a generous timeout".
. "$(dirname "$0")/lib/common.sh"
for tool in nbdinfo python3; do
  command -v "$tool" >/dev/null || skip "t_nbd_limits: $tool not installed"
done
. "$TESTLIB/serve.sh"
H=$TESTLIB/nbdhostile.py

# ---- usage
expect_error "max-connections 0" "bad --max-connections '0' (1 to 1024)" -- \
  "$LAZYBLK" serve --raw "$T/x" --nbd unix:"$T/x.sock" --max-connections 0
expect_error "handshake-timeout" "bad --handshake-timeout 'soon' (1 to 3600 seconds)" -- \
  "$LAZYBLK" serve --raw "$T/x" --nbd unix:"$T/x.sock" --handshake-timeout soon
expect_error "idle-timeout" "bad --idle-timeout '-1' (0 to 86400 seconds)" -- \
  "$LAZYBLK" serve --raw "$T/x" --nbd unix:"$T/x.sock" --idle-timeout -1

truncate -s 64M "$T/disk.raw"
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"

# waitfor FILE TEXT: until FILE holds TEXT (the common deadline, 120 s)
waitfor() { wait_for has "$1" "$2" || die "no '$2' in $1: $(cat "$1")"; }
# served: a well-behaved client gets the disk's size
served() { nbdinfo --size "$URI" >/dev/null 2>&1; }

# ---- deadlines: 5 s for the handshake, 5 s idle (2 s was too close to what a loaded machine
# can take between two requests of the well-behaved clients below, one every 0.5 s)
start_server lim "$URI" --raw "$T/disk.raw" --nbd "unix:$SOCK" --handshake-timeout 5 \
  --idle-timeout 5 -v
# 20 silent clients: 16 take every slot, 4 are refused; a well-behaved client gets in
# once the deadline freed the slots
python3 "$H" silent "$SOCK" 20 >"$T/silent.out" 2>&1 &
silent=$!
waitfor "$T/silent.out" connected
wait_for served || die "no well-behaved client served while silent clients held the slots"
wait "$silent" || die "silent clients: $(cat "$T/silent.out")"
grep -q "handshake not done after 5 s, disconnecting" "$T/lim.err" ||
  die "no log line for the handshake deadline: $(cat "$T/lim.err")"
grep -q "refusing new ones until one leaves" "$T/lim.err" ||
  die "no log line for the connection limit: $(cat "$T/lim.err")"
# a slow-loris: one byte a second is cut at the deadline too
python3 "$H" loris "$SOCK" >"$T/loris.out" 2>&1 || die "slow-loris: $(cat "$T/loris.out")"
# idle after the handshake: disconnected; a client with requests every 0.5 s is not
python3 "$H" idle "$SOCK" >"$T/idle.out" 2>&1 || die "idle: $(cat "$T/idle.out")"
grep -q "idle for 5 s, disconnecting" "$T/lim.err" || die "no log line for the idle client"
python3 "$H" trickle "$SOCK" >"$T/trickle.out" 2>&1 || die "trickle: $(cat "$T/trickle.out")"
python3 "$H" busy "$SOCK" 8 >"$T/busy.out" 2>&1 || die "busy client cut: $(cat "$T/busy.out")"
nbdinfo --size "$URI" >/dev/null || die "not serving after the hostile clients"
stop_server "$SRV" lim

# ---- --max-connections 2: the third is closed at once; when one leaves, a new one gets in
start_server max "$URI" --raw "$T/disk.raw" --nbd "unix:$SOCK" --max-connections 2
python3 "$H" idle "$SOCK" >"$T/i1.out" 2>&1 &
i1=$!
python3 "$H" idle "$SOCK" >"$T/i2.out" 2>&1 &
i2=$!
waitfor "$T/i1.out" connected
waitfor "$T/i2.out" connected
python3 "$H" refused "$SOCK" >"$T/ref.out" 2>&1 || die "over the limit: $(cat "$T/ref.out")"
kill "$i1"; wait "$i1" 2>/dev/null || true
wait_for served || die "no client served after a slot was freed"
stop_server "$SRV" max
wait "$i2" || die "idle client: $(cat "$T/i2.out")"

# ---- SIGTERM with every kind of hostile client connected: the server still exits
start_server term "$URI" --raw "$T/disk.raw" --nbd "unix:$SOCK" --max-connections 8
python3 "$H" hold "$SOCK" >"$T/hold.out" 2>&1 &
hold=$!
waitfor "$T/hold.out" connected
python3 "$H" loris "$SOCK" >"$T/loris2.out" 2>&1 &
loris=$!
waitfor "$T/loris2.out" connected
kill -TERM "$SRV"
gone() { ! kill -0 "$SRV" 2>/dev/null; }
wait_for gone || die "still running ${LAZYBLK_TEST_WAIT:-120} s after SIGTERM with hostile clients"
rc=0; wait "$SRV" || rc=$?
[ "$rc" -eq 0 ] || die "exit $rc after SIGTERM: $(cat "$T/term.err")"
kill "$hold" "$loris" 2>/dev/null || true
echo "nbd limits: deadlines, idle limit and connection limit hold; SIGTERM always stops"
