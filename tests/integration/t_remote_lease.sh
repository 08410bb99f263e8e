#!/bin/bash
# Leases on an HTTP store that outlast a long operation, or lapse (issue 24, item 8, found in
# the review of the leases): real lazyblk pushes and gcs against a real nginx WebDAV store,
# every request that must be in flight held by faultproxy.py (park: and /__proxy/park), no
# sleep but the minimum time a lease needs to lapse. Leases are shortened for the holders
# with the test hook LAZYBLK_TEST_LEASE_TTL (docs/security.md#test-hooks): with 12 s a holder
# writes its lease every 1.2 s and takes it as lost after 9 s without a successful write (a
# margin no loaded machine takes for a PUT to a local nginx); a gc still judges another's
# lease by the 10 minutes of lease.h, so where a lease must look expired to a gc the test
# sets its file's mtime back, as 10 minutes would.
#   - a push whose lease lapses while its layout upload is held: a gc then takes the push
#     for dead and deletes the orphan chunks the push found on the store (HEAD: not
#     uploaded); the push must publish nothing (before: it published a name whose chunks
#     were gone);
#   - a gc whose lease lapses while a DELETE is held stops before its next DELETE (before:
#     it went on deleting);
#   - a gc held in a long fetch keeps its lease written (before: only between images), so a
#     push started meanwhile waits for it;
#   - a gc checks for pushes again after reading the images (before: only at its start);
#   - a gc refuses to delete on a store where it can hold no lease: chunks/xx/ listed as
#     JSON, but neither leases/ nor the store (before: it swept unguarded).
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl zstd python3; do
  command -v "$tool" >/dev/null || skip "t_remote_lease: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

TTL=12
build_image a 1
mkdir -p "$T/c.src"
head -c $((3 << 20)) /dev/urandom >"$T/c.src/c.bin"
image_from_tree c 64M
mapfile -t cchunks < <(find "$T/c.store/chunks" -type f -printf '%f\n' | sort)
[ "${#cchunks[@]}" -ge 3 ] || die "c has ${#cchunks[@]} chunks, want 3 or more"

mkdir -p "$T/www"
start_nginx "$T/www" --dav-gc
W=$NGINX_URL
"$LAZYBLK" push --store "$T/a.store" --remote "${W}images/base" "$T/a.layout" >/dev/null

# orphans: c's chunks on the store, named by no image (a chunk-only push)
orphans() { "$LAZYBLK" push --store "$T/c.store" --remote "$W" >/dev/null; }
# c_left: how many of c's chunks are on the store
c_left() {
  local h n=0
  for h in "${cchunks[@]}"; do [ -e "$(chunk_file "$T/www" "$h")" ] && n=$((n + 1)); done
  echo "$n"
}
# the one lease of KIND on the store (a path)
lease_file() {
  local f
  f=$(compgen -G "$T/www/leases/$1.*") || die "no $1 lease on the store"
  [ "$(wc -l <<<"$f")" -eq 1 ] || die "more than one $1 lease: $f"
  echo "$f"
}
# until_epoch N: the minimum time a lease needs to lapse (load can only lengthen it)
until_epoch() { while [ "$(date +%s)" -lt "$1" ]; do sleep 0.2; done; }
newer_than() { [ "$(stat -c %Y "$1" 2>/dev/null || echo 0)" -ge "$2" ]; }

# ---- a push whose lease lapses during a long layout upload publishes nothing
orphans
start_proxy "$W" --mode 'park:PUT:/layouts/'
LAZYBLK_TEST_LEASE_TTL=$TTL "$LAZYBLK" push --store "$T/c.store" \
  --remote "$PROXY_URL/images/victim" "$T/c.layout" >"$T/victim.out" 2>"$T/victim.err" &
pv=$!
proxy_wait_held '^PUT .*/layouts/' "$pv"
# from now on its lease is not written again (each write held), for longer than it trusts it
proxy_park_also 'PUT:/leases/push\.'
t0=$(date +%s)
until_epoch $((t0 + TTL + 1))
# what a gc sees once 10 minutes have passed so: the push's lease expired
touch -d '-1 hour' "$(lease_file push)"
"$LAZYBLK" cas gc --remote "$W" --grace 0 >"$T/gc1.txt" 2>"$T/gc1.err" ||
  die "gc after the push's lease lapsed: $(cat "$T/gc1.err")"
