#!/bin/bash
# Benchmark loading a 1,000,000-entry manifest (target: under 1 s) against the named peer
# `tar -tvf` listing a tar that holds the same 1,000,000 entries.
#
# Usage: bench/manifest.sh            (LAZYBLK: the binary; RUNS: timed runs, default 5)
#
# Method: python's tarfile writes a GNU tar of 1,000 directories x 1,000 files, each file
# 16 bytes (so every entry has a chunk piece), cached in build/bench/m1M.tar. lazyblk
# imports it once (untimed). Timed: `lazyblk manifest show --summary` (read, sha256 of
# the whole file, full validation of every entry, one pass to count) and `tar -tvf`
# (parse every header, print every entry), both with a warm page cache, alternating.
# Writes build/bench/manifest.json and a section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-5}
OUT=$ROOT/build/bench
TAR=$OUT/m1M.tar
mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/manifest-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
[ -x "$LAZYBLK" ] || { echo "bench/manifest: build first (make)" >&2; exit 1; }

if [ ! -s "$TAR" ]; then
  echo "== writing $TAR (1,000,000 entries; about a minute, once)"
  python3 - "$TAR.tmp" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], 'w', format=tarfile.GNU_FORMAT) as t:
    for d in range(1000):
        di = tarfile.TarInfo('d%04d' % d); di.type = tarfile.DIRTYPE; di.mode = 0o755
        di.mtime = 1700000000; t.addfile(di)
        for f in range(1000):
            data = b'%08d%08d' % (d, f)
            fi = tarfile.TarInfo('d%04d/file-%06d.txt' % (d, f)); fi.size = len(data)
            fi.mode = 0o644; fi.mtime = 1700000000 + f
            t.addfile(fi, io.BytesIO(data))
PY
  mv "$TAR.tmp" "$TAR"
fi

echo "== import (untimed)"
"$LAZYBLK" import "$TAR" --store "$WORK/store" -o "$WORK/m.manifest"
MSIZE=$(stat -c %s "$WORK/m.manifest")
ENTRIES=$("$LAZYBLK" manifest show --summary "$WORK/m.manifest" | awk '/^entries/ {print $2}')
tar -tvf "$TAR" >/dev/null # warm

t() { local s=$EPOCHREALTIME; "$@" >/dev/null; python3 -c "print(round($EPOCHREALTIME - $s, 4))"; }
LB=(); PEER=()
for i in $(seq "$RUNS"); do
  LB+=("$(t "$LAZYBLK" manifest show --summary "$WORK/m.manifest")")
  PEER+=("$(t tar -tvf "$TAR")")
done
RSS=$( { /usr/bin/time -f '%M' "$LAZYBLK" manifest show --summary "$WORK/m.manifest" >/dev/null; } 2>&1 | tail -1 || echo 0)

python3 - "$ROOT" "$ENTRIES" "$MSIZE" "$(stat -c %s "$TAR")" "$RSS" "${LB[*]}" "${PEER[*]}" <<'PY'
import json, os, statistics, subprocess, sys, time
root, entries, msize, tsize, rss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
lb = [float(x) for x in sys.argv[6].split()]
peer = [float(x) for x in sys.argv[7].split()]
ml, mp = statistics.median(lb), statistics.median(peer)
rev = subprocess.run(['git', '-C', root, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
res = {'date': time.strftime('%Y-%m-%d'), 'entries': entries, 'manifest_bytes': msize,
       'tar_bytes': tsize, 'lazyblk_load_s': lb, 'peer_tar_tvf_s': peer,
       'median_lazyblk_s': ml, 'median_peer_s': mp, 'max_rss_kib': rss, 'git': rev,
       'target_s': 1.0, 'meets_target': ml < 1.0}
json.dump(res, open(os.path.join(root, 'build/bench/manifest.json'), 'w'), indent=1)
sec = f"""## manifest load: 1,000,000 entries — {res['date']}

{entries:,} entries (1,000 dirs x 1,000 files of 16 bytes); manifest {msize:,} bytes, the same tree
as a GNU tar {tsize:,} bytes. lazyblk `{rev}`, {os.cpu_count()} CPUs, warm page cache, {len(lb)} runs each.

| | median s | runs s |
|---|---:|---|
| `lazyblk manifest show --summary` (read + sha256 + validate every entry) | {ml:.3f} | {' / '.join('%.3f' % x for x in lb)} |
| `tar -tvf` of the same tree (peer) | {mp:.3f} | {' / '.join('%.3f' % x for x in peer)} |

- target: load under 1 s — **{'met' if ml < 1 else 'NOT met'}** ({ml:.3f} s); {mp / ml:.1f}x faster than the peer
- peak memory of the lazyblk run: {int(rss) // 1024 if rss.isdigit() else '?'} MiB (the manifest is read whole)
"""
p = subprocess.run([sys.executable, os.path.join(root, 'bench/lib/mdsection.py'),
                    os.path.join(root, 'docs/benchmarks.md'), 'manifest-load'], input=sec, text=True)
print(sec)
PY
