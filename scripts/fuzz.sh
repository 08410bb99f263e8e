#!/bin/bash
# Run the fuzz targets (fuzz/README.md); `make fuzz` and `make fuzz-smoke` call it.
# Usage: scripts/fuzz.sh run SECONDS BIN...    fuzz each target SECONDS seconds, one after the
#                                              other, from its corpus; print executions
#        scripts/fuzz.sh smoke SECONDS BIN...  replay each target's corpus and regressions,
#                                              then fuzz it SECONDS seconds
# Target T (binary .../fuzz_T) reads fuzz/corpus/T/ and fuzz/regressions/T/; what it finds
# goes to build/fuzz/corpus/T/ (new inputs) and build/fuzz/crashes/T/ (crashes, leaks,
# timeouts, out-of-memory inputs), its log to build/fuzz/logs/T.log. Exit 1 if any target
# found something. Scratch files go to a private directory under /dev/shm (or $TMPDIR).
set -euo pipefail
mode=${1:-}
secs=${2:-}
shift 2 || true
if [[ ! "$mode" =~ ^(run|smoke)$ ]] || [[ ! "$secs" =~ ^[0-9]+$ ]] || [ $# -eq 0 ]; then
  echo "usage: scripts/fuzz.sh run|smoke SECONDS BIN..." >&2
  exit 2
fi
out=build/fuzz
base=/dev/shm
[ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$base/lazyblk-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# -rss_limit_mb: an input that makes a target use more is a finding (a missing bound)
opts=(-print_final_stats=1 -timeout=20 -rss_limit_mb=2048 -max_len=131072)
failed=()
printf '%-16s %12s %8s  %s\n' target executions seconds result
for bin in "$@"; do
  t=$(basename "$bin")
  t=${t#fuzz_}
  corpus=fuzz/corpus/$t
  reg=fuzz/regressions/$t
  work=$out/corpus/$t
  crashes=$out/crashes/$t
  log=$out/logs/$t.log
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  [ -d "$corpus" ] || { echo "$t: no corpus $corpus" >&2; exit 1; }
  dirs=("$corpus")
  [ -d "$reg" ] && dirs+=("$reg")
  result=ok
  start=$SECONDS
  : >"$log"
  if [ "$mode" = smoke ]; then
    # every committed input once: a regression that crashes again fails here
    TMPDIR=$scratch "$bin" "${opts[@]}" -runs=0 -artifact_prefix="$crashes/" \
      "${dirs[@]}" >>"$log" 2>&1 || result=FOUND
  fi
  if [ "$result" = ok ] && [ "$secs" -gt 0 ]; then
    if [ "$mode" = smoke ]; then
      # a fixed seed and a fresh work corpus: the same inputs in the same order every run, so
      # a finding here is the code's, reproducible, and not the luck of the draw
      work=$scratch/corpus-$t
      mkdir -p "$work"
      seed=(-seed=1)
    else
      seed=()
    fi
    TMPDIR=$scratch nice -n 19 "$bin" "${opts[@]}" "${seed[@]}" -max_total_time="$secs" \
      -artifact_prefix="$crashes/" "$work" "${dirs[@]}" >>"$log" 2>&1 || result=FOUND
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{s += $2} END {print s + 0}' || true)
  [ "$result" = ok ] || { failed+=("$t"); result="FOUND: see $log and $crashes/"; }
  printf '%-16s %12s %8s  %s\n' "$t" "$execs" $((SECONDS - start)) "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]}" >&2
  exit 1
fi
