#!/bin/bash
# Boot traces, warm and prefetch (serve --trace-record, lazyblk trace show, lazyblk warm,
# serve --prefetch): a trace names the files a client read, in order; warm and prefetch
# fetch exactly their chunks (verified) into an empty cache; a trace of another image is
# refused, one of an older version of the same image counts for the files that still exist;
# a corrupt trace is refused; demand reads go ahead of queued prefetches and join a prefetch
# of the same chunk; under a tiny --cache-size the prefetch never evicts.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl qemu-io debugfs nbdcopy nbdinfo python3 timeout; do
  command -v "$tool" >/dev/null || skip "t_trace: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"
CTL=$T/ctl.sock

# ctl REQUEST: one control-socket request, the reply on stdout.
ctl() {
  python3 - "$CTL" "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().readline().strip())
PY
}

# read_file RAW PATH: read every block of PATH (found with debugfs in RAW) through the server.
read_file() {
  local blocks
  blocks=$(debugfs -R "blocks $2" "$1" 2>/dev/null)
  [ -n "$blocks" ] || die "debugfs: no blocks for $2"
  python3 - $blocks <<'PY' | while read -r off len; do
import sys
b = sorted(int(x) for x in sys.argv[1:])
s = p = b[0]
for x in b[1:] + [None]:
    if x is not None and x == p + 1:
        p = x
        continue
    print(s * 4096, (p - s + 1) * 4096)
    if x is not None:
        s = p = x
PY
    qemu-io -r -f raw "$NBD" -c "read $off $len" >/dev/null || die "read of $2 failed"
  done
}

# chunks_of MANIFEST PATH...: the distinct chunk digests of those files, one per line.
chunks_of() {
  local m=$1; shift
  "$LAZYBLK" manifest show "$m" | python3 -c '
import json, sys
e = {x["path"]: x for x in json.load(sys.stdin)["entries"]}
print("\n".join(sorted({c["digest"] for p in sys.argv[1:] for c in e[p].get("chunks", [])})))' "$@"
}

# wait_prefetch FILE: poll the control socket's stats into FILE until the prefetch finished.
wait_prefetch() {
  for _ in $(seq 1 400); do
    ctl stats >"$1"
    python3 -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["prefetch_finished"])' \
      "$1" && return 0
    sleep 0.05
  done
  die "the prefetch did not finish: $(cat "$1")"
}

cached() { find "$1/chunks" -type f -printf '%f\n' 2>/dev/null | sort; }

build_image a 8 --chunk-size 256K
FILES=(/small/f3 /doc/dpkg/copyright /random.bin /small/f17)

# ---- record: the files read, in order, with the right file ranges
start_server rec "$NBD" "$T/a.layout" --store "$T/a.store" --nbd "unix:$SOCK" \
  --control "$CTL" --trace-record "$T/a.trace"
for f in "${FILES[@]}"; do read_file "$T/a.raw" "$f"; done
reply=$(ctl "trace stop")
[[ "$reply" == "ok $T/a.trace "* ]] || die "trace stop: $reply"
[[ "$(ctl "trace stop")" == error* ]] || die "a second trace stop must be an error"
stop_server "$SRV" rec
"$LAZYBLK" trace show "$T/a.trace" >"$T/show.txt"
"$LAZYBLK" trace show --json "$T/a.trace" >"$T/show.json"
python3 - "$T/show.json" "$T/a.manifest" "$LAZYBLK" "${FILES[@]}" <<'PY' || die "trace content"
import json, subprocess, sys
t = json.load(open(sys.argv[1]))
files = sys.argv[4:]
man = json.loads(subprocess.check_output([sys.argv[3], "manifest", "show", sys.argv[2]]))
size = {e["path"]: e["size"] for e in man["entries"]}
order, got = [], {}
for r in t["records"]:
    if "path" not in r:
        continue
    if r["path"] not in order:
        order.append(r["path"])
    got.setdefault(r["path"], []).append((r["file_off"], r["len"]))
assert order == files, ("order", order, files)
for p in files:
    ranges = sorted(got[p])
    pos = 0
    for off, ln in ranges:
        assert off == pos, (p, "gap or overlap at", off, pos)
        pos += ln
    assert pos == size[p], (p, "covers", pos, "of", size[p])
