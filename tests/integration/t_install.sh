#!/bin/bash
# make install into a temporary prefix (issue 14, item 17): the binary, lazyblk(1) and a man
# page per subcommand showing exactly the options its --help lists (written from --help, so
# they cannot drift), lazyblk help CMD, a bash completion that completes subcommands and
# options, DESTDIR, make uninstall.
. "$(dirname "$0")/lib/common.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
command -v man >/dev/null || skip "no man (man-db; scripts/deps.sh installs it)"
[ "$(basename "$LAZYBLK")" = lazyblk ] || skip "LAZYBLK is not BUILD/lazyblk: $LAZYBLK"
BDIR=$(cd "$(dirname "$LAZYBLK")" && pwd)
# install the binary under test as it is: -o keeps make from rebuilding it (BUILD= alone
# would not say which flags it was built with, e.g. SAN=1); MANGEN: pages written afresh;
# nothing from a calling make (make test SAN=1: its MAKEFLAGS)
install_to() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$REPO" -o "$BDIR/lazyblk" BUILD="$BDIR" MANGEN="$T/gen" "$@" >"$T/make.log" 2>&1 ||
    { cat "$T/make.log" >&2; die "make $*"; }
}
install_to install PREFIX="$T/usr"
P=$T/usr
cmp -s "$P/bin/lazyblk" "$LAZYBLK" || die "installed binary differs from $LAZYBLK"
[ -x "$P/bin/lazyblk" ] || die "installed binary not executable"

cmds=$("$LAZYBLK" --help | sed -n '/^subcommands:/,/^$/s/^  \([a-z][a-z0-9-]*\) .*/\1/p')
[ "$(wc -w <<<"$cmds")" -ge 14 ] || die "subcommands from lazyblk --help: $cmds"
export MANPATH=$P/share/man MANWIDTH=200
# long options with their short form if any ("-s, --store"), as a sorted list
opts() { grep -oE -- '(-[A-Za-z], )?--[a-z][a-z0-9-]*' | sort -u; }
for c in "" $cmds; do
  page=lazyblk${c:+-$c}
  [ -f "$P/share/man/man1/$page.1" ] || die "no $page.1 installed"
  # shellcheck disable=SC2086 # $c is no word (lazyblk itself) or one
  "$LAZYBLK" $c --help >"$T/help.txt"
  man --warnings -P cat "$page" >"$T/man.txt" 2>"$T/man.err" || die "man $page failed"
  [ ! -s "$T/man.err" ] || die "man $page: $(cat "$T/man.err")"
  for sec in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" "SEE ALSO"; do
    grep -q "^$sec" "$T/man.txt" || die "man $page has no $sec section"
  done
  grep -q "^ *$page - [a-z]" "$T/man.txt" || die "man $page: no NAME line"
  diff <(opts <"$T/help.txt") <(opts <"$T/man.txt") >"$T/diff" ||
    die "man $page and lazyblk $c --help list other options: $(cat "$T/diff")"
  # and every word of --help is there, in its order (headings like "options:" aside)
  python3 - "$T/help.txt" "$T/man.txt" <<'EOF' || die "man $page lacks text of --help"
import re, sys
heading = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*( [A-Za-z0-9_-]+){0,2}:$")
want = []
for line in open(sys.argv[1]):
    if not heading.match(line.rstrip("\n")):
        want += re.sub(r"^(usage|Exit status): ", "", line).split()
have, j = open(sys.argv[2]).read().split(), 0
for k, w in enumerate(want):
    while j < len(have) and have[j] != w:
        j += 1
    if j == len(have):
        sys.exit("'%s' (after '%s') is missing" % (w, " ".join(want[max(0, k - 6):k])))
    j += 1
EOF
  if [ -n "$c" ]; then
    grep -qF "lazyblk(1)" "$T/man.txt" || die "man $page: no SEE ALSO lazyblk(1)"
    grep -qE "^ +$c +[a-z]" <(man -P cat lazyblk) || die "lazyblk(1) does not list $c"
    cmp -s <("$P/bin/lazyblk" help "$c") "$T/help.txt" || die "lazyblk help $c != $c --help"
  fi
  echo "ok: man $page: $(opts <"$T/man.txt" | wc -l) options, as in --help"
done
# sub-subcommands are in their page's synopsis
grep -q "lazyblk cas gc" <(man -P cat lazyblk-cas) || die "lazyblk-cas(1): no 'cas gc'"
grep -q "lazyblk overlay apply" <(man -P cat lazyblk-overlay) || die "lazyblk-overlay(1)"

# the completion: valid bash; completes subcommands, sub-subcommands and long options
comp=$P/share/bash-completion/completions/lazyblk
bash -n "$comp" || die "completion: not valid bash"
complete_words() {
  # shellcheck disable=SC1090 # the installed completion
  bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1));
    _lazyblk; echo "${COMPREPLY[*]}"' _ "$comp" "$P/bin/lazyblk" "$@"
}
[ "$(complete_words se)" = serve ] || die "completion of 'lazyblk se': $(complete_words se)"
[ "$(complete_words -v ov)" = overlay ] || die "completion of 'lazyblk -v ov'"
[ "$(complete_words help imp)" = import ] || die "completion of 'lazyblk help imp'"
[ "$(complete_words cas "")" = "verify stats gc" ] || die "completion of 'lazyblk cas '"
[ "$(complete_words serve --st)" = "--stats-json --store" ] ||
  die "completion of 'lazyblk serve --st': $(complete_words serve --st)"
[ "$(complete_words cas gc --dr)" = "--dry-run" ] || die "completion of 'cas gc --dr'"
[ "$(complete_words import --verb)" = "--verbose" ] || die "completion of 'import --verb'"
echo "ok: completion"

# DESTDIR: everything under DESTDIR/PREFIX; make uninstall removes it all
install_to install DESTDIR="$T/dest" PREFIX=/opt/lazyblk-test
[ -x "$T/dest/opt/lazyblk-test/bin/lazyblk" ] || die "DESTDIR: no binary"
[ -f "$T/dest/opt/lazyblk-test/share/man/man1/lazyblk-serve.1" ] || die "DESTDIR: no man page"
[ ! -e /opt/lazyblk-test ] || die "DESTDIR: wrote outside it"
install_to uninstall DESTDIR="$T/dest" PREFIX=/opt/lazyblk-test
left=$(find "$T/dest" -type f)
[ -z "$left" ] || die "make uninstall left: $left"
echo "install: ok"
