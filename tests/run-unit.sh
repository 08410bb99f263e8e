#!/bin/bash
# Run every cmocka unit test binary given; print a summary line; fail if any failed.
set -u
pass=0; fail=0; failed=()
for t in "$@"; do
  if "$t"; then pass=$((pass+1)); else fail=$((fail+1)); failed+=("$(basename "$t")"); fi
done
echo "unit: $pass passed, $fail failed"
[ $fail -eq 0 ] || { echo "failed unit tests: ${failed[*]}"; exit 1; }