ts = [r["t_us"] for r in t["records"]]
assert ts == sorted(ts), "time order"
print("trace ok:", len(t["records"]), "records")
PY
grep -q "^records .* in 4 files" "$T/show.txt" || die "trace show text: $(sed -n 4p "$T/show.txt")"

# ---- a bad trace is refused, with one line
cp "$T/a.trace" "$T/bad.trace"
flip_byte "$T/bad.trace" 200
expect_error "corrupt trace" "checksum mismatch" -- "$LAZYBLK" trace show "$T/bad.trace"
head -c 100 "$T/a.trace" >"$T/short.trace"
expect_error "truncated trace" "truncated" -- "$LAZYBLK" trace show "$T/short.trace"
expect_error "not a trace" "not a lazyblk trace" -- "$LAZYBLK" trace show "$T/a.manifest"
cp "$T/a.layout" "$T/lonely.layout"
expect_error "no manifest beside" "needs the image's manifest" -- "$LAZYBLK" warm \
  "$T/lonely.layout" --trace "$T/a.trace" --store "$T/c0"
expect_error "corrupt trace, serve" "checksum mismatch" -- "$LAZYBLK" serve "$T/a.layout" \
  --store "$T/a.store" --nbd "unix:$SOCK" --prefetch "$T/bad.trace"
expect_error "warm needs what" "missing --trace TRACE or --all" -- "$LAZYBLK" warm \
  "$T/a.layout" --store "$T/c0"

# ---- warm: exactly the trace's chunks, verified; again: nothing; --all: everything
start_nginx "$T/a.store"
URL=$NGINX_URL
"$LAZYBLK" warm "$T/a.layout" --trace "$T/a.trace" --store "$T/c1" --remote "$URL" --json \
  >"$T/w1.json" || die "warm --trace failed"
diff <(cached "$T/c1") <(chunks_of "$T/a.manifest" "${FILES[@]}") ||
  die "warm --trace did not fetch exactly the traced files' chunks"
check_cache_dir "$T/c1"
json_expr "$T/w1.json" 's["failed"] == 0 and s["fetched"] == s["planned"] and s["trace_files_found"] == 4'
"$LAZYBLK" warm "$T/a.layout" --trace "$T/a.trace" --store "$T/c1" --remote "$URL" --json \
  >"$T/w2.json" || die "second warm failed"
json_expr "$T/w2.json" 's["fetched"] == 0 and s["present"] == s["planned"]'
"$LAZYBLK" warm "$T/a.layout" --all --store "$T/c1" --remote "$URL" >"$T/w3.txt" ||
  die "warm --all failed"
diff <(cached "$T/c1") <(cached "$T/a.store") || die "warm --all did not fill the cache"
echo "warm ok: $(cat "$T/w3.txt")"

# ---- a trace of another image is refused; one of an older version counts what exists
mkdir -p "$T/b.src/etc" "$T/b.src/opt"
head -c 300000 /dev/urandom >"$T/b.src/opt/blob"
echo other >"$T/b.src/etc/motd"
"$LAZYBLK" import "$T/b.src" --store "$T/b.store" -o "$T/b.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/b.manifest" -o "$T/b.layout" >/dev/null
expect_error "foreign trace" "recorded on another image (0 of the 4 files" -- "$LAZYBLK" warm \
  "$T/b.layout" --trace "$T/a.trace" --store "$T/c2" --remote "$URL"
cp -a "$T/a.src" "$T/v2.src"
rm "$T/v2.src/small/f3"
echo "changed in v2" >>"$T/v2.src/doc/dpkg/copyright"
"$LAZYBLK" import "$T/v2.src" --store "$T/v2.store" -o "$T/v2.manifest" --chunk-size 256K >/dev/null
"$LAZYBLK" mkfs "$T/v2.manifest" -o "$T/v2.layout" --size 56M --journal 4M >/dev/null
stop_nginx
start_nginx "$T/v2.store"
URL=$NGINX_URL
"$LAZYBLK" warm "$T/v2.layout" --trace "$T/a.trace" --store "$T/c3" --remote "$URL" \
  >"$T/w4.txt" || die "warm with an older version's trace failed"
grep -q "trace: 3 of the 4 files it read are in this image" "$T/w4.txt" || die "$(cat "$T/w4.txt")"
diff <(cached "$T/c3") <(chunks_of "$T/v2.manifest" /doc/dpkg/copyright /random.bin /small/f17) ||
  die "older-version trace: not the chunks of the files that still exist"
