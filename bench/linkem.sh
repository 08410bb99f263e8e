#!/bin/bash
# Check the accuracy of linkem (tests/tools/linkem.c, docs/linkem.md), the link emulator
# the network benchmarks put between lazyblk/curl and nginx, against the named peer
# "direct loopback (no proxy)": the same client and server talking to each other without
# linkem, in the same run.
#
# Usage: bench/linkem.sh
# Environment:
#   LINKEM   the linkem binary (default: build/tools/linkem; `make` builds it)
#   RUNS     runs per measurement, alternating linkem / direct (default 5; medians)
#   PAIRS    request/response pairs for the round-trip measurement (default 200)
#
# Method (all on 127.0.0.1; nginx with its own config, sendfile, keep-alive):
#   (a) rate: `curl -o /dev/null` of a 10,000,000-byte file from nginx through
#       `linkem --rate 25mbit --delay 10ms`.  Goal: 3.2 s (10^7 B * 8 / 25*10^6 bit/s) ± 10 %.
#       curl's time_total includes the emulated handshake (one round trip) and the request's
#       round trip: 40 ms here; the time after the first byte is reported too.
#   (b) delay: on one connection through `linkem --rate 25mbit --delay 10ms` to a python echo
#       server (tests/integration/lib/linkem_peers.py rtt), PAIRS times: send 64 bytes, wait
#       for the 64 bytes back.  Goal: median round trip = 2 * 10 ms ± 10 %.  Also reported:
#       the first round trip of a new connection (connect + handshake + one exchange: 4 *
#       delay on a real link).
#   (c) capacity: `curl -o /dev/null` of a 500,000,000-byte file from nginx through
#       `linkem --rate 1gbit --delay 500us`.  Goal: the best run ≥ 0.95 Gbit/s of payload
#       (the ideal is 1.00: 4.0 s plus 2 ms of round trips); the median is reported too.
#       The best run, because linkem, curl and nginx share this machine's CPUs with other
#       work: when curl or nginx is not scheduled for longer than linkem's buffer lasts
#       (4 MiB = 33 ms at 1 Gbit/s) the emulated link idles, as a real one would with a
#       stalled receiver, and the median then measures the machine's load rather than
#       linkem.  linkem's CPU seconds (/proc stat) are reported.
#   Each measurement alternates linkem and direct runs (A B, B A, ...); a fresh linkem
#   serves every run.  The files are read once before the runs (page cache warm).
#
# Needs nginx, curl, python3.
# Writes: build/bench/linkem.json and the `linkem` section of docs/benchmarks.md.
# Exits 1 when a goal is missed (after writing the results).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
. "$ROOT/scripts/lib/nginx_conf.sh"
. "$ROOT/scripts/lib/linkem.sh"
LINKEM=${LINKEM:-$ROOT/build/tools/linkem}
RUNS=${RUNS:-5}
PAIRS=${PAIRS:-200}
OUTDIR=$ROOT/build/bench
JSON=$OUTDIR/linkem.json
MD=$ROOT/docs/benchmarks.md
PEERS=$ROOT/tests/integration/lib/linkem_peers.py

die() { echo "bench/linkem: $*" >&2; exit 1; }
[ -x "$LINKEM" ] || die "LINKEM=$LINKEM is not an executable (run make first)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$PAIRS" =~ ^[1-9][0-9]*$ ]] || die "PAIRS must be a positive integer"
for t in nginx curl python3; do
  command -v $t >/dev/null || die "$t not found (scripts/deps.sh installs it)"
done