[ "$(c_left)" -eq 0 ] || die "gc left $(c_left) of c's orphan chunks: $(cat "$T/gc1.txt")"
proxy_release
rc=0
wait "$pv" || rc=$?
if [ "$rc" -eq 0 ]; then
  "$LAZYBLK" export "${W}images/victim" --store "$T/sv" -o "$T/sv.raw" >/dev/null 2>"$T/sv.err" ||
    die "the push published images/victim after its lease lapsed, and the chunks it found on the store were deleted: $(cat "$T/sv.err")"
  die "the push whose lease lapsed published images/victim"
fi
[ "$(wc -l <"$T/victim.err")" -eq 1 ] || die "push: want one line: $(cat "$T/victim.err")"
grep -qE '^lazyblk: .*the push lost its lease on the store \(leases/push\.[0-9a-f]{16} went [0-9]+s without being written.*nothing published: push again' \
  "$T/victim.err" || die "push: $(cat "$T/victim.err")"
[ ! -e "$T/www/images/victim" ] || die "images/victim exists after a push that lost its lease"
stop_proxy
"$LAZYBLK" push --store "$T/c.store" --remote "${W}images/victim" "$T/c.layout" >/dev/null
"$LAZYBLK" export "${W}images/victim" --store "$T/sv2" -o "$T/sv2.raw" >/dev/null
cmp "$T/sv2.raw" "$T/c.raw" || die "images/victim pushed again"
[ -z "$(ls "$T/www/leases")" ] || die "leases left: $(ls "$T/www/leases")"
echo "ok: a push whose lease lapsed in a held layout upload publishes nothing ($(cat "$T/victim.err"))"

# ---- a gc whose lease lapses while a DELETE is held stops before its next DELETE
rm -rf "$T/www/images/victim"      # c's chunks: orphans again (index.json lists a name gone)
start_proxy "$W" --mode 'park:DELETE:/chunks/'
LAZYBLK_TEST_LEASE_TTL=$TTL "$LAZYBLK" cas gc --remote "$PROXY_URL/" --grace 0 \
  >"$T/gc2.txt" 2>"$T/gc2.err" &
pg=$!
proxy_wait_held '^DELETE ' "$pg"
proxy_park_also 'PUT:/leases/gc\.'
t0=$(date +%s)
until_epoch $((t0 + TTL + 1))
proxy_release
rc=0
wait "$pg" || rc=$?
left=$(c_left)
[ "$rc" -ne 0 ] || die "a gc whose lease lapsed went on deleting (c's chunks left: $left of ${#cchunks[@]})"
grep -qE '^lazyblk: .*gc lost its lease on the store \(leases/gc\.[0-9a-f]{16} went [0-9]+s without being written.*stopped before deleting more \(1 deleted\)' \
  "$T/gc2.err" || die "gc: $(cat "$T/gc2.err")"
