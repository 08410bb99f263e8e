#!/bin/bash
# lazyblk export: usage and input errors (one line, exit 2 for usage, 1 otherwise); with a
# working mkfs also missing/corrupt chunks, atomic and sparse output, and e2fsck on it.
. "$(dirname "$0")/lib/common.sh"

grep -q "^usage: lazyblk export IMAGE.layout|REF --store DIR -o DISK.raw" <<<"$("$LAZYBLK" export --help)" ||
  die "export --help"

mkdir -p "$T/src" "$T/out"
echo hello >"$T/src/hello"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null

# usage errors: exit 2
expect_error "no layout" "missing IMAGE.layout" -- \
  "$LAZYBLK" export --store "$T/store" -o "$T/d.raw"
expect_error "no store" "missing --store DIR" -- "$LAZYBLK" export "$T/x.layout" -o "$T/d.raw"
expect_error "no output" "missing -o DISK.raw" -- "$LAZYBLK" export "$T/x.layout" --store "$T/store"
expect_error "extra argument" "unexpected argument 'more'" -- \
  "$LAZYBLK" export "$T/x.layout" more --store "$T/store" -o "$T/d.raw"
expect_error "unknown option" "unknown option '--bogus'" -- "$LAZYBLK" export --bogus "$T/x.layout"
expect_error "option without argument" "option '-o' needs an argument" -- \
  "$LAZYBLK" export "$T/x.layout" --store "$T/store" -o
expect_rc 2 "$LAZYBLK" export
expect_rc 2 "$LAZYBLK" export "$T/x.layout" --store "$T/store"

# bad inputs: exit 1, nothing written
expect_error "missing layout" "export: $T/none.layout: No such file or directory" -- \
  "$LAZYBLK" export "$T/none.layout" --store "$T/store" -o "$T/out/d.raw"
head -c 9000 /dev/urandom >"$T/junk.layout"
expect_error "bad magic" "$T/junk.layout: bad magic (not a lazyblk layout)" -- \
  "$LAZYBLK" export "$T/junk.layout" --store "$T/store" -o "$T/out/d.raw"
expect_error "manifest as layout" "bad magic (not a lazyblk layout)" -- \
  "$LAZYBLK" export "$T/img.manifest" --store "$T/store" -o "$T/out/d.raw"
printf 'LZBKLAYT\001\000\000\000' >"$T/short.layout"
expect_error "short layout" "truncated (shorter than the header)" -- \
  "$LAZYBLK" export "$T/short.layout" --store "$T/store" -o "$T/out/d.raw"
expect_error "layout is a directory" "Is a directory" -- \
  "$LAZYBLK" export "$T/src" --store "$T/store" -o "$T/out/d.raw"
expect_rc 1 "$LAZYBLK" export "$T/junk.layout" --store "$T/store" -o "$T/out/d.raw"
[ -z "$(ls -A "$T/out")" ] || die "failed export left files: $(ls "$T/out")"

if grep -q "not available" <<<"$("$LAZYBLK" mkfs --help)"; then
  echo "export: ok (mkfs not available: end-to-end part skipped)"
  exit 0
fi

# ---- with a real layout
head -c 3000000 /dev/urandom >"$T/src/big"
seq 1 20000 >"$T/src/seq"
rm -rf "$T/store"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
# a small disk keeps the comparisons below quick; any size will do
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null 2>&1 ||
  "$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" >/dev/null
expect_error "missing store" "$T/nostore: not a lazyblk store" -- \
  "$LAZYBLK" export "$T/img.layout" --store "$T/nostore" -o "$T/out/d.raw"
expect_error "output directory missing" "$T/out/no/d.raw: No such file or directory" -- \
  "$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/no/d.raw"

# a flipped byte in the layout's body
cp "$T/img.layout" "$T/flip.layout"
printf '\377' | dd of="$T/flip.layout" bs=1 seek=5000 conv=notrunc status=none
expect_error "corrupt layout" "checksum mismatch (file corrupt)" -- \
  "$LAZYBLK" export "$T/flip.layout" --store "$T/store" -o "$T/out/d.raw"

# export, replacing an existing file atomically
echo old >"$T/out/d.raw"
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/d.raw" >"$T/export.out" ||
  die "export failed"
grep -q "^exported " "$T/export.out" || die "no summary: $(cat "$T/export.out")"
# the summary counts the layout's chunks (each read once or more), not the loads
want=$(python3 -c 'import struct, sys; print(struct.unpack("<Q", open(sys.argv[1], "rb").read(56)[48:56])[0])' "$T/img.layout")
grep -q ", $want chunks" "$T/export.out" || die "summary does not say the layout's $want chunks: $(cat "$T/export.out")"
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/d2.raw" --mem-cache 1M >"$T/export2.out" ||
  die "export --mem-cache 1M failed"
grep -q ", $want chunks" "$T/export2.out" || die "--mem-cache 1M: $(cat "$T/export2.out")"
cmp -s "$T/out/d.raw" "$T/out/d2.raw" || die "--mem-cache 1M wrote another disk"
rm -f "$T/out/d2.raw"
expect_error "bad --mem-cache" "--mem-cache: 'lots' is not a size of at least 1 byte" -- \
  "$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/d3.raw" --mem-cache lots
[ "$(ls -A "$T/out")" = "d.raw" ] || die "stray files: $(ls "$T/out")"
size=$(stat -c %s "$T/out/d.raw")
used=$(( $(stat -c %b "$T/out/d.raw") * 512 ))
[ $((size % 4096)) -eq 0 ] && [ "$size" -ge $((64 << 20)) ] || die "odd disk size $size"
[ "$used" -lt $((size / 4)) ] || die "not sparse: $used bytes used of $size"
if command -v e2fsck >/dev/null; then
  e2fsck -fn "$T/out/d.raw" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log"; die "e2fsck"; }
fi
if command -v debugfs >/dev/null; then
  for f in big seq hello; do
    debugfs -R "cat /$f" "$T/out/d.raw" 2>/dev/null | cmp -s - "$T/src/$f" || die "/$f differs"
  done
fi
# chunks gone or corrupt: one line naming the chunk, no output, the old file kept
before=$(stat -c '%i %Y %s' "$T/out/d.raw")
chunk=$(find "$T/store/chunks" -type f | head -1)
hex=$(basename "$chunk")
mv "$chunk" "$T/chunk.save"
expect_error "missing chunk" "chunk $hex missing from the store" -- \
  "$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/d.raw"
head -c 100 /dev/urandom >"$chunk"
expect_error "garbage chunk" "chunk $hex is corrupt (not a valid zstd chunk)" -- \
  "$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/d.raw"
if command -v zstd >/dev/null; then
  echo "not the right content" >"$T/wrong"
  zstd -q -c "$T/wrong" >"$chunk" # from a file, so the frame declares its content size
  expect_error "wrong chunk" "chunk $hex is corrupt (content does not match its sha256 name)" -- \
    "$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/d.raw"
fi
[ "$(ls -A "$T/out")" = "d.raw" ] || die "failed export left files: $(ls "$T/out")"
[ "$(stat -c '%i %Y %s' "$T/out/d.raw")" = "$before" ] || die "old output replaced"
# repaired: the same layout exports to the same bytes again
mv "$T/chunk.save" "$chunk"
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/out/e.raw" >/dev/null
cmp -s "$T/out/d.raw" "$T/out/e.raw" || die "export after repair differs"
echo "export: ok"
