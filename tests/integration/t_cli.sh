#!/bin/bash
# The command line: --help for every subcommand, usage errors, exit codes.
. "$(dirname "$0")/lib/common.sh"
"$LAZYBLK" --help | grep -q "^usage: lazyblk" || die "lazyblk --help"
"$LAZYBLK" --version | grep -q "^lazyblk " || die "lazyblk --version"
for sub in import manifest cas mkfs export serve run snapshot push; do
  out=$("$LAZYBLK" "$sub" --help) || die "$sub --help failed"
  echo "$out" | grep -q "^usage: lazyblk $sub" || die "$sub --help prints no usage: $out"
  "$LAZYBLK" --help | grep -q "^  $sub " || die "$sub missing from lazyblk --help"
done
rc=0; "$LAZYBLK" >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || die "no subcommand: exit $rc, want 2"
expect_error "unknown subcommand" "unknown subcommand 'frobnicate'" -- "$LAZYBLK" frobnicate
expect_error "unknown global option" "unknown option '--bogus'" -- "$LAZYBLK" --bogus import
expect_error "unknown import option" "unknown option '--bogus'" -- "$LAZYBLK" import --bogus x
expect_error "unknown short option" "unknown option '-Z'" -- "$LAZYBLK" import -Z x
expect_error "option without argument" "option '--store' needs an argument" -- "$LAZYBLK" import x --store
expect_error "cas option without argument" "needs an argument" -- "$LAZYBLK" cas stats --store
expect_error "manifest unknown option" "unknown option '--json5'" -- "$LAZYBLK" manifest show --json5 x
expect_error "manifest without show" "manifest show FILE" -- "$LAZYBLK" manifest list x
expect_error "unknown cas command" "unknown cas command" -- "$LAZYBLK" cas explode --store x
expect_error "import needs SRC" "missing SRC" -- "$LAZYBLK" import --store "$T/s" -o "$T/m"
rc=0; "$LAZYBLK" import >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || die "usage error exit $rc, want 2"
for sub in export serve push; do
  expect_error "$sub unknown option" "unknown option '--bogus'" -- "$LAZYBLK" $sub --bogus x
  expect_error "$sub unknown short option" "unknown option '-Z'" -- "$LAZYBLK" $sub -Z x
  expect_error "$sub --remote without argument" "option '--remote' needs an argument" -- \
    "$LAZYBLK" $sub x --store "$T/s" --remote
  expect_error "$sub bad --fetch-retries" "bad --fetch-retries" -- \
    "$LAZYBLK" $sub x --store "$T/s" --remote http://h/ --fetch-retries -1
  expect_error "$sub bad --fetch-timeout" "bad --fetch-timeout" -- \
    "$LAZYBLK" $sub x --store "$T/s" --remote http://h/ --fetch-timeout 0
  expect_error "$sub bad --fetch-concurrency" "bad --fetch-concurrency" -- \
    "$LAZYBLK" $sub x --store "$T/s" --remote http://h/ --fetch-concurrency 5000
done
expect_error "push --cache-size" "--cache-size is for serve, export and run" -- \
  "$LAZYBLK" push --store "$T/s" --remote http://h/ --cache-size 1G
expect_error "run without --kernel" "missing --kernel" -- "$LAZYBLK" run x
echo "cli: ok"
