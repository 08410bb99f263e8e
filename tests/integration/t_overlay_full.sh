#!/bin/bash
# The overlay's filesystem full (issue 14, item 9): on a 2 MiB tmpfs, writes through NBD
# fail with ENOSPC and the connection stays usable (a raw client: a read and a write after
# the failure are answered; qemu-io: the error it prints); the server says so once, not
# once a write, and counts the failed writes in its statistics; once space is freed, a write
# succeeds and the server says that once too.
. "$(dirname "$0")/lib/common.sh"

[ "$(id -u)" = 0 ] || skip "t_overlay_full: needs root (mounts a tmpfs)"
for tool in nbdinfo qemu-io python3; do
  command -v "$tool" >/dev/null || skip "t_overlay_full: $tool not installed"
done
. "$TESTLIB/serve.sh"
mkdir -p "$T/full"
mount -t tmpfs -o size=2M lazyblk-test "$T/full" || skip "t_overlay_full: cannot mount a tmpfs"
full_cleanup() {
  local p
  for p in "${SERVERS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null
  umount "$T/full" 2>/dev/null || umount -l "$T/full"
  rm -rf "$T"
}
trap full_cleanup EXIT

mkdir -p "$T/src"
echo hello >"$T/src/hello"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null

# half of the tmpfs taken by another file, the overlay in the other half
head -c 1M /dev/zero >"$T/full/ballast"
sock="$T/nbd.sock"
uri="nbd+unix:///?socket=$sock"
start_server full "$uri" "$T/img.layout" --store "$T/store" --overlay "$T/full/ov" \
  --nbd "unix:$sock" --control "$T/ctl.sock" --stats-json "$T/stats.json"
ctl() {
  python3 - "$T/ctl.sock" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
}
stat_of() {  # KEY: the control socket's statistic KEY
  ctl stats | python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
full_line="overlay $T/full/ov: No space left on device; writes fail until space is freed"
back_line="overlay $T/full/ov: writes succeed again after"

# a raw client fills the disk: ENOSPC, the connection kept (fill checks a read and a
# write on it after the failure)
python3 "$TESTLIB/nbdc.py" fill "$sock" 0 64 >"$T/fill.out" || die "fill: $(cat "$T/fill.out")"
cat "$T/fill.out"
# a real client: qemu-io sees ENOSPC for writes that need room, one after the other
for i in 1 2 3; do
  rc=0
  qemu-io -f raw -c "write -P 0x55 $((32 + i * 4))M 2M" "$uri" >"$T/qio.out" 2>&1 || rc=$?
  grep -q "No space left on device" "$T/qio.out" ||
    die "qemu-io write $i on a full overlay (exit $rc): $(cat "$T/qio.out")"
done
failed=$(stat_of write_errors)
[ "$failed" -ge 5 ] || die "write_errors $failed after 5 failed writes"
[ "$(stat_of read_errors)" = 0 ] || die "read_errors $(stat_of read_errors), want 0"
n=$(grep -cF -- "$full_line" "$T/full.err" || true)
[ "$n" = 1 ] || die "the overlay-full line $n times, want once: $(cat "$T/full.err")"
grep -qF -- "$back_line" "$T/full.err" && die "writes said to succeed again: $(cat "$T/full.err")"
echo "ok: $failed writes failed with ENOSPC, said once: $(grep -F -- "$full_line" "$T/full.err")"

# space freed: a write that needs room succeeds, and the server says so once
rm "$T/full/ballast"
qemu-io -f raw -c "write -P 0x66 96M 256k" -c "read -P 0x66 96M 256k" "$uri" >"$T/qio.out" 2>&1 ||
  die "qemu-io after freeing space: $(cat "$T/qio.out")"
qemu-io -f raw -c "write -P 0x67 100M 256k" "$uri" >/dev/null 2>&1 || die "a second write failed"
[ "$(stat_of write_errors)" = "$failed" ] || die "write_errors $(stat_of write_errors), want $failed"
stop_server "$SRV" full
n=$(grep -cF -- "$back_line $failed failed" "$T/full.err" || true)
[ "$n" = 1 ] || die "the succeed-again line $n times, want once: $(cat "$T/full.err")"
n=$(grep -cF -- "$full_line" "$T/full.err" || true)
[ "$n" = 1 ] || die "the overlay-full line $n times, want once: $(cat "$T/full.err")"
python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
assert s["write_errors"] == int(sys.argv[2]) and s["read_errors"] == 0, s' \
  "$T/stats.json" "$failed" || die "stats.json: $(cat "$T/stats.json")"
grep -q "^requests .*; failed: 0 reads, $failed writes$" "$T/full.out" ||
  die "no failed writes in the summary: $(grep '^requests' "$T/full.out")"
echo "ok: after freeing space: $(grep -F -- "$back_line" "$T/full.err")"

# a restart on a full filesystem: the server started in another boot (crashsim.so gives
# it another boot id) rebuilds OVERLAY.live over the room it holds; without OVERLAY.live,
# it is refused with one line saying the room it needs (a 128 MiB disk: a 4 KiB header and
# 8 KiB of states), and starts once there is room
head -c 2M /dev/zero >"$T/full/ballast" 2>/dev/null || true
CRASHSIM=$(dirname "$LAZYBLK")/tools/crashsim.so
if [ -e "$CRASHSIM" ]; then
  cat /proc/sys/kernel/random/uuid >"$T/boot_id"
  LD_PRELOAD=$CRASHSIM CRASHSIM_BOOT_ID=$T/boot_id ASAN_OPTIONS=verify_asan_link_order=0 \
    start_server reboot "$uri" "$T/img.layout" --store "$T/store" --overlay "$T/full/ov" \
    --nbd "unix:$sock"
  qemu-io -f raw -c "read -P 0x67 100M 256k" "$uri" >/dev/null || die "reboot: a write lost"
  stop_server "$SRV" reboot
  [ "$(od -An -tx1 -j32 -N16 "$T/full/ov.live" | tr -d ' \n')" = "$(tr -d -- '-\n' <"$T/boot_id")" ] ||
    die "reboot: OVERLAY.live not of the new boot"
  echo "ok: OVERLAY.live rebuilt in another boot on a full filesystem"
fi
rm "$T/full/ov.live"
head -c 2M /dev/zero >>"$T/full/ballast" 2>/dev/null || true
expect_error "no room for OVERLAY.live" "$T/full/ov: no room for ov.live (12288 bytes)" -- \
  timeout 60 "$LAZYBLK" serve "$T/img.layout" --store "$T/store" --overlay "$T/full/ov" \
  --nbd "unix:$sock"
rm "$T/full/ballast"
start_server again "$uri" "$T/img.layout" --store "$T/store" --overlay "$T/full/ov" \
  --nbd "unix:$sock"
qemu-io -f raw -c "read -P 0x67 100M 256k" "$uri" >/dev/null || die "again: a write lost"
stop_server "$SRV" again
echo "overlay full: ok"
