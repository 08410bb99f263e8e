#!/bin/bash
# No command that writes to a remote replaces or drops an image by a side effect (issue 24,
# item 7), against a real docker-registry and a real nginx WebDAV store:
#   - a chunk-only push (a manifest, several layouts, or the whole store) onto a tag that holds
#     a lazyblk image is refused with one line saying how to replace the image, and so is one
#     onto a tag holding a container image; the tag is left as it was (the image still lists,
#     exports and serves);
#   - cas gc --remote oci://…:TAG refuses a TAG that holds an image or a container image;
#   - cas gc --remote oci://… never deletes a document another tag names (a DELETE by digest
#     drops every tag of that document: a chunk index pushed under two tags kept its second);
#   - cas gc --remote http(s)://… keeps an image that images/index.json does not list (the
#     name lost by two pushes at once) when the server lists images/.
. "$(dirname "$0")/lib/common.sh"
for tool in docker-registry nginx curl zstd python3; do
  command -v "$tool" >/dev/null || skip "t_push_safety: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_registry
need_nginx

build_image a 2
build_image b 1
start_registry
RB=127.0.0.1:$REG_PORT
R=oci://$RB/safe/img
IDX=application/vnd.oci.image.index.v1+json
MAN=application/vnd.oci.image.manifest.v1+json

# tag_digest REPO TAG: the registry's digest of the tag's document ("" if there is none)
tag_digest() {
  curl -sS -I -H "Accept: $IDX, $MAN" "http://$RB/v2/$1/manifests/$2" |
    tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" { print $2 }'
}
# image_ok REF: images ls lists the tag, and an export by reference gives a's disk
image_ok() {
  local ref=$1 tag=${1##*:} n
  n=$((n_ok += 1))
  "$LAZYBLK" images ls --remote "${ref%:*}" --json >"$T/ls$n.json"
  json_expr "$T/ls$n.json" "'$tag' in [i['name'] for i in s['images']]"
  "$LAZYBLK" export "$ref" --store "$T/fresh$n" -o "$T/fresh$n.raw" >/dev/null
  cmp "$T/fresh$n.raw" "$T/a.raw" || die "$ref no longer exports the image's disk"
}
n_ok=0

# ---- a chunk-only push onto an image tag is refused, the image stays
"$LAZYBLK" push --store "$T/a.store" --remote "$R:v1" "$T/a.layout" >/dev/null
before=$(tag_digest safe/img v1)
[ -n "$before" ] || die "no tag v1 after the image push"
WANT="tag v1 holds a lazyblk image.*push its layout to that tag"
expect_fail_line "chunk-only push (a manifest) onto an image tag" "$WANT" -- \
  "$LAZYBLK" push --store "$T/a.store" --remote "$R:v1" "$T/a.manifest"
expect_fail_line "chunk-only push (the whole store) onto an image tag" "$WANT" -- \
  "$LAZYBLK" push --store "$T/a.store" --remote "$R:v1"
expect_fail_line "chunk-only push (two layouts) onto an image tag" "$WANT" -- \
  "$LAZYBLK" push --store "$T/b.store" --remote "$R:v1" "$T/b.layout" "$T/b.layout"
[ "$(tag_digest safe/img v1)" = "$before" ] || die "a refused push changed tag v1"
image_ok "$R:v1"
echo "ok: a chunk-only push onto an image tag is refused; the image is intact"

# ---- cas gc of an image tag is refused (it would rewrite the tag as a chunk index)
expect_fail_line "cas gc --remote of an image tag" "tag v1 holds a lazyblk image: gc rewrites only a chunk index" -- \
  "$LAZYBLK" cas gc --remote "$R:v1"
[ "$(tag_digest safe/img v1)" = "$before" ] || die "a refused gc changed tag v1"
image_ok "$R:v1"
# the image may still be replaced on purpose: push a layout to the tag
"$LAZYBLK" push --store "$T/b.store" --remote "$R:v2" "$T/b.layout" >/dev/null
"$LAZYBLK" push --store "$T/a.store" --remote "$R:v2" "$T/a.layout" >/dev/null
image_ok "$R:v2"
echo "ok: cas gc --remote refuses an image tag; a layout pushed to a tag replaces its image"

# ---- a container image under a tag: neither a chunk-only push nor gc replaces it
python3 - "http://$RB" safe/img app >"$T/app.digest" <<'PY'
import hashlib, json, sys, urllib.request
base, repo, tag = sys.argv[1:4]
def blob(data):
    d = "sha256:" + hashlib.sha256(data).hexdigest()
    r = urllib.request.urlopen(urllib.request.Request(
        "%s/v2/%s/blobs/uploads/" % (base, repo), data=b"", method="POST"))
    loc = r.headers["Location"]
    url = (loc if loc.startswith("http") else base + loc)
    url += ("&" if "?" in url else "?") + "digest=" + d
    urllib.request.urlopen(urllib.request.Request(url, data=data, method="PUT",
        headers={"Content-Type": "application/octet-stream"}))
    return d
cfg = b'{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}'
layer = b"not lazyblk's"
man = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": blob(cfg),
               "size": len(cfg)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": blob(layer),
                "size": len(layer)}]}).encode()
