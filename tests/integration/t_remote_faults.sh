#!/bin/bash
# A misbehaving HTTP remote (faultproxy.py in front of a private nginx): transient faults
# (500s, resets, stalls, a corrupted transfer) are retried into an identical disk; permanent
# ones (always 500, always corrupt, down, gone) fail with one clear line, quickly, and never
# yield wrong bytes or store a corrupt chunk. Time bounds are loose: they only catch hangs.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl nbdinfo nbdcopy qemu-io zstd python3 timeout; do
  command -v "$tool" >/dev/null || skip "t_remote_faults: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

build_image a 6
start_nginx "$T/a.store"
start_proxy "$NGINX_URL"
PU=$PROXY_URL/
SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"
# export statistics, if this export has them
XSTATS=0
grep -Eq -- "^ +--stats-json" <<<"$("$LAZYBLK" export --help 2>&1)" && XSTATS=1

# fexport NAME ARGS...: export a.layout from an empty store through the proxy to $T/NAME.raw
# (store $T/NAME.store, statistics $T/NAME.json when available); never more than 120 s.
fexport() {
  local name=$1
  shift
  local extra=()
  [ "$XSTATS" = 1 ] && extra=(--stats-json "$T/$name.json")
  timeout 120 "$LAZYBLK" export "$T/a.layout" --store "$T/$name.store" --remote "$PU" \
    -o "$T/$name.raw" "${extra[@]}" "$@"
}
# mode_ok NAME MODE ARGS...: under MODE, the export succeeds and is identical
mode_ok() {
  local name=$1 mode=$2 t0 rc=0
  shift 2
  proxy_reset
  proxy_mode "$mode"
  t0=$(date +%s)
  fexport "$name" "$@" >/dev/null 2>"$T/$name.err" || rc=$?
  [ "$rc" -ne 124 ] || die "$mode: export hangs"
  [ "$rc" -eq 0 ] || die "$mode: export failed (rc $rc): $(cat "$T/$name.err")"
  cmp "$T/$name.raw" "$T/a.raw" || die "$mode: export differs"
  check_cache_dir "$T/$name.store"
  [ "$(proxy_stat faults_injected)" -gt 0 ] || die "$mode: no fault was injected: $(proxy_stats)"
  echo "$mode: identical ($(( $(date +%s) - t0 ))s, $(proxy_stat faults_injected) faults)"
}
# mode_fails NAME MODE ERE MAXSECS ARGS...: under MODE, the export fails with one line
# matching ERE within MAXSECS, leaves no output and stores nothing corrupt
mode_fails() {
  local name=$1 mode=$2 want=$3 max=$4
  shift 4
  proxy_reset
  proxy_mode "$mode"
  expect_fail_line "$mode" "$want" -- fexport "$name" "$@"
  [ "$FAIL_SECS" -le "$max" ] || die "$mode: failing took ${FAIL_SECS}s (> ${max}s)"
  no_partial_output "$T/$name.raw"
  [ ! -d "$T/$name.store/chunks" ] || check_cache_dir "$T/$name.store"
}

# ---- transient faults: retried into an identical disk
mode_ok e500 err500:2 --fetch-retries 3
[ "$(proxy_stat by_status.500)" -gt 0 ] || die "err500:2: no 500 was sent"
[ "$XSTATS" = 0 ] || json_expr "$T/e500.json" 's["remote_retries"] > 0'
mode_ok reset reset --fetch-retries 3
mode_ok flip1 flip:once --fetch-retries 3
[ "$XSTATS" = 0 ] || json_expr "$T/flip1.json" 's["verify_failures"] > 0'
# a stalled GET is given up after --fetch-timeout and retried; every other GET must beat that
# timeout even on a loaded machine, so it is 10 s (it was 2 s) and the stall far longer
mode_ok stall stall:60@4 --fetch-timeout 10 --fetch-retries 2
mode_ok stallbody stallbody:60@4 --fetch-timeout 10 --fetch-retries 2

# flip:once through serve: nbdcopy identical, the corrupt transfers counted
proxy_reset
proxy_mode flip:once
start_server f1 "$NBD" "$T/a.layout" --store "$T/sf1" --remote "$PU" --nbd "unix:$SOCK" \
  --stats-json "$T/sf1.json"
timeout 120 nbdcopy "$NBD" "$T/sf1.raw" || die "flip:once: nbdcopy failed"
cmp "$T/sf1.raw" "$T/a.raw" || die "flip:once: served disk differs"
stop_server "$SRV" f1
json_expr "$T/sf1.json" 's["verify_failures"] > 0 and s["remote_failures"] == 0'
check_cache_dir "$T/sf1"