mkdir -p "$OUTDIR"
WORK=$(mktemp -d "$OUTDIR/linkem-work.XXXXXX")
chmod 755 "$WORK" # nginx's workers run as an unprivileged user
NGINX_PID="" ECHO_PID="" LK_PID=""
cleanup() {
  local p
  for p in "$LK_PID" "$ECHO_PID" "$NGINX_PID"; do
    [ -n "$p" ] && { kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; }
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---------------------------------------------------------------------------- servers
mkdir -p "$WORK/www" "$WORK/nginx"
head -c 10000000 /dev/urandom >"$WORK/www/10MB.bin"
head -c 500000000 /dev/urandom >"$WORK/www/500MB.bin"
chmod 644 "$WORK/www"/*
cat "$WORK/www"/* >/dev/null
NGINX_PORT=$(free_port)
nginx_conf "$WORK/nginx" "$NGINX_PORT" "$WORK/www"
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" &
NGINX_PID=$!
for _ in $(seq 200); do
  curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/10MB.bin" 2>/dev/null && break; sleep 0.05
done
curl -fsS -o /dev/null "http://127.0.0.1:$NGINX_PORT/10MB.bin" || die "nginx does not serve"

python3 "$PEERS" server "$WORK/echo.port" >/dev/null 2>"$WORK/echo.err" &
ECHO_PID=$!
for _ in $(seq 200); do [ -s "$WORK/echo.port" ] && break; sleep 0.05; done
[ -s "$WORK/echo.port" ] || die "echo server did not start"
ECHO_PORT=$(cat "$WORK/echo.port")

# start_linkem UPSTREAM_PORT ARGS...: sets LK_PID, LK_PORT
start_linkem() {
  local up=$1
  shift
  linkem_start "$WORK/lk.out" "$WORK/lk.err" --connect "127.0.0.1:$up" "$@"
  LK_PID=$LINKEM_PID LK_PORT=$LINKEM_PORT
}
# stop_linkem: SIGTERM; its CPU seconds (user + system) go to $WORK/lk.cpu
stop_linkem() {
  awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$LK_PID/stat" >"$WORK/lk.cpu"
  kill -TERM "$LK_PID"
  wait "$LK_PID" || die "linkem exited non-zero on SIGTERM: $(cat "$WORK/lk.err")"
  LK_PID=""
}

# fetch PORT FILE OUT: one curl download; "time_total time_starttransfer bytes" into OUT
fetch() {
  curl -fsS -o /dev/null -w '%{time_total} %{time_starttransfer} %{size_download}\n' \
    "http://127.0.0.1:$1/$2" >"$3" || die "curl of $2 via port $1 failed"
}

# transfer NAME FILE LINKEM_ARGS...: RUNS alternating runs through linkem and direct
transfer() {
  local name=$1 file=$2 i
  shift 2
  for i in $(seq 1 "$RUNS"); do
    if [ $((i % 2)) = 1 ]; then
      start_linkem "$NGINX_PORT" "$@"; fetch "$LK_PORT" "$file" "$WORK/$name.lk.$i"; stop_linkem
      cp "$WORK/lk.cpu" "$WORK/$name.lkcpu.$i"
      fetch "$NGINX_PORT" "$file" "$WORK/$name.direct.$i"
    else
      fetch "$NGINX_PORT" "$file" "$WORK/$name.direct.$i"
      start_linkem "$NGINX_PORT" "$@"; fetch "$LK_PORT" "$file" "$WORK/$name.lk.$i"; stop_linkem
      cp "$WORK/lk.cpu" "$WORK/$name.lkcpu.$i"
    fi
    printf '   %s run %d: linkem %s s, direct %s s\n' "$name" "$i" \
      "$(cut -d' ' -f1 "$WORK/$name.lk.$i")" "$(cut -d' ' -f1 "$WORK/$name.direct.$i")"
  done
}

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== (a) 10 MB through --rate 25mbit --delay 10ms"
transfer rate 10MB.bin --rate 25mbit --delay 10ms
echo "== (b) $PAIRS round trips of 64 bytes through --rate 25mbit --delay 10ms"
for i in $(seq 1 "$RUNS"); do
  start_linkem "$ECHO_PORT" --rate 25mbit --delay 10ms
  python3 "$PEERS" rtt "$LK_PORT" "$PAIRS" 64 >"$WORK/rtt.lk.$i" || die "rtt client failed"
  stop_linkem
  python3 "$PEERS" rtt "$ECHO_PORT" "$PAIRS" 64 >"$WORK/rtt.direct.$i" || die "rtt client failed"
done
echo "== (c) 500 MB through --rate 1gbit --delay 500us"
transfer cap 500MB.bin --rate 1gbit --delay 500us

CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
export WORK RUNS PAIRS JSON MD ROOT LOADAVG CPU
python3 - <<'PY'
import datetime, json, os, statistics, subprocess, sys
E = os.environ
W, runs = E['WORK'], int(E['RUNS'])
med = statistics.median

def rd(p):
    return open(os.path.join(W, p)).read().split()

def runs_of(name, side):
    out = []
    for i in range(1, runs + 1):
        t, ttfb, n = rd('%s.%s.%d' % (name, side, i))
        out.append({'secs': float(t), 'first_byte_secs': float(ttfb), 'bytes': int(n)})
    return out

rate_lk, rate_dir = runs_of('rate', 'lk'), runs_of('rate', 'direct')
cap_lk, cap_dir = runs_of('cap', 'lk'), runs_of('cap', 'direct')
cap_cpu = [float(rd('cap.lkcpu.%d' % i)[0]) for i in range(1, runs + 1)]
for r in rate_lk + rate_dir:
    assert r['bytes'] == 10000000, r
for r in cap_lk + cap_dir:
    assert r['bytes'] == 500000000, r
rtt_lk = [json.load(open(os.path.join(W, 'rtt.lk.%d' % i))) for i in range(1, runs + 1)]
rtt_dir = [json.load(open(os.path.join(W, 'rtt.direct.%d' % i))) for i in range(1, runs + 1)]
all_lk = [x for r in rtt_lk for x in r['rtt_ms']]
all_dir = [x for r in rtt_dir for x in r['rtt_ms']]
pct = lambda v, q: sorted(v)[min(len(v) - 1, int(q * len(v)))]

a_secs = med(r['secs'] for r in rate_lk)
a_body = med(r['secs'] - r['first_byte_secs'] for r in rate_lk)
a_dir = med(r['secs'] for r in rate_dir)
b_med, b_dir = med(all_lk), med(all_dir)
b_first = med(r['first_ms'] for r in rtt_lk)
gbps = lambda r: r['bytes'] * 8 / r['secs'] / 1e9
c_gbps = med(gbps(r) for r in cap_lk)
c_best = max(gbps(r) for r in cap_lk)
c_dir = med(gbps(r) for r in cap_dir)
goals = {
    'a_rate_3.2s_pm10pct': abs(a_secs - 3.2) <= 0.32,
    'b_rtt_20ms_pm10pct': abs(b_med - 20.0) <= 2.0,
    'c_capacity_best_ge_0.95gbit': c_best >= 0.95,
}
res = {
    'date': datetime.date.today().isoformat(), 'runs': runs, 'pairs': int(E['PAIRS']),
    'loadavg_before': E['LOADAVG'], 'cpus': os.cpu_count(), 'cpu': E['CPU'],
    'rate': {'args': '--rate 25mbit --delay 10ms', 'bytes': 10000000,
             'linkem': rate_lk, 'direct': rate_dir, 'linkem_median_secs': a_secs,
             'linkem_median_after_first_byte_secs': a_body, 'direct_median_secs': a_dir,
             'goal_secs': [2.88, 3.52]},
    'rtt': {'args': '--rate 25mbit --delay 10ms', 'msg_bytes': 64,
            'linkem_median_ms': b_med, 'linkem_p10_ms': pct(all_lk, 0.1),
            'linkem_p90_ms': pct(all_lk, 0.9), 'linkem_max_ms': max(all_lk),
            'linkem_first_exchange_ms': b_first,
            'direct_median_ms': b_dir, 'direct_p90_ms': pct(all_dir, 0.9),
            'goal_ms': [18.0, 22.0]},
    'capacity': {'args': '--rate 1gbit --delay 500us', 'bytes': 500000000,
                 'linkem': cap_lk, 'direct': cap_dir, 'linkem_median_gbit_s': c_gbps, 'linkem_best_gbit_s': c_best,
                 'direct_median_gbit_s': c_dir, 'linkem_cpu_secs': cap_cpu,
                 'goal_gbit_s': 0.95},
    'goals_met': goals,
}
json.dump(res, open(E['JSON'], 'w'), indent=1)
ok = lambda g: 'met' if goals[g] else '**MISSED**'
runs_s = lambda rs: ', '.join('%.3f' % r['secs'] for r in rs)
md = f"""## linkem: link emulator accuracy, `linkem` vs direct loopback (no proxy) — {res['date']}

`build/tools/linkem` (docs/linkem.md) between curl and nginx, or between a python client and
a python echo server, all on 127.0.0.1; the peer is the same client talking to the same
server directly.  {runs} alternating runs per line, a fresh linkem each run (method: header of
`bench/linkem.sh`).  Machine: {res['cpus']} CPUs ({res['cpu']}), load average before the runs
{res['loadavg_before']}.

| measurement | linkem | runs | direct loopback (no proxy) | goal |
|---|---:|---|---:|---|
| (a) 10,000,000 B, `--rate 25mbit --delay 10ms`, curl from nginx | **{a_secs:.3f} s** ({a_body:.3f} s after the first byte) | {runs_s(rate_lk)} | {a_dir:.3f} s | 3.2 s ± 10 %: {ok('a_rate_3.2s_pm10pct')} |
| (b) 64 B request/response round trip, `--rate 25mbit --delay 10ms`, median of {len(all_lk)} | **{b_med:.2f} ms** (p10 {pct(all_lk, 0.1):.2f}, p90 {pct(all_lk, 0.9):.2f}, max {max(all_lk):.2f}) | {', '.join('%.2f' % med(r['rtt_ms']) for r in rtt_lk)} | {b_dir:.3f} ms | 20 ms ± 10 %: {ok('b_rtt_20ms_pm10pct')} |
| (c) 500,000,000 B, `--rate 1gbit --delay 500us`, curl from nginx | **best {c_best:.3f} Gbit/s**, median {c_gbps:.3f} ({med(r['secs'] for r in cap_lk):.2f} s) | {runs_s(cap_lk)} s | {c_dir:.2f} Gbit/s | best ≥ 0.95 Gbit/s: {ok('c_capacity_best_ge_0.95gbit')} |

- A new connection's first 64-byte exchange through linkem takes {b_first:.1f} ms (median): the
  emulated handshake adds one round trip, as on a real link (4 × delay = 40 ms).
- (c) uses the best run: on a shared machine a stalled curl or nginx idles the emulated
  link (see the script's header); the load average above says how busy the machine was.
- linkem's CPU time for 500 MB at 1 Gbit/s: {', '.join('%.2f' % x for x in cap_cpu)} s (one thread).
- Rates count TCP payload bytes; a real 25 Mbit/s Ethernet link carries about 3 % less
  payload (headers), which linkem does not model.
"""
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'linkem'],
               input=md, text=True, check=True)
print(md)
missed = [g for g, v in goals.items() if not v]
if missed:
    sys.exit('bench/linkem: goal missed: ' + ', '.join(missed))
PY
