#!/bin/bash
# The command line: --help for every subcommand, usage errors, exit codes.
. "$(dirname "$0")/lib/common.sh"
grep -q "^usage: lazyblk" <<<"$("$LAZYBLK" --help)" || die "lazyblk --help"
grep -q "^lazyblk " <<<"$("$LAZYBLK" --version)" || die "lazyblk --version"
for sub in import manifest cas mkfs export serve run snapshot push; do
  out=$("$LAZYBLK" "$sub" --help) || die "$sub --help failed"
  grep -q "^usage: lazyblk $sub" <<<"$out" || die "$sub --help prints no usage: $out"
  grep -q "^  $sub " <<<"$("$LAZYBLK" --help)" || die "$sub missing from lazyblk --help"
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

# -v/--verbose and -q/--quiet are accepted after the subcommand too, among its options, by
# every subcommand (issue 14, item 17)
for sub in import "manifest show" "cas verify" "cas stats" "cas gc" mkfs export serve run \
    initramfs snapshot "overlay show" "overlay apply" commit push "trace show" repack warm; do
  for o in -v -vv --verbose -q --quiet; do
    # shellcheck disable=SC2086 # $sub is a subcommand and its sub-subcommand
    out=$("$LAZYBLK" $sub $o --help 2>&1) || die "lazyblk $sub $o --help failed: $out"
    grep -q "^usage: lazyblk ${sub%% *}" <<<"$out" || die "lazyblk $sub $o --help: $out"
  done
done
tar cf "$T/empty.tar" -T /dev/null
"$LAZYBLK" import "$T/empty.tar" -s "$T/vs" -o "$T/vm1" >/dev/null 2>"$T/warn.err" ||
  die "import of an empty tar failed: $(cat "$T/warn.err")"
grep -q "warning: .*empty archive" "$T/warn.err" || die "no empty-archive warning: $(cat "$T/warn.err")"
for q in -q --quiet; do
  "$LAZYBLK" import "$T/empty.tar" -s "$T/vs" $q -o "$T/vm2" >/dev/null 2>"$T/quiet.err" ||
    die "import $q failed"
  [ ! -s "$T/quiet.err" ] || die "import $q still warns: $(cat "$T/quiet.err")"
done
# -v after the subcommand: run says which kernel it loaded (an info line), only with -v
GUEST=$(dirname "$LAZYBLK")/guest/testguest.elf
if [ -f "$GUEST" ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  for v in "" -v --verbose; do
    # shellcheck disable=SC2086 # $v is no word or one
    timeout 60 "$LAZYBLK" run --kernel "$GUEST" --mem 64 $v </dev/null >/dev/null \
      2>"$T/run$v.err" || true
  done
  ! grep -q "run: kernel .*entry" "$T/run.err" || die "run without -v printed the kernel line"
  grep -q "run: kernel .*entry" "$T/run-v.err" || die "run -v: no kernel line: $(cat "$T/run-v.err")"
  grep -q "run: kernel .*entry" "$T/run--verbose.err" || die "run --verbose: no kernel line"
else
  echo "note: run -v not checked (no $GUEST or no /dev/kvm)"
fi

# lazyblk help [SUBCOMMAND] (issue 14, item 17)
cmp -s <("$LAZYBLK" help) <("$LAZYBLK" --help) || die "lazyblk help differs from --help"
cmp -s <("$LAZYBLK" help --help) <("$LAZYBLK" --help) || die "lazyblk help --help differs"
for sub in import manifest cas mkfs export serve run initramfs snapshot overlay commit push trace \
    repack warm; do
  "$LAZYBLK" help "$sub" >"$T/help.out" || die "lazyblk help $sub failed"
  "$LAZYBLK" "$sub" --help >"$T/dashhelp.out"
  cmp -s "$T/help.out" "$T/dashhelp.out" || die "lazyblk help $sub differs from $sub --help"
done
expect_error "help unknown" "unknown subcommand 'frobnicate'" -- "$LAZYBLK" help frobnicate
expect_rc 2 "$LAZYBLK" help frobnicate
expect_error "help two words" "unexpected argument" -- "$LAZYBLK" help serve run
# sizes: one parser and one message for every size option (docs/design.md)
units="(a number with K, M, G or T: powers of 1024"
expect_size() {  # OPT RANGE CMD...: OPT's bad values exit 2 with the one message
  local opt=$1 range=$2; shift 2
  for bad in 10Q 2GB 1.5G 0x10 -1 ""; do
    expect_error "$2 $opt '$bad'" "$opt: '$bad' is not a size$range $units" -- "$@" "$opt" "$bad"
    expect_rc 2 "$@" "$opt" "$bad"
  done
}
expect_size --mem " from 4M to 1T" "$LAZYBLK" run --kernel "$T/missing"
expect_size --cache-size " of at least 1 byte" "$LAZYBLK" serve x --store "$T/s" --remote http://h/
expect_size --cache-size " of at least 1 byte" "$LAZYBLK" export x --store "$T/s" -o "$T/o" \
  --remote http://h/
expect_size --cache-size " of at least 1 byte" "$LAZYBLK" run x --store "$T/s" --kernel k \
  --remote http://h/
expect_size --cache-size " of at least 1 byte" "$LAZYBLK" warm x --all --store "$T/s" \
  --remote http://h/
expect_size --mem-cache "" "$LAZYBLK" serve x --store "$T/s" --nbd unix:x
expect_size --mem-cache " of at least 1 byte" "$LAZYBLK" export x --store "$T/s" -o "$T/o"
expect_size --chunk-size " from 4K to 64M" "$LAZYBLK" import x --store "$T/s" -o "$T/m"
expect_size --chunk-size " from 4K to 64M" "$LAZYBLK" repack x --trace t --store "$T/s" -o "$T/m"
expect_size --pack-max " from 0 bytes to 64M" "$LAZYBLK" import x --store "$T/s" -o "$T/m"
expect_size --size " of at least 8M" "$LAZYBLK" mkfs x -o "$T/l"
expect_size --journal " from 4M to 4G" "$LAZYBLK" mkfs x -o "$T/l"
# K, M, G and T are taken by every size option: run --mem 1G gets past the options and fails
# on the missing kernel (so do 1024M, 1024 (MiB) and 1GiB)
for mem in 1G 1024M 1024 1GiB 1g; do
  expect_error "run --mem $mem" "$T/missing: No such file or directory" -- \
    "$LAZYBLK" run --kernel "$T/missing" --mem "$mem"
done
# a unit with B and no i is refused, not taken as a power of 1024 (nor of 1000)
expect_error "mkfs --journal 64MB" "--journal: '64MB' is not a size" -- \
  "$LAZYBLK" mkfs x -o "$T/l" --journal 64MB
echo "cli: ok"
