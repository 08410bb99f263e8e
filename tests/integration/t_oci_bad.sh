#!/bin/bash
# Broken OCI layouts and docker-archives: every case must fail with a non-zero exit, exactly
# one "lazyblk: import: ..." line on stderr, and no manifest written. The layouts are made
# by a small python helper (no umoci), so each defect is exactly the one intended.
set -euo pipefail
: "${LAZYBLK:?LAZYBLK must name the lazyblk binary}"
for tool in python3 zstd; do
	command -v "$tool" >/dev/null || { echo "skip: $tool is not installed"; exit 77; }
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

cat >"$T/oci.py" <<'PY'
"""Tiny OCI layout writer/editor for tests: python3 oci.py CMD DIR [ARGS]."""
import gzip, hashlib, io, json, os, subprocess, sys, tarfile

def put(d, data):
    h = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(d, 'blobs', 'sha256'), exist_ok=True)
    with open(os.path.join(d, 'blobs', 'sha256', h), 'wb') as f:
        f.write(data)
    return {'digest': 'sha256:' + h, 'size': len(data)}

def path(d, digest):
    return os.path.join(d, 'blobs', 'sha256', digest.split(':', 1)[1])

def get(d, digest):
    return open(path(d, digest), 'rb').read()

def layer_tar(entries):
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode='w', format=tarfile.PAX_FORMAT) as t:
        for name, data in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = 1000000000
            if data is None:
                ti.type = tarfile.DIRTYPE
                ti.mode = 0o755
                t.addfile(ti)
            else:
                ti.size = len(data)
                ti.mode = 0o644
                t.addfile(ti, io.BytesIO(data))
    return bio.getvalue()

GZ = 'application/vnd.oci.image.layer.v1.tar+gzip'
TAR = 'application/vnd.oci.image.layer.v1.tar'
ZST = 'application/vnd.oci.image.layer.v1.tar+zstd'

def compress(data, mt):
    if mt == GZ:
        return gzip.compress(data, mtime=0)
    if mt == ZST:
        return subprocess.run(['zstd', '-q', '-c'], input=data, check=True,
                              stdout=subprocess.PIPE).stdout
    return data

def image(d, layers, tag):
    """layers: [(tar bytes, media type)]; returns the manifest descriptor."""
    ls, diffs = [], []
    for tar, mt in layers:
        desc = put(d, compress(tar, mt))
        desc['mediaType'] = mt
        ls.append(desc)
        diffs.append('sha256:' + hashlib.sha256(tar).hexdigest())
    cfg = {'architecture': 'amd64', 'os': 'linux', 'config': {},
           'rootfs': {'type': 'layers', 'diff_ids': diffs}}
    cdesc = put(d, json.dumps(cfg).encode())
    cdesc['mediaType'] = 'application/vnd.oci.image.config.v1+json'
    m = {'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.manifest.v1+json',
         'config': cdesc, 'layers': ls}
    mdesc = put(d, json.dumps(m).encode())
    mdesc['mediaType'] = 'application/vnd.oci.image.manifest.v1+json'
    if tag:
        mdesc['annotations'] = {'org.opencontainers.image.ref.name': tag}
    return mdesc

def write_index(d, descs):
    with open(os.path.join(d, 'index.json'), 'w') as f:
        json.dump({'schemaVersion': 2, 'manifests': descs}, f)
    with open(os.path.join(d, 'oci-layout'), 'w') as f:
        json.dump({'imageLayoutVersion': '1.0.0'}, f)

def index(d):
    return json.load(open(os.path.join(d, 'index.json')))

def manifest(d, i=0):
    return json.loads(get(d, index(d)['manifests'][i]['digest']))

def set_manifest(d, m, i=0):
    """Store m and point index entry i at it (digest and size fixed up)."""
    ix = index(d)
    desc = put(d, json.dumps(m).encode())
    ix['manifests'][i].update(desc)
    with open(os.path.join(d, 'index.json'), 'w') as f:
        json.dump(ix, f)

