#!/bin/bash
# VM snapshots and restore (issue 17, item 2; docs/run.md "Snapshots and restore") with the
# freestanding test guest in count mode (tests/guest/count.c: it counts in RAM and writes
# the count to sector SCR + N/100 every 100 steps, printing each acknowledged write):
#  - a run with the lazy image and an overlay is snapshotted mid-run (the hidden test hook
#    --snapshot-on-signal DIR: SIGUSR2), then restored in a new process with a new overlay:
#    the count goes on from where it was (no boot banner, first count above what the
#    original had printed before the snapshot), every write either process acknowledged up
#    to the snapshot and every write the restore acknowledged is on its disk;
#  - two restores of the one snapshot at once, each with its own overlay: both count to
#    the end independently, and while they run each maps the snapshot's ram file with
#    pages shared with the other (smaps: Shared_Clean) and its own written pages private;
#  - a snapshot of a restored VM restores too (--kernel checked against the first boot's);
#  - hostile snapshots are refused with one line and never hang: truncated vm.state or
#    ram, a flipped byte in the header, the state or the RAM, --mem of another size,
#    another CPU model (signature changed, digests made right), another layout or kernel, crafted
#    vCPU state (CR0.PG without PE: KVM_SET_SREGS fails; MP state 99).
. "$(dirname "$0")/lib/common.sh"

GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
[ -f "$GUEST" ] || die "no test guest at $GUEST (make guest builds it)"
[ -w /dev/kvm ] || skip "skip: no writable /dev/kvm"
if "$LAZYBLK" mkfs --help 2>&1 | grep -q "not available"; then
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
SCR=200000
TO=2500
IMG=("$T/img.layout" --store "$T/store")

# wait_for FILE PATTERN SECONDS
wait_for() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# acked LOG: the counts LOG acknowledged, one a line
acked() { tr -d '\r' <"$1" | sed -n 's/^guest: count \([0-9]*\) acked sector.*/\1/p'; }

