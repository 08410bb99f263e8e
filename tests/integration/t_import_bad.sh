#!/bin/bash
# Bad input to import and manifest show: one clear line on stderr, non-zero exit, no
# output file, nothing written outside the store.
. "$(dirname "$0")/lib/common.sh"
mkdir -p "$T/in"
cd "$T/in"
python3 - <<'PY'
import io, tarfile
def tar(name, members):
    with tarfile.open(name, 'w', format=tarfile.PAX_FORMAT) as t:
        for m, data in members:
            t.addfile(m, io.BytesIO(data) if data is not None else None)
def f(path, data=b'x'):
    i = tarfile.TarInfo(path); i.size = len(data); return (i, data)
def d(path):
    i = tarfile.TarInfo(path); i.type = tarfile.DIRTYPE; return (i, None)
def sl(path, target):
    i = tarfile.TarInfo(path); i.type = tarfile.SYMTYPE; i.linkname = target; return (i, None)
def hl(path, target):
    i = tarfile.TarInfo(path); i.type = tarfile.LNKTYPE; i.linkname = target; return (i, None)
tar('dotdot.tar', [f('ok'), f('a/../../evil')])
tar('absolute.tar', [f('/../etc/evil')])
tar('climb.tar', [sl('lnk', '/etc'), f('lnk/passwd')])
tar('climb-rel.tar', [d('a'), sl('a/up', '..'), f('a/up/x')])
tar('hardlink-missing.tar', [hl('h', 'nowhere')])
tar('hardlink-dotdot.tar', [f('x'), hl('h', '../x')])
tar('parent-file.tar', [f('p'), f('p/child')])
tar('good.tar', [f('a', b'A' * 300000), f('b', b'B' * 300000)])
data = open('good.tar', 'rb').read()
open('truncated.tar', 'wb').write(data[:150000])
open('garbage.tar', 'wb').write(b'this is not an archive at all\n' * 100)
PY
gzip -c good.tar >good.tar.gz
python3 - <<'PY'
d = bytearray(open('good.tar.gz', 'rb').read())
for i in range(len(d) // 3, len(d) // 3 + 64): d[i] ^= 0xA5
open('corrupt.tar.gz', 'wb').write(d)
PY
cd "$T"
before=$(find "$T" -path "$T/store" -prune -o -print | sort)

imp() { "$LAZYBLK" import "$T/in/$1" --store "$T/store" -o "$T/out.manifest"; }
expect_error "'..' in a path" "'..'" -- imp dotdot.tar
expect_error "'..' after a leading /" "/../etc/evil: '..' climbs out of the root" -- imp absolute.tar
expect_error "symlinked parent" "symlink" -- imp climb.tar
expect_error "relative symlinked parent" "symlink" -- imp climb-rel.tar
expect_error "hardlink to a missing target" "missing target" -- imp hardlink-missing.tar
expect_error "hardlink with '..'" "'..'" -- imp hardlink-dotdot.tar
expect_error "parent is a file" "not a directory" -- imp parent-file.tar
expect_error "truncated archive" "truncated.tar" -- imp truncated.tar
expect_error "corrupt gzip" "corrupt.tar.gz" -- imp corrupt.tar.gz
expect_error "not an archive" "garbage.tar" -- imp garbage.tar
expect_error "missing source" "No such file" -- imp does-not-exist
expect_error "fifo as source" "not a directory, a tar file" -- bash -c "mkfifo '$T/in/p' && '$LAZYBLK' import '$T/in/p' --store '$T/store' -o '$T/out.manifest'"
[ ! -e "$T/out.manifest" ] || die "an output manifest was written for bad input"
after=$(find "$T" -path "$T/store" -prune -o -print | grep -v '/in/p$' | grep -v '/\.out$\|/\.err$' | sort)
[ "$(echo "$before" | grep -v '/\.out$\|/\.err$')" = "$after" ] || die "files appeared outside the store: $(diff <(echo "$before") <(echo "$after"))"

# usage errors
expect_error "no store" "missing --store" -- "$LAZYBLK" import "$T/in/good.tar" -o "$T/x"
expect_error "no output" "missing -o" -- "$LAZYBLK" import "$T/in/good.tar" --store "$T/store"
expect_error "bad chunk size" "--chunk-size" -- "$LAZYBLK" import "$T/in/good.tar" --store "$T/store" -o "$T/x" --chunk-size 12
expect_error "output in a missing dir" "out.manifest" -- "$LAZYBLK" import "$T/in/good.tar" --store "$T/store" -o "$T/nodir/out.manifest"

# a good import, then broken manifests
"$LAZYBLK" import "$T/in/good.tar" --store "$T/store" -o "$T/good.manifest"
head -c 100 "$T/good.manifest" >"$T/short.manifest"
cp "$T/good.manifest" "$T/flipped.manifest"
python3 -c "
import sys; p=sys.argv[1]; d=bytearray(open(p,'rb').read()); d[120]^=1; open(p,'wb').write(d)" "$T/flipped.manifest"
printf 'NOTAMANIFEST-at-all-just-text-0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789' >"$T/text.manifest"
: >"$T/empty.manifest"
expect_error "bad magic" "bad magic (not a lazyblk manifest)" -- "$LAZYBLK" manifest show "$T/text.manifest"
expect_error "truncated manifest" "truncated" -- "$LAZYBLK" manifest show "$T/short.manifest"
expect_error "flipped byte" "checksum mismatch" -- "$LAZYBLK" manifest show "$T/flipped.manifest"
expect_error "empty manifest" "not a lazyblk manifest" -- "$LAZYBLK" manifest show "$T/empty.manifest"
expect_error "missing manifest" "No such file" -- "$LAZYBLK" manifest show "$T/none.manifest"
expect_error "directory as manifest" "Is a directory" -- "$LAZYBLK" manifest show "$T"
expect_error "cas on a non-store" "not a lazyblk store" -- "$LAZYBLK" cas verify --store "$T/in"
"$LAZYBLK" manifest show "$T/good.manifest" >/dev/null
# a store that fills up: the reason names the store, not the source file read when the chunk
# writers ran out of room (small files, so that packed chunks are what fails)
if [ "$(id -u)" = 0 ] && mkdir -p "$T/full" && mount -t tmpfs -o size=1m tmpfs "$T/full" 2>/dev/null; then
  mkdir -p "$T/many"
  for i in $(seq 300); do head -c 20000 /dev/urandom >"$T/many/f$i"; done
  rc=0
  "$LAZYBLK" import "$T/many" --store "$T/full/store" -o "$T/full.manifest" 2>"$T/full.err" || rc=$?
  umount "$T/full"
  [ "$rc" = 1 ] || die "import into a full store: exit $rc"
  [ "$(wc -l <"$T/full.err")" = 1 ] || die "import into a full store: not one line: $(cat "$T/full.err")"
  grep -q "^lazyblk: import: store $T/full/store: No space left on device$" "$T/full.err" ||
    die "import into a full store blames: $(cat "$T/full.err")"
  echo "ok: full store -> $(cat "$T/full.err")"
else
  echo "SKIP: full store (needs root and a tmpfs mount)"
fi
echo "bad input: all refused cleanly"
