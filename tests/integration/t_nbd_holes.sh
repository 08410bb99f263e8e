#!/bin/bash
# Structured reads over NBD send holes as OFFSET_HOLE chunks, judged by independent
# clients: nbdcopy (with and without block status) copies the disk byte for byte as
# `lazyblk export` wrote it; libnbd's python bindings (pread_structured) see hole chunks
# only where base:allocation says HOLE|ZERO, data chunks that equal the exported bytes,
# one data chunk under DF, overlay-zeroed ranges as holes, and a corrupt chunk after a
# hole as the hole then an error at the corrupt chunk's offset. The same scan and writes
# on the exported disk as a plain sparse file (serve --raw): its holes are the file's.
# Unix sockets only; every server started here is stopped by the trap.
. "$(dirname "$0")/lib/common.sh"

for tool in nbdinfo nbdcopy debugfs; do
  command -v "$tool" >/dev/null || skip "t_nbd_holes: $tool not installed"
done
# libnbd's python module (python3-libnbd) is installed for the system python
PY=""
for p in /usr/bin/python3 python3; do
  if "$p" -c 'import nbd' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || skip "t_nbd_holes: python3-libnbd not installed"

. "$TESTLIB/serve.sh"

# ---- a small tree on a 256 MiB disk: mostly holes
mkdir -p "$T/src/dir"
head -c 3000000 /dev/urandom >"$T/src/victim.bin"
head -c 1000000 /dev/urandom >"$T/src/dir/other.bin"
seq 1 20000 >"$T/src/seq"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/m" >/dev/null
"$LAZYBLK" mkfs "$T/m" -o "$T/l" --size 256M >/dev/null
"$LAZYBLK" export "$T/l" --store "$T/store" -o "$T/ref.raw" >/dev/null
vblk=$(debugfs -R "bmap /victim.bin 0" "$T/ref.raw" 2>/dev/null)
[[ "$vblk" =~ ^[0-9]+$ ]] || die "no block for /victim.bin ($vblk)"
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"

cat >"$T/holes.py" <<'EOF'
import errno, nbd, sys

mode, uri, ref = sys.argv[1], sys.argv[2], open(sys.argv[3], 'rb').read()
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(uri)
size = h.get_size()
assert size == len(ref), (size, len(ref))
assert h.can_df()
ZERO = nbd.STATE_HOLE | nbd.STATE_ZERO
STEP = 32 << 20

def zero_map(off, count):
    """The HOLE|ZERO extents of base:allocation in [off, off+count)."""
    out, pos = [], off
    while pos < off + count:
        ext = []
        h.block_status(off + count - pos, pos,
                       lambda meta, at, e, err: ext.extend(e) if meta == nbd.CONTEXT_BASE_ALLOCATION else None)
        for i in range(0, len(ext), 2):
            if ext[i + 1] & ZERO == ZERO:
                out.append((pos, pos + ext[i]))
            pos += ext[i]
    return out

def sread(off, count, flags=0):
    """pread_structured: (bytes, [(status, offset, count)])."""
    chunks = []
    def cb(sub, at, status, err):
        chunks.append((status, at, len(sub)))
        return 0
    buf = h.pread_structured(count, off, cb, flags)
    return buf, chunks

if mode == 'scan':
    holes = data = hole_bytes = 0
    for off in range(0, size, STEP):
        count = min(STEP, size - off)
        buf, chunks = sread(off, count)
        assert buf == ref[off:off + count], 'bytes differ in [%d, %d)' % (off, off + count)
        zmap = zero_map(off, count)
        for status, at, n in chunks:
            assert status in (nbd.READ_DATA, nbd.READ_HOLE), status
            if status == nbd.READ_HOLE:
                holes += 1
                hole_bytes += n
                assert any(a <= at and at + n <= b for a, b in zmap), \
                    'hole chunk [%d, +%d) outside the HOLE|ZERO extents' % (at, n)
            else:
                data += 1
        # DF: one content chunk, the same bytes
        dbuf, dchunks = sread(off, count, nbd.CMD_FLAG_DF)
        assert len(dchunks) == 1, dchunks[:4]
        assert dbuf == buf
    assert holes > 0, 'no hole chunks on a sparse disk'
    assert hole_bytes > size // 2, (hole_bytes, size)
    print('scan: %d hole chunks (%d bytes), %d data chunks' % (holes, hole_bytes, data))
