#!/bin/bash
# VM snapshots in a store (docs/run.md, "Snapshots in a store") with the freestanding test
# guest in count mode (as t_vm_snapshot.sh; tests/guest/count.c): the short version, in
# make test, of t_vm_travel.sh's Linux guest travelling by tag.
#  - `snapshot --vm SOCK DIR --store S` twice while the guest counts: the second stores
#    fewer pages than the first and keeps the rest; DIR holds snapshot.json only, the store
#    the state, the RAM, the page map, the committed disk and the document;
#  - a restore from the store (RAM brought in lazily through userfaultfd): the count goes on
#    from the snapshot, no boot, a new VM generation ID, every acknowledged record on its
#    disk; a snapshot of that restored VM into the store keeps the pages it did not write;
#  - two restores at once share the RAM file (one file in the cache directory while they
#    run, removed after) and both count to the end;
#  - refusals, one line each, nothing of the guest out: corrupt RAM chunks (the VM stops:
#    "guest RAM: ..."), a snapshot of another CPU model, no --store, an IMAGE.layout given
#    with a snapshot that names its image, an overlay that exists.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/nested.sh"
. "$TESTLIB/vmstate.sh"

GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
DISKPY=$(cd "$(dirname "$0")/../guest" && pwd)/disk.py
[ -f "$GUEST" ] || die "no test guest at $GUEST (make guest builds it)"
kvm_require
command -v zstd >/dev/null || skip "no zstd"

mkdir -p "$T/tree"
head -c 3145728 /dev/urandom >"$T/tree/data.bin"
"$LAZYBLK" import "$T/tree" --store "$T/S" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
find "$T/S/chunks" -type f | sort >"$T/chunks.before"   # the image's
printf 'x' >"$T/dummy.initrd"
LBA=200000
TO=2500      # a record every 40 counts: 62 of the 64 record sectors, none overwritten
US=$((1000 * ${LAZYBLK_TIME_SCALE:-1}))
GARGS="testguest.mode=count testguest.count_us=$US testguest.count_every=40"
GARGS="$GARGS testguest.count_lba=$LBA testguest.count_to=$TO"
CACHE=/dev/shm/lazyblk-$(id -u)

