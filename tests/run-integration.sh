#!/bin/bash
# Run every tests/integration/t_*.sh (or those named: run-integration.sh t_a t_b) against
# $LAZYBLK; each script exits 0 (pass), 77 (skipped, with a reason) or anything else (fail).
# Prints "N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${LAZYBLK:?LAZYBLK must name the lazyblk binary}"
export LAZYBLK
pass=0; fail=0; skip=0; failed=()
tests=("$here"/integration/t_*.sh)
if [ $# -gt 0 ]; then
  tests=()
  for n in "$@"; do tests+=("$here/integration/${n%.sh}.sh"); done
fi
for t in "${tests[@]}"; do
  name=$(basename "$t" .sh)
  log=$(mktemp /tmp/lazyblk-$name.XXXXXX.log)
  start=$(date +%s)
  bash "$t" >"$log" 2>&1
  rc=$?
  # a test must leave the machine as it found it: /dev/null replaced by a file once broke
  # every later test and the unit tests
  if [ ! -c /dev/null ]; then
    echo "$name: /dev/null is no longer a character device (restored)" >>"$log"
    rm -f /dev/null && mknod -m 666 /dev/null c 1 3
    [ $rc -eq 0 ] && rc=1
  fi
  secs=$(( $(date +%s) - start ))
  case $rc in
    0)  pass=$((pass+1)); echo "PASS $name (${secs}s)"
        # the test bed's retries are said even when the test passed (lib/nested.sh)
        grep '^retry: ' "$log" | sed 's/^/    /';;
    77) skip=$((skip+1)); echo "SKIP $name: $(tail -1 "$log")";;
    *)  fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (rc=$rc, ${secs}s)"; sed 's/^/    /' "$log" | tail -40;;
  esac
  rm -f "$log"
done
echo "integration: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
