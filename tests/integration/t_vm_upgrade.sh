#!/bin/bash
# Live upgrade (issue 17, item 3; docs/run.md "Live upgrade"): lazyblk run --control with
# the lazy image and an overlay, the test guest counting (tests/guest/count.c: "guest: count
# N" for N = 1, 2, 3, ..., a disk record every 2 counts with up to 8 requests in flight) is
# upgraded 20 times in a row while it writes (`upgrade` on the control socket: the process
# execs itself, the new one takes over guest RAM, the state and the socket). Each upgrade is
# answered "ok upgraded: paused N ms" by the new process and logged; the PID stays the same;
# the guest never boots again and its count never restarts, skips or goes back; the file
# descriptors do not pile up and no reaper child is left a zombie; after a pause, every
# record the guest saw acknowledged (and no write in flight can have replaced) is on the
# overlay (disk.py counts). An upgrade to a file that is not executable, to a relative
# path, or of a run under --seccomp is refused with one line and the VM runs on; so does
# the VM when the exec itself fails (a script whose interpreter is missing).
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/nested.sh"

GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
DISKPY=$(cd "$(dirname "$0")/../guest" && pwd)/disk.py
[ -f "$GUEST" ] || die "no test guest at $GUEST (make guest builds it)"
kvm_require   # (nested: about 3 minutes)
if grep -q "not available" <<<"$("$LAZYBLK" mkfs --help 2>&1)"; then
  skip "skip: mkfs not available"
fi

mkdir -p "$T/tree"
head -c 1048576 /dev/urandom >"$T/tree/data.bin"
"$LAZYBLK" import "$T/tree" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
printf 'x' >"$T/dummy.initrd"
LBA=200000
PIDS=()
cleanup_vms() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'cleanup_vms; rm -rf "$T"' EXIT

log=$T/vm.log
sock=$T/vm.sock
"$LAZYBLK" run "$T/img.layout" --store "$T/store" --overlay "$T/ov" --kernel "$GUEST" \
  --initrd "$T/dummy.initrd" --mem 64 --control "$sock" \
  --append "testguest.mode=count testguest.count_us=2000 testguest.count_every=2 testguest.count_lba=$LBA" \
  >"$log" 2>"$log.err" </dev/null &
pid=$!
PIDS+=("$pid")
wait_count "$log" 20 "$pid"
fds0=$(ls /proc/$pid/fd | wc -l)

# ---- 20 upgrades in a row while the guest writes
for i in $(seq 1 20); do
  n=$(last_count "$log")
  r=$(ctl_req "$sock" upgrade)
  [[ "$r" =~ ^ok\ upgraded:\ paused\ [0-9.]+\ ms$ ]] || die "upgrade $i: '$r': $(tail -n 3 "$log.err")"
  kill -0 "$pid" 2>/dev/null || die "upgrade $i: process $pid is gone"
  wait_count "$log" $((n + 5)) "$pid"
done
[ "$(grep -c '^lazyblk: run: upgrade: paused [0-9.]* ms$' "$log.err")" = 20 ] ||
  die "not 20 'upgrade: paused N ms' lines: $(grep upgrade "$log.err" | head -n 3)"
[ "$(tr -d '\r' <"$log" | grep -c '^guest: count mode')" = 1 ] || die "the guest booted again"
consecutive "$log"
readlink "/proc/$pid/exe" | grep -q lazyblk || die "process $pid is not lazyblk any more"
ms=$(sed -n 's/^lazyblk: run: upgrade: paused \([0-9.]*\) ms$/\1/p' "$log.err" | sort -n | tr '\n' ' ')
echo "ok: 20 upgrades, pid $pid kept, count 1..$(last_count "$log") without a gap; paused (ms, sorted): $ms"
# the last reaper child closes its VM and exits on its own time: wait for that state (a fixed
# 0.3 s was a guess), within the common deadline; a leak fails after it
settled() {
  [ "$(ls /proc/$pid/fd | wc -l)" -le "$fds0" ] && [ -z "$(ps --ppid "$pid" -o pid=)" ]
}
wait_for settled || true
fds=$(ls /proc/$pid/fd | wc -l)
[ "$fds" -le "$fds0" ] || die "open files: $fds0 before the upgrades, $fds after: $(ls -l /proc/$pid/fd)"
zombies=$(ps --ppid "$pid" -o stat= | grep -c '^Z' || true)
[ "$zombies" = 0 ] || die "$zombies zombie children of $pid after the upgrades"
echo "ok: $fds open files (was $fds0), no zombie child"

