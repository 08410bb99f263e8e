#!/bin/bash
# The built-in VMM (`lazyblk run`) runs the freestanding test guest (tests/guest/, built by
# make next to the lazyblk binary: $(BUILD)/guest/testguest.elf, or $GUEST): it checks
# boot_params, e820, the ACPI tables, finds the virtio-mmio disk in the DSDT, negotiates
# features and runs virtio-blk requests (multi-segment, indirect, event-idx, FLUSH, DISCARD,
# WRITE_ZEROES, errors) and hostile descriptor chains, one "guest: NAME: ok" line each, then
# "guest: PASS" and exit status 0 through port 0x441. Afterwards the disk file must hold the
# guest's writes and zeroed ranges (pattern: tests/guest/disk.py).
# The same guest first runs under QEMU microvm (its PVH entry) against QEMU's virtio-blk as
# the reference device, when qemu-system-x86_64 is installed.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/nested.sh"

GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
GUESTDIR=$(cd "$(dirname "$0")/../guest" && pwd)
DISKPY=$GUESTDIR/disk.py
[ -f "$GUEST" ] || die "no test guest at $GUEST (make guest builds it)"

# the check lines every raw-disk run prints (after "guest: "), each must end in ": ok"
CHECKS=(
  "e820" "acpi: RSDP" "acpi: XSDT" "acpi: XSDT entries" "acpi: FACP" "acpi: FACP HW_REDUCED_ACPI"
  "acpi: FACP X_DSDT" "acpi: APIC" "acpi: APIC entries" "acpi: DSDT" "acpi: DSDT LNRO0005"
  "virtio-mmio" "virtio-mmio version" "virtio: features offered" "virtio: FEATURES_OK"
  "virtio: config" "virtio: queue 0" "virtio: DRIVER_OK" "GET_ID"
  "read" "read multi-segment" "read indirect" "read batch"
  "write multi-segment" "write multi-segment read back" "write indirect" "write indirect read back"
  "FLUSH" "DISCARD" "DISCARD read back" "WRITE_ZEROES" "WRITE_ZEROES read back"
  "WRITE_ZEROES unmap" "WRITE_ZEROES unmap read back"
  "read across the end" "read beyond capacity" "read at sector 2^55+1" "write beyond capacity"
  "WRITE_ZEROES beyond capacity" "unknown request type"
  "event-idx: suppressed" "event-idx: notified" "event-idx: avail_event"
  "hostile: buffer outside RAM (0xfff0000000, IN)" "hostile: buffer outside RAM (0xfff0000000, OUT)"
  "hostile: buffer across the end of RAM" "hostile: 4 GiB buffer"
  "hostile: chain loops (desc 0 -> 0)" "hostile: chain loops (0 -> 1 -> 2 -> 1)"
  "hostile: INDIRECT inside an indirect table" "hostile: chain longer than SEG_MAX"
  "hostile: avail entry >= queue size" "hostile: indirect table outside RAM"
  "hostile: indirect table length 53" "hostile: 8-byte request header"
  "hostile: read-only status descriptor" "hostile: read-only status untouched"
  "hostile: IN into a device-readable buffer" "hostile: device-readable buffer untouched"
  "hostile: device still works"
)

# check_output LOG WHAT: every check line present and ok, no FAIL, PASS last
check_output() {
  local log=$1 what=$2 c
  tr -d '\r' <"$log" >"$log.txt"
  if grep -q "guest: .*FAIL" "$log.txt"; then
    grep "guest: .*FAIL" "$log.txt" | head -20 >&2
    die "$what: the guest reports failures"
  fi
  for c in "${CHECKS[@]}"; do
    grep -qF "guest: $c: ok" "$log.txt" || { tail -n 30 "$log.txt" >&2; die "$what: no 'guest: $c: ok' line"; }
  done
  grep -qx "guest: PASS" "$log.txt" || die "$what: no 'guest: PASS'"
  echo "ok: $what: $(grep -c ': ok' "$log.txt") checks, guest: PASS"
}

