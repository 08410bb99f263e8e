#!/bin/bash
# An OCI registry remote (a private docker-registry): push publishes every chunk as a blob
# under an image index that curl can read back, export from an empty store gives the local
# disk, a second push uploads nothing, a push of another image to the same tag merges,
# token auth works (credentials from the environment; a clear error without them), blob
# redirects never carry credentials to the other host, and a blob corrupted in the
# registry's storage fails exactly the reads that need it.
. "$(dirname "$0")/lib/common.sh"
for tool in docker-registry curl nbdinfo debugfs zstd python3; do
  command -v "$tool" >/dev/null || skip "t_remote_oci: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_registry

# oci_list HTTP_BASE REPO TAG: read the published index with curl, check its documents, and
# print "CHUNK BLOBDIGEST SIZE" per layer (sorted, unique).
oci_list() {
  python3 - "$@" <<'EOF'
import json, subprocess, sys
base, repo, tag = sys.argv[1:4]
IDX = "application/vnd.oci.image.index.v1+json"
MAN = "application/vnd.oci.image.manifest.v1+json"

def get(ref, accept):
    r = subprocess.run(["curl", "-fsS", "-H", "Accept: " + accept,
                        "%s/v2/%s/manifests/%s" % (base, repo, ref)], capture_output=True)
    if r.returncode:
        sys.exit("oci_list: GET %s: %s" % (ref, r.stderr.decode().strip()))
    return json.loads(r.stdout)

idx = get(tag, IDX)
assert idx.get("mediaType") == IDX and idx.get("schemaVersion") == 2, idx
out = set()
for m in idx["manifests"]:
    assert m["mediaType"] == MAN, m
    man = get(m["digest"], MAN)
    assert man["mediaType"] == MAN, man
    assert man.get("artifactType") == "application/vnd.lazyblk.chunks.v1", man
    assert man["config"]["mediaType"] == "application/vnd.oci.empty.v1+json", man["config"]
    for l in man["layers"]:
        assert l["mediaType"] == "application/vnd.lazyblk.chunk.v1+zstd", l
        c = l["annotations"]["org.lazyblk.chunk"]
        assert len(c) == 64, l
        out.add("%s %s %d" % (c, l["digest"].split(":", 1)[1], l["size"]))
print("\n".join(sorted(out)))
EOF
}
# store_list STORE: "CHUNK BLOBDIGEST SIZE" per chunk file of STORE, sorted.
store_list() {
  find "$1/chunks" -type f | while read -r f; do
    echo "$(basename "$f") $(sha256sum <"$f" | cut -d' ' -f1) $(stat -c %s "$f")"
  done | sort
}
CREDS=(env LAZYBLK_REMOTE_USER=alice LAZYBLK_REMOTE_PASSWORD=s3cret)
NOCREDS=(env -u LAZYBLK_REMOTE_USER -u LAZYBLK_REMOTE_PASSWORD)

build_image a 20 --chunk-size 256K
build_image b 6 --chunk-size 256K
start_registry
REG=http://127.0.0.1:$REG_PORT
U=oci://127.0.0.1:$REG_PORT/lazyblk/test

# ---- push, then read the index back with curl: one layer per chunk, the frame as the blob
"${NOCREDS[@]}" "$LAZYBLK" push --store "$T/a.store" --remote "$U" >"$T/push1.out" ||
  die "push to the registry failed"
oci_list "$REG" lazyblk/test lazyblk-chunks >"$T/idx1" || die "published index: $(cat "$T/idx1")"
store_list "$T/a.store" >"$T/store_a"
cmp -s "$T/idx1" "$T/store_a" ||
  die "index vs store: $(diff "$T/idx1" "$T/store_a" | head -5)"
read -r c1 b1 _ <"$T/idx1"
curl -fsS "$REG/v2/lazyblk/test/blobs/sha256:$b1" | cmp - "$(chunk_file "$T/a.store" "$c1")" ||
  die "blob differs from the chunk file"
empty=sha256:$(printf '{}' | sha256sum | cut -d' ' -f1)
[ "$(curl -fsS "$REG/v2/lazyblk/test/blobs/$empty")" = "{}" ] ||
  die "the empty config blob is missing"
echo "push: $(wc -l <"$T/idx1") chunks published under lazyblk-chunks"

# ---- export from an empty store
"${NOCREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e1" --remote "$U" -o "$T/o1.raw" \
  >/dev/null || die "export from the registry failed"
cmp "$T/o1.raw" "$T/a.raw" || die "export from the registry differs from the local export"
check_cache_dir "$T/e1"

# ---- a second push (through a counting proxy) uploads no blob
start_proxy "$REG"
"${NOCREDS[@]}" "$LAZYBLK" push --store "$T/a.store" \
  --remote "oci://127.0.0.1:$PROXY_PORT/lazyblk/test" >/dev/null || die "second push failed"
ups=$(( $(proxy_stat "by_kind.POST upload") + $(proxy_stat "by_kind.PUT upload") ))
# (the empty config blob may be re-sent; no chunk may be)
[ "$ups" -le 1 ] || die "second push uploaded $ups blobs: $(proxy_stats)"
oci_list "$REG" lazyblk/test lazyblk-chunks | cmp -s - "$T/idx1" ||
  die "second push changed the index"
stop_proxy
echo "second push: $ups uploads"

# ---- an explicit tag
"${NOCREDS[@]}" "$LAZYBLK" push --store "$T/a.store" --remote "$U:v2" >/dev/null ||
  die "push to :v2 failed"
oci_list "$REG" lazyblk/test v2 | cmp -s - "$T/idx1" || die "index under v2 differs"
"${NOCREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e2" --remote "$U:v2" -o "$T/o2.raw" \
  >/dev/null || die "export from :v2 failed"
