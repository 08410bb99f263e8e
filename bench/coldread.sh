#!/bin/bash
# Cold full read of the realistic image's disk over a fast link: `nbdcopy` of the whole disk
# from `lazyblk serve --remote` with an empty cache, against the plain download of the same
# chunks with `curl --parallel --parallel-max 16` through the same link. The ratio says how
# close demand fetching gets to the link's own throughput when every chunk is needed.
#
# Usage: bench/coldread.sh
# Environment:
#   LAZYBLK   the lazyblk binary (default build/lazyblk)
#   LINK      link profile(s), space-separated: RATE/RTT (default 1gbit/1ms) or none (nginx
#             directly). A profile other than none needs the link emulator ($LINKEM, default
#             build/tools/linkem): `linkem --listen 127.0.0.1:0 --connect 127.0.0.1:NGINX
#             --rate RATE --delay RTT/2`
#   RUNS      runs per side, alternating (default 3; medians reported)
#   SERVE_ARGS  more lazyblk serve options (experiments; the section says which were used)
#   LAZYBLK_BENCH_CACHE  where bench/lib/realistic_image.sh keeps the image
#
# Method:
#   - the image: bench/lib/realistic_image.sh (Debian bookworm minbase + python3 + numpy +
#     sqlite3), its store published by a private nginx on 127.0.0.1 at /store/, reached
#     through linkem (a fresh linkem per run, so its byte counts are per run). nginx and
#     linkem run at nice -10 (COLD_NICE, bench/lib/coldlib.sh): they stand for another
#     machine and the network, which do not take CPU from the client on a real link.
#   - lazyblk side: `lazyblk serve IMAGE.layout --store EMPTY --remote URL --read-only
#     --nbd unix:S` (default --fetch-concurrency), then, timed, `nbdcopy nbd+unix:///?socket=S
#     null:` (the whole disk: metadata, every data block, the zero blocks).
#   - curl side: timed, `curl --parallel --parallel-max 16` of every chunk URL of the store
#     (chunks/XX/HEX) into an empty directory.
#   - the sides alternate (lazyblk curl, curl lazyblk, ...); ratio = median lazyblk time /
#     median curl time; goal <= 1.1.
#
# Needs nginx, curl, nbdcopy (libnbd-bin). Writes build/bench/coldread.json and the
# `coldread` section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
export LAZYBLK
LINK=${LINK:-1gbit/1ms}
RUNS=${RUNS:-3}
OUT=$ROOT/build/bench
JSON=$OUT/coldread.json
MD=$ROOT/docs/benchmarks.md

