#!/bin/bash
# Images by name (issue 16): push IMAGE.layout by tag to a docker-registry and by name to an
# nginx WebDAV store; `images ls` lists both; export, serve and warm take the reference in
# place of IMAGE.layout and, with an empty store, give the local layout's bytes; a corrupt or
# truncated layout artifact is refused with one line before anything is served or written; an
# unknown tag and an unknown name give one line each; a second push to a tag replaces it.
. "$(dirname "$0")/lib/common.sh"
for tool in docker-registry nginx curl nbdcopy nbdinfo debugfs zstd python3; do
  command -v "$tool" >/dev/null || skip "t_images: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_registry
need_nginx

build_image a 4
build_image b 3
start_registry
RB=127.0.0.1:$REG_PORT
R=oci://$RB/imgs/base

# ---- push by tag: the image artifact, the tag also a chunk index
"$LAZYBLK" push --store "$T/a.store" --remote "$R:v1" "$T/a.layout" --json >"$T/push.json"
stats_has "$T/push.json" remote chunks uploaded uploaded_bytes present seconds image \
  layout_digest layers layout_bytes manifest_bytes digest
[ "$(json_get "$T/push.json" layout_bytes)" -eq "$(stat -c %s "$T/a.layout")" ] || die "layout_bytes"
[ "$(json_get "$T/push.json" manifest_bytes)" -eq "$(stat -c %s "$T/a.manifest")" ] || die "manifest_bytes"
python3 - "$RB" imgs/base v1 "$(chunk_count "$T/a.store")" <<'PY'
import json, subprocess, sys
base, repo, tag, nchunks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def get(ref, accept):
    out = subprocess.run(["curl", "-fsS", "-H", "Accept: " + accept,
                          "http://%s/v2/%s/manifests/%s" % (base, repo, ref)],
                         capture_output=True, check=True).stdout
    return json.loads(out)
IDX = "application/vnd.oci.image.index.v1+json"
MAN = "application/vnd.oci.image.manifest.v1+json"
idx = get(tag, IDX)
assert idx["artifactType"] == "application/vnd.lazyblk.image.v1", idx
img = get(idx["manifests"][0]["digest"], MAN)
assert img["artifactType"] == "application/vnd.lazyblk.image.v1", img
mts = [l["mediaType"] for l in img["layers"]]
assert mts == ["application/vnd.lazyblk.layout.v1", "application/vnd.lazyblk.manifest.v1"], mts
assert len(img["layers"][0]["annotations"]["org.lazyblk.layout"]) == 64
chunks = set()
for m in idx["manifests"][1:]:
    assert m["artifactType"] == "application/vnd.lazyblk.chunks.v1", m
    for l in get(m["digest"], MAN)["layers"]:
        chunks.add(l["annotations"]["org.lazyblk.chunk"])
assert len(chunks) == nchunks, (len(chunks), nchunks)
PY
echo "ok: push by tag publishes the image artifact"
# the tag is a chunk index the existing reader takes
"$LAZYBLK" export "$T/a.layout" --store "$T/s0" --remote "$R:v1" -o "$T/s0.raw" >/dev/null
cmp "$T/s0.raw" "$T/a.raw" || die "export of the local layout with the tag as remote differs"

# ---- by reference, empty stores: export, serve, warm
"$LAZYBLK" export "$R:v1" --store "$T/s1" -o "$T/s1.raw" >/dev/null 2>"$T/s1.err"
cmp "$T/s1.raw" "$T/a.raw" || die "export by tag differs from the local layout"
L=$T/s1/layouts/$(json_get "$T/push.json" layout_digest | cut -d: -f2).layout
cmp "$L" "$T/a.layout" || die "the fetched layout is not the pushed one"
"$LAZYBLK" cas verify --store "$T/s1" >/dev/null || die "cas verify of a store with layouts/"
"$LAZYBLK" cas stats --store "$T/s1" >/dev/null || die "cas stats of a store with layouts/"
cmp "${L%.layout}.manifest" "$T/a.manifest" || die "the fetched manifest is not the pushed one"
"$LAZYBLK" -v export "$R:v1" --store "$T/s1" -o "$T/s1b.raw" >/dev/null 2>"$T/s1b.err"
! grep -q "fetched" "$T/s1b.err" || die "a second export fetched the layout again"
echo "ok: export by tag = the local layout; the layout is reused"
SOCK=$T/nbd.sock
start_server ref "nbd+unix:///?socket=$SOCK" "$R:v1" --store "$T/s2" --nbd "unix:$SOCK"
nbdcopy "nbd+unix:///?socket=$SOCK" "$T/s2.raw"
stop_server "$SRV" ref
cmp "$T/s2.raw" "$T/a.raw" || die "serve by tag differs from the local layout"
echo "ok: serve by tag = the local layout"
DIG=$(json_get "$T/push.json" digest)
"$LAZYBLK" warm "$R@$DIG" --store "$T/s3" --all >/dev/null
[ "$(chunk_count "$T/s3")" -eq "$(chunk_count "$T/a.store")" ] || die "warm by digest: chunk count"
check_cache_dir "$T/s3"
echo "ok: warm by digest fetches every chunk"

