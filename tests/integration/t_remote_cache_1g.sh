#!/bin/bash
# Issue 5's acceptance case at full scale: a 1 GiB image served from nginx through a
# 200 MiB --cache-size. A full read completes and is identical to `lazyblk export`, the chunk
# files never exceed 200 MiB (checked after each read and by the server's own counters), and
# a second full read — most chunks evicted by then — is identical too.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl nbdcopy nbdinfo python3 sha256sum; do
  command -v "$tool" >/dev/null || skip "t_remote_cache_1g: $tool is not installed"
done
. "$TESTLIB/serve.sh"
. "$TESTLIB/remote.sh"
need_nginx

build_image g 1024
data=$(store_chunk_bytes "$T/g.store")
[ "$data" -ge $((1000 << 20)) ] || die "image chunks are only $data bytes"
want=$(sha256sum "$T/g.raw" | cut -d' ' -f1)
rm -f "$T/g.raw" "$T/g.src/random.bin"
LIMIT=$((200 << 20))
start_nginx "$T/g.store"
SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"

under_bound() {
  local used
  used=$(store_chunk_bytes "$T/cache")
  [ "$used" -le "$LIMIT" ] || die "$1: $used bytes of chunk files, bound $LIMIT"
  echo "$1: $used of $LIMIT bytes cached"
}

start_server srv "$NBD" "$T/g.layout" --store "$T/cache" --read-only \
  --remote "$NGINX_URL" --cache-size 200M --stats-json "$T/srv.json" \
  --nbd "unix:$SOCK"
for pass in 1 2; do
  got=$(timeout 300 nbdcopy "$NBD" - | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want" ] || die "full read $pass differs from lazyblk export"
  under_bound "after full read $pass"
done
stop_server "$SRV" srv
json_expr "$T/srv.json" "s['cache_limit_bytes'] == $LIMIT and s['cache_used_bytes'] <= $LIMIT
  and s['cache_evictions'] > 0 and s['verify_failures'] == 0 and s['remote_failures'] == 0
  and s['remote_bytes'] > 2 * $LIMIT"
echo "1 GiB image, 200 MiB cache: two full reads identical; $(json_get "$T/srv.json" remote_fetches) chunks fetched, $(json_get "$T/srv.json" cache_evictions) evicted"
echo "remote cache 1g: ok"
