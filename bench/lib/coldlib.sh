# shellcheck shell=bash
# Shared by bench/coldstart.sh and bench/coldread.sh: a private nginx serving a directory on
# a free loopback port, the link emulator in front of it, and `curl --parallel` fetching
# every chunk of a store through it. Source after setting ROOT, WORK (a temp directory the
# caller removes) and a die() that prints "bench/NAME: ..." and exits 1. Every server
# started here is recorded in COLD_PIDS; the caller's EXIT trap calls cold_cleanup.
# (cold_setup does all of that for the two benchmarks: source this file first, then call it.)
#
#   cold_setup NAME IDIR          WORK=$OUT/NAME-work.XXXXXX (removed at exit, with every
#                                 server), an empty WORK/results.jsonl, nginx serving
#                                 IDIR/store at /store/, the chunk URL list of that store in
#                                 WORK/urls.tmpl (LINKPORT stands for the port) and NCHUNKS
#   cold_start_nginx DIR          serve DIR at http://127.0.0.1:$NGINX_PORT/
#   link_parse PROFILE            PROFILE = none | RATE/RTT (25mbit/20ms, 1gbit/1ms): sets
#                                 LINK_RATE and LINK_DELAY (one-way = RTT/2, "10ms", "500us")
#   linkem_path                   $LINKEM or build/tools/linkem if executable, else fails
#   link_start PROFILE PORT       start linkem in front of 127.0.0.1:PORT (PROFILE none: no
#                                 emulator, LINK_PORT=PORT); sets LINK_PORT LINK_PID
#   link_stop                     SIGTERM linkem, wait; sets LINK_UP LINK_DOWN LINK_CONNS from
#                                 its "linkem: up N bytes, down N bytes, C connections" line
#                                 (empty for PROFILE none)
#   chunk_urls STORE BASE_URL OUT  one "url = ...\noutput = ..." curl config entry per chunk
#                                 file of STORE (the output paths relative to the current
#                                 directory: chunks/XX/HEX); prints the chunk count
#   curl_fetch_all CFG DIR        curl --parallel --parallel-max 16 -K CFG in DIR; prints
#                                 "BYTES REQUESTS" downloaded
#   cold_renice PID               nginx and linkem run at nice COLD_NICE (default -10): they
#                                 stand for other machines (see the function)

