#!/bin/bash
# The plain tier (STORE/plain, docs/formats.md): a served disk's chunks get plain copies on
# first read; a second server on the same store reads them (no decompression) and serves
# the same bytes; a damaged plain copy is not served (the chunk is, verified); --no-plain
# neither uses nor writes them; cas stats / verify / gc account for them; a plain tier that
# cannot be written does not fail reads.
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/serve.sh"
command -v nbdcopy >/dev/null || skip "nbdcopy not found"
command -v nbdinfo >/dev/null || skip "nbdinfo not found"

mkdir -p "$T/src"
head -c 3000000 /dev/urandom >"$T/src/random"
seq 1 400000 >"$T/src/seq"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" >/dev/null
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/want.raw" --no-plain >/dev/null
nplain() { find "$T/store/plain" -type f 2>/dev/null | wc -l; }
nchunks() { find "$T/store/chunks" -type f | wc -l; }
json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
[ "$(nplain)" -eq 0 ] || die "export --no-plain wrote plain copies"

# read_with NAME ARGS...: a server on the store, the whole disk read and compared
read_with() {
  local name=$1 uri="nbd+unix:///?socket=$T/$1.sock"; shift
  start_server "$name" "$uri" "$T/img.layout" --store "$T/store" --nbd "unix:$T/$name.sock" \
    --stats-json "$T/$name.json" "$@"
  nbdcopy "$uri" "$T/$name.raw"
  stop_server "$SRV" "$name"
  cmp -s "$T/$name.raw" "$T/want.raw" || die "$name: served bytes differ from the export"
  rm -f "$T/$name.raw"
}

# ---- --no-plain: nothing written
read_with noplain --no-plain
[ "$(nplain)" -eq 0 ] || die "--no-plain wrote plain copies"
[ "$(json "$T/noplain.json" plain_hits)" -eq 0 ] || die "--no-plain used plain copies"

# ---- first server fills the tier, a second (running alongside) uses it
read_with first
n=$(nchunks)
[ "$(nplain)" -eq "$n" ] || die "plain copies: $(nplain), chunks: $n"
[ "$(json "$T/first.json" plain_writes)" -eq "$n" ] || die "first: plain_writes != $n"
grep -q "^plain .* $n written" "$T/first.out" || die "first: no plain statistics line"
read_with second
[ "$(json "$T/second.json" plain_hits)" -eq "$n" ] || die "second: plain_hits != $n"
[ "$(json "$T/second.json" disk_hits)" -eq 0 ] || die "second: decompressed chunks"

# ---- cas stats and verify
"$LAZYBLK" cas stats --store "$T/store" | grep -q "^plain copies  $n " || die "cas stats: plain copies"
"$LAZYBLK" cas verify --store "$T/store" | grep -q "verified $n plain copies: $n ok, 0 bad" ||
  die "cas verify: plain copies"

# ---- damaged plain copies: one truncated, one with a flipped byte
f1=$(find "$T/store/plain" -type f | sort | sed -n 1p)
f2=$(find "$T/store/plain" -type f | sort | sed -n 2p)
chmod u+w "$f1" "$f2"
truncate -s -1 "$f1"
printf 'Z' | dd of="$f2" bs=1 seek=5 conv=notrunc 2>/dev/null
read_with damaged
[ "$(json "$T/damaged.json" plain_bad)" -eq 2 ] || die "damaged: plain_bad != 2"
[ "$(json "$T/damaged.json" disk_hits)" -eq 2 ] || die "damaged: disk_hits != 2"
[ "$(nplain)" -eq "$n" ] || die "damaged copies were not replaced"
# cas verify finds (and removes) a copy whose content is wrong though its crc matches
f3=$(find "$T/store/plain" -type f | sort | sed -n 3p)
cp "$f3" "$T/f3"
python3 - "$T/f3" "$f3" <<'PY'
import struct, sys, zlib
# a plain copy of other bytes with a right trailer crc (crc32c) but the old digest: only
# sha256 tells; crc32c computed here bit by bit
d = bytearray(open(sys.argv[1], 'rb').read())
data, tr = d[:-64], d[-64:]
data[0] ^= 1
crc = 0xffffffff
for b in data:
    crc ^= b
    for _ in range(8):
        crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
crc ^= 0xffffffff
tr[48:52] = struct.pack('<I', crc)
open(sys.argv[2], 'wb').write(bytes(data) + bytes(tr))
PY
rc=0; "$LAZYBLK" cas verify --store "$T/store" >"$T/verify.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || die "cas verify: exit $rc on a bad plain copy"
grep -q "^bad plain copy: .* (content does not match its sha256 name)" "$T/verify.out" ||
  { cat "$T/verify.out" >&2; die "cas verify did not report the bad plain copy"; }
[ -e "$f3" ] && die "cas verify left the bad plain copy"

# ---- gc removes plain copies with their chunks
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/img.manifest" --grace 0 >/dev/null
[ "$(nplain)" -eq "$((n - 1))" ] || die "gc removed referenced plain copies"
echo x >"$T/empty.txt"; mkdir -p "$T/none"
"$LAZYBLK" import "$T/none" --store "$T/store" -o "$T/none.manifest" >/dev/null
"$LAZYBLK" cas gc --store "$T/store" --keep "$T/none.manifest" --grace 0 | grep -q "plain cop" ||
  die "gc did not report plain copies"
[ "$(nplain)" -eq 0 ] || die "gc left plain copies of removed chunks"

# ---- a plain tier that cannot be written: reads still work
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
rm -rf "$T/store/plain"; echo "not a directory" >"$T/store/plain"
read_with unwritable
[ "$(json "$T/unwritable.json" plain_write_failures)" -ge 1 ] || die "unwritable: no failures counted"
grep -q "cannot keep plain copies" "$T/unwritable.err" || die "unwritable: no warning"
echo "ok"
