#!/bin/bash
# Benchmark `lazyblk serve --nbd` against `qemu-nbd` serving the same disk (the raw image
# `lazyblk export` writes), both driven by the same client: fio's nbd engine (libnbd).
#
# Usage: bench/serve.sh [SRC]
#   SRC: anything `lazyblk import` takes (a directory, a tar, ...).  Default: a tar of
#   /usr/share/doc, /usr/share/locale, /usr/lib/python3 and /usr/lib/python3.* (a few hundred
#   MB of real files: more decompressed data than serve's default memory cache).
# Environment:
#   LAZYBLK    the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS       runs per server, alternating (default 3; medians are reported)
#   RUNTIME    seconds per timed fio job (default 10)
#   IODEPTH    fio iodepth (default 16)
#   MEM_CACHE  lazyblk serve --mem-cache for the fio part (default 1G, so the warm working set fits)
#   ONLY       comma-separated parts to run (default fio,full,density,holes):
#                fio      the warm/cold fio jobs below (writes the `serve` section)
#                full     whole-disk sequential reads with nbdcopy, DEFAULT serve options
#                density  N_SERVERS servers of one image, each read fully: host memory
#                holes    the mostly-empty disk measurement below (no root, no fio)
#              full and density write the `serve-full` section (bench/serve_full.sh).
#   N_SERVERS  servers in the density part (default 20)
#   HOLES_SRC  the holes part's tree (default /usr/share/doc); HOLES_SIZE its disk (mkfs --size,
#              default 4G)
#   LAZYBLK_BEFORE  another lazyblk binary (e.g. the previous commit's) measured as a third
#              server in the holes part only
#
# Method (see the section this writes into docs/benchmarks.md):
#   - import SRC, mkfs, export the raw disk (untimed).  The fio region for the warm tests is
#     the largest run of data blocks (from `nbdinfo --map`, base:allocation), cut to whole MiB
#     and to at most 3/4 of MEM_CACHE.
#   - warm: each run starts a fresh server on each side: lazyblk with a new, empty overlay;
#     qemu-nbd on a fresh `cp --sparse=always` copy of the exported raw (`sync`ed).  One
#     untimed sequential fio read of the region through that server fills lazyblk's chunk
#     cache (and the page cache under qemu-nbd); then timed jobs: sequential read bs=1M,
#     random read bs=4k, random write bs=4k (each RUNTIME s, time_based, one connection).
#     The servers alternate (A B, B A, A B, ...).
#   - cold: fresh server (lazyblk read-only, no overlay; qemu-nbd read-only on the raw),
#     `sync; echo 3 > /proc/sys/vm/drop_caches`, one sequential fio read (bs=1M) of (a) the
#     whole disk and (b) the data region, each after its own restart + drop.
#   - mostly-empty disk, full read: HOLES_SRC imported and mkfs'd with --size HOLES_SIZE,
#     exported (sparse raw). Each run starts a read-only server (lazyblk on the layout,
#     qemu-nbd on the raw), reads the whole disk once untimed (warm), then times
#     `nbdcopy --no-extents URI null:` (every byte asked for with READ, so holes go over the
#     wire as whatever the server sends for them) and `nbdcopy URI null:` (nbdcopy asks for
#     base:allocation first and reads only the data). Servers alternate; medians of RUNS.
#   - full / density: see bench/serve_full.sh (sourced from here, same image and servers).
#
# Needs root (drop_caches), fio with the nbd engine (installed with apt-get if missing:
# Debian's fio is built with libnbd), qemu-nbd, nbdinfo; nbdcopy for the mostly-empty disk.
# Writes: build/bench/serve.json, build/bench/serve-holes.json and the `serve` section of
# docs/benchmarks.md (ONLY=holes: only its `serve-holes` part).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-10}
IODEPTH=${IODEPTH:-16}
MEM_CACHE=${MEM_CACHE:-1G}
ONLY=${ONLY:-fio,full,density,holes}
N_SERVERS=${N_SERVERS:-20}
HOLES_SRC=${HOLES_SRC:-/usr/share/doc}
HOLES_SIZE=${HOLES_SIZE:-4G}
LAZYBLK_BEFORE=${LAZYBLK_BEFORE:-}
part() { [[ ",$ONLY," == *",$1,"* ]]; }
OUTDIR=$ROOT/build/bench
JSON=$OUTDIR/serve.json
MD=$ROOT/docs/benchmarks.md

die() { echo "bench/serve: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for p in ${ONLY//,/ }; do
  case $p in fio|full|density|holes) ;; *) die "ONLY: unknown part '$p' (want fio, full, density, holes)";; esac
