#!/bin/bash
# lazyblk commit: a sandbox's writes (through the host's ext4 driver over nbdfuse + a loop
# mount, and qemu-io's writes, zeroes and discards) become a layout over the base that
# exports byte for byte what base + overlay serve, e2fsck-clean and with the changes;
# a commit of a commit; --flatten; a commit from a delta equals the one from the overlay;
# a moved base is named by its digest; an overlay of another layout is refused; cas gc
# --keep NEW.layout keeps the chain's chunks.
. "$(dirname "$0")/lib/common.sh"
for t in nbdfuse nbdcopy nbdinfo qemu-io fusermount3 e2fsck; do
  command -v $t >/dev/null || skip "t_commit: $t is not installed"
done
[ -e /dev/fuse ] || skip "t_commit: no /dev/fuse"
[ -e /dev/loop-control ] || skip "t_commit: no loop device support"
. "$TESTLIB/serve.sh"

json_field() { # json_field FIELD < JSON
  python3 -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"
}

FUSE=""
commit_cleanup() {
  for m in "$T/mnt" "$T/check"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  [ -n "$FUSE" ] && { fusermount3 -u "$T/fuse" 2>/dev/null || true; kill "$FUSE" 2>/dev/null || true; }
  serve_cleanup
}
trap commit_cleanup EXIT

# ---- usage
grep -q "^usage: lazyblk commit OVERLAY|DELTA --layout BASE.layout" <<<"$("$LAZYBLK" commit --help)" ||
  die "commit --help"
grep -q "^  commit " <<<"$("$LAZYBLK" --help)" || die "commit missing from lazyblk --help"
expect_rc 2 "$LAZYBLK" commit
expect_error "no OVERLAY" "missing OVERLAY or DELTA" -- "$LAZYBLK" commit --layout l -s s -o o
expect_error "no --layout" "missing --layout BASE.layout" -- "$LAZYBLK" commit ov -s s -o o
expect_error "no --store" "missing --store DIR" -- "$LAZYBLK" commit ov --layout l -o o
expect_error "no -o" "missing -o NEW.layout" -- "$LAZYBLK" commit ov --layout l -s s
expect_error "extra argument" "unexpected argument 'b'" -- "$LAZYBLK" commit a b --layout l -s s -o o

# ---- the image, and a sandbox writing through the host's ext4 driver
mkdir -p "$T/src" "$T/src2" "$T/c1" "$T/c2"
cp -a /usr/lib/python3.11/json /usr/lib/python3.11/email /usr/lib/python3.11/logging "$T/src/"
head -c 3000000 /dev/urandom >"$T/src/big.bin"
echo other >"$T/src2/other"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/base.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/base.manifest" -o "$T/base.layout" >/dev/null
"$LAZYBLK" import "$T/src2" --store "$T/store" -o "$T/other.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/other.manifest" -o "$T/other.layout" >/dev/null
base_digest=$(head -c 4096 "$T/base.layout" | sha256sum | cut -d' ' -f1)

SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
serve_on() { # serve_on NAME LAYOUT OVERLAY
  rm -f "$SOCK"
  start_server "$1" "$URI" "$2" --store "$T/store" --overlay "$3" --nbd "unix:$SOCK"
}

serve_on s1 "$T/base.layout" "$T/ov1"
mkdir -p "$T/fuse" "$T/mnt" "$T/check"
nbdfuse "$T/fuse/disk" --unix "$SOCK" &
FUSE=$!
wait_for -p "$FUSE" test -e "$T/fuse/disk" || die "nbdfuse did not mount"
mount -o loop "$T/fuse/disk" "$T/mnt"
head -c 2000000 /dev/urandom >"$T/new.bin"
cp "$T/new.bin" "$T/mnt/new.bin"
echo "changed" >"$T/mnt/json/__init__.py"
rm -r "$T/mnt/email"
rm "$T/mnt/big.bin"
mkdir "$T/mnt/made"; echo made >"$T/mnt/made/file"
umount "$T/mnt"
fusermount3 -u "$T/fuse"; wait "$FUSE" 2>/dev/null || true; FUSE=""
# raw writes past the filesystem's data: a pattern, zeroes and a discard
size=$(nbdinfo --size "$URI")
qemu-io -f raw "$URI" -c "write -P 0x5a $((size - 8 * 1048576)) 1M" \
  -c "write -z $((size - 6 * 1048576)) 64k" -c "discard $((size - 4 * 1048576)) 1M" \
  -c "write -P 0 $((size - 5 * 1048576)) 8k" \
  -c "flush" >/dev/null || die "qemu-io writes"
