#!/bin/bash
# The host kernel mounts a served disk read-write through nbdfuse + a loop device, writes a
# 5 MB file, deletes a directory and chown -Rs another; after sync (and fsfreeze, so the
# journal is checkpointed), the server is killed with SIGKILL and restarted on the same
# overlay: e2fsck -fn of the served disk is clean and every change is there. The overlay
# holds about what was written (no whole-file copy-up).
. "$(dirname "$0")/lib/common.sh"
for t in nbdfuse nbdcopy fusermount3 fsfreeze; do
  command -v $t >/dev/null || skip "$t is not installed"
done
[ -e /dev/fuse ] || skip "no /dev/fuse"
[ -e /dev/loop-control ] || skip "no loop device support"

mkdir -p "$T/src"
cp -a /usr/lib/python3.11/email /usr/lib/python3.11/json /usr/lib/python3.11/logging "$T/src/"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" >/dev/null
SOCK=$T/nbd.sock
SRV=""
FUSE=""
cleanup() {
  mountpoint -q "$T/mnt" 2>/dev/null && { fsfreeze -u "$T/mnt" 2>/dev/null; umount -l "$T/mnt"; }
  [ -n "$FUSE" ] && { fusermount3 -u "$T/fuse" 2>/dev/null || true; kill "$FUSE" 2>/dev/null || true; }
  [ -n "$SRV" ] && kill -9 "$SRV" 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
start_server() {
  rm -f "$SOCK"
  "$LAZYBLK" serve "$T/img.layout" --store "$T/store" --overlay "$T/overlay" \
    --nbd "unix:$SOCK" 2>>"$T/serve.log" &
  SRV=$!
  wait_for -p "$SRV" test -S "$SOCK" || die "server did not start: $(cat "$T/serve.log")"
}
start_server
mkdir -p "$T/fuse" "$T/mnt"
nbdfuse "$T/fuse/disk" --unix "$SOCK" &
FUSE=$!
wait_for -p "$FUSE" test -e "$T/fuse/disk" || die "nbdfuse did not mount"
mount -o loop "$T/fuse/disk" "$T/mnt"
head -c 5000000 /dev/urandom >"$T/five.bin"
cp "$T/five.bin" "$T/mnt/five.bin"
rm -r "$T/mnt/json"
chown -R 4321:8765 "$T/mnt/logging"
sync
fsfreeze -f "$T/mnt"
written=$(stat -c %b "$T/overlay")
kill -9 "$SRV"; wait "$SRV" 2>/dev/null || true; SRV=""
echo "server killed with SIGKILL; restarting on the same overlay"
start_server
nbdcopy "nbd+unix:///?socket=$SOCK" "$T/after.raw"
rc=0; e2fsck -fn "$T/after.raw" >"$T/fsck.out" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$T/fsck.out" >&2; die "e2fsck -fn after restart: exit $rc"; }
mkdir -p "$T/check"
mount -o loop,ro "$T/after.raw" "$T/check"
ok=1
cmp -s "$T/five.bin" "$T/check/five.bin" || { echo "5 MB file differs or is missing" >&2; ok=0; }
[ ! -e "$T/check/json" ] || { echo "deleted directory is back" >&2; ok=0; }
bad=$(find "$T/check/logging" \( ! -uid 4321 -o ! -gid 8765 \) | head -3)
[ -z "$bad" ] || { echo "chown -R lost: $bad" >&2; ok=0; }
[ -e "$T/check/email/__init__.py" ] || { echo "untouched data missing" >&2; ok=0; }
umount "$T/check"
[ $ok = 1 ] || die "changes lost across kill -9"
# the overlay holds about the bytes written (5 MB + metadata), not whole copied-up files
alloc=$(( $(stat -c %b "$T/overlay") * 512 ))
echo "overlay allocated: $alloc bytes for a 5,000,000-byte file plus metadata ($written blocks of 512 before the kill)"
[ "$alloc" -lt $((5000000 + 8 * 1024 * 1024)) ] || die "overlay grew to $alloc bytes"
echo "nbd + fuse + kill -9: all good"