acked() { tr -d '\r' <"$1" | sed -n 's/^guest: count-disk: \(seq [0-9]* count [0-9]*\) ok$/\1/p'; }
genid() { tr -d '\r' <"$1" | sed -n 's/^guest: vmgenid: \([0-9a-f]\{32\}\) at .*/\1/p'; }
check_disk() { # OVERLAY LAYOUT RECORDS: every acknowledged record is on the disk
  rm -f "$T/chk.layout" "$T/disk.raw"
  "$LAZYBLK" commit "$1" --layout "$2" --store "$T/S" -o "$T/chk.layout" >/dev/null &&
    "$LAZYBLK" export "$T/chk.layout" --store "$T/S" -o "$T/disk.raw" >/dev/null ||
    die "commit and export of $1 on $2"
  python3 "$DISKPY" counts "$T/disk.raw" "$LBA" >"$T/disk.recs" || die "disk.py counts $1"
  rm -f "$T/disk.raw"
  local missing
  missing=$(sort -u "$3" | comm -23 - <(sort -u "$T/disk.recs"))
  [ -z "$missing" ] || die "$1: acknowledged records missing: $(echo "$missing" | sed -n 1,3p)"
}
consecutive() { # LOG FIRST: the counts are FIRST, FIRST+1, ..., TO
  counts "$1" | awk -v f="$2" -v to="$TO" 'NR - 1 + f != $1 { bad = 1; exit }
    END { if (!bad && $1 != to) bad = 1; exit bad }' ||
    die "$1: the counts are not $2, $(($2 + 1)), ..., $TO"
}
pages_stored() { [[ $1 =~ \(RAM:\ ([0-9]+)\ pages\ stored,\ ([0-9]+)\ kept ]] && echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"; }

# ---- 1. two snapshots into the store while the guest counts
"$LAZYBLK" run "$T/img.layout" --store "$T/S" --overlay "$T/ov0" --kernel "$GUEST" \
  --initrd "$T/dummy.initrd" --mem 64 --append "$GARGS" --control "$T/vm.sock" \
  >"$T/run0.log" 2>"$T/run0.err" </dev/null &
pid=$!
SERVERS+=("$pid")
wait_for -p "$pid" _count_ge "$T/run0.log" 300 || die "no count 300: $(cat "$T/run0.err")"
out1=$("$LAZYBLK" snapshot --vm "$T/vm.sock" "$T/snap1" --store "$T/S") || die "snapshot: $out1"
before=$(counts "$T/run0.log" | tail -n 1)
wait_for -p "$pid" _count_ge "$T/run0.log" $((before + 200)) || die "no count after the snapshot"
before=$(counts "$T/run0.log" | tail -n 1)
sed -n '1,$p' "$T/run0.log" >"$T/run0.before"   # what the guest had printed: in the snapshot
out2=$("$LAZYBLK" snapshot --vm "$T/vm.sock" "$T/snap" --store "$T/S") || die "snapshot 2: $out2"
after=$(counts "$T/run0.log" | tail -n 1)
timeout "$(tmo 120)" tail --pid=$pid -f /dev/null || true
wait $pid || die "the snapshotted run failed: $(cat "$T/run0.err")"
read -r p1 k1 <<<"$(pages_stored "$out1")" || die "snapshot said '$out1'"
read -r p2 k2 <<<"$(pages_stored "$out2")" || die "snapshot 2 said '$out2'"
[ "$k1" -eq 0 ] && [ "$p2" -lt "$p1" ] && [ "$k2" -gt 0 ] ||
  die "the second snapshot stored $p2 pages and kept $k2 (the first stored $p1)"
[ "$(ls "$T/snap")" = snapshot.json ] || die "the snapshot directory holds $(ls "$T/snap")"
id=$(sha256sum <"$T/snap/snapshot.json" | cut -d' ' -f1)
cmp -s "$T/snap/snapshot.json" "$T/S/snapshots/$id.json" || die "no STORE/snapshots/$id.json"
echo "ok: two snapshots into the store: $p1 pages stored, then $p2 stored and $k2 kept"

# ---- 2. a lazy restore from the store: the count goes on, new VM generation ID, its disk
timeout "$(tmo 120)" "$LAZYBLK" -v run --restore "$T/snap" --store "$T/S" --overlay "$T/ov1" \
  --control "$T/r1.sock" >"$T/run1.log" 2>"$T/run1.err" </dev/null ||
  die "restore failed: $(cat "$T/run1.err")"
! grep -q "count mode" "$T/run1.log" || die "the restored guest booted again"
first=$(counts "$T/run1.log" | sed -n 1p)
[ "$first" -gt "$before" ] && [ "$first" -le $((after + 1)) ] ||
  die "the restore went on at count $first (the snapshot between $before and $after)"
consecutive "$T/run1.log" "$first"
[ "$(genid "$T/run1.log" | tail -n 1)" != "$(genid "$T/run0.log" | tail -n 1)" ] ||
  die "the restored guest kept its VM generation ID"
grep -q "guest RAM: [1-9][0-9]* faults" "$T/run1.err" || die "no lazy RAM faults: $(cat "$T/run1.err")"
layout=$T/S/layouts/$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["disk"]["layout"][7:])' "$T/snap/snapshot.json").layout
{ acked "$T/run0.before"; acked "$T/run1.log"; } >"$T/want1"
check_disk "$T/ov1" "$layout" "$T/want1"
echo "ok: restored lazily from the store at count $first, to $TO, new VM generation ID, records on disk"

# ---- 3. a snapshot of the restored VM keeps what it did not write; two restores at once
"$LAZYBLK" run --restore "$T/snap" --store "$T/S" --overlay "$T/ov2" --control "$T/r2.sock" \
  >"$T/run2.log" 2>"$T/run2.err" </dev/null &
pid=$!
SERVERS+=("$pid")
wait_for -p "$pid" _count_ge "$T/run2.log" $((before + 100)) || die "restore 2: no count"
out3=$("$LAZYBLK" snapshot --vm "$T/r2.sock" "$T/snap3" --store "$T/S") || die "snapshot 3: $out3"
read -r p3 k3 <<<"$(pages_stored "$out3")" || die "snapshot 3 said '$out3'"
[ "$k3" -gt "$p3" ] || die "a snapshot of a restored VM stored $p3 pages and kept only $k3"
"$LAZYBLK" run --restore "$T/snap" --store "$T/S" --overlay "$T/ov3" \
  >"$T/run3.log" 2>"$T/run3.err" </dev/null &
pid3=$!
SERVERS+=("$pid3")
wait_for -p "$pid3" _count_ge "$T/run3.log" $((before + 5)) || die "restore 3: no count"
[ "$(find "$CACHE" -name "$id.ram" | wc -l)" -eq 1 ] || die "two restores and no $CACHE/$id.ram"
for p in "$pid" "$pid3"; do
  timeout "$(tmo 120)" tail --pid="$p" -f /dev/null || true
  wait "$p" || die "a restore of two at once failed"
done
consecutive "$T/run3.log" "$(counts "$T/run3.log" | sed -n 1p)"
[ ! -e "$CACHE/$id.ram" ] || die "$CACHE/$id.ram left after the last restore"
echo "ok: a snapshot of a restored VM stored $p3 pages and kept $k3; two restores at once shared $id.ram"

# ---- 4. refusals
# expect_fail NAME WANT CMD...: exit 1 with WANT in its message, no console output
expect_fail() {
  local name=$1 want=$2 r=0
  shift 2
  timeout "$(tmo 120)" "$@" </dev/null >"$T/f.out" 2>"$T/f.err" || r=$?
  [ "$r" -ne 0 ] && grep -q -- "$want" "$T/f.err" ||
    die "$name: exit $r, '$(cat "$T/f.err")' (want '$want')"
  [ ! -s "$T/f.out" ] || die "$name: the guest's output got out: $(head -c 200 "$T/f.out")"
  echo "ok: $name: $(grep -m1 -- "$want" "$T/f.err" | cut -c1-110)"
}
rm -rf "$T/C"
cp -a "$T/S" "$T/C"
python3 - "$T/snap/snapshot.json" >"$T/keep.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in [d["state"]] + d["ram"]["map"]:
    print(x["digest"][7:])
PY
n=0
while read -r f; do
  grep -qxF "$f" "$T/chunks.before" && continue
  grep -qxF "$(basename "$f")" "$T/keep.txt" && continue
  printf 'x' | dd of="$T/C/${f#"$T/S/"}" bs=1 seek=20 conv=notrunc status=none
  n=$((n + 1))
done < <(find "$T/S/chunks" -type f | sort)
[ "$n" -gt 0 ] || die "no RAM chunk to corrupt"
rm -rf "$T/C/plain"
expect_fail "$n corrupt RAM chunks" "guest RAM: " "$LAZYBLK" run --restore "$T/snap" --store "$T/C" --overlay "$T/ovc"

# another CPU: the state chunk forged (leaf 0 changed in the CPUID record, the signature and
# digests made right), the document pointing at it
rm -rf "$T/st" "$T/snapd" && mkdir "$T/st" "$T/snapd"
sd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["digest"][7:])' "$T/snap/snapshot.json")
zstd -q -d -c "$T/S/chunks/${sd:0:2}/$sd" >"$T/st/vm.state"
edit "$T/st" 'o = rec(35); b[o + 20] ^= 1'
cpusig "$T/st"
fixsum "$T/st"
nd=$(sha256sum <"$T/st/vm.state" | cut -d' ' -f1)
mkdir -p "$T/S/chunks/${nd:0:2}"
zstd -q -3 -c "$T/st/vm.state" >"$T/S/chunks/${nd:0:2}/$nd"
sed "s/$sd/$nd/" "$T/snap/snapshot.json" >"$T/snapd/snapshot.json"
expect_fail "another CPU model" "another CPU model" "$LAZYBLK" run --restore "$T/snapd" --store "$T/S" --overlay "$T/ovd"
[ ! -e "$T/ovd" ] || die "the refused restore left its overlay"

expect_fail "no --store" "give --store" "$LAZYBLK" run --restore "$T/snap" --overlay "$T/ove"
expect_fail "an IMAGE.layout too" "names its image" "$LAZYBLK" run "$T/img.layout" --restore "$T/snap" --store "$T/S" --overlay "$T/ove"
expect_fail "no --overlay" "give --overlay NEW" "$LAZYBLK" run --restore "$T/snap" --store "$T/S"
expect_fail "an overlay that exists" "exists" "$LAZYBLK" run --restore "$T/snap" --store "$T/S" --overlay "$T/ov1"
echo "VM snapshots in a store: ok"
