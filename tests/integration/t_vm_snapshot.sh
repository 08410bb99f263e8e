#!/bin/bash
# VM snapshots and restore (issue 17, items 2 and 4; docs/run.md "Snapshots and restore")
# with the freestanding test guest in count mode (tests/guest/count.c: "guest: count N" for
# N = 1, 2, 3, ..., a disk record every C counts with requests in flight, "guest: count-disk:
# seq S count N ok" when one is acknowledged; it ends at testguest.count_to):
#  - a run with the lazy image and an overlay is snapshotted mid-run through its control
#    socket (`snapshot DIR`), then restored in a new process with a new overlay: the count
#    goes on from where it was (no boot banner, first count above what the original had
#    printed before the snapshot, no gap after), every record either process acknowledged
#    up to the snapshot and every one the restore acknowledged is on its disk
#    (disk.py counts), and the guest sees a new VM generation ID;
#  - two restores of the one snapshot at once, each with its own overlay: both count to
#    the end independently, with VM generation IDs of their own, and while they run each
#    maps the snapshot's ram file with pages shared with the other (smaps: Shared_Clean)
#    and its own written pages private;
#  - a snapshot of a restored VM restores too (--kernel checked against the first boot's);
#  - a restore asks KVM_GET_SUPPORTED_CPUID once (strace; the CPU check and the vCPUs share it);
#  - hostile snapshots are refused with one line, no console output of the guest and no
#    overlay left behind, and never hang: truncated vm.state or
#    ram, a flipped byte in the header, the state or a written page of RAM, a byte made
#    non-zero in a hole of the ram file, a snapshot of the older format (version 3, whose
#    header and state digests were sha256), --mem of another size,
#    another CPU model (signature changed, digests made right: found while the guest runs
#    held), another layout or kernel, crafted vCPU state (CR0.PG without PE: KVM_SET_SREGS
#    fails; MP state 99), a crafted CPUID record (entry count against its length; an entry
#    changed, which the header's CPU signature does not cover).
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/nested.sh"
. "$TESTLIB/vmstate.sh"

GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
DISKPY=$(cd "$(dirname "$0")/../guest" && pwd)/disk.py
[ -f "$GUEST" ] || die "no test guest at $GUEST (make guest builds it)"
kvm_require --long 10
if grep -q "not available" <<<"$("$LAZYBLK" mkfs --help 2>&1)"; then
  skip "skip: mkfs not available"
fi

mkdir -p "$T/tree" "$T/tree2"
head -c 3145728 /dev/urandom >"$T/tree/data.bin"
echo other >"$T/tree2/other"
"$LAZYBLK" import "$T/tree" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
"$LAZYBLK" import "$T/tree2" --store "$T/store" -o "$T/img2.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img2.manifest" -o "$T/img2.layout" --size 128M >/dev/null
printf 'x' >"$T/dummy.initrd"
LBA=200000   # the records' 64 sectors, past the file system's data
TO=2500      # a count a millisecond, a record every 40: 62 records, none overwritten
# (a count every 10 ms in the nested VM of lib/nested.sh, where the test's own tools are
# slow: the snapshot request must come while the guest counts)
US=$((1000 * ${LAZYBLK_TIME_SCALE:-1}))
IMG=("$T/img.layout" --store "$T/store")
GARGS="testguest.mode=count testguest.count_us=$US testguest.count_every=40"
GARGS="$GARGS testguest.count_lba=$LBA testguest.count_to=$TO"


# counts LOG: the counts printed; acked LOG: "seq S count N" of each acknowledged record;
# genid LOG: the VM generation IDs the guest printed
acked() { tr -d '\r' <"$1" | sed -n 's/^guest: count-disk: \(seq [0-9]* count [0-9]*\) ok$/\1/p'; }
genid() { tr -d '\r' <"$1" | sed -n 's/^guest: vmgenid: \([0-9a-f]\{32\}\) at .*/\1/p'; }

# check_disk OVERLAY RECORDS: every "seq S count N" line of the file RECORDS is on the disk
check_disk() {
  python3 "$DISKPY" counts "$1" "$LBA" >"$T/disk.recs" || die "disk.py counts $1"
  local missing
  missing=$(sort -u "$2" | comm -23 - <(sort -u "$T/disk.recs"))
  [ -z "$missing" ] || die "$1: acknowledged records missing: $(echo "$missing" | head -n 3)"
}

# from_seq LOG S: the acknowledged records of LOG with a sequence number below S
below_seq() { acked "$1" | awk -v s="$2" '$2 < s'; }