stop_nginx

# ---- serve --prefetch: the traced chunks arrive without a demand read; then reads use them
start_nginx "$T/a.store"
URL=$NGINX_URL
start_server pf "$NBD" "$T/a.layout" --store "$T/c4" --remote "$URL" --nbd "unix:$SOCK" \
  --control "$CTL" --prefetch "$T/a.trace" --stats-json "$T/pf.json"
wait_prefetch "$T/pf.now"
json_expr "$T/pf.now" 's["prefetch_finished"] and s["prefetch_fetched"] == s["prefetch_planned"] > 0'
for f in "${FILES[@]}"; do read_file "$T/a.raw" "$f"; done
stop_server "$SRV" pf
# every prefetched chunk served a read from the store (the reader's read-ahead may fetch
# chunks past the files' ends on demand, so remote_fetches can be larger)
json_expr "$T/pf.json" 's["prefetch_hits"] == s["prefetch_planned"] <= s["disk_hits"]'
echo "prefetch ok: $(grep '^prefetch' "$T/pf.out")"
# plain copies (the shared decompressed tier) are made when a chunk is loaded from the store,
# never on the fetch path: warm made none, the reads after the prefetch one per chunk used
[ -z "$(find "$T/c1/plain" -type f 2>/dev/null)" ] || die "warm wrote plain copies"
[ "$(find "$T/c4/plain" -type f | wc -l)" = "$(json_get "$T/pf.json" prefetch_hits)" ] ||
  die "plain copies after the prefetch: $(find "$T/c4/plain" -type f | wc -l)"
# a demand fetch serves the chunk without a plain copy; the next server's load makes one
start_server pl1 "$NBD" "$T/a.layout" --store "$T/c9" --remote "$URL" --nbd "unix:$SOCK" \
  --readahead 0 --stats-json "$T/pl1.json"
read_file "$T/a.raw" /small/f5
read_file "$T/a.raw" /random.bin
stop_server "$SRV" pl1
json_expr "$T/pl1.json" 's["chunk_readahead"] == 0'  # --readahead 0: none, even sequential
json_expr "$T/pf.json" 's["chunk_readahead"] == 0'   # --prefetch TRACE: none by default
[ -z "$(find "$T/c9/plain" -type f 2>/dev/null)" ] || die "a demand fetch wrote a plain copy"
start_server pl2 "$NBD" "$T/a.layout" --store "$T/c10" --remote "$URL" --nbd "unix:$SOCK" \
  --stats-json "$T/pl2.json"
read_file "$T/a.raw" /random.bin
stop_server "$SRV" pl2
json_expr "$T/pl2.json" 's["chunk_readahead"] > 0'   # by default, sequential reads read ahead
start_server pl3 "$NBD" "$T/a.layout" --store "$T/c9" --remote "$URL" --nbd "unix:$SOCK"
read_file "$T/a.raw" /small/f5
stop_server "$SRV" pl3
[ "$(find "$T/c9/plain" -type f | wc -l)" -ge 1 ] || die "a load from the store made no plain copy"
stop_nginx

# ---- demand reads go first: the remote holds every other chunk until the demand chunk was
# answered; with 2 connections, prefetch may hold only one, so the demand read gets through
start_nginx "$T/a.store"
URL=$NGINX_URL
demand=$(chunks_of "$T/a.manifest" /small/f9 | awk "NR == 1")
start_proxy "$URL" --mode "hold:$demand"
start_server hold "$NBD" "$T/a.layout" --store "$T/c5" --remote "$PROXY_URL/" \
  --nbd "unix:$SOCK" --prefetch-all --fetch-concurrency 2 --stats-json "$T/hold.json"
# until the prefetch has taken a connection and is held (a state, not a sleep)
proxy_wait chunk_gets 1 "$SRV"
# the proxy holds the others up to 300 s: a demand read stuck behind them never ends in time
timeout 120 bash -c "$(declare -f read_file die); NBD='$NBD'; read_file '$T/a.raw' /small/f9" ||
  die "the demand read waited behind held prefetch requests"
proxy_stats >"$T/hold.stats"
json_expr "$T/hold.stats" 's["hold_timeouts"] == 0 and any("'"$demand"'" in p for p in s["done_order"][:1])'
stop_server "$SRV" hold
stop_proxy

