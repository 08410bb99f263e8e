#!/bin/bash
# The same benchmarks, in the same session, for two lazyblk binaries: before and after a
# change that should not move them (a restructuring). Run by run, alternating (BEFORE AFTER
# BEFORE AFTER ..., RUNS passes), each pass measures with each binary:
#   serve   bench/serve.sh parts fio and full with RUNS=1: lazyblk against qemu-nbd over NBD,
#           warm fio jobs (seqread, randread, randwrite), cold fio reads (whole disk, data
#           region) after drop_caches, nbdcopy of the whole disk warm and cold
#   boot    a Linux guest boot over vhost-user-blk: QEMU (TCG) boots Debian's cloud kernel
#           with the binary's own `lazyblk initramfs`, its root disk an image served by
#           `lazyblk serve --vhost-user` (fresh overlay, page cache dropped first); the guest
#           reads every file of the image (BOOT_SRC) and powers off. Timed: QEMU's start to
#           its exit (no peer)
#   mkfs    bench/mkfs.sh with RUNS_A=1 RUNS_B=1 SKIP_1M=1: mkfs of a 200,000-entry
#           manifest, and import + mkfs of MKFS_DIR against `mke2fs -d`
#   import  bench/import.sh with RUNS=1: `lazyblk import IMPORT_DIR` against tar | zstd
# and sets, for each figure, the medians of both sides, the range of their runs and a
# verdict by the noise rule below. Where the script measures a peer in the same run, the
# verdict is on the ratio to it (a slower or faster machine moves both), and the figure
# itself is shown beside it.
#
# Noise rule: AFTER is "worse" only when its median is worse than BEFORE's median by more
# than NOISE_PCT % (default 5) AND lies outside the range of BEFORE's runs (below its
# smallest for a rate, above its largest for a time); "better" the same the other way;
# anything else is "same (noise)". Why both: with 5 runs a side drawn from one distribution,
# AFTER's median falls beyond BEFORE's extreme on a given side with probability 1/12
# (the 3 largest of 10 values all AFTER's), so the range test alone would call about one
# figure in twelve worse by chance; the NOISE_PCT floor stops that for differences too small
# to matter on a shared machine, and the range test stops a NOISE_PCT difference that the
# runs' own spread explains. With RUNS=1 the range is one run and only NOISE_PCT decides.
#
# Usage: bench/before_after.sh BEFORE AFTER [LABEL]
#   BEFORE, AFTER  lazyblk binaries (e.g. a build of the commit before the change, and
#                  build/lazyblk); LABEL names the change in the section (default
#                  "before → after")
# Environment:
#   RUNS        passes (default 5: 5 runs of each binary)
#   PARTS       comma-separated parts (default serve,boot,mkfs,import)
#   NOISE_PCT   the rule's floor in percent (default 5)
#   SERVE_SRC   bench/serve.sh's SRC (default: its own); RUNTIME etc. as serve.sh takes them
#   BOOT_SRC    the tree the guest's disk holds and reads (default /usr/share/doc)
#   MKFS_DIR    bench/mkfs.sh's DIR (default /usr/share); IMPORT_DIR bench/import.sh's
#               (default /usr/share)
# The binaries must read the layouts they write (each side's images are its own).
#
# Writes build/bench/before-after/runs/SIDE-N-PART.json (every run), before-after.json
# (the figures) and the `before-after` section of docs/benchmarks.md; every other section
# of it is left as it was (the scripts it runs would otherwise rewrite theirs with one run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
die() { echo "bench/before_after: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: bench/before_after.sh BEFORE AFTER [LABEL]"
BEFORE=$(realpath "$1") AFTER=$(realpath "$2") LABEL=${3:-}
for b in "$BEFORE" "$AFTER"; do [ -x "$b" ] || die "$b is not an executable"; done
RUNS=${RUNS:-5} PARTS=${PARTS:-serve,boot,mkfs,import} NOISE_PCT=${NOISE_PCT:-5}
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for p in ${PARTS//,/ }; do
  case $p in serve|boot|mkfs|import) ;; *) die "PARTS: unknown part '$p'";; esac