stop_server "$SRV" s1

# what base + overlay serve
ref() { # ref LAYOUT OVERLAY OUT
  serve_on ref "$1" "$2"
  nbdcopy "$URI" "$3"
  stop_server "$SRV" ref
}
ref "$T/base.layout" "$T/ov1" "$T/ref1.raw"

# ---- commit, and what it exports
out=$("$LAZYBLK" commit "$T/ov1" --layout "$T/base.layout" --store "$T/store" -o "$T/c1/new.layout")
echo "$out"
grep -q "^committed [0-9]* blocks (.*) as [0-9]* chunks (.*).* → $T/c1/new.layout (sha256:[0-9a-f]\{64\})$" \
  <<<"$out" || die "commit output: $out"
ls "$T/c1" | grep -q tmp && die "temporary files left: $(ls "$T/c1")"
new_digest=$(head -c 4096 "$T/c1/new.layout" | sha256sum | cut -d' ' -f1)
grep -q "sha256:$new_digest" <<<"$out" || die "commit printed another digest"
"$LAZYBLK" export "$T/c1/new.layout" --store "$T/store" -o "$T/new.raw" >/dev/null
cmp "$T/ref1.raw" "$T/new.raw" || die "export of the commit differs from base + overlay"
rc=0; e2fsck -fn "$T/new.raw" >"$T/fsck.out" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$T/fsck.out" >&2; die "e2fsck -fn of the commit: exit $rc"; }
mount -o loop,ro "$T/new.raw" "$T/check"
cmp "$T/new.bin" "$T/check/new.bin" || die "new file missing or different"
[ "$(cat "$T/check/json/__init__.py")" = changed ] || die "rewritten file"
[ ! -e "$T/check/email" ] && [ ! -e "$T/check/big.bin" ] || die "deleted files are back"
[ "$(cat "$T/check/made/file")" = made ] || die "new directory"
cmp "$T/src/logging/__init__.py" "$T/check/logging/__init__.py" || die "untouched file"
umount "$T/check"

# the layout is a layer: version 3 with the parent flag, its parent hint relative to its directory
python3 - "$T/c1/new.layout" "$base_digest" <<'EOF' || die "layer header"
import struct, sys
b = open(sys.argv[1], "rb").read()
version, = struct.unpack_from("<I", b, 8)
flags, = struct.unpack_from("<I", b, 60)
hint_len, = struct.unpack_from("<I", b, 200)
assert version == 3 and flags == 1, (version, flags)
assert b[168:200].hex() == sys.argv[2], "parent digest"
assert b[-hint_len:] == b"../base.layout", b[-hint_len:]
EOF

# --json, and the same commit again: no new chunks, the same layout
js=$("$LAZYBLK" commit "$T/ov1" --layout "$T/base.layout" --store "$T/store" \
  -o "$T/c1/again.layout" --json)
[ "$(json_field new_chunks <<<"$js")" -eq 0 ] || die "a second commit stored chunks: $js"
[ "$(json_field layout_digest <<<"$js")" = "sha256:$new_digest" ] || die "json digest: $js"
for k in blocks zero_blocks chunks new_bytes layout seconds; do
  json_field $k <<<"$js" >/dev/null || die "json: no $k: $js"
done
# blocks and zero_blocks as the overlay counts them (written zeros included in blocks)
show=$("$LAZYBLK" overlay show --json "$T/ov1")
[ "$(json_field blocks <<<"$js")" -eq "$(json_field dirty_blocks <<<"$show")" ] &&
  [ "$(json_field zero_blocks <<<"$js")" -eq "$(json_field zero_blocks <<<"$show")" ] ||
  die "commit counts $js differ from the overlay's $show"
[ "$(json_field zero_blocks <<<"$js")" -ge 256 ] || die "zeroes and discard not zero runs: $js"

# ---- a delta of the overlay commits to the same layout
"$LAZYBLK" snapshot "$T/ov1" -o "$T/d1" >/dev/null
js=$("$LAZYBLK" commit "$T/d1" --layout "$T/base.layout" --store "$T/store" \
  -o "$T/c1/fromdelta.layout" --json)
