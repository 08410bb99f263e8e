#!/bin/bash
# The files' pieces tile the manifest's chunks[] in entry order (docs/formats.md): a manifest
# whose files share pieces, or name them out of order, is refused with one line by every
# command that loads one — `manifest show`, `mkfs`, `warm --trace`, `serve --prefetch` and
# `serve --trace-record` — before anything sized by its piece count is filled. Files that
# shared pieces used to overflow trace indexing's table (ASan: heap-buffer-overflow WRITE;
# issue 24, item 1). Manifests lazyblk writes itself (hard links, identical files, packed
# small files, sparse files, a repack) keep loading.
. "$(dirname "$0")/lib/common.sh"
PATCH="$TESTLIB/mfpatch.py"

# layout_for LAYOUT MANIFEST OUT: LAYOUT, its header saying it was made from MANIFEST (the
# digest patched in, the header crc32c fixed), so that only the manifest's check stands
# between the manifest and its use.
layout_for() {
  python3 - "$@" <<'PY'
import hashlib, struct, sys
lay, man, out = sys.argv[1:]
b = bytearray(open(lay, "rb").read())
b[64:96] = open(man, "rb").read()[-32:]
struct.pack_into("<I", b, 144, 0)
crc = 0xFFFFFFFF
for x in b[:168]:
    crc ^= x
    for _ in range(8):
        crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
struct.pack_into("<I", b, 144, crc)
open(out, "wb").write(b)
PY
}

# trace_of OUT PATH...: a trace reading the first 4 KiB of each PATH (docs/formats.md).
trace_of() {
  python3 - "$@" <<'PY'
import hashlib, struct, sys
out, paths = sys.argv[1], sys.argv[2:]
strings, recs = b"\0", []
for i, p in enumerate(paths):
    recs.append((i, (i + 1) << 20, 0, 4096, len(strings)))
    strings += p.encode() + b"\0"
h = struct.pack("<8sIIQQ32s32sQQI44x", b"LZBKTRAC", 1, 160, len(recs), len(strings),
                bytes(32), bytes(32), 1700000000, 30, 0)
body = h + b"".join(struct.pack("<QQQII", *r) for r in recs) + strings
open(out, "wb").write(body + hashlib.sha256(body).digest())
PY
}

# ---- a hostile manifest: /b and /c name /a's two pieces (6 file pieces over 4)
mkdir -p "$T/src"
head -c 8192 /dev/urandom >"$T/src/a"
head -c 4096 /dev/urandom >"$T/src/b"
head -c 4096 /dev/urandom >"$T/src/c"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/good.manifest" --chunk-size 4K >/dev/null
# entries: 0 /, 1 /a (pieces 0 and 1), 2 /b (piece 2), 3 /c (piece 3)
"$LAZYBLK" mkfs "$T/good.manifest" -o "$T/good.layout" >/dev/null
trace_of "$T/b.trace" /b /c

python3 "$PATCH" "$T/good.manifest" "$T/shared.manifest" \
  entry 2 chunk_first=0 chunk_count=2 size=8192 entry 3 chunk_first=0 chunk_count=2 size=8192
python3 "$PATCH" "$T/good.manifest" "$T/swapped.manifest" entry 2 chunk_first=3 entry 3 chunk_first=2
python3 "$PATCH" "$T/good.manifest" "$T/unused.manifest" entry 3 chunk_count=0 size=0
WHY="pieces of files overlap or are out of order"
for m in shared swapped unused; do
  want=$WHY
  [ "$m" != unused ] || want="pieces that no file names"
  expect_error "manifest show: $m" "$m.manifest: $want" -- \
    "$LAZYBLK" manifest show "$T/$m.manifest"
  expect_error "mkfs: $m" "$m.manifest: $want" -- \
    "$LAZYBLK" mkfs "$T/$m.manifest" -o "$T/$m.layout"
  [ ! -e "$T/$m.layout" ] || die "mkfs wrote a layout from $m.manifest"
done

# warm and serve, with a layout that says it was made from the hostile manifest
layout_for "$T/good.layout" "$T/shared.manifest" "$T/shared.layout"
expect_error "warm --trace" "shared.manifest: $WHY" -- \
  "$LAZYBLK" warm "$T/shared.layout" --trace "$T/b.trace" --manifest "$T/shared.manifest" \
  --store "$T/store"
expect_error "serve --prefetch" "shared.manifest: $WHY" -- \
  "$LAZYBLK" serve "$T/shared.layout" --store "$T/store" --nbd "unix:$T/nbd.sock" \
  --prefetch "$T/b.trace" --manifest "$T/shared.manifest"
expect_error "serve --trace-record" "shared.manifest: $WHY" -- \
  "$LAZYBLK" serve "$T/shared.layout" --store "$T/store" --nbd "unix:$T/nbd.sock" \
  --trace-record "$T/new.trace" --manifest "$T/shared.manifest"
[ ! -e "$T/new.trace" ] || die "serve wrote a trace"
# the good manifest with the same layout and trace still warms
"$LAZYBLK" warm "$T/good.layout" --trace "$T/b.trace" --manifest "$T/good.manifest" \
  --store "$T/store" >/dev/null || die "warm of the good manifest failed"

# ---- what lazyblk writes keeps loading: hard links, identical files (their own pieces of
# the same chunks), packed small files, a sparse file, big files over several chunks; a
# repack of it; the same tree from a tar
mkdir -p "$T/tree/d/e" "$T/tree/z"
for i in 1 2 3; do echo same >"$T/tree/d/same$i"; done
head -c 300000 /dev/urandom >"$T/tree/d/big"
cp "$T/tree/d/big" "$T/tree/z/bigcopy"
ln "$T/tree/d/big" "$T/tree/a-hard"
ln "$T/tree/d/same1" "$T/tree/d/e/h"
printf x >"$T/tree/d/e/x"
truncate -s 1M "$T/tree/sparse"
echo tail >>"$T/tree/sparse"
"$LAZYBLK" import "$T/tree" --store "$T/store" -o "$T/tree.manifest" --chunk-size 64K >/dev/null
tar -C "$T/tree" -cf "$T/tree.tar" .
"$LAZYBLK" import "$T/tree.tar" --store "$T/store" -o "$T/tar.manifest" --chunk-size 64K >/dev/null
trace_of "$T/tree.trace" /a-hard /sparse /z/bigcopy /d/same2
"$LAZYBLK" repack "$T/tree.manifest" --trace "$T/tree.trace" --store "$T/store" \
  -o "$T/repacked.manifest" --chunk-size 16K >/dev/null
for m in tree tar repacked; do
  "$LAZYBLK" manifest show "$T/$m.manifest" >/dev/null || die "$m.manifest refused"
  "$LAZYBLK" mkfs "$T/$m.manifest" -o "$T/$m.layout" >/dev/null || die "mkfs $m.manifest failed"
done
"$LAZYBLK" warm "$T/repacked.layout" --trace "$T/tree.trace" --manifest "$T/repacked.manifest" \
  --store "$T/store" >/dev/null || die "warm of the repacked image failed"
echo "ok: shared, swapped and unused pieces refused; imports and repacks load"
