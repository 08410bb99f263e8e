#!/bin/bash
# An HTTP remote (the store layout as static files, served by a private nginx): export and
# serve from an empty store give the disk exported from the full local store, the store
# keeps what was fetched, a corrupt chunk on the remote fails exactly the reads that need it
# (never wrong bytes, never cached), push over WebDAV publishes every chunk once, and bad
# URLs / unreachable remotes fail with one clear line, quickly.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl nbdcopy nbdinfo debugfs zstd python3; do
  command -v "$tool" >/dev/null || skip "t_remote_http: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx
# stray: a request to the nginx's port that is not this test's (another process on the
# machine probing it)
stray() { curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$NGINX_PORT/" || true; }

# ---- the image and its reference disk
build_image a 30 --chunk-size 256K
n=$(chunk_count "$T/a.store")
[ "$n" -gt 100 ] || die "only $n chunks in the image"

# ---- bad input: one line each, nothing started
L=$T/a.layout
expect_fail_line "ftp scheme" "ftp://x" -- \
  "$LAZYBLK" export "$L" --store "$T/e0" --remote ftp://x -o "$T/x.raw"
expect_fail_line "http without host" "http://" -- \
  "$LAZYBLK" export "$L" --store "$T/e0" --remote http:// -o "$T/x.raw"
expect_fail_line "oci without repository" "oci://host" -- \
  "$LAZYBLK" export "$L" --store "$T/e0" --remote oci://host -o "$T/x.raw"
expect_fail_line "oci port, no repository" "oci://127\.0\.0\.1:1" -- \
  "$LAZYBLK" export "$L" --store "$T/e0" --remote oci://127.0.0.1:1 -o "$T/x.raw"
expect_fail_line "serve ftp scheme" "ftp://x" -- \
  "$LAZYBLK" serve "$L" --store "$T/e0" --remote ftp://x --nbd "unix:$T/x.sock"
expect_fail_line "cache-size without remote" "cache-size" -- \
  "$LAZYBLK" export "$L" --store "$T/a.store" --cache-size 10M -o "$T/x.raw"
expect_fail_line "serve cache-size without remote" "cache-size" -- \
  "$LAZYBLK" serve "$L" --store "$T/a.store" --cache-size 10M --nbd "unix:$T/x.sock"
expect_fail_line "bad cache-size" "cache-size" -- \
  "$LAZYBLK" export "$L" --store "$T/e0" --remote http://127.0.0.1:1/ --cache-size lots \
  -o "$T/x.raw"
expect_fail_line "push without remote" "remote" -- "$LAZYBLK" push --store "$T/e0"
[ ! -e "$T/x.sock" ] || die "a refused serve left its socket"
no_partial_output "$T/x.raw"

start_nginx "$T/a.store"
URL=$NGINX_URL

# ---- unreachable remote (a closed port): one line, non-zero, quickly, no output file
dead=$(free_port)
expect_fail_line "unreachable remote" "127\.0\.0\.1:$dead|[0-9a-f]{64}|onnect" -- \
  timeout 60 "$LAZYBLK" export "$T/a.layout" --store "$T/e1x" \
  --remote "http://127.0.0.1:$dead/" --fetch-timeout 2 --fetch-retries 1 -o "$T/x.raw"
[ "$FAIL_SECS" -le 30 ] || die "unreachable remote: took ${FAIL_SECS}s"
no_partial_output "$T/x.raw"

# ---- export from an empty store
"$LAZYBLK" export "$T/a.layout" --store "$T/e1" --remote "$URL" -o "$T/out1.raw" >/dev/null
cmp "$T/out1.raw" "$T/a.raw" || die "export through the remote differs from the local export"
# a stray request from someone else (403 for the bare root) is not the test's: it is not counted
stray
gets=$(nginx_count GET '^/chunks/' 200)
[ "$gets" -gt 0 ] && [ "$gets" -le "$n" ] || die "$gets chunk GETs for $n chunks"
[ "$(nginx_count . . '4..|5..')" -eq 0 ] ||
  die "error statuses: $(grep -E ' [45][0-9][0-9] ' "$NGINX_LOG" | head -3)"
# the store kept every fetched chunk, verified, and a second export asks the remote nothing
[ "$(chunk_count "$T/e1")" -eq "$gets" ] ||
  die "store holds $(chunk_count "$T/e1") chunks after $gets fetches"
check_cache_dir "$T/e1"
before=$(nginx_count)
"$LAZYBLK" export "$T/a.layout" --store "$T/e1" --remote "$URL" -o "$T/out2.raw" >/dev/null
stray
cmp "$T/out2.raw" "$T/a.raw" || die "second export differs"
[ "$(nginx_count)" -eq "$before" ] ||
  die "second export made $(( $(nginx_count) - before )) requests"
echo "export: $gets chunks fetched, none the second time"

# ---- serve from an empty store, read by nbdcopy
SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"
start_server srv "$NBD" "$T/a.layout" --store "$T/e2" --remote "$URL" --nbd "unix:$SOCK" \
  --stats-json "$T/srv.json"
nbdcopy "$NBD" "$T/copy.raw"
cmp "$T/copy.raw" "$T/a.raw" || die "nbdcopy through serve --remote differs"
stop_server "$SRV" srv
stats_has "$T/srv.json" $REMOTE_STATS_KEYS
json_expr "$T/srv.json" 's["remote_fetches"] > 0 and s["remote_bytes"] > 0 and
  s["remote_requests"] >= s["remote_fetches"] and s["verify_failures"] == 0 and
  s["remote_failures"] == 0 and s["fetch_ms_max"] >= s["fetch_ms_p50"] and
  s["cache_limit_bytes"] == 0'
check_cache_dir "$T/e2"
echo "serve: nbdcopy identical, $(json_get "$T/srv.json" remote_fetches) chunks fetched"

# ---- a chunk corrupted on the remote: its reads fail (EIO), every other read is right
d=$(first_chunk "$T/a.manifest" /random.bin)
voff=$(file_offset "$T/a.raw" /random.bin)
ooff=$(file_offset "$T/a.raw" /small/f20)
cp -a "$T/a.store" "$T/bad"
flip_byte "$(chunk_file "$T/bad" "$d")"
start_nginx "$T/bad"
BAD=$NGINX_URL
expect_fail_line "export, corrupt remote chunk" "$d" -- \
  timeout 60 "$LAZYBLK" export "$T/a.layout" --store "$T/e3" --remote "$BAD" -o "$T/x.raw"
no_partial_output "$T/x.raw"
[ ! -e "$(chunk_file "$T/e3" "$d")" ] || die "the corrupt chunk was stored"
start_server bad "$NBD" "$T/a.layout" --store "$T/e4" --remote "$BAD" --nbd "unix:$SOCK" \
  --mem-cache 8M --stats-json "$T/bad.json"
nbd_readcheck "$SOCK" "$T/a.raw" "fail:$voff" "ok:$ooff" >"$T/rc.json" ||
  die "reads with a corrupt remote chunk: $(cat "$T/rc.json")"
json_expr "$T/rc.json" '0 < s["failed_bytes"] <= (1 << 20)'
kill -0 "$SRV" || die "serve died"
stop_server "$SRV" bad
json_expr "$T/bad.json" 's["verify_failures"] > 0'
grep -q "$d" "$T/bad.err" || die "serve did not name the corrupt chunk: $(cat "$T/bad.err")"
[ ! -e "$(chunk_file "$T/e4" "$d")" ] || die "the corrupt chunk was stored"
check_cache_dir "$T/e4"
echo "corrupt remote chunk: $(json_get "$T/rc.json" failed_bytes) bytes fail, the rest is right"

# ---- push over WebDAV, then export through what was pushed
mkdir -p "$T/ro"
start_nginx "$T/ro"
expect_fail_line "push to a read-only server" "405|[0-9a-f]{64}|127\.0\.0\.1" -- \
  timeout 60 "$LAZYBLK" push --store "$T/a.store" --remote "$NGINX_URL"
mkdir -p "$T/dav"
start_nginx "$T/dav" --dav
DAV=$NGINX_URL
"$LAZYBLK" push --store "$T/a.store" --remote "$DAV" >"$T/push1.out" ||
  die "push over WebDAV failed"
puts=$(nginx_count PUT '^/chunks/' '201|204')
[ "$puts" -eq "$n" ] || die "push: $puts PUTs for $n chunks"
[ "$(cd "$T/a.store" && find chunks -type f | sort | xargs sha256sum)" = \
  "$(cd "$T/dav" && find chunks -type f | sort | xargs sha256sum)" ] ||
  die "pushed chunk files differ from the store's"
allputs=$(nginx_count PUT)
"$LAZYBLK" export "$T/a.layout" --store "$T/e5" --remote "$DAV" -o "$T/out5.raw" >/dev/null
cmp "$T/out5.raw" "$T/a.raw" || die "export through the pushed remote differs"
"$LAZYBLK" push --store "$T/a.store" --remote "$DAV" >"$T/push2.out" || die "second push failed"
[ "$(nginx_count PUT)" -eq "$allputs" ] ||
  die "second push uploaded $(( $(nginx_count PUT) - allputs ))"
# push of one image's chunks (layout arguments) to another root
mkdir -p "$T/dav2"
start_nginx "$T/dav2" --dav
"$LAZYBLK" push --store "$T/a.store" --remote "$NGINX_URL" "$T/a.layout" \
  >/dev/null || die "push with a layout failed"
"$LAZYBLK" export "$T/a.layout" --store "$T/e6" --remote "$NGINX_URL" \
  -o "$T/out6.raw" >/dev/null
cmp "$T/out6.raw" "$T/a.raw" || die "export after a push of the layout's chunks differs"
# a chunk corrupt in the store is never published: the push stops before uploading it
expect_fail_line "push of a corrupt chunk" "$d is corrupt in the store" -- \
  timeout 60 "$LAZYBLK" push --store "$T/bad" --remote "$DAV" --fetch-concurrency 1
[ ! -e "$T/dav/chunks/${d:0:2}/$d" ] || ! cmp -s "$T/dav/chunks/${d:0:2}/$d" "$(chunk_file "$T/bad" "$d")" ||
  die "the corrupt chunk was published"
echo "push: $puts chunks uploaded, 0 the second time; a corrupt chunk is refused"
echo "remote http: ok"
