#!/bin/bash
# Benchmark a cold full read of a lazy disk whose chunks come from an HTTP remote (nginx on
# loopback) against `curl --parallel` fetching the same chunk files from the same nginx, in
# the same run.
#
# Usage: bench/remote.sh [SRC]
#   SRC: anything `lazyblk import` takes.  Default: a tar of /usr/lib/jvm and /usr/lib/gcc
#   (or, where those are small, /usr/lib/x86_64-linux-gnu): >= 500 MiB of real files.
# Environment:
#   LAZYBLK      the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS         runs per side, alternating (default 3; medians are reported)
#   CONCURRENCY  parallel requests on both sides (default 16: lazyblk's default
#                --fetch-concurrency; curl --parallel-max)
#
# Method (see the section this writes into docs/benchmarks.md):
#   - import SRC into a store, mkfs (untimed).  nginx (own config, 2 workers, keep-alive,
#     sendfile) serves the store directory on 127.0.0.1.
#   - lazyblk side: `lazyblk serve LAYOUT --store EMPTY --remote http://127.0.0.1:P/
#     --nbd unix:S --read-only` with a new empty cache directory; once it prints that it is
#     serving (the line comes when the socket listens), `nbdcopy
#     nbd+unix:///?socket=S null:` reads the whole disk (every chunk fetched, verified,
#     decompressed and kept in the cache).  Timed: from starting the server to nbdcopy's
#     end.  The server's statistics give the requests and bytes.
#   - peer: `curl --parallel --parallel-max CONCURRENCY -K LIST` downloads every chunk file
#     of the store to a new directory on the same file system (no verification, no
#     decompression).
#   - before each timed run: `sync; echo 3 > /proc/sys/vm/drop_caches`, so nginx reads the
#     store from the disk on both sides.  The sides alternate (A B, B A, ...).  Downloaded
#     files are removed only at the end: on an ext4 without a journal (this machine's root),
#     creating a file right after many deletions is slow (the inode allocator skips inodes
#     freed in the last 30 s), which would tax whichever side runs next.
#   - requests per MiB: nginx's access log lines for the lazyblk run, over the MiB of disk
#     nbdcopy read, and over the MiB of file data in the image.
#   - CPU time of every process on both sides: lazyblk (its /proc stat before it is
#     stopped), nbdcopy and curl (/usr/bin/time), nginx's workers (their /proc stat before and
#     after).  Both sides are CPU-bound on a small machine, so these explain the times.
#   - the floor: the CPU work any full read that verifies must do on this machine, whatever
#     the implementation:
#       verify   `lazyblk cas verify` (one thread: decompress and sha256 every chunk, from the
#                page cache, best of 3; the issue mandates that check before use)
#       fetch    what the peer side spends moving the same bytes from nginx into files on
#                the same disk (curl + nginx CPU, median of the runs): lazyblk receives the
#                same responses and keeps them in its cache too
#       deliver  what handing the decompressed disk to nbdcopy costs with no fetching and no
#                verifying at all: `qemu-nbd` serving the exported raw disk from the page
#                cache to the same `nbdcopy ... null:` (qemu-nbd + nbdcopy CPU, best of 3)
#     floor = (verify + fetch + deliver) / CPUs: even perfectly parallel, no verifying reader
#     finishes sooner here; curl's median over it is the best ratio this machine allows.
#
# Needs root (drop_caches), nginx, nbdcopy, curl, qemu-nbd.
# Writes: build/bench/remote.json and the `remote` section of docs/benchmarks.md.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
. "$ROOT/scripts/lib/nginx_conf.sh"
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-3}
CONCURRENCY=${CONCURRENCY:-16}
OUTDIR=$ROOT/build/bench
JSON=$OUTDIR/remote.json
MD=$ROOT/docs/benchmarks.md