# ---- a demand read of a chunk being prefetched joins that fetch (one GET of it): the proxy
# holds the prefetch's GET of $big until the demand read has joined it, then lets it go
big=$(chunks_of "$T/a.manifest" /random.bin | awk "NR == 1")
start_proxy "$URL" --mode "gate:$big"
start_server join "$NBD" "$T/a.layout" --store "$T/c6" --remote "$PROXY_URL/" \
  --nbd "unix:$SOCK" --prefetch "$T/a.trace" --control "$CTL" --stats-json "$T/join.json"
proxy_wait gate_waiting 1 "$SRV"   # the prefetch's GET of $big is held
read_file "$T/a.raw" /random.bin &
rpid=$!
joined() {
  ctl stats >"$T/join.now" &&
    python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["prefetch_joins"] < 1)' "$T/join.now"
}
wait_for -p "$rpid" joined || die "the demand read of $big did not join the held prefetch: $(cat "$T/join.now")"
proxy_release
wait "$rpid" || { cat "$T/join.err" "$T/join.now" >&2; proxy_stats >&2; die "the demand read of /random.bin failed"; }
stop_server "$SRV" join
proxy_stats >"$T/join.stats"
json_expr "$T/join.stats" 'sum(n for p, n in s["chunk_gets_by_path"].items() if "'"$big"'" in p) == 1'
json_expr "$T/join.json" 's["prefetch_joins"] >= 1'
stop_proxy

# ---- warm interrupted (SIGINT) leaves a consistent cache; running it again resumes
# the proxy lets 3 chunk GETs through and holds the rest: SIGINT lands while warm is provably
# mid-run (3 done, the next held), then the gate opens
start_proxy "$URL" --mode "gate:all:3"
env --default-signal=INT "$LAZYBLK" warm "$T/a.layout" --all --store "$T/c8" \
  --remote "$PROXY_URL/" --fetch-concurrency 2 --json >"$T/w8.json" 2>"$T/w8.err" &
wpid=$!
proxy_wait gate_waiting 1 "$wpid"
c8_has() { [ "$(chunk_count "$T/c8")" -ge 1 ]; }
wait_for -p "$wpid" c8_has || die "warm stored none of the chunks it was let through"
kill -INT $wpid
proxy_release
rc=0
wait $wpid || rc=$?
[ "$rc" = 130 ] || die "interrupted warm: exit $rc, want 130: $(cat "$T/w8.err")"
[ "$(wc -l <"$T/w8.err")" = 1 ] && grep -q "^lazyblk: warm: interrupted after" "$T/w8.err" ||
  die "interrupted warm: $(cat "$T/w8.err")"
json_expr "$T/w8.json" 's["interrupted"] and 0 < s["done"] < s["planned"]'
check_cache_dir "$T/c8"
[ -z "$(find "$T/c8/tmp" -type f 2>/dev/null)" ] || die "interrupted warm left temporary files"
have=$(chunk_count "$T/c8")
stop_proxy
"$LAZYBLK" warm "$T/a.layout" --all --store "$T/c8" --remote "$URL" --json >"$T/w9.json" ||
  die "resumed warm failed"
json_expr "$T/w9.json" 's["present"] == '"$have"' and s["fetched"] + s["present"] == s["planned"]'
diff <(cached "$T/c8") <(cached "$T/a.store") || die "resumed warm did not complete the cache"
echo "warm interrupted after $have chunks, resumed: $(json_get "$T/w9.json" fetched) fetched"

# ---- a tiny cache: the prefetch stops at the bound, never evicts; reads stay correct
start_server tiny "$NBD" "$T/a.layout" --store "$T/c7" --remote "$URL" --nbd "unix:$SOCK" \
  --control "$CTL" --prefetch-all --cache-size 1M --stats-json "$T/tiny.json"
wait_prefetch "$T/tiny.now"
json_expr "$T/tiny.now" 's["prefetch_finished"] and s["prefetch_cache_full"] and s["cache_evictions"] == 0'
json_expr "$T/tiny.now" 's["prefetch_done"] < s["prefetch_planned"]'
timeout 120 nbdcopy "$NBD" "$T/tiny.raw" || die "read under a tiny cache failed"
cmp "$T/tiny.raw" "$T/a.raw" || die "read under a tiny cache differs"
stop_server "$SRV" tiny
echo "PASS"