done
has_part() { [[ ",$PARTS," == *",$1,"* ]]; }
OUT=$ROOT/build/bench/before-after
rm -rf "$OUT/runs"
mkdir -p "$OUT/runs"
cp docs/benchmarks.md "$OUT/benchmarks.md.orig"
BOOT_PID=
cleanup() {
  if [ -n "$BOOT_PID" ]; then kill -9 "$BOOT_PID" 2>/dev/null || true; fi
  cp "$OUT/benchmarks.md.orig" "$ROOT/docs/benchmarks.md"
  rm -rf "${OUT:?}/boot"
}
trap cleanup EXIT

# ---- boot: a Linux guest over vhost-user-blk --------------------------------------------
boot_prepare() { # boot_prepare SIDE BIN: the side's image and initramfs (untimed)
  local side=$1 bin=$2 d=$OUT/boot/$1
  mkdir -p "$d/root/bin" "$d/root/data"
  cp "$BUSYBOX" "$d/root/bin/busybox"
  for a in sh find cat xargs echo sync; do ln -sf busybox "$d/root/bin/$a"; done
  cp -a "$BOOT_SRC/." "$d/root/data/"
  "$bin" -q import "$d/root" --store "$d/store" -o "$d/img.manifest" >/dev/null
  "$bin" -q mkfs "$d/img.manifest" -o "$d/img.layout" >/dev/null
  # the command's exit status is the initramfs' "lazyblk-exit: N" line (a line the guest
  # echoes can be lost on the console: 1 boot in 3 here)
  "$bin" initramfs --kernel "$KERNEL" --cache-dir "$d/icache" -o "$d/initrd" -- \
    /bin/sh -c 'find /data -type f -exec cat {} + >/dev/null' >/dev/null
  echo "bench/before_after: boot: $side image of $BOOT_SRC ($(du -sh "$d/root" | cut -f1))" >&2
}
boot_once() { # boot_once SIDE BIN JSON
  local side=$1 bin=$2 json=$3 d=$OUT/boot/$1 sock=$OUT/boot/$1/vu.sock t0 t1 rc=0
  rm -rf "$d/ov" "$d/ov.state" "$sock"
  "$bin" serve "$d/img.layout" --store "$d/store" --overlay "$d/ov" --vhost-user "$sock" \
    >"$d/serve.out" 2>"$d/serve.err" &
  BOOT_PID=$!
  for _ in $(seq 1 600); do [ -S "$sock" ] && break; kill -0 "$BOOT_PID" || break; sleep 0.1; done
  [ -S "$sock" ] || { cat "$d/serve.err" >&2; die "boot: $side: no socket $sock"; }
  sync; echo 3 >/proc/sys/vm/drop_caches
  t0=$EPOCHREALTIME
  timeout 900 qemu-system-x86_64 -M pc -accel tcg -m 512M -smp 2 \
    -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
    -chardev "socket,id=c0,path=$sock" -device vhost-user-blk-pci,chardev=c0 \
    -kernel "$KERNEL" -initrd "$d/initrd" \
    -append "console=ttyS0 reboot=k panic=-1 no_timer_check quiet" \
    -nographic -serial stdio -nodefaults -no-reboot </dev/null >"$d/qemu.log" 2>&1 || rc=$?
  t1=$EPOCHREALTIME
  kill -TERM "$BOOT_PID"; wait "$BOOT_PID" || true; BOOT_PID=
  if [ $rc -ne 0 ] || ! tr -d '\r' <"$d/qemu.log" | grep -q "lazyblk-exit: 0\$" ||
     grep -Eq "I/O error|EXT4-fs error" "$d/qemu.log"; then
    tail -20 "$d/qemu.log" >&2
    die "boot: $side: the guest did not read its disk and power off (QEMU exit $rc)"
  fi
  python3 -c 'import json, sys; json.dump({"boot_s": float(sys.argv[2]) - float(sys.argv[1])}, open(sys.argv[3], "w"))' \
    "$t0" "$t1" "$json"
}
if has_part boot; then
  command -v qemu-system-x86_64 >/dev/null || die "boot: qemu-system-x86_64 not found"
  [ "$(id -u)" = 0 ] || die "boot: must run as root (drop_caches)"
  BUSYBOX=/bin/busybox
  if [ ! -x "$BUSYBOX" ] || readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP; then
    die "boot: $BUSYBOX is not a static busybox (busybox-static)"
  fi
  BOOT_SRC=$(realpath "${BOOT_SRC:-/usr/share/doc}")
  . "$ROOT/scripts/lib/kernel.sh"
  KC=$(kernel_cache) || die "boot: no writable kernel cache directory"
  KERNEL=$(fetch_kernel "$KC") || die "boot: cannot fetch linux-image-cloud-amd64"
  rm -rf "${OUT:?}/boot"
  boot_prepare before "$BEFORE"
  boot_prepare after "$AFTER"