done
[ -z "$LAZYBLK_BEFORE" ] || [ -x "$LAZYBLK_BEFORE" ] || die "LAZYBLK_BEFORE=$LAZYBLK_BEFORE is not an executable"
if part fio || part full || part density; then
  [ "$(id -u)" = 0 ] || die "must run as root (drop_caches)"
fi
if part fio && ! command -v fio >/dev/null; then
  echo "== installing fio (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fio >/dev/null \
    || die "could not install fio"
fi
if part fio; then
  fio --enghelp=nbd >/dev/null 2>&1 || die "this fio has no nbd engine (needs a build with libnbd)"
fi
for t in qemu-nbd nbdinfo nbdcopy python3 tar; do command -v $t >/dev/null || die "$t not found"; done

mkdir -p "$OUTDIR"
WORK=$(mktemp -d "$OUTDIR/serve-work.XXXXXX")
SRV_PID=""
MANY_PIDS=()
cleanup() {
  if [ -n "$SRV_PID" ]; then kill "$SRV_PID" 2>/dev/null || true; wait "$SRV_PID" 2>/dev/null || true; fi
  for p in "${MANY_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------------------- image
STORE=$WORK/store MAN=$WORK/img.manifest LAYOUT=$WORK/img.layout RAW=$WORK/img.raw
if part fio || part full || part density; then
  if [ $# -ge 1 ]; then
    SRC=$1; SRC_DESC=$1
  else
    SRC_DIRS=(usr/share/doc usr/share/locale usr/lib/python3)
    for d in /usr/lib/python3.*; do [ -d "$d" ] && SRC_DIRS+=("${d#/}"); done
    SRC=$WORK/tree.tar
    SRC_DESC="tar -C / -cf tree.tar ${SRC_DIRS[*]}"
    tar -C / -cf "$SRC" "${SRC_DIRS[@]}" 2>/dev/null || [ -s "$SRC" ] || die "tar of ${SRC_DIRS[*]} failed"
  fi
  echo "== image from $SRC_DESC"
  "$LAZYBLK" import "$SRC" --store "$STORE" -o "$MAN" >"$WORK/import.out"
  "$LAZYBLK" mkfs "$MAN" -o "$LAYOUT" >"$WORK/mkfs.out"
  "$LAZYBLK" export "$LAYOUT" --store "$STORE" -o "$RAW" >"$WORK/export.out"
  sed 's/^/   /' "$WORK/import.out" "$WORK/mkfs.out" "$WORK/export.out" | sed "s|$WORK/|\$WORK/|g"
  DISK_BYTES=$(stat -c %s "$RAW")
  RAW_ALLOC=$(( $(stat -c %b "$RAW") * $(stat -c %B "$RAW") ))
  STORE_BYTES=$(du -s --apparent-size -B1 "$STORE" | cut -f1)
fi

LB_SOCK=$WORK/lb.sock PEER_SOCK=$WORK/peer.sock
LB_URI="nbd+unix:///?socket=$LB_SOCK" PEER_URI="nbd+unix:///?socket=$PEER_SOCK"
OV=$WORK/ov PEER_RAW=$WORK/peer.raw

wait_sock() {  # wait_sock URI: until an NBD handshake succeeds (10 s)
  for _ in $(seq 100); do
    nbdinfo --size "$1" >/dev/null 2>&1 && return 0
    kill -0 "$SRV_PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$WORK"/srv.err >&2 || true
  die "server did not come up on $1"
}
stop_srv() {
  if [ -n "$SRV_PID" ]; then
    kill -TERM "$SRV_PID" 2>/dev/null || true
    wait "$SRV_PID" 2>/dev/null || true
    SRV_PID=""
  fi
}
# start_lb [rw|ro]: lazyblk serve; rw with a new empty overlay
LB_STATS=$WORK/lb-stats.json
LB_BIN=$LAZYBLK  # the binary start_lb runs
start_lb() {
  stop_srv
  local args=(--mem-cache "$MEM_CACHE" --nbd "unix:$LB_SOCK" --stats-json "$LB_STATS")
  if [ "${1:-rw}" = rw ]; then rm -f "$OV" "$OV".*; args+=(--overlay "$OV"); fi
  "$LB_BIN" serve "$LAYOUT" --store "$STORE" "${args[@]}" >"$WORK/srv.out" 2>"$WORK/srv.err" &
  SRV_PID=$!
  wait_sock "$LB_URI"
}
# start_peer [rw|ro]: qemu-nbd; rw on a fresh sparse copy of the raw, ro on the raw itself
start_peer() {
  stop_srv
  local img=$RAW ro=()
  if [ "${1:-rw}" = rw ]; then
    rm -f "$PEER_RAW"; cp --sparse=always "$RAW" "$PEER_RAW"; sync; img=$PEER_RAW
  else
    ro=(--read-only)
  fi
  qemu-nbd --persistent --shared=8 -f raw --socket "$PEER_SOCK" --cache=writeback "${ro[@]}" "$img" \
    >"$WORK/srv.out" 2>"$WORK/srv.err" &
  SRV_PID=$!
  wait_sock "$PEER_URI"
}
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# ---------------------------------------------------------------------------- mostly-empty disk
# nbdcopy_time OUT URI [ARGS...]: seconds of one `nbdcopy ARGS URI null:` into OUT
nbdcopy_time() {
  local out=$1 uri=$2 t0 t1; shift 2
  t0=$(date +%s.%N)
  nbdcopy "$@" "$uri" null: || die "nbdcopy $* $uri null: failed"
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' >"$out"
}
holes_run() {  # holes_run lb|before|peer RUN: warm-up read, then the timed reads
  local who=$1 i=$2 uri
  case $who in
    lb) LB_BIN=$LAZYBLK; start_lb ro; uri=$LB_URI ;;
    before) LB_BIN=$LAZYBLK_BEFORE; start_lb ro; uri=$LB_URI ;;
    peer) start_peer ro; uri=$PEER_URI ;;
  esac
  nbdcopy --no-extents "$uri" null: || die "nbdcopy warm-up on $uri failed"
  nbdcopy_time "$WORK/holes-$who-noext-$i.txt" "$uri" --no-extents
  nbdcopy_time "$WORK/holes-$who-ext-$i.txt" "$uri"
  stop_srv
  LB_BIN=$LAZYBLK
  [ "$who" = peer ] || cp "$LB_STATS" "$WORK/holes-stats-$who-$i.json"
  printf '   %-15s run %s: nbdcopy --no-extents %s s, nbdcopy %s s\n' \
    "$(case $who in lb) echo lazyblk;; before) echo 'lazyblk before';; peer) echo qemu-nbd;; esac)" \
    "$i" "$(cat "$WORK/holes-$who-noext-$i.txt")" "$(cat "$WORK/holes-$who-ext-$i.txt")"
}
holes_bench() {
  local who order i
  STORE=$WORK/hstore MAN=$WORK/holes.manifest LAYOUT=$WORK/holes.layout RAW=$WORK/holes.raw
  echo "== mostly-empty disk: $HOLES_SRC on a $HOLES_SIZE disk"
  "$LAZYBLK" import "$HOLES_SRC" --store "$STORE" -o "$MAN" >"$WORK/holes-import.out"
  "$LAZYBLK" mkfs "$MAN" -o "$LAYOUT" --size "$HOLES_SIZE" >"$WORK/holes-mkfs.out"
  "$LAZYBLK" export "$LAYOUT" --store "$STORE" -o "$RAW" >"$WORK/holes-export.out"
  sed 's/^/   /' "$WORK/holes-import.out" "$WORK/holes-mkfs.out" | sed "s|$WORK/|\$WORK/|g"
  start_lb ro
  nbdinfo --map "$LB_URI" >"$WORK/holes-map.txt"
  stop_srv
  order=(lb peer)
  [ -n "$LAZYBLK_BEFORE" ] && order+=(before)
  echo "== mostly-empty disk: $RUNS runs per server, rotating (load average before: $(cut -d' ' -f1-3 /proc/loadavg))"
  for i in $(seq "$RUNS"); do
    for who in "${order[@]}"; do holes_run "$who" "$i"; done
    order=("${order[@]:1}" "${order[0]}")
  done
  export WORK ROOT MD LAZYBLK LAZYBLK_BEFORE RUNS HOLES_SRC HOLES_SIZE
  export H_DISK_BYTES=$(stat -c %s "$RAW") H_RAW_ALLOC=$(( $(stat -c %b "$RAW") * $(stat -c %B "$RAW") ))
  export H_LOADAVG_AFTER=$(cut -d' ' -f1-3 /proc/loadavg) H_GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
  export H_QEMU_VER=$(qemu-nbd --version | sed -n 1p) H_NBDCOPY_VER=$(nbdcopy --version 2>/dev/null | sed -n 1p)
  export H_JSON=$OUTDIR/serve-holes.json
  python3 - <<'PY'
import datetime, json, os, statistics, subprocess
E = os.environ
W = E['WORK']
runs = int(E['RUNS'])
rel = lambda s: s.replace(W + '/', '$WORK/').replace(E['ROOT'] + '/', '')
whos = ['lb', 'peer'] + (['before'] if E['LAZYBLK_BEFORE'] else [])
name = {'lb': 'lazyblk', 'peer': 'qemu-nbd', 'before': 'lazyblk before'}
size = int(E['H_DISK_BYTES'])
data = sum(int(l.split()[1]) for l in open(W + '/holes-map.txt') if l.split() and l.split()[2] == '0')
def secs(who, mode):
    return [float(open('%s/holes-%s-%s-%d.txt' % (W, who, mode, i)).read()) for i in range(1, runs + 1)]
res = {'benchmark': 'serve-holes', 'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
       'image': {'source': E['HOLES_SRC'], 'mkfs_size': E['HOLES_SIZE'], 'disk_bytes': size,
                 'non_hole_bytes': data, 'raw_allocated_bytes': int(E['H_RAW_ALLOC']),
                 'mkfs_said': rel(open(W + '/holes-mkfs.out').read().splitlines()[0])},
       'binaries': {'lazyblk': rel(E['LAZYBLK']), 'lazyblk_before': E['LAZYBLK_BEFORE'] or None},
       'lazyblk_git': E['H_GIT_REV'], 'runs': runs, 'results': {}}
for mode in ('noext', 'ext'):
    r = {}
    for w in whos:
        s = secs(w, mode)
        r[name[w]] = {'seconds': s, 'median_s': round(statistics.median(s), 4),
                      'median_gb_s': round(size / statistics.median(s) / 1e9, 2)}
    peer = r['qemu-nbd']['median_s']
    for w in whos:
        if w != 'peer':
            r[name[w]]['ratio_vs_qemu_nbd'] = round(peer / r[name[w]]['median_s'], 2)
    res['results'][mode] = r
st = {}
try:
    st = json.load(open(W + '/holes-stats-lb-1.json'))
except Exception:
    pass
res['lazyblk_stats_run1'] = st
json.dump(res, open(E['H_JSON'], 'w'), indent=2)
rows = []
label = {'noext': '`nbdcopy --no-extents URI null:` (every byte READ)', 'ext': '`nbdcopy URI null:` (block status, then data only)'}
for mode in ('noext', 'ext'):
    r = res['results'][mode]
    for w in whos:
        x = r[name[w]]
        ratio = '**%.2f**' % x['ratio_vs_qemu_nbd'] if w != 'peer' else '1'
        gbs = '%.2f' % x['median_gb_s'] if mode == 'noext' else '—'
        rows.append('| %s | %s | %.3f | %s | %s | %s |' % (label[mode], name[w], x['median_s'], gbs,
                    ' / '.join('%.3f' % v for v in x['seconds']), ratio))
I = res['image']
before = (' `lazyblk before` is `%s` (LAZYBLK_BEFORE).' % rel(E['LAZYBLK_BEFORE'])) if E['LAZYBLK_BEFORE'] else ''
sec = f"""### mostly-empty disk, full read — {res['date'][:10]}

`{E['HOLES_SRC']}` imported and mkfs'd with `--size {E['HOLES_SIZE']}`: {size:,}-byte disk, {data:,} bytes
not holes (`nbdinfo --map`), exported raw {I['raw_allocated_bytes']:,} bytes allocated. `{I['mkfs_said']}`.
Read-only servers over unix sockets: `lazyblk serve` on the layout (`--mem-cache {E.get('MEM_CACHE', '1G')}`),
`qemu-nbd --read-only --shared=8 -f raw` on the sparse raw. Each run starts the server, reads the whole
disk once untimed (warm: chunk cache / page cache), then times each nbdcopy (wall clock, {E['H_NBDCOPY_VER']},
default 4 connections). With `--no-extents` every byte is asked for with `NBD_CMD_READ`; with structured
replies lazyblk answers holes with `OFFSET_HOLE` chunks (docs/serve.md), as qemu-nbd does. Without it,
nbdcopy asks `base:allocation` first and reads only the data, so both servers send only the data and the
time is mostly nbdcopy's start-up. {runs} runs per server, rotating; medians; ratio = qemu-nbd time / that
server's time (≥ 1: as fast or faster). lazyblk `{E['H_GIT_REV']}`, {E['H_QEMU_VER']}.{before}

| read | server | median s | disk GB/s | runs (s) | vs qemu-nbd |
|---|---|---:|---:|---|---:|
{chr(10).join(rows)}

- lazyblk statistics after run 1: `{json.dumps(st, separators=(',', ':'))[:400]}`
"""
open(W + '/holes-section.md', 'w').write(sec)
print(sec)
PY
  python3 "$ROOT/bench/lib/mdsection.py" "$MD" serve-holes serve <"$WORK/holes-section.md"
  echo "== wrote ${H_JSON#"$ROOT"/} and the serve-holes part of ${MD#"$ROOT"/}"
}
if ! part fio && ! part full && ! part density; then
  holes_bench
  exit 0