die() { echo "bench/remote: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[ "$(id -u)" = 0 ] || die "must run as root (drop_caches)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for t in nginx nbdcopy nbdinfo curl python3 tar qemu-nbd /usr/bin/time; do
  command -v $t >/dev/null || die "$t not found (scripts/deps.sh installs it)"
done

mkdir -p "$OUTDIR"
WORK=$(mktemp -d "$OUTDIR/remote-work.XXXXXX")
chmod 755 "$WORK" # nginx's workers run as an unprivileged user
NGINX_PID="" SRV_PID=""
cleanup() {
  [ -n "$SRV_PID" ] && { kill -9 "$SRV_PID" 2>/dev/null || true; }
  [ -n "$NGINX_PID" ] && { kill "$NGINX_PID" 2>/dev/null || true; }
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------------------- image
if [ $# -ge 1 ]; then
  SRC=$1; SRC_DESC=$1
else
  SRC_DIRS=()
  for d in usr/lib/jvm usr/lib/gcc; do [ -d "/$d" ] && SRC_DIRS+=("$d"); done
  have=$(du -sm "${SRC_DIRS[@]/#//}" 2>/dev/null | awk '{s+=$1} END {print s+0}')
  [ "$have" -ge 500 ] || SRC_DIRS=(usr/lib/x86_64-linux-gnu)
  SRC=$WORK/tree.tar
  SRC_DESC="tar -C / -cf tree.tar ${SRC_DIRS[*]}"
  tar -C / -cf "$SRC" "${SRC_DIRS[@]}" 2>/dev/null || [ -s "$SRC" ] || die "tar failed"
fi
echo "== image from $SRC_DESC"
STORE=$WORK/store MAN=$WORK/img.manifest LAYOUT=$WORK/img.layout
"$LAZYBLK" import "$SRC" --store "$STORE" -o "$MAN" >"$WORK/import.out"
"$LAZYBLK" mkfs "$MAN" -o "$LAYOUT" >"$WORK/mkfs.out"
rm -f "$SRC"
DATA_BYTES=$("$LAZYBLK" manifest show --summary "$MAN" | awk '/^file bytes/ {print $3}')
[ -n "$DATA_BYTES" ] && [ "$DATA_BYTES" -gt 0 ] || die "cannot read the image's file bytes"
find "$STORE/chunks" -type f -name '[0-9a-f]*' | sort >"$WORK/chunks.list"
N_CHUNKS=$(wc -l <"$WORK/chunks.list")
STORE_BYTES=$(du -sb --apparent-size "$STORE/chunks" | cut -f1)
echo "   $N_CHUNKS chunk files, $STORE_BYTES bytes stored"

# ---------------------------------------------------------------------------- nginx
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/nginx"
nginx_conf "$WORK/nginx" "$PORT" "$STORE" 2
nginx -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" &
NGINX_PID=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null && break
  curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" 2>/dev/null | grep -q '^[1-5]' && break
  sleep 0.05; done
URL=http://127.0.0.1:$PORT/

# curl's list: one url/output pair per chunk file
sed "s|^$STORE/\(.*\)$|url = \"${URL}\1\"\noutput = \"\1\"|" "$WORK/chunks.list" >"$WORK/curl.cfg"

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
TICK=$(getconf CLK_TCK)
# CPU seconds (user + system) of PIDs, all their threads, from /proc/PID/stat
cpu_of() { local s=0 p; for p in "$@"; do
    s=$((s + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  python3 -c "print($s / $TICK)"; }
nginx_cpu() { cpu_of $(pgrep -P "$NGINX_PID"); }
sub() { python3 -c "print($1 - $2)"; }

run_lazyblk() { # RUN -> seconds on stdout; stats in $WORK/lz.$RUN.json
  local i=$1 cache=$WORK/cache.$1 sock=$WORK/nbd.$1.sock
  rm -rf "$cache"; : >"$WORK/nginx/access.log"; kill -USR1 "$NGINX_PID" 2>/dev/null || true
  drop
  local t0; t0=$(now)
  "$LAZYBLK" serve "$LAYOUT" --store "$cache" --remote "$URL" --read-only \
    --fetch-concurrency "$CONCURRENCY" --nbd "unix:$sock" --stats-json "$WORK/lz.$i.json" \
    >"$WORK/lz.$i.out" 2>"$WORK/lz.$i.err" &
  SRV_PID=$!
  # ready when it says so ("serving ... over NBD", printed once the socket listens)
  for _ in $(seq 1000); do grep -q '^serving ' "$WORK/lz.$i.out" && break; sleep 0.005; done
  local n0; n0=$(nginx_cpu)
  /usr/bin/time -f '%U %S' -o "$WORK/lz.$i.nbdcopy" nbdcopy "nbd+unix:///?socket=$sock" null: ||
    die "nbdcopy failed: $(cat "$WORK/lz.$i.err")"
  local t1; t1=$(now)
  cpu_of "$SRV_PID" >"$WORK/lz.$i.cpu"
  sub "$(nginx_cpu)" "$n0" >"$WORK/lz.$i.nginx"
  kill -TERM "$SRV_PID"; wait "$SRV_PID" || die "lazyblk serve failed: $(cat "$WORK/lz.$i.err")"
  SRV_PID=""
  sleep 0.2
  wc -l <"$WORK/nginx/access.log" >"$WORK/lz.$i.requests"
  du -sb --apparent-size "$cache/chunks" | cut -f1 >"$WORK/lz.$i.cached"
  python3 -c "print($t1 - $t0)"
}

run_curl() {
  local i=$1 dir=$WORK/curl.$1
  rm -rf "$dir"; mkdir -p "$dir"
  drop
  local n0; n0=$(nginx_cpu)
  local t0; t0=$(now)
  (cd "$dir" && /usr/bin/time -f '%U %S' -o "$WORK/curl.$i.time" curl --parallel \
     --parallel-immediate --parallel-max "$CONCURRENCY" --create-dirs -sS --fail \
     -K "$WORK/curl.cfg") || die "curl failed"
  local t1; t1=$(now)
  sub "$(nginx_cpu)" "$n0" >"$WORK/curl.$i.nginx"
  du -sb --apparent-size "$dir" | cut -f1 >"$WORK/curl.$i.bytes"
  python3 -c "print($t1 - $t0)"
}

DISK_BYTES=$(nbdinfo --size "$LAYOUT" 2>/dev/null || true)
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then
    a=$(run_lazyblk "$i"); b=$(run_curl "$i")
  else
    b=$(run_curl "$i"); a=$(run_lazyblk "$i")
  fi
  echo "$a" >"$WORK/lz.$i.secs"; echo "$b" >"$WORK/curl.$i.secs"
  printf '   run %d: lazyblk %.2f s, curl --parallel %.2f s\n' "$i" "$a" "$b"
done

kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true; NGINX_PID=""

# deliver: qemu-nbd serving the exported raw disk from the page cache to the same nbdcopy,
# no fetching, no verifying (qemu-nbd + nbdcopy CPU, best of 3)
"$LAZYBLK" export "$LAYOUT" --store "$STORE" -o "$WORK/disk.raw" >/dev/null 2>&1 ||
  die "lazyblk export failed"
cat "$WORK/disk.raw" >/dev/null
for k in 1 2 3; do
  qemu-nbd -r -t -e 4 -f raw -k "$WORK/qnbd.sock" "$WORK/disk.raw" &
  QPID=$!
  for _ in $(seq 400); do [ -S "$WORK/qnbd.sock" ] && break; sleep 0.01; done
  /usr/bin/time -f '%U %S' -o "$WORK/deliver.nbdcopy" nbdcopy "nbd+unix:///?socket=$WORK/qnbd.sock" null: ||
    die "nbdcopy from qemu-nbd failed"
  q=$(cpu_of "$QPID"); kill "$QPID"; wait "$QPID" 2>/dev/null || true
  python3 -c "print($q + sum(map(float, open('$WORK/deliver.nbdcopy').read().split())))"
done | sort -n | head -1 >"$WORK/deliver.cpu"
rm -f "$WORK/disk.raw"

# the floor: decompressing and verifying every chunk, which a full read cannot skip (the guest
# needs the decompressed bytes, and nothing is served unverified), without any I/O: one
# thread of `lazyblk cas verify` over the store, in the page cache (best of 3)
cat "$STORE"/chunks/*/* >/dev/null 2>&1 || true
for k in 1 2 3; do
  /usr/bin/time -f '%e %U %S' -o "$WORK/verify.time" "$LAZYBLK" cas verify --store "$STORE" >/dev/null
  cat "$WORK/verify.time"
done | sort -n | head -1 >"$WORK/verify.secs"

export WORK RUNS CONCURRENCY JSON MD ROOT SRC_DESC N_CHUNKS STORE_BYTES DATA_BYTES
python3 - <<'PY'
import json, os, statistics, subprocess, datetime
E = os.environ
W, runs = E['WORK'], int(E['RUNS'])
rd = lambda p: open(os.path.join(W, p)).read().strip()
lz = [float(rd('lz.%d.secs' % i)) for i in range(1, runs + 1)]
cu = [float(rd('curl.%d.secs' % i)) for i in range(1, runs + 1)]
stats = [json.load(open(os.path.join(W, 'lz.%d.json' % i))) for i in range(1, runs + 1)]
reqs = [int(rd('lz.%d.requests' % i)) for i in range(1, runs + 1)]
st = stats[-1]
disk_read = st['read_bytes']
mib = 1 << 20
med_lz, med_cu = statistics.median(lz), statistics.median(cu)
verify_wall, vu, vs = map(float, rd('verify.secs').split())
verify = vu + vs
t2 = lambda p: sum(map(float, rd(p).split()))
lz_cpu = [float(rd('lz.%d.cpu' % i)) for i in range(1, runs + 1)]
lz_nbdcopy = [t2('lz.%d.nbdcopy' % i) for i in range(1, runs + 1)]
lz_nginx = [float(rd('lz.%d.nginx' % i)) for i in range(1, runs + 1)]
cu_cpu = [t2('curl.%d.time' % i) for i in range(1, runs + 1)]
cu_nginx = [float(rd('curl.%d.nginx' % i)) for i in range(1, runs + 1)]
fetch = statistics.median(a + b for a, b in zip(cu_cpu, cu_nginx))
deliver = float(rd('deliver.cpu'))
ncpu = os.cpu_count() or 1
work = verify + fetch + deliver
floor = work / ncpu
med = statistics.median
store_bytes, data_bytes = int(E['STORE_BYTES']), int(E['DATA_BYTES'])
res = {
    'date': datetime.date.today().isoformat(), 'source': E['SRC_DESC'], 'runs': runs,
    'concurrency': int(E['CONCURRENCY']), 'chunk_files': int(E['N_CHUNKS']),
    'store_bytes': store_bytes, 'file_bytes': data_bytes, 'disk_bytes_read': disk_read,
    'lazyblk_secs': lz, 'curl_secs': cu, 'lazyblk_median': med_lz, 'curl_median': med_cu,
    'ratio_curl_over_lazyblk': med_cu / med_lz,
    'http_requests': reqs, 'remote_requests': st['remote_requests'],
    'remote_fetches': st['remote_fetches'], 'remote_bytes': st['remote_bytes'],
    'requests_per_mib_read': st['remote_requests'] / (disk_read / mib),
    'requests_per_mib_data': st['remote_requests'] / (data_bytes / mib),
    'fetch_ms': {k: st['fetch_ms_' + k] for k in ('p50', 'p90', 'p99', 'max')},
    'cpu_secs': {'lazyblk': lz_cpu, 'lazyblk_nbdcopy': lz_nbdcopy, 'lazyblk_nginx': lz_nginx,
                 'curl': cu_cpu, 'curl_nginx': cu_nginx},
    'floor': {'verify_cpu_secs': verify, 'verify_wall_secs': verify_wall,
              'fetch_cpu_secs': fetch, 'deliver_cpu_secs': deliver, 'work_cpu_secs': work},
    'cpus': ncpu, 'floor_secs': floor, 'best_possible_ratio': med_cu / floor,
    'best_possible_ratio_without_delivery': med_cu * ncpu / (verify + fetch),
}
json.dump(res, open(E['JSON'], 'w'), indent=1)
tput = lambda secs, b: b / mib / secs
md = f"""## remote: cold full read from nginx, `lazyblk serve --remote` vs `curl --parallel` — {res['date']}

Image: `{res['source']}` — {data_bytes / mib:,.0f} MiB of file data in {res['chunk_files']:,} chunk
files ({store_bytes / mib:,.0f} MiB stored, zstd); the disk nbdcopy reads is {disk_read / mib:,.0f} MiB.
nginx on 127.0.0.1 serves the store; page cache dropped before every run; {runs} alternating runs,
{res['concurrency']} requests at once on both sides (method: header of `bench/remote.sh`).

| | median | runs | throughput |
|---|---:|---|---:|
| `lazyblk serve --remote` + `nbdcopy … null:` (empty cache: fetch, verify, decompress, cache, serve) | {med_lz:.2f} s | {', '.join('%.2f' % x for x in lz)} | {tput(med_lz, store_bytes):,.0f} MiB/s stored, {tput(med_lz, data_bytes):,.0f} MiB/s of data |
| `curl --parallel` of the same chunk files (download only) | {med_cu:.2f} s | {', '.join('%.2f' % x for x in cu)} | {tput(med_cu, store_bytes):,.0f} MiB/s stored |

- lazyblk / peer speed: **{med_cu / med_lz:.2f}×** (goal ≥ 0.8×).
- CPU seconds (medians), lazyblk side: lazyblk {med(lz_cpu):.2f} + nbdcopy {med(lz_nbdcopy):.2f} + nginx {med(lz_nginx):.2f}; peer side: curl {med(cu_cpu):.2f} + nginx {med(cu_nginx):.2f}. The benchmark machine has {ncpu} CPUs.
- The floor — work any reader that verifies every chunk must do on a {ncpu}-CPU machine, whatever its design:

  | work | CPU s | measured as |
  |---|---:|---|
  | verify | {verify:.2f} | `lazyblk cas verify`: zstd-decompress and sha256 every chunk, one thread, from the page cache |
  | fetch | {fetch:.2f} | the peer side's own CPU: curl + nginx moving the same bytes into files |
  | deliver | {deliver:.2f} | `qemu-nbd` serving the exported raw disk from the page cache to the same `nbdcopy … null:` (server + client) |
  | total | {work:.2f} | on {ncpu} CPUs, perfectly parallel: **{floor:.2f} s** |

  So the best ratio any verifying reader could reach against this peer on a {ncpu}-CPU machine is **{med_cu / floor:.2f}×**; lazyblk reaches {med_cu / med_lz:.2f}× ({floor / med_lz:.0%} of that bound). Even leaving delivery out (as if the client's reads were free), verify + fetch alone take {(verify + fetch) / ncpu:.2f} s on {ncpu} CPUs: at most {med_cu * ncpu / (verify + fetch):.2f}×.
- HTTP requests: {st['remote_requests']:,} for {st['remote_fetches']:,} chunks (nginx logged {reqs[-1]:,}) = {res['requests_per_mib_read']:.3f} per MiB of disk read, {res['requests_per_mib_data']:.3f} per MiB of file data; curl made {res['chunk_files']:,}.
- fetch latency (last run): p50 {st['fetch_ms_p50']:.1f} ms, p90 {st['fetch_ms_p90']:.1f} ms, p99 {st['fetch_ms_p99']:.1f} ms, max {st['fetch_ms_max']:.1f} ms.
"""
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'remote'],
               input=md, text=True, check=True)
print(md)
PY
