#!/bin/bash
# lazyblk run --control: the freestanding test guest in counting mode (testguest.mode=count:
# "guest: count N" on COM1 for N = 1, 2, 3, ..., disk records with requests in flight) is
# paused (the count stops, stats says paused), resumed (the count goes on from the same value:
# no gap, no repeat), asked for statistics (vCPU exits, the disk's), for a VM snapshot, and
# sent malformed requests and many clients at once (each answered, the VM unharmed). With the
# lazy image and an overlay: a disk snapshot (snapshot-disk) while the guest writes, whose
# records are each one the guest wrote. Each run's VM generation ID (ACPI VGEN) is new and
# read by the guest.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/serve.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/nested.sh"

GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
DISKPY=$(cd "$(dirname "$0")/../guest" && pwd)/disk.py
[ -f "$GUEST" ] || die "no test guest at $GUEST (make guest builds it)"
kvm_require --long 17

"$LAZYBLK" run --help >"$T/help.txt"
grep -q -- "--control SOCK" "$T/help.txt" || die "run --help lacks --control SOCK"

# start_vm NAME ARGS...: lazyblk run in counting mode in the background (VM=pid)
start_vm() {
  local name=$1; shift
  "$LAZYBLK" -v run --kernel "$GUEST" --cpus 2 --mem 64 "$@" \
    >"$T/$name.log" 2>"$T/$name.log.err" </dev/null &
  VM=$!
  SERVERS+=("$VM")
}

# ---- raw disk: pause, resume, stats, malformed requests, many clients (under --seccomp:
# the socket listens before the filter, its thread works under it)
python3 "$DISKPY" make "$T/disk.img"
expect_error "control socket in a missing directory" \
  "lazyblk: run: --control $T/no/dir/c.sock: No such file or directory" -- \
  "$LAZYBLK" -q run --kernel "$GUEST" --disk "$T/disk.img" --mem 64 --control "$T/no/dir/c.sock"
[ -s "$T/.out" ] && die "the guest ran although its control socket failed: $(head -c 300 "$T/.out")"
sock=$T/vm.ctl
start_vm raw --disk "$T/disk.img" --control "$sock" --seccomp \
  --append "testguest.mode=count testguest.count_us=10000 testguest.count_every=2"
log=$T/raw.log
wait_count "$log" 10 "$VM"

# the VM generation ID (ACPI VGEN): the guest reads the one the VMM made
id1=$(tr -d '\r' <"$log" | sed -n 's/^guest: vmgenid: \([0-9a-f]\{32\}\) at 0xff000$/\1/p')
[ -n "$id1" ] || die "the guest found no VM generation ID: $(grep vmgenid "$log")"
grep -q "^lazyblk: run: VM generation ID $id1 at 0xff000$" "$log.err" ||
  die "the guest's VM generation ID $id1 is not the VMM's: $(grep generation "$log.err")"
echo "ok: VM generation ID $id1 read by the guest"

[ "$(ctl "$sock" $'pause\n')" = "ok paused" ] || die "pause"
n=$(last_count "$log")
[ "$(ctl "$sock" $'pause\n')" = "error already paused" ] || die "pause twice"
s=$(ctl "$sock" $'stats\n')
python3 -c 'import json, sys
s = json.loads(sys.argv[1])
assert s["paused"] is True, "paused"
assert len(s["vcpus"]) == 2 and s["vcpus"][0]["exits"]["io"] > 0, "vcpus"
assert 0 < s["start_ns"] < s["vcpus"][0]["first_exit_ns"], "start_ns, first_exit_ns"
assert s["disks"][0]["writes"] > 0, "disk writes"' "$s" || die "stats while paused: $s"
# CPU time of the process (utime + stime, clock ticks)
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
c0=$(cputicks "$VM")
sleep 2 # the guest's clock runs on: a running guest would print 200 counts meanwhile
c1=$(cputicks "$VM")
[ "$(last_count "$log")" = "$n" ] || die "paused, but the count went from $n to $(last_count "$log")"
# nothing runs in a paused VM (its main thread once spun on a condition variable's deadline
# taken from the wrong clock)
[ $((c1 - c0)) -lt $(( $(getconf CLK_TCK) / 5 )) ] ||
  die "paused, but the VM used $((c1 - c0)) clock ticks of CPU in 2 s"
s2=$(ctl "$sock" $'stats\n')
[ "$s" = "$s2" ] || die "paused, but the statistics changed: $s -> $s2"
echo "ok: paused at count $n: the count and the statistics stay"

[ "$(ctl "$sock" $'resume\n')" = "ok running" ] || die "resume"
[ "$(ctl "$sock" $'resume\n')" = "error not paused" ] || die "resume twice"
wait_count "$log" $((n + 5)) "$VM"
consecutive "$log" "pause/resume"
echo "ok: resumed: count $n then $((n + 1)), ... (no gap, no repeat)"

# malformed requests: each answered with an error; then many clients at once
ctl "$sock" $'frob\n' | grep -q "^error unknown request 'frob' (want pause, resume, stats, snapshot DIR" ||
  die "unknown request: $(ctl "$sock" $'frob\n')"
