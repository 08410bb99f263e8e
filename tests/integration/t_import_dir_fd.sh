#!/bin/bash
# Directory import reads every entry through descriptors (issue 15, item 10): the
# attributes, the xattrs, the data and the symlink target come from the inode the walk
# found in its parent's descriptor, never from a path looked up again (which a local user
# could redirect between the scan and the read). Shown with a tree whose paths are longer
# than PATH_MAX, where no path can be used at all: the xattrs of a regular file, a
# directory, a symlink, a FIFO, a device and a socket down there are all imported (they
# used to be read with l*xattr(PATH), and the walk refused such paths as "path too long").
# FIFOs and devices are never opened for reading (the FIFO would block). Without /proc
# (a private mount namespace, as root), the xattrs of symlinks and special files are read by
# path after checking it leads to the same inode: the short tree still imports whole.
. "$(dirname "$0")/lib/common.sh"
[ "$(id -u)" = 0 ] || skip "needs root (trusted.* xattrs on symlinks and special files, mknod)"
cd "$T"
python3 - <<'PY'
import os, socket
start = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
def fill(top, levels):
    os.mkdir(top)
    cur = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(levels):          # one level at a time: the path outgrows PATH_MAX
        os.mkdir('a' * 250, dir_fd=cur)
        nxt = os.open('a' * 250, os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
        os.close(cur)
        cur = nxt
    os.fchdir(cur)                   # relative names from here on
    with open('file', 'w') as f:
        f.write('data\n')
    os.setxattr('file', 'user.kind', b'regular')
    os.mkdir('dir')
    os.setxattr('dir', 'user.kind', b'directory')
    os.symlink('file', 'link')
    os.setxattr('link', 'trusted.kind', b'symlink', follow_symlinks=False)
    os.mkfifo('fifo')
    os.setxattr('fifo', 'trusted.kind', b'fifo')
    os.mknod('chr', 0o600 | 0o020000, os.makedev(1, 3))
    os.setxattr('chr', 'trusted.kind', b'device')
    s = socket.socket(socket.AF_UNIX)
    s.bind('sock')
    s.close()
    os.setxattr('sock', 'trusted.kind', b'socket', follow_symlinks=False)
    os.fchdir(start)
    os.close(cur)
fill('long', 18)                     # 18 * 251 bytes: over 4,500
fill('short', 1)
PY
check() { # MANIFEST PREFIX: every kind of entry under PREFIX has its xattr
  "$LAZYBLK" manifest show "$1" | python3 -c '
import json, sys
m = json.load(sys.stdin)
want = {"file": ("user.kind", "regular"), "dir": ("user.kind", "directory"),
        "link": ("trusted.kind", "symlink"), "fifo": ("trusted.kind", "fifo"),
        "chr": ("trusted.kind", "device"), "sock": ("trusted.kind", "socket")}
types = {"file": "file", "dir": "dir", "link": "symlink", "fifo": "fifo", "chr": "char", "sock": "socket"}
seen = 0
for e in m["entries"]:
    name = e["path"].rsplit("/", 1)[-1]
    if name not in want or not e["path"].startswith(sys.argv[1]):
        continue
    got = {x["name"]: x["value"] for x in e.get("xattrs", [])}
    k, v = want[name]
    assert got.get(k) == v, (e["path"][-40:], got)
    assert e["type"] == types[name], (name, e["type"])
    seen += 1
assert seen == len(want), seen
print("ok: xattrs of %d kinds of entry, paths up to %d bytes" % (seen, max(len(e["path"]) for e in m["entries"])))
' "$2"
}
timeout 60 "$LAZYBLK" import long --store store -o long.manifest >/dev/null ||
  die "a tree with paths longer than PATH_MAX did not import"
check long.manifest /aaaa
noproc() { unshare -m sh -c 'umount -l /proc && exec "$0" "$@"' "$LAZYBLK" "$@"; }
if ! unshare -m true 2>/dev/null; then
  echo "no mount namespace here: the /proc-less path is not checked"
elif ! noproc --version >/dev/null 2>&1; then
  echo "this build cannot run without /proc (a sanitizer's): the /proc-less path is not checked"
else
  noproc import short --store store -o short.manifest >/dev/null || die "import without /proc failed"
  check short.manifest /aaaa
fi
