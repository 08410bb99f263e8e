#!/bin/bash
# cas gc --remote oci:// never deletes a manifest an image tag needs, nor writes over a tag
# that changed while it ran (issue 24, item 7, found in the review of registry gc), against a
# real docker-registry behind faultproxy.py:
#   - the image tag zz's chunk manifest is byte for byte the one of the chunk index (the
#     same chunks): a gc that did not see zz deleted it, and zz no longer exported;
#   - the tag list in pages of one tag (Link: <…>; rel="next", as registries page): gc
#     follows the pages and sees zz (before: the first page only);
#   - a tag list with an entry that is not a tag name, or one that answers 404 while the
#     chunk index's tag exists: gc deletes no manifest, and says so (before: it took what it
#     saw for every tag);
#   - an image pushed to the chunk index's tag while gc is held mid-rewrite: gc reads the tag
#     again before it writes it and leaves the image (before: it wrote the chunk index over
#     the image).
. "$(dirname "$0")/lib/common.sh"
for tool in docker-registry curl zstd python3; do
  command -v "$tool" >/dev/null || skip "t_remote_gc_tags: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_registry

build_image a 1
build_image b 1
start_registry
RB=127.0.0.1:$REG_PORT
REPO=gc/pg
R=oci://$RB/$REPO
IDX=application/vnd.oci.image.index.v1+json
MAN=application/vnd.oci.image.manifest.v1+json

# tag_digest TAG: the registry's digest of the tag's document ("" if there is none)
tag_digest() {
  curl -sS -I -H "Accept: $IDX, $MAN" "http://$RB/v2/$REPO/manifests/$1" |
    tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" { print $2 }'
}
# manifests_of TAG: the digests of the manifests the tag's index lists
manifests_of() {
  curl -fsS -H "Accept: $IDX" "http://$RB/v2/$REPO/manifests/$1" |
    python3 -c 'import json, sys; [print(m["digest"]) for m in json.load(sys.stdin)["manifests"]]'
}
has_manifest() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Accept: $MAN" \
    "http://$RB/v2/$REPO/manifests/$1")" = 200 ]
}
# zz_ok WHAT: the image tag zz still exports b's disk, its chunk manifest still there
n_ok=0
zz_ok() {
  n_ok=$((n_ok + 1))
  has_manifest "$M" || die "$1: the chunk manifest $M that tag zz needs was deleted"
  "$LAZYBLK" export "$R:zz" --store "$T/fresh$n_ok" -o "$T/fresh$n_ok.raw" >/dev/null ||
    die "$1: tag zz no longer exports"
  cmp "$T/fresh$n_ok.raw" "$T/b.raw" || die "$1: tag zz no longer exports b's disk"
}
# index_again: the chunk index lists b's chunks again (manifest M)
index_again() {
  "$LAZYBLK" push --store "$T/b.store" --remote "$R" "$T/b.layout" >/dev/null
  [ "$(manifests_of lazyblk-chunks)" = "$M" ] || die "the chunk index is not M again"
}

"$LAZYBLK" push --store "$T/b.store" --remote "$R" "$T/b.layout" >/dev/null      # chunk index
"$LAZYBLK" push --store "$T/b.store" --remote "$R:zz" "$T/b.layout" >/dev/null   # the image
mapfile -t cm < <(manifests_of lazyblk-chunks)
[ "${#cm[@]}" -eq 1 ] || die "the chunk index has ${#cm[@]} manifests, want 1"
M=${cm[0]}
manifests_of zz | grep -qx "$M" || die "tag zz does not list the chunk index's manifest $M"
zz_ok "the set-up"