ctl "$sock" $'\n' | grep -q "^error empty request" || die "empty request"
ctl "$sock" 'pau\0se'$'\n' | grep -q "^error request holds a NUL byte" || die "NUL"
ctl "$sock" "$(head -c 10000 /dev/zero | tr '\0' a)" | grep -q "^error request too long" ||
  die "overlong request"
ctl "$sock" $'snapshot\n' | grep -q "^error snapshot needs a DIR" || die "snapshot without DIR"
ctl "$sock" $'snapshot rel\n' | grep -q "^error DIR must be absolute" || die "relative DIR"
ctl "$sock" $'snapshot-disk /x.delta\n' | grep -q "^error /x.delta: this disk takes no snapshots" ||
  die "snapshot-disk of a raw disk"
# the VM snapshot (under --seccomp): written; the VM runs on (t_vm_snapshot.sh restores)
r=$(ctl "$sock" "snapshot $T/snap"$'\n')
[ "$r" = "ok $T/snap" ] && [ -s "$T/snap/vm.state" ] || die "snapshot DIR: $r"
vmm_stats() { ctl "$sock" $'stats\n'; }
python3 -c 'import json, sys; assert json.loads(sys.argv[1])["paused"] is False' "$(vmm_stats)" ||
  die "running after snapshot DIR: $(vmm_stats)"
for i in $(seq 1 24); do
  ctl "$sock" $'stats\nfrob\n' >"$T/client$i.out" &
done
wait_clients=0
for j in $(jobs -p); do
  [ "$j" = "$VM" ] || wait "$j" || wait_clients=$((wait_clients + 1))
done
[ "$wait_clients" -eq 0 ] || die "$wait_clients clients failed"
python3 - "$T" <<'EOF' || die "a client did not get its two answers"
import json, sys
for i in range(1, 25):
    lines = open("%s/client%d.out" % (sys.argv[1], i)).read().split("\n")
    json.loads(lines[0])
    assert lines[1].startswith("error unknown request 'frob'"), lines
EOF
n=$(last_count "$log")
wait_count "$log" $((n + 5)) "$VM"
consecutive "$log" "after bad requests"
grep -q "guest: .*FAIL" "$log" && die "the guest reports a failure: $(grep FAIL "$log" | head -3)"
echo "ok: malformed requests and 24 clients at once answered; the VM counts on ($(last_count "$log"))"
kill -TERM "$VM"
wait "$VM" || true

# ---- the lazy image with an overlay: a disk snapshot while the guest writes its records
if grep -q "not available" <<<"$("$LAZYBLK" mkfs --help 2>&1)"; then
  echo "ok: disk snapshot part skipped (mkfs not available)"
  exit 0
fi
mkdir -p "$T/tree"
echo hello >"$T/tree/hello"
"$LAZYBLK" import "$T/tree" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
printf 'x' >"$T/dummy.initrd"
# the records go to sectors 16384.. (8 MiB in: free space of the image)
start_vm img "$T/img.layout" --store "$T/store" --overlay "$T/img.ov" --initrd "$T/dummy.initrd" \
  --control "$sock" --append "testguest.mode=count testguest.count_us=5000 testguest.count_every=1 testguest.count_lba=16384"
log=$T/img.log
wait_count "$log" 20 "$VM"
r=$(ctl "$sock" "snapshot-disk $T/live.delta"$'\n')
[[ "$r" =~ ^ok\ $T/live.delta\ [1-9][0-9]*$ ]] || die "snapshot-disk: $r"
n=$(last_count "$log")
wait_count "$log" $((n + 5)) "$VM"
kill -TERM "$VM"
wait "$VM" || true
consecutive "$log" "lazy image"
id2=$(tr -d '\r' <"$log" | sed -n 's/^guest: vmgenid: \([0-9a-f]\{32\}\) at 0xff000$/\1/p')
[ -n "$id2" ] && [ "$id2" != "$id1" ] || die "VM generation IDs of two runs: $id1, $id2"
"$LAZYBLK" overlay apply "$T/live.delta" --layout "$T/img.layout" -o "$T/fork.ov" >/dev/null
start_server fork "nbd+unix:///?socket=$T/fork.sock" "$T/img.layout" --store "$T/store" \
  --overlay "$T/fork.ov" --read-only --nbd "unix:$T/fork.sock"
nbdcopy "nbd+unix:///?socket=$T/fork.sock" "$T/fork.raw"
stop_server "$SRV" fork
python3 "$DISKPY" counts "$T/fork.raw" 16384 >"$T/fork.recs"
[ -s "$T/fork.recs" ] || die "the disk snapshot holds no record"
tr -d '\r' <"$log" >"$log.txt"
while read -r _ seq _ cnt; do
  grep -qx "guest: count-disk: seq $seq count $cnt ok" "$log.txt" ||
    die "the snapshot holds seq $seq count $cnt, which the guest did not write"
done <"$T/fork.recs"
echo "ok: snapshot-disk while the guest wrote: $(wc -l <"$T/fork.recs") records, each one the guest wrote"