fi

# ---- the passes ---------------------------------------------------------------------------
run_side() { # run_side SIDE BIN N
  local side=$1 bin=$2 n=$3 r=$OUT/runs/$1-$3
  echo "bench/before_after: pass $n/$RUNS, $side: $bin" >&2
  if has_part serve; then
    LAZYBLK=$bin ONLY=fio,full RUNS=1 bash bench/serve.sh ${SERVE_SRC:+"$SERVE_SRC"}
    cp build/bench/serve.json "$r-serve.json"
    cp build/bench/serve-full.json "$r-serve-full.json"
  fi
  has_part boot && boot_once "$side" "$bin" "$r-boot.json"
  if has_part mkfs; then
    LAZYBLK=$bin RUNS_A=1 RUNS_B=1 SKIP_1M=1 bash bench/mkfs.sh "${MKFS_DIR:-/usr/share}"
    cp build/bench/mkfs.json "$r-mkfs.json"
  fi
  if has_part import; then
    LAZYBLK=$bin RUNS=1 bash bench/import.sh "${IMPORT_DIR:-/usr/share}"
    cp build/bench/import.json "$r-import.json"
  fi
  return 0
}
START=$EPOCHREALTIME
for n in $(seq 1 "$RUNS"); do
  run_side before "$BEFORE" "$n"
  run_side after "$AFTER" "$n"
done
ELAPSED=$(python3 -c 'import sys; print(round(float(sys.argv[2]) - float(sys.argv[1])))' "$START" "$EPOCHREALTIME")

cp "$OUT/benchmarks.md.orig" docs/benchmarks.md
export OUT LABEL RUNS PARTS NOISE_PCT ELAPSED
python3 - <<'PY' | python3 "$ROOT/bench/lib/mdsection.py" "$ROOT/docs/benchmarks.md" before-after
import datetime, json, os, statistics
E = os.environ
O, RUNS, PCT = E['OUT'], int(E['RUNS']), float(E['NOISE_PCT'])
parts = E['PARTS'].split(',')
def load(side, n, name):
    return json.load(open(os.path.join(O, 'runs', '%s-%d-%s.json' % (side, n, name))))
def series(name, get):
    """[(lazyblk, peer or None)] per run for each side."""
    return {s: [get(load(s, n, name)) for n in range(1, RUNS + 1)] for s in ('before', 'after')}
figs = []  # (part, what, unit, higher_better, {side: [(v, peer)]}, peer name)
if 'serve' in parts:
    for n, unit in (('seqread', 'MB/s'), ('randread', 'MB/s'), ('randwrite', 'MB/s')):
        figs.append(('serve', 'warm fio %s' % n, unit, True, series('serve', lambda j, n=n: (
            j['warm'][n]['lazyblk']['median_mb_s'], j['warm'][n]['qemu_nbd']['median_mb_s'])),
            'qemu-nbd'))
    for n in ('colddisk', 'coldregion'):
        figs.append(('serve', 'cold fio %s' % n, 'MB/s', True, series('serve', lambda j, n=n: (
            j['cold'][n]['lazyblk']['median_mb_s'], j['cold'][n]['qemu_nbd']['median_mb_s'])),
            'qemu-nbd'))
    for n in ('warm', 'cold'):
        figs.append(('serve', 'nbdcopy whole disk, %s' % n, 's', False, series('serve-full',
            lambda j, n=n: (j['full'][n]['lb']['median_s'], j['full'][n]['peer']['median_s'])),
            'qemu-nbd'))
if 'boot' in parts:
    figs.append(('boot', 'Linux guest boot + read every file, vhost-user-blk', 's', False,
                 series('boot', lambda j: (j['boot_s'], None)), None))