r = urllib.request.urlopen(urllib.request.Request("%s/v2/%s/manifests/%s" % (base, repo, tag),
    data=man, method="PUT",
    headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"}))
print(r.headers["Docker-Content-Digest"])
PY
app=$(cat "$T/app.digest")
[ "$(tag_digest safe/img app)" = "$app" ] || die "the container image tag was not written"
expect_fail_line "chunk-only push onto a container image's tag" \
  "tag app holds something other than a lazyblk chunk index.*another tag" -- \
  "$LAZYBLK" push --store "$T/b.store" --remote "$R:app" "$T/b.layout" "$T/b.layout"
expect_fail_line "cas gc --remote of a container image's tag" \
  "tag app holds something other than a lazyblk chunk index" -- \
  "$LAZYBLK" cas gc --remote "$R:app"
[ "$(tag_digest safe/img app)" = "$app" ] || die "tag app was replaced"
echo "ok: a container image's tag is neither pushed over nor collected"

# ---- gc never deletes a document that another tag names
C=oci://$RB/safe/shared
"$LAZYBLK" push --store "$T/b.store" --remote "$C" >/dev/null
"$LAZYBLK" push --store "$T/b.store" --remote "$C:copy" >/dev/null
copy=$(tag_digest safe/shared copy)
[ -n "$copy" ] && [ "$copy" = "$(tag_digest safe/shared lazyblk-chunks)" ] ||
  die "the same chunks under two tags are not one document ($copy)"
# nothing keeps b's chunks: the default tag's index is rewritten empty, its old document
# (also tag copy's) must stay
"$LAZYBLK" cas gc --remote "$C" >"$T/gcs.txt"
grep -q "^dropped: " "$T/gcs.txt" || die "gc dropped nothing: $(cat "$T/gcs.txt")"
[ "$(tag_digest safe/shared copy)" = "$copy" ] || die "gc of the default tag deleted tag copy"
"$LAZYBLK" export "$T/b.layout" --store "$T/s.copy" --remote "$C:copy" -o "$T/copy.raw" >/dev/null
cmp "$T/copy.raw" "$T/b.raw" || die "tag copy no longer serves b's chunks"
echo "ok: cas gc --remote oci keeps every document another tag names"

# ---- http: an image missing from images/index.json is still an image to gc and ls
mkdir -p "$T/www"
start_nginx "$T/www" --dav-gc
"$LAZYBLK" push --store "$T/a.store" --remote "${NGINX_URL}images/base" "$T/a.layout" >/dev/null
"$LAZYBLK" push --store "$T/b.store" --remote "${NGINX_URL}images/other" "$T/b.layout" >/dev/null
# what two pushes at once could leave: a list without one of the names
printf '{"schemaVersion":1,"images":["other"]}\n' >"$T/www/images/index.json"
"$LAZYBLK" images ls --remote "$NGINX_URL" --json >"$T/lsh.json"
json_expr "$T/lsh.json" "sorted(i['name'] for i in s['images']) == ['base', 'other']"
"$LAZYBLK" cas gc --remote "$NGINX_URL" --grace 0 >"$T/gch.txt"
! grep -q "^deleted: " "$T/gch.txt" || die "gc deleted files of an image: $(cat "$T/gch.txt")"
"$LAZYBLK" export "${NGINX_URL}images/base" --store "$T/s.base" -o "$T/base.raw" >/dev/null
cmp "$T/base.raw" "$T/a.raw" || die "images/base after gc"
# and the next push writes the lost name back
"$LAZYBLK" push --store "$T/b.store" --remote "${NGINX_URL}images/third" "$T/b.layout" >/dev/null
python3 - "$T/www/images/index.json" <<'PY' || die "index.json: $(cat "$T/www/images/index.json")"
import json, sys
assert json.load(open(sys.argv[1]))["images"] == ["base", "other", "third"]
PY
echo "ok: cas gc --remote http and images ls take images/NAME/ as the image, not only index.json"
