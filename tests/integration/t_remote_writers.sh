#!/bin/bash
# Concurrent writers of one HTTP store (issue 24, item 8), with real lazyblk processes against
# a real nginx WebDAV store; every "moment" is made by holding a request in faultproxy.py
# (mode park:METHOD:REGEX), never by sleeping:
#   - many pushes of different names at once: every name is an image afterwards; and with the
#     read of images/index.json held until all pushes have read it (each then writes back its
#     own copy), images ls and images/index.json still list every name;
#   - a gc started while a push is held mid-upload deletes nothing of it (a push lease), and
#     the pushed image exports whole;
#   - a gc keeps what was uploaded within its grace period (the listing's mtime, against the
#     server's clock), deletes it with --grace 0;
#   - a push started while a gc is held mid-delete waits for the gc (a gc lease), then
#     uploads the chunks the gc deleted, and its image exports whole;
#   - the lease of a killed push expires; gc removes it.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl zstd python3; do
  command -v "$tool" >/dev/null || skip "t_remote_writers: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

build_image a 1
build_image b 1
mkdir -p "$T/www"
start_nginx "$T/www" --dav-gc
W=$NGINX_URL

# names_are JSONFILE NAME...: images ls --json lists exactly these names
names_are() {
  local f=$1; shift
  python3 - "$f" "$@" <<'PY' || die "images ls: $(cat "$f")"
import json, sys
got = sorted(i["name"] for i in json.load(open(sys.argv[1]))["images"])
assert got == sorted(sys.argv[2:]), (got, sys.argv[2:])
PY
}
# wait_pids PID...: each exited 0
wait_pids() {
  local p rc=0
  for p in "$@"; do wait "$p" || rc=1; done
  return $rc
}

# ---- many pushes of different names at once
pids=()
names=()
for i in 1 2 3 4 5 6 7 8; do
  img=a; [ $((i % 2)) -eq 0 ] && img=b
  "$LAZYBLK" push --store "$T/$img.store" --remote "${W}images/n$i" "$T/$img.layout" \
    >"$T/p$i.out" 2>&1 &
  pids+=($!)
  names+=(n$i)
done
wait_pids "${pids[@]}" || { cat "$T"/p*.out >&2; die "a concurrent push failed"; }
"$LAZYBLK" images ls --remote "$W" --json >"$T/ls1.json"
names_are "$T/ls1.json" "${names[@]}"
"$LAZYBLK" export "${W}images/n7" --store "$T/s7" -o "$T/s7.raw" >/dev/null
cmp "$T/s7.raw" "$T/a.raw" || die "images/n7 after the concurrent pushes"
echo "ok: 8 pushes of different names at once: every name is an image"

# ---- the lost update made certain: every push reads images/index.json before any writes it
start_proxy "$W"
proxy_mode 'park:GET:/images/index\.json$'
pids=()
for i in 1 2 3 4; do
  "$LAZYBLK" push --store "$T/b.store" --remote "$PROXY_URL/images/m$i" "$T/b.layout" \
    >"$T/q$i.out" 2>&1 &
  pids+=($!)
  names+=(m$i)
done
proxy_wait gate_waiting 4
proxy_release
wait_pids "${pids[@]}" || { cat "$T"/q*.out >&2; die "a held push failed"; }
"$LAZYBLK" images ls --remote "$W" --json >"$T/ls2.json"
names_are "$T/ls2.json" "${names[@]}"
python3 - "$T/www/images/index.json" "${names[@]}" <<'PY' ||
import json, sys
got = json.load(open(sys.argv[1]))["images"]
assert got == sorted(sys.argv[2:]), got
PY
  die "images/index.json lost names: $(cat "$T/www/images/index.json")"
echo "ok: 4 pushes that all read images/index.json before any wrote it: no name lost"
stop_proxy

# ---- a gc while a push is held mid-upload deletes nothing the push needs
"$LAZYBLK" push --store "$T/a.store" --remote "${W}images/base" "$T/a.layout" >/dev/null
mkdir -p "$T/c.src"
head -c $((3 << 20)) /dev/urandom >"$T/c.src/c.bin"
image_from_tree c 64M
mapfile -t cchunks < <(find "$T/c.store/chunks" -type f -printf '%f\n' | sort)
[ "${#cchunks[@]}" -ge 3 ] || die "c has ${#cchunks[@]} chunks, want 3 or more"
held=${cchunks[0]}
start_proxy "$W"
proxy_mode "park:PUT:/chunks/../$held\$"
"$LAZYBLK" push --store "$T/c.store" --remote "$PROXY_URL/images/new" "$T/c.layout" \
  >"$T/new.out" 2>&1 &
