#!/bin/bash
# VM snapshots published by tag (issue 27, items 2 and 6), without a VM: tests/tools/mksnap
# writes into a store what `lazyblk snapshot` writes (synthetic RAM as chunks and a page map,
# a vm.state chunk, the document; the disk an imported image's layout). Then:
#   - push by tag to a docker-registry (the vm-snapshot artifact: the document first, then
#     the disk's layout and manifest; the tag a chunk index of every chunk it uses) and by
#     name to an nginx store (image.json's "snapshot", snapshots/<hex>.json);
#   - images ls tells images and VM snapshots apart (KIND, --json "kind");
#   - the library's fetch by reference (snap_fetch, run --restore's) into an empty store:
#     the document (verified) into STORE/snapshots/, the disk's layouts into STORE/layouts/,
#     no RAM chunk;
#   - gc (local --keep SNAPSHOT, --remote oci and http) keeps everything the snapshot uses;
#   - refusals, one line each: a snapshot tag where a disk image is wanted (export, serve,
#     a chunk-only push) and the reverse; a push whose chunk the store lacks (named); a
#     fetch whose vm.state chunk the remote lacks (named).
. "$(dirname "$0")/lib/common.sh"
for tool in docker-registry nginx curl python3 zstd; do
  command -v "$tool" >/dev/null || skip "t_snapshot_publish: $tool is not installed"
done
MKSNAP=$(dirname "$LAZYBLK")/tools/mksnap
[ -x "$MKSNAP" ] || skip "t_snapshot_publish: $MKSNAP is not built (make)"
. "$TESTLIB/remote.sh"
need_registry
need_nginx