# ---- the tag list in pages of one tag: gc follows them and sees zz
start_proxy "http://$RB" --tags-page 1
P=oci://127.0.0.1:$PROXY_PORT/$REPO
curl -fsS -D "$T/page1.h" -o "$T/page1.json" "$PROXY_URL/v2/$REPO/tags/list"
grep -qi '^link: <.*>; rel="next"' "$T/page1.h" || die "the proxy does not page the tag list"
"$LAZYBLK" cas gc --remote "$P" >"$T/gc1.txt" || die "gc of a paged tag list failed"
grep -q "(1 image tag)" "$T/gc1.txt" || { zz_ok "gc of a paged list"; die "gc: $(cat "$T/gc1.txt")"; }
zz_ok "gc of a tag list in pages"
"$LAZYBLK" images ls --remote "$P" --json >"$T/ls1.json"
json_expr "$T/ls1.json" "[i['name'] for i in s['images']] == ['zz'] and not s['tags_truncated']"
stop_proxy
echo "ok: gc and images ls follow the tag list's pages (Link rel=next)"

# ---- a tag list with an entry that is no tag name: no manifest deleted
index_again
start_proxy "http://$RB" --tags-list '{"name":"gc/pg","tags":["lazyblk-chunks","bad tag"]}'
P=oci://127.0.0.1:$PROXY_PORT/$REPO
"$LAZYBLK" cas gc --remote "$P" >"$T/gc2.txt" || die "gc with a skipped tag failed"
grep -qE "1 tag of the registry's list skipped.*0 old manifests deleted.*[1-9][0-9]* old manifests? left in place: a tag not seen may name (it|them) \(tags skipped\)" \
  "$T/gc2.txt" || { zz_ok "gc with a tag skipped"; die "gc: $(cat "$T/gc2.txt")"; }
zz_ok "gc with a tag skipped"
stop_proxy
echo "ok: gc with a tag skipped deletes no manifest: $(tail -1 "$T/gc2.txt")"

# ---- a registry whose tags/list answers 404 while the chunk index's tag exists
index_again
start_proxy "http://$RB" --tags-list 404
P=oci://127.0.0.1:$PROXY_PORT/$REPO
"$LAZYBLK" cas gc --remote "$P" >"$T/gc3.txt" || die "gc with tags/list 404 failed"
grep -qE "0 old manifests deleted.*left in place: a tag not seen may name (it|them) \(the registry's tags/list is not found\)" \
  "$T/gc3.txt" || { zz_ok "gc with tags/list 404"; die "gc: $(cat "$T/gc3.txt")"; }
zz_ok "gc with tags/list 404"
stop_proxy
echo "ok: gc where tags/list is not found deletes no manifest"

# ---- an image pushed to the chunk index's tag while gc is held mid-rewrite is left alone
index_again
start_proxy "http://$RB" --mode 'park:PUT:/manifests/sha256:'
P=oci://127.0.0.1:$PROXY_PORT/$REPO
"$LAZYBLK" cas gc --remote "$P" >"$T/gc4.txt" 2>"$T/gc4.err" &
pg=$!
proxy_wait_held '^PUT .*/manifests/sha256:' "$pg"
"$LAZYBLK" push --store "$T/a.store" --remote "$R:lazyblk-chunks" "$T/a.layout" >/dev/null
img=$(tag_digest lazyblk-chunks)
proxy_release
rc=0
wait "$pg" || rc=$?
[ "$(tag_digest lazyblk-chunks)" = "$img" ] || die "gc wrote over the image pushed to its tag"
[ "$rc" -ne 0 ] || die "gc succeeded over a tag that changed: $(cat "$T/gc4.txt")"
[ "$(wc -l <"$T/gc4.err")" -eq 1 ] &&
  grep -qE '^lazyblk: .*tag lazyblk-chunks changed while gc ran \(it now holds a lazyblk image\): left as it is' \
    "$T/gc4.err" || die "gc: $(cat "$T/gc4.err")"
"$LAZYBLK" export "$R:lazyblk-chunks" --store "$T/fa" -o "$T/fa.raw" >/dev/null
cmp "$T/fa.raw" "$T/a.raw" || die "the image pushed to lazyblk-chunks"
zz_ok "gc refused a changed tag"
stop_proxy
echo "ok: gc reads its tag again before writing it: $(cat "$T/gc4.err")"
echo "registry gc and tags: ok"
