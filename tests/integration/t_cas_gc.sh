#!/bin/bash
# lazyblk cas gc: keeps every chunk a --keep layout or manifest references, removes the
# rest once older than the grace period (and stale tmp/ files), dry run removes nothing,
# and bad input is one line with nothing removed.
. "$(dirname "$0")/lib/common.sh"

nchunks() { find "$T/store/chunks" -type f | wc -l; }
age_all() { find "$T/store/chunks" "$T/store/tmp" -type f -exec touch -m -d '3 hours ago' {} +; }

grep -q "lazyblk cas gc --store DIR \[--keep FILE|REF ...\]" <<<"$("$LAZYBLK" cas --help)" || die "cas --help"

mkdir -p "$T/a" "$T/b"
head -c 3000000 /dev/urandom >"$T/a/big"
seq 1 20000 >"$T/a/seq"
head -c 2000000 /dev/urandom >"$T/b/other"
echo "only in b" >"$T/b/note"
"$LAZYBLK" import "$T/a" --store "$T/store" -o "$T/a.manifest" >/dev/null
"$LAZYBLK" import "$T/b" --store "$T/store" -o "$T/b.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/a.manifest" -o "$T/a.layout" >/dev/null
"$LAZYBLK" mkfs "$T/b.manifest" -o "$T/b.layout" >/dev/null
total=$(nchunks)
[ "$total" -ge 4 ] || die "too few chunks to test with ($total)"

# ---- usage errors: exit 2, one line, nothing removed
age_all
expect_error "no store" "missing --store DIR" -- "$LAZYBLK" cas gc --keep "$T/a.layout"
expect_error "bad grace" "--grace: 'soon' is not a number of seconds" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" --grace soon
expect_error "negative grace" "is not a number of seconds" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" --grace -5
expect_error "keep on stats" "--keep is only for cas gc" -- \
  "$LAZYBLK" cas stats --store "$T/store" --keep "$T/a.layout"
expect_error "extra argument" "unexpected argument 'more'" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" more
# ---- bad inputs: exit 1, the file named, nothing removed
expect_error "missing keep file" "$T/none.layout: No such file or directory; nothing removed" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" --keep "$T/none.layout"
head -c 9000 /dev/urandom >"$T/junk"
expect_error "junk keep file" "$T/junk: bad magic (not a lazyblk layout or manifest)" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/junk" --keep "$T/a.layout"
cp "$T/a.layout" "$T/flip.layout"
printf '\377' | dd of="$T/flip.layout" bs=1 seek=5000 conv=notrunc status=none
expect_error "corrupt keep layout" "$T/flip.layout: checksum mismatch" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/flip.layout"
expect_error "keep is a directory" "$T/a: a directory, not a VM snapshot (no snapshot.json)" -- \
  "$LAZYBLK" cas gc --store "$T/store" --keep "$T/a"
expect_error "not a store" "$T/nostore: not a lazyblk store" -- \
  "$LAZYBLK" cas gc --store "$T/nostore" --keep "$T/a.layout"
expect_rc 1 "$LAZYBLK" cas gc --store "$T/store" --keep "$T/junk"
[ "$(nchunks)" -eq "$total" ] || die "a failed gc removed chunks"