die() { echo "bench/coldread: $*" >&2; exit 1; }
say() { echo "bench/coldread: $*" >&2; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for t in nbdcopy curl nginx python3; do command -v $t >/dev/null || die "$t not found (scripts/deps.sh)"; done
for p in $LINK; do
  [ "$p" = none ] && continue
  [ -x "${LINKEM:-$ROOT/build/tools/linkem}" ] ||
    die "LINK=$p needs the link emulator, and ${LINKEM:-build/tools/linkem} is missing (build it, set LINKEM, or run with LINK=none)"
done

IDIR=$("$ROOT/bench/lib/realistic_image.sh") || die "could not build the realistic image"
. "$ROOT/bench/lib/coldlib.sh"
cold_setup coldread "$IDIR"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

for PROF in $LINK; do
  for run in $(seq 1 "$RUNS"); do
    if [ $((run % 2)) = 1 ]; then SIDES="lazyblk curl"; else SIDES="curl lazyblk"; fi
    for side in $SIDES; do
      C=$WORK/cache
      rm -rf "$C" "$WORK/stats.json"
      sync
      link_start "$PROF" "$NGINX_PORT"
      bytes="" reqs=""
      if [ "$side" = lazyblk ]; then
        S=$WORK/nbd.sock
        rm -f "$S"
        "$LAZYBLK" serve "$IDIR/image.layout" --store "$C" --remote "http://127.0.0.1:$LINK_PORT/store/" \
          --read-only --nbd "unix:$S" --stats-json "$WORK/stats.json" ${SERVE_ARGS:-} \
          >"$WORK/serve.log" 2>&1 &
        spid=$!
        COLD_PIDS+=("$spid")
        for _ in $(seq 400); do [ -S "$S" ] && break; kill -0 $spid 2>/dev/null || break; sleep 0.025; done
        [ -S "$S" ] || die "lazyblk serve did not start: $(tail -2 "$WORK/serve.log")"
        t0=$(now_ms)
        nbdcopy "nbd+unix:///?socket=$S" null: || die "nbdcopy of the served disk failed"
        ms=$(( $(now_ms) - t0 ))
        kill -TERM $spid; wait $spid || die "lazyblk serve exited $? (log: $(tail -1 "$WORK/serve.log"))"
        read -r bytes reqs fetches < <(python3 -c '
import json, sys; s = json.load(open(sys.argv[1]))
print(s["remote_bytes"], s["remote_requests"], s["remote_fetches"])' "$WORK/stats.json")
        [ "$fetches" = "$NCHUNKS" ] || say "note: serve fetched $fetches chunks, the store has $NCHUNKS"
      else
        sed "s/LINKPORT/$LINK_PORT/" "$WORK/urls.tmpl" >"$WORK/urls.cfg"
        t0=$(now_ms)
        read -r bytes reqs < <(curl_fetch_all "$WORK/urls.cfg" "$C")
        ms=$(( $(now_ms) - t0 ))
        [ "$reqs" = "$NCHUNKS" ] || die "curl fetched $reqs of $NCHUNKS chunks"
      fi
      link_stop
      say "$PROF run $run $side: $ms ms, $bytes bytes in $reqs requests${LINK_DOWN:+ (link down $LINK_DOWN bytes, $LINK_CONNS connections)}"
      printf '{"profile":"%s","run":%d,"side":"%s","ms":%d,"bytes":%d,"requests":%d,"link_down_bytes":%s,"link_connections":%s}\n' \
        "$PROF" "$run" "$side" "$ms" "$bytes" "$reqs" "${LINK_DOWN:-null}" "${LINK_CONNS:-null}" >>"$WORK/results.jsonl"
    done
  done
done

GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
export WORK JSON MD ROOT IDIR RUNS GIT_REV
python3 - <<'PY'
import datetime, json, os, statistics, subprocess
E = os.environ
rows = [json.loads(l) for l in open(os.path.join(E['WORK'], 'results.jsonl')) if l.strip()]
info = json.load(open(os.path.join(E['IDIR'], 'info.json')))
old = {}
if os.path.exists(E['JSON']):
    try: old = json.load(open(E['JSON']))
    except ValueError: old = {}
profiles = old.get('profiles', {}) if old.get('image', {}).get('key') == info['key'] else {}
for prof in sorted({r['profile'] for r in rows}):
    pr = [r for r in rows if r['profile'] == prof]
    side = {s: [r for r in pr if r['side'] == s] for s in ('lazyblk', 'curl')}
    med = {s: statistics.median(r['ms'] for r in side[s]) for s in side}
    profiles[prof] = {'date': datetime.date.today().isoformat(), 'git': E['GIT_REV'],
                      'runs': int(E['RUNS']), 'lazyblk_ms': [r['ms'] for r in side['lazyblk']],
                      'curl_ms': [r['ms'] for r in side['curl']],
                      'lazyblk_median_ms': med['lazyblk'], 'curl_median_ms': med['curl'],
                      'ratio': med['lazyblk'] / med['curl'], 'goal': 1.1,
                      'met': med['lazyblk'] / med['curl'] <= 1.1, 'raw': pr}
json.dump({'image': info, 'profiles': profiles}, open(E['JSON'], 'w'), indent=1)
mib = lambda b: '%.1f MiB' % (b / 2**20)
rows_md = []
for prof in sorted(profiles, key=lambda k: (k == 'none', k)):
    p = profiles[prof]
    lb = statistics.median(r['bytes'] for r in p['raw'] if r['side'] == 'lazyblk')
    cb = statistics.median(r['bytes'] for r in p['raw'] if r['side'] == 'curl')
    lr = statistics.median(r['requests'] for r in p['raw'] if r['side'] == 'lazyblk')
    rows_md.append('| %s | %.2f s (%s) | %.2f s (%s) | **%.2f×** (%s) | %s / %d | %s / %d | %s, %s, %d |' % (
        'linkem ' + prof if prof != 'none' else 'none (loopback)',
        p['lazyblk_median_ms'] / 1000, ', '.join('%.2f' % (x / 1000) for x in p['lazyblk_ms']),
        p['curl_median_ms'] / 1000, ', '.join('%.2f' % (x / 1000) for x in p['curl_ms']),
        p['ratio'], 'met' if p['met'] else 'NOT met', mib(lb), lr, mib(cb), info['chunks'],
        p['date'], p['git'], p['runs']))
md = f"""## coldread: cold full read of the disk through the link, lazyblk vs curl

Image: the coldstart image (`bench/lib/realistic_image.sh`), {info['chunks']} chunks,
{mib(info['chunk_stored_bytes'])} compressed; its disk read whole with `nbdcopy nbd+unix:///?socket=S null:` from
`lazyblk serve --remote` (empty cache, NBD) against `curl --parallel --parallel-max 16` of
every chunk URL, through the same link (nginx and linkem at nice -10: they stand for
another machine and the network); sides alternate; medians. Goal: lazyblk / curl ≤ 1.1×.
Method: header of `bench/coldread.sh`.

| link (rate/RTT) | lazyblk (runs) | curl (runs) | lazyblk / curl | lazyblk fetched / requests | curl fetched / requests | date, lazyblk, runs |
|---|---:|---:|---:|---:|---:|---|
""" + '\n'.join(rows_md) + '\n'
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'coldread'],
               input=md, text=True, check=True)
print(md)
PY
