# Sourced by bench/serve.sh (same image, servers and helpers): the `full` and `density` parts.
#
# full:    whole-disk sequential reads with nbdcopy (default options: it follows
#          base:allocation, so holes are not read on either side) to null:, lazyblk serve with
#          DEFAULT options (no --mem-cache) and read-only, vs qemu-nbd --read-only on the raw.
#          warm: fresh server, one untimed nbdcopy, then one timed nbdcopy (RUNS runs,
#                alternating; medians).
#          cold: fresh server, drop_caches, one timed nbdcopy (RUNS runs, alternating).
#          cold, empty plain tier (lazyblk only): STORE/plain removed first, then as cold.
# density: drop_caches; one lazyblk server, read fully; then drop_caches and N_SERVERS
#          servers of the same image, each read fully in turn, all still running when
#          measured. Host memory = sum of the servers' anonymous memory (smaps_rollup
#          Anonymous) + the page cache of the image's files (fincore over STORE/chunks,
#          STORE/plain and the layout); machine-wide Cached and MemTotal - MemFree growth
#          and the sums of RSS and PSS are reported too.
# Writes build/bench/serve-full.json and the `serve-full` section of docs/benchmarks.md.

JSON_FULL=$OUTDIR/serve-full.json

# start_lb_default SOCK: lazyblk serve read-only with default options (SRV_PID)
start_lb_default() {
  stop_srv
  "$LAZYBLK" serve "$LAYOUT" --store "$STORE" --read-only --nbd "unix:$1" \
    --stats-json "$LB_STATS" >"$WORK/srv.out" 2>"$WORK/srv.err" &
  SRV_PID=$!
  wait_sock "nbd+unix:///?socket=$1"
}
# nbdcopy_time URI: seconds of one whole-disk nbdcopy to null:
nbdcopy_time() {
  local t0 t1
  t0=$(date +%s.%N)
  nbdcopy "$1" null: || die "nbdcopy of $1 failed"
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
meminfo() { awk '/^(MemTotal|MemFree|Cached):/ { printf "%s=%s ", $1, $2 } END { print "" }' /proc/meminfo; }
# image_cached: KiB of the image's files (store chunks and plain copies, layout) in the page
# cache: the page cache this benchmark grows, unlike /proc/meminfo, not moved by other work
image_cached() {
  find "$STORE/chunks" "$STORE/plain" "$LAYOUT" -type f -print0 2>/dev/null |
    xargs -0 -r fincore -b -n -o RES 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s / 1024 }'
}

FULL_RES=$WORK/full.txt
: >"$FULL_RES"
if part full; then
  echo "== full: whole-disk nbdcopy, lazyblk with default options; $RUNS runs per server, alternating"
  full_run() {  # full_run lb|peer warm|cold|coldempty RUN
    local who=$1 mode=$2 i=$3 uri s
    if [ "$mode" = coldempty ]; then rm -rf "$STORE/plain"; fi
    if [ "$who" = lb ]; then start_lb_default "$LB_SOCK"; uri=$LB_URI; else start_peer ro; uri=$PEER_URI; fi
    if [ "$mode" = warm ]; then nbdcopy "$uri" null: || die "nbdcopy failed"; else drop_caches; fi
    s=$(nbdcopy_time "$uri")
    stop_srv
    [ "$who" = lb ] && cp "$LB_STATS" "$WORK/lb-stats-full-$mode-$i.json"
    echo "$who $mode $i $s" >>"$FULL_RES"
    printf '   %-8s %-9s run %s: %.3f s, %.1f MB/s of data\n' \
      "$([ "$who" = lb ] && echo lazyblk || echo qemu-nbd)" "$mode" "$i" "$s" \
      "$(echo "$DATA_BYTES / $s / 1000000" | bc -l)"
  }
  for mode in warm cold; do
    for i in $(seq "$RUNS"); do
      if [ $((i % 2)) -eq 1 ]; then full_run lb $mode "$i"; full_run peer $mode "$i"
      else full_run peer $mode "$i"; full_run lb $mode "$i"; fi
    done
  done
  for i in $(seq "$RUNS"); do full_run lb coldempty "$i"; done
  # leave the plain tier filled for what follows
  start_lb_default "$LB_SOCK"; nbdcopy "$LB_URI" null:; stop_srv
fi

