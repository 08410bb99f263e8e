#!/bin/bash
# JSON bombs (issue 15, item 8): json-c spends ~800 bytes on each {} of a [{},{},...], so a
# 2 MB OCI manifest took 548 MB to import and a 4 MB registry index 1.1 GB in serve. Under
# a 400 MB address-space limit, import of such a manifest and serve from such a registry
# must be refused with one line naming the limit (not killed, not "out of memory"); a
# docker:// image config larger than its limit is refused before it is downloaded; and
# concurrent chunk misses must reload a registry's chunk index once, not once each.
. "$(dirname "$0")/lib/common.sh"
for tool in python3 curl prlimit nbdcopy nbdinfo; do
  command -v "$tool" >/dev/null || skip "t_json_bomb: $tool is not installed"
done
. "$TESTLIB/remote.sh"
set -u
LIMIT=(prlimit --as=$((400 << 20)) --)
# ASan reserves terabytes of address space for its shadow: under SAN=1 only the refusals
# are checked, not the bound
! grep -qa __asan_init "$LAZYBLK" || LIMIT=()

# ---- a 2 MB [{},{},...] as the image manifest of an OCI layout
python3 - "$T/bomb.oci" <<'PY'
import hashlib, json, os, sys
d = sys.argv[1]
os.makedirs(d + "/blobs/sha256")
def blob(b):
    h = hashlib.sha256(b).hexdigest()
    open("%s/blobs/sha256/%s" % (d, h), "wb").write(b)
    return "sha256:" + h, len(b)
cfg, cl = blob(json.dumps({"architecture": "amd64", "os": "linux",
                           "rootfs": {"type": "layers", "diff_ids": []}}).encode())
man = (b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
       b'"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"' +
       cfg.encode() + b'","size":' + str(cl).encode() + b'},"layers":[' +
       b",".join([b"{}"] * (2000000 // 3)) + b"]}")
md, ml = blob(man)
open(d + "/oci-layout", "w").write('{"imageLayoutVersion":"1.0.0"}')
json.dump({"schemaVersion": 2, "manifests": [{
    "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md, "size": ml,
    "annotations": {"org.opencontainers.image.ref.name": "t"}}]}, open(d + "/index.json", "w"))
PY
expect_fail_line "import of a 2 MB manifest bomb" "manifest sha256:.*65536 JSON values" -- \
  "${LIMIT[@]}" "$LAZYBLK" import "oci:$T/bomb.oci:t" --store "$T/bs" -o "$T/bomb.manifest"
[ ! -e "$T/bomb.manifest" ] || die "a manifest was written for the bomb"

# ---- a registry whose chunk index is a 4 MB bomb, then one over the size limit
build_image a 2 --chunk-size 256K
SOCK=$T/nbd.sock
for n in 4000000 5000000; do
  start_fake reg --bomb-index "$n"
  case $n in 4000000) want="65536 JSON values" ;; *) want="larger than 4 MiB" ;; esac
  expect_fail_line "serve from a registry with a $n-byte index" "$want" -- \
    timeout 60 "${LIMIT[@]}" "$LAZYBLK" serve "$T/a.layout" --store "$T/s$n" \
    --remote "oci://127.0.0.1:$FAKE_PORT/x/y" --nbd "unix:$SOCK"
  stop_pid "$FAKE_PID"
done

# ---- a docker:// image whose config is 64 MiB (issue 24): refused from its descriptor,
# before a byte of it is fetched (it was downloaded whole into STORE/tmp, then refused)
start_fake cfg --huge-config $((64 << 20))
expect_fail_line "import docker:// of a 64 MiB config" \
  "config: the manifest says 67108864 bytes: larger than 8 MiB, the limit for an image config" -- \
  timeout 60 "${LIMIT[@]}" "$LAZYBLK" import "docker://127.0.0.1:$FAKE_PORT/x/y:t" --insecure \
  --store "$T/cs" -o "$T/c.manifest"
! grep -q "^GET /v2/x/y/blobs/" "$T/cfg.log" || die "the config was fetched: $(cat "$T/cfg.log")"
[ ! -e "$T/c.manifest" ] || die "a manifest was written for the 64 MiB config"
stop_pid "$FAKE_PID"

# ---- concurrent misses reload the index once: the first GET of the tag lists nothing, the
# later ones (answered after 1 s) everything; serve (without its start-up check, which would
# miss) waits out the reload interval, then many reads miss at once
start_fake reg --store "$T/a.store" --empty-first --index-delay 1
start_server sf "nbd+unix:///?socket=$SOCK" "$T/a.layout" --store "$T/sf" \
  --remote "oci://127.0.0.1:$FAKE_PORT/x/y" --nbd "unix:$SOCK" --no-check \
  --fetch-concurrency 8
sleep 6 # INDEX_RELOAD_SECS (5) after the index was loaded at the start: a miss may reload
nbdcopy --requests=16 --connections=1 "nbd+unix:///?socket=$SOCK" "$T/sf.raw" ||
  die "reading the disk failed: $(cat "$T/sf.err")"
stop_server "$SRV" sf
cmp "$T/sf.raw" "$T/a.raw" || die "the disk read through the reloaded index differs"
gets=$(grep -c '^GET /v2/x/y/manifests/lazyblk-chunks ' "$T/reg.log")
[ "$gets" -eq 2 ] ||
  die "the chunk index was fetched $gets times (once at the start, once for the misses)"
echo "json bomb: ok"