[ "$(json_field layout_digest <<<"$js")" = "sha256:$new_digest" ] ||
  die "the commit of the delta differs from the commit of the overlay: $js"
ls "$T/c1" | grep -q commit && die "temporary overlay left: $(ls "$T/c1")"

# ---- refused: an overlay or delta of another layout, one line
expect_error "foreign overlay" "$T/ov1 belongs to layout sha256:$base_digest, not $T/other.layout" -- \
  "$LAZYBLK" commit "$T/ov1" --layout "$T/other.layout" --store "$T/store" -o "$T/x.layout"
expect_error "foreign delta" "delta belongs to another layout" -- \
  "$LAZYBLK" commit "$T/d1" --layout "$T/other.layout" --store "$T/store" -o "$T/x.layout"
expect_error "no overlay" "$T/none: No such file or directory" -- \
  "$LAZYBLK" commit "$T/none" --layout "$T/base.layout" --store "$T/store" -o "$T/x.layout"
[ ! -e "$T/x.layout" ] || die "a refused commit left NEW.layout"
cp "$T/base.layout" "$T/base.saved"
expect_error "over its base" "-o $T/base.layout would replace $T/base.layout, a layout the commit" -- \
  "$LAZYBLK" commit "$T/ov1" --layout "$T/base.layout" --store "$T/store" -o "$T/base.layout"
cmp "$T/base.layout" "$T/base.saved" || die "a refused commit changed the base"

# ---- a commit of the commit: a second sandbox over NEW.layout
serve_on s2 "$T/c1/new.layout" "$T/ov2"
# 4 MiB of one pattern first on the disk: four identical chunks, stored once
qemu-io -f raw "$URI" -c "write -P 0x42 $((size - 32 * 1048576)) 4M" \
  -c "write -P 0x77 $((size - 8 * 1048576 + 4096)) 8k" \
  -c "write -z $((size - 8 * 1048576 + 65536)) 4k" -c "write -P 0x11 $((size - 16384)) 16k" \
  -c "flush" >/dev/null || die "qemu-io writes, round 2"
expect_error "busy overlay" "$T/ov2: overlay is in use" -- \
  "$LAZYBLK" commit "$T/ov2" --layout "$T/c1/new.layout" --store "$T/store" -o "$T/x.layout"
stop_server "$SRV" s2
ref "$T/c1/new.layout" "$T/ov2" "$T/ref2.raw"
js=$("$LAZYBLK" commit "$T/ov2" --layout "$T/c1/new.layout" --store "$T/store" \
  -o "$T/c2/new2.layout" --json)
[ "$(json_field blocks <<<"$js")" -eq 1030 ] && [ "$(json_field zero_blocks <<<"$js")" -eq 1 ] &&
  [ "$(json_field chunks <<<"$js")" -eq 5 ] && [ "$(json_field new_chunks <<<"$js")" -eq 2 ] ||
  die "round 2: 1030 blocks in 5 chunks, 2 stored (4 MiB of one pattern deduplicated), 1 zero: $js"
"$LAZYBLK" export "$T/c2/new2.layout" --store "$T/store" -o "$T/new2.raw" >/dev/null
cmp "$T/ref2.raw" "$T/new2.raw" || die "export of the commit of a commit differs"
new2_digest=$(head -c 4096 "$T/c2/new2.layout" | sha256sum | cut -d' ' -f1)

# ---- --flatten: the same bytes, no base layout file needed
"$LAZYBLK" commit "$T/ov2" --layout "$T/c1/new.layout" --store "$T/store" \
  -o "$T/flat.layout" --flatten >/dev/null
[ "$(python3 -c 'import struct,sys; print(struct.unpack_from("<II", open(sys.argv[1],"rb").read(64), 8)[0], struct.unpack_from("<I", open(sys.argv[1],"rb").read(64), 60)[0])' "$T/flat.layout")" = "3 0" ] ||
  die "--flatten did not write a layout without parent (version 3, flags 0)"
ls "$T" | grep -q "flat.layout.layer" && die "flatten left its layer"
mv "$T/base.layout" "$T/base.moved"
"$LAZYBLK" export "$T/flat.layout" --store "$T/store" -o "$T/flat.raw" >/dev/null
cmp "$T/ref2.raw" "$T/flat.raw" || die "export of the flattened commit differs"