build_image a 2
build_image b 1
ls "$T/a.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$' | sort >"$T/disk.chunks"
ID=$("$MKSNAP" make --store "$T/a.store" -o "$T/snap" --layout "$T/a.layout" --mem 8)
[ -f "$T/a.store/snapshots/$ID.json" ] || die "mksnap wrote no STORE/snapshots/$ID.json"
cmp "$T/a.store/snapshots/$ID.json" "$T/snap/snapshot.json" || die "the two documents differ"
STATE=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state"]["digest"][7:])' "$T/snap/snapshot.json")
LD=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["disk"]["layout"][7:])' "$T/snap/snapshot.json")
ALL=$(chunk_count "$T/a.store")
ram_chunk=$(comm -13 "$T/disk.chunks" <(ls "$T/a.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$' | sort) |
  grep -v "$STATE" | tail -1)
[ -n "$ram_chunk" ] || die "mksnap stored no RAM chunk"

start_registry
RB=127.0.0.1:$REG_PORT
R=oci://$RB/vm/sb

# ---- push by tag: the vm-snapshot artifact, every chunk in the tag's chunk index
"$LAZYBLK" push --store "$T/a.store" --remote "$R:s1" "$T/snap" --json >"$T/push.json"
stats_has "$T/push.json" remote chunks uploaded image kind snapshot layout_digest layers \
  ram_chunks disk_chunks snapshot_bytes digest
json_expr "$T/push.json" "s['kind'] == 'vm-snapshot' and s['snapshot'] == 'sha256:$ID' and \
s['chunks'] == $ALL and s['layout_digest'] == 'sha256:$LD'"
python3 - "$RB" vm/sb s1 "$ALL" "$ID" <<'PY'
import json, subprocess, sys
base, repo, tag, nchunks, sid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def get(ref, accept):
    out = subprocess.run(["curl", "-fsS", "-H", "Accept: " + accept,
                          "http://%s/v2/%s/manifests/%s" % (base, repo, ref)],
                         capture_output=True, check=True).stdout
    return json.loads(out)
IDX = "application/vnd.oci.image.index.v1+json"
MAN = "application/vnd.oci.image.manifest.v1+json"
idx = get(tag, IDX)
assert idx["artifactType"] == "application/vnd.lazyblk.vm-snapshot.v1", idx
img = get(idx["manifests"][0]["digest"], MAN)
assert img["artifactType"] == "application/vnd.lazyblk.vm-snapshot.v1", img
mts = [l["mediaType"] for l in img["layers"]]
assert mts == ["application/vnd.lazyblk.vm-snapshot.v1+json", "application/vnd.lazyblk.layout.v1",
               "application/vnd.lazyblk.manifest.v1"], mts
assert img["layers"][0]["digest"] == "sha256:" + sid, img["layers"][0]
chunks = set()
for m in idx["manifests"][1:]:
    for l in get(m["digest"], MAN)["layers"]:
        chunks.add(l["annotations"]["org.lazyblk.chunk"])
assert len(chunks) == nchunks, (len(chunks), nchunks)
PY
echo "ok: push by tag publishes the vm-snapshot artifact and every chunk"
"$LAZYBLK" push --store "$T/a.store" --remote "$R:img1" "$T/a.layout" >/dev/null
"$LAZYBLK" images ls --remote "$R" >"$T/ls.txt"
grep -qE '^s1 +vm-snapshot +sha256:' "$T/ls.txt" && grep -qE '^img1 +image +sha256:' "$T/ls.txt" ||
  die "images ls (oci): $(cat "$T/ls.txt")"
"$LAZYBLK" images ls --remote "$R" --json >"$T/ls.json"
json_expr "$T/ls.json" "sorted((i['name'], i['kind']) for i in s['images']) == \
[('img1', 'image'), ('s1', 'vm-snapshot')] and \
[i for i in s['images'] if i['kind'] == 'vm-snapshot'][0]['snapshot'] == 'sha256:$ID'"
echo "ok: images ls tells images and VM snapshots apart"

# ---- fetch by reference into an empty store: document and layouts, no RAM
"$MKSNAP" fetch "$R:s1" --store "$T/c1" >"$T/f1.json"
json_expr "$T/f1.json" "s['id'] == '$ID' and s['mem'] == 8 << 20 and \
s['layout'].endswith('/layouts/$LD.layout') and s['manifest'].endswith('/layouts/$LD.manifest')"
cmp "$T/c1/snapshots/$ID.json" "$T/snap/snapshot.json" || die "the fetched document differs"
cmp "$T/c1/layouts/$LD.layout" "$T/a.layout" || die "the fetched layout differs"
[ "$(chunk_count "$T/c1")" -eq 0 ] || die "the fetch by reference fetched chunks"
# the disk of the snapshot reads through its tag (its chunk index)
"$LAZYBLK" export "$T/c1/layouts/$LD.layout" --store "$T/c1" --remote "$R:s1" -o "$T/c1.raw" \
  >/dev/null
cmp "$T/c1.raw" "$T/a.raw" || die "the snapshot's disk through its tag differs"
echo "ok: fetch by tag: document and layouts verified into the store, no RAM"

# ---- refusals, one line each
expect_fail_line "export of a snapshot tag" "is a VM snapshot, not a disk image: resume it with \
lazyblk run --restore oci://.*:s1" -- "$LAZYBLK" export "$R:s1" --store "$T/e1" -o "$T/e1.raw"
no_partial_output "$T/e1.raw"
expect_fail_line "serve of a snapshot tag" "is a VM snapshot, not a disk image" -- timeout 60 \
  "$LAZYBLK" serve "$R:s1" --store "$T/e1" --nbd "unix:$T/e1.sock"
[ ! -e "$T/e1.sock" ] || die "serve listened for a snapshot tag"
expect_fail_line "restore of an image tag" "is a disk image, not a VM snapshot: serve it with \
lazyblk serve oci://.*:img1" -- "$MKSNAP" fetch "$R:img1" --store "$T/e2"
expect_fail_line "chunk-only push onto a snapshot tag" "tag s1 holds a lazyblk VM snapshot" -- \
  "$LAZYBLK" push --store "$T/b.store" --remote "$R:s1" "$T/b.layout" "$T/b.manifest"
expect_fail_line "gc of a snapshot tag" "holds a lazyblk VM snapshot: gc rewrites only a chunk" \
  -- "$LAZYBLK" cas gc --remote "$R:s1"
cp -a "$T/a.store" "$T/x.store"
rm "$(chunk_file "$T/x.store" "$ram_chunk")"
expect_fail_line "push of a snapshot missing a RAM chunk" "a RAM chunk sha256:$ram_chunk is \
missing in the store" -- "$LAZYBLK" push --store "$T/x.store" --remote "$R:s2" "$T/snap"
rm "$(chunk_file "$T/x.store" "$STATE")"
expect_fail_line "push of a snapshot missing its vm.state" "vm.state chunk sha256:$STATE is \
missing" -- "$LAZYBLK" push --store "$T/x.store" --remote "$R:s2" "$T/snap/snapshot.json"
expect_rc 2 "$LAZYBLK" push --store "$T/a.store" --remote "$R" "$T/snap"

# ---- gc keeps what a kept snapshot uses
"$LAZYBLK" cas gc --store "$T/a.store" --keep "$T/snap" --grace 0 >"$T/gc1.txt"
grep -q "^gc: removed 0 chunks" "$T/gc1.txt" || die "gc --keep SNAPSHOT: $(cat "$T/gc1.txt")"
[ -f "$T/a.store/layouts/$LD.layout" ] || die "gc --keep SNAPSHOT removed its disk's layout"
"$LAZYBLK" cas gc --store "$T/a.store" --keep "$T/a.layout" --grace 0 --dry-run >"$T/gc2.txt"
grep -q "^gc: would remove [1-9]" "$T/gc2.txt" || die "gc --keep a.layout keeps the RAM: $(cat "$T/gc2.txt")"
"$LAZYBLK" cas gc --store "$T/c1" --keep "$R:s1" --grace 0 >"$T/gc3.txt" ||
  die "gc --keep REF of a snapshot: $(cat "$T/gc3.txt")"
# oci: a chunk-only push of b beside it; gc drops only b's chunks
"$LAZYBLK" push --store "$T/b.store" --remote "$R" >/dev/null
"$LAZYBLK" cas gc --remote "$R" --dry-run >"$T/gc4.txt"
grep -q "^would drop: " "$T/gc4.txt" || die "gc --remote oci drops nothing of b: $(cat "$T/gc4.txt")"
for c in $(grep "^would drop: " "$T/gc4.txt" | cut -d' ' -f3); do
  [ ! -e "$(chunk_file "$T/a.store" "$c")" ] || die "gc --remote oci would drop $c, a snapshot's chunk"
done
echo "ok: gc (local, oci) keeps the snapshot's chunks and layouts"

# ---- an HTTP store: push by name, list, fetch, gc, a missing vm.state named
mkdir -p "$T/www"
start_nginx "$T/www" --dav-gc
W=$NGINX_URL
"$LAZYBLK" push --store "$T/a.store" --remote "${W}images/snap1" "$T/snap/snapshot.json" >/dev/null
cmp "$T/www/snapshots/$ID.json" "$T/snap/snapshot.json" || die "no snapshots/$ID.json on the store"
json_expr "$T/www/images/snap1/image.json" "s['snapshot'] == {'digest': 'sha256:$ID', \
'size': $(stat -c %s "$T/snap/snapshot.json")}"
"$LAZYBLK" push --store "$T/b.store" --remote "${W}images/bimg" "$T/b.layout" >/dev/null
"$LAZYBLK" images ls --remote "$W" --json >"$T/lsh.json"
json_expr "$T/lsh.json" "sorted((i['name'], i['kind']) for i in s['images']) == \
[('bimg', 'image'), ('snap1', 'vm-snapshot')]"
"$MKSNAP" fetch "${W}images/snap1" --store "$T/c2" >"$T/f2.json"
json_expr "$T/f2.json" "s['id'] == '$ID'"
cmp "$T/c2/layouts/$LD.layout" "$T/a.layout" || die "the layout fetched by name differs"
[ "$(chunk_count "$T/c2")" -eq 0 ] || die "the fetch by name fetched chunks"
expect_fail_line "export of a snapshot name" "is a VM snapshot, not a disk image" -- \
  "$LAZYBLK" export "${W}images/snap1" --store "$T/e3" -o "$T/e3.raw"
# gc: b's image goes away from index.json's view once its name is removed; the snapshot stays
rm -r "$T/www/images/bimg"
python3 -c 'import json,sys; json.dump({"schemaVersion":1,"images":["snap1"]}, open(sys.argv[1],"w"))' \
  "$T/www/images/index.json"
"$LAZYBLK" cas gc --remote "$W" --grace 0 >"$T/gch.txt" || die "gc --remote http: $(cat "$T/gch.txt")"
grep -q "^deleted: " "$T/gch.txt" || die "gc --remote http deleted nothing of b: $(cat "$T/gch.txt")"
for c in $(ls "$T/a.store/chunks"/*/ | grep -E '^[0-9a-f]{64}$'); do
  [ -e "$(chunk_file "$T/www" "$c")" ] || die "gc --remote http deleted $c, a snapshot's chunk"
done
[ -f "$T/www/snapshots/$ID.json" ] && [ -f "$T/www/layouts/$LD.layout" ] ||
  die "gc --remote http deleted the snapshot's document or layout"
"$MKSNAP" fetch "${W}images/snap1" --store "$T/c3" >/dev/null || die "fetch after gc"
echo "ok: gc --remote http keeps the snapshot's chunks, document and layout"
rm "$(chunk_file "$T/www" "$STATE")"
expect_fail_line "fetch, vm.state missing on the remote" "vm.state chunk sha256:$STATE is \
missing on the remote" -- "$MKSNAP" fetch "${W}images/snap1" --store "$T/c4"
echo "snapshot_publish: ok"