# ---- refused upgrades: one line each, the VM runs on
printf '#!/bin/sh\n' >"$T/notexec"
chmod 644 "$T/notexec"
r=$(ctl_req "$sock" "upgrade $T/notexec")
[ "$r" = "error upgrade: $T/notexec: not an executable file" ] || die "non-executable: '$r'"
r=$(ctl_req "$sock" "upgrade $T/missing")
[ "$r" = "error upgrade: $T/missing: No such file or directory" ] || die "missing: '$r'"
# executable, but the exec fails (its interpreter is missing): the old process resumes
printf '#!/nonexistent/interpreter\n' >"$T/badexec"
chmod 755 "$T/badexec"
r=$(ctl_req "$sock" "upgrade $T/badexec")
[ "$r" = "error upgrade: exec $T/badexec: No such file or directory" ] || die "failed exec: '$r'"
kill -0 "$pid" 2>/dev/null || die "the VM is gone after a failed exec"
r=$(ctl_req "$sock" "upgrade rel/lazyblk")
[ "$r" = "error BINARY must be absolute: rel/lazyblk" ] || die "relative: '$r'"
n=$(last_count "$log")
wait_count "$log" $((n + 5)) "$pid"
[ "$(ctl_req "$sock" stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["paused"])')" = False ] ||
  die "paused after a refused upgrade"
echo "ok: refused upgrades (not executable, missing, relative path) and a failed exec; the VM runs on"

# ---- every acknowledged record on the overlay (after a pause: nothing in flight)
[ "$(ctl_req "$sock" pause)" = "ok paused" ] || die "pause"
sleep 0.2
tr -d '\r' <"$log" | sed -n 's/^guest: count-disk: \(seq [0-9]* count [0-9]*\) ok$/\1/p' >"$T/acked"
kill "$pid"
wait "$pid" 2>/dev/null || true
PIDS=()
python3 "$DISKPY" counts "$T/ov" "$LBA" >"$T/disk"
# the last 56 acknowledged: up to 8 unacknowledged requests may have replaced older ones
max=$(awk '{ print $2 }' "$T/acked" | sort -n | tail -n 1)
awk -v m="$max" '$2 > m - 56' "$T/acked" | sort >"$T/want"
missing=$(comm -23 "$T/want" <(sort "$T/disk"))
[ -z "$missing" ] || die "acknowledged records missing from the overlay: $(echo "$missing" | head -n 3)"
[ "$(wc -l <"$T/want")" = 56 ] || die "only $(wc -l <"$T/want") records to check"
echo "ok: the last 56 acknowledged records (seq up to $max) are on the overlay"

# ---- under --seccomp: refused (the new process could not set the VM up again)
"$LAZYBLK" run --kernel "$GUEST" --mem 64 --control "$T/s.sock" --seccomp \
  --append "testguest.mode=count testguest.count_us=5000" >"$T/s.log" 2>"$T/s.log.err" </dev/null &
spid=$!
PIDS+=("$spid")
wait_count "$T/s.log" 3 "$spid"
r=$(ctl_req "$T/s.sock" upgrade)
[ "$r" = "error upgrade: not with --user or --seccomp (the new process could not set the VM up again)" ] ||
  die "upgrade under --seccomp: '$r'"
n=$(last_count "$T/s.log")
wait_count "$T/s.log" $((n + 3)) "$spid"
echo "ok: upgrade refused under --seccomp, the VM runs on"