# consecutive LOG FIRST: the counts of LOG are FIRST, FIRST+1, ..., TO
consecutive() {
  counts "$1" | awk -v f="$2" -v to="$TO" 'NR - 1 + f != $1 { print "count line " NR " is " $1; bad = 1; exit }
    END { if (!bad && $1 != to) { print "last count " $1; bad = 1 } exit bad }' ||
    die "$1: the counts are not $2, $(($2 + 1)), ..., $TO"
}

# snap_run NAME SNAPDIR ARGS...: run in the background with --control, wait for count 300,
# take a snapshot through the socket (the guest's RAM stays as allocated as it was), wait
# for the run to end; BEFORE = the last count
# printed before the request
snap_run() {
  local name=$1 snap=$2 pid i; shift 2
  "$LAZYBLK" run "${IMG[@]}" "$@" --control "$T/$name.sock" \
    >"$T/$name.log" 2>"$T/$name.err" </dev/null &
  pid=$!
  wait_for -p "$pid" _count_ge "$T/$name.log" 300 || true
  BEFORE=$(counts "$T/$name.log" | tail -n 1)
  [ "${BEFORE:-0}" -ge 300 ] || { kill $pid 2>/dev/null; die "$name: no count 300: $(cat "$T/$name.err")"; }
  got=$(ctl_req "$T/$name.sock" "snapshot $snap")
  [ "$got" = "ok $snap" ] || { kill $pid 2>/dev/null; die "$name: snapshot answered '$got': $(cat "$T/$name.err")"; }
  # the snapshot reads only the pages the guest touched (the memfd's data extents): the
  # others stay unallocated, unmapped (a run from a snapshot has no memfd: 0)
  rss=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { m = /memfd:lazyblk-guest-ram/ } m && /^Rss:/ { s += $2 }
    END { print s + 0 }' "/proc/$pid/smaps" 2>/dev/null || echo 0)
  [ "$rss" -lt 16384 ] || { kill $pid 2>/dev/null; die "$name: $rss KiB of the guest's 64 MiB resident after the snapshot (untouched pages read)"; }
  echo "ok: $name: $rss KiB of guest RAM resident after the snapshot"
  timeout "$(tmo 120)" tail --pid=$pid -f /dev/null || true
  wait $pid || die "$name: the snapshotted run failed: $(cat "$T/$name.err")"
  grep -q "count done $TO" "$T/$name.log" || die "$name: the snapshotted run did not go on to $TO"
}

# ---- 1. snapshot mid-run (control socket)
snap_run run0 "$T/snap" --overlay "$T/ov0" --kernel "$GUEST" --initrd "$T/dummy.initrd" \
  --mem 64 --append "$GARGS"
before=$BEFORE
[ -s "$T/snap/vm.state" ] && [ -f "$T/snap/ram" ] && [ -s "$T/snap/disk.delta" ] ||
  die "snapshot directory incomplete: $(ls "$T/snap")"
ram_alloc=$(du -k "$T/snap/ram" | cut -f1)
[ "$ram_alloc" -lt 16384 ] || die "ram is not sparse: $ram_alloc KiB allocated of 64 MiB"
echo "ok: snapshot at count >= $before: $(ls "$T/snap" | tr '\n' ' '), ram $ram_alloc KiB allocated"

# ---- 2. restore in a new process: the count goes on, the disk holds the writes, new VMGENID
timeout "$(tmo 120)" "$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov1" --restore "$T/snap" \
  >"$T/run1.log" 2>"$T/run1.err" </dev/null || die "restore failed: $(cat "$T/run1.err")"
grep -q "count mode" "$T/run1.log" && die "the restored guest booted again"
first=$(counts "$T/run1.log" | sed -n 1p)
[ -n "$first" ] && [ "$first" -gt "$before" ] || die "restored count starts at '$first' (<= $before)"
consecutive "$T/run1.log" "$first"
grep -q "count done $TO" "$T/run1.log" || die "the restored run did not count to $TO"
seq1=$(acked "$T/run1.log" | awk 'NR == 1 { print $2 }')
{ below_seq "$T/run0.log" "$seq1"; acked "$T/run1.log"; } >"$T/want1"
check_disk "$T/ov1" "$T/want1"
g0=$(genid "$T/run0.log" | tail -n 1)
g1=$(genid "$T/run1.log" | tail -n 1)
[ -n "$g0" ] && [ -n "$g1" ] && [ "$g0" != "$g1" ] ||
  die "the restored guest's VM generation ID is '$g1' (the snapshot's '$g0')"
echo "ok: restore: counts on from $first (snapshot after $before) to $TO; $(wc -l <"$T/want1") acknowledged records on the disk; VM generation ID $g0 -> $g1"