# err500:2 through serve: the retries are counted
proxy_reset
proxy_mode err500:2
start_server r1 "$NBD" "$T/a.layout" --store "$T/sr1" --remote "$PU" --nbd "unix:$SOCK" \
  --fetch-retries 3 --stats-json "$T/sr1.json"
timeout 120 nbdcopy "$NBD" "$T/sr1.raw" || die "err500:2: nbdcopy failed"
cmp "$T/sr1.raw" "$T/a.raw" || die "err500:2: served disk differs"
stop_server "$SRV" r1
json_expr "$T/sr1.json" 's["remote_retries"] > 0 and s["remote_failures"] == 0 and
  s["remote_requests"] > s["remote_fetches"]'

# ---- permanent faults: one line naming a chunk, quickly
mode_fails e500x err500:always '[0-9a-f]{64}' 60 --fetch-timeout 2 --fetch-retries 2
mode_fails flipx flip '[0-9a-f]{64}' 60 --fetch-timeout 2 --fetch-retries 2
mode_fails down down '[0-9a-f]{64}|127\.0\.0\.1|reply|onnect' 60 --fetch-timeout 2 --fetch-retries 1
mode_fails stallx stall:10 "[0-9a-f]{64}|imed? ?out" 60 --fetch-timeout 2 --fetch-retries 0

# always corrupt through serve: reads of chunk data fail with EIO, metadata reads succeed,
# no read returns wrong bytes, nothing is stored
proxy_reset
proxy_mode flip
start_server fx "$NBD" "$T/a.layout" --store "$T/sfx" --remote "$PU" --nbd "unix:$SOCK" \
  --mem-cache 8M --fetch-timeout 10 --fetch-retries 1 --stats-json "$T/sfx.json"
timeout 120 bash -c "$(declare -f nbd_readcheck); nbd_readcheck '$SOCK' '$T/a.raw'" \
  >"$T/rcx.json" || die "flip: readcheck: $(cat "$T/rcx.json")"
json_expr "$T/rcx.json" 's["failed_bytes"] > 0 and s["ok_bytes"] > 0'
kill -0 "$SRV" || die "flip: serve died"
stop_server "$SRV" fx
json_expr "$T/sfx.json" 's["verify_failures"] > 0 and s["remote_fetches"] == 0'
[ "$(chunk_count "$T/sfx")" -eq 0 ] || die "flip: corrupt chunks were stored"
echo "flip through serve: $(json_get "$T/rcx.json" failed_bytes) bytes EIO, no wrong bytes"

# ---- the remote goes away (the proxy is killed)
proxy_reset
proxy_mode pass
# (the read while the remote is up must succeed at the first try: a timeout that a loaded
# machine cannot hit; once it is gone, a connection is refused at once)
start_server gone "$NBD" "$T/a.layout" --store "$T/sg" --remote "$PU" --nbd "unix:$SOCK" \
  --mem-cache 8M --fetch-timeout 30 --fetch-retries 0
# one small file is read (and cached) while the remote is up
voff=$(file_offset "$T/a.raw" /random.bin)
ooff=$(file_offset "$T/a.raw" /small/f20)
timeout 120 qemu-io -r -f raw -c "read $ooff 4096" "$NBD" >/dev/null || die "read while up failed"
stop_proxy
dead=$PU
timeout 60 qemu-io -r -f raw -c "read $ooff 4096" "$NBD" >/dev/null ||
  die "remote gone: a cached block failed"
timeout 120 bash -c "$(declare -f nbd_readcheck)
  nbd_readcheck '$SOCK' '$T/a.raw' ok:0 fail:$voff" \
  >"$T/rcg.json" || die "remote gone: readcheck: $(cat "$T/rcg.json")"
json_expr "$T/rcg.json" 's["failed_bytes"] > 0 and s["ok_bytes"] > 0'
kill -0 "$SRV" || die "remote gone: serve died"
stop_server "$SRV" gone
check_cache_dir "$T/sg"
echo "remote gone: cached chunks served, $(json_get "$T/rcg.json" failed_bytes) bytes EIO"
expect_fail_line "remote gone" '[0-9a-f]{64}|127\.0\.0\.1|onnect' -- \
  timeout 120 "$LAZYBLK" export "$T/a.layout" --store "$T/gone.store" --remote "$dead" \
  -o "$T/gone.raw" --fetch-timeout 2 --fetch-retries 1
[ "$FAIL_SECS" -le 60 ] || die "remote gone: failing took ${FAIL_SECS}s"
no_partial_output "$T/gone.raw"
echo "remote faults: ok"
