#!/bin/bash
# The store as a bounded cache in front of an HTTP remote (--cache-size): an image four
# times the bound reads back identical through serve, twice (evicted chunks are fetched
# again), the chunk files never exceed the bound, the counters agree with the disk, a
# restarted server keeps the bound, and two exports sharing one small cache both succeed
# without leaving partial files.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl nbdcopy nbdinfo zstd python3 timeout; do
  command -v "$tool" >/dev/null || skip "t_remote_cache: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

build_image c 160 --chunk-size 512K
n=$(chunk_count "$T/c.store")
total=$(store_chunk_bytes "$T/c.store")
LIMIT=$((40 << 20))
[ "$total" -gt $((3 * LIMIT)) ] || die "image chunks ($total bytes) not much larger than the bound"
start_nginx "$T/c.store"
URL=$NGINX_URL
SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"

# under_bound DIR LIMIT WHAT
under_bound() {
  local used
  used=$(store_chunk_bytes "$1")
  [ "$used" -le "$2" ] || die "$3: $used bytes of chunk files, bound $2"
  echo "$3: $used of $2 bytes cached"
}

# ---- a full read through serve, twice
start_server srv "$NBD" "$T/c.layout" --store "$T/cache" --remote "$URL" --cache-size 40M \
  --nbd "unix:$SOCK" --mem-cache 16M --stats-json "$T/srv.json"
timeout 120 nbdcopy "$NBD" "$T/r1.raw" || die "first read failed"
cmp "$T/r1.raw" "$T/c.raw" || die "first read differs"
under_bound "$T/cache" "$LIMIT" "after the first read"
g1=$(nginx_count GET '^/chunks/' 200)
timeout 120 nbdcopy "$NBD" "$T/r2.raw" || die "second read failed"
cmp "$T/r2.raw" "$T/c.raw" || die "second read differs"
under_bound "$T/cache" "$LIMIT" "after the second read"
g2=$(nginx_count GET '^/chunks/' 200)
[ "$g2" -gt "$g1" ] || die "the second read fetched nothing although most chunks were evicted"
stop_server "$SRV" srv
stats_has "$T/srv.json" $REMOTE_STATS_KEYS
used=$(store_chunk_bytes "$T/cache")
json_expr "$T/srv.json" "s['cache_limit_bytes'] == $LIMIT and s['cache_evictions'] > 0 and
  s['cache_used_bytes'] <= $LIMIT and s['remote_fetches'] == $g2 and s['verify_failures'] == 0"
# the shared usage counter is exact: additions never overlap a rescan, each chunk counts once
[ "$(json_get "$T/srv.json" cache_used_bytes)" = "$used" ] ||
  die "cache_used_bytes $(json_get "$T/srv.json" cache_used_bytes) but $used bytes of chunk files"
check_cache_dir "$T/cache"
echo "serve: $n chunks, $g1 then $g2 fetches, $(json_get "$T/srv.json" cache_evictions) evictions"

# ---- the same cache reopened by a new server: still bounded, still right
start_server srv2 "$NBD" "$T/c.layout" --store "$T/cache" --remote "$URL" --cache-size 40M \
  --nbd "unix:$SOCK" --mem-cache 16M --stats-json "$T/srv2.json"
timeout 120 nbdcopy "$NBD" "$T/r3.raw" || die "read after restart failed"
cmp "$T/r3.raw" "$T/c.raw" || die "read after restart differs"
stop_server "$SRV" srv2
under_bound "$T/cache" "$LIMIT" "after a restart"
json_expr "$T/srv2.json" "s['disk_hits'] + s['plain_hits'] > 0 and s['cache_used_bytes'] <= $LIMIT"
check_cache_dir "$T/cache"

# ---- two exports sharing one small cache
SMALL=$((24 << 20))
t0=$(date +%s)
timeout 120 "$LAZYBLK" export "$T/c.layout" --store "$T/shared" --remote "$URL" \
  --cache-size 24M -o "$T/x1.raw" >"$T/x1.out" 2>"$T/x1.err" &
p1=$!
timeout 120 "$LAZYBLK" export "$T/c.layout" --store "$T/shared" --remote "$URL" \
  --cache-size 24M -o "$T/x2.raw" >"$T/x2.out" 2>"$T/x2.err" &
p2=$!
rc1=0; rc2=0
wait "$p1" || rc1=$?
wait "$p2" || rc2=$?
[ "$rc1" -eq 0 ] || die "first concurrent export: rc $rc1: $(cat "$T/x1.err")"
[ "$rc2" -eq 0 ] || die "second concurrent export: rc $rc2: $(cat "$T/x2.err")"
cmp "$T/x1.raw" "$T/c.raw" || die "first concurrent export differs"
cmp "$T/x2.raw" "$T/c.raw" || die "second concurrent export differs"
under_bound "$T/shared" "$SMALL" "after two concurrent exports"
check_cache_dir "$T/shared"
# the counter both processes shared (cache.state: magic, version, reserved, then the
# 64-bit count) equals the chunk files: no chunk counted twice, none missed
counted=$(python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read(24)
assert d[:8] == b"LZBKCACH", d[:8]
print(struct.unpack("<Q", d[16:24])[0])' "$T/shared/cache.state")
[ "$counted" = "$(store_chunk_bytes "$T/shared")" ] ||
  die "cache.state counts $counted bytes, the chunk files are $(store_chunk_bytes "$T/shared")"
echo "concurrent exports: identical in $(( $(date +%s) - t0 ))s"
echo "remote cache: ok"
