#!/bin/bash
# The crash-consistency soak, short (docs/reliability.md; `make soak` runs the long one):
# 5 kill/restart cycles over NBD and 5 over vhost-user, each a writer stamping blocks and
# FLUSHing, the server killed with SIGKILL at a random moment and restarted on the same
# overlay: no acknowledged write lost, nothing torn; and as many again with a simulated
# host crash (crashsim.so, blkstamp crash, the server restarted in another boot):
# nothing lost that was acknowledged before a completed FLUSH (or with FUA), nothing torn,
# no block first written since the last FLUSH read as zeros (cycles 1, 3 and 5 crash right
# after such a write, with its state on the disk and not its data: lazyblk before
# OVERLAY.live failed there). Then the check itself is checked: an overlay damaged before
# the restart (bytes overwritten inside stamped blocks; the overlay put back as it was
# before the last cycle, as a server that lost its writes would; blocks never flushed
# marked dirty in OVERLAY.state without their data) fails the soak, naming torn blocks,
# lost flushed writes and blocks read as zeros.
. "$(dirname "$0")/lib/common.sh"
TOOLS=$(dirname "$LAZYBLK")/tools
[ -x "$TOOLS/blkstamp" ] && [ -e "$TOOLS/crashsim.so" ] ||
  skip "blkstamp or crashsim.so not built ($TOOLS): run make"
SOAK=$TESTLIB/../../soak/soak.sh

bash "$SOAK" 5 both --mode both --renew 2
echo "ok: 5 cycles per transport and crash, nothing lost or torn"

rc=0
SOAK_TAMPER=torn bash "$SOAK" 2 nbd --mode kill >"$T/torn.out" 2>"$T/torn.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/torn.err" >&2; die "torn blocks: soak exit $rc, want 1"; }
grep -q "^blkstamp: block [0-9]*: torn (neither a whole write nor the base)" "$T/torn.err" ||
  { cat "$T/torn.err" >&2; die "torn blocks not named"; }
echo "ok: torn blocks fail the soak"

rc=0
SOAK_TAMPER=rollback bash "$SOAK" 2 nbd --mode kill >"$T/rb.out" 2>"$T/rb.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/rb.err" >&2; die "lost writes: soak exit $rc, want 1"; }
grep -q "^blkstamp: block [0-9]*: write [0-9]* lost (flushed; the disk has [0-9]*)" "$T/rb.err" ||
  { cat "$T/rb.err" >&2; die "lost flushed writes not named"; }
echo "ok: lost flushed writes fail the soak"

rc=0
SOAK_TAMPER=zeroed bash "$SOAK" 1 nbd --mode host >"$T/z.out" 2>"$T/z.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/z.err" >&2; die "first writes read as zeros: soak exit $rc, want 1"; }
grep -q "^blkstamp: block [0-9]*: zeros (an unflushed first write" "$T/z.err" ||
  { cat "$T/z.err" >&2; die "blocks read as zeros not named"; }
echo "ok: first writes read as zeros after a host crash fail the soak"