# ---- HTTP store: push by name, images ls, export by name
mkdir -p "$T/www"
start_nginx "$T/www" --dav-gc
H=${NGINX_URL}images
"$LAZYBLK" push --store "$T/a.store" --remote "$H/base" "$T/a.layout" >/dev/null
"$LAZYBLK" push --store "$T/b.store" --remote "$H/other-1.0" "$T/b.layout" >/dev/null
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["images"]==["base","other-1.0"], d' \
  "$T/www/images/index.json"
"$LAZYBLK" export "$H/other-1.0" --store "$T/s4" -o "$T/s4.raw" >/dev/null
cmp "$T/s4.raw" "$T/b.raw" || die "export by name differs from the local layout"
"$LAZYBLK" images ls --remote "$NGINX_URL" >"$T/ls.txt"
[ "$(wc -l <"$T/ls.txt")" -eq 2 ] && grep -q "^base " "$T/ls.txt" && grep -q "^other-1.0 " "$T/ls.txt" ||
  die "images ls (http): $(cat "$T/ls.txt")"
"$LAZYBLK" images ls --remote "$NGINX_URL" --json >"$T/ls.json"
json_expr "$T/ls.json" '[i["name"] for i in s["images"]] == ["base", "other-1.0"] and s["images"][0]["layers"] == 1'
# oci: a chunk-only tag (plain push) is not an image
"$LAZYBLK" push --store "$T/b.store" --remote "$R" >/dev/null
"$LAZYBLK" images ls --remote "$R" --json >"$T/lso.json"
json_expr "$T/lso.json" '[i["name"] for i in s["images"]] == ["v1"] and s["images"][0]["chunks"] > 0'
echo "ok: images ls (http and oci)"

# ---- errors: one line each, nothing served or written
expect_fail_line "unknown tag" "no such tag" -- "$LAZYBLK" export "$R:nope" --store "$T/e1" -o "$T/e1.raw"
no_partial_output "$T/e1.raw"
expect_fail_line "not an image" "not a lazyblk image" -- "$LAZYBLK" export "$R:lazyblk-chunks" \
  --store "$T/e1" -o "$T/e1.raw"
expect_fail_line "run, unknown tag" "no such tag" -- "$LAZYBLK" run "$R:nope" --store "$T/e1" \
  --kernel /dev/null
expect_fail_line "warm, unknown tag" "no such tag" -- "$LAZYBLK" warm "$R:nope" --store "$T/e1" --all
expect_fail_line "reference without --store" "needs --store" -- "$LAZYBLK" cas gc --keep "$R:v1" \
  --remote "$R"
expect_rc 2 "$LAZYBLK" images
expect_rc 2 "$LAZYBLK" images ls
expect_fail_line "push to a digest" "cannot push to a digest" -- "$LAZYBLK" push --store "$T/a.store" \
  --remote "$R@sha256:$(printf '%064d' 0)" "$T/a.layout"
expect_fail_line "unknown name" "no image nope" -- "$LAZYBLK" export "$H/nope" --store "$T/e2" -o "$T/e2.raw"
expect_fail_line "bad http reference" "PATH/images/NAME" -- "$LAZYBLK" export "$NGINX_URL" \
  --store "$T/e2" -o "$T/e2.raw"
LH=$(json_get "$T/push.json" layout_digest | cut -d: -f2)
cp "$T/www/layouts/$LH.layout" "$T/good.layout"
flip_byte "$T/www/layouts/$LH.layout" 8192
expect_fail_line "corrupt layout (http)" "corrupt or truncated" -- "$LAZYBLK" export "$H/base" \
  --store "$T/e3" -o "$T/e3.raw"
no_partial_output "$T/e3.raw"
expect_fail_line "serve, corrupt layout" "corrupt or truncated" -- timeout 60 "$LAZYBLK" serve \
  "$H/base" --store "$T/e3" --nbd "unix:$T/e3.sock"
