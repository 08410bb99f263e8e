#!/bin/bash
# A FIFO (or any file that is not regular) where import expects a regular file is refused
# with one line, at once, instead of blocking the open forever (issue 15, item 9): an OCI
# layout's oci-layout, index.json, manifest blob or layer blob, a docker-archive given as
# a FIFO (it is read twice, so it cannot come from a pipe), a FIFO named like a tar. In a
# directory tree a FIFO is an entry like any other: recorded as a FIFO, never opened, even
# when it is named manifest.json (the check for an unpacked docker archive used to open
# it and block). Every run is under `timeout -k 5 60` (the CLI catches SIGTERM, which does
# not end a blocked open): a hang fails the test.
. "$(dirname "$0")/lib/common.sh"
cd "$T"
python3 - <<'PY'
import hashlib, io, json, os, tarfile
def layer():
    bio = io.BytesIO()
    with tarfile.open(fileobj=bio, mode='w', format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo('hello')
        ti.size = 3
        t.addfile(ti, io.BytesIO(b'hi\n'))
    return bio.getvalue()
def put(d, data, mt):
    h = hashlib.sha256(data).hexdigest()
    os.makedirs(d + '/blobs/sha256', exist_ok=True)
    with open(d + '/blobs/sha256/' + h, 'wb') as f:
        f.write(data)
    return {'mediaType': mt, 'digest': 'sha256:' + h, 'size': len(data)}
def layout(d):
    l = layer()
    ld = put(d, l, 'application/vnd.oci.image.layer.v1.tar')
    cfg = {'architecture': 'amd64', 'os': 'linux',
           'rootfs': {'type': 'layers', 'diff_ids': [ld['digest']]}}
    cd = put(d, json.dumps(cfg).encode(), 'application/vnd.oci.image.config.v1+json')
    m = {'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.manifest.v1+json',
         'config': cd, 'layers': [ld]}
    md = put(d, json.dumps(m).encode(), m['mediaType'])
    with open(d + '/index.json', 'w') as f:
        json.dump({'schemaVersion': 2, 'manifests': [md]}, f)
    with open(d + '/oci-layout', 'w') as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    return {'manifest': md, 'layer': ld}
def fifo(p):
    os.remove(p)
    os.mkfifo(p)
layout('good')
layout('index')
fifo('index/index.json')
layout('layoutfile')
fifo('layoutfile/oci-layout')
fifo('manifest/blobs/sha256/' + layout('manifest')['manifest']['digest'][7:])
fifo('layer/blobs/sha256/' + layout('layer')['layer']['digest'][7:])
os.mkfifo('archive.fifo')
os.mkfifo('stream.tar')
os.makedirs('tree/sub')
os.mkfifo('tree/manifest.json')      # what an unpacked docker archive would hold
os.mkfifo('tree/sub/fifo')
with open('tree/sub/file', 'w') as f:
    f.write('data\n')
PY
imp() { timeout -k 5 60 "$LAZYBLK" import "$1" --store store -o out.manifest; }
imp oci:good >/dev/null || die "the well-formed layout did not import"
rm -f out.manifest
expect_error "index.json is a FIFO" "index.json: not a regular file" -- imp oci:index
expect_error "oci-layout is a FIFO" "oci-layout: not a regular file" -- imp oci:layoutfile
expect_error "the manifest blob is a FIFO" "the blob is not a regular file" -- imp oci:manifest
expect_error "a layer blob is a FIFO" "layer 1 sha256:" -- imp oci:layer
grep -q "the blob is not a regular file" "$T/.err" || die "layer FIFO: $(cat "$T/.err")"
expect_error "docker-archive:FIFO" "not a regular file" -- imp docker-archive:archive.fifo
expect_error "a FIFO named like a tar" "not a directory, a tar file" -- imp stream.tar
[ ! -e out.manifest ] || die "a manifest was written for a refused source"
imp tree >/dev/null || die "a tree holding FIFOs did not import"
"$LAZYBLK" manifest show out.manifest | python3 -c '
import json, sys
e = {x["path"]: x["type"] for x in json.load(sys.stdin)["entries"]}
assert e["/manifest.json"] == "fifo" and e["/sub/fifo"] == "fifo", e
assert e["/sub/file"] == "file", e
print("ok: the FIFOs of a tree are recorded as FIFOs")'
