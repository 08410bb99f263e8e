#!/bin/bash
# Benchmark images that travel (issue 16) against named peers in the same run, through a
# private docker-registry on 127.0.0.1:
#   pull    `lazyblk import docker://…` against the path users take without it, `skopeo copy
#           docker://… oci:DIR` then `lazyblk import oci:DIR`, and against that skopeo copy
#           alone (the transfer)
#   push    `lazyblk push IMAGE.layout --remote oci://…:TAG` against `skopeo copy oci:DIR
#           docker://…` of the same image; and the bytes a commit's push sends against the
#           zstd -3 size of its dirty blocks
#   commit  `lazyblk commit` of an overlay against `zstd -3` of its dirty blocks alone
#
# Usage: bench/images.sh
# Environment:
#   LAZYBLK   the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS      runs per side, alternating (A B, B A, ...; default 3; medians are reported)
#   DIRTY_MB  MiB of new data written into the overlay for the commit (default 64)
#
# Method (see the section this writes into docs/benchmarks.md):
#   - the image: bench/lib/realistic_image.sh's debootstrap tree (Debian bookworm minbase
#     with python3, numpy, sqlite3), cut into three layers: every directory and what is not
#     below, /usr/share/, /usr/lib/python3* (a hard link goes with its target), each added
#     with `umoci raw add-layer` (gzip, as umoci writes it) to an OCI layout, cached in
#     build/bench/cache/.  `skopeo copy` puts it in a private docker-registry on 127.0.0.1
#     (filesystem storage, access log on: the bytes of every response are counted from it).
#     The registry's blobs are read once untimed, so every run serves them from the page
#     cache; page caches are not dropped (the machine is shared).
#   - pull: each run imports into a new empty store (lazyblk makes its chunks durable,
#     syncfs, before it writes the manifest; skopeo's oci: output is left in the page
#     cache).  Path "skopeo + import oci:" is timed as its two commands one after the
#     other; "skopeo copy alone" is the first of them (the same command, same runs).
#     Wall time, CPU and peak RSS from /usr/bin/time (%e %U %S %M); bytes transferred are
#     the response bytes the registry logged for the run.
#   - push: each run gets a new registry (new storage, new port), so no blob is already
#     there and skopeo cannot mount blobs from another repository.  lazyblk pushes the
#     image's layout (made by `lazyblk mkfs` from the manifest the pull imported) with its
#     manifest, by tag; skopeo pushes the OCI layout of the same image (gzip layers as they
#     are).  Bytes: the growth of the registry's blob storage, and push --json uploaded_bytes.
#   - commit: the image's layout is served with `--overlay` over NBD; through nbdfuse and
#     the host's ext4 driver (mount -o loop) DIRTY_MB of new files are written: half
#     /dev/urandom, half the head of a tar of the host's /usr/lib/python3* and
#     /usr/share/doc (real, compressible), then sync and umount.  The dirty blocks (data and
#     ext4 metadata) are taken from `lazyblk snapshot`'s delta.  `lazyblk commit` runs
#     into a new empty store each run (so every chunk is new); the floor is `zstd -3 -T0 -q
#     -c` of the dirty blocks alone (all CPUs, as commit compresses on all of them), from
#     the page cache, to /dev/null: commit must at least compress them (it also hashes
#     them, writes and syncs chunks and the layout); `zstd -3` on one thread is shown too.
#     The three alternate.
#     Then the base is pushed by tag (:base) and the commit by tag (:commit) to one
#     registry: the commit's uploaded_bytes and the registry's growth against the zstd -3
#     size of the dirty blocks.
#
# About 2 minutes here with RUNS=3 (the first run also cuts the layers, ~30 s, and
# realistic_image.sh may import or build its image).
# Needs root (mount), skopeo, umoci, docker-registry, zstd, nbdfuse, nbdcopy, curl,
# python3, /usr/bin/time, /dev/fuse and loop devices.
# Writes: build/bench/images.json and the `images` section of docs/benchmarks.md.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-3}
DIRTY_MB=${DIRTY_MB:-64}
OUTDIR=$ROOT/build/bench
JSON=$OUTDIR/images.json
MD=$ROOT/docs/benchmarks.md
REPO=bench/realistic
TAG=v1

