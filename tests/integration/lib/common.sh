# Sourced by integration tests: temp dir with cleanup, and failure-shape assertions.
set -euo pipefail
: "${LAZYBLK:?LAZYBLK must name the lazyblk binary}"
TESTLIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d /tmp/lazyblk-test.XXXXXX)
trap 'rm -rf "$T"' EXIT

die() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "$*"; exit 77; }

# wait_for [-p PID] [-t SECS] CMD...: run CMD every 0.05 s until it succeeds. Returns 0 then;
# 1 after SECS seconds (default $LAZYBLK_TEST_WAIT, else 120); 2 if PID ended first (and CMD
# still fails). Waiting for a STATE (a file appears, a line is logged, a socket answers, a
# proxy holds a request) with a generous deadline never flakes; a fixed sleep, a short
# deadline or "retry until the timing fits" does (docs/conventions.md, "Tests that never
# flake"). The libraries call it as wait_for_state, so a test that defines a wait_for of its
# own does not break them.
wait_for() { wait_for_state "$@"; }
wait_for_state() {
  local pid="" secs=${LAZYBLK_TEST_WAIT:-120} end
  while [ $# -gt 0 ]; do
    case $1 in
    -p) pid=$2; shift 2 ;;
    -t) secs=$2; shift 2 ;;
    *) break ;;
    esac
  done
  end=$((SECONDS + secs))
  until "$@"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      "$@" && return 0
      return 2
    fi
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.05
  done
}
# tmo SECS: a time limit for `timeout`, scaled for where the test runs (LAZYBLK_TIME_SCALE:
# 10 in the nested VM of lib/nested.sh, where everything runs at TCG speed).
tmo() { echo $(($1 * ${LAZYBLK_TIME_SCALE:-1})); }
# bounded SECS CMD...: CMD (its redirections the caller's) at most SECS seconds, like
# `timeout SECS CMD`: its exit status, or 124 when it took longer. A command that hangs has
# the stacks of its threads shown first (gdb, where there is one), then is killed: where a
# test hangs is then in its log, not only that it did.
bounded() {
  local secs=$1 pid rc=0 end
  shift
  "$@" &
  pid=$!
  end=$((SECONDS + secs))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "bounded: $1 still running after $secs s: its threads:" >&2
    if command -v gdb >/dev/null; then
      timeout 600 gdb -p "$pid" -batch -nx -ex "thread apply all bt" </dev/null 2>&1 |
        grep -E '^Thread|^#' | head -n 300 >&2
    fi
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid" || rc=$?
  return "$rc"
}
# has FILE PATTERN: FILE exists and a line matches the grep pattern (for wait_for).
has() { grep -q -- "$2" "$1" 2>/dev/null; }

# expect_rc WANT CMD...: CMD (its output dropped) must exit with status WANT.
expect_rc() {
  local want=$1 rc=0; shift
  "$@" >/dev/null 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || die "$*: exit $rc, want $want"
}

# expect_error NAME EXPECT_SUBSTRING -- CMD...: CMD must exit non-zero, print exactly one
# line on stderr that starts with "lazyblk: " and contains EXPECT_SUBSTRING.
expect_error() {
  local name=$1 want=$2; shift 3
  local rc=0
  "$@" >"$T/.out" 2>"$T/.err" || rc=$?
  [ "$rc" -ne 0 ] || die "$name: expected failure, got exit 0"
  local lines
  lines=$(wc -l <"$T/.err")
  [ "$lines" -eq 1 ] || { cat "$T/.err" >&2; die "$name: expected 1 stderr line, got $lines"; }
  grep -q '^lazyblk: ' "$T/.err" || die "$name: stderr not prefixed: $(cat "$T/.err")"
  grep -qF -- "$want" "$T/.err" || die "$name: stderr lacks '$want': $(cat "$T/.err")"
  echo "ok: $name -> $(cat "$T/.err")"
}