DENS_RES=$WORK/density.txt
: >"$DENS_RES"
if part density; then
  echo "== density: 1 server, then $N_SERVERS servers of one image, each read fully"
  density_run() {  # density_run N
    local n=$1 before after anon=0 rss=0 pss=0 k
    stop_srv
    drop_caches; sleep 1
    before=$(meminfo)
    [ "$(image_cached)" -lt 4096 ] || echo "   (note: $(image_cached) KiB of the image still cached after drop_caches)"
    MANY_PIDS=()
    for k in $(seq "$n"); do
      "$LAZYBLK" serve "$LAYOUT" --store "$STORE" --read-only --nbd "unix:$WORK/d$k.sock" \
        >"$WORK/d$k.out" 2>"$WORK/d$k.err" &
      MANY_PIDS+=($!)
    done
    for k in $(seq "$n"); do
      SRV_PID=${MANY_PIDS[$((k - 1))]}
      wait_sock "nbd+unix:///?socket=$WORK/d$k.sock"
      nbdcopy "nbd+unix:///?socket=$WORK/d$k.sock" null: || die "nbdcopy of server $k failed"
    done
    SRV_PID=""
    sleep 1
    after="$(meminfo)Image:=$(image_cached) "
    before="${before}Image:=0 "
    for p in "${MANY_PIDS[@]}"; do
      read -r a r s < <(awk '/^Anonymous:/ { a = $2 } /^Rss:/ { r = $2 } /^Pss:/ { s = $2 }
                              END { print a, r, s }' "/proc/$p/smaps_rollup")
      anon=$((anon + a)); rss=$((rss + r)); pss=$((pss + s))
    done
    for p in "${MANY_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    MANY_PIDS=()
    echo "$n anon=$anon rss=$rss pss=$pss before: $before after: $after" >>"$DENS_RES"
    echo "   $n server(s): $(tail -1 "$DENS_RES")"
  }
  density_run 1
  density_run "$N_SERVERS"
fi

export WORK ROOT JSON_FULL MD LAZYBLK RUNS DISK_BYTES DATA_BYTES STORE_BYTES SRC_DESC N_SERVERS
python3 - "$FULL_RES" "$DENS_RES" <<'PY'
import datetime, json, os, re, statistics, subprocess, sys
E = os.environ
W = E['WORK']
full = {}
for line in open(sys.argv[1]):
    who, mode, i, s = line.split()
    full.setdefault(mode, {}).setdefault(who, []).append(float(s))
data = int(E['DATA_BYTES'])
def st(p):
    try: return json.load(open(os.path.join(W, p)))
    except Exception: return None
res = {'benchmark': 'serve-full', 'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
       'lazyblk_git': subprocess.run(['git', '-C', E['ROOT'], 'describe', '--always', '--dirty'], capture_output=True, text=True).stdout.strip(),
       'image': {'source': E['SRC_DESC'], 'disk_bytes': int(E['DISK_BYTES']), 'non_hole_bytes': data, 'store_bytes': int(E['STORE_BYTES'])},
       'full': {}, 'density': {}}
rows = []
label = {'warm': 'warm (second read, same server)', 'cold': 'cold (drop_caches, fresh server)',
         'coldempty': 'cold, plain tier empty (first read ever)'}
for mode in ('warm', 'cold', 'coldempty'):
    if mode not in full: continue
    r = {}
    for who in ('lb', 'peer'):
        if who in full[mode]:
            ss = full[mode][who]; med = statistics.median(ss)
            r[who] = {'seconds': ss, 'median_s': round(med, 3), 'mb_s': round(data / med / 1e6, 1)}
    if 'lb' in r and 'peer' in r:
        r['ratio'] = round(r['peer']['median_s'] / r['lb']['median_s'], 2)
    res['full'][mode] = r
    L = r.get('lb'); P = r.get('peer')
    f = lambda x: '%.3f s (%s MB/s)' % (x['median_s'], x['mb_s']) if x else '—'
    runs = lambda x: ' / '.join('%.3f' % v for v in x['seconds']) if x else '—'
    rows.append('| %s | %s | %s | %s | %s | %s |' % (label[mode], f(L), runs(L), f(P), runs(P),
                '**%.2f**' % r['ratio'] if 'ratio' in r else '—'))
res['lazyblk_stats'] = {'warm_run1': st('lb-stats-full-warm-1.json'), 'cold_run1': st('lb-stats-full-cold-1.json'),
                        'coldempty_run1': st('lb-stats-full-coldempty-1.json')}
dens = []
for line in open(sys.argv[2]):
    m = re.match(r'(\d+) anon=(\d+) rss=(\d+) pss=(\d+) before: (.*) after: (.*)', line.strip())
    n = int(m.group(1))
    kv = lambda t: {k.rstrip(':'): int(v) for k, v in re.findall(r'(\w+:)=(\d+)', t)}
    b, a = kv(m.group(5)), kv(m.group(6))
    d = {'servers': n, 'anon_kib': int(m.group(2)), 'rss_kib': int(m.group(3)), 'pss_kib': int(m.group(4)),
         'cached_growth_kib': a['Cached'] - b['Cached'], 'image_cached_kib': a['Image'],
         'used_growth_kib': (a['MemTotal'] - a['MemFree']) - (b['MemTotal'] - b['MemFree'])}
    d['host_kib'] = d['anon_kib'] + d['image_cached_kib']
    dens.append(d)
if len(dens) == 2:
    res['density'] = {'one': dens[0], 'many': dens[1], 'ratio_host': round(dens[1]['host_kib'] / dens[0]['host_kib'], 2),
                      'ratio_used': round(dens[1]['used_growth_kib'] / max(1, dens[0]['used_growth_kib']), 2)}
json.dump(res, open(E['JSON_FULL'], 'w'), indent=2)
M = lambda k: '%.1f' % (k / 1024)
drows = ['| %d | %s | %s | %s | %s | %s | %s | %s |' % (d['servers'], M(d['anon_kib']), M(d['image_cached_kib']),
         M(d['host_kib']), M(d['cached_growth_kib']), M(d['used_growth_kib']), M(d['rss_kib']), M(d['pss_kib'])) for d in dens]
sec = f"""### serve: whole-disk reads with default options, and density — {res['date'][:10]}

Same image as above (`{E['SRC_DESC']}`: {int(E['DISK_BYTES']):,}-byte disk, {data:,} bytes not holes,
store {int(E['STORE_BYTES']):,} bytes), written by `bench/serve.sh` (`ONLY=full,density`), lazyblk `{res['lazyblk_git']}`.
`lazyblk serve IMG.layout --store STORE --read-only --nbd unix:SOCK` (default options: 256 MiB
memory cache) vs `qemu-nbd --read-only --shared=8 -f raw --cache=writeback` on the exported raw; client
`nbdcopy URI null:` (default options; it reads only what base:allocation says is data, on both sides).
Seconds per whole-disk copy, medians of {E['RUNS']} runs, alternating; MB/s = non-hole bytes / time;
ratio = qemu-nbd time / lazyblk time (> 1: lazyblk faster).

| read | lazyblk | runs (s) | qemu-nbd | runs (s) | ratio |
|---|---:|---|---:|---|---:|
{chr(10).join(rows)}

Density: `drop_caches`, then K read-only servers of the image (default options), each read fully with
nbdcopy in turn, measured with all K still running. **host** = Σ anonymous memory of the servers
(smaps_rollup `Anonymous`) + the page cache holding the image's files (store chunks, plain copies,
layout: `fincore`), which every server shares. Machine-wide figures are given too, but other work on
the machine moves them: growth of `Cached` in /proc/meminfo, and of MemTotal − MemFree (everything).
Σ RSS / Σ PSS: of the servers (lazyblk reads plain copies with pread, so they map no page cache).

| servers | Σ anon MiB | image page cache MiB | **host MiB** | Cached growth MiB | used growth MiB | Σ RSS MiB | Σ PSS MiB |
|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(drows)}

{('host memory, ' + str(dens[1]['servers']) + ' servers / 1 server: **%.2f** (used growth: %.2f)' % (res['density']['ratio_host'], res['density']['ratio_used'])) if len(dens) == 2 else ''}

- lazyblk statistics after the first warm timed read: `{json.dumps(res['lazyblk_stats']['warm_run1'], separators=(',', ':'))[:900] if res['lazyblk_stats']['warm_run1'] else ''}`
"""
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), os.path.join(E['ROOT'], 'docs/benchmarks.md'), 'serve-full'],
               input=sec, text=True, check=True)
print(sec)
PY
echo "== wrote ${JSON_FULL#"$ROOT"/} and the serve-full section of docs/benchmarks.md"
