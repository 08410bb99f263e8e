#!/bin/bash
# lazyblk repack and mkfs --order TRACE: the boot set a trace read goes into chunks of its
# own; the new manifest makes the same tree (mkfs -> export -> e2fsck -> loop mount ->
# every file compared with the source), deterministically; warming the repacked image
# with the trace fetches far fewer bytes than warming the original; bad traces, foreign
# traces and missing chunks fail with one line and leave no manifest.
. "$(dirname "$0")/lib/common.sh"
[ "$(id -u)" = 0 ] || skip "t_repack: needs root (loop mount)"
for tool in nginx qemu-io debugfs e2fsck nbdinfo python3 mount; do
  command -v "$tool" >/dev/null || skip "t_repack: $tool is not installed"
done
. "$TESTLIB/remote.sh"
. "$TESTLIB/ext4check.sh"
need_nginx

SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"
build_image a 24 --chunk-size 1M

# read_at RAW PATH FILE_BLOCK COUNT: read COUNT blocks of PATH from FILE_BLOCK on.
read_at() {
  local b
  b=$(debugfs -R "bmap $2 $3" "$1" 2>/dev/null)
  [ -n "$b" ] && [ "$b" -gt 0 ] || die "debugfs: no block $3 of $2"
  qemu-io -r -f raw "$NBD" -c "read $((b * 4096)) $(($4 * 4096))" >/dev/null || die "read $2"
}

# ---- record a boot that reads bits of a big file and a few small files
start_server rec "$NBD" "$T/a.layout" --store "$T/a.store" --nbd "unix:$SOCK" \
  --trace-record "$T/a.trace"
read_at "$T/a.raw" /random.bin 0 16
read_at "$T/a.raw" /small/f2 0 1
read_at "$T/a.raw" /random.bin 3000 2
read_at "$T/a.raw" /doc/dpkg/copyright 0 1
read_at "$T/a.raw" /small/f20 0 15
stop_server "$SRV" rec

# ---- repack; the same tree, twice the same manifest
"$LAZYBLK" repack "$T/a.manifest" --trace "$T/a.trace" --store "$T/a.store" \
  -o "$T/r.manifest" >"$T/r.out" || die "repack failed"
cat "$T/r.out"
grep -q "repacked .*: 4 traced files" "$T/r.out" || die "repack: $(cat "$T/r.out")"
"$LAZYBLK" repack "$T/a.manifest" --trace "$T/a.trace" --store "$T/a.store" \
  -o "$T/r2.manifest" >/dev/null
cmp "$T/r.manifest" "$T/r2.manifest" || die "repack is not deterministic"
check_layout r "$T/r.manifest" "$T/a.store" --order "$T/a.trace" --size 72M --journal 4M
"$LAZYBLK" manifest show "$T/r.manifest" >"$T/r.json"
python3 "$TESTLIB/check_tree.py" "$T/a.src" "$T/r.json" "$T/a.store" ||
  die "the repacked manifest does not describe the source tree"
echo "repacked tree: e2fsck clean, mounted tree equals the manifest and the source"

# ---- the traced files come first on the disk, in trace order (mkfs --order TRACE)
b1=$(debugfs -R "bmap /random.bin 0" "$T/r.raw" 2>/dev/null)
b2=$(debugfs -R "bmap /small/f2 0" "$T/r.raw" 2>/dev/null)
b3=$(debugfs -R "bmap /doc/dpkg/copyright 0" "$T/r.raw" 2>/dev/null)
b4=$(debugfs -R "bmap /small/f20 0" "$T/r.raw" 2>/dev/null)
[ "$b1" -lt "$b2" ] && [ "$b2" -lt "$b3" ] && [ "$b3" -lt "$b4" ] ||
  die "mkfs --order TRACE: blocks $b1 $b2 $b3 $b4 not in trace order"

# ---- warming the repacked image with the trace fetches far fewer bytes
start_nginx "$T/a.store"
URL=$NGINX_URL
"$LAZYBLK" warm "$T/a.layout" --trace "$T/a.trace" --store "$T/c1" --remote "$URL" --json \
  >"$T/w1.json" || die "warm (original) failed"
"$LAZYBLK" warm "$T/r.layout" --trace "$T/a.trace" --store "$T/c2" --remote "$URL" \
  --manifest "$T/r.manifest" --json >"$T/w2.json" || die "warm (repacked) failed"
orig=$(json_get "$T/w1.json" fetched_bytes)
rep=$(json_get "$T/w2.json" fetched_bytes)
echo "warm --trace fetched: original $orig bytes, repacked $rep bytes"
[ "$rep" -gt 0 ] && [ $((rep * 4)) -lt "$orig" ] || die "repacked boot set not much smaller"
json_expr "$T/w2.json" 's["planned"] == 1'

# ---- failures: one line, no manifest left
expect_error "corrupt trace" "checksum mismatch" -- bash -c "
  cp '$T/a.trace' '$T/bad.trace'; printf x | dd of='$T/bad.trace' bs=1 seek=300 conv=notrunc 2>/dev/null
  '$LAZYBLK' repack '$T/a.manifest' --trace '$T/bad.trace' --store '$T/a.store' -o '$T/x.manifest'"
[ ! -e "$T/x.manifest" ] || die "a failed repack left a manifest"
mkdir -p "$T/o.src"
echo other >"$T/o.src/x"
"$LAZYBLK" import "$T/o.src" --store "$T/o.store" -o "$T/o.manifest" >/dev/null
expect_error "foreign trace" "none of the 4 files it read" -- "$LAZYBLK" repack \
  "$T/o.manifest" --trace "$T/a.trace" --store "$T/o.store" -o "$T/x.manifest"
[ ! -e "$T/x.manifest" ] || die "a failed repack left a manifest"
cp -a "$T/a.store" "$T/m.store"
rm -f "$(chunk_file "$T/m.store" "$(first_chunk "$T/a.manifest" /random.bin)")"
expect_error "missing chunk" "missing from the store" -- "$LAZYBLK" repack "$T/a.manifest" \
  --trace "$T/a.trace" --store "$T/m.store" -o "$T/x.manifest"
[ ! -e "$T/x.manifest" ] || die "a failed repack left a manifest"
expect_error "usage" "missing --trace" -- "$LAZYBLK" repack "$T/a.manifest" --store "$T/a.store" \
  -o "$T/x.manifest"
echo "PASS"