elif mode == 'overlay':
    # zero 64 KiB before the victim's first block, write 64 KiB into a hole far from data
    v = int(sys.argv[4]) * 4096
    h.zero(65536, v - 65536)
    zmap = zero_map(0, min(size, 256 << 20))
    a, b = zmap[-1]
    w = bytes((i * 7 + 3) & 255 for i in range(65536))
    wo = (a + b) // 2 // 4096 * 4096
    h.pwrite(w, wo)
    exp = bytearray(ref)
    exp[v - 65536:v] = bytes(65536)
    exp[wo:wo + 65536] = w
    for off, count, want in ((v - 131072, 131072, [nbd.READ_DATA, nbd.READ_HOLE]),
                             (wo - 131072, 262144, [nbd.READ_HOLE, nbd.READ_DATA, nbd.READ_HOLE])):
        buf, chunks = sread(off, count)
        assert [c[0] for c in chunks] == want, chunks
        assert buf == exp[off:off + count]
    h.flush()
    print('overlay: zeroed range read as a hole, written range as data')
elif mode == 'error':
    # the victim's chunk is corrupt: a read of the zeroed 64 KiB before it and 64 KiB of it
    v = int(sys.argv[4]) * 4096
    h.zero(65536, v - 65536)
    chunks = []
    def cb(sub, at, status, err):
        chunks.append((status, at, getattr(err, 'value', err)))
        return 0
    try:
        h.pread_structured(131072, v - 65536, cb)
        raise SystemExit('a read of a corrupt chunk succeeded')
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e
    assert [(c[0], c[1]) for c in chunks] == [(nbd.READ_HOLE, v - 65536), (nbd.READ_ERROR, v)], chunks
    assert chunks[1][2] == errno.EIO, chunks
    # the connection goes on
    assert h.pread(4096, 0) == ref[:4096]
    print('error: hole chunk, then the error at offset %d' % v)
h.shutdown()
EOF

# ---- read-only server: nbdcopy with and without extents, libnbd's structured reads
start_server ro "$URI" "$T/l" --store "$T/store" --nbd "unix:$SOCK"
nbdcopy "$URI" "$T/copy.raw"
cmp "$T/ref.raw" "$T/copy.raw" || die "nbdcopy differs from lazyblk export"
rm -f "$T/copy.raw"
nbdcopy --no-extents "$URI" "$T/copy.raw"
cmp "$T/ref.raw" "$T/copy.raw" || die "nbdcopy --no-extents differs from lazyblk export"
rm -f "$T/copy.raw"
echo "ok: nbdcopy, with and without extents, equals lazyblk export"
"$PY" "$T/holes.py" scan "$URI" "$T/ref.raw" || die "structured reads (scan)"
stop_server "$SRV" ro
grep -q "^requests " "$T/ro.out" || die "no statistics"

# ---- with an overlay: zeroed ranges are holes, written ones data
start_server ov "$URI" "$T/l" --store "$T/store" --overlay "$T/ov" --nbd "unix:$SOCK"
"$PY" "$T/holes.py" overlay "$URI" "$T/ref.raw" "$vblk" || die "structured reads (overlay)"
stop_server "$SRV" ov

# ---- a corrupt chunk after a hole: the hole chunk, then the error at the chunk's offset
digest=$("$LAZYBLK" manifest show "$T/m" | "$PY" -c '
import json, sys
e = {x["path"]: x for x in json.load(sys.stdin)["entries"]}
print(e["/victim.bin"]["chunks"][0]["digest"])')
f=$T/store/chunks/${digest:0:2}/$digest
[ -f "$f" ] || die "no chunk file $f"
"$PY" -c "
import sys; p=sys.argv[1]; d=bytearray(open(p,'rb').read()); d[len(d)//2]^=1; open(p,'wb').write(d)" "$f"
rm -f "$T/ov" "$T/ov".*
# --no-plain: the plain copy made by the reads above would still serve the verified bytes
start_server bad "$URI" "$T/l" --store "$T/store" --overlay "$T/ov" --nbd "unix:$SOCK" --no-plain
"$PY" "$T/holes.py" error "$URI" "$T/ref.raw" "$vblk" || die "structured reads (error)"
stop_server "$SRV" bad

# ---- the exported disk as a plain sparse file: serve --raw, holes from SEEK_HOLE
cp --sparse=always "$T/ref.raw" "$T/plain.raw"
start_server raw "$URI" --raw "$T/plain.raw" --read-only --nbd "unix:$SOCK"
nbdcopy "$URI" "$T/copy.raw"
cmp "$T/ref.raw" "$T/copy.raw" || die "raw: nbdcopy differs from the file"
rm -f "$T/copy.raw"
"$PY" "$T/holes.py" scan "$URI" "$T/ref.raw" || die "raw: structured reads (scan)"
stop_server "$SRV" raw
start_server rawrw "$URI" --raw "$T/plain.raw" --nbd "unix:$SOCK"
"$PY" "$T/holes.py" overlay "$URI" "$T/ref.raw" "$vblk" || die "raw: structured reads (writes)"
stop_server "$SRV" rawrw
echo "t_nbd_holes: ok"