COLD_PIDS=()
LINK_PID=""
cold_cleanup() {
  local p
  for p in "${COLD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${COLD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}

. "$ROOT/scripts/lib/nginx_conf.sh"
. "$ROOT/scripts/lib/linkem.sh"

# The remote server and the link stand for other machines and the network between them: on
# the benchmark host they share the CPUs with the client under test, so that a client that
# needs CPU (decompressing, verifying) would slow its own link down, which a real link never
# does. They run at nice COLD_NICE (default -10; "none": as started), for both sides alike.
cold_renice() {
  [ "${COLD_NICE:--10}" = none ] && return 0
  renice -n "${COLD_NICE:--10}" -p "$1" >/dev/null 2>&1 ||
    echo "note: cannot renice pid $1 to ${COLD_NICE:--10} (not root?): the link shares the CPUs as is" >&2
}

cold_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cold_start_nginx() {
  local root n
  root=$(cd "$1" && pwd) || die "no directory $1 for nginx"
  command -v nginx >/dev/null || die "nginx not found (scripts/deps.sh installs nginx-light)"
  NGINX_DIR=$WORK/nginx
  NGINX_PORT=$(cold_free_port)
  nginx_conf "$NGINX_DIR" "$NGINX_PORT" "$root"
  nginx -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/error.log" \
    >"$NGINX_DIR/stdout" 2>&1 &
  NGINX_PID=$!
  COLD_PIDS+=("$NGINX_PID")
  cold_renice "$NGINX_PID"
  for n in $(seq 200); do
    curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$NGINX_PORT/" && return 0
    kill -0 "$NGINX_PID" 2>/dev/null || { cat "$NGINX_DIR/error.log" >&2; die "nginx exited at start"; }
    sleep 0.05
  done
  die "nginx does not answer on 127.0.0.1:$NGINX_PORT"
}

link_parse() {
  local p=$1 rtt us
  LINK_RATE="" LINK_DELAY=""
  [ "$p" = none ] && return 0
  [[ "$p" =~ ^([0-9]+[kmg]?bit)/([0-9.]+)ms$ ]] ||
    die "LINK=$p: want none or RATE/RTT such as 25mbit/20ms or 1gbit/1ms"
  LINK_RATE=${BASH_REMATCH[1]}
  rtt=${BASH_REMATCH[2]}
  us=$(python3 -c "print(round(float('$rtt') * 1000 / 2))")
  if [ $((us % 1000)) = 0 ]; then LINK_DELAY=$((us / 1000))ms; else LINK_DELAY=${us}us; fi
}

linkem_path() {
  local l=${LINKEM:-$ROOT/build/tools/linkem}
  [ -x "$l" ] || return 1
  echo "$l"
}

link_start() {
  local prof=$1 port=$2
  LINK_UP="" LINK_DOWN="" LINK_CONNS="" LINK_PID=""
  if [ "$prof" = none ]; then LINK_PORT=$port; return 0; fi
  link_parse "$prof"
  LINKEM=$(linkem_path) ||
    die "no link emulator: ${LINKEM:-build/tools/linkem} is missing (set LINKEM, or LINK=none)"
  LINK_LOG=$WORK/linkem.$RANDOM.log
  # --buffer: what a bottleneck holds per connection (a few times the bandwidth-delay
  # product at 25 Mbit/s, 20 ms), not linkem's 4M default, which would let one connection's
  # queued bytes delay every other request by seconds (docs/linkem.md)
  linkem_start "$LINK_LOG" "$LINK_LOG.err" --connect "127.0.0.1:$port" --rate "$LINK_RATE" \
    --delay "$LINK_DELAY" --buffer "${LINK_BUFFER:-256K}"
  LINK_PID=$LINKEM_PID LINK_PORT=$LINKEM_PORT
  COLD_PIDS+=("$LINK_PID")
  cold_renice "$LINK_PID"
}

link_stop() {
  local line
  [ -n "$LINK_PID" ] || return 0
  kill -TERM "$LINK_PID" 2>/dev/null || true
  wait "$LINK_PID" 2>/dev/null || true
  LINK_PID=""
  line=$(grep -E '^linkem: up [0-9]+ bytes' "$LINK_LOG" | tail -1 || true)
  [[ "$line" =~ up\ ([0-9]+)\ bytes,\ down\ ([0-9]+)\ bytes,\ ([0-9]+)\ connections ]] ||
    die "linkem printed no 'linkem: up N bytes, down N bytes, C connections' at SIGTERM (log: $LINK_LOG)"
  LINK_UP=${BASH_REMATCH[1]} LINK_DOWN=${BASH_REMATCH[2]} LINK_CONNS=${BASH_REMATCH[3]}
}

chunk_urls() {
  local store=$1 base=$2 out=$3
  (cd "$store" && find chunks -type f -name '[0-9a-f]*' | sort) |
    awk -v b="$base" '{ printf "url = \"%s%s\"\noutput = \"%s\"\n", b, $0, $0; n++ } END { print n + 0 > "/dev/stderr" }' \
    >"$out" 2>"$out.count"
  cat "$out.count"
}

curl_fetch_all() {
  local cfg=$1 dir=$2 res
  mkdir -p "$dir"
  res=$(cd "$dir" && curl --parallel --parallel-max 16 --create-dirs -sS --no-progress-meter \
    --fail -w '%{size_download}\n' -K "$cfg" 2>"$dir.curl.err") ||
    { head -3 "$dir.curl.err" >&2; die "curl --parallel through the link failed"; }
  rm -f "$dir.curl.err"
  awk '{ b += $1; n++ } END { print b + 0, n + 0 }' <<<"$res"
}

cold_setup() {
  mkdir -p "$OUT"
  WORK=$(mktemp -d "$OUT/$1-work.XXXXXX")
  trap 'cold_cleanup; rm -rf "$WORK"' EXIT
  : >"$WORK/results.jsonl"
  mkdir -p "$WORK/www"
  ln -s "$2/store" "$WORK/www/store"
  cold_start_nginx "$WORK/www"
  chunk_urls "$2/store" "http://127.0.0.1:LINKPORT/store/" "$WORK/urls.tmpl" >/dev/null
  NCHUNKS=$(cat "$WORK/urls.tmpl.count")
}