# ---- 2b. a snapshot of a restored VM (a fork of a fork), restored with --kernel checked,
# under --seccomp (the CPU and RAM checks run after the filter is in place, with the guest;
# LeakSanitizer stops the world with ptrace, which the filter refuses: off for this run)
snap_run run4 "$T/snap2" --overlay "$T/ov4" --restore "$T/snap" --kernel "$GUEST"
before2=$BEFORE
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
timeout "$(tmo 120)" "$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov5" --restore "$T/snap2" --kernel "$GUEST" \
  --seccomp >"$T/run5.log" 2>"$T/run5.err" </dev/null || die "restore of snap2 failed: $(cat "$T/run5.err")"
first2=$(counts "$T/run5.log" | sed -n 1p)
[ -n "$first2" ] && [ "$first2" -gt "$before2" ] && grep -q "count done $TO" "$T/run5.log" ||
  die "second-generation restore: starts at '$first2' (snapshot after $before2)"
consecutive "$T/run5.log" "$first2"
echo "ok: snapshot of a restored VM: its restore (--seccomp) counts on from $first2 (snapshot after $before2)"

# ---- 2c. KVM_GET_SUPPORTED_CPUID asked once per process: the snapshot's CPU check and every
# vCPU's CPUID share it
if command -v strace >/dev/null; then
  # (LeakSanitizer, in a SAN build, cannot stop the threads of a traced process: off here)
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  timeout "$(tmo 120)" strace -f -qq -e trace=ioctl -o "$T/run6.strace" "$LAZYBLK" run "${IMG[@]}" \
    --overlay "$T/ov6" --restore "$T/snap" >"$T/run6.log" 2>"$T/run6.err" </dev/null ||
    die "restore under strace failed: $(cat "$T/run6.err")"
  asked=$(grep -c KVM_GET_SUPPORTED_CPUID "$T/run6.strace" || true)
  [ "$asked" = 1 ] || die "a restore asked KVM_GET_SUPPORTED_CPUID $asked times (once is enough)"
  echo "ok: a restore asks KVM_GET_SUPPORTED_CPUID once"
else
  echo "skip: no strace (scripts/deps.sh): KVM_GET_SUPPORTED_CPUID count not checked"
fi

# ---- 3. two restores at once, separate overlays: independent, RAM pages shared
pids=()
for i in 2 3; do
  "$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov$i" --restore "$T/snap" \
    >"$T/run$i.log" 2>"$T/run$i.err" </dev/null &
  pids+=($!)
done
for i in 2 3; do
  wait_for has "$T/run$i.log" "count-disk: seq" || die "restore $i does not run: $(cat "$T/run$i.err")"
done
for p in "${pids[@]}"; do
  awk -v ram="$T/snap/ram" '
    $0 ~ /^[0-9a-f]+-[0-9a-f]+ / { inram = index($0, ram) > 0 }
    inram && /^Shared_Clean:/ { sc += $2 }
    inram && /^Private_Dirty:/ { pd += $2 }
    END { print sc + 0, pd + 0 }' /proc/$p/smaps >"$T/smaps.$p"
done
for p in "${pids[@]}"; do
  read -r sc pd <"$T/smaps.$p"
  [ "$sc" -gt 0 ] || die "restore $p: no ram page shared (Shared_Clean $sc kB, Private_Dirty $pd kB)"
  [ "$pd" -gt 0 ] || die "restore $p: no private (written) ram page"
  echo "ok: restore pid $p: ram mapping Shared_Clean $sc kB, Private_Dirty $pd kB"
done
for p in "${pids[@]}"; do
  timeout "$(tmo 120)" tail --pid=$p -f /dev/null || true
  wait $p || die "a concurrent restore failed"
done
for i in 2 3; do
  grep -q "count done $TO" "$T/run$i.log" || die "restore $i did not count to $TO"
  [ "$(counts "$T/run$i.log" | sed -n 1p)" = "$first" ] || die "restore $i started elsewhere"
  consecutive "$T/run$i.log" "$first"
  { below_seq "$T/run0.log" "$seq1"; acked "$T/run$i.log"; } >"$T/want$i"
  check_disk "$T/ov$i" "$T/want$i"
done
g2=$(genid "$T/run2.log" | tail -n 1)
g3=$(genid "$T/run3.log" | tail -n 1)
[ -n "$g2" ] && [ "$g2" != "$g3" ] && [ "$g2" != "$g0" ] && [ "$g3" != "$g0" ] ||
  die "two restores of one snapshot: VM generation IDs $g2 and $g3 (the snapshot's $g0)"
echo "ok: two restores of one snapshot ran to $TO independently, VM generation IDs $g2 and $g3"