[ ! -e "$T/e3.sock" ] || die "serve listened with a corrupt layout"
ls "$T/e3/layouts/" 2>/dev/null | grep -q . && die "a corrupt layout was kept in the store"
head -c 5000 "$T/good.layout" >"$T/www/layouts/$LH.layout"
expect_fail_line "truncated layout (http)" "corrupt or truncated" -- "$LAZYBLK" export "$H/base" \
  --store "$T/e3" -o "$T/e3.raw"
no_partial_output "$T/e3.raw"
{ cat "$T/good.layout"; echo extra; } >"$T/www/layouts/$LH.layout"
expect_fail_line "longer layout (http)" "larger than its" -- "$LAZYBLK" export "$H/base" \
  --store "$T/e3" -o "$T/e3.raw"
no_partial_output "$T/e3.raw"
[ -z "$(ls -A "$T/e3/layouts/")" ] || die "a refused layout left files in the store: $(ls "$T/e3/layouts/")"
cp "$T/good.layout" "$T/www/layouts/$LH.layout"
LB=$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$T/a.layout")
data=$REG_ROOT/docker/registry/v2/blobs/sha256/${LB:0:2}/$LB/data
[ -f "$data" ] || die "no layout blob $data"
cp "$data" "$T/blob.good"
flip_byte "$data" 100
expect_fail_line "corrupt layout (oci)" "corrupt or truncated" -- "$LAZYBLK" export "$R:v1" \
  --store "$T/e4" -o "$T/e4.raw"
no_partial_output "$T/e4.raw"
cp "$T/blob.good" "$data"
# through a proxy: one that flips a byte of every blob is refused before serving; one that
# cuts the first answer short is retried, the file started over
start_proxy "http://$RB" --mode flip
RP=oci://127.0.0.1:$PROXY_PORT/imgs/base:v1
expect_fail_line "serve, proxy flips the layout" "corrupt or truncated" -- timeout 60 "$LAZYBLK" \
  serve "$RP" --store "$T/e5" --nbd "unix:$T/e5.sock"
[ ! -e "$T/e5.sock" ] || die "serve listened with a corrupt layout"
proxy_mode reset
"$LAZYBLK" export "$RP" --store "$T/e6" -o "$T/e6.raw" >/dev/null
cmp "$T/e6.raw" "$T/a.raw" || die "export through a resetting proxy"
cmp "$T/e6/layouts/$LH.layout" "$T/a.layout" || die "the layout fetched again after a reset differs"
stop_proxy
# a damaged file in STORE/layouts is fetched again, not used
cp "$L" "$T/s1.layout.good"
flip_byte "$L" 4200
"$LAZYBLK" export "$R:v1" --store "$T/s1" -o "$T/s1c.raw" >/dev/null 2>&1
cmp "$L" "$T/s1.layout.good" || die "a damaged layout in the store was not fetched again"
echo "ok: corrupt and truncated layouts refused before serving"

# ---- a second push to a tag replaces it
"$LAZYBLK" push --store "$T/b.store" --remote "$R:v1" "$T/b.layout" >/dev/null
"$LAZYBLK" export "$R:v1" --store "$T/s5" -o "$T/s5.raw" >/dev/null
cmp "$T/s5.raw" "$T/b.raw" || die "the tag still serves the old image"
"$LAZYBLK" images ls --remote "$R" --json >"$T/lso2.json"
json_expr "$T/lso2.json" "s['images'][0]['chunks'] == $(chunk_count "$T/b.store")"
echo "ok: push to a tag replaces it"