# ---- reference: QEMU microvm (PVH entry), QEMU's virtio-blk device
ran_qemu=0
# (not again in the nested VM that tests lazyblk run where this machine has no /dev/kvm)
if [ -z "${LAZYBLK_NESTED:-}" ] && command -v qemu-system-x86_64 >/dev/null 2>&1; then
  python3 "$DISKPY" make "$T/qdisk.img"
  rc=0
  timeout 120 qemu-system-x86_64 -M microvm,acpi=on -accel tcg -m 64M -nodefaults -no-reboot \
    -nographic -serial stdio -kernel "$GUEST" -global virtio-mmio.force-legacy=false \
    -device virtio-blk-device,drive=d0,serial=lazyblk-test \
    -drive id=d0,file="$T/qdisk.img",format=raw,if=none,discard=unmap \
    -device isa-debug-exit,iobase=0x441,iosize=1 \
    -append "testguest.lenient=1 testguest.discard_zeroes=1 testguest.id=lazyblk-test testguest.no_cmdline_devices=1" \
    >"$T/qemu.log" 2>&1 </dev/null || rc=$?
  # isa-debug-exit: a guest status s exits QEMU with (s << 1) | 1
  [ "$rc" -eq 1 ] || { tail -n 30 "$T/qemu.log" >&2; die "QEMU microvm: exit $rc, want 1 (guest status 0)"; }
  grep -q "entered via PVH" "$T/qemu.log" || die "QEMU microvm: not entered via PVH"
  check_output "$T/qemu.log" "QEMU microvm reference"
  # QEMU bounce-buffers the hostile OUT from unassigned memory onto sector 8 (lenient mode)
  python3 "$DISKPY" check "$T/qdisk.img" --discard-zeroes --log "$T/qemu.log.txt" --ignore 8 ||
    die "QEMU microvm: disk contents"
  ran_qemu=1
fi
qemu_note=""
[ $ran_qemu -eq 1 ] && qemu_note=" (the guest passed under QEMU microvm)"

# ---- lazyblk run
kvm_require   # (nested: the QEMU microvm reference is not run again there)
help=$("$LAZYBLK" run --help 2>&1 || true)
if grep -q "not available" <<<"$help"; then
  skip "lazyblk run not available in this build$qemu_note"
fi
grep -q -- "--disk" <<<"$help" || skip "lazyblk run has no --disk option$qemu_note"

python3 "$DISKPY" make "$T/disk.img"
rc=0
timeout 300 "$LAZYBLK" run --kernel "$GUEST" --disk "$T/disk.img" --cpus 1 --mem 64 \
  --append "testguest.discard_zeroes=1" >"$T/run.log" 2>"$T/run.err" </dev/null || rc=$?
[ "$rc" -eq 0 ] || { tail -n 30 "$T/run.log" "$T/run.err" >&2; die "lazyblk run: exit $rc, want 0"; }
grep -q "entered via the Linux 64-bit boot protocol" "$T/run.log" ||
  die "lazyblk run: the guest was not entered through the 64-bit boot protocol"
grep -qF "guest: boot_params: ok" "$T/run.log" || die "lazyblk run: no 'guest: boot_params: ok'"
grep -qF "guest: cmdline virtio_mmio.device: ok" "$T/run.log" ||
  die "lazyblk run: no virtio_mmio.device= on the command line matching the DSDT"
check_output "$T/run.log" "lazyblk run (raw disk)"
python3 "$DISKPY" check "$T/disk.img" --discard-zeroes --log "$T/run.log.txt" ||
  die "lazyblk run: disk contents"
echo "ok: lazyblk run: disk file holds the guest's writes"

