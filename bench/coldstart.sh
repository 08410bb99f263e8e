#!/bin/bash
# Cold start of a realistic container over an emulated network link: how long a QEMU TCG
# guest takes from QEMU's start until `python3 -c "import numpy, sqlite3"` has run in the
# image, when the image's chunks are local (warm), fetched on demand (cold), downloaded
# whole first, or (once lazyblk has them) warmed / prefetched from a recorded trace /
# repacked in trace order.
#
# Usage: bench/coldstart.sh
# Environment:
#   LAZYBLK   the lazyblk binary (default build/lazyblk)
#   LINK      link profile(s), space-separated: none (nginx directly), RATE/RTT such as
#             25mbit/20ms (default) or 1gbit/1ms. A profile other than none needs the link
#             emulator ($LINKEM, default build/tools/linkem), started as
#             `linkem --listen 127.0.0.1:0 --connect 127.0.0.1:NGINX --rate RATE --delay RTT/2`
#   RUNS      runs per mode, alternating (default 3; medians reported)
#   MODES     the modes to run (default: all that this lazyblk supports)
#   LAZYBLK_BENCH_CACHE  where bench/lib/realistic_image.sh keeps the image
#
# Method:
#   - the image: bench/lib/realistic_image.sh (Debian bookworm minbase + python3 +
#     python3-numpy + sqlite3, debootstrap, imported with the default 1 MiB chunks, zstd 3),
#     published by a private nginx on 127.0.0.1 (the store directory as static files at
#     /store/), reached through linkem with the profile's rate and one-way delay RTT/2.
#   - the guest: Debian's linux-image-cloud-amd64 (scripts/lib/kernel.sh) under QEMU TCG
#     (-smp 1, 512 MiB memfd shared RAM), root disk = the image over vhost-user-blk from
#     `lazyblk serve` with a fresh overlay; `lazyblk initramfs` runs
#     /usr/bin/python3 -c "import numpy, sqlite3; ..." in the image.
#   - time: scripts/lib/qemu_boot.py stamps the console from QEMU's start; the figure is the
#     stamp of the console's `lazyblk-exit: 0` (printed by /init after the command has exited
#     and the disk is synced and unmounted). Mode "full" adds the download before the boot.
#     `lazyblk serve` is started (and its socket ready) before the clock starts in every mode.
#   - modes (the order rotates from run to run):
#       warm      every chunk already in the local store (a copy of the image's store, kept
#                 for all runs; its files are in the page cache), serve without --remote
#       cold      empty local store, serve --remote through the link (demand fetching)
#       full      curl --parallel --parallel-max 16 of every chunk through the link into an
#                 empty store, then boot from it (the time includes the download)
#       coldnora  cold without the server's read-ahead (--readahead 0): the demand-only read
#                 amplification of whole-chunk fetches alone
#       warmed    `lazyblk warm --trace TRACE` through the link, then boot with the remote
#                 for whatever the trace missed (warm's time included)
#       prefetch  cold, with serve --prefetch TRACE — needs serve --prefetch/--trace-record
#       repacked  cold, the image repacked in trace order (`lazyblk repack`), with --prefetch
#     The trace is recorded once per profile by an untimed cold boot with
#     `serve --trace-record FILE`.
#   - also recorded per boot: QEMU's CPU time (user + system; the guest's own work under
#     TCG, which other load on the host does not change much) and the host's 1-minute load
#     average at the boot's start: on a shared machine wall times vary with the load.
#   - bytes and requests fetched: serve --stats-json (remote_bytes, remote_requests) and,
#     through linkem, its down byte count (HTTP headers included); for full/warmed the
#     downloader's own counts.
#   - read amplification = chunk_loaded_bytes / (blocks_from_chunks x 4096): decompressed
#     bytes of the chunks serve loaded (from the store or the remote, each verified) over
#     the bytes of file data the guest read (4 KiB data blocks served from chunks, repeats
#     included; metadata blocks, zero blocks and the overlay are not counted).
#   - "data the guest read, compressed" = data bytes read x the image's compressed/raw
#     chunk ratio (an estimate: lazyblk compresses per chunk, not per block); "chunks
#     touched, compressed" = the compressed bytes of the chunks the cold mode fetched.
#
# Needs root (debootstrap on the first run), qemu-system-x86, nginx, curl, busybox-static.
# Writes: build/bench/coldstart.json (one entry per link profile, merged with the previous
# file's other profiles) and the `coldstart` section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
export LAZYBLK
LINK=${LINK:-25mbit/20ms}
RUNS=${RUNS:-3}
OUT=$ROOT/build/bench
JSON=$OUT/coldstart.json
MD=$ROOT/docs/benchmarks.md
MEM=512
GUEST_CMD='import numpy, sqlite3; print("lazyblk-coldstart: numpy", numpy.__version__, "sqlite", sqlite3.sqlite_version)'

