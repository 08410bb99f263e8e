#!/bin/bash
# Benchmark `lazyblk import DIR` against the named peer `tar -c | zstd -T0` on the same tree.
#
# Usage: bench/import.sh [DIR]        (default DIR=/usr/share; should hold >= 50k files)
# Environment:
#   LAZYBLK   the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS      timed runs per tool (default 5; the median wall time is reported)
#   ZSTD_LEVEL  zstd level of the peer (default 3, zstd's default)
#   LAZYBLK_ARGS  extra arguments for lazyblk import (default none)
#
# Method: one untimed `tar -cf - DIR | cat >/dev/null` warms the page cache; then the two
# tools run alternately (A B, B A, A B, ...) RUNS times each, every run into a fresh
# output (an empty store for lazyblk, a new .tar.zst for the peer) in a scratch directory
# under build/bench on the same filesystem.  lazyblk makes its chunks durable as part of
# the import (syncfs before chunks become visible); the peer's output is left in the
# page cache, which favours the peer.  `sync` runs, untimed, between runs.
#
# Writes: build/bench/import.json (machine-readable) and a section of docs/benchmarks.md
# (an older section for the same benchmark and DIR is replaced).  Scratch data is removed.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
DIR=$(realpath "${1:-/usr/share}")
RUNS=${RUNS:-5}
ZSTD_LEVEL=${ZSTD_LEVEL:-3}
read -r -a LB_EXTRA <<< "${LAZYBLK_ARGS:-}"
OUTDIR=$ROOT/build/bench
JSON=$OUTDIR/import.json
MD=$ROOT/docs/benchmarks.md
PY=$(command -v /usr/bin/python3 || command -v python3)