def replace_layer(d, n, data, mt=None):
    """Replace layer n's blob with data, fixing its descriptor (not the diff_id)."""
    m = manifest(d)
    desc = put(d, data)
    m['layers'][n].update(desc)
    if mt:
        m['layers'][n]['mediaType'] = mt
    set_manifest(d, m)

BASE = [('etc/', None), ('etc/hostname', b'box\n'), ('bin/', None),
        ('bin/tool', b'#!/bin/sh\necho hi\n' * 100)]

def main():
    cmd, d = sys.argv[1], sys.argv[2]
    a = sys.argv[3:]
    if cmd == 'base':              # one gzip layer, one plain tar layer, one zstd layer
        os.makedirs(d)
        l2 = layer_tar([('etc/', None), ('etc/motd', b'hello ' * 50 + b'\n')])
        l3 = layer_tar([('etc/', None), ('etc/.wh.hostname', b'')])
        write_index(d, [image(d, [(layer_tar(BASE), GZ), (l2, TAR), (l3, ZST)], 't')])
    elif cmd == 'flip':            # flip one byte of layer n at offset off (negative: from end)
        n, off = int(a[0]), int(a[1])
        p = path(d, manifest(d)['layers'][n]['digest'])
        b = bytearray(open(p, 'rb').read())
        b[off] ^= 0x20
        open(p, 'wb').write(bytes(b))
    elif cmd == 'find':            # offset of a byte string in layer n's blob
        n = int(a[0])
        print(get(d, manifest(d)['layers'][n]['digest']).index(a[1].encode()))
    elif cmd == 'layer-field':     # set a field of layer n's descriptor (JSON value)
        m = manifest(d)
        m['layers'][int(a[0])][a[1]] = json.loads(a[2])
        set_manifest(d, m)
    elif cmd == 'config-field':    # set a field of the config descriptor (JSON value)
        m = manifest(d)
        m['config'][a[0]] = json.loads(a[1])
        set_manifest(d, m)
    elif cmd == 'truncate':        # layer n's blob cut to half, descriptor fixed up
        n = int(a[0])
        data = get(d, manifest(d)['layers'][n]['digest'])
        replace_layer(d, n, data[:len(data) // 2])
    elif cmd == 'evil':            # layer 0 replaced by a tar with this member name
        replace_layer(d, 0, gzip.compress(layer_tar([('etc/', None), (a[0], b'x')])), GZ)
    elif cmd == 'diffid':          # config diff_id 1 wrong, config descriptor fixed up
        m = manifest(d)
        cfg = json.loads(get(d, m['config']['digest']))
        cfg['rootfs']['diff_ids'][1] = 'sha256:' + '0' * 64
        m['config'].update(put(d, json.dumps(cfg).encode()))
        set_manifest(d, m)
    elif cmd == 'diffcount':       # one diff_id too few, config descriptor fixed up
        m = manifest(d)
        cfg = json.loads(get(d, m['config']['digest']))
        cfg['rootfs']['diff_ids'].pop()
        m['config'].update(put(d, json.dumps(cfg).encode()))
        set_manifest(d, m)
    elif cmd == 'second-tag':      # a second image in index.json
        ix = index(d)
        ix['manifests'].append(image(d, [(layer_tar(BASE), GZ)], a[0]))
        with open(os.path.join(d, 'index.json'), 'w') as f:
            json.dump(ix, f)
    elif cmd == 'nested':          # index.json -> image index without linux/amd64
        ix = index(d)
        one = dict(ix['manifests'][0])
        del one['annotations']
        arm = dict(one, platform={'os': 'linux', 'architecture': 'arm64'})
        s390 = dict(one, platform={'os': 'linux', 'architecture': 's390x'})
        nested = {'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.index.v1+json',
                  'manifests': [arm, s390]}
        desc = put(d, json.dumps(nested).encode())
        desc['mediaType'] = 'application/vnd.oci.image.index.v1+json'
        desc['annotations'] = {'org.opencontainers.image.ref.name': 't'}
        write_index(d, [desc])
    elif cmd == 'manifest-edit':   # change the manifest blob in place (digest now wrong)
        p = path(d, index(d)['manifests'][0]['digest'])
        m = json.loads(open(p, 'rb').read())
        m['annotations'] = {'x': 'y'}
        data = json.dumps(m).encode()
        open(p, 'wb').write(data)
        ix = index(d)
        ix['manifests'][0]['size'] = len(data)
        with open(os.path.join(d, 'index.json'), 'w') as f:
            json.dump(ix, f)
    elif cmd == 'docker':          # docker-archive tar from layout d: docker OUT [drop|corrupt|missing-layer]
        out, how = a[0], (a[1] if len(a) > 1 else '')
        m = manifest(d)
        members, layers = {}, []
        cfg = get(d, m['config']['digest'])
        cname = m['config']['digest'].split(':')[1] + '.json'
        members[cname] = cfg
        for l in m['layers']:
            data = get(d, l['digest'])
            if l['mediaType'] == GZ:
                data = gzip.decompress(data)
            elif l['mediaType'] == ZST:
                data = subprocess.run(['zstd', '-q', '-d', '-c'], input=data, check=True,
                                      stdout=subprocess.PIPE).stdout
            name = hashlib.sha256(data).hexdigest() + '.tar'
            if how == 'corrupt' and not layers:
                i = data.index(b'box')
                data = data[:i] + b'BOX' + data[i + 3:]
            members[name] = data
            layers.append(name)
        if how == 'missing-layer':
            del members[layers[-1]]
        man = [{'Config': cname, 'RepoTags': ['example/img:1'], 'Layers': layers}]
        if how == 'badjson':
            members['manifest.json'] = b'[{"Config": '
        elif how == 'empty':
            members['manifest.json'] = b'[]'
        elif how != 'drop':
            members['manifest.json'] = json.dumps(man).encode()
        with tarfile.open(out, 'w', format=tarfile.PAX_FORMAT) as t:
            for name, data in members.items():
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    else:
        sys.exit('unknown command ' + cmd)

main()
PY
oci() { python3 "$T/oci.py" "$@"; }

n=0
# d=a fresh copy of the good layout for the next case
new_case() {
	n=$((n + 1))
	d=$T/c$n
	cp -a "$T/base" "$d"
}

# expect_fail NAME SUBSTRING SRC: exit != 0, one stderr line "lazyblk: import: ..."
# containing SUBSTRING, and no manifest file.
expect_fail() {
	local name=$1 want=$2 src=$3 rc=0
	rm -f "$T/out.manifest"
	"$LAZYBLK" import "$src" --store "$T/store" -o "$T/out.manifest" \
		>"$T/stdout" 2>"$T/stderr" || rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "FAIL $name: import succeeded"; exit 1
	fi
	if [ "$(wc -l <"$T/stderr")" -ne 1 ]; then
		echo "FAIL $name: expected one stderr line, got:"; cat "$T/stderr"; exit 1
	fi
	if ! grep -q '^lazyblk: import: ' "$T/stderr"; then
		echo "FAIL $name: stderr line has the wrong prefix: $(cat "$T/stderr")"; exit 1
	fi
	if ! grep -qF -- "$want" "$T/stderr"; then
		echo "FAIL $name: stderr lacks '$want': $(cat "$T/stderr")"; exit 1
	fi
	if [ -e "$T/out.manifest" ]; then
		echo "FAIL $name: a manifest was written"; exit 1
	fi
	echo "ok   $name: $(cat "$T/stderr")"
}

oci base "$T/base"
# the good layout imports (gzip, plain and zstd layers; a whiteout in the zstd one)
"$LAZYBLK" import "oci:$T/base:t" --store "$T/store" -o "$T/good.manifest" >/dev/null
"$LAZYBLK" import "oci:$T/base" --store "$T/store" -o "$T/good2.manifest" >/dev/null
"$LAZYBLK" manifest show "$T/good.manifest" | python3 -c '
import json, sys
m = json.load(sys.stdin)
paths = sorted(e["path"] for e in m["entries"])
assert paths == ["/", "/bin", "/bin/tool", "/etc", "/etc/motd"], paths
assert m["config"]["rootfs"]["type"] == "layers", m.get("config")
'
cmp <("$LAZYBLK" manifest show "$T/good.manifest") <("$LAZYBLK" manifest show "$T/good2.manifest")
oci docker "$T/base" "$T/good.tar"
"$LAZYBLK" import "docker-archive:$T/good.tar" --store "$T/store" -o "$T/good3.manifest" >/dev/null
"$LAZYBLK" import "docker-archive:$T/good.tar:example/img:1" --store "$T/store" \
	-o "$T/good4.manifest" >/dev/null
for m in good3 good4; do
	cmp <("$LAZYBLK" manifest show "$T/good.manifest" | grep '"path"') \
	    <("$LAZYBLK" manifest show "$T/$m.manifest" | grep '"path"')
done
# a descriptor without mediaType is taken for what its blob is
cp -a "$T/base" "$T/nomt"
sed -i 's/"mediaType": "[^"]*", //' "$T/nomt/index.json"
if grep -q mediaType "$T/nomt/index.json"; then echo "FAIL: sed left a mediaType"; exit 1; fi
"$LAZYBLK" import "oci:$T/nomt:t" --store "$T/store" -o "$T/good5.manifest" >/dev/null
cmp <("$LAZYBLK" manifest show "$T/good.manifest") <("$LAZYBLK" manifest show "$T/good5.manifest")
echo "ok   good layout and docker-archive import"

# --- blob contents
new_case; off=$(oci find "$d" 1 hello)
oci flip "$d" 1 "$off"
expect_fail "flipped byte in a plain tar layer's file data" "digest mismatch" "oci:$d:t"
new_case; oci flip "$d" 0 40
expect_fail "flipped byte in a gzip layer" "layer 1 sha256:" "oci:$d:t"
new_case; oci flip "$d" 2 -6
expect_fail "flipped byte near the end of a zstd layer" "layer 3 sha256:" "oci:$d:t"
new_case; oci truncate "$d" 0
expect_fail "truncated gzip layer (digest fixed up)" "layer 1 sha256:" "oci:$d:t"
new_case; oci truncate "$d" 2
expect_fail "truncated zstd layer (digest fixed up)" "layer 3 sha256:" "oci:$d:t"
new_case; oci layer-field "$d" 1 size 99999
expect_fail "layer size differs from its descriptor" "size mismatch" "oci:$d:t"
new_case; oci diffid "$d"
expect_fail "config diff_id does not match the uncompressed layer" "diff_id" "oci:$d:t"
new_case; oci diffcount "$d"
expect_fail "config with too few diff_ids" "config lists 2 diff_ids for 3 layers" "oci:$d:t"
new_case; oci manifest-edit "$d"
expect_fail "manifest blob changed (digest mismatch)" "manifest sha256:" "oci:$d:t"
new_case; rm "$d"/blobs/sha256/"$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["manifests"][0]["digest"][7:])' "$d/index.json")"
expect_fail "missing manifest blob" "blob missing" "oci:$d:t"
new_case; oci layer-field "$d" 1 digest '"sha256:'"$(printf 'ab%.0s' $(seq 32))"'"'
expect_fail "missing layer blob" "blob missing" "oci:$d:t"

# --- descriptors and JSON
new_case; oci layer-field "$d" 1 mediaType '"application/vnd.example.layer.v1.tar+lz4"'
expect_fail "unknown layer media type" "unknown layer media type application/vnd.example" "oci:$d:t"
new_case; oci layer-field "$d" 0 digest '"sha256:../../etc"'
expect_fail "layer digest with a path" "bad digest 'sha256:../../etc'" "oci:$d:t"
new_case; oci layer-field "$d" 0 digest '"sha256:'"$(printf 'AB%.0s' $(seq 32))"'"'
expect_fail "upper-case layer digest" "bad digest" "oci:$d:t"
new_case; oci config-field "$d" digest '"sha512:'"$(printf 'ab%.0s' $(seq 64))"'"'
expect_fail "sha512 config digest" "bad digest" "oci:$d:t"
new_case; sed -i 's/"digest": "sha256:[0-9a-f]*"/"digest": "sha256:..\/..\/..\/..\/etc\/passwd"/' "$d/index.json"
expect_fail "index.json digest with a path" "bad digest" "oci:$d:t"
new_case; echo '{"schemaVersion": 2, "manifests": [' >"$d/index.json"
expect_fail "index.json truncated" "index.json: not JSON" "oci:$d:t"
new_case; echo 'this is not json' >"$d/index.json"
expect_fail "index.json not JSON" "index.json: not JSON" "oci:$d:t"
new_case; rm "$d/index.json"
expect_fail "index.json missing" "index.json" "oci:$d:t"
new_case; echo '{"imageLayoutVersion":"2.0.0"}' >"$d/oci-layout"
expect_fail "unsupported layout version" "imageLayoutVersion" "oci:$d:t"
new_case; rm "$d/oci-layout"
expect_fail "no oci-layout file" "oci-layout" "oci:$d"
expect_fail "no such directory" "no such directory" "oci:$T/does-not-exist:t"

# --- choosing the image
new_case; oci second-tag "$d" other
expect_fail "two tags and no TAG" "tags: t, other" "oci:$d"
expect_fail "unknown tag" "no image tagged 'nope'" "oci:$d:nope"
new_case; oci nested "$d"
expect_fail "nested index without linux/amd64" "no linux/amd64 image (platforms: linux/arm64, linux/s390x)" "oci:$d:t"

# --- layer contents that import_tar refuses
# (names are relative to the root, "/etc/x" too: only a ".." that climbs out is refused)
new_case; oci evil "$d" ../escape
expect_fail "layer member ../escape" "../escape: '..' climbs out of the root" "oci:$d:t"
new_case; oci evil "$d" etc/../../escape
expect_fail "layer member etc/../../escape" "'..' climbs out of the root" "oci:$d:t"
new_case; oci evil "$d" /../escape
expect_fail "layer member /../escape" "/../escape: '..' climbs out of the root" "oci:$d:t"

# --- docker-archive
oci docker "$T/base" "$T/nomanifest.tar" drop
expect_fail "docker-archive without manifest.json" "no manifest.json" "docker-archive:$T/nomanifest.tar"
oci docker "$T/base" "$T/badjson.tar" badjson
expect_fail "docker-archive manifest.json not JSON" "manifest.json: not JSON" "docker-archive:$T/badjson.tar"
oci docker "$T/base" "$T/empty.tar" empty
expect_fail "docker-archive manifest.json without images" "lists no images" "docker-archive:$T/empty.tar"
oci docker "$T/base" "$T/corrupt.tar" corrupt
expect_fail "docker-archive layer not matching its digest name" "digest mismatch" "docker-archive:$T/corrupt.tar"
oci docker "$T/base" "$T/missing.tar" missing-layer
expect_fail "docker-archive layer missing" "not in the archive" "docker-archive:$T/missing.tar"
expect_fail "docker-archive unknown RepoTag" "no image tagged 'example/img:2'" "docker-archive:$T/good.tar:example/img:2"
echo 'not a tar' >"$T/junk.tar"
expect_fail "docker-archive that is not a tar" "docker-archive:" "docker-archive:$T/junk.tar"
expect_fail "docker-archive missing file" "No such file" "docker-archive:$T/nope.tar"
echo "all failure cases behave"
