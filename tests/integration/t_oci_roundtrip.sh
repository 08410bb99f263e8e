#!/bin/bash
# OCI layout and docker-archive import against an independent unpacker: a 4-layer image
# is built with umoci (whiteouts from umoci itself, an opaque directory, nanosecond times
# and a pax xattr from a hand-made layer), then
#   lazyblk import oci:IMG:t     ==  umoci unpack + lazyblk import DIR  (field by field)
#   zstd / uncompressed / docker media type / nested index variants of the same image,
#   skopeo's docker-archive and a legacy-style docker-archive (gzip layers, symlinked
#   members, reversed member order) all give exactly the same entries.
set -euo pipefail
die() { echo "FAIL: $*" >&2; exit 1; }
: "${LAZYBLK:?LAZYBLK must name the lazyblk binary}"
for tool in umoci skopeo python3 zstd setfattr; do
	command -v "$tool" >/dev/null || { echo "skip: $tool is not installed"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "skip: needs root (mknod, chown, umoci unpack keeping owners)"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
IMG=$T/img
export TZ=UTC

bundle() { # fresh unpack of tag t into $T/b
	rm -rf "$T/b"
	umoci unpack --image "$IMG:t" "$T/b" >/dev/null
	R=$T/b/rootfs
}
repack() {
	umoci repack --image "$IMG:t" "$T/b" >/dev/null
}
layer_list() { # members of the newest layer, for the log
	python3 - "$IMG" <<'PY'
import json, sys, subprocess
d = sys.argv[1]
ix = json.load(open(d + '/index.json'))
m = [x for x in ix['manifests'] if x['annotations']['org.opencontainers.image.ref.name'] == 't'][0]
m = json.load(open(d + '/blobs/sha256/' + m['digest'][7:]))
l = m['layers'][-1]
print('layer %d: %s' % (len(m['layers']), l['mediaType']))
subprocess.run(['tar', '-tzvf', d + '/blobs/sha256/' + l['digest'][7:]], check=True)
PY
}

umoci init --layout "$IMG"
umoci new --image "$IMG:t"

# ---- layer 1 (umoci): every kind of entry
bundle
mkdir -p "$R/dir/sub" "$R/op/old-sub" "$R/gone/deeper" "$R/sticky" "$R/setgid"
echo hello >"$R/hello"
echo linked >"$R/hl-a" && ln "$R/hl-a" "$R/hl-b"
ln -s hello "$R/lnk"
ln -s /nowhere/at/all "$R/dangling"
for i in 1 2 3 4; do echo "file $i" >"$R/dir/f$i"; done
echo deep >"$R/dir/sub/deep"
echo s >"$R/suid" && chmod 4755 "$R/suid"
chmod 2775 "$R/setgid" && chmod 1777 "$R/sticky"
echo x >"$R/xattr" && setfattr -n user.comment -v "a comment" "$R/xattr"
echo old >"$R/mtime" && touch -d '2001-02-03 04:05:06' "$R/mtime"
echo owned >"$R/owned" && chown 1234:5678 "$R/owned"
mknod "$R/chr" c 1 3 && mknod "$R/blk" b 7 200 && mkfifo "$R/fifo"
head -c 300000 /dev/urandom >"$R/big"
: >"$R/empty"
echo o1 >"$R/op/old1" && echo o2 >"$R/op/old2" && echo o3 >"$R/op/old-sub/o3"
echo g >"$R/gone/g" && echo gd >"$R/gone/deeper/gd"
head -c 300000 /dev/urandom >"$R/gone/big" # whited out by layer 2: not in the image
echo u >"$R/$(printf 'caf\xc3\xa9 name with spaces')"
repack
umoci tag --image "$IMG:t" l1 # the one-layer image, for the nested index below
layer_list

# ---- layer 2 (umoci): deletions become .wh. entries, a changed file, a chmod
bundle
rm "$R/dir/f1" "$R/hl-b"
rm -rf "$R/gone"
echo "hello again" >"$R/hello"
chmod 0600 "$R/dir/f3"
repack
layer_list

# ---- layer 3 (hand-made, pax): an opaque directory, a whiteout, nanosecond times, xattrs.
# umoci never writes .wh..wh..opq (it lists each deleted name instead), so this layer is
# built with GNU tar and appended verbatim with umoci raw add-layer.
S=$T/stage
mkdir -p "$S/op/new-sub" "$S/dir"
: >"$S/op/.wh..wh..opq"
echo new >"$S/op/new" && touch -d '2002-03-04 05:06:07.987654321' "$S/op/new"
echo y >"$S/op/new-sub/y" && touch -d '2005-05-05 05:05:05.5' "$S/op/new-sub/y"
: >"$S/dir/.wh.f2"
echo ns >"$S/ns-file" && setfattr -n user.pax -v "from pax" "$S/ns-file"
chown 4321:8765 "$S/ns-file" && chmod 0640 "$S/ns-file"
touch -d '2006-06-06 06:06:06.123456789' "$S/ns-file"
ln -s op/new "$S/ns-link" && touch -h -d '2003-03-03 03:03:03.333333333' "$S/ns-link"
touch -d '2004-04-04 04:04:04.444444444' "$S/op/new-sub" "$S/op" "$S/dir"
tar --format=pax --xattrs --xattrs-include='user.*' --numeric-owner -C "$S" \
	-cf "$T/layer3.tar" op dir ns-file ns-link
umoci raw add-layer --image "$IMG:t" "$T/layer3.tar" >/dev/null
layer_list

# ---- layer 4 (umoci): additions, a new hardlink to a lower file, a file in the opaque dir
bundle
mkdir -p "$R/added"
echo more >"$R/added/more"
ln "$R/hl-a" "$R/added/hl-c"
echo again >"$R/op/after-opaque"
head -c 70000 /dev/urandom >"$R/added/two-chunks"
repack
layer_list

# ---- variants of the same image: zstd, uncompressed and docker media types, a nested
# index whose linux/amd64 entry is t (and whose arm64 entry is the one-layer image l1)
python3 - "$IMG" <<'PY'
import gzip, hashlib, json, os, subprocess, sys
d = sys.argv[1]
REF = 'org.opencontainers.image.ref.name'
def blob(digest):
    return open(os.path.join(d, 'blobs/sha256', digest[7:]), 'rb').read()
def put(data, mt, **extra):
    h = hashlib.sha256(data).hexdigest()
    with open(os.path.join(d, 'blobs/sha256', h), 'wb') as f:
        f.write(data)
    return dict({'mediaType': mt, 'digest': 'sha256:' + h, 'size': len(data)}, **extra)
ix = json.load(open(os.path.join(d, 'index.json')))
desc = {x['annotations'][REF]: x for x in ix['manifests']}
t = json.loads(blob(desc['t']['digest']))
OCI_M = 'application/vnd.oci.image.manifest.v1+json'
def variant(tag, layer_fn, mtype=OCI_M, ctype=None):
    m = json.loads(json.dumps(t))
    m['mediaType'] = mtype
    if ctype:
        m['config']['mediaType'] = ctype
    m['layers'] = [layer_fn(i, gzip.decompress(blob(l['digest'])))
                   for i, l in enumerate(t['layers'])]
    ix['manifests'].append(put(json.dumps(m).encode(), mtype, annotations={REF: tag}))
def zst(data):
    return subprocess.run(['zstd', '-q', '-c'], input=data, check=True,
                          stdout=subprocess.PIPE).stdout
variant('z', lambda i, tar: put(zst(tar), 'application/vnd.oci.image.layer.v1.tar+zstd'))
variant('u', lambda i, tar: put(tar, 'application/vnd.oci.image.layer.v1.tar'))
variant('d', lambda i, tar: put(gzip.compress(tar), 'application/vnd.docker.image.rootfs.diff.tar.gzip')
        if i % 2 == 0 else put(tar, 'application/vnd.docker.image.rootfs.diff.tar'),
        'application/vnd.docker.distribution.manifest.v2+json',
        'application/vnd.docker.container.image.v1+json')
arm = dict(desc['l1'], platform={'os': 'linux', 'architecture': 'arm64'})
amd = dict(desc['t'], platform={'os': 'linux', 'architecture': 'amd64'})
for x in (arm, amd):
    x.pop('annotations')
IDX = 'application/vnd.oci.image.index.v1+json'
nested = {'schemaVersion': 2, 'mediaType': IDX, 'manifests': [arm, amd]}
ix['manifests'].append(put(json.dumps(nested).encode(), IDX, annotations={REF: 'n'}))
with open(os.path.join(d, 'index.json'), 'w') as f:
    json.dump(ix, f)
PY

# ---- the independent side: umoci unpack (as root, so owners and devices are kept)
bundle
PACK=()
if grep -q -- --pack-max <<<"$("$LAZYBLK" import --help)"; then
	PACK=(--pack-max 0) # one chunk list per file, comparable between the two imports
fi
imp() { # imp NAME SRC [options]
	local name=$1 src=$2
	shift 2
	"$LAZYBLK" import "$src" --store "$T/store" -o "$T/$name.manifest" --chunk-size 64K "$@"
	"$LAZYBLK" manifest show "$T/$name.manifest" >"$T/$name.json"
}
imp dir "$R" "${PACK[@]}"
imp oci-unpacked "oci:$IMG:t" "${PACK[@]}"
# import's summary speaks of the image (what later layers whited out is not in it): its bytes
# and chunks are manifest show --summary's
"$LAZYBLK" import "oci:$IMG:t" --store "$T/store-sum" -o "$T/sum.manifest" --chunk-size 64K >"$T/sum.out"
"$LAZYBLK" manifest show --summary "$T/sum.manifest" >"$T/sum.txt"
human=$(sed -n 's/^file bytes *[0-9]* (\(.*\)), of which.*/\1/p' "$T/sum.txt")
nch=$(sed -n 's/^chunks .* references to \([0-9]*\) chunks,.*/\1/p' "$T/sum.txt")
if [ -z "$human" ] || [ -z "$nch" ]; then die "manifest show --summary: $(cat "$T/sum.txt")"; fi
grep -q "entries, $human in $nch chunks (" "$T/sum.out" ||
	die "import summary is not the image's ($human in $nch chunks): $(cat "$T/sum.out")"

cat >"$T/compare.py" <<'PY'
"""compare.py A.json B.json attrs|exact

attrs: per path (the same set of paths on both sides), compare type, mode, uid, gid, size,
chunk list, holes, link target (symlinks and hardlink groups), rdev, xattrs and mtime (s and
ns). Not compared: atime and ctime (a directory import sees the unpacker's own clock; tar
layers mostly carry only mtime), and of "/" only type, mode, owner and xattrs: umoci
decides the root's times itself.
umoci repack writes whole-second mtimes (Go's archive/tar rounds without PAX), so entries
from umoci layers have mtime_ns 0 on both sides; the hand-made pax layer carries
nanoseconds, and umoci unpack restores them for files, directories and symlinks alike.
exact: the whole entry lists, the image config and so the manifest digest must be identical
(the import is deterministic).
"""
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
if sys.argv[3] == 'exact':
    if a['entries'] != b['entries']:
        for x, y in zip(a['entries'], b['entries']):
            if x != y:
                sys.exit('first difference:\n  %s\n  %s' % (x, y))
        sys.exit('entry counts differ: %d vs %d' % (len(a['entries']), len(b['entries'])))
    if a.get('config') != b.get('config'):
        sys.exit('configs differ')
    if a['digest'] != b['digest']:
        sys.exit('same entries and config, but the manifests differ: %s %s'
                 % (a['digest'], b['digest']))
    print('identical: %d entries, manifest %s' % (len(a['entries']), a['digest']))
    sys.exit(0)
def key(e):
    return e.get('path') or e['path_hex']
ea, eb = ({key(e): e for e in m['entries']} for m in (a, b))
if set(ea) != set(eb):
    sys.exit('paths differ: only in A %s, only in B %s'
             % (sorted(set(ea) - set(eb)), sorted(set(eb) - set(ea))))
FIELDS = ('type', 'mode', 'uid', 'gid', 'size', 'chunks', 'holes', 'link', 'link_hex',
          'rdev', 'xattrs', 'mtime', 'mtime_ns')
ROOT = ('type', 'mode', 'uid', 'gid', 'xattrs')
bad = 0
for p in ea:
    for f in ROOT if p == '/' else FIELDS:
        if ea[p].get(f) != eb[p].get(f):
            print('%s: %s %r != %r' % (p, f, ea[p].get(f), eb[p].get(f)))
            bad += 1
if bad:
    sys.exit('%d differences' % bad)
print('%d paths match field by field' % len(ea))
PY
same() { python3 "$T/compare.py" "$T/$1.json" "$T/$2.json" "$3"; }
same oci-unpacked dir attrs

# the test image must hold what it claims to test
python3 - "$T/oci-unpacked.json" "$IMG" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
e = {x.get('path'): x for x in m['entries']}
gone = ['/dir/f1', '/dir/f2', '/hl-b', '/gone', '/op/old1', '/op/old2', '/op/old-sub']
assert not [p for p in gone if p in e], [p for p in gone if p in e]
for p in ['/op/new', '/op/new-sub/y', '/op/after-opaque', '/dir/f3', '/dir/sub/deep']:
    assert p in e, p
# layer 4 re-adds the pair with added/hl-c first; /added/hl-c sorts first either way
assert e['/added/hl-c']['type'] == 'file' and e['/added/hl-c']['size'] == 7
assert (e['/hl-a']['type'], e['/hl-a']['link']) == ('hardlink', '/added/hl-c')
assert e['/lnk']['type'] == 'symlink' and e['/lnk']['link'] == 'hello'
assert e['/suid']['mode'] == '4755' and e['/setgid']['mode'] == '2775' and e['/sticky']['mode'] == '1777'
assert e['/chr']['rdev'] == [1, 3] and e['/blk']['rdev'] == [7, 200] and e['/fifo']['type'] == 'fifo'
assert e['/owned']['uid'] == 1234 and e['/ns-file']['gid'] == 8765
assert e['/xattr']['xattrs'] == [{'name': 'user.comment', 'value': 'a comment'}]
assert e['/ns-file']['xattrs'] == [{'name': 'user.pax', 'value': 'from pax'}]
assert (e['/ns-file']['mtime_ns'], e['/ns-link']['mtime_ns'], e['/op/new-sub']['mtime_ns']) == \
       (123456789, 333333333, 444444444), ('nanoseconds lost', e['/ns-file'], e['/ns-link'], e['/op/new-sub'])
assert e['/mtime']['mtime'] == 981173106
assert len(e['/big']['chunks']) > 1 and e['/hello']['size'] == 12
assert m['config']['rootfs']['type'] == 'layers' and len(m['config']['rootfs']['diff_ids']) == 4
print('image content as intended')
PY

# ---- every other way to the same image gives exactly the same manifest entries
imp oci "oci:$IMG:t"
for tag in z u d n; do
	imp "oci-$tag" "oci:$IMG:$tag"
	same oci "oci-$tag" exact
done
skopeo copy -q --insecure-policy "oci:$IMG:t" "docker-archive:$T/skopeo.tar:example/img:1"
imp skopeo "docker-archive:$T/skopeo.tar"
same oci skopeo exact
imp skopeo-ref "docker-archive:$T/skopeo.tar:example/img:1"
same oci skopeo-ref exact

# legacy docker save layout: <id>/layer.tar members (gzip-compressed here, so only the
# config's diff_ids can vouch for them), a duplicate as a symlink, members in reverse order
python3 - "$T/skopeo.tar" "$T/legacy.tar" <<'PY'
import gzip, io, json, sys, tarfile
src = tarfile.open(sys.argv[1])
man = json.load(src.extractfile('manifest.json'))
files = {}
out_layers = []
for i, name in enumerate(man[0]['Layers']):
    ti = src.getmember(name)
    while ti.issym():
        ti = src.getmember(ti.linkname.replace('../', ''))
    files['L%d/layer.tar' % i] = gzip.compress(src.extractfile(ti).read())
    out_layers.append('L%d/layer.tar' % i)
files[man[0]['Config']] = src.extractfile(man[0]['Config']).read()
man[0]['Layers'] = out_layers
files['manifest.json'] = json.dumps(man).encode()
with tarfile.open(sys.argv[2], 'w', format=tarfile.GNU_FORMAT) as t:
    for name in reversed(list(files)):
        ti = tarfile.TarInfo(name)
        ti.size = len(files[name])
        t.addfile(ti, io.BytesIO(files[name]))
    # a symlinked alias, the way docker save shares a layer between images
    ti = tarfile.TarInfo('alias/layer.tar')
    ti.type, ti.linkname = tarfile.SYMTYPE, '../L0/layer.tar'
    t.addfile(ti)
PY
imp legacy "docker-archive:$T/legacy.tar"
same oci legacy exact
echo "all OCI / docker-archive imports agree"