cmp "$T/o2.raw" "$T/a.raw" || die "export from :v2 differs"

# ---- another image pushed to the same tag: both stay reachable
"${NOCREDS[@]}" "$LAZYBLK" push --store "$T/b.store" --remote "$U" >/dev/null ||
  die "push of b failed"
oci_list "$REG" lazyblk/test lazyblk-chunks >"$T/idx2"
store_list "$T/b.store" | sort -u - "$T/store_a" | cmp -s - "$T/idx2" ||
  die "merged index is not the union of both stores"
for img in a b; do
  "${NOCREDS[@]}" "$LAZYBLK" export "$T/$img.layout" --store "$T/m.$img" --remote "$U" \
    -o "$T/m.$img.raw" >/dev/null || die "export of $img after the merge failed"
  cmp "$T/m.$img.raw" "$T/$img.raw" || die "export of $img after the merge differs"
done
echo "merge: $(wc -l <"$T/idx2") chunks under the tag, both images export"

# ---- token auth through the proxy: credentials from the environment
start_proxy "$REG" --auth alice:s3cret
AU=oci://127.0.0.1:$PROXY_PORT/lazyblk/test
AUTHERR="401|[Uu]nauthori[sz]ed|[Aa]uth|[Cc]redential|[Dd]enied|[Tt]oken"
expect_fail_line "no credentials" "$AUTHERR" -- \
  timeout 60 "${NOCREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e3" --remote "$AU" \
  -o "$T/x.raw" --fetch-timeout 5 --fetch-retries 1
no_partial_output "$T/x.raw"
expect_fail_line "wrong password" "$AUTHERR" -- \
  timeout 60 env LAZYBLK_REMOTE_USER=alice LAZYBLK_REMOTE_PASSWORD=nope "$LAZYBLK" export \
  "$T/a.layout" --store "$T/e3" --remote "$AU" -o "$T/x.raw" --fetch-timeout 5 --fetch-retries 1
"${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e4" --remote "$AU" -o "$T/o4.raw" \
  >/dev/null || die "export with credentials failed"
cmp "$T/o4.raw" "$T/a.raw" || die "export through token auth differs"
[ "$(proxy_stat tokens_issued)" -gt 0 ] || die "no token was asked for: $(proxy_stats)"
# push with credentials (a push token), then read it back
"${CREDS[@]}" "$LAZYBLK" push --store "$T/a.store" \
  --remote "oci://127.0.0.1:$PROXY_PORT/lazyblk/authed" >/dev/null ||
  die "push with credentials failed"
oci_list "$REG" lazyblk/authed lazyblk-chunks | cmp -s - "$T/idx1" ||
  die "authed push index differs"
"${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e5" \
  --remote "oci://127.0.0.1:$PROXY_PORT/lazyblk/authed" -o "$T/o5.raw" >/dev/null ||
  die "export of the authed push failed"
cmp "$T/o5.raw" "$T/a.raw" || die "export of the authed push differs"
echo "auth: $(proxy_stat tokens_issued) tokens issued; refused without credentials"
stop_proxy

# ---- blobs redirected to another host: identical bytes, no credentials sent there
start_proxy "$REG" --auth alice:s3cret --redirect-blobs
"${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e6" \
  --remote "oci://127.0.0.1:$PROXY_PORT/lazyblk/test" -o "$T/o6.raw" >/dev/null ||
  die "export through blob redirects failed"
cmp "$T/o6.raw" "$T/a.raw" || die "export through blob redirects differs"
[ "$(proxy_stat redirects)" -gt 0 ] || die "no blob was redirected: $(proxy_stats)"
[ "$(proxy_stat leaked_auth)" -eq 0 ] ||
  die "credentials sent to the redirect target: $(proxy_stats)"
echo "redirects: $(proxy_stat redirects) blobs redirected, no credentials leaked"
stop_proxy

# ---- a blob corrupted in the registry's storage: EIO for its reads, nothing else fails
d=$(first_chunk "$T/a.manifest" /random.bin)
blob=$(awk -v c="$d" '$1 == c { print $2 }' "$T/idx1")
[ -n "$blob" ] || die "chunk $d is not in the index"
data=$REG_ROOT/docker/registry/v2/blobs/sha256/${blob:0:2}/$blob/data
[ -f "$data" ] || die "no blob file $data"
flip_byte "$data"
voff=$(file_offset "$T/a.raw" /random.bin)
ooff=$(file_offset "$T/a.raw" /small/f20)
expect_fail_line "export, corrupt blob" "$d|$blob" -- \
  timeout 60 "${NOCREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e7" --remote "$U" \
  -o "$T/x.raw"
no_partial_output "$T/x.raw"
SOCK=$T/nbd.sock
start_server bad "nbd+unix:///?socket=$SOCK" "$T/a.layout" --store "$T/e8" --remote "$U" \
  --nbd "unix:$SOCK" --mem-cache 8M --stats-json "$T/bad.json"
nbd_readcheck "$SOCK" "$T/a.raw" "fail:$voff" "ok:$ooff" >"$T/rc.json" ||
  die "reads with a corrupt blob: $(cat "$T/rc.json")"
json_expr "$T/rc.json" '0 < s["failed_bytes"] <= (1 << 20)'
stop_server "$SRV" bad
json_expr "$T/bad.json" 's["verify_failures"] + s["remote_failures"] > 0'
grep -qE "$d|$blob" "$T/bad.err" || die "serve did not name the corrupt chunk: $(cat "$T/bad.err")"
[ ! -e "$(chunk_file "$T/e8" "$d")" ] || die "the corrupt chunk was stored"
check_cache_dir "$T/e8"
echo "corrupt blob: $(json_get "$T/rc.json" failed_bytes) bytes fail, the rest is right"
echo "remote oci: ok"