fi

# ---------------------------------------------------------------------------- region
start_lb ro
nbdinfo --map "$LB_URI" >"$WORK/map.txt"
stop_srv
read -r REG_OFF REG_LEN < <(awk -v cap="$MEM_CACHE" '
  function bytes(s,  n, u) { n = s + 0; u = toupper(substr(s, length(s)));
    return u == "K" ? n * 1024 : u == "M" ? n * 1048576 : u == "G" ? n * 1073741824 : u == "T" ? n * 1099511627776 : n }
  $3 == 0 && $2 > best { best = $2; off = $1 }
  END { M = 1048576; s = int((off + M - 1) / M) * M; e = int((off + best) / M) * M
        c = int(bytes(cap) * 3 / 4 / M) * M; if (e - s > c) e = s + c
        printf "%d %d\n", s, e - s }' "$WORK/map.txt")
DATA_BYTES=$(awk '$3 == 0 { n += $2 } END { printf "%d\n", n }' "$WORK/map.txt")
[ "$REG_LEN" -ge $((16 * 1048576)) ] || die "no data run of at least 16 MiB in the disk (got $REG_LEN bytes)"
echo "   disk $DISK_BYTES bytes, $DATA_BYTES bytes not holes; fio region: offset $REG_OFF, $REG_LEN bytes"

# ---------------------------------------------------------------------------- fio
# fio_run OUT URI RW BS [timed|once] [OFFSET SIZE]
fio_run() {
  local out=$1 uri=$2 rw=$3 bs=$4 mode=${5:-timed} off=${6:-$REG_OFF} size=${7:-$REG_LEN}
  local t=()
  [ "$mode" = timed ] && t=(--time_based --runtime="$RUNTIME")
  fio --name=bench --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" --iodepth="$IODEPTH" \
      --offset="$off" --size="$size" "${t[@]}" --output-format=json --output="$out" >/dev/null \
    || die "fio failed: $rw $bs on $uri"
}
FIO_CMD_TMPL="fio --name=bench --ioengine=nbd --uri=URI --rw=RW --bs=BS --iodepth=$IODEPTH --offset=OFF --size=SIZE"

TESTS=("read 1M seqread" "randread 4k randread" "randwrite 4k randwrite")
warm_run() {  # warm_run lb|peer RUN
  local who=$1 i=$2 uri
  if [ "$who" = lb ]; then start_lb rw; uri=$LB_URI; else start_peer rw; uri=$PEER_URI; fi
  fio_run "$WORK/$who-warmup-$i.json" "$uri" read 1M once
  for t in "${TESTS[@]}"; do
    read -r rw bs name <<<"$t"
    fio_run "$WORK/$who-$name-$i.json" "$uri" "$rw" "$bs"
  done
  stop_srv
  [ "$who" = lb ] && cp "$LB_STATS" "$WORK/lb-stats-warm-$i.json"
  python3 - "$WORK" "$who" "$i" <<'EOF'
import json, sys
w, who, i = sys.argv[1:]
out = []
for n in ('seqread', 'randread', 'randwrite'):
    t = open('%s/%s-%s-%s.json' % (w, who, n, i)).read()
    j = json.loads(t[t.index('{'):])['jobs'][0]
    k = 'write' if n == 'randwrite' else 'read'
    out.append('%s %.1f MB/s %.0f IOPS' % (n, j[k]['bw_bytes'] / 1e6, j[k]['iops']))
print('   %-8s run %s: %s' % ({'lb': 'lazyblk', 'peer': 'qemu-nbd'}[who], i, '; '.join(out)))
EOF
}
cold_run() {  # cold_run lb|peer RUN
  local who=$1 i=$2 uri
  for what in disk region; do
    if [ "$who" = lb ]; then start_lb ro; uri=$LB_URI; else start_peer ro; uri=$PEER_URI; fi
    drop_caches
    if [ $what = disk ]; then
      fio_run "$WORK/$who-cold$what-$i.json" "$uri" read 1M once 0 "$DISK_BYTES"
    else
      fio_run "$WORK/$who-cold$what-$i.json" "$uri" read 1M once
    fi
    stop_srv
    [ "$who" = lb ] && cp "$LB_STATS" "$WORK/lb-stats-cold$what-$i.json"
  done
  python3 - "$WORK" "$who" "$i" <<'EOF'
import json, sys
w, who, i = sys.argv[1:]
def r(n):
    t = open('%s/%s-%s-%s.json' % (w, who, n, i)).read()
    return json.loads(t[t.index('{'):])['jobs'][0]['read']['bw_bytes'] / 1e6
print('   %-8s run %s: cold whole disk %.1f MB/s, cold data region %.1f MB/s'
      % ({'lb': 'lazyblk', 'peer': 'qemu-nbd'}[who], i, r('colddisk'), r('coldregion')))
EOF
}

if part full || part density; then
  . "$ROOT/bench/serve_full.sh"
fi
if ! part fio; then
  if part holes; then holes_bench; fi
  exit 0
fi

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== warm: $RUNS runs per server, alternating, ${RUNTIME} s per job (load average before: $LOADAVG)"
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then warm_run lb "$i"; warm_run peer "$i"; else warm_run peer "$i"; warm_run lb "$i"; fi
done
echo "== cold: $RUNS runs per server, alternating, page cache dropped before each read"
for i in $(seq "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then cold_run lb "$i"; cold_run peer "$i"; else cold_run peer "$i"; cold_run lb "$i"; fi
done

# ---------------------------------------------------------------------------- report
LOADAVG_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
NPROC=$(nproc)
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEM_KIB=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)
KERNEL=$(uname -r)
FSTYPE=$(findmnt -no FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
FIO_VER=$(fio --version)
QEMU_VER=$(qemu-nbd --version | sed -n 1p)
LIBNBD_VER=$(nbdinfo --version 2>/dev/null | grep -m1 libnbd || true)
GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
export WORK ROOT JSON MD LAZYBLK RUNS RUNTIME IODEPTH MEM_CACHE SRC_DESC DISK_BYTES RAW_ALLOC \
       STORE_BYTES DATA_BYTES REG_OFF REG_LEN NPROC CPU MEM_KIB KERNEL FSTYPE FIO_VER QEMU_VER \
       LIBNBD_VER GIT_REV LOADAVG LOADAVG_AFTER FIO_CMD_TMPL
python3 - <<'PY'
import datetime, json, os, statistics, subprocess
E = os.environ
W = E['WORK']
runs = int(E['RUNS'])
rel = lambda s: s.replace(W + '/', '$WORK/').replace(E['ROOT'] + '/', '')
def job(who, name, i):
    s = open('%s/%s-%s-%d.json' % (W, who, name, i)).read()
    j = json.loads(s[s.index('{'):])['jobs'][0]
    k = 'write' if name == 'randwrite' else 'read'
    return {'mb_s': j[k]['bw_bytes'] / 1e6, 'iops': j[k]['iops'],
            'lat_mean_us': j[k]['clat_ns']['mean'] / 1e3, 'bytes': j[k]['io_bytes'],
            'seconds': j[k]['runtime'] / 1e3}
def summ(who, name):
    rs = [job(who, name, i) for i in range(1, runs + 1)]
    return {'runs': rs, 'median_mb_s': round(statistics.median(r['mb_s'] for r in rs), 1),
            'median_iops': round(statistics.median(r['iops'] for r in rs)),
            'median_lat_us': round(statistics.median(r['lat_mean_us'] for r in rs), 1)}
names = ['seqread', 'randread', 'randwrite']
warm = {}
for n in names:
    lb, pe = summ('lb', n), summ('peer', n)
    ratio = lb['median_mb_s'] / pe['median_mb_s']
    warm[n] = {'lazyblk': lb, 'qemu_nbd': pe, 'ratio': round(ratio, 2), 'goal': 0.9, 'meets_goal': ratio >= 0.9}
cold = {}
for n in ['colddisk', 'coldregion']:
    cold[n] = {'lazyblk': summ('lb', n), 'qemu_nbd': summ('peer', n)}
def stats(p):
    try: return json.load(open(os.path.join(W, p)))
    except Exception: return None
lb_stats = {'warm_run1': stats('lb-stats-warm-1.json'), 'cold_disk_run1': stats('lb-stats-colddisk-1.json')}
now = datetime.datetime.now(datetime.timezone.utc)
lb_bin = rel(E['LAZYBLK'])
mc = E['MEM_CACHE']
cmds = {
    'lazyblk_rw': '%s serve $WORK/img.layout --store $WORK/store --overlay $WORK/ov --mem-cache %s --nbd unix:$WORK/lb.sock --stats-json $WORK/lb-stats.json   # new empty overlay each run' % (lb_bin, mc),
    'lazyblk_ro': '%s serve $WORK/img.layout --store $WORK/store --mem-cache %s --nbd unix:$WORK/lb.sock --stats-json $WORK/lb-stats.json   # cold runs: no overlay (read-only)' % (lb_bin, mc),
    'peer_rw': 'cp --sparse=always $WORK/img.raw $WORK/peer.raw && sync && qemu-nbd --persistent --shared=8 -f raw --socket $WORK/peer.sock --cache=writeback $WORK/peer.raw',
    'peer_ro': 'qemu-nbd --persistent --shared=8 -f raw --socket $WORK/peer.sock --cache=writeback --read-only $WORK/img.raw   # cold runs',
}
t = E['FIO_CMD_TMPL'].replace('--offset=OFF --size=SIZE', '--offset=%s --size=%s' % (E['REG_OFF'], E['REG_LEN']))
fio_cmds = [
    t.replace('RW', 'read').replace('BS', '1M') + '   # warm-up, untimed',
    t.replace('RW', 'read').replace('BS', '1M') + ' --time_based --runtime=%s' % E['RUNTIME'],
    t.replace('RW', 'randread').replace('BS', '4k') + ' --time_based --runtime=%s' % E['RUNTIME'],
    t.replace('RW', 'randwrite').replace('BS', '4k') + ' --time_based --runtime=%s' % E['RUNTIME'],
    'sync; echo 3 > /proc/sys/vm/drop_caches; ' + E['FIO_CMD_TMPL'].replace('RW', 'read').replace('BS', '1M').replace('OFF', '0').replace('SIZE', E['DISK_BYTES']) + '   # cold, whole disk',
    'sync; echo 3 > /proc/sys/vm/drop_caches; ' + t.replace('RW', 'read').replace('BS', '1M') + '   # cold, data region',
]
res = {'benchmark': 'serve', 'date': now.strftime('%Y-%m-%dT%H:%M:%SZ'),
       'machine': {'nproc': int(E['NPROC']), 'cpu': E['CPU'], 'mem_kib': int(E['MEM_KIB']),
                   'kernel': E['KERNEL'], 'scratch_fs': E['FSTYPE'], 'loadavg_before': E['LOADAVG'],
                   'loadavg_after': E['LOADAVG_AFTER']},
       'versions': {'lazyblk_git': E['GIT_REV'], 'fio': E['FIO_VER'], 'qemu_nbd': E['QEMU_VER'], 'libnbd': E['LIBNBD_VER']},
       'image': {'source': E['SRC_DESC'], 'disk_bytes': int(E['DISK_BYTES']), 'non_hole_bytes': int(E['DATA_BYTES']),
                 'raw_allocated_bytes': int(E['RAW_ALLOC']), 'store_bytes': int(E['STORE_BYTES']),
                 'region_offset': int(E['REG_OFF']), 'region_bytes': int(E['REG_LEN']),
                 'import_said': rel(open(W + '/import.out').read().splitlines()[0]),
                 'mkfs_said': rel(open(W + '/mkfs.out').read().splitlines()[0]),
                 'export_said': rel(open(W + '/export.out').read().splitlines()[0])},
       'params': {'runs': runs, 'runtime_s': int(E['RUNTIME']), 'iodepth': int(E['IODEPTH']), 'mem_cache': mc},
       'warm': warm, 'cold': cold, 'lazyblk_stats': lb_stats, 'commands': {'servers': cmds, 'fio': fio_cmds}}
with open(E['JSON'], 'w') as f:
    json.dump(res, f, indent=2); f.write('\n')

met = lambda ok: '**met**' if ok else '**NOT met**'
MB = lambda x: '%.1f' % x
runs_s = lambda s, k: ' / '.join(('%.1f' if k == 'mb_s' else '%.0f') % r[k] for r in s['runs'])
label = {'seqread': 'sequential read, bs=1M', 'randread': 'random read, bs=4k', 'randwrite': 'random write, bs=4k'}
rows = []
for n in names:
    w = warm[n]; L = w['lazyblk']; P = w['qemu_nbd']
    rows.append(f"| {label[n]} | {MB(L['median_mb_s'])} | {L['median_iops']:,} | {L['median_lat_us']:,} | "
                f"{MB(P['median_mb_s'])} | {P['median_iops']:,} | {P['median_lat_us']:,} | **{w['ratio']:.2f}** | {met(w['meets_goal'])} |")
runrows = []
for n in names:
    for who, k in (('lazyblk', 'lazyblk'), ('qemu-nbd', 'qemu_nbd')):
        runrows.append(f"| {label[n]} | {who} | {runs_s(warm[n][k], 'mb_s')} |")
crow = []
for n, lab, nbytes in (('colddisk', 'whole disk (%s bytes, %s of them not holes)' % (f"{int(E['DISK_BYTES']):,}", f"{int(E['DATA_BYTES']):,}"), None),
                       ('coldregion', 'data region (%s bytes)' % f"{int(E['REG_LEN']):,}", None)):
    L = cold[n]['lazyblk']; P = cold[n]['qemu_nbd']
    crow.append(f"| {lab} | **{MB(L['median_mb_s'])}** | {runs_s(L, 'mb_s')} | {MB(P['median_mb_s'])} | {runs_s(P, 'mb_s')} |")
st = lb_stats['cold_disk_run1'] or {}
I = res['image']
sec = f"""## serve: NBD, `lazyblk serve` vs `qemu-nbd` — {res['date'][:10]}

Machine: {E['NPROC']} CPUs ({E['CPU']}), {int(E['MEM_KIB']) // 1024:,} MiB RAM, Linux {E['KERNEL']},
scratch on {E['FSTYPE']} (build/bench). lazyblk `{E['GIT_REV']}`, {E['QEMU_VER']}, {E['FIO_VER']}
(nbd engine{', ' + E['LIBNBD_VER'] if E['LIBNBD_VER'] else ''}). Load average before: {E['LOADAVG']}, after: {E['LOADAVG_AFTER']}
(other work on the machine shows up as run-to-run spread; see the per-run figures).

Image: `{E['SRC_DESC']}`, imported, mkfs'd and exported once (untimed):
{I['disk_bytes']:,}-byte disk, {I['non_hole_bytes']:,} bytes not holes; store {I['store_bytes']:,} bytes;
raw image {I['raw_allocated_bytes']:,} bytes allocated.
`{I['import_said']}`; `{I['mkfs_said']}`.

Client: fio's `nbd` engine (libnbd), one job, one connection, iodepth {E['IODEPTH']}, on both servers,
each over a unix socket. Warm tests use the region offset {int(E['REG_OFF']):,}, {int(E['REG_LEN']):,} bytes
(the largest run of data blocks per `nbdinfo --map`, whole MiB); {runs} runs per server, alternating;
every run starts a fresh server (lazyblk: new empty overlay, `--mem-cache {mc}`; qemu-nbd: a fresh
`cp --sparse=always` copy of the raw), does one untimed sequential read of the region, then
{E['RUNTIME']} s each of sequential read, random read and random write. Medians of the runs; MB = 10^6 bytes.

### warm cache

| job | lazyblk MB/s | IOPS | mean lat µs | qemu-nbd MB/s | IOPS | mean lat µs | lazyblk / qemu-nbd | goal ≥ 0.9 |
|---|---:|---:|---:|---:|---:|---:|---:|---|
{chr(10).join(rows)}

| job | server | MB/s per run |
|---|---|---|
{chr(10).join(runrows)}

### cold reads from the local store

Fresh read-only server, `sync; echo 3 > /proc/sys/vm/drop_caches`, then one sequential read
(bs=1M, iodepth {E['IODEPTH']}); {runs} runs each, alternating. lazyblk fetches, verifies (sha256) and
decompresses chunks from the store; qemu-nbd reads the raw file. Holes cost neither server a disk read,
and both answer a read over holes with structured `OFFSET_HOLE` chunks (no payload; docs/serve.md), so
the whole-disk figure, ~{100 * (1 - int(E['DATA_BYTES']) / int(E['DISK_BYTES'])):.0f}% holes, is mostly the data plus the cost of mapping the holes.
The data-region row is the cold-read figure for the store.

| read | lazyblk MB/s | runs | qemu-nbd MB/s | runs |
|---|---:|---|---:|---|
{chr(10).join(crow)}

- lazyblk statistics after the first cold whole-disk read: `{json.dumps(st, separators=(',', ':'))[:600]}`

### what differs between the two servers

- the data: lazyblk serves the layout + zstd chunks ({I['store_bytes']:,} bytes); qemu-nbd the raw image
  `lazyblk export` wrote from them ({I['raw_allocated_bytes']:,} bytes allocated). Both present the same bytes.
- warm means different caches: lazyblk's own decompressed-chunk cache (`--mem-cache {mc}`; the page
  cache holds the compressed chunk files), qemu-nbd's is the kernel page cache over the raw file
  (`--cache=writeback`).
- writes: lazyblk writes into a new overlay file (block data + a block-state file), so every
  first write to a block allocates; qemu-nbd writes into a raw copy in which the data area's blocks
  are already allocated. Neither side flushes during the test (fio sends no FLUSH; both write to the page
  cache). qemu-nbd with a qcow2 overlay would be closer to lazyblk's copy-on-write but was not measured.
- concurrency: lazyblk handles up to 4 requests at once per connection (docs/serve.md); qemu-nbd
  runs requests as coroutines in one thread with a thread pool for file I/O. The client keeps {E['IODEPTH']} in flight.
- fio runs on the same {E['NPROC']} CPUs as the server, so CPU spent by either server also slows the client.

Commands (`$WORK` is a scratch directory under build/bench):

```
{lb_bin} import SRC --store $WORK/store -o $WORK/img.manifest
{lb_bin} mkfs $WORK/img.manifest -o $WORK/img.layout
{lb_bin} export $WORK/img.layout --store $WORK/store -o $WORK/img.raw
{cmds['lazyblk_rw']}
{cmds['peer_rw']}
{cmds['lazyblk_ro']}
{cmds['peer_ro']}
{chr(10).join(fio_cmds)}
```
(URI = `nbd+unix:///?socket=$WORK/lb.sock` or `nbd+unix:///?socket=$WORK/peer.sock`; every fio also has
`--output-format=json`.)
"""
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'serve'],
               input=sec, text=True, check=True)
print(sec)
PY
echo "== wrote ${JSON#"$ROOT"/} and ${MD#"$ROOT"/}"
if part holes; then holes_bench; fi