die() { echo "bench/import: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[ -d "$DIR" ] || die "$DIR is not a directory"
for t in tar zstd; do command -v $t >/dev/null || die "$t not found"; done
[ -n "$PY" ] || die "python3 not found"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"

mkdir -p "$OUTDIR"
WORK=$(mktemp -d "$OUTDIR/import-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
STORE=$WORK/store
MAN=$WORK/bench.manifest
PEER_OUT=$WORK/peer.tar.zst

TIME=""
[ -x /usr/bin/time ] && TIME=/usr/bin/time

# ---------------------------------------------------------------------------
echo "== tree: $DIR"
read -r ENTRIES FILES DIRS SYMLINKS BYTES < <(find "$DIR" -printf '%y %s\n' | awk '
  { n++; if ($1 == "f") { f++; b += $2 } else if ($1 == "d") d++; else if ($1 == "l") l++ }
  END { printf "%d %d %d %d %.0f\n", n, f, d, l, b }')
echo "   $ENTRIES entries ($FILES regular files, $DIRS dirs, $SYMLINKS symlinks), $BYTES bytes in regular files"
[ "$ENTRIES" -ge 50000 ] || echo "   warning: fewer than 50000 entries; per-file overheads will be under-represented" >&2

echo "== warming the page cache (untimed tar of $DIR)"
tar -C "$DIR" -cf - . 2>/dev/null | cat >/dev/null || true

LB_CMD=("$LAZYBLK" import "$DIR" --store "$STORE" -o "$MAN" "${LB_EXTRA[@]}")
# shellcheck disable=SC2089  # a command line for bash -c, quotes intended
PEER_SH="tar -C '$DIR' -cf - . | zstd -T0 -$ZSTD_LEVEL -q -o '$PEER_OUT'"

# run_timed NAME CMD... : runs CMD, appends "wall user sys maxrss_kib" to $WORK/NAME.times
run_timed() {
  local name=$1; shift
  local t0 t1 tf=$WORK/time.out
  rm -f "$tf"
  t0=$(date +%s.%N)
  if [ -n "$TIME" ]; then
    "$TIME" -f '%U %S %M' -o "$tf" "$@" > "$WORK/$name.stdout" 2> "$WORK/$name.stderr" \
      || { cat "$WORK/$name.stderr" >&2; die "$name failed: $*"; }
  else
    "$@" > "$WORK/$name.stdout" 2> "$WORK/$name.stderr" \
      || { cat "$WORK/$name.stderr" >&2; die "$name failed: $*"; }
  fi
  t1=$(date +%s.%N)
  local usr=-1 sys=-1 rss=-1
  [ -s "$tf" ] && read -r usr sys rss < <(tail -1 "$tf")
  awk -v a="$t0" -v b="$t1" -v u="$usr" -v s="$sys" -v r="$rss" \
    'BEGIN { printf "%.3f %s %s %s\n", b - a, u, s, r }' >> "$WORK/$name.times"
  printf '   %-8s run: %6.2f s\n' "$name" "$(tail -1 "$WORK/$name.times" | cut -d' ' -f1)"
}
run_lazyblk() { rm -rf "$STORE" "$MAN"; sync; run_timed lazyblk "${LB_CMD[@]}"; }
run_peer()    { rm -f "$PEER_OUT"; sync; run_timed peer bash -o pipefail -c "$PEER_SH"; }

LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== $RUNS timed runs each, alternating (load average before: $LOADAVG)"
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) -eq 1 ]; then run_lazyblk; run_peer; else run_peer; run_lazyblk; fi
done
sed 's/^/   lazyblk said: /' "$WORK/lazyblk.stdout"

# Outputs of the last run of each tool are still there.
CAS_STATS=$("$LAZYBLK" cas stats --store "$STORE")
STORE_DU=$(du -s --apparent-size -B1 "$STORE" | cut -f1)
STORE_FILES=$(find "$STORE" -type f | wc -l)
MAN_BYTES=$(stat -c %s "$MAN")
PEER_BYTES=$(stat -c %s "$PEER_OUT")

# ---------------------------------------------------------------------------
LB_CMD_STR="${LB_CMD[*]}"
LB_SUMMARY=$(sed "s|$WORK/|\$WORK/|g" "$WORK/lazyblk.stdout" | paste -sd'|' | sed 's/|/; /g')
NPROC=$(nproc)
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEM_KIB=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)
KERNEL=$(uname -r)
FSTYPE=$(findmnt -no FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
ZSTD_VER=$(zstd --version | grep -o 'v[0-9.]*' | sed -n 1p)
TAR_VER=$(tar --version | sed -n 1p)
GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
# shellcheck disable=SC2090
export DIR RUNS ZSTD_LEVEL ENTRIES FILES DIRS SYMLINKS BYTES CAS_STATS STORE_DU STORE_FILES \
       MAN_BYTES PEER_BYTES WORK JSON MD PEER_SH LB_CMD_STR LB_SUMMARY NPROC CPU MEM_KIB \
       KERNEL FSTYPE LOADAVG ZSTD_VER TAR_VER GIT_REV ROOT LAZYBLK
"$PY" - <<'EOF'
import json, os, re, statistics, datetime
E = os.environ
def times(name):
    rows = [l.split() for l in open(os.path.join(E["WORK"], name + ".times"))]
    wall = [float(r[0]) for r in rows]
    cpu = [float(r[1]) + float(r[2]) for r in rows if float(r[1]) >= 0]
    rss = [int(r[3]) for r in rows if int(r[3]) >= 0]
    return wall, cpu, rss
entries, nbytes = int(E["ENTRIES"]), int(E["BYTES"])
def tool(name, cmd, out_bytes):
    wall, cpu, rss = times(name)
    med = statistics.median(wall)
    return {"command": cmd, "wall_s": wall, "median_wall_s": round(med, 3), "min_wall_s": min(wall),
            "mb_per_s": round(nbytes / 1e6 / med, 1), "files_per_s": round(entries / med),
            "median_cpu_s": round(statistics.median(cpu), 2) if cpu else None,
            "max_rss_kib": max(rss) if rss else None, "output_bytes": out_bytes}
rel = lambda p: p.replace(E["ROOT"] + "/", "")
lb_cmd = rel(E["LB_CMD_STR"]).replace(E["WORK"] + "/", "$WORK/").replace(rel(E["WORK"]) + "/", "$WORK/")
peer_cmd = E["PEER_SH"].replace("'", "").replace(E["WORK"] + "/", "$WORK/")
lb = tool("lazyblk", lb_cmd, int(E["STORE_DU"]))
peer = tool("peer", peer_cmd, int(E["PEER_BYTES"]))
stats = E["CAS_STATS"]
def stat_num(*keys):
    for line in stats.splitlines():
        l = line.lower()
        if any(k in l for k in keys):
            m = re.search(r"(\d+)", line.split(":", 1)[-1] if ":" in line else line)
            if m: return int(m.group(1))
    return None
store = {"chunks": stat_num("chunk"), "raw_bytes": stat_num("raw", "uncompressed", "logical"),
         "stored_bytes": stat_num("stored", "compressed", "on disk"),
         "du_apparent_bytes": int(E["STORE_DU"]), "files": int(E["STORE_FILES"]),
         "manifest_bytes": int(E["MAN_BYTES"]), "cas_stats": stats}
stored = store["stored_bytes"] or store["du_apparent_bytes"]
now = datetime.datetime.now(datetime.timezone.utc)
res = {
  "benchmark": "import", "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "dir": E["DIR"],
  "tree": {"entries": entries, "regular_files": int(E["FILES"]), "dirs": int(E["DIRS"]),
           "symlinks": int(E["SYMLINKS"]), "bytes": nbytes},
  "machine": {"nproc": int(E["NPROC"]), "cpu": E["CPU"], "mem_kib": int(E["MEM_KIB"]),
              "kernel": E["KERNEL"], "scratch_fs": E["FSTYPE"],
              "loadavg_before": E["LOADAVG"]},
  "versions": {"lazyblk_git": E["GIT_REV"], "zstd": E["ZSTD_VER"], "tar": E["TAR_VER"]},
  "runs": int(E["RUNS"]),
  "lazyblk": lb, "peer": dict(peer, name="tar -c | zstd -T0 -%s" % E["ZSTD_LEVEL"]),
  "ratio_wall_lazyblk_over_peer": round(lb["median_wall_s"] / peer["median_wall_s"], 3),
  "store": store, "lazyblk_summary": E["LB_SUMMARY"],
  "stored_over_zstd": round(stored / int(E["PEER_BYTES"]), 3),
}
json.dump(res, open(E["JSON"], "w"), indent=2)
open(E["JSON"], "a").write("\n")

# ---- markdown section ----
key = f"import {E['DIR']}"
fmt = lambda v: "–" if v is None else v
def row(label, t):
    return (f"| {label} | {t['median_wall_s']:.2f} | {t['min_wall_s']:.2f} | {' / '.join('%.2f' % w for w in t['wall_s'])} | "
            f"{t['mb_per_s']:.1f} | {t['files_per_s']:,} | {fmt(t['median_cpu_s'])} | "
            f"{fmt(t['max_rss_kib'] and round(t['max_rss_kib'] / 1024))} | {t['output_bytes']:,} |")
r = res["ratio_wall_lazyblk_over_peer"]
sec = f"""<!-- bench:{key} -->
## import: `{E['DIR']}` — {res['date'][:10]}

Tree: {entries:,} entries ({res['tree']['regular_files']:,} regular files, {res['tree']['dirs']:,} dirs,
{res['tree']['symlinks']:,} symlinks), {nbytes:,} bytes ({nbytes / 1e6:.1f} MB) in regular files.
Machine: {E['NPROC']} CPUs ({E['CPU']}), {int(E['MEM_KIB']) // 1024:,} MiB RAM, Linux {E['KERNEL']},
scratch on {E['FSTYPE']}. lazyblk `{E['GIT_REV']}`, zstd {E['ZSTD_VER']}, {E['TAR_VER']}.
Load average before the runs: {E['LOADAVG']}.
Page cache warm; {E['RUNS']} runs each, alternating; MB = 10^6 bytes; files/s counts every entry.
lazyblk's store is durable when it exits (syncfs); the peer's output is still in the page cache.

| tool | median wall s | best s | runs s | MB/s | files/s | median CPU s | max RSS MiB | output bytes |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
{row('lazyblk import', lb)}
{row(res['peer']['name'].replace('|', chr(92) + '|'), peer)}

- wall time lazyblk / peer: **{r:.2f}** ({'lazyblk faster' if r < 1 else 'peer faster'}, {max(r, 1 / r):.2f}×)
- store: {fmt(store['chunks'])} chunks, {fmt(store['raw_bytes'])} raw bytes, {fmt(store['stored_bytes'])} stored bytes
  ({store['du_apparent_bytes']:,} bytes in {store['files']:,} files on disk) + manifest {store['manifest_bytes']:,} bytes
- stored bytes / zstd output ({int(E['PEER_BYTES']):,} bytes): **{res['stored_over_zstd']:.3f}**
- lazyblk printed: `{E['LB_SUMMARY']}`

Commands (`$WORK` is a scratch directory under build/bench, emptied before each run):

```
{lb['command']}
{peer['command']}
```
<!-- /bench:{key} -->
"""
HEADER = """# Benchmarks

Produced by `make bench` (or `bench/import.sh [DIR]`); see the header of each
script under `bench/` for the exact method.  Every run appends a dated section
here, replacing the older section for the same benchmark and input, and writes
machine-readable results to `build/bench/*.json`.  Numbers depend on the machine
and are not checked by any test.
"""
md = open(E["MD"]).read() if os.path.exists(E["MD"]) else HEADER
md = re.sub(r"<!-- bench:%s -->.*?<!-- /bench:%s -->\n?" % (re.escape(key), re.escape(key)),
            "", md, flags=re.S)
md = md.rstrip("\n") + "\n\n" + sec
open(E["MD"], "w").write(md)
print(sec)
EOF
echo "== wrote ${JSON#"$ROOT"/} and ${MD#"$ROOT"/}"
