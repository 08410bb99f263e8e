#!/bin/bash
# The same benchmarks, in the same run, for two lazyblk binaries: before and after a change
# that should not move them (a restructuring). Runs bench/serve.sh (parts fio and full:
# lazyblk against qemu-nbd over NBD, warm fio jobs, cold and warm whole-disk reads) and
# bench/vmm.sh (the built-in VMM's start and stop against QEMU microvm) once with BEFORE and
# once with AFTER, in the order BEFORE AFTER, and sets the medians side by side. Each
# binary's ratio is against the peer measured in its own run, so a slower or faster machine
# moves both; compare the ratios.
#
# Usage: bench/before_after.sh BEFORE AFTER [LABEL]
#   BEFORE, AFTER  lazyblk binaries (e.g. a build of the commit before the change, and
#                  build/lazyblk); LABEL names the change in the section (default: their
#                  `git describe` if they are this tree's)
# Environment: RUNS (serve.sh runs per server, default 3), VMM_RUNS (default 10), and
# whatever bench/serve.sh and bench/vmm.sh take.
#
# Writes build/bench/before-after/{before,after}-{serve,serve-full,vmm}.json and the
# `before-after` section of docs/benchmarks.md; every other section of it is left as it was
# (the partial serve.sh runs would otherwise rewrite the `serve` section without its other
# parts).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
die() { echo "bench/before_after: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: bench/before_after.sh BEFORE AFTER [LABEL]"
BEFORE=$(realpath "$1") AFTER=$(realpath "$2") LABEL=${3:-}
for b in "$BEFORE" "$AFTER"; do [ -x "$b" ] || die "$b is not an executable"; done
OUT=$ROOT/build/bench/before-after
mkdir -p "$OUT"
cp docs/benchmarks.md "$OUT/benchmarks.md.orig"

for side in before after; do
  bin=$BEFORE
  [ $side = after ] && bin=$AFTER
  echo "bench/before_after: $side: $bin" >&2
  LAZYBLK=$bin ONLY=fio,full RUNS=${RUNS:-3} bash bench/serve.sh
  cp build/bench/serve.json "$OUT/$side-serve.json"
  cp build/bench/serve-full.json "$OUT/$side-serve-full.json"
  LAZYBLK=$bin RUNS=${VMM_RUNS:-10} VMM_LINUX=0 bash bench/vmm.sh
  cp build/bench/vmm.json "$OUT/$side-vmm.json"
done

cp "$OUT/benchmarks.md.orig" docs/benchmarks.md
export OUT LABEL BEFORE AFTER ROOT
python3 - <<'PY' | python3 "$ROOT/bench/lib/mdsection.py" "$ROOT/docs/benchmarks.md" before-after
import datetime, json, os
E = os.environ
O = E['OUT']
def load(side, name):
    return json.load(open(os.path.join(O, '%s-%s.json' % (side, name))))
rows = []
def row(what, unit, b, a, peer_b=None, peer_a=None, higher_better=True):
    rb = '' if peer_b is None else ' (%.2f×)' % (b / peer_b if higher_better else peer_b / b)
    ra = '' if peer_a is None else ' (%.2f×)' % (a / peer_a if higher_better else peer_a / a)
    rows.append('| %s | %s%s | %s%s |' % (what, fmt(b, unit), rb, fmt(a, unit), ra))
def fmt(v, unit):
    return ('%.3f ' % v if v < 10 else '%.1f ' % v if v < 100 else '%.0f ' % v) + unit
sb, sa = load('before', 'serve'), load('after', 'serve')
for n, unit in (('seqread', 'MB/s'), ('randread', 'MB/s'), ('randwrite', 'MB/s')):
    b, a = sb['warm'][n], sa['warm'][n]
    row('serve, warm fio %s (vs qemu-nbd)' % n, unit, b['lazyblk']['median_mb_s'],
        a['lazyblk']['median_mb_s'], b['qemu_nbd']['median_mb_s'], a['qemu_nbd']['median_mb_s'])
for n in ('colddisk', 'coldregion'):
    b, a = sb['cold'][n], sa['cold'][n]
    row('serve, cold fio %s (vs qemu-nbd)' % n, 'MB/s', b['lazyblk']['median_mb_s'],
        a['lazyblk']['median_mb_s'], b['qemu_nbd']['median_mb_s'], a['qemu_nbd']['median_mb_s'])
fb, fa = load('before', 'serve-full'), load('after', 'serve-full')
for n in ('warm', 'cold'):
    b, a = fb['full'][n], fa['full'][n]
    row('serve, nbdcopy whole disk, %s (vs qemu-nbd)' % n, 's', b['lb']['median_s'],
        a['lb']['median_s'], b['peer']['median_s'], a['peer']['median_s'], higher_better=False)
vb, va = load('before', 'vmm')['results'], load('after', 'vmm')['results']
lb_key = [k for k in vb if 'lazyblk' in k][0]
peer_key = [k for k in vb if k != lb_key][0]
for n in ('start_ms', 'stop_ms'):
    row('vmm, %s (vs QEMU microvm)' % n.replace('_ms', ''), 'ms', vb[lb_key][n], va[lb_key][n],
        vb[peer_key][n], va[peer_key][n], higher_better=False)
label = E['LABEL'] or 'before → after'
print('''## before-after: %s

The same benchmarks in one run for two binaries (`bench/before_after.sh`): `bench/serve.sh`
(parts fio and full) and `bench/vmm.sh`, BEFORE first, then AFTER; in parentheses each one's
ratio to the peer measured in its own run (higher is better for lazyblk). One run each, on a
shared machine: a difference smaller than the spread of the runs in the `serve` and `vmm`
sections is noise. Date %s.

| measurement | before | after |
|---|---:|---:|
%s
''' % (label, datetime.date.today().isoformat(), '\n'.join(rows)))
PY
echo "bench/before_after: results in $OUT and docs/benchmarks.md (before-after)" >&2
