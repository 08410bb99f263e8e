#!/bin/bash
# A trace's creation time is at most 9999-12-31 23:59:59 UTC (docs/formats.md): a later one,
# which gmtime cannot turn into a date, is refused with one line by `trace show` (text and
# JSON) and by `warm --trace`; `trace show` printed it through a NULL struct tm and crashed
# (issue 24, item 4). The latest time allowed and a zero one are shown as dates.
. "$(dirname "$0")/lib/common.sh"

# trace_at OUT CREATED: a trace of one metadata read, created at CREATED (docs/formats.md).
trace_at() {
  python3 - "$@" <<'PY'
import hashlib, struct, sys
out, created = sys.argv[1], int(sys.argv[2], 0)
strings, recs = b"\0", [(0, 0, 0, 4096, 0)]
h = struct.pack("<8sIIQQ32s32sQQI44x", b"LZBKTRAC", 1, 160, len(recs), len(strings),
                bytes(32), bytes(32), created, 30, 0)
body = h + b"".join(struct.pack("<QQQII", *r) for r in recs) + strings
open(out, "wb").write(body + hashlib.sha256(body).digest())
PY
}

WHY="creation time out of range"
for c in 0x4000000000000000 0x7fffffffffffffff 0xffffffffffffffff 253402300800; do
  trace_at "$T/bad.trace" "$c"
  expect_error "trace show, created $c" "bad.trace: $WHY" -- "$LAZYBLK" trace show "$T/bad.trace"
  expect_error "trace show --json, created $c" "bad.trace: $WHY" -- \
    "$LAZYBLK" trace show --json "$T/bad.trace"
done

mkdir -p "$T/src"
echo hi >"$T/src/f"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/i.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/i.manifest" -o "$T/i.layout" >/dev/null
expect_error "warm --trace" "bad.trace: $WHY" -- \
  "$LAZYBLK" warm "$T/i.layout" --trace "$T/bad.trace" --store "$T/store"

trace_at "$T/last.trace" 253402300799
"$LAZYBLK" trace show "$T/last.trace" | grep -q "^recorded  9999-12-31 23:59:59 UTC" ||
  die "the latest creation time allowed is not shown as a date"
trace_at "$T/zero.trace" 0
"$LAZYBLK" trace show "$T/zero.trace" | grep -q "^recorded  1970-01-01 00:00:00 UTC" ||
  die "creation time 0 is not shown as 1970"
echo "ok: creation times past 9999 refused"