pnew=$!
proxy_wait gate_waiting 1 "$pnew"
# the other chunks are uploaded (each is on the store whole or not at all)
for _ in $(seq 1 1200); do
  n=0
  for h in "${cchunks[@]:1}"; do [ -e "$(chunk_file "$T/www" "$h")" ] && n=$((n + 1)); done
  [ "$n" -eq $((${#cchunks[@]} - 1)) ] && break
  kill -0 "$pnew" 2>/dev/null || { cat "$T/new.out" >&2; die "the held push exited"; }
  sleep 0.1
done
[ "$n" -eq $((${#cchunks[@]} - 1)) ] || die "the push did not upload its other chunks"
expect_fail_line "gc while a push is under way" \
  "a push to the store is under way \(leases/push\.[0-9a-f]{16}.*nothing removed" -- \
  "$LAZYBLK" cas gc --remote "$W" --grace 0
for h in "${cchunks[@]:1}"; do
  [ -e "$(chunk_file "$T/www" "$h")" ] || die "gc deleted chunk $h of the push under way"
done
proxy_release
wait "$pnew" || { cat "$T/new.out" >&2; die "the held push failed"; }
"$LAZYBLK" export "${W}images/new" --store "$T/snew" -o "$T/snew.raw" >/dev/null
cmp "$T/snew.raw" "$T/c.raw" || die "images/new after a gc during its push"
stop_proxy
[ -z "$(ls "$T/www/leases" 2>/dev/null)" ] || die "leases left: $(ls "$T/www/leases")"
echo "ok: a gc during a push held mid-upload deletes nothing; the image exports whole"

# ---- the grace period, by upload time: chunks no image uses, just pushed
"$LAZYBLK" push --store "$T/c.store" --remote "$W" >/dev/null   # chunks only
rm -rf "$T/www/images/new"                                     # now c's chunks are orphans
"$LAZYBLK" cas gc --remote "$W" >"$T/gcg.txt"
! grep -q "^deleted: chunks/" "$T/gcg.txt" || die "gc deleted young chunks: $(cat "$T/gcg.txt")"
grep -qE "[1-9][0-9]* newer than the grace period" "$T/gcg.txt" ||
  die "gc does not count the young files: $(cat "$T/gcg.txt")"
for h in "${cchunks[@]}"; do
  [ -e "$(chunk_file "$T/www" "$h")" ] || die "gc (grace 3600) deleted chunk $h"
done
"$LAZYBLK" cas gc --remote "$W" --grace 0 >"$T/gc0.txt"
for h in "${cchunks[@]}"; do
  grep -q "^deleted: chunks/${h:0:2}/$h " "$T/gc0.txt" || die "gc --grace 0 kept orphan $h"
done
echo "ok: gc keeps what was uploaded within the grace period, deletes it with --grace 0"

# ---- a push while a gc is held mid-delete waits for it, then uploads what it deleted
"$LAZYBLK" push --store "$T/c.store" --remote "$W" >/dev/null   # orphans again
start_proxy "$W"
proxy_mode 'park:DELETE:/chunks/'
"$LAZYBLK" cas gc --remote "$PROXY_URL/" --grace 0 >"$T/gcw.out" 2>&1 &
pgc=$!
proxy_wait gate_waiting 1 "$pgc"
"$LAZYBLK" push --store "$T/c.store" --remote "${W}images/late" "$T/c.layout" \
  >"$T/late.out" 2>"$T/late.err" &
plate=$!
# until the push has listed the leases after writing its own (nginx logs a request once it
# has answered it: the push then has the listing with the gc's lease in it, and waits), or,
# without leases, until it is done
read_after_own() {
  awk -v p="$NGINX_PREFIX" '$1 == "PUT" && index($2, p "/leases/push.") == 1 { own = 1 }
    own && $1 == "GET" && $2 == p "/leases/" { n++ } END { exit !(n > 0) }' "$NGINX_LOG"
}
for _ in $(seq 1 1200); do
  kill -0 "$plate" 2>/dev/null || break
  read_after_own && break
  sleep 0.1
done
proxy_release
wait "$pgc" || { cat "$T/gcw.out" >&2; die "the held gc failed"; }
wait "$plate" || { cat "$T/late.err" >&2; die "the push during gc failed"; }
grep -q "waiting for a gc of the store to finish" "$T/late.err" ||
  die "the push did not wait for the gc: $(cat "$T/late.err")"
"$LAZYBLK" export "${W}images/late" --store "$T/slate" -o "$T/slate.raw" >/dev/null
cmp "$T/slate.raw" "$T/c.raw" || die "images/late, pushed during a gc"
stop_proxy
echo "ok: a push during a gc held mid-delete waits for it; the image exports whole"

# ---- a killed push's lease expires; a live one stops gc
mkdir -p "$T/www/leases"
echo '{"kind":"push"}' >"$T/www/leases/push.00000000000000aa"
touch -d '-2 hours' "$T/www/leases/push.00000000000000aa"
"$LAZYBLK" cas gc --remote "$W" --grace 0 >"$T/gce.txt"
[ ! -e "$T/www/leases/push.00000000000000aa" ] || die "gc left an expired lease"
echo '{"kind":"push"}' >"$T/www/leases/push.00000000000000bb"
expect_fail_line "gc with a live push lease" "leases/push.00000000000000bb" -- \
  "$LAZYBLK" cas gc --remote "$W" --grace 0
rm -f "$T/www/leases/push.00000000000000bb"
echo "ok: an expired lease is removed by gc, a live one stops it"
echo "remote writers: ok"