die() { echo "bench/coldstart: $*" >&2; exit 1; }
say() { echo "bench/coldstart: $*" >&2; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for t in qemu-system-x86_64 python3 curl nginx busybox readelf; do
  command -v $t >/dev/null || die "$t not found (scripts/deps.sh)"
done
BUSYBOX=$(command -v busybox)
! readelf -l "$BUSYBOX" | grep -q INTERP || die "$BUSYBOX is not static (apt-get install busybox-static)"
"$LAZYBLK" serve --help | grep -q -- '--vhost-user PATH.*not available' &&
  die "this lazyblk has no --vhost-user"
for p in $LINK; do
  LINK_RATE="" LINK_DELAY=""
  [ "$p" = none ] && continue
  [ -x "${LINKEM:-$ROOT/build/tools/linkem}" ] ||
    die "LINK=$p needs the link emulator, and ${LINKEM:-build/tools/linkem} is missing (build it, set LINKEM, or run with LINK=none)"
done

# ---- what this lazyblk can do (the hooks) -------------------------------------------------
HAVE_WARM=0 HAVE_PREFETCH=0 HAVE_REPACK=0
"$LAZYBLK" warm --help >/dev/null 2>&1 && HAVE_WARM=1
"$LAZYBLK" serve --help 2>&1 | grep -q -- --prefetch &&
  "$LAZYBLK" serve --help 2>&1 | grep -q -- --trace-record && HAVE_PREFETCH=1
[ "$HAVE_PREFETCH" = 1 ] && "$LAZYBLK" repack --help >/dev/null 2>&1 && HAVE_REPACK=1
ALL_MODES="warm cold coldnora full"
SKIPPED=()
if [ "$HAVE_WARM" = 1 ]; then ALL_MODES+=" warmed"; else SKIPPED+=("needs lazyblk warm (mode warmed)"); fi
if [ "$HAVE_PREFETCH" = 1 ]; then ALL_MODES+=" prefetch"; else SKIPPED+=("needs lazyblk serve --prefetch and --trace-record (mode prefetch)"); fi
if [ "$HAVE_REPACK" = 1 ]; then ALL_MODES+=" repacked"; else SKIPPED+=("needs lazyblk repack and serve --prefetch (mode repacked)"); fi
MODES=${MODES:-$ALL_MODES}
for m in $MODES; do
  [[ " $ALL_MODES " == *" $m "* ]] || die "mode $m is not available here (available: $ALL_MODES)"
done
for s in "${SKIPPED[@]+"${SKIPPED[@]}"}"; do echo "skipped: $s"; done

# ---- image, kernel, initramfs --------------------------------------------------------------
IDIR=$("$ROOT/bench/lib/realistic_image.sh") || die "could not build the realistic image"
. "$ROOT/scripts/lib/kernel.sh"
KC=$(kernel_cache) || die "no writable kernel cache directory"
KERNEL=$(fetch_kernel "$KC") || die "cannot fetch linux-image-cloud-amd64 (network or apt sources?)"
KVER=${KERNEL##*/vmlinuz-}
INITRD=$("$LAZYBLK" initramfs --kernel "$KERNEL" --busybox "$BUSYBOX" \
  -e PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -e HOME=/root \
  -- /usr/bin/python3 -c "$GUEST_CMD") || die "lazyblk initramfs failed"

# nginx serves WORK/www: /store/ = the image's store, /repacked/ = the repacked one.
. "$ROOT/bench/lib/coldlib.sh"
cold_setup coldstart "$IDIR"

# boot NAME LAYOUT STORE [SERVE ARGS...]: one timed boot; appends QEMU's boot.json fields
# and serve's statistics to $WORK/last.json. The clock is QEMU's start (qemu_boot.py).
boot() {
  local name=$1 layout=$2 store=$3 rc=0 src=0 es
  shift 3
  local d=$WORK/boot.$name
  rm -rf "$d"
  mkdir -p "$d"
  "$LAZYBLK" serve "$layout" --store "$store" --overlay "$d/ov" --vhost-user "$d/vu.sock" \
    --stats-json "$d/stats.json" "$@" >"$d/serve.log" 2>&1 &
  local spid=$!
  COLD_PIDS+=("$spid")
  for _ in $(seq 400); do [ -S "$d/vu.sock" ] && break; kill -0 $spid 2>/dev/null || break; sleep 0.025; done
  [ -S "$d/vu.sock" ] || die "lazyblk serve did not start: $(tail -2 "$d/serve.log")"
  cp /proc/loadavg "$d/loadavg"
  python3 "$ROOT/scripts/lib/qemu_boot.py" --log "$d/console.log" --json "$d/boot.json" --timeout 900 -- \
    qemu-system-x86_64 -M pc -accel tcg -m "$MEM" -smp 1 -nodefaults -nographic -serial stdio \
    -no-reboot -kernel "$KERNEL" -initrd "$INITRD" -append "console=ttyS0 reboot=k panic=-1 quiet" \
    -object "memory-backend-memfd,id=mem,size=${MEM}M,share=on" -machine memory-backend=mem \
    -chardev "socket,id=vu,path=$d/vu.sock" -device vhost-user-blk-pci,chardev=vu || rc=$?
  kill -TERM $spid 2>/dev/null || true
  wait $spid || src=$?
  [ "$rc" -eq 0 ] || { tail -15 "$d/console.log" >&2; die "$name: QEMU exited $rc"; }
  [ "$src" -eq 0 ] || { tail -3 "$d/serve.log" >&2; die "$name: lazyblk serve exited $src"; }
  es=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("exit_status"))' "$d/boot.json")
  [ "$es" = 0 ] || { tail -15 "$d/console.log" >&2; die "$name: the guest command exited $es"; }
  grep -q 'lazyblk-coldstart: numpy' "$d/console.log" || die "$name: the guest printed no numpy version"
  cp "$d/console.log" "$WORK/last.console.log"
  LAST=$d
}

# record PROFILE MODE RUN PRE_MS DL_BYTES DL_REQUESTS [STORE]: one results line
record() {
  python3 - "$LAST" "$@" "$LINK_DOWN" "$LINK_UP" "$LINK_CONNS" >>"$WORK/results.jsonl" <<'PY'
import json, sys
d, prof, mode, run, pre, dlb, dlr, store, down, up, conns = sys.argv[1:12]
b = json.load(open(d + '/boot.json'))
s = json.load(open(d + '/stats.json'))
num = lambda x: int(x) if x not in ('', None) else None
r = {'profile': prof, 'mode': mode, 'run': int(run), 'pre_ms': float(pre),
     'boot_ms': b['exit_ms'], 'userspace_ms': b['boot_timer'].get('1'),
     'qemu_cpu_ms': b.get('cpu_ms'), 'load1': float(open(d + '/loadavg').read().split()[0]),
     'wall_ms': float(pre) + b['exit_ms'],
     'download_bytes': num(dlb), 'download_requests': num(dlr),
     'link_down_bytes': num(down), 'link_up_bytes': num(up), 'link_connections': num(conns),
     'stats': {k: s.get(k) for k in ('reads', 'read_bytes', 'blocks_from_chunks',
               'blocks_from_metadata', 'chunk_loads', 'chunk_loaded_bytes', 'chunk_cache_hits',
               'store_read_bytes', 'disk_hits', 'remote_fetches', 'remote_bytes',
               'remote_requests', 'remote_retries', 'fetch_ms_p50', 'fetch_ms_p90',
               'prefetch_planned', 'prefetch_fetched', 'prefetch_fetched_bytes', 'prefetch_hits',
               'prefetch_joins', 'fetch_joins')}}
print(json.dumps(r))
PY
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

for PROF in $LINK; do
  say "profile $PROF: modes $MODES, $RUNS runs"
  # The warm store: a copy of the image's store, kept for every run of this profile.
  WARM=$WORK/warm-store
  rm -rf "$WARM"; cp -a "$IDIR/store" "$WARM"
  cat "$WARM"/chunks/*/* >/dev/null
  TRACE=$WORK/trace.$(echo "$PROF" | tr -c 'a-z0-9\n' _)
  if [ "$HAVE_PREFETCH" = 1 ] && [[ " $MODES " == *" prefetch "* || " $MODES " == *" repacked "* ||
        " $MODES " == *" warmed "* ]]; then
    # hook: one untimed cold boot recording the trace (serve --trace-record FILE)
    say "$PROF: recording the trace (untimed boot)"
    link_start "$PROF" "$NGINX_PORT"
    rm -rf "$WORK/trace-store"
    boot trace "$IDIR/image.layout" "$WORK/trace-store" --remote "http://127.0.0.1:$LINK_PORT/store/" \
      --trace-record "$TRACE"
    link_stop
    [ -s "$TRACE" ] || die "serve --trace-record wrote no trace"
  fi
  if [ "$HAVE_REPACK" = 1 ] && [[ " $MODES " == *" repacked "* ]]; then
    # the image repacked in trace order into a copy of its store (hard links: repack only
    # adds the boot chunks), laid out with mkfs --order TRACE, published at /repacked/
    say "$PROF: lazyblk repack + mkfs --order in trace order"
    rm -rf "$WORK/repacked" "$WORK/www/repacked"
    mkdir -p "$WORK/repacked"
    cp -al "$IDIR/store" "$WORK/repacked/store"
    "$LAZYBLK" repack "$IDIR/image.manifest" --trace "$TRACE" --store "$WORK/repacked/store" \
      -o "$WORK/repacked/image.manifest" >"$WORK/repack.log" 2>&1 ||
      { tail -3 "$WORK/repack.log" >&2; die "lazyblk repack failed"; }
    "$LAZYBLK" mkfs "$WORK/repacked/image.manifest" -o "$WORK/repacked/image.layout" \
      --order "$TRACE" >>"$WORK/repack.log" 2>&1 ||
      { tail -3 "$WORK/repack.log" >&2; die "lazyblk mkfs --order failed"; }
    say "$PROF: $(head -1 "$WORK/repack.log")"
    ln -s "$WORK/repacked/store" "$WORK/www/repacked"
  fi
  read -r -a MLIST <<<"$MODES"
  n=${#MLIST[@]}
  for run in $(seq 1 "$RUNS"); do
    for i in $(seq 0 $((n - 1))); do
      mode=${MLIST[$(( (i + run - 1) % n ))]}
      C=$WORK/cache-store
      rm -rf "$C"
      LINK_DOWN="" LINK_UP="" LINK_CONNS=""
      pre=0 dlb="" dlr=""
      case $mode in
      warm)
        boot warm "$IDIR/image.layout" "$WARM"
        ;;
      cold)
        link_start "$PROF" "$NGINX_PORT"
        boot cold "$IDIR/image.layout" "$C" --remote "http://127.0.0.1:$LINK_PORT/store/"
        link_stop
        ;;
      coldnora)
        link_start "$PROF" "$NGINX_PORT"
        boot coldnora "$IDIR/image.layout" "$C" --remote "http://127.0.0.1:$LINK_PORT/store/" \
          --readahead 0
        link_stop
        ;;
      full)
        link_start "$PROF" "$NGINX_PORT"
        sed "s/LINKPORT/$LINK_PORT/" "$WORK/urls.tmpl" >"$WORK/urls.cfg"
        t0=$(now_ms)
        read -r dlb dlr < <(curl_fetch_all "$WORK/urls.cfg" "$C")
        pre=$(( $(now_ms) - t0 ))
        link_stop
        [ "$dlr" = "$NCHUNKS" ] || die "full: curl fetched $dlr of $NCHUNKS chunks"
        boot full "$IDIR/image.layout" "$C"
        ;;
      warmed)
        # lazyblk warm --trace (the boot set, through the link), then boot; warm's time
        # counts, and what the trace missed is fetched on demand
        link_start "$PROF" "$NGINX_PORT"
        t0=$(now_ms)
        "$LAZYBLK" warm "$IDIR/image.layout" --trace "$TRACE" --store "$C" \
          --remote "http://127.0.0.1:$LINK_PORT/store/" --json >"$WORK/warm.log" 2>&1 ||
          { tail -3 "$WORK/warm.log" >&2; die "lazyblk warm --trace failed"; }
        pre=$(( $(now_ms) - t0 ))
        read -r dlb dlr < <(python3 -c 'import json,sys; w=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(w["fetched_bytes"], w["fetched"])' "$WORK/warm.log")
        boot warmed "$IDIR/image.layout" "$C" --remote "http://127.0.0.1:$LINK_PORT/store/"
        link_stop
        ;;
      prefetch)
        link_start "$PROF" "$NGINX_PORT"
        boot prefetch "$IDIR/image.layout" "$C" --remote "http://127.0.0.1:$LINK_PORT/store/" \
          --prefetch "$TRACE"
        link_stop
        ;;
      repacked)
        link_start "$PROF" "$NGINX_PORT"
        boot repacked "$WORK/repacked/image.layout" "$C" \
          --remote "http://127.0.0.1:$LINK_PORT/repacked/" --prefetch "$TRACE"
        link_stop
        ;;
      esac
      record "$PROF" "$mode" "$run" "$pre" "$dlb" "$dlr" "$C"
      python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
s = r["stats"]
print("bench/coldstart: %s run %d %-8s %7.0f ms (boot %.0f, QEMU CPU %.0f, load %.1f)  fetched %s bytes in %s requests"
      % (r["profile"], r["run"], r["mode"], r["wall_ms"], r["boot_ms"], r["qemu_cpu_ms"], r["load1"],
         r["download_bytes"] if r["download_bytes"] is not None else s["remote_bytes"],
         r["download_requests"] if r["download_requests"] is not None else s["remote_requests"]))
' "$WORK/results.jsonl" >&2
    done
  done
done
cp "$WORK/last.console.log" "$OUT/coldstart.console.log"

# ---- results --------------------------------------------------------------------------------
GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
SKIPPED_S=$(printf '%s\n' "${SKIPPED[@]+"${SKIPPED[@]}"}")
export WORK JSON MD ROOT IDIR RUNS KVER GIT_REV SKIPPED_S NCHUNKS MEM
python3 "$ROOT/bench/lib/coldstart_report.py"
