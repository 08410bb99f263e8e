#!/bin/bash
# The "realistic" container image of the cold-start benchmarks: Debian bookworm minbase with
# python3, python3-numpy and sqlite3 (~280 MB of files), imported into a lazyblk store and
# given its ext4 layout. Built once and reused: everything lives in a cache directory keyed
# by what made it, so a second call costs nothing.
#
# Usage: bench/lib/realistic_image.sh [--quiet]
#   prints (on stdout, last line) the image directory, which holds
#     rootfs.tar            the debootstrap tree (numeric owners; /dev, /proc, /sys empty;
#                           apt lists and caches removed, as Debian's slim images do)
#     image.manifest        lazyblk import rootfs.tar
#     store/                its chunks (sha256-named zstd frames)
#     image.layout          lazyblk mkfs image.manifest
#     info.json             file bytes, chunk count, raw and compressed chunk bytes, layout
#                           disk size, the cache key and the lazyblk that imported it
# Environment:
#   LAZYBLK               the lazyblk binary (default build/lazyblk)
#   LAZYBLK_BENCH_CACHE   the cache directory (default build/bench/cache)
#   DEBIAN_MIRROR         the mirror for debootstrap (default: the first non-security URI
#                         of /etc/apt/sources.list.d/* or /etc/apt/sources.list)
#
# Keys: the tar by suite, variant and package list (REALISTIC_KEY below: change it to force
# a rebuild); the store, manifest and layout additionally by the sha256 of the lazyblk
# binary, so a changed importer or mkfs re-imports (the tar is kept). Needs root
# (debootstrap) and debootstrap (installed with apt-get when missing; network to the mirror
# on the first build only).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
CACHE=${LAZYBLK_BENCH_CACHE:-$ROOT/build/bench/cache}
SUITE=bookworm
VARIANT=minbase
INCLUDE=python3,python3-numpy,sqlite3
REALISTIC_KEY="v1 $SUITE $VARIANT $INCLUDE"
QUIET=0
[ "${1:-}" = "--quiet" ] && QUIET=1

