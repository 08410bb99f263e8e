#!/bin/bash
# Benchmark `lazyblk mkfs`: (a) throughput and memory on large synthetic manifests, and
# (b) time to a bootable image of a real tree against the named peer `mke2fs -t ext4 -d DIR`.
#
# Usage: bench/mkfs.sh [DIR]           (DIR for part b, default /usr/share)
# Environment:
#   LAZYBLK   the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS_A    timed mkfs runs per manifest in part a (default 5; median reported)
#   RUNS_B    timed runs per tool in part b (default 3; alternating; medians reported)
#   SKIP_1M=1 skip the 1,000,000-entry manifest even when build/bench/m1M.tar exists
#
# (a) python's tarfile writes a GNU tar of 400 directories x 500 files (~100 bytes each,
#     names of realistic length: 8-40 bytes), cached as build/bench/mkfs200k.tar. lazyblk
#     imports it once (untimed); one untimed mkfs warms the page cache; then `lazyblk mkfs`
#     runs RUNS_A times, each writing a fresh layout (mkfs fsyncs the layout and its
#     directory). Reported: the median wall time (bash $EPOCHREALTIME), entries/s (every
#     manifest entry: files and directories), and the peak RSS (/usr/bin/time -f %M, the
#     largest of the runs) per entry. Targets: >= 500,000 entries/s, <= 512 bytes/entry.
#     The same for build/bench/m1M.tar (1,001,001 entries, written by bench/manifest.sh)
#     when it exists.
# (b) One untimed `tar -cf - DIR` warms the page cache, one untimed lazyblk import + mkfs
#     gives the filesystem size S (printed by mkfs as "N MiB ext4"). Then, alternating,
#     RUNS_B times each: lazyblk = `import DIR` into an empty store + `mkfs` (timed
#     together and separately); peer = `mke2fs -q -t ext4 -d DIR -F IMG S` on a sparse
#     file of size S created just before (truncate, inside the timed command). Everything
#     lives in a scratch directory under build/bench (same filesystem for both sides),
#     `sync` (untimed) runs before each run. Both sides end durable: lazyblk's import
#     syncs its store, mkfs fsyncs the layout; mke2fs fsyncs the image when it closes it.
#
# Writes: build/bench/mkfs.json and the `mkfs` section of docs/benchmarks.md (via
# bench/lib/mdsection.py). Scratch data is removed; the generated tar stays cached.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
DIR=$(realpath "${1:-/usr/share}")
RUNS_A=${RUNS_A:-5}
RUNS_B=${RUNS_B:-3}
OUT=$ROOT/build/bench
TAR200K=$OUT/mkfs200k.tar
TAR1M=$OUT/m1M.tar
JSON=$OUT/mkfs.json
MD=$ROOT/docs/benchmarks.md