# ---- the base moved away: one line naming its digest; beside the layer by digest: found
expect_error "base gone" "base layout sha256:$base_digest not found (looked for $T/c1/../base.layout and $T/c1/$base_digest.layout)" -- \
  "$LAZYBLK" export "$T/c1/new.layout" --store "$T/store" -o "$T/x.raw"
expect_error "base gone, depth 2" "base layout sha256:$base_digest not found" -- \
  "$LAZYBLK" export "$T/c2/new2.layout" --store "$T/store" -o "$T/x.raw"
cp "$T/other.layout" "$T/base.layout"
expect_error "another base" "base layout $T/c1/../base.layout is not sha256:$base_digest" -- \
  "$LAZYBLK" export "$T/c1/new.layout" --store "$T/store" -o "$T/x.raw"
cp "$T/base.moved" "$T/c1/$base_digest.layout"
"$LAZYBLK" export "$T/c1/new.layout" --store "$T/store" -o "$T/x.raw" >/dev/null
cmp "$T/x.raw" "$T/new.raw" || die "base found by digest: export differs"
rm "$T/c1/$base_digest.layout"
mv "$T/base.moved" "$T/base.layout"

# ---- cas gc --keep NEW.layout keeps the base's chunks and the commits', even those of a
# base whose every data block the commit replaced (each layer stays an image of its own)
"$LAZYBLK" export "$T/other.layout" --store "$T/store" -o "$T/other.raw" >/dev/null
osize=$(stat -c %s "$T/other.raw")
serve_on s4 "$T/other.layout" "$T/ov4"
qemu-io -f raw "$URI" -c "write -z 0 $osize" -c "flush" >/dev/null || die "qemu-io zero all"
stop_server "$SRV" s4
mkdir -p "$T/c4"
"$LAZYBLK" commit "$T/ov4" --layout "$T/other.layout" --store "$T/store" \
  -o "$T/c4/zeroed.layout" >/dev/null
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/c2/new2.layout" --keep "$T/c4/zeroed.layout" \
  --grace 0 >"$T/gc.out"
cat "$T/gc.out"
"$LAZYBLK" export "$T/c2/new2.layout" --store "$T/store" -o "$T/gc.raw" >/dev/null
cmp "$T/ref2.raw" "$T/gc.raw" || die "gc removed chunks the commit uses"
"$LAZYBLK" export "$T/base.layout" --store "$T/store" -o "$T/gc.raw" >/dev/null ||
  die "gc removed chunks of the base"
"$LAZYBLK" export "$T/other.layout" --store "$T/store" -o "$T/gc.raw" >/dev/null ||
  die "gc removed the chunks of a base its commit zeroed"
cmp "$T/other.raw" "$T/gc.raw" || die "the zeroed commit's base exports differently"
[ "$(head -c 4096 "$T/c2/new2.layout" | sha256sum | cut -d' ' -f1)" = "$new2_digest" ] ||
  die "new2.layout changed"
# ---- SIGTERM stops a commit: exit 130 with one line, nothing left behind
serve_on s3 "$T/base.layout" "$T/ov3"
head -c $((48 << 20)) /dev/urandom >"$T/rand.raw"
nbdcopy "$T/rand.raw" "$URI"
stop_server "$SRV" s3
mkdir -p "$T/c3"
rc=0
"$LAZYBLK" commit "$T/ov3" --layout "$T/base.layout" --store "$T/store3" -o "$T/c3/x.layout" \
  --level 19 >/dev/null 2>"$T/int.err" &
pid=$!
# once it has made its store it is committing and takes SIGTERM (a fixed 0.3 s was too short
# on a loaded machine: the signal came first and killed it, exit 143)
wait_for -p "$pid" test -d "$T/store3/tmp" || true
kill -TERM "$pid" 2>/dev/null || true
wait "$pid" || rc=$?
if [ $rc -eq 130 ]; then
  [ "$(cat "$T/int.err")" = "lazyblk: commit: interrupted" ] || die "interrupted: $(cat "$T/int.err")"
  [ -z "$(ls -A "$T/c3")" ] || die "an interrupted commit left $(ls -A "$T/c3")"
else
  [ $rc -eq 0 ] || die "commit after SIGTERM: exit $rc"
  echo "commit finished before SIGTERM"
fi
[ -z "$(ls -A "$T/store3/tmp" 2>/dev/null)" ] || die "store tmp/ not empty"
echo "commit: all good"
