#!/bin/bash
# A blob that declares terabytes it does not hold is refused at once (issue 15, item 7):
# the digest check reads every declared byte, so an 8 TiB sparse layer (10 KB on disk)
# kept import busy for hours. A docker-archive whose layer member is a GNU or PAX sparse
# file (also inside a gzip'ed archive), or whose member declares more bytes than the whole
# (uncompressed) archive, and an OCI layout whose layer blob is a sparse file
# (truncate -s 8T, its descriptor saying 8 TiB) each fail with one line. Every run is under
# `timeout -k 5 60`: the old code was still hashing zeros when it was killed.
. "$(dirname "$0")/lib/common.sh"
grep -q 'GNU tar' <<<"$(tar --version 2>/dev/null)" || skip "needs GNU tar (--sparse)"
cd "$T"
mkdir da
echo '[{"Config":"config.json","RepoTags":["x:1"],"Layers":["layer.tar"]}]' >da/manifest.json
echo '{}' >da/config.json
truncate -s 8T da/layer.tar
tar -C da --sparse -cf gnu-sparse.tar manifest.json config.json layer.tar
tar -C da --sparse --format=pax -cf pax-sparse.tar manifest.json config.json layer.tar
gzip -c gnu-sparse.tar >gnu-sparse.tar.gz
rm da/layer.tar
python3 - <<'PY'
import hashlib, io, json, os, tarfile
# a layer member that declares 1 TiB and holds nothing: its header, then the end
with tarfile.open('overlong.tar', 'w', format=tarfile.PAX_FORMAT) as t:
    for n in ('manifest.json', 'config.json'):
        t.add('da/' + n, arcname=n)
    i = tarfile.TarInfo('layer.tar')
    i.size = 1 << 40
    t.fileobj.write(i.tobuf(tarfile.PAX_FORMAT, 'utf-8', 'surrogateescape'))
# an OCI layout whose only layer blob is 8 TiB of holes
def put(d, data, mt):
    h = hashlib.sha256(data).hexdigest()
    os.makedirs(d + '/blobs/sha256', exist_ok=True)
    with open(d + '/blobs/sha256/' + h, 'wb') as f:
        f.write(data)
    return {'mediaType': mt, 'digest': 'sha256:' + h, 'size': len(data)}
d = 'oci'
h = hashlib.sha256(b'not the content').hexdigest()
os.makedirs(d + '/blobs/sha256')
with open(d + '/blobs/sha256/' + h, 'wb') as f:
    f.truncate(8 << 40)
ld = {'mediaType': 'application/vnd.oci.image.layer.v1.tar', 'digest': 'sha256:' + h,
      'size': 8 << 40}
cd = put(d, json.dumps({'architecture': 'amd64', 'os': 'linux',
                        'rootfs': {'type': 'layers', 'diff_ids': [ld['digest']]}}).encode(),
         'application/vnd.oci.image.config.v1+json')
m = {'schemaVersion': 2, 'mediaType': 'application/vnd.oci.image.manifest.v1+json',
     'config': cd, 'layers': [ld]}
md = put(d, json.dumps(m).encode(), m['mediaType'])
with open(d + '/index.json', 'w') as f:
    json.dump({'schemaVersion': 2, 'manifests': [md]}, f)
with open(d + '/oci-layout', 'w') as f:
    f.write('{"imageLayoutVersion": "1.0.0"}')
PY
imp() { timeout -k 5 60 "$LAZYBLK" import "$1" --store store -o out.manifest; }
sparse="layer.tar: a sparse member (GNU or PAX sparse file) where a blob is expected"
expect_error "GNU sparse layer member" "$sparse" -- imp docker-archive:gnu-sparse.tar
expect_error "PAX sparse layer member" "$sparse" -- imp docker-archive:pax-sparse.tar
expect_error "sparse member in a gzip'ed archive" "$sparse" -- imp docker-archive:gnu-sparse.tar.gz
expect_error "member larger than the archive" \
  "layer.tar: declares 1099511627776 bytes, more than the whole archive" -- imp docker-archive:overlong.tar
expect_error "sparse OCI layer blob" "the blob file is sparse" -- imp oci:oci
[ ! -e out.manifest ] || die "a manifest was written for a refused image"