if 'mkfs' in parts:
    figs.append(('mkfs', 'mkfs, 200,000-entry manifest', 's', False, series('mkfs', lambda j: (
        list(j['throughput'].values())[0]['median_wall_s'], None)), None))
    figs.append(('mkfs', 'import + mkfs of a tree', 's', False, series('mkfs', lambda j: (
        j['bootable_image']['lazyblk']['median_total_s'],
        j['bootable_image']['peer']['median_wall_s'])), 'mke2fs -d'))
if 'import' in parts:
    figs.append(('import', 'import of a tree', 's', False, series('import', lambda j: (
        j['lazyblk']['median_wall_s'], j['peer']['median_wall_s'])), 'tar \\| zstd'))

def score(v, peer, higher):
    """What the verdict is on: the ratio to the peer (higher is better), else the figure."""
    if peer is None:
        return v
    return v / peer if higher else peer / v
def verdict(b, a, higher):
    """b, a: the runs' scores; higher: whether a higher score is better."""
    mb, ma = statistics.median(b), statistics.median(a)
    worse = (ma < mb * (1 - PCT / 100) and ma < min(b)) if higher else \
            (ma > mb * (1 + PCT / 100) and ma > max(b))
    better = (ma > mb * (1 + PCT / 100) and ma > max(b)) if higher else \
             (ma < mb * (1 - PCT / 100) and ma < min(b))
    return 'worse' if worse else 'better' if better else 'same (noise)'
def fmt(v):
    return '%.3f' % v if v < 10 else '%.1f' % v if v < 100 else '%.0f' % v
rows, res = [], []
for part, what, unit, higher, s, peer in figs:
    sc = {k: [score(x, p, higher) for x, p in s[k]] for k in s}
    v = {k: [x for x, _ in s[k]] for k in s}
    on_ratio = peer is not None
    d = verdict(sc['before'], sc['after'], True if on_ratio else higher)
    med = {k: statistics.median(v[k]) for k in v}
    rmed = {k: statistics.median(sc[k]) for k in sc}
    def cell(k):
        c = '%s %s [%s–%s]' % (fmt(med[k]), unit, fmt(min(v[k])), fmt(max(v[k])))
        if on_ratio:
            c += ' · %.2f× [%.2f–%.2f]' % (rmed[k], min(sc[k]), max(sc[k]))
        return c
    rows.append('| %s | %s%s | %s | %s | %s |' % (part, what, ' (vs %s)' % peer if peer else '',
                cell('before'), cell('after'), '**%s**' % d if d != 'same (noise)' else d))
    res.append({'part': part, 'what': what, 'unit': unit, 'higher_better': higher, 'peer': peer,
                'runs': s, 'verdict': d})
json.dump({'runs': RUNS, 'noise_pct': PCT, 'elapsed_s': int(E['ELAPSED']), 'figures': res},
          open(os.path.join(O, 'before-after.json'), 'w'), indent=1)
label = E['LABEL'] or 'before → after'
print('''## before-after: %s

The same benchmarks in one session for two binaries (`bench/before_after.sh`), run by run
alternating BEFORE AFTER, %d run%s each (%d s in all): `bench/serve.sh` parts fio and full,
a Linux guest booting over vhost-user-blk and reading every file of its disk (QEMU TCG),
`bench/mkfs.sh` and `bench/import.sh`, each with one run per pass. Each cell: the median of
the runs [their range]; where the script measures a peer in the same run, then the median
ratio to it (higher is better for lazyblk) [its range], and the verdict is on that ratio.
**Noise rule**: AFTER is worse (better) only when its median is worse (better) than
BEFORE's by more than %g %% *and* outside the range of BEFORE's runs; with 5 runs a side
the range test alone would flag one figure in twelve by chance, the %g %% floor keeps
differences too small to matter on a shared machine out. Date %s.

| part | measurement | before | after | verdict |
|---|---|---:|---:|---|
%s
''' % (label, RUNS, '' if RUNS == 1 else 's', int(E['ELAPSED']), PCT, PCT,
       datetime.date.today().isoformat(), '\n'.join(rows)))
PY
cp docs/benchmarks.md "$OUT/benchmarks.md.new"
trap - EXIT
rm -rf "${OUT:?}/boot"
echo "bench/before_after: $RUNS passes in ${ELAPSED}s; results in $OUT and docs/benchmarks.md (before-after)" >&2
