#!/bin/bash
# A store is marked (STORE/lazyblk-store, "lazyblk-store 1"): import into a directory that
# holds other files is refused, naming --init, and leaves it as it was; --init makes it a
# store; an empty directory, a new path, an existing store and an older lazyblk's store (no
# marker) are fine; a store of a newer format is refused by import and cas alike; serve
# --remote does not turn a directory of one's own into a cache either.
. "$(dirname "$0")/lib/common.sh"
mkdir -p "$T/src" && echo hello >"$T/src/f"
imp() { "$LAZYBLK" import "$T/src" --store "$1" -o "$T/out.manifest" "${@:2}"; }

mkdir "$T/mine" && echo precious >"$T/mine/notes.txt"
expect_error "import into a directory of one's own" "store $T/mine: not a lazyblk store (not empty and no $T/mine/lazyblk-store); use an empty directory, or --init to make it one" -- imp "$T/mine"
[ "$(ls "$T/mine")" = notes.txt ] || die "the refused directory was changed: $(ls "$T/mine")"
[ ! -e "$T/out.manifest" ] || die "a manifest was written into a refused store"
imp "$T/mine" --init >/dev/null
[ "$(cat "$T/mine/lazyblk-store")" = "lazyblk-store 1" ] || die "--init wrote no marker"
[ "$(cat "$T/mine/notes.txt")" = precious ] || die "--init touched the files there"
imp "$T/mine" >/dev/null   # a store now
echo "ok: a non-empty directory is refused, --init makes it a store"

mkdir "$T/empty"
imp "$T/empty" >/dev/null
imp "$T/new/store" >/dev/null
for s in empty new/store; do
	[ "$(cat "$T/$s/lazyblk-store")" = "lazyblk-store 1" ] || die "$s: no marker"
done
imp "$T/empty" >/dev/null
echo "ok: an empty directory, a new path and an existing store"

# an older lazyblk's store: no marker, nothing but chunks/, tmp/ (and plain/)
cp -r "$T/empty" "$T/old" && rm "$T/old/lazyblk-store"
"$LAZYBLK" cas verify --store "$T/old" >/dev/null
[ ! -e "$T/old/lazyblk-store" ] || die "cas verify wrote a marker"
imp "$T/old" >/dev/null
[ -e "$T/old/lazyblk-store" ] || die "an older store was not given its marker"
echo "ok: an older store is adopted"

echo "lazyblk-store 2" >"$T/old/lazyblk-store"
expect_error "a newer store, import" "old/lazyblk-store says 'lazyblk-store 2'; this lazyblk reads 'lazyblk-store 1'" -- imp "$T/old"
expect_error "a newer store, import --init" "says 'lazyblk-store 2'" -- imp "$T/old" --init
expect_error "a newer store, cas verify" "says 'lazyblk-store 2'" -- "$LAZYBLK" cas verify --store "$T/old"

# serve --remote makes a missing store a cache, but not a directory of one's own
"$LAZYBLK" mkfs "$T/out.manifest" -o "$T/img.layout" >/dev/null
mkdir "$T/mine2" && echo precious >"$T/mine2/notes.txt"
expect_error "a cache in a directory of one's own" "not a lazyblk store (not empty and no $T/mine2/lazyblk-store); use an empty directory" -- "$LAZYBLK" export "$T/img.layout" --store "$T/mine2" --remote http://127.0.0.1:9/ -o "$T/disk.raw"
grep -q -- "--init" "$T/.err" && die "--init offered by a command that has none"
[ "$(ls "$T/mine2")" = notes.txt ] || die "the refused cache directory was changed"
echo "ok: all"