# ---- gc of a registry repository: the chunk index keeps what image tags and --keep use
G=oci://$RB/imgs/gc
"$LAZYBLK" push --store "$T/a.store" --remote "$G:v1" "$T/a.layout" >/dev/null
# c is pushed to this repository only (a registry shares blobs between its repositories)
build_image c 2
"$LAZYBLK" push --store "$T/c.store" --remote "$G" >/dev/null
only_c=$(comm -13 <(ls "$T/a.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$' | sort) \
  <(ls "$T/c.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$' | sort) | head -1)
[ -n "$only_c" ] || die "no chunk only c has"
blob=$(sha256sum "$(chunk_file "$T/c.store" "$only_c")" | cut -d' ' -f1)
"$LAZYBLK" cas gc --remote "$G" --keep "$T/c.layout" --dry-run >"$T/gc0.txt"
! grep -q "^would drop:" "$T/gc0.txt" || die "gc --keep c would drop c's chunks: $(cat "$T/gc0.txt")"
"$LAZYBLK" cas gc --remote "$G" --dry-run >"$T/gc1.txt"
grep -q "^would drop: $only_c " "$T/gc1.txt" || die "gc --dry-run does not list $only_c: $(cat "$T/gc1.txt")"
"$LAZYBLK" cas gc --remote "$G" --dry-run >"$T/gc1b.txt"
cmp "$T/gc1.txt" "$T/gc1b.txt" || die "gc --dry-run changed something"
"$LAZYBLK" cas gc --remote "$G" >"$T/gc2.txt"
grep -q "^dropped: $only_c " "$T/gc2.txt" || die "gc does not list $only_c: $(cat "$T/gc2.txt")"
docker-registry garbage-collect "$T/registry.yml" >"$T/regc.log" 2>&1 || { cat "$T/regc.log" >&2; die "registry gc"; }
data=$REG_ROOT/docker/registry/v2/blobs/sha256/${blob:0:2}/$blob/data
[ ! -e "$data" ] || die "the blob of chunk $only_c (only the old index had it) is still there"
"$LAZYBLK" export "$G:v1" --store "$T/s6" -o "$T/s6.raw" >/dev/null
cmp "$T/s6.raw" "$T/a.raw" || die "the image tag no longer serves its bytes after gc"
"$LAZYBLK" export "$T/a.layout" --store "$T/s7" --remote "$G" -o "$T/s7.raw" >/dev/null
cmp "$T/s7.raw" "$T/a.raw" || die "the rewritten chunk index does not serve the image's chunks"
# a local gc keeps what a reference's chain uses
"$LAZYBLK" cas gc --store "$T/s1" --keep "$H/base" --grace 0 >"$T/gc3.txt"
grep -q "^gc: removed 0 chunks" "$T/gc3.txt" || die "gc --keep REF removed the image's chunks: $(cat "$T/gc3.txt")"
"$LAZYBLK" cas gc --store "$T/s5" --keep "$H/base" --grace 0 --dry-run >"$T/gc4.txt"
grep -q "^gc: would remove [1-9]" "$T/gc4.txt" || die "gc --keep REF keeps another image: $(cat "$T/gc4.txt")"
echo "ok: cas gc --remote: the index keeps the image tags' chunks; the registry's gc removes the rest"

# ---- gc of an HTTP store: what no image of images/index.json (nor --keep) uses is deleted
W=$NGINX_URL
"$LAZYBLK" push --store "$T/c.store" --remote "${W}images/base" "$T/c.layout" >/dev/null
la=$(basename "$L" .layout)
only_a=$(comm -23 <(ls "$T/a.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$' | sort) \
  <(ls "$T/b.store/chunks"/*/ "$T/c.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$' | sort -u) | head -1)
[ -n "$only_a" ] || die "no chunk only a has"
# (--grace 0: everything here was just uploaded, and gc keeps what is younger than the grace)
"$LAZYBLK" cas gc --remote "$W" --keep "$T/a.layout" --grace 0 --dry-run >"$T/gch0.txt"
! grep -q "^would delete: chunks/" "$T/gch0.txt" || die "gc --keep a would delete chunks: $(cat "$T/gch0.txt")"
"$LAZYBLK" cas gc --remote "$W" --grace 0 --dry-run >"$T/gch1.txt"
grep -q "^would delete: layouts/$la.layout " "$T/gch1.txt" || die "gc --dry-run: a's layout: $(cat "$T/gch1.txt")"
grep -q "^would delete: chunks/${only_a:0:2}/$only_a " "$T/gch1.txt" || die "gc --dry-run: $only_a"
[ -e "$T/www/layouts/$la.layout" ] || die "gc --dry-run deleted something"
"$LAZYBLK" cas gc --remote "$W" --grace 0 >"$T/gch2.txt"
grep -q "^deleted: layouts/$la.layout " "$T/gch2.txt" || die "gc: $(cat "$T/gch2.txt")"
[ ! -e "$T/www/layouts/$la.layout" ] && [ ! -e "$(chunk_file "$T/www" "$only_a")" ] ||
  die "gc left a's layout or chunk"
[ -z "$(find "$T/www/manifests" -name "$(sha256sum "$T/a.manifest" | cut -d' ' -f1).manifest")" ] ||
  die "gc left a's manifest"
"$LAZYBLK" export "${W}images/base" --store "$T/s8" -o "$T/s8.raw" >/dev/null
cmp "$T/s8.raw" "$T/c.raw" || die "images/base after gc"
"$LAZYBLK" export "${W}images/other-1.0" --store "$T/s9" -o "$T/s9.raw" >/dev/null
cmp "$T/s9.raw" "$T/b.raw" || die "images/other-1.0 after gc"
start_nginx "$T/www" --dav
expect_fail_line "gc, no listings" "autoindex" -- "$LAZYBLK" cas gc --remote "$NGINX_URL" --dry-run
echo "ok: cas gc --remote http: deletes what no image uses, the images still export"
echo "images: ok"
