#!/bin/bash
# The crash-consistency soak (docs/reliability.md): soak.sh CYCLES [nbd|vhost-user|both]
# [--report FILE]. For each transport: lazyblk serve on a fresh overlay; then CYCLES times:
# blkstamp writes stamped blocks and FLUSHes through the transport, the server is killed
# with SIGKILL at a random moment, restarted on the same overlay, and blkstamp check reads
# the region back over NBD: no write acknowledged before the last completed FLUSH lost, no
# acknowledged write lost at all (the process died, not the host), no block torn. Exits 1 at
# the first cycle that fails. With --report, replaces the figures between the soak markers
# of FILE (docs/reliability.md) with this run's.
# SOAK_TAMPER=torn|rollback (tests/integration/t_soak.sh): before the last restart, damage
# the overlay as a broken server would (bytes overwritten inside stamped blocks; the overlay
# put back as it was before the last cycle's writes): the check must then fail.
# Needs $LAZYBLK; blkstamp is found next to it (make builds $(BUILD)/tools/blkstamp).
set -euo pipefail
: "${LAZYBLK:?LAZYBLK must name the lazyblk binary}"
BLKSTAMP=${BLKSTAMP:-$(dirname "$LAZYBLK")/tools/blkstamp}
[ -x "$BLKSTAMP" ] || { echo "soak: $BLKSTAMP not built (make)" >&2; exit 2; }
CYCLES=${1:?usage: soak.sh CYCLES [nbd|vhost-user|both] [--report FILE]}
WHICH=${2:-both}
REPORT=
[ "${3:-}" = --report ] && REPORT=${4:?--report needs a FILE}
FIRST=4096     # the stamped region: 8 MiB from 16 MiB into a 128 MiB disk
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
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null

# start NAME ARGS...: lazyblk serve on the overlay; returns once every transport said it
# is serving (SRV: its pid).
start() {
  local name=$1 want; shift
  want=$(grep -o -- "--nbd\|--vhost-user" <<<"$*" | wc -l)
  "$LAZYBLK" serve "$T/img.layout" --store "$T/store" --overlay "$T/ov" "$@" \
    >"$T/$name.out" 2>"$T/$name.err" &
  SRV=$!
  for _ in $(seq 1 400); do
    [ "$(grep -c "^serving " "$T/$name.out" 2>/dev/null)" -ge "$want" ] && return 0
    kill -0 "$SRV" 2>/dev/null || { cat "$T/$name.err" >&2; fail "$name: server exited"; }
    sleep 0.025
  done
  fail "$name: not serving after 10 s"
}
kill9() {
  { kill -9 "$SRV" && wait "$SRV"; } 2>/dev/null || true
  SRV=
}

# soak TRANSPORT: CYCLES kill/restart cycles; sets FIG (one line of figures)
soak() {
  local tr=$1 args=(--nbd "unix:$T/nbd.sock") wr i t0 secs
  local J=$T/$tr.journal
  rm -f "$T/ov" "$T/ov.state"
  if [ "$tr" = vhost-user ]; then
    args+=(--vhost-user "$T/vu.sock")
    wr=(--vhost-user "$T/vu.sock")
  else
    wr=(--nbd "$T/nbd.sock")
  fi
  t0=$(date +%s)
  start "$tr-0" "${args[@]}"
  "$BLKSTAMP" init --nbd "$T/nbd.sock" --journal "$J" --first $FIRST --blocks $BLOCKS
  for i in $(seq 1 "$CYCLES"); do
    "$BLKSTAMP" write "${wr[@]}" --journal "$J" --seed "$RANDOM$i" --depth $((1 + RANDOM % 16)) \
      >"$T/write.out" 2>"$T/write.err" &
    local w=$!
    local tamper=${SOAK_TAMPER:-}
    [ "$i" -eq "$CYCLES" ] || tamper=
    [ "$tamper" != rollback ] || cp --sparse=always "$T/ov" "$T/ov.state" "$T/old/"
    # a random moment: 0 to 0.8 s after the writer started (the handshake included)
    sleep "0.$(printf %03d $((RANDOM % 800)))"
    [ -z "$tamper" ] || sleep 0.3 # some FLUSHes done: something to lose
    kill9
    wait "$w" || { cat "$T/write.err" >&2; fail "$tr cycle $i: the writer failed"; }
    case $tamper in
      torn) for k in $(seq 0 64 $((BLOCKS - 1))); do
              printf 'torn' | dd of="$T/ov" bs=1 seek=$(( (FIRST + k) * 4096 + 1000 )) \
                conv=notrunc status=none
            done;;
      rollback) cp "$T/old/ov" "$T/old/ov.state" "$T/";;
    esac
    start "$tr-$i" "${args[@]}"
    "$BLKSTAMP" check --nbd "$T/nbd.sock" --journal "$J" >"$T/check.out" 2>"$T/check.err" || {
      cat "$T/write.out" "$T/check.out" "$T/check.err" >&2
      fail "$tr cycle $i: acknowledged writes lost or blocks torn after SIGKILL"
    }
    [ $((i % 20)) -ne 0 ] || echo "$tr: $i cycles: $("$BLKSTAMP" stats --journal "$J")"
  done
  kill9
  secs=$(( $(date +%s) - t0 ))
  FIG="$("$BLKSTAMP" stats --journal "$J") seconds $secs"
  echo "$tr: $FIG"
}

declare -A FIGS
for tr in nbd vhost-user; do
  [ "$WHICH" = both ] || [ "$WHICH" = "$tr" ] || continue
  soak "$tr"
  FIGS[$tr]=$FIG
done

[ -n "$REPORT" ] || exit 0
# the figures as a Markdown table between the markers of REPORT
{
  echo "| transport | cycles | writes acknowledged | of them FUA | FLUSHes | lost after FLUSH or FUA | lost acknowledged | torn | run time |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for tr in nbd vhost-user; do
    [ -n "${FIGS[$tr]:-}" ] || continue
    read -r _ c _ w _ f _ fua _ l _ la _ tn _ s <<<"${FIGS[$tr]}"
    echo "| $tr | $c | $w | $fua | $f | $l | $la | $tn | $s s |"
  done
  echo
  echo "Run on $(date -u +%Y-%m-%d) ($(uname -r), $(nproc) CPUs) by \`make soak SOAK_CYCLES=$CYCLES\`."
} >"$T/table"
python3 - "$REPORT" "$T/table" <<'PYEOF'
import sys
path, table = sys.argv[1], open(sys.argv[2]).read()
text = open(path).read()
a, b = "<!-- soak figures: begin -->\n", "<!-- soak figures: end -->"
i, j = text.index(a) + len(a), text.index(b)
open(path, "w").write(text[:i] + table + text[j:])
PYEOF
echo "soak: figures written to $REPORT"