# ---- new chunks are within the default grace period (an import still running is safe)
touch -m "$T/store/chunks"/*/*
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" >"$T/out" || die "gc failed"
cat "$T/out"
grep -Eq '^gc: removed 0 chunks \(0 B\), kept [0-9]+ \(.*\), [1-9][0-9]* newer than the grace period' \
  "$T/out" || die "gc within grace: $(cat "$T/out")"
[ "$(nchunks)" -eq "$total" ] || die "gc removed chunks within the grace period"

# ---- dry run: reports, removes nothing
age_all
hex=$(find "$T/store/chunks" -type f | head -1 | xargs basename)
echo stale >"$T/store/tmp/$hex.99999.1"
touch -m -d '3 hours ago' "$T/store/tmp/$hex.99999.1"
echo fresh >"$T/store/tmp/$hex.99999.2"
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" --dry-run >"$T/out" || die "dry run"
cat "$T/out"
grep -Eq '^gc: would remove [1-9][0-9]* chunks? \(.*\), kept [1-9][0-9]* .*, 1 stale temporary file \(6 B\), 1 temporary file newer than the grace period \(6 B\)$' \
  "$T/out" || die "dry run output: $(cat "$T/out")"
[ "$(nchunks)" -eq "$total" ] || die "dry run removed chunks"
[ -e "$T/store/tmp/$hex.99999.1" ] || die "dry run removed a tmp file"

# ---- without --keep: the temporaries only, older than 10 minutes unless --grace says;
# no chunk is removed (item 13 of issue 14: an interrupted import's leftovers needed --keep)
echo killed >"$T/store/tmp/$hex.99999.3"
touch -m -d '15 minutes ago' "$T/store/tmp/$hex.99999.3"
"$LAZYBLK" cas gc --store "$T/store" --dry-run >"$T/out" || die "tmp-only dry run"
cat "$T/out"
grep -qx 'gc: would remove 2 stale temporary files (13 B), 1 temporary file newer than the grace period (6 B); chunks only with --keep' \
  "$T/out" || die "tmp-only dry run output: $(cat "$T/out")"
[ -e "$T/store/tmp/$hex.99999.3" ] || die "tmp-only dry run removed a tmp file"
"$LAZYBLK" cas gc --store "$T/store" --grace 3600 >"$T/out" || die "tmp-only gc"
cat "$T/out"
grep -qx 'gc: removed 1 stale temporary file (6 B), 2 temporary files newer than the grace period (13 B); chunks only with --keep' \
  "$T/out" || die "tmp-only gc --grace 3600 output: $(cat "$T/out")"
[ ! -e "$T/store/tmp/$hex.99999.1" ] || die "stale tmp file left (--grace 3600)"
[ -e "$T/store/tmp/$hex.99999.3" ] || die "tmp file within --grace 3600 removed"
"$LAZYBLK" cas gc --store "$T/store" >"$T/out" || die "tmp-only gc"
grep -q '^gc: removed 1 stale temporary file (7 B), 1 temporary file newer' "$T/out" ||
  die "tmp-only gc output: $(cat "$T/out")"
[ ! -e "$T/store/tmp/$hex.99999.3" ] || die "15-minute-old tmp file left"
[ "$(nchunks)" -eq "$total" ] || die "gc without --keep removed chunks"
echo stale >"$T/store/tmp/$hex.99999.1"
touch -m -d '3 hours ago' "$T/store/tmp/$hex.99999.1"

# ---- for real, keeping a's layout: b's chunks go (those a does not share), a exports
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.layout" >"$T/out" || die "gc"
cat "$T/out"
grep -Eq '^gc: removed [1-9][0-9]* chunks? \(.*\), kept [1-9][0-9]* \(.*\), 0 newer than the grace period \(0 B\), 1 stale temporary file \(6 B\), 1 temporary file newer than the grace period \(6 B\)$' \
  "$T/out" || die "gc output: $(cat "$T/out")"
removed=$(sed -E 's/^gc: removed ([0-9]+) .*/\1/' "$T/out")
kept=$(sed -E 's/.*, kept ([0-9]+) .*/\1/' "$T/out")
[ $((removed + kept)) -eq "$total" ] || die "removed $removed + kept $kept != $total"
[ "$(nchunks)" -eq "$kept" ] || die "store holds $(nchunks) chunks, gc said $kept kept"
[ ! -e "$T/store/tmp/$hex.99999.1" ] || die "stale tmp file left"
[ -e "$T/store/tmp/$hex.99999.2" ] || die "fresh tmp file removed"
"$LAZYBLK" cas verify --store "$T/store" >/dev/null || die "verify after gc"
"$LAZYBLK" export "$T/a.layout" --store "$T/store" -o "$T/a.raw" >/dev/null ||
  die "export of the kept layout failed after gc"
expect_rc 1 "$LAZYBLK" export "$T/b.layout" --store "$T/store" -o "$T/b.raw"

# a second run finds nothing more; a manifest works as a keep file too
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/a.manifest" --grace 0 >"$T/out" || die "gc 2"
grep -q '^gc: removed 0 chunks (0 B), kept '"$kept"' ' "$T/out" || die "gc 2: $(cat "$T/out")"

# --grace 0 with b's manifest as the only keep file: a's chunks go at once
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/b.manifest" --grace 0 >"$T/out" || die "gc 3"
cat "$T/out"
grep -Eq ', [1-9][0-9]* referenced chunks? missing$' "$T/out" || die "gc 3: $(cat "$T/out")"
[ "$(nchunks)" -eq 0 ] || die "gc --grace 0 left $(nchunks) chunks"
echo "cas gc: ok"
