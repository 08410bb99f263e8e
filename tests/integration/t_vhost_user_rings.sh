#!/bin/bash
# lazyblk serve --vhost-user against a hostile master whose guest lays its available ring
# under its used ring (tests/integration/lib/vu_rings.py): the device's own writes keep the
# ring looking non-empty, and a drain used to go on forever, holding the queue, so that the
# master's GET_VRING_BASE (which stops it) was never answered and SIGTERM never ended the
# server. Now the drain ends after VBLK_DRAIN_MAX steps and the stop gets in: the master gets
# its reply, a well-behaved master after it has its request served, the server exits 0.
. "$(dirname "$0")/lib/common.sh"
set -u

mkdir -p "$T/src"
echo hello >"$T/src/hello"
"$LAZYBLK" -q import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" -q mkfs "$T/img.manifest" -o "$T/img.layout" --size 16M --journal 4M >/dev/null
SOCK=$T/vu.sock
"$LAZYBLK" serve "$T/img.layout" --store "$T/store" --vhost-user "$SOCK" \
  >"$T/s.out" 2>"$T/s.err" &
PID=$!
trap 'kill -9 "$PID" 2>/dev/null || true; rm -rf "$T"' EXIT
rc=0
wait_for -p "$PID" test -S "$SOCK" || rc=$?
[ "$rc" -ne 2 ] || { cat "$T/s.err" >&2; die "server exited"; }
[ "$rc" -eq 0 ] || die "no socket $SOCK"

out=$(python3 "$TESTLIB/vu_rings.py" "$SOCK" overlap) || die "overlapping rings: $out"
# the server goes on serving: a plain ring's FLUSH completes with status 0 (VIRTIO_BLK_S_OK)
out=$(python3 "$TESTLIB/vu_rings.py" "$SOCK" plain) || die "plain ring after it: $out"
[ "$out" = "ok 00" ] || die "plain ring: the request was not served: $out"
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
[ "$rc" -eq 0 ] || { cat "$T/s.err" >&2; die "server: exit $rc after SIGTERM"; }
echo "vhost-user rings: ok"