# ---- lazyblk run with the lazy image as the disk (read lazily from the store, writes to the
# overlay): reads checked against `lazyblk export` (FNV-1a sums passed on the command line),
# then a second run on the same overlay checks that the first run's writes and zeroed ranges
# are there. The guest is not Linux, so it gets a one-byte --initrd instead of the built one.
if grep -q "not available" <<<"$("$LAZYBLK" mkfs --help 2>&1)"; then
  echo "ok: lazy image part skipped (mkfs not available)"
  exit 0
fi
mkdir -p "$T/tree"
python3 - "$T/tree/marker.bin" <<'PY'
import sys
from array import array
open(sys.argv[1], "wb").write(array("Q", (i ^ 0x1234567812345678 for i in range(3 << 17))).tobytes())
PY
echo hello >"$T/tree/hello"
"$LAZYBLK" import "$T/tree" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/img.raw" >/dev/null
# the scratch range for writes lies inside marker.bin's 3 MiB (lazily fetched chunk data)
scr=$(python3 "$DISKPY" find "$T/img.raw" "$T/tree/marker.bin") || die "marker.bin not found in the export"
printf 'x' >"$T/dummy.initrd"
IMAGE_CHECKS=("read sum0" "read sum1" "read sum2" "read sum3" "write multi-segment read back"
  "write indirect read back" "FLUSH" "DISCARD read back" "WRITE_ZEROES read back"
  "WRITE_ZEROES unmap read back" "hostile: device still works")
# run 1 records a boot trace (img.manifest beside img.layout names the files), run 2 prefetches it
TRACE_ARGS=([1]="--trace-record $T/run.trace" [2]="--prefetch $T/run.trace")
for phase in 1 2; do
  sums=$(python3 "$DISKPY" sums "$T/img.raw" "$scr" $phase)
  rc=0
  # shellcheck disable=SC2086
  timeout 300 "$LAZYBLK" run "$T/img.layout" --store "$T/store" --overlay "$T/img.overlay" \
    ${TRACE_ARGS[$phase]} \
    --kernel "$GUEST" --initrd "$T/dummy.initrd" --cpus 1 --mem 64 --stats-json "$T/img$phase.json" \
    --append "testguest.mode=image testguest.scratch=$scr testguest.discard_zeroes=1 $sums" \
    >"$T/img$phase.log" 2>"$T/img$phase.err" </dev/null || rc=$?
  tr -d '\r' <"$T/img$phase.log" >"$T/img$phase.log.txt"
  for c in "${IMAGE_CHECKS[@]}"; do
    grep -qF "guest: $c: ok" "$T/img$phase.log.txt" ||
      { tail -n 30 "$T/img$phase.log.txt" "$T/img$phase.err" >&2; die "lazy image run $phase: no 'guest: $c: ok'"; }
  done
  [ $phase -eq 1 ] || grep -qF "guest: read sum5: ok" "$T/img$phase.log.txt" ||
    die "lazy image run 2: the first run's changes are not all in the overlay"
  if [ "$rc" -ne 0 ] || ! grep -qx "guest: PASS" "$T/img$phase.log.txt"; then
    grep "guest: .*FAIL" "$T/img$phase.log.txt" >&2 || true
    die "lazy image run $phase: exit $rc, want 0 and guest: PASS"
  fi
  python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(not (s["reads"] > 0 and s["writes"] > 0 and s["flushes"] > 0 and s["dirty_blocks"] > 0))' \
    "$T/img$phase.json" || die "lazy image run $phase: statistics $(cat "$T/img$phase.json")"
  echo "ok: lazy image run $phase: $(grep -c ': ok' "$T/img$phase.log.txt") checks, guest: PASS"
done
"$LAZYBLK" trace show "$T/run.trace" >"$T/run.trace.txt" || die "run --trace-record: no trace"
grep -q " /marker.bin " "$T/run.trace.txt" || die "run --trace-record: marker.bin not in the trace"
python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(not (s["prefetch"] and s["prefetch_planned"] > 0))' \
  "$T/img2.json" || die "run --prefetch: statistics $(cat "$T/img2.json")"
echo "ok: run --trace-record wrote a trace naming marker.bin; run --prefetch replayed it"
