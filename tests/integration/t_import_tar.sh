#!/bin/bash
# Tar import: GNU tar's pax archives (nanosecond times, xattrs, long names, sparse files),
# plain, gzip and zstd compressed, and GNU-format long names, each checked field by field
# against the tree the archive was made from.
. "$(dirname "$0")/lib/common.sh"
S=$T/src
mkdir -p "$S/d/e" "$S/empty-dir"
cp -a /usr/share/doc/bash "$S/bash-doc" 2>/dev/null || cp -a /usr/share/doc/dpkg "$S/bash-doc"
echo hello >"$S/plain" && touch -d '2001-02-03 04:05:06.123456789' "$S/plain"
echo old >"$S/pre1970" && touch -d '1960-06-01 12:00:00.5' "$S/pre1970"
echo future >"$S/post2038" && touch -d '2200-01-01 00:00:00.25' "$S/post2038"
echo owned >"$S/owned" && chown 1234:56789 "$S/owned"
echo s >"$S/setuid" && chmod 4755 "$S/setuid"
chmod 2775 "$S/d" && chmod 1777 "$S/d/e"
echo x >"$S/xattrs"
setfattr -n user.comment -v "a comment" "$S/xattrs"
setfattr -n user.binary -v 0x00ff00fe01 "$S/xattrs"
setfattr -n trusted.overlay -v 0x79 "$S/xattrs"
setfattr -n security.capability -v 0x0100000200200000000000000000000000000000 "$S/xattrs"
echo linked >"$S/link-a" && ln "$S/link-a" "$S/d/link-b"
mknod "$S/chr" c 1 3 && mknod "$S/blk" b 7 200
mkfifo "$S/fifo"
ln -s plain "$S/short-link"
long=$(python3 -c "print('/'.join(['d'*250]*16)[:4095])")
ln -s "$long" "$S/long-link"
longname=$(printf 'n%.0s' $(seq 1 200))
mkdir -p "$S/$longname/$longname" && echo deep >"$S/$longname/$longname/$longname"
truncate -s 10M "$S/sparse"
printf 'middle' | dd of="$S/sparse" bs=4096 seek=1000 conv=notrunc status=none
printf 'end' | dd of="$S/sparse" bs=1 seek=$((10*1024*1024 - 3)) conv=notrunc status=none
head -c 2500000 /dev/urandom >"$S/big"
touch -d '2010-01-01 00:00:00.000000001' "$S/d/e"

TAROPTS=(--format=pax --xattrs --xattrs-include='*' --sparse --numeric-owner)
tar "${TAROPTS[@]}" -C "$S" -cf "$T/a.tar" .
gzip -c "$T/a.tar" >"$T/a.tar.gz"
zstd -q -c "$T/a.tar" >"$T/a.tar.zst"
tar --format=gnu --sparse --numeric-owner -C "$S" -cf "$T/gnu.tar" .

for f in a.tar a.tar.gz a.tar.zst gnu.tar; do
  "$LAZYBLK" import "$T/$f" --store "$T/store" -o "$T/$f.manifest"
  "$LAZYBLK" manifest show "$T/$f.manifest" >"$T/$f.json"
done
# the tar keeps mtime with nanoseconds; atime/ctime are the archiver's, not the tree's
python3 "$TESTLIB/check_tree.py" "$S" "$T/a.tar.json" "$T/store" --no-atime --no-ctime
cmp "$T/a.tar.manifest" "$T/a.tar.gz.manifest" || die "gzip import differs"
cmp "$T/a.tar.manifest" "$T/a.tar.zst.manifest" || die "zstd import differs"

# GNU format: long names and content, whole seconds, no xattrs; same paths and data
python3 - "$T/a.tar.json" "$T/gnu.tar.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))['entries']; g = json.load(open(sys.argv[2]))['entries']
key = lambda e: (e.get('path'), e['type'], e['size'], e['mode'], e.get('link'),
                 [(c['len']) for c in e.get('chunks', [])], e['mtime'])
assert [e.get('path') for e in a] == [e.get('path') for e in g], 'paths differ'
for x, y in zip(a, g):
    assert key(x) == key(y), (x.get('path'), key(x), key(y))
print('gnu format: %d entries match' % len(g))
PY

# sparse: holes survive, the data is 3 small pieces
python3 - "$T/a.tar.json" <<'PY'
import json, sys
e = {x.get('path'): x for x in json.load(open(sys.argv[1]))['entries']}
s = e['/sparse']
assert s['size'] == 10 << 20 and len(s['holes']) >= 2, s
assert sum(c['len'] for c in s['chunks']) + sum(h[1] for h in s['holes']) == s['size']
print('sparse ok:', s['holes'])
PY
echo "tar import: all good"