# check_disk OVERLAY COUNTS...: sector SCR + c/100 of the overlay holds c (64 times)
check_disk() {
  local ov=$1; shift
  python3 - "$ov" "$SCR" "$@" <<'PY' || die "disk check of $1"
import struct, sys
ov, scr, counts = sys.argv[1], int(sys.argv[2]), [int(c) for c in sys.argv[3:]]
f = open(ov, "rb")
for c in counts:
    f.seek((scr + c // 100) * 512)
    v = struct.unpack("<64Q", f.read(512))
    if v != (c,) * 64:
        sys.exit(f"sector {scr + c // 100}: {v[0]} (want {c})")
PY
}

# ---- 1. snapshot mid-run
"$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov0" --kernel "$GUEST" --initrd "$T/dummy.initrd" \
  --mem 64 --append "testguest.mode=count testguest.scratch=$SCR testguest.count_to=$TO" \
  --snapshot-on-signal "$T/snap" >"$T/run0.log" 2>"$T/run0.err" </dev/null &
pid=$!
wait_for "$T/run0.log" "count 300 acked" 60 ||
  { kill $pid 2>/dev/null || true; die "the guest did not count to 300: $(cat "$T/run0.err")"; }
before=$(acked "$T/run0.log" | tail -n 1)
kill -USR2 $pid
wait_for "$T/run0.err" "snapshot .* written" 30 ||
  { kill $pid 2>/dev/null || true; die "no snapshot: $(cat "$T/run0.err")"; }
timeout 120 tail --pid=$pid -f /dev/null || true
wait $pid || die "the snapshotted run failed: $(cat "$T/run0.err")"
grep -q "count done $TO" "$T/run0.log" || die "the snapshotted run did not go on to $TO"
[ -s "$T/snap/vm.state" ] && [ -f "$T/snap/ram" ] && [ -s "$T/snap/disk.delta" ] ||
  die "snapshot directory incomplete: $(ls "$T/snap")"
ram_alloc=$(du -k "$T/snap/ram" | cut -f1)
[ "$ram_alloc" -lt 16384 ] || die "ram is not sparse: $ram_alloc KiB allocated of 64 MiB"
echo "ok: snapshot at count >= $before: $(ls "$T/snap" | tr '\n' ' '), ram $ram_alloc KiB allocated"

# ---- 2. restore in a new process: the count goes on, the disk holds the writes
timeout 120 "$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov1" --restore "$T/snap" \
  >"$T/run1.log" 2>"$T/run1.err" </dev/null || die "restore failed: $(cat "$T/run1.err")"
tr -d '\r' <"$T/run1.log" >"$T/run1.txt"
grep -q "count mode" "$T/run1.txt" && die "the restored guest booted again"
first=$(acked "$T/run1.log" | head -n 1)
[ -n "$first" ] && [ "$first" -gt "$before" ] || die "restored count starts at '$first' (<= $before)"
grep -q "count done $TO" "$T/run1.txt" || die "the restored run did not count to $TO"
expect=$(seq "$first" 100 "$TO" | tr '\n' ' ')
got=$(acked "$T/run1.log" | tr '\n' ' ')
[ "$got" = "$expect" ] || die "restored counts: $got (want $expect)"
# the original's writes up to the snapshot (all below first) came with disk.delta
check_disk "$T/ov1" $(acked "$T/run0.log" | awk -v f="$first" '$1 < f') $(acked "$T/run1.log")
echo "ok: restore: counts on from $first (snapshot after $before) to $TO; every acknowledged write on the disk"

# ---- 2b. a snapshot of a restored VM (a fork of a fork), restored with --kernel checked
"$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov4" --restore "$T/snap" --kernel "$GUEST" \
  --snapshot-on-signal "$T/snap2" >"$T/run4.log" 2>"$T/run4.err" </dev/null &
pid=$!
wait_for "$T/run4.log" "acked" 60 ||
  { kill $pid 2>/dev/null || true; die "restore with --kernel: $(cat "$T/run4.err")"; }
before2=$(acked "$T/run4.log" | tail -n 1)
kill -USR2 $pid
wait_for "$T/run4.err" "snapshot .* written" 30 ||
  { kill $pid 2>/dev/null || true; die "no snapshot of the restored VM: $(cat "$T/run4.err")"; }
timeout 120 tail --pid=$pid -f /dev/null || true
wait $pid || die "the restored, snapshotted run failed: $(cat "$T/run4.err")"
timeout 120 "$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov5" --restore "$T/snap2" --kernel "$GUEST" \
  >"$T/run5.log" 2>"$T/run5.err" </dev/null || die "restore of snap2 failed: $(cat "$T/run5.err")"
first2=$(acked "$T/run5.log" | head -n 1)
[ -n "$first2" ] && [ "$first2" -gt "$before2" ] && grep -q "count done $TO" "$T/run5.log" ||
  die "second-generation restore: starts at '$first2' (snapshot after $before2)"
echo "ok: snapshot of a restored VM: its restore counts on from $first2 (snapshot after $before2)"

# ---- 3. two restores at once, separate overlays: independent, RAM pages shared
pids=()
for i in 2 3; do
  "$LAZYBLK" run "${IMG[@]}" --overlay "$T/ov$i" --restore "$T/snap" \
    >"$T/run$i.log" 2>"$T/run$i.err" </dev/null &
  pids+=($!)
done
for i in 2 3; do
  wait_for "$T/run$i.log" "acked" 60 || die "restore $i does not run: $(cat "$T/run$i.err")"
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
  timeout 120 tail --pid=$p -f /dev/null || true
  wait $p || die "a concurrent restore failed"
done
for i in 2 3; do
  grep -q "count done $TO" "$T/run$i.log" || die "restore $i did not count to $TO"
  [ "$(acked "$T/run$i.log" | head -n 1)" = "$first" ] || die "restore $i started elsewhere"
  check_disk "$T/ov$i" $(acked "$T/run$i.log")
done
echo "ok: two restores of one snapshot ran to $TO independently"

# ---- 4. hostile snapshots: one line each, no hang
# fixsum DIR: make vm.state's digests right again after an edit (state, then header)
fixsum() {
  python3 - "$1/vm.state" <<'PY'
import hashlib, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[208:240] = hashlib.sha256(b[512:]).digest()
b[480:512] = hashlib.sha256(b[:480]).digest()
open(p, "wb").write(b)
PY
}
# edit DIR PYTHON: run PYTHON on the bytearray b of DIR/vm.state (records: rec(tag, idx))
edit() {
  python3 - "$1/vm.state" "$2" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
def rec(tag, idx=0):
    off = 512
    while off < len(b):
        t, i, n, _ = struct.unpack_from("<4I", b, off)
        if (t, i) == (tag, idx):
            return off + 16
        off += 16 + (n + 7) // 8 * 8
    sys.exit("no record")
exec(sys.argv[2])
open(p, "wb").write(b)
PY
}
n=0
hostile() {  # NAME EXPECT EDIT-COMMAND... (on a fresh copy $T/h)
  local name=$1 want=$2; shift 2
  rm -rf "$T/h" "$T/hov"
  cp -a --sparse=always "$T/snap" "$T/h"
  "$@"
  expect_error "$name" "$want" -- timeout 60 "$LAZYBLK" run "${IMG[@]}" --overlay "$T/hov" \
    --restore "$T/h" </dev/null
  n=$((n + 1))
}
hostile "truncated vm.state" "truncated" truncate -s 700 "$T/h/vm.state"
hostile "truncated header" "truncated" truncate -s 100 "$T/h/vm.state"
hostile "truncated ram" "truncated, or not this snapshot's" truncate -s 32M "$T/h/ram"
hostile "header byte flipped" "header digest mismatch" edit "$T/h" 'b[20] ^= 1'
hostile "state byte flipped" "state digest mismatch" edit "$T/h" 'b[600] ^= 1'
hostile "ram byte flipped" "ram: digest mismatch" \
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(0x200010); c = f.read(1); f.seek(0x200010); f.write(bytes([c[0] ^ 0xff]))' "$T/h/ram"
hostile "another CPU model" "another CPU model" sh -c "$(declare -f edit fixsum); edit '$T/h' 'b[40] ^= 1'; fixsum '$T/h'"
hostile "crafted sregs" "KVM_SET_SREGS" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(2); struct.pack_into(\"<Q\", b, o + 224, 0x80000000)'; fixsum '$T/h'"
hostile "crafted MP state" "KVM_SET_MP_STATE" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(8); struct.pack_into(\"<I\", b, o, 99)'; fixsum '$T/h'"
hostile "crafted record size" "record has" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(1); struct.pack_into(\"<I\", b, o - 8, 8)'; fixsum '$T/h'"
hostile "crafted virtio queue" "cannot have" sh -c "$(declare -f edit fixsum); edit '$T/h' 'o = rec(65); struct.pack_into(\"<I\", b, o + 40, 3)'; fixsum '$T/h'"
hostile "disk.delta altered" "not this snapshot's disk delta" \
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(-1, 2); c = f.read(1); f.seek(-1, 2); f.write(bytes([c[0] ^ 1]))' "$T/h/disk.delta"
expect_error "RAM size mismatch" "RAM size mismatch" -- timeout 60 "$LAZYBLK" run "${IMG[@]}" \
  --overlay "$T/hov2" --restore "$T/snap" --mem 128 </dev/null
expect_error "another layout" "another image layout" -- timeout 60 "$LAZYBLK" run \
  "$T/img2.layout" --store "$T/store" --overlay "$T/hov3" --restore "$T/snap" </dev/null
expect_error "overlay exists" "exists" -- timeout 60 "$LAZYBLK" run "${IMG[@]}" \
  --overlay "$T/ov1" --restore "$T/snap" </dev/null
cp "$GUEST" "$T/other.elf"
printf 'x' >>"$T/other.elf"
expect_error "another kernel" "not the kernel the snapshot was taken with" -- timeout 60 \
  "$LAZYBLK" run "${IMG[@]}" --overlay "$T/hov4" --restore "$T/snap" --kernel "$T/other.elf" \
  </dev/null
expect_error "no image given" "the snapshot's VM has 1" -- timeout 60 "$LAZYBLK" run --restore "$T/snap" \
  </dev/null
echo "ok: $((n + 5)) hostile or mismatched restores refused"
