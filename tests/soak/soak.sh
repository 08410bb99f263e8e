#!/bin/bash
# The crash-consistency soak (docs/reliability.md):
#   soak.sh CYCLES [nbd|vhost-user|both] [--mode kill|host|both] [--renew N] [--report FILE]
# For each transport and mode: lazyblk serve on a fresh overlay; then CYCLES times:
# blkstamp writes stamped blocks, FLUSHes (and FUA writes, over NBD) through the transport,
# the server is killed with SIGKILL at a random moment, restarted on the same overlay, and
# blkstamp check reads the region back over NBD: no block torn, no write lost that was
# acknowledged before the last completed FLUSH (or with FUA), and
#   kill  (the process died): no acknowledged write lost at all;
#   host  (a host crash: the server runs with tests/soak/crashsim.so, and after the kill
#         `blkstamp crash` undoes what was written to OVERLAY and OVERLAY.state since their
#         last fdatasync, and the server restarts in another boot, a new boot id from
#         crashsim.so). Even cycles: killed at a random moment, pages undone at random. Odd
#         cycles, the worst case for the states: at the random moment the writer stops,
#         waits for what it has in flight, writes a block never written before and, once
#         that is acknowledged, the server is killed; every page of OVERLAY is undone and
#         none of OVERLAY.state. Unflushed writes may be rolled back, but no block may read
#         as anything it was not given (a first write read as zeros: a failure). Every N
#         host cycles (--renew, 8) the server starts on a new overlay (blkstamp renew): each
#         cycle uses up a few of the blocks never written that the first writes go to.
# After each start, OVERLAY.live must name the boot the server runs in (the simulated one
# in mode host): an interception of the boot id that failed would test nothing.
# Exits 1 at the first cycle that fails. With --report, replaces the figures between the
# soak markers of FILE (docs/reliability.md) with this run's.
# SOAK_TAMPER=torn|rollback|zeroed (tests/integration/t_soak.sh): before the last restart,
# damage the overlay as a broken server would (bytes overwritten inside stamped blocks; the
# overlay put back as it was before the last cycle's writes; every block of the region
# marked dirty in OVERLAY.state, after a crash in which the writer had flushed nothing,
# as the states that reached the disk before the data did): the check must then fail.
# Needs $LAZYBLK; blkstamp and crashsim.so are found next to it ($(BUILD)/tools/).
set -euo pipefail
: "${LAZYBLK:?LAZYBLK must name the lazyblk binary}"
TOOLS=$(cd "$(dirname "$LAZYBLK")" && pwd)/tools
BLKSTAMP=$TOOLS/blkstamp
CRASHSIM=$TOOLS/crashsim.so
usage="usage: soak.sh CYCLES [nbd|vhost-user|both] [--mode kill|host|both] [--renew N] [--report FILE]"
CYCLES=${1:?$usage}
shift
WHICH=both MODES=both REPORT= RENEW=8
[ $# -eq 0 ] || [ "${1#--}" != "$1" ] || { WHICH=$1; shift; }
while [ $# -gt 0 ]; do
  case $1 in
    --mode) MODES=${2:?$usage}; shift 2;;
    --report) REPORT=${2:?$usage}; shift 2;;
    --renew) RENEW=${2:?$usage}; shift 2;;
    *) echo "$usage" >&2; exit 2;;
  esac
done
[ "$WHICH" = both ] && WHICH="nbd vhost-user"
[ "$MODES" = both ] && MODES="kill host"
for f in "$BLKSTAMP" "$CRASHSIM"; do
  [ -e "$f" ] || { echo "soak: $f not built (make)" >&2; exit 2; }
done
FIRST=18432    # the stamped region: 8 MiB from 72 MiB into a 128 MiB disk (in "base")
BLOCKS=2048

T=$(mktemp -d /tmp/lazyblk-soak.XXXXXX)
SRV=
cleanup() {
  [ -z "$SRV" ] || { kill -9 "$SRV" && wait "$SRV"; } 2>/dev/null || true
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "soak: FAIL: $*" >&2; exit 1; }

