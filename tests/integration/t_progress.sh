#!/bin/bash
# Progress lines: on a terminal (a pty from script(1)) import, export, push, warm, cas gc and
# cas verify each draw a progress line (redrawn in place: "\r\033[K..."); an import at
# --level 19 says how much it has read and stored while it reads a large file and while its
# last chunks are compressed. Off a terminal nothing but the summary is printed; -p forces
# plain lines (one a second, no \r) and --no-progress turns them off on a terminal.
. "$(dirname "$0")/lib/common.sh"
command -v script >/dev/null || skip "t_progress: script (util-linux) is not installed"

# on_tty NAME CMD...: run CMD under a pty, its output (stdout and stderr) in $T/NAME.tty.
on_tty() {
  local name=$1 cmd="" a
  shift
  for a in "$@"; do cmd+=" $(printf '%q' "$a")"; done
  script -qec "$cmd" /dev/null >"$T/$name.tty" </dev/null || die "$name: failed on a pty"
}
# tty_lines NAME: the text of $T/NAME.tty a line per \r or \n, without the ESC[K.
tty_lines() { tr '\r' '\n' <"$T/$1.tty" | sed 's/^\x1b\[K//'; }
# has_progress NAME ERE: a line redrawn in place (\r ESC[K) whose text matches ERE.
has_progress() {
  grep -Eq "$2" < <(tty_lines "$1") ||
    { cat -v "$T/$1.tty" >&2; die "$1: no progress line matching '$2'"; }
  grep -q $'\r\x1b\\[K' "$T/$1.tty" || die "$1: the progress line is not redrawn in place"
  echo "ok: $1 progress"
}

mkdir -p "$T/src/d"
head -c 3M /dev/urandom | base64 >"$T/src/big.txt"   # ~4 MiB: several chunks, slow at 19
for i in 1 2 3; do head -c 20000 /dev/urandom >"$T/src/d/f$i"; done

# ---- import --level 19: read and stored, and the last chunks' compression
on_tty import "$LAZYBLK" import "$T/src" --store "$T/s" -o "$T/m" --level 19 -j 1
has_progress import "^importing .*/src: [0-9]+ files, [0-9.]+ [KMG]?i?B read, [0-9.]+ [KMG]?i?B stored"
has_progress import "stored, compressing: [0-9]+ of [0-9]+ chunks \([0-9]+%\)"
grep -q "^imported " < <(tty_lines import) || die "import: no summary on a pty"
# a tar file: the share of it read, as a percentage
tar -C "$T/src" -czf "$T/src.tar.gz" .
on_tty tar "$LAZYBLK" import "$T/src.tar.gz" --store "$T/st" -o "$T/mt"
has_progress tar "^importing .*/src.tar.gz: [0-9]+%, [0-9]+ files, .* read, .* stored"

# off a terminal: the summary only, nothing on stderr
"$LAZYBLK" import "$T/src" --store "$T/s2" -o "$T/m2" >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] || die "import off a terminal wrote to stderr: $(cat -v "$T/err")"
[ "$(wc -l <"$T/out")" -eq 2 ] || die "import: summary is not 2 lines: $(cat "$T/out")"
grep -q $'\r' "$T/out" && die "import off a terminal printed a progress line"
# -p: plain lines off a terminal; --no-progress: none on one
"$LAZYBLK" -p import "$T/src" --store "$T/s3" -o "$T/m3" >"$T/out" 2>"$T/err"
grep -Eq "^importing .*: [0-9]+ files, .* read, .* stored" "$T/err" ||
  die "-p: no plain progress line: $(cat -v "$T/err")"
grep -q $'\r' "$T/err" && die "-p off a terminal: \\r in the lines"
[ "$(wc -l <"$T/out")" -eq 2 ] || die "-p: summary changed"
on_tty noprog "$LAZYBLK" --no-progress import "$T/src" --store "$T/s4" -o "$T/m4"
grep -q "importing" "$T/noprog.tty" && die "--no-progress: a progress line on a terminal"
# after the subcommand too, as qemu-img -p: import -p, export --progress, import --no-progress
"$LAZYBLK" import "$T/src" -p --store "$T/s5" -o "$T/m5" >"$T/out" 2>"$T/err"
grep -Eq "^importing .*: [0-9]+ files" "$T/err" || die "import -p: no progress line: $(cat -v "$T/err")"
on_tty noprog2 "$LAZYBLK" import "$T/src" --no-progress --store "$T/s6" -o "$T/m6"
grep -q "importing" "$T/noprog2.tty" && die "import --no-progress: a progress line on a terminal"
echo "ok: off a terminal the summary only; -p and --no-progress, before or after the subcommand"

# ---- export
"$LAZYBLK" mkfs "$T/m" -o "$T/l" >/dev/null
on_tty export "$LAZYBLK" export "$T/l" --store "$T/s" -o "$T/disk.raw"
has_progress export "^exporting: [0-9]+% \("
"$LAZYBLK" export "$T/l" --store "$T/s" -o "$T/disk2.raw" >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] && [ "$(wc -l <"$T/out")" -eq 1 ] || die "export off a terminal"

# ---- cas verify, cas gc
on_tty verify "$LAZYBLK" cas verify --store "$T/s"
has_progress verify "^verifying: [0-9]+% \([0-9]+ of [0-9]+ chunks and plain copies\)"
on_tty gc "$LAZYBLK" cas gc --store "$T/s" --keep "$T/l" --grace 0
has_progress gc "^collecting: [0-9]+% \([0-9]+ of [0-9]+ chunks and plain copies\)"
"$LAZYBLK" cas verify --store "$T/s" >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] && [ "$(wc -l <"$T/out")" -eq 2 ] || die "verify off a terminal"
"$LAZYBLK" cas gc --store "$T/s" --keep "$T/l" >"$T/out" 2>"$T/err"
[ ! -s "$T/err" ] && [ "$(wc -l <"$T/out")" -eq 1 ] || die "gc off a terminal"

# ---- push and warm (a private nginx with WebDAV)
if command -v nginx >/dev/null; then
  . "$TESTLIB/remote.sh"
  mkdir -p "$T/www"
  start_nginx "$T/www" --dav
  on_tty push "$LAZYBLK" push --store "$T/s" --remote "$NGINX_URL"
  has_progress push "^pushing: [0-9]+ of [0-9]+ chunks"
  on_tty warm "$LAZYBLK" warm "$T/l" --all --store "$T/cache" --remote "$NGINX_URL"
  has_progress warm "^warming: [0-9]+ of [0-9]+ chunks"
  "$LAZYBLK" warm "$T/l" --all --store "$T/cache2" --remote "$NGINX_URL" >"$T/out" 2>"$T/err"
  [ ! -s "$T/err" ] && [ "$(wc -l <"$T/out")" -eq 1 ] || die "warm off a terminal"
else
  echo "push, warm: skipped (nginx is not installed)"
fi
echo "t_progress: ok"