[ "$(wc -l <"$T/gc2.err")" -eq 1 ] || die "gc: want one line: $(cat "$T/gc2.err")"
[ "$(grep -c '^deleted: ' "$T/gc2.txt")" -eq 1 ] || die "gc deleted: $(cat "$T/gc2.txt")"
[ "$left" -eq $((${#cchunks[@]} - 1)) ] || die "c's chunks left: $left of ${#cchunks[@]}"
stop_proxy
[ -z "$(ls "$T/www/leases")" ] || die "leases left: $(ls "$T/www/leases")"
echo "ok: a gc whose lease lapsed while a DELETE was held stopped before the next one"

# ---- a gc held in a long fetch keeps its lease written; a push started meanwhile waits
# (a lifetime of 30 s here: written every 3 s, none of it meant to lapse)
start_proxy "$W" --mode 'park:GET:/layouts/'
LAZYBLK_TEST_LEASE_TTL=30 "$LAZYBLK" cas gc --remote "$PROXY_URL/" --grace 0 \
  >"$T/gc3.txt" 2>"$T/gc3.err" &
pg=$!
proxy_wait_held '^GET .*/layouts/' "$pg"
gl=$(lease_file gc)
m0=$(stat -c %Y "$gl")
# written again while the gc is held in its fetch (before: only between images)
wait_for -p "$pg" newer_than "$gl" $((m0 + 1)) ||
  die "the gc's lease was not written again while it fetched (mtime $(stat -c %Y "$gl"), first $m0)"
"$LAZYBLK" push --store "$T/c.store" --remote "${W}images/during" "$T/c.layout" \
  >"$T/during.out" 2>"$T/during.err" &
pp=$!
wait_for -p "$pp" has "$T/during.err" "waiting for a gc of the store to finish" ||
  die "the push did not wait for the gc: $(cat "$T/during.err")"
proxy_release
# and once it has read the images, the gc sees the push (waiting for it) and yields
rc=0
wait "$pg" || rc=$?
[ "$rc" -ne 0 ] && grep -q "a push to the store started while gc read the images" "$T/gc3.err" ||
  die "gc after a push began meanwhile: exit $rc: $(cat "$T/gc3.err")"
wait "$pp" || die "the push failed: $(cat "$T/during.err")"
"$LAZYBLK" export "${W}images/during" --store "$T/sd" -o "$T/sd.raw" >/dev/null
cmp "$T/sd.raw" "$T/c.raw" || die "images/during, pushed while gc fetched"
stop_proxy
echo "ok: a gc held in a fetch keeps its lease written; a push started then waits for it"

# ---- a gc checks for pushes again after reading the images
rm -rf "$T/www/images/during"
orphans
start_proxy "$W" --mode 'park:GET:/images/base/image\.json$'
"$LAZYBLK" cas gc --remote "$PROXY_URL/" --grace 0 >"$T/gc4.txt" 2>"$T/gc4.err" &
pg=$!
proxy_wait_held 'image\.json' "$pg"
"$LAZYBLK" push --store "$T/c.store" --remote "${W}images/late" "$T/c.layout" \
  >"$T/late.out" 2>"$T/late.err" &
pp=$!
wait_for -p "$pp" has "$T/late.err" "waiting for a gc of the store to finish" ||
  die "the push did not wait for the gc: $(cat "$T/late.err")"
proxy_release
rc=0
wait "$pg" || rc=$?
[ "$rc" -ne 0 ] || die "gc swept while a push waited for it: $(cat "$T/gc4.txt")"
grep -qE '^lazyblk: .*a push to the store started while gc read the images \(leases/push\.[0-9a-f]{16}.*nothing removed' \
  "$T/gc4.err" || die "gc: $(cat "$T/gc4.err")"
! grep -q '^deleted: ' "$T/gc4.txt" || die "gc deleted: $(cat "$T/gc4.txt")"
wait "$pp" || die "the push failed: $(cat "$T/late.err")"
"$LAZYBLK" export "${W}images/late" --store "$T/sl" -o "$T/sl.raw" >/dev/null
cmp "$T/sl.raw" "$T/c.raw" || die "images/late"
stop_proxy
echo "ok: a gc that finds a push begun while it read the images removes nothing"

# ---- no lease where leases/ and the store are not listed: gc deletes nothing
rm -rf "$T/www/images/late"
orphans
echo '<html>not a listing</html>' >"$T/www/index.html"
mkdir -p "$T/www/leases"
echo '<html>not a listing</html>' >"$T/www/leases/index.html"
expect_fail_line "gc without a place for leases" \
  "neither leases/ nor the store itself is listed as JSON.*nothing removed" -- \
  "$LAZYBLK" cas gc --remote "$W" --grace 0
[ "$(c_left)" -eq "${#cchunks[@]}" ] || die "gc deleted chunks without a lease"
"$LAZYBLK" cas gc --remote "$W" --grace 0 --dry-run >"$T/gc5.txt"
grep -q "^would delete: chunks/" "$T/gc5.txt" || die "gc --dry-run: $(cat "$T/gc5.txt")"
echo "ok: a gc that can hold no lease deletes nothing (a dry run still reports)"
echo "remote leases: ok"