die() { echo "bench/images: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[ "$(id -u)" = 0 ] || die "must run as root (mount -o loop)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
[[ "$DIRTY_MB" =~ ^[1-9][0-9]*$ ]] || die "DIRTY_MB must be a positive integer"
for t in skopeo umoci docker-registry zstd nbdfuse nbdcopy fusermount3 curl python3 /usr/bin/time; do
  command -v $t >/dev/null || die "$t not found (scripts/deps.sh installs it)"
done
[ -e /dev/fuse ] || die "no /dev/fuse"

mkdir -p "$OUTDIR"
WORK=$(mktemp -d "$OUTDIR/images-work.XXXXXX")
[ -n "$WORK" ] && [ -d "$WORK" ] || die "mktemp failed"
REG_PIDS=() SRV_PID="" FUSE_PID=""
cleanup() {
  mountpoint -q "$WORK/mnt" 2>/dev/null && umount -l "$WORK/mnt"
  [ -n "$FUSE_PID" ] && { fusermount3 -u "$WORK/fuse" 2>/dev/null || true; kill "$FUSE_PID" 2>/dev/null || true; }
  [ -n "$SRV_PID" ] && { kill -9 "$SRV_PID" 2>/dev/null || true; }
  local p
  for p in "${REG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
TIMEF='%e %U %S %M' # wall s, user s, sys s, peak RSS KiB

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# start_registry NAME: a docker-registry with its storage in $WORK/NAME; sets REG (host:port),
# REG_ROOT, REG_LOG (access log: combined format, response bytes in field 10)
start_registry() {
  local port; port=$(free_port)
  REG_ROOT=$WORK/$1 REG_LOG=$WORK/$1.log REG=127.0.0.1:$port
  mkdir -p "$REG_ROOT"
  cat >"$WORK/$1.yml" <<EOF
version: 0.1
log:
  level: error
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $REG_ROOT
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: $REG
  secret: lazyblk-bench-secret
EOF
  docker-registry serve "$WORK/$1.yml" >"$REG_LOG" 2>&1 &
  REG_PIDS+=($!)
  for _ in $(seq 200); do
    curl -fsS -o /dev/null --max-time 2 "http://$REG/v2/" 2>/dev/null && return 0
    sleep 0.05
  done
  die "docker-registry does not answer on $REG"
}
# log_bytes LOG FROM_LINE: "REQUESTS BYTES" of the log's lines after line FROM_LINE
log_bytes() {
  sleep 0.2
  tail -n +"$(($2 + 1))" "$1" | awk '$1 == "127.0.0.1" && $9 ~ /^[0-9]+$/ { n++; b += ($10 ~ /^[0-9]+$/ ? $10 : 0) }
    END { printf "%d %d\n", n, b }'
}
TICK=$(getconf CLK_TCK)
reg_cpu() { # CPU seconds (user + system) of the last registry started, from /proc/PID/stat
  awk -v t="$TICK" '{ printf "%.2f\n", ($14 + $15) / t }' "/proc/${REG_PIDS[-1]}/stat"
}
reg_bytes() { # bytes of every blob in a registry's storage
  { find "$1/docker/registry/v2/blobs" -type f -name data -printf '%s\n' 2>/dev/null || true; } |
    awk '{ s += $1 } END { print s + 0 }'
}

# ---------------------------------------------------------------------------- the image
IDIR=$(LAZYBLK=$LAZYBLK bench/lib/realistic_image.sh --quiet) || die "bench/lib/realistic_image.sh failed"
TAR=$(dirname "$IDIR")/rootfs.tar
OCI=$(dirname "$IDIR")/oci-3layers-v1
if [ ! -s "$OCI/index.json" ]; then
  echo "== cutting $TAR into three layers (umoci raw add-layer; cached in ${OCI#"$ROOT"/})"
  rm -rf "$OCI" "$OCI.tmp"
  python3 - "$TAR" "$WORK/layer" <<'PY' || die "cannot cut the tree into layers"
import sys, tarfile
src, out = sys.argv[1], sys.argv[2]
def layer_of(name):
    n = name[2:] if name.startswith('./') else name
    if n.startswith('usr/share/'):
        return 2
    if n.startswith('usr/lib/python3'):
        return 3
    return 1
outs = {k: tarfile.open('%s%d.tar' % (out, k), 'w', format=tarfile.PAX_FORMAT) for k in (1, 2, 3)}
with tarfile.open(src) as tf:
    for m in tf:
        k = 1 if m.isdir() else layer_of(m.linkname if m.islnk() else m.name)
        outs[k].addfile(m, tf.extractfile(m) if m.isreg() else None)
for t in outs.values():
    t.close()
PY
  umoci init --layout "$OCI.tmp" >/dev/null
  umoci new --image "$OCI.tmp:$TAG" >/dev/null
  for k in 1 2 3; do
    umoci raw add-layer --image "$OCI.tmp:$TAG" "$WORK/layer$k.tar" >/dev/null ||
      die "umoci raw add-layer $k failed"
    rm -f "$WORK/layer$k.tar"
  done
  umoci config --image "$OCI.tmp:$TAG" --os linux --architecture amd64 --config.cmd /bin/sh \
    >/dev/null 2>&1 || die "umoci config failed"
  umoci gc --layout "$OCI.tmp" >/dev/null 2>&1 || true
  mv "$OCI.tmp" "$OCI"
fi
LAYERS_JSON=$(python3 - "$OCI" "$TAG" <<'PY'
import json, os, sys
d, tag = sys.argv[1:]
blob = lambda dg: json.load(open(os.path.join(d, 'blobs', 'sha256', dg.split(':')[1])))
ix = json.load(open(os.path.join(d, 'index.json')))
m = [x for x in ix['manifests'] if x.get('annotations', {}).get('org.opencontainers.image.ref.name') == sys.argv[2]][0]
print(json.dumps([l['size'] for l in blob(m['digest'])['layers']]))
PY
)
echo "== image: $(python3 -c 'import json,sys; l=json.loads(sys.argv[1]); print("%d layers, %.1f MiB gzip" % (len(l), sum(l) / 2**20))' "$LAYERS_JSON")"

start_registry reg
PULL_REG=$REG PULL_LOG=$REG_LOG
skopeo copy -q --dest-tls-verify=false "oci:$OCI:$TAG" "docker://$REG/$REPO:$TAG" ||
  die "skopeo copy to the registry failed"
find "$REG_ROOT" -type f -exec cat {} + >/dev/null # warm: blobs served from the page cache

# ---------------------------------------------------------------------------- 1. pull
echo "== pull: $RUNS alternating runs"
pull_lazyblk() {
  local i=$1 l0 c0; l0=$(wc -l <"$PULL_LOG") c0=$(reg_cpu)
  /usr/bin/time -f "$TIMEF" -o "$WORK/pl.$i.time" "$LAZYBLK" import "docker://$PULL_REG/$REPO:$TAG" \
    --insecure --store "$WORK/pl.$i.store" -o "$WORK/pl.$i.manifest" >/dev/null 2>"$WORK/pl.$i.err" ||
    die "lazyblk import docker:// failed: $(tail -3 "$WORK/pl.$i.err")"
  log_bytes "$PULL_LOG" "$l0" >"$WORK/pl.$i.net"
  echo "$c0 $(reg_cpu)" >"$WORK/pl.$i.reg"
}
pull_skopeo() {
  local i=$1 l0 c0; l0=$(wc -l <"$PULL_LOG") c0=$(reg_cpu)
  /usr/bin/time -f "$TIMEF" -o "$WORK/ps.$i.time" skopeo copy -q --src-tls-verify=false \
    "docker://$PULL_REG/$REPO:$TAG" "oci:$WORK/ps.$i.oci:$TAG" 2>"$WORK/ps.$i.err" ||
    die "skopeo copy from the registry failed: $(tail -3 "$WORK/ps.$i.err")"
  log_bytes "$PULL_LOG" "$l0" >"$WORK/ps.$i.net"
  echo "$c0 $(reg_cpu)" >"$WORK/ps.$i.reg"
  /usr/bin/time -f "$TIMEF" -o "$WORK/pi.$i.time" "$LAZYBLK" import "oci:$WORK/ps.$i.oci:$TAG" \
    --store "$WORK/pi.$i.store" -o "$WORK/pi.$i.manifest" >/dev/null 2>"$WORK/pi.$i.err" ||
    die "lazyblk import oci: failed: $(tail -3 "$WORK/pi.$i.err")"
}
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then pull_lazyblk "$i"; pull_skopeo "$i"; else pull_skopeo "$i"; pull_lazyblk "$i"; fi
  printf '   run %d: import docker:// %s s; skopeo copy %s s + import oci: %s s\n' "$i" \
    "$(cut -d' ' -f1 "$WORK/pl.$i.time")" "$(cut -d' ' -f1 "$WORK/ps.$i.time")" "$(cut -d' ' -f1 "$WORK/pi.$i.time")"
  # keep the last run's store and manifest (the push and the commit use them)
  [ "$i" = "$RUNS" ] || rm -rf "$WORK/pl.$i.store" "$WORK/pi.$i.store" "$WORK/ps.$i.oci"
done
cmp -s <("$LAZYBLK" manifest show "$WORK/pl.$RUNS.manifest") <("$LAZYBLK" manifest show "$WORK/pi.$RUNS.manifest") ||
  echo "   note: the two paths' manifests differ" >&2
STORE=$WORK/pl.$RUNS.store MAN=$WORK/pl.$RUNS.manifest
du -sb --apparent-size "$STORE/chunks" | cut -f1 >"$WORK/store.bytes"
rm -rf "$WORK/pi.$RUNS.store" "$WORK/ps.$RUNS.oci"

# ---------------------------------------------------------------------------- 2. push
"$LAZYBLK" mkfs "$MAN" -o "$WORK/base.layout" >"$WORK/mkfs.out" || die "lazyblk mkfs failed"
cp "$MAN" "$WORK/base.manifest"
echo "== push: $RUNS alternating runs, a new registry each"
push_lazyblk() {
  local i=$1 r0 l0 c0; r0=$(reg_bytes "$REG_ROOT") l0=$(wc -l <"$REG_LOG") c0=$(reg_cpu)
  /usr/bin/time -f "$TIMEF" -o "$WORK/ul.$i.time" "$LAZYBLK" push "$WORK/base.layout" --store "$STORE" \
    --remote "oci://$REG/bench/lazyblk:$TAG" --json >"$WORK/ul.$i.json" 2>"$WORK/ul.$i.err" ||
    die "lazyblk push failed: $(tail -3 "$WORK/ul.$i.err")"
  echo $(($(reg_bytes "$REG_ROOT") - r0)) >"$WORK/ul.$i.bytes"
  log_bytes "$REG_LOG" "$l0" >"$WORK/ul.$i.net"
  echo "$c0 $(reg_cpu)" >"$WORK/ul.$i.reg"
}
push_skopeo() {
  local i=$1 r0 l0 c0; r0=$(reg_bytes "$REG_ROOT") l0=$(wc -l <"$REG_LOG") c0=$(reg_cpu)
  /usr/bin/time -f "$TIMEF" -o "$WORK/us.$i.time" skopeo copy -q --dest-tls-verify=false \
    "oci:$OCI:$TAG" "docker://$REG/bench/skopeo:$TAG" 2>"$WORK/us.$i.err" ||
    die "skopeo copy to the registry failed: $(tail -3 "$WORK/us.$i.err")"
  echo $(($(reg_bytes "$REG_ROOT") - r0)) >"$WORK/us.$i.bytes"
  log_bytes "$REG_LOG" "$l0" >"$WORK/us.$i.net"
  echo "$c0 $(reg_cpu)" >"$WORK/us.$i.reg"
}
for i in $(seq 1 "$RUNS"); do
  start_registry "push$i"
  if [ $((i % 2)) = 1 ]; then push_lazyblk "$i"; push_skopeo "$i"; else push_skopeo "$i"; push_lazyblk "$i"; fi
  printf '   run %d: lazyblk push %s s, skopeo copy %s s\n' "$i" \
    "$(cut -d' ' -f1 "$WORK/ul.$i.time")" "$(cut -d' ' -f1 "$WORK/us.$i.time")"
  kill "${REG_PIDS[-1]}"; wait "${REG_PIDS[-1]}" 2>/dev/null || true
  rm -rf "$REG_ROOT"
done

# ---------------------------------------------------------------------------- 3. commit
echo "== commit: $DIRTY_MB MiB of new files written through NBD into an overlay"
SOCK=$WORK/nbd.sock
"$LAZYBLK" serve "$WORK/base.layout" --store "$STORE" --overlay "$WORK/ov" --nbd "unix:$SOCK" \
  >"$WORK/serve.out" 2>"$WORK/serve.err" &
SRV_PID=$!
for _ in $(seq 1000); do grep -q '^serving ' "$WORK/serve.out" && break; sleep 0.01; done
grep -q '^serving ' "$WORK/serve.out" || die "lazyblk serve did not start: $(cat "$WORK/serve.err")"
mkdir -p "$WORK/fuse" "$WORK/mnt"
nbdfuse "$WORK/fuse/disk" --unix "$SOCK" &
FUSE_PID=$!
for _ in $(seq 200); do [ -e "$WORK/fuse/disk" ] && break; sleep 0.05; done
mount -o loop "$WORK/fuse/disk" "$WORK/mnt" || die "mount -o loop of the served disk failed"
half=$((DIRTY_MB * 1048576 / 2))
mkdir -p "$WORK/mnt/bench-new"
head -c "$half" /dev/urandom >"$WORK/mnt/bench-new/random.bin"
tar -cf - /usr/lib/python3* /usr/share/doc 2>/dev/null | head -c "$half" >"$WORK/mnt/bench-new/text.tar" || true
[ "$(stat -c %s "$WORK/mnt/bench-new/text.tar")" -eq "$half" ] || die "not $half bytes of real files"
sync
umount "$WORK/mnt"
fusermount3 -u "$WORK/fuse"; wait "$FUSE_PID" 2>/dev/null || true; FUSE_PID=""
kill -TERM "$SRV_PID"; wait "$SRV_PID" || die "lazyblk serve failed: $(cat "$WORK/serve.err")"
SRV_PID=""
"$LAZYBLK" snapshot "$WORK/ov" -o "$WORK/d.delta" >/dev/null || die "lazyblk snapshot failed"
# the delta (docs/formats.md): a 4096-byte header (dirty_blocks u64 LE at 64, zeroed at 72),
# then the dirty blocks' data in disk order
python3 - "$WORK/d.delta" "$WORK/dirty.bin" >"$WORK/delta.counts" <<'PY' || die "cannot read the delta"
import struct, sys
with open(sys.argv[1], 'rb') as f:
    h = f.read(4096)
    assert h[:8] == b'LZBKDLTA', 'not a delta'
    dirty, zeroed = struct.unpack_from('<QQ', h, 64)
    with open(sys.argv[2], 'wb') as o:
        for _ in range(dirty):
            o.write(f.read(4096))
print(dirty, zeroed)
PY
rm -f "$WORK/d.delta"
zstd -3 -q -c "$WORK/dirty.bin" | wc -c >"$WORK/dirty.z"
commit_run() {
  local i=$1
  rm -rf "$WORK/cs.$i" && mkdir -p "$WORK/cs.$i"
  sync
  /usr/bin/time -f "$TIMEF" -o "$WORK/cm.$i.time" "$LAZYBLK" commit "$WORK/ov" --layout "$WORK/base.layout" \
    --store "$WORK/cs.$i/store" -o "$WORK/cs.$i/c.layout" --json >"$WORK/cm.$i.json" 2>"$WORK/cm.$i.err" ||
    die "lazyblk commit failed: $(tail -3 "$WORK/cm.$i.err")"
  rm -rf "$WORK/cs.$i"
}
zstd_run() { # zstd_run NAME RUN [ZSTD ARGS]
  cat "$WORK/dirty.bin" >/dev/null
  /usr/bin/time -f "$TIMEF" -o "$WORK/$1.$2.time" zstd -3 -q "${@:3}" -c "$WORK/dirty.bin" >/dev/null
}
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then
    commit_run "$i"; zstd_run zs "$i"; zstd_run zt "$i" -T0
  else
    zstd_run zt "$i" -T0; zstd_run zs "$i"; commit_run "$i"
  fi
  printf '   run %d: lazyblk commit %s s, zstd -3 %s s, zstd -3 -T0 %s s\n' "$i" \
    "$(cut -d' ' -f1 "$WORK/cm.$i.time")" "$(cut -d' ' -f1 "$WORK/zs.$i.time")" \
    "$(cut -d' ' -f1 "$WORK/zt.$i.time")"
done

echo "== push by tag: the base (:base), then the commit (:commit)"
"$LAZYBLK" commit "$WORK/ov" --layout "$WORK/base.layout" --store "$STORE" -o "$WORK/c.layout" \
  --json >"$WORK/commit.json" 2>"$WORK/commit.err" || die "lazyblk commit failed: $(cat "$WORK/commit.err")"
start_registry cpush
"$LAZYBLK" push "$WORK/base.layout" --store "$STORE" --remote "oci://$REG/bench/commit:base" --json \
  >"$WORK/push-base.json" 2>"$WORK/push-base.err" || die "push of the base failed: $(cat "$WORK/push-base.err")"
r0=$(reg_bytes "$REG_ROOT")
/usr/bin/time -f "$TIMEF" -o "$WORK/push-commit.time" "$LAZYBLK" push "$WORK/c.layout" --store "$STORE" \
  --remote "oci://$REG/bench/commit:commit" --json >"$WORK/push-commit.json" 2>"$WORK/push-commit.err" ||
  die "push of the commit failed: $(cat "$WORK/push-commit.err")"
echo $(($(reg_bytes "$REG_ROOT") - r0)) >"$WORK/push-commit.growth"
stat -c %s "$WORK/c.layout" >"$WORK/c.layout.size"

# ---------------------------------------------------------------------------- report
read -r DIRTY ZEROED <"$WORK/delta.counts"
export WORK RUNS JSON MD ROOT IDIR LAYERS_JSON DIRTY ZEROED DIRTY_MB
python3 - <<'PY'
import json, os, statistics, subprocess, datetime
E = os.environ
W, runs = E['WORK'], int(E['RUNS'])
rd = lambda p: open(os.path.join(W, p)).read().strip()
R = range(1, runs + 1)
def tm(prefix):  # [(wall, cpu, rss_kib)] of runs
    out = []
    for i in R:
        e, u, s, m = rd('%s.%d.time' % (prefix, i)).split()[-4:]
        out.append((float(e), float(u) + float(s), int(m)))
    return out
med = statistics.median
mib = 1 << 20
info = json.load(open(os.path.join(E['IDIR'], 'info.json')))
layers = json.loads(E['LAYERS_JSON'])
pl, ps, pi = tm('pl'), tm('ps'), tm('pi')
pb = [ps[k][0] + pi[k][0] for k in range(runs)]
net = lambda p: [tuple(map(int, rd('%s.%d.net' % (p, i)).split())) for i in R]
pl_net, ps_net = net('pl'), net('ps')
def regc(p):
    out = []
    for i in R:
        a, b = map(float, rd('%s.%d.reg' % (p, i)).split())
        out.append(b - a)
    return out
pl_reg, ps_reg, ul_reg, us_reg = regc('pl'), regc('ps'), regc('ul'), regc('us')
ul_net, us_net = net('ul'), net('us')
ul, us = tm('ul'), tm('us')
ul_bytes = [int(rd('ul.%d.bytes' % i)) for i in R]
us_bytes = [int(rd('us.%d.bytes' % i)) for i in R]
ulj = json.loads(rd('ul.%d.json' % runs))
ul_up = ulj.get('uploaded_bytes')
cm, zs, zt = tm('cm'), tm('zs'), tm('zt')
cmj = json.loads(rd('cm.%d.json' % runs))
dirty, zeroed = int(E['DIRTY']), int(E['ZEROED'])
dirty_z = int(rd('dirty.z'))
pc = json.loads(rd('push-commit.json'))
pc_up, pc_growth = pc.get('uploaded_bytes'), int(rd('push-commit.growth'))
pc_time = float(rd('push-commit.time').split()[-4])
store_bytes = int(rd('store.bytes'))
col = lambda xs, k: [x[k] for x in xs]
res = {
    'date': datetime.date.today().isoformat(), 'runs': runs, 'cpus': os.cpu_count(),
    'image': {'files': info['files'], 'file_bytes': info['file_bytes'],
              'layers_gzip_bytes': layers, 'store_bytes': store_bytes},
    'pull': {'lazyblk_docker': {'secs': col(pl, 0), 'cpu_secs': col(pl, 1), 'rss_kib': col(pl, 2),
                                'requests_bytes': pl_net, 'registry_cpu_secs': pl_reg},
             'skopeo_copy': {'secs': col(ps, 0), 'cpu_secs': col(ps, 1), 'rss_kib': col(ps, 2),
                             'requests_bytes': ps_net, 'registry_cpu_secs': ps_reg},
             'lazyblk_import_oci': {'secs': col(pi, 0), 'cpu_secs': col(pi, 1), 'rss_kib': col(pi, 2)},
             'skopeo_then_import_secs': pb},
    'push': {'lazyblk': {'secs': col(ul, 0), 'cpu_secs': col(ul, 1), 'rss_kib': col(ul, 2),
                         'registry_growth': ul_bytes, 'uploaded_bytes': ul_up,
                         'requests': col(ul_net, 0), 'registry_cpu_secs': ul_reg, 'json': ulj},
             'skopeo': {'secs': col(us, 0), 'cpu_secs': col(us, 1), 'rss_kib': col(us, 2),
                        'registry_growth': us_bytes, 'requests': col(us_net, 0),
                        'registry_cpu_secs': us_reg}},
    'commit': {'dirty_mb_written': int(E['DIRTY_MB']), 'dirty_blocks': dirty, 'zeroed_blocks': zeroed,
               'dirty_zstd3_bytes': dirty_z,
               'lazyblk': {'secs': col(cm, 0), 'cpu_secs': col(cm, 1), 'rss_kib': col(cm, 2),
                           'summary': cmj},
               'zstd3': {'secs': col(zs, 0), 'cpu_secs': col(zs, 1), 'rss_kib': col(zs, 2)},
               'zstd3_T0': {'secs': col(zt, 0), 'cpu_secs': col(zt, 1), 'rss_kib': col(zt, 2)},
               'push_commit': {'secs': pc_time, 'uploaded_bytes': pc_up, 'registry_growth': pc_growth,
                               'layout_bytes': int(rd('c.layout.size')), 'json': pc}},
}
json.dump(res, open(E['JSON'], 'w'), indent=1)
f2 = lambda xs: ', '.join('%.2f' % x for x in xs)
M = lambda b: '%.1f MiB' % (b / mib)
rss = lambda xs: '%.0f MiB' % (max(col(xs, 2)) / 1024)
mcpu = lambda xs: '%.2f' % med(col(xs, 1))
row = lambda name, xs, extra: '| %s | %.2f s | %s | %s | %s | %s |' % (name, med(col(xs, 0)), f2(col(xs, 0)), mcpu(xs), rss(xs), extra)
pb_cpu = [ps[k][1] + pi[k][1] for k in range(runs)]
pb_rss = max(max(col(ps, 2)), max(col(pi, 2)))
md = f"""## images: pull, push and commit through a registry, against skopeo and zstd — {res['date']}

Image: bench/lib/realistic_image.sh's Debian bookworm minbase + python3, numpy, sqlite3
({info['files']:,} files, {M(info['file_bytes'])}) in {len(layers)} gzip layers made with umoci
({', '.join(M(x) for x in layers)}; {M(sum(layers))}); lazyblk's store of it holds {M(store_bytes)} (zstd).
A private docker-registry on 127.0.0.1 serves it from the page cache. {runs} alternating runs a side,
medians; CPU = user + system seconds; peak RSS = the largest of the runs. The machine has
{res['cpus']} CPUs shared with other users: it is noisy, read differences under ~20 % as noise
(method: header of `bench/images.sh`).

Pull (every run into a new empty store; lazyblk syncs its store before it writes the manifest,
skopeo's oci: directory is left in the page cache):

| | median | runs | CPU s | peak RSS | transferred |
|---|---:|---|---:|---:|---:|
{row('`lazyblk import docker://… --insecure`', pl, '%s in %d requests' % (M(pl_net[-1][1]), pl_net[-1][0]))}
| `skopeo copy docker://… oci:DIR` + `lazyblk import oci:DIR` (today's path) | {med(pb):.2f} s | {f2(pb)} | {med(pb_cpu):.2f} | {pb_rss / 1024:.0f} MiB | {M(ps_net[-1][1])} in {ps_net[-1][0]} requests |
{row('`skopeo copy docker://… oci:DIR` alone (the transfer; the same runs)', ps, '%s in %d requests' % (M(ps_net[-1][1]), ps_net[-1][0]))}
{row('`lazyblk import oci:DIR` alone (the same runs)', pi, '—')}

- docker-registry's own CPU (median): {med(pl_reg):.2f} s serving `import docker://`, {med(ps_reg):.2f} s serving skopeo.
- `import docker://` takes **{med(col(pl, 0)) / med(pb):.2f}×** the time of skopeo + `import oci:`, and **{med(col(pl, 0)) / med(col(ps, 0)):.2f}×** that of the transfer alone.

Push of the image by tag (a new registry each run; bytes = growth of the registry's blob storage):

| | median | runs | CPU s | peak RSS | stored in the registry |
|---|---:|---|---:|---:|---:|
{row('`lazyblk push base.layout --remote oci://…:TAG`', ul, M(ul_bytes[-1]) + ' (chunks %s, layout %s, manifest %s)' % (M(ul_up or 0), M(ulj.get('layout_bytes', 0)), M(ulj.get('manifest_bytes', 0))))}
{row('`skopeo copy oci:DIR docker://…` (the same image, gzip layers)', us, M(us_bytes[-1]))}

- `lazyblk push` takes **{med(col(ul, 0)) / med(col(us, 0)):.2f}×** skopeo's time and stores {ul_bytes[-1] / max(us_bytes[-1], 1):.2f}× its bytes (the image's {ulj.get('chunks')} zstd chunks, its layout and its manifest, against {len(layers)} gzip layers).
- Requests (last run): lazyblk {ul_net[-1][0]:,} (a HEAD, POST and PUT per blob), skopeo {us_net[-1][0]:,}. docker-registry's own CPU (median): {med(ul_reg):.2f} s for lazyblk's push ({med(ul_reg) * 1000 / max(ulj.get('uploaded') or 1, 1):.0f} ms a blob uploaded), {med(us_reg):.2f} s for skopeo's, against lazyblk's own {med(col(ul, 1)):.2f} s: with {ulj.get('chunks')} chunk blobs instead of {len(layers)} layers, the registry's work per blob, not the bytes, is most of what a push costs here.

Commit: {E['DIRTY_MB']} MiB of new files (half random, half real files from the host) written through
NBD and the host's ext4 driver into an overlay of the image: {dirty:,} dirty blocks ({M(dirty * 4096)}; {zeroed:,} zeroed),
{M(dirty_z)} at zstd -3.

| | median | runs | CPU s | peak RSS |
|---|---:|---|---:|---:|
| `lazyblk commit OVERLAY` (into an empty store: every chunk new) | {med(col(cm, 0)):.2f} s | {f2(col(cm, 0))} | {mcpu(cm)} | {rss(cm)} |
| `zstd -3 -T0` of the dirty blocks alone (the floor, all CPUs; page cache, to /dev/null) | {med(col(zt, 0)):.2f} s | {f2(col(zt, 0))} | {mcpu(zt)} | {rss(zt)} |
| `zstd -3` of the dirty blocks alone, one thread | {med(col(zs, 0)):.2f} s | {f2(col(zs, 0))} | {mcpu(zs)} | {rss(zs)} |

- commit takes **{med(col(cm, 0)) / max(med(col(zt, 0)), 0.01):.2f}×** the floor's time ({med(col(cm, 0)) / max(med(col(zs, 0)), 0.01):.2f}× one-thread zstd's) and {med(col(cm, 1)) / max(med(col(zs, 1)), 0.01):.2f}× one-thread zstd's CPU (the floor leaves out what commit must also do: sha256 of every chunk, writing and syncing the chunks and the layout); it stored {cmj.get('new_chunks')} chunks, {M(cmj.get('new_bytes', 0))}.
- Push of the commit by tag after the base ({pc_time:.2f} s): uploaded_bytes {M(pc_up) if pc_up is not None else '?'}, the registry grew by {M(pc_growth)}, against {M(dirty_z)} of dirty blocks at zstd -3: **{pc_growth / dirty_z:.2f}×** (the rest: the {int(rd('c.layout.size')) / 1024:.0f} KiB layout, the image manifest, the index and the chunk manifests, which list every chunk of the chain).
"""
subprocess.run(['python3', os.path.join(E['ROOT'], 'bench/lib/mdsection.py'), E['MD'], 'images'],
               input=md, text=True, check=True)
print(md)
PY