die() { echo "bench/realistic_image: $*" >&2; exit 1; }
say() { [ "$QUIET" = 1 ] || echo "bench/realistic_image: $*" >&2; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"

TKEY=$(printf '%s' "$REALISTIC_KEY" | sha256sum | cut -c1-12)
TDIR=$CACHE/realistic-$TKEY
TAR=$TDIR/rootfs.tar
mkdir -p "$TDIR"

if [ ! -s "$TAR" ]; then
  [ "$(id -u)" = 0 ] || die "building the image needs root (debootstrap); no cached $TAR"
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
      >/dev/null 2>&1 || {
      apt-get update -qq >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap \
          >/dev/null 2>&1
    } || die "apt-get install debootstrap failed"
  fi
  MIRROR=${DEBIAN_MIRROR:-}
  if [ -z "$MIRROR" ]; then
    MIRROR=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n 's/^URIs:[[:space:]]*//p' |
      tr ' ' '\n' | grep -v security | head -1 || true)
  fi
  if [ -z "$MIRROR" ]; then
    MIRROR=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; break } }' |
      grep -v security | head -1 || true)
  fi
  [ -n "$MIRROR" ] || die "no Debian mirror in /etc/apt/sources.list{,.d} (set DEBIAN_MIRROR)"
  RFS=$TDIR/rootfs.tmp
  rm -rf "$RFS" "$TAR.tmp"
  say "debootstrap --variant=$VARIANT --include=$INCLUDE $SUITE ${RFS#"$ROOT"/} $MIRROR (a few minutes)"
  debootstrap --variant="$VARIANT" --include="$INCLUDE" "$SUITE" "$RFS" "$MIRROR" \
    >"$TDIR/debootstrap.log" 2>&1 || { tail -5 "$TDIR/debootstrap.log" >&2; die "debootstrap failed (log: $TDIR/debootstrap.log)"; }
  # What a container image would not carry: device nodes, apt's downloaded lists and caches.
  find "$RFS/dev" "$RFS/proc" "$RFS/sys" -mindepth 1 -delete 2>/dev/null || true
  rm -rf "$RFS"/var/lib/apt/lists/* "$RFS"/var/cache/apt/*.bin "$RFS"/var/cache/apt/archives/*.deb \
    "$RFS"/var/log/*.log "$RFS"/debootstrap
  "$RFS/usr/bin/python3" --version >/dev/null 2>&1 || [ -x "$RFS/usr/bin/python3" ] ||
    die "the debootstrap tree has no /usr/bin/python3"
  [ -d "$RFS/usr/lib/python3/dist-packages/numpy" ] || die "the debootstrap tree has no numpy"
  tar --numeric-owner --xattrs -C "$RFS" -cf "$TAR.tmp" . || die "tar of the tree failed"
  mv "$TAR.tmp" "$TAR"
  rm -rf "$RFS"
  say "rootfs.tar: $(stat -c %s "$TAR") bytes"
fi

LKEY=$(sha256sum "$LAZYBLK" | cut -c1-12)
IDIR=$TDIR/lazyblk-$LKEY
if [ ! -s "$IDIR/info.json" ]; then
  rm -rf "$IDIR" "$IDIR.tmp"
  mkdir -p "$IDIR.tmp"
  say "lazyblk import rootfs.tar (lazyblk $LKEY)"
  "$LAZYBLK" import "$TAR" --store "$IDIR.tmp/store" -o "$IDIR.tmp/image.manifest" \
    >"$IDIR.tmp/import.out" ||
    die "lazyblk import $TAR failed"
  "$LAZYBLK" mkfs "$IDIR.tmp/image.manifest" -o "$IDIR.tmp/image.layout" >"$IDIR.tmp/mkfs.out" ||
    die "lazyblk mkfs failed"
  "$LAZYBLK" manifest show --summary "$IDIR.tmp/image.manifest" >"$IDIR.tmp/summary.txt"
  "$LAZYBLK" cas stats --store "$IDIR.tmp/store" >"$IDIR.tmp/cas-stats.txt"
  "$LAZYBLK" manifest show "$IDIR.tmp/image.manifest" >"$IDIR.tmp/manifest.json"
  python3 - "$IDIR.tmp" "$REALISTIC_KEY" "$LKEY" "$TAR" <<'PY' || die "cannot summarize the image"
import json, os, re, sys
d, key, lkey, tar = sys.argv[1:]
m = json.load(open(os.path.join(d, 'manifest.json')))
files = [e for e in m['entries'] if e['type'] in ('file', 'hardlink')]
regular = [e for e in m['entries'] if e['type'] == 'file']
cas = open(os.path.join(d, 'cas-stats.txt')).read()
g = lambda k: int((re.search(r'^%s\s+(\d+)' % k, cas, re.M) or [0, 0])[1])
mk = open(os.path.join(d, 'mkfs.out')).read()
disk = re.search(r'(\d+) bytes', mk)
info = {'key': key, 'lazyblk_sha256_12': lkey, 'entries': len(m['entries']),
        'files': len(regular), 'file_bytes': sum(e.get('size', 0) for e in regular),
        'tar_bytes': os.path.getsize(tar),
        'chunks': g('chunks'), 'chunk_raw_bytes': g('raw bytes'),
        'chunk_stored_bytes': g('stored bytes'), 'chunk_size': m.get('chunk_size'),
        'mkfs': mk.strip().splitlines()[0] if mk.strip() else ''}
json.dump(info, open(os.path.join(d, 'info.json'), 'w'), indent=1)
PY
  rm -f "$IDIR.tmp/manifest.json"
  mv "$IDIR.tmp" "$IDIR"
fi
if [ "$QUIET" != 1 ]; then
  python3 -c '
import json, sys
i = json.load(open(sys.argv[1]))
print("bench/realistic_image: %d files, %.1f MiB of file data; %d chunks, %.1f MiB raw, %.1f MiB compressed"
      % (i["files"], i["file_bytes"] / 2**20, i["chunks"], i["chunk_raw_bytes"] / 2**20,
         i["chunk_stored_bytes"] / 2**20), file=sys.stderr)' "$IDIR/info.json"
fi
echo "$IDIR"