# ---- 4. hostile snapshots: one line each, no hang
n=0
hostile() {  # NAME EXPECT EDIT-COMMAND... (on a fresh copy $T/h)
  local name=$1 want=$2; shift 2
  rm -rf "$T/h" "$T/hov"
  cp -a --sparse=always "$T/snap" "$T/h"
  "$@"
  expect_error "$name" "$want" -- timeout "$(tmo 60)" "$LAZYBLK" run "${IMG[@]}" --overlay "$T/hov" \
    --restore "$T/h" </dev/null
  # the guest may have run held while its RAM was checked: nothing of it got out
  [ ! -s "$T/.out" ] || die "$name: the refused guest's console output got out: $(head -c 200 "$T/.out")"
  [ ! -e "$T/hov" ] || die "$name: the refused restore left its overlay $T/hov"
  n=$((n + 1))
}
hostile "truncated vm.state" "truncated" truncate -s 700 "$T/h/vm.state"
hostile "truncated header" "truncated" truncate -s 100 "$T/h/vm.state"
hostile "truncated ram" "truncated, or not this snapshot's" truncate -s 32M "$T/h/ram"
hostile "header byte flipped" "header digest mismatch" edit "$T/h" 'b[20] ^= 1'
hostile "state byte flipped" "state digest mismatch" edit "$T/h" 'b[600] ^= 1'
hostile "ram byte flipped" "ram: digest mismatch" \
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(0x200010); c = f.read(1); f.seek(0x200010); f.write(bytes([c[0] ^ 0xff]))' "$T/h/ram"
hostile "ram hole made non-zero" "ram: digest mismatch" python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
size = os.lseek(fd, 0, os.SEEK_END)
hole = os.lseek(fd, 0x1000000, os.SEEK_HOLE)
if hole >= size:
    sys.exit("no hole in ram")
os.pwrite(fd, b"\x01", hole + 100)' "$T/h/ram"
hostile "older version" "version 3 (this lazyblk reads version 4)" sh -c "$(declare -f edit fixsum); edit '$T/h' 'b[8] = 3'; fixsum '$T/h'"
# another CPU: leaf 0's EAX changed in the CPUID record and the header's signature made
# to match it (found only when this host's KVM is asked, while the guest runs held)
hostile "another CPU model" "another CPU model" sh -c "$(declare -f edit fixsum cpusig); edit '$T/h' 'o = rec(35); b[o + 20] ^= 1'; cpusig '$T/h'; fixsum '$T/h'"
hostile "crafted sregs" "KVM_SET_SREGS" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(2); struct.pack_into(\"<Q\", b, o + 224, 0x80000000)'; fixsum '$T/h'"
hostile "crafted CPUID record" "CPUID record has" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(35); struct.pack_into(\"<I\", b, o, 9)'; fixsum '$T/h'"
hostile "CPUID record altered" "not the one the header's CPU signature is of" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(35); b[o + 20] ^= 1'; fixsum '$T/h'"
hostile "crafted MP state" "KVM_SET_MP_STATE" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(8); struct.pack_into(\"<I\", b, o, 99)'; fixsum '$T/h'"
hostile "crafted record size" "record has" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(1); struct.pack_into(\"<I\", b, o - 8, 8)'; fixsum '$T/h'"
hostile "crafted virtio queue" "cannot have" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(65); struct.pack_into(\"<I\", b, o + 40, 3)'; fixsum '$T/h'"
hostile "disk.delta altered" "not this snapshot's disk delta" \
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(-1, 2); c = f.read(1); f.seek(-1, 2); f.write(bytes([c[0] ^ 1]))' "$T/h/disk.delta"
expect_error "RAM size mismatch" "RAM size mismatch" -- timeout "$(tmo 60)" "$LAZYBLK" run "${IMG[@]}" \
  --overlay "$T/hov2" --restore "$T/snap" --mem 128 </dev/null
expect_error "another layout" "another image layout" -- timeout "$(tmo 60)" "$LAZYBLK" run \
  "$T/img2.layout" --store "$T/store" --overlay "$T/hov3" --restore "$T/snap" </dev/null
expect_error "overlay exists" "exists" -- timeout "$(tmo 60)" "$LAZYBLK" run "${IMG[@]}" \
  --overlay "$T/ov1" --restore "$T/snap" </dev/null
cp "$GUEST" "$T/other.elf"
printf 'x' >>"$T/other.elf"
expect_error "another kernel" "not the kernel the snapshot was taken with" -- timeout "$(tmo 60)" \
  "$LAZYBLK" run "${IMG[@]}" --overlay "$T/hov4" --restore "$T/snap" --kernel "$T/other.elf" \
  </dev/null
expect_error "no image given" "the snapshot's VM has 1" -- timeout "$(tmo 60)" "$LAZYBLK" run --restore "$T/snap" \
  </dev/null
echo "ok: $((n + 5)) hostile or mismatched restores refused"