mkdir -p "$T/src" "$T/old"
echo "crash-consistency soak" >"$T/src/readme"
# the stamped region lies in this file's data: blocks that read as zeros are then torn
head -c $((40 << 20)) /dev/urandom >"$T/src/base"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null

# start MODE NAME ARGS...: lazyblk serve on the overlay (under crashsim.so in mode host);
# returns once every transport said it is serving (SRV: its pid). A server that finds the
# overlay still locked by the one just killed is started again (LINGER counts them): the
# lock goes with the dead process's last reference to the file, which can be dropped a
# moment after the process was reaped (seen with io_uring on: docs/reliability.md).
LINGER=0
start() {
  local mode=$1 name=$2 want env=() try n; shift 2
  want=$(grep -o -- "--nbd\|--vhost-user" <<<"$*" | wc -l)
  # (a sanitizer build wants its runtime first; the shim does not mind)
  [ "$mode" = kill ] || env=(LD_PRELOAD="$CRASHSIM" CRASHSIM_FILE="$T/ov"
                             CRASHSIM_BOOT_ID="$T/boot_id"
                             ASAN_OPTIONS=verify_asan_link_order=0)
  for try in $(seq 1 20); do
    # (the file must be empty before the server starts: a "serving" line left by an
    # earlier server would be taken for this one's)
    rm -f "$T/$name.out" "$T/$name.err"
    env "${env[@]}" "$LAZYBLK" serve "$T/img.layout" --store "$T/store" --overlay "$T/ov" \
      "$@" >"$T/$name.out" 2>"$T/$name.err" &
    SRV=$!
    for _ in $(seq 1 2400); do
      n=$(grep -c "^serving " "$T/$name.out" 2>/dev/null) || n=0
      [ "$n" -ge "$want" ] && return 0
      kill -0 "$SRV" 2>/dev/null || break
      sleep 0.025
    done
    if kill -0 "$SRV" 2>/dev/null; then
      cat "$T/$name.out" "$T/$name.err" >&2
      grep -H . /proc/"$SRV"/task/*/wchan /proc/"$SRV"/task/*/comm >&2 || true
      fail "$name: not serving after 60 s"
    fi
    wait "$SRV" 2>/dev/null || true
    grep -q "overlay is in use by another process" "$T/$name.err" ||
      { cat "$T/$name.err" >&2; fail "$name: server exited"; }
    LINGER=$((LINGER + 1))
    sleep 0.05
  done
  cat "$T/$name.err" >&2
  fail "$name: the overlay stayed locked after the server was killed"
}
kill9() {
  { kill -9 "$SRV" && wait "$SRV"; } 2>/dev/null || true
  SRV=
}

# a simulated host crash: the next server runs in another boot (crashsim.so's boot id)
new_boot() { cat /proc/sys/kernel/random/uuid >"$T/boot_id"; }

# check_boot MODE NAME: the server just started keeps OVERLAY.live for the boot it runs in
# (mode host: the simulated one; kill: the kernel's), else the host cycles would test
# nothing. Not for a state file of version 1 (lazyblk up to 7515cfa, without OVERLAY.live:
# the soak run by hand against that binary).
check_boot() {
  local want got src=/proc/sys/kernel/random/boot_id
  [ "$(od -An -tu4 -j8 -N4 "$T/ov.state" | tr -d ' ')" != 1 ] || return 0
  [ "$1" = kill ] || src=$T/boot_id
  want=$(tr -d -- '-\n' <"$src")
  [ -e "$T/ov.live" ] || fail "$2: no OVERLAY.live after the server started"
  got=$(od -An -tx1 -j32 -N16 "$T/ov.live" | tr -d ' \n')
  [ "$got" = "$want" ] || fail "$2: OVERLAY.live names boot $got, the server runs in $want"
}

# the overlay's files (OVERLAY.live: lazyblk's states now, docs/reliability.md)
OVFILES="ov ov.state ov.live"

# tamper HOW: what a broken server would leave (SOAK_TAMPER)
tamper() {
  local f
  case $1 in
    # every block of the region: those the last writer's flushed writes made dirty among them
    torn) python3 - "$T/ov" "$FIRST" "$BLOCKS" <<'PYEOF'
import sys
path, first, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "r+b") as f:
    for k in range(n):
        f.seek((first + k) * 4096 + 1000)
        f.write(b"torn")
