#!/bin/bash
# Directory import keeps every attribute exactly: ~10k real files from this machine plus
# crafted special cases (nanosecond and out-of-range times, owners, setuid/setgid/sticky,
# xattrs in user/trusted/security namespaces, hardlinks, devices, fifos, sockets, holes,
# long symlinks, non-UTF-8 names). Checked field by field against the source tree.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/edge_tree.sh"
S=$T/src
mkdir -p "$S"
cp -a /usr/share/doc "$S/doc"
cp -a /usr/share/man/man1 "$S/man1" 2>/dev/null || true
n=$(find "$S" | wc -l)
echo "real files: $n"
[ "$n" -ge 5000 ] || die "not enough real files to test with ($n)"

X=$S/special
make_edge_tree "$X"

"$LAZYBLK" import "$S" --store "$T/store" -o "$T/img.manifest" --chunk-size 1M
"$LAZYBLK" manifest show "$T/img.manifest" >"$T/img.json"

# re-importing writes no new chunks and gives the same manifest (the importer reads with
# O_NOATIME); only symlink atimes may move, as reading a link target always touches it
out=$("$LAZYBLK" import "$S" --store "$T/store" -o "$T/img2.manifest")
echo "$out"
grep -q '(0 new' <<<"$out" || die "re-import wrote new chunks"
"$LAZYBLK" manifest show "$T/img2.manifest" >"$T/img2.json"
python3 - "$T/img.json" "$T/img2.json" <<'PY' || die "re-import differs"
import json, sys
def load(p):
    m = json.load(open(p))
    for e in m['entries']:
        if e['type'] == 'symlink':
            e.pop('atime'); e.pop('atime_ns')
    return m['entries']
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a == b, [(x.get('path'), x, y) for x, y in zip(a, b) if x != y][:3]
PY
# the second import sees the same tree the checker sees now
"$LAZYBLK" import "$S" --store "$T/store" -o "$T/img3.manifest" >/dev/null
cmp "$T/img2.manifest" "$T/img3.manifest" || die "third import is not byte-identical"
python3 "$TESTLIB/check_tree.py" "$S" "$T/img2.json" "$T/store"
"$LAZYBLK" cas verify --store "$T/store"

# a sparse 1 GiB file costs no chunks
python3 - "$T/img.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
e = {x.get('path'): x for x in m['entries']}
h = e['/special/all-hole']
assert h['chunks'] == [] and h['holes'] == [[0, 1 << 30]], h
s = e['/special/sparse']
assert len(s['holes']) >= 2 and sum(c['len'] for c in s['chunks']) <= 3 * 4096, s
assert [c['len'] for c in e['/special/three-chunks']['chunks']] == [1048576, 1048576, 902848]
assert all(c['off'] == 0 for c in e['/special/three-chunks']['chunks'])
# small files share packed chunks; pieces of one chunk do not overlap
small = [x for x in m['entries'] if x['type'] == 'file' and 0 < x['size'] <= 131072 and not x.get('holes')]
assert all(len(x['chunks']) == 1 and x['chunks'][0]['len'] == x['size'] for x in small)
assert len({x['chunks'][0]['digest'] for x in small}) * 20 < len(small), 'small files not packed'
used = {}
for x in small:
    c = x['chunks'][0]
    used.setdefault(c['digest'], []).append((c['off'], c['off'] + c['len']))
for d, r in used.items():
    r.sort()
    assert all(a[1] <= b[0] for a, b in zip(r, r[1:])), 'overlapping pieces in %s' % d
print('sparse and chunking ok')
PY

# cas verify names a corrupt chunk and fails
victim=$(find "$T/store/chunks" -type f -size +2k -print -quit)
python3 - "$victim" <<'PY'
import sys
p = sys.argv[1]; d = bytearray(open(p, 'rb').read()); d[len(d) // 2] ^= 0x55
open(p, 'wb').write(d)
PY
rc=0; "$LAZYBLK" cas verify --store "$T/store" >"$T/verify.out" 2>"$T/verify.err" || rc=$?
[ $rc -ne 0 ] || die "cas verify accepted a corrupt chunk"
grep -q "corrupt: $(basename "$victim")" "$T/verify.out" || die "cas verify did not name the chunk"
"$LAZYBLK" cas stats --store "$T/store"
echo "directory import: all good"