die() { echo "bench/mkfs: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[ -d "$DIR" ] || die "$DIR is not a directory"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (apt-get install time)"
for t in python3 mke2fs dumpe2fs tar; do command -v $t >/dev/null || die "$t not found"; done
for r in "$RUNS_A" "$RUNS_B"; do [[ "$r" =~ ^[1-9][0-9]*$ ]] || die "RUNS_A/RUNS_B must be positive integers"; done

GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")  # before the runs
mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/mkfs-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# run_timed NAME CMD... : run CMD, append "wall user sys maxrss_kib" to $WORK/NAME.times;
# its stdout is kept in $WORK/NAME.stdout
run_timed() {
  local name=$1; shift
  local t0 t1 tf=$WORK/time.out
  t0=$EPOCHREALTIME
  /usr/bin/time -f '%U %S %M' -o "$tf" "$@" >"$WORK/$name.stdout" 2>"$WORK/$name.stderr" ||
    { cat "$WORK/$name.stderr" >&2; die "$name failed: $*"; }
  t1=$EPOCHREALTIME
  local usr sys rss
  read -r usr sys rss < <(tail -1 "$tf")
  awk -v a="$t0" -v b="$t1" -v u="$usr" -v s="$sys" -v r="$rss" \
    'BEGIN { printf "%.4f %s %s %s\n", b - a, u, s, r }' >>"$WORK/$name.times"
  printf '   %-14s %8.3f s  %7d KiB\n' "$name" "$(tail -1 "$WORK/$name.times" | cut -d' ' -f1)" "$rss"
}

# ---------------------------------------------------------------------------
# (a) throughput and memory
if [ ! -s "$TAR200K" ]; then
  echo "== writing $TAR200K (400 dirs x 500 files; once)"
  python3 - "$TAR200K.tmp" <<'PY'
import io, random, sys, tarfile
rnd = random.Random(200000)
words = ('core util test spec index main config types helper parser render build loader '
         'client server module plugin schema event stream buffer cache model view router '
         'handler worker queue format string array object async promise errors logger '
         'context session request response template compile transform').split()
exts = ['.js', '.ts', '.d.ts', '.json', '.md', '.map', '.py', '.c', '.h', '.txt']
def name(n):
    return '-'.join(rnd.choice(words) for _ in range(n))
with tarfile.open(sys.argv[1], 'w', format=tarfile.GNU_FORMAT) as t:
    for d in range(400):
        dn = '%s-%03d' % (name(rnd.randint(1, 3)), d)
        di = tarfile.TarInfo(dn); di.type = tarfile.DIRTYPE; di.mode = 0o755
        di.mtime = 1700000000; t.addfile(di)
        for f in range(500):
            fn = '%s_%d%s' % (name(rnd.randint(1, 4)), f, rnd.choice(exts))
            head = ('// %s/%s\n' % (dn, fn)).encode()
            size = rnd.randint(80, 120)
            data = (head + b'x' * size)[:size] if len(head) < size else head[:size]
            fi = tarfile.TarInfo('%s/%s' % (dn, fn)); fi.size = len(data)
            fi.mode = 0o644; fi.mtime = 1700000000 + f
            t.addfile(fi, io.BytesIO(data))
PY
  mv "$TAR200K.tmp" "$TAR200K"
fi

A_NAMES=()
bench_a() {   # bench_a NAME TAR
  local name=$1 tar=$2
  echo "== (a) $name: import $(basename "$tar") (untimed)"
  local t0=$EPOCHREALTIME
  "$LAZYBLK" import "$tar" --store "$WORK/$name.store" -o "$WORK/$name.manifest" >/dev/null
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' >"$WORK/$name.import_s"
  "$LAZYBLK" manifest show --summary "$WORK/$name.manifest" >"$WORK/$name.summary"
  stat -c %s "$WORK/$name.manifest" >"$WORK/$name.manifest_bytes"
  stat -c %s "$tar" >"$WORK/$name.tar_bytes"
  "$LAZYBLK" mkfs "$WORK/$name.manifest" -o "$WORK/$name.layout" >/dev/null   # warm
  echo "   mkfs, $RUNS_A timed runs"
  for _ in $(seq "$RUNS_A"); do
    rm -f "$WORK/$name.layout"; sync
    run_timed "mkfs-$name" "$LAZYBLK" mkfs "$WORK/$name.manifest" -o "$WORK/$name.layout"
  done
  stat -c %s "$WORK/$name.layout" >"$WORK/$name.layout_bytes"
  rm -rf "$WORK/$name.store"
  A_NAMES+=("$name")
}
LOADAVG_A=$(cut -d' ' -f1-3 /proc/loadavg)
bench_a 200k "$TAR200K"
if [ -s "$TAR1M" ] && [ "${SKIP_1M:-0}" != 1 ]; then
  bench_a 1M "$TAR1M"
else
  [ -s "$TAR1M" ] && why="SKIP_1M=1" || why="$TAR1M absent; bench/manifest.sh writes it"
  echo "== (a) 1M: skipped ($why)"
fi

# ---------------------------------------------------------------------------
# (b) time to a bootable image: lazyblk import + mkfs vs mke2fs -d
echo "== (b) tree: $DIR"
read -r ENTRIES FILES DIRS SYMLINKS BYTES < <(find "$DIR" -printf '%y %s\n' | awk '
  { n++; if ($1 == "f") { f++; b += $2 } else if ($1 == "d") d++; else if ($1 == "l") l++ }
  END { printf "%d %d %d %d %.0f\n", n, f, d, l, b }')
read -r BIGDIR_N BIGDIR < <(find "$DIR" -mindepth 1 -printf '%h\n' | sort | uniq -c | sort -rn | head -1)
echo "   $ENTRIES entries ($FILES regular files, $DIRS dirs, $SYMLINKS symlinks), $BYTES bytes"
echo "   largest directory: $BIGDIR ($BIGDIR_N entries)"
echo "   warming the page cache (untimed tar of $DIR)"
tar -C "$DIR" -cf - . 2>/dev/null | cat >/dev/null || true

STORE=$WORK/b.store MAN=$WORK/b.manifest LAYOUT=$WORK/b.layout IMG=$WORK/peer.img
"$LAZYBLK" import "$DIR" --store "$STORE" -o "$MAN" >/dev/null
"$LAZYBLK" mkfs "$MAN" -o "$LAYOUT" >"$WORK/size.out"
SIZE_MIB=$(grep -oE '[0-9]+ MiB ext4' "$WORK/size.out" | head -1 | cut -d' ' -f1 || true)
if [ -z "$SIZE_MIB" ]; then   # mkfs no longer prints the size: read it from an exported image
  "$LAZYBLK" export "$LAYOUT" --store "$STORE" -o "$WORK/size.raw" >/dev/null
  SIZE_MIB=$(( $(stat -c %s "$WORK/size.raw") / 1048576 ))
  rm -f "$WORK/size.raw"
fi
echo "   filesystem size: $SIZE_MIB MiB (from lazyblk mkfs)"

run_lazyblk() {
  rm -rf "$STORE" "$MAN" "$LAYOUT"; sync
  local t0=$EPOCHREALTIME
  run_timed import "$LAZYBLK" import "$DIR" --store "$STORE" -o "$MAN"
  run_timed mkfs "$LAZYBLK" mkfs "$MAN" -o "$LAYOUT"
  awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.4f\n", b - a }' >>"$WORK/lazyblk_total.times"
  printf '   %-14s %8.3f s\n' "lazyblk total" "$(tail -1 "$WORK/lazyblk_total.times")"
}
# shellcheck disable=SC2089  # a command line for bash -c, quotes intended
PEER_SH="truncate -s ${SIZE_MIB}M '$IMG' && mke2fs -q -t ext4 -d '$DIR' -F '$IMG' ${SIZE_MIB}M"
run_peer() { rm -f "$IMG"; sync; run_timed mke2fs bash -c "$PEER_SH"; }

LOADAVG_B=$(cut -d' ' -f1-3 /proc/loadavg)
echo "   $RUNS_B timed runs each, alternating (load average before: $LOADAVG_B)"
for i in $(seq "$RUNS_B"); do
  if [ $((i % 2)) -eq 1 ]; then run_lazyblk; run_peer; else run_peer; run_lazyblk; fi
done
# outputs of the last runs are still there
STORE_BYTES=$(du -s --apparent-size -B1 "$STORE" | cut -f1)
MAN_BYTES=$(stat -c %s "$MAN")
LAYOUT_BYTES=$(stat -c %s "$LAYOUT")
IMG_APPARENT=$(stat -c %s "$IMG")
IMG_ALLOC=$(( $(stat -c %b "$IMG") * $(stat -c %B "$IMG") ))
dumpe2fs -h "$IMG" 2>/dev/null >"$WORK/peer.dumpe2fs"

NPROC=$(nproc)
CPU=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEM_KIB=$(awk '/^MemTotal/ { print $2 }' /proc/meminfo)
KERNEL=$(uname -r)
FSTYPE=$(findmnt -no FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
MKE2FS_VER=$(mke2fs -V 2>&1 | sed -n 1p) # sed reads it all: no SIGPIPE for pipefail
# shellcheck disable=SC2090
export WORK ROOT JSON MD DIR BIGDIR BIGDIR_N RUNS_A RUNS_B ENTRIES FILES DIRS SYMLINKS BYTES SIZE_MIB \
       STORE_BYTES MAN_BYTES LAYOUT_BYTES IMG_APPARENT IMG_ALLOC PEER_SH NPROC CPU MEM_KIB \
       KERNEL FSTYPE MKE2FS_VER GIT_REV LOADAVG_A LOADAVG_B LAZYBLK
A_LIST="${A_NAMES[*]}" python3 - <<'PY'
import datetime, json, os, re, statistics, subprocess
E = os.environ
W = E['WORK']
def rd(p): return open(os.path.join(W, p)).read()
def times(name):
    rows = [l.split() for l in rd(name + '.times').splitlines() if l.strip()]
    return ([float(r[0]) for r in rows], [float(r[1]) + float(r[2]) for r in rows],
            [int(r[3]) for r in rows])
def summ(name):
    wall, cpu, rss = times(name)
    return {'wall_s': wall, 'median_wall_s': round(statistics.median(wall), 4),
            'median_cpu_s': round(statistics.median(cpu), 3), 'max_rss_kib': max(rss)}
rel = lambda s: s.replace(W + '/', '$WORK/').replace(E['ROOT'] + '/', '')
lb_bin = rel(E['LAZYBLK'])

# ---- (a)
A = {}
for name in E['A_LIST'].split():
    s = summ('mkfs-' + name)
    entries = int(re.search(r'^entries\s+(\d+)', rd(name + '.summary'), re.M).group(1))
    m = re.search(r'^mkfs .*', rd('mkfs-%s.stdout' % name), re.M)
    s.update(entries=entries, files_per_s=round(entries / s['median_wall_s']),
             rss_bytes_per_file=round(s['max_rss_kib'] * 1024 / entries, 1),
             manifest_bytes=int(rd(name + '.manifest_bytes')), tar_bytes=int(rd(name + '.tar_bytes')),
             layout_bytes=int(rd(name + '.layout_bytes')), import_s=float(rd(name + '.import_s')),
             mkfs_said=rel(m.group(0)) if m else '',
             command='%s mkfs $WORK/%s.manifest -o $WORK/%s.layout' % (lb_bin, name, name))
    s['meets_files_per_s'] = s['files_per_s'] >= 500000
    s['meets_bytes_per_file'] = s['rss_bytes_per_file'] <= 512
    A[name] = s

# ---- (b)
imp, mk, peer = summ('import'), summ('mkfs'), summ('mke2fs')
tot = [float(x) for x in rd('lazyblk_total.times').split()]
tot_med = statistics.median(tot)
ratio = peer['median_wall_s'] / tot_med
d2 = {}
for line in rd('peer.dumpe2fs').splitlines():
    k, _, v = line.partition(':')
    if k in ('Inode count', 'Block count', 'Journal size', 'Block size', 'Filesystem features', 'Total journal size'):
        d2[k] = v.strip()
lbsaid = rel(re.search(r'^mkfs .*', rd('mkfs.stdout'), re.M).group(0))
impsaid = rel(rd('import.stdout').splitlines()[0])
B = {'dir': E['DIR'], 'tree': {'entries': int(E['ENTRIES']), 'regular_files': int(E['FILES']),
     'dirs': int(E['DIRS']), 'symlinks': int(E['SYMLINKS']), 'bytes': int(E['BYTES']),
     'largest_dir': E['BIGDIR'], 'largest_dir_entries': int(E['BIGDIR_N'])},
     'size_mib': int(E['SIZE_MIB']), 'runs': int(E['RUNS_B']),
     'lazyblk': {'import': imp, 'mkfs': mk, 'total_wall_s': tot, 'median_total_s': round(tot_med, 4),
                 'store_bytes': int(E['STORE_BYTES']), 'manifest_bytes': int(E['MAN_BYTES']),
                 'layout_bytes': int(E['LAYOUT_BYTES']), 'import_said': impsaid, 'mkfs_said': lbsaid,
                 'commands': ['%s import %s --store $WORK/b.store -o $WORK/b.manifest' % (lb_bin, E['DIR']),
                              '%s mkfs $WORK/b.manifest -o $WORK/b.layout' % lb_bin]},
     'peer': dict(peer, name='mke2fs -t ext4 -d', command=rel(E['PEER_SH']).replace("'", ''),
                  image_apparent_bytes=int(E['IMG_APPARENT']), image_allocated_bytes=int(E['IMG_ALLOC']),
                  dumpe2fs=d2, version=E['MKE2FS_VER']),
     'speedup_peer_over_lazyblk': round(ratio, 2),
     'speedup_mkfs_only': round(peer['median_wall_s'] / mk['median_wall_s'], 1),
     'goal_speedup': 5, 'meets_goal': ratio >= 5}

now = datetime.datetime.now(datetime.timezone.utc)
res = {'benchmark': 'mkfs', 'date': now.strftime('%Y-%m-%dT%H:%M:%SZ'),
       'machine': {'nproc': int(E['NPROC']), 'cpu': E['CPU'], 'mem_kib': int(E['MEM_KIB']),
                   'kernel': E['KERNEL'], 'scratch_fs': E['FSTYPE'],
                   'loadavg_before_a': E['LOADAVG_A'], 'loadavg_before_b': E['LOADAVG_B']},
       'versions': {'lazyblk_git': E['GIT_REV'], 'mke2fs': E['MKE2FS_VER']},
       'throughput': A, 'bootable_image': B}
with open(E['JSON'], 'w') as f:
    json.dump(res, f, indent=2); f.write('\n')

# ---- markdown
met = lambda ok: '**met**' if ok else '**NOT met**'
runs = lambda xs: ' / '.join('%.3f' % x for x in xs)
desc = {'200k': '400 dirs x 500 files of 80-120 bytes, names 8-40 bytes (`build/bench/mkfs200k.tar`)',
        '1M': '1,000 dirs x 1,000 files of 16 bytes (`build/bench/m1M.tar`, from bench/manifest.sh)'}
rows_a = '\n'.join(
    f"| {a['entries']:,} | {a['manifest_bytes']:,} | {a['median_wall_s']:.3f} | {runs(a['wall_s'])} | {a['median_cpu_s']:.2f} | "
    f"{a['files_per_s']:,} | {a['max_rss_kib'] / 1024:.1f} | {a['rss_bytes_per_file']:.0f} | {a['layout_bytes']:,} |"
    for a in A.values())
notes_a = '\n'.join(
    f"- {n}: {desc.get(n, n)}; import took {a['import_s']:.1f} s (untimed). "
    f"Throughput {met(a['meets_files_per_s'])} ({a['files_per_s']:,} vs 500,000 entries/s), "
    f"memory {met(a['meets_bytes_per_file'])} ({a['rss_bytes_per_file']:.0f} vs 512 bytes/entry; "
    f"the manifest alone is {a['manifest_bytes'] / a['entries']:.0f} bytes/entry).\n"
    f"  mkfs said: `{a['mkfs_said']}`"
    for n, a in A.items())
L = B['lazyblk']
P = B['peer']
sec = f"""## mkfs — {res['date'][:10]}

Machine: {E['NPROC']} CPUs ({E['CPU']}), {int(E['MEM_KIB']) // 1024:,} MiB RAM, Linux {E['KERNEL']},
scratch on {E['FSTYPE']} (build/bench). lazyblk `{E['GIT_REV']}`, {E['MKE2FS_VER']}.
Wall times from bash `$EPOCHREALTIME`; CPU time and peak RSS from `/usr/bin/time -f '%U %S %M'`.

### (a) mkfs throughput and memory

Manifest imported once (untimed), one untimed warm-up mkfs, then {E['RUNS_A']} timed runs, each
writing a fresh layout (fsynced). Entries/s counts every manifest entry; bytes/entry is the
largest peak RSS of the runs divided by the entries. Targets: >= 500,000 entries/s,
<= 512 bytes/entry. Load average before: {E['LOADAVG_A']}.

| entries | manifest bytes | median wall s | runs s | median CPU s | entries/s | peak RSS MiB | RSS bytes/entry | layout bytes |
|---:|---:|---:|---|---:|---:|---:|---:|---:|
{rows_a}

{notes_a}

### (b) time to a bootable image: `{E['DIR']}` vs `mke2fs -t ext4 -d`

Tree: {B['tree']['entries']:,} entries ({B['tree']['regular_files']:,} regular files, {B['tree']['dirs']:,} dirs,
{B['tree']['symlinks']:,} symlinks), {B['tree']['bytes']:,} bytes in regular files; the largest directory,
`{E['BIGDIR']}`, has {int(E['BIGDIR_N']):,} entries. Filesystem size
{B['size_mib']:,} MiB on both sides (the size `lazyblk mkfs` chose: used space + 1 GiB).
Page cache warm (untimed tar of the tree); {B['runs']} runs each, alternating; `sync` before each run.
Load average before: {E['LOADAVG_B']}.

| | median wall s | runs s | median CPU s | peak RSS MiB |
|---|---:|---|---:|---:|
| lazyblk import (empty store) | {imp['median_wall_s']:.2f} | {runs(imp['wall_s'])} | {imp['median_cpu_s']:.2f} | {imp['max_rss_kib'] / 1024:.0f} |
| lazyblk mkfs | {mk['median_wall_s']:.3f} | {runs(mk['wall_s'])} | {mk['median_cpu_s']:.2f} | {mk['max_rss_kib'] / 1024:.0f} |
| **lazyblk import + mkfs** | **{tot_med:.2f}** | {runs(tot)} | | |
| **mke2fs -t ext4 -d** (peer) | **{peer['median_wall_s']:.2f}** | {runs(peer['wall_s'])} | {peer['median_cpu_s']:.2f} | {peer['max_rss_kib'] / 1024:.0f} |

- time to a bootable image, peer / lazyblk: **{ratio:.2f}x** — goal >= 5x {met(B['meets_goal'])}
- mkfs step alone vs the peer: {B['speedup_mkfs_only']:,}x (mkfs reads only the manifest)
- what each side produces — they are not the same artifact:
  - lazyblk: a chunk store ({L['store_bytes']:,} bytes, zstd-compressed, deduplicated, sha256-named;
    every file was read, hashed and compressed), a manifest ({L['manifest_bytes']:,} bytes) and a layout
    ({L['layout_bytes']:,} bytes: the synthesized ext4 metadata + the block → chunk map). No disk image
    exists; a block server (or `lazyblk export`) assembles blocks on demand.
  - mke2fs: one raw image of {P['image_apparent_bytes']:,} bytes ({P['image_allocated_bytes']:,} allocated)
    with every file's data copied in, uncompressed; {P['dumpe2fs'].get('Inode count', '?')} inodes,
    {P['dumpe2fs'].get('Block count', '?')} blocks, journal {P['dumpe2fs'].get('Total journal size', '?')}.
  - lazyblk mkfs said: `{L['mkfs_said']}`
- mke2fs is CPU-bound on the {E['NPROC']}-CPU benchmark machine ({peer['median_cpu_s']:.1f} s CPU for {peer['median_wall_s']:.1f} s wall): `mke2fs -d`
  adds each entry to its directory by scanning that directory's blocks (in a perf profile of
  e2fsprogs 1.47.0 most samples are in libext2fs's directory iteration,
  `ext2fs_process_dir_block`), so its cost grows with the square of directory size; trees without
  large directories give a smaller ratio.
- the import is most of lazyblk's time (it reads and compresses all data once; an image that is
  already in the store needs only the mkfs step); mke2fs copies the data but does not compress it.

Commands (`$WORK` is a scratch directory under build/bench):

```
{L['commands'][0]}
{L['commands'][1]}
{P['command']}
```
"""
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'mkfs'],
               input=sec, text=True, check=True)
print(sec)
PY
echo "== wrote ${JSON#"$ROOT"/} and ${MD#"$ROOT"/}"