PYEOF
          ;;
    rollback) for f in $OVFILES; do [ ! -e "$T/old/$f" ] || cp "$T/old/$f" "$T/"; done;;
    # every block of the region dirty (state 1: 0x55 a byte of 4 blocks) in OVERLAY.state
    zeroed) head -c $((BLOCKS / 4)) /dev/zero | tr '\0' '\125' |
              dd of="$T/ov.state" bs=1 seek=$((4096 + FIRST / 4)) conv=notrunc status=none;;
  esac
}

# soak TRANSPORT MODE: CYCLES kill/restart cycles; sets FIG (one line of figures)
soak() {
  local tr=$1 mode=$2 args=(--nbd "unix:$T/nbd.sock") wr i t0 secs w tamp f how crashed=()
  local J=$T/$tr.$mode.journal
  rm -f "$T"/ov*
  new_boot
  [ "$mode" = kill ] || crashed=(--crashed)
  if [ "$tr" = vhost-user ]; then
    args+=(--vhost-user "$T/vu.sock")
    wr=(--vhost-user "$T/vu.sock")
  else
    wr=(--nbd "$T/nbd.sock")
  fi
  t0=$(date +%s)
  start "$mode" "$tr-$mode-0" "${args[@]}"
  check_boot "$mode" "$tr/$mode cycle 0"
  "$BLKSTAMP" init --nbd "$T/nbd.sock" --journal "$J" --first $FIRST --blocks $BLOCKS \
    >"$T/init.out"
  grep -q "^init: $BLOCKS blocks, 0 of them zeros$" "$T/init.out" ||
    fail "the region is not inside the file 'base' ($(cat "$T/init.out")): move FIRST"
  for i in $(seq 1 "$CYCLES"); do
    tamp=${SOAK_TAMPER:-}
    [ "$i" -eq "$CYCLES" ] || tamp=
    if [ "$tamp" = rollback ]; then
      for f in $OVFILES; do [ ! -e "$T/$f" ] || cp --sparse=always "$T/$f" "$T/old/"; done
    fi
    how=()
    [ "$mode" = host ] && [ $((i % 2)) -eq 1 ] && [ "$tamp" != zeroed ] && how=(--state-first)
    rm -f "$T/stop"
    "$BLKSTAMP" write "${wr[@]}" --journal "$J" --seed "$RANDOM$i" --depth $((1 + RANDOM % 16)) \
      --stop "$T/stop" >"$T/write.out" 2>"$T/write.err" &
    w=$!
    # a random moment: 0 to 0.8 s after the writer started (the handshake included)
    if [ "$tamp" = zeroed ]; then
      : # at once: the writer has flushed nothing, or next to nothing
    else
      sleep "0.$(printf %03d $((RANDOM % 800)))"
    fi
    case $tamp in
      # something to lose: this writer has completed FLUSHes (so it wrote, and the journal
      # holds flushed writes newer than the files kept for rollback)
      torn|rollback)
        for _ in $(seq 1 4800); do
          [ "$("$BLKSTAMP" flushes --journal "$J")" -ge 2 ] && break
          kill -0 "$w" 2>/dev/null || break
          sleep 0.025
        done
        [ "$("$BLKSTAMP" flushes --journal "$J")" -ge 2 ] ||
          fail "$tr/$mode cycle $i: the writer completed no 2 FLUSHes ($(cat "$T/write.err"))";;
    esac
    if [ ${#how[@]} -gt 0 ]; then
      # the worst case: a first write acknowledged last, nothing in flight
      : >"$T/stop"
      for _ in $(seq 1 2400); do
        grep -q "^stopped$" "$T/write.out" || ! kill -0 "$w" 2>/dev/null && break
        sleep 0.025
      done
      grep -q "^stopped$" "$T/write.out" ||
        fail "$tr/$mode cycle $i: the writer did not stop ($(cat "$T/write.err"))"
    fi
    kill9
    wait "$w" || { cat "$T/write.err" >&2; fail "$tr/$mode cycle $i: the writer failed"; }
    if [ "$mode" = host ]; then
      "$BLKSTAMP" crash --overlay "$T/ov" --seed "$RANDOM$i" "${how[@]}" >"$T/crash.out"
      new_boot
    fi
    [ -z "$tamp" ] || tamper "$tamp"
    start "$mode" "$tr-$mode-$i" "${args[@]}"
    check_boot "$mode" "$tr/$mode cycle $i"
    "$BLKSTAMP" check --nbd "$T/nbd.sock" --journal "$J" "${crashed[@]}" \
      >"$T/check.out" 2>"$T/check.err" || {
      cat "$T/write.out" "$T/crash.out" "$T/check.out" "$T/check.err" "$T/$tr-$mode-$i.err" \
        >&2 2>/dev/null
      if kill -0 "$SRV" 2>/dev/null; then
        echo "soak: the server is still running" >&2
      else
        local rc=0
        wait "$SRV" || rc=$?
        SRV=
        echo "soak: the server exited with status $rc" >&2
      fi
      ls -l "$T" >&2
      fail "$tr/$mode cycle $i: acknowledged writes lost, blocks torn or read as zeros"
    }
    [ $((i % 50)) -ne 0 ] || echo "$tr/$mode: $i cycles: $("$BLKSTAMP" stats --journal "$J")"
    # a new overlay every RENEW host cycles: blocks never written for the first writes
    if [ "$mode" = host ] && [ $((i % RENEW)) -eq 0 ] && [ "$i" -lt "$CYCLES" ]; then
      kill9
      rm -f "$T"/ov*
      "$BLKSTAMP" renew --journal "$J"
      start "$mode" "$tr-$mode-$i-new" "${args[@]}"
      check_boot "$mode" "$tr/$mode cycle $i, a new overlay"
    fi
  done
  kill9
  secs=$(( $(date +%s) - t0 ))
  FIG="$("$BLKSTAMP" stats --journal "$J") seconds $secs relocked $LINGER"
  LINGER=0
  echo "$tr/$mode: $FIG"
}

declare -A FIGS
for tr in $WHICH; do
  for mode in $MODES; do
    soak "$tr" "$mode"
    FIGS[$tr/$mode]=$FIG
  done
done

[ -n "$REPORT" ] || exit 0
# the figures as rows of a Markdown table between the markers of REPORT: this run's rows
# replace those of the same transport and crash, the others stay
for tr in $WHICH; do
  for mode in $MODES; do
    read -r _ c _ w _ f _ fua _ l _ la _ tn _ z _ s _ lk <<<"${FIGS[$tr/$mode]}"
    [ "$mode" = kill ] && m="SIGKILL" || m="SIGKILL + host (simulated)"
    echo "| $tr | $m | $c | $w | $fua | $f | $l | $la | $tn | $z | $s s | $lk | $(date -u +%F) |"
  done
done >"$T/rows"
python3 - "$REPORT" "$T/rows" "$(uname -r), $(nproc) CPUs" <<'PYEOF'
import sys
path, rows, machine = sys.argv[1], open(sys.argv[2]).read().splitlines(), sys.argv[3]
head = ("| transport | crash | cycles | writes acknowledged | of them FUA | FLUSHes | "
        "lost after FLUSH or FUA | unflushed writes rolled back | torn | "
        "first writes read as zeros | run time | restarts refused (lock) | run on |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
key = lambda r: tuple(c.strip() for c in r.split("|")[1:3])
text = open(path).read()
a, b = "<!-- soak figures: begin -->\n", "<!-- soak figures: end -->"
i, j = text.index(a) + len(a), text.index(b)
old = [r for r in text[i:j].splitlines() if r.startswith("| ") and r not in head
       and len(r.split("|")) == len(head[0].split("|"))]
new = {key(r): r for r in old}
new.update({key(r): r for r in rows})
order = [(t, m) for t in ("nbd", "vhost-user") for m in ("SIGKILL", "SIGKILL + host (simulated)")]
table = "\n".join(head + tuple(new[k] for k in order if k in new))
table += ("\n\nBy `tests/soak/soak.sh` (`make soak SOAK_CYCLES=N`) on " + machine + ".\n")
open(path, "w").write(text[:i] + table + text[j:])
PYEOF
echo "soak: figures written to $REPORT"
