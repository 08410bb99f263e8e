#!/bin/bash
# Paths deeper than the import's limit (IMPORT_MAX_DEPTH, 2048 components): a directory tree
# 2,100 levels deep is refused with one line naming the limit, as a tar member that deep is,
# and a tree exactly 2048 levels deep imports. The walk used to recurse with a 4 KiB frame
# per level and overflowed an 8 MiB stack at about 2,030 levels (SIGSEGV), given enough
# descriptors: it holds one per level.
. "$(dirname "$0")/lib/common.sh"
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt 4096 ]; then
  skip "ulimit -Hn is $hard: a walk 2,100 levels deep needs a descriptor per level"
fi
ulimit -n 4096
cd "$T"
python3 - <<'PY'
import io, os, tarfile
def tree(top, levels, leaf):
    # paths longer than PATH_MAX: made one level at a time, relative to a descriptor
    os.mkdir(top)
    cur = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):
        os.mkdir('d', dir_fd=cur)
        nxt = os.open('d', os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
        os.close(cur)
        cur = nxt
    if leaf:
        fd = os.open('f', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=cur)
        os.write(fd, b'leaf\n')
        os.close(fd)
    os.close(cur)
tree('deep', 2100, False)
tree('limit', 2047, True)          # /d/.../d/f: 2048 components
with tarfile.open('deep.tar', 'w', format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo('d/' * 2048 + 'f')   # 2049 components
    i.size = 1
    t.addfile(i, io.BytesIO(b'x'))
PY
imp() { "$LAZYBLK" import "$1" --store store -o out.manifest; }
expect_error "a tree 2,100 levels deep" "path deeper than 2048 levels (the import's limit)" -- imp deep
[ ! -e out.manifest ] || die "a manifest was written for a tree deeper than the limit"
expect_error "a tar member 2,049 components deep" \
  "path deeper than 2048 levels (the import's limit)" -- imp deep.tar
imp limit >/dev/null || die "a tree 2048 levels deep was refused"
n=$("$LAZYBLK" manifest show out.manifest | grep -c '"path":"/d' || true)
[ "$n" -eq 2048 ] || die "the 2048-level tree has $n entries under /d, want 2048"
echo "ok: a tree 2048 levels deep imports"
