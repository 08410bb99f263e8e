#!/usr/bin/env python3
"""Compare a directory tree with a lazyblk manifest (manifest show JSON), field by field.

usage: check_tree.py DIR MANIFEST.json STORE [--no-atime] [--no-ctime] [--no-root] [--mounted]
--mounted: DIR is a filesystem made from the manifest: its /lost+found may be extra.
Checks, for every path: type, mode (07777), uid, gid, mtime/ctime (s + ns), size, rdev,
symlink target, every xattr (name and exact bytes), holes (SEEK_DATA/SEEK_HOLE),
content (every piece compared with the bytes at its offset in the chunk, decompressed
from STORE with the zstd command line tool), and hardlink groups
(first path in depth-first order is a file, the others hardlinks to it).
"""
import collections, hashlib, json, os, stat, subprocess, sys

class Chunks:
    """Decompressed chunks from the store, verified against their names (small LRU)."""
    def __init__(self, store):
        self.store, self.cache = store, collections.OrderedDict()
    def get(self, hexd):
        if hexd in self.cache:
            self.cache.move_to_end(hexd)
            return self.cache[hexd]
        path = os.path.join(self.store, 'chunks', hexd[:2], hexd)
        data = subprocess.run(['zstd', '-dc', path], check=True, stdout=subprocess.PIPE).stdout
        if hashlib.sha256(data).hexdigest() != hexd:
            raise SystemExit('chunk %s does not match its name' % hexd)
        self.cache[hexd] = data
        if len(self.cache) > 64:
            self.cache.popitem(last=False)
        return data

def b(entry, key):
    if key in entry:
        return entry[key].encode('utf-8', 'surrogateescape')
    if key + '_hex' in entry:
        return bytes.fromhex(entry[key + '_hex'])
    return None

def dfs_key(p):
    return p.replace(b'/', b'\x00')

def data_ranges(fd, size):
    off, out = 0, []
    while off < size:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        if d >= size:
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        h = min(h, size)
        out.append((d, h))
        off = h
    return out

def main():
    root = os.fsencode(sys.argv[1].rstrip('/') or '/')
    man = json.load(open(sys.argv[2]))
    chunks_from = Chunks(sys.argv[3])
    opts = set(sys.argv[4:])
    ents = {b(e, 'path'): e for e in man['entries']}
    errors = []
    def err(p, msg):
        errors.append('%s: %s' % (p.decode('utf-8', 'backslashreplace'), msg))
    # walk the source, taking each stat before reading anything (reading moves atimes)
    stats, paths, todo = {}, [], [b'/']
    while todo:
        rel = todo.pop()
        full = root + rel if rel != b'/' else root
        st = os.lstat(full)
        stats[rel] = st
        paths.append(rel)
        if stat.S_ISDIR(st.st_mode):
            for n in os.listdir(full):
                todo.append(rel.rstrip(b'/') + b'/' + n)
    if '--mounted' in opts and b'/lost+found' not in ents:
        paths = [p for p in paths if p != b'/lost+found' and not p.startswith(b'/lost+found/')]
    paths.sort(key=dfs_key)
    got = sorted(ents.keys(), key=dfs_key)
    if set(paths) != set(got):
        missing = sorted(set(paths) - set(got))[:5]
        extra = sorted(set(got) - set(paths))[:5]
        err(b'*', 'path sets differ: missing %r extra %r' % (missing, extra))
    if [e for e in got] != [b(e, 'path') for e in man['entries']]:
        err(b'*', 'manifest entries are not in depth-first order')
    first_of = {}
    types = {stat.S_IFREG: 'file', stat.S_IFDIR: 'dir', stat.S_IFLNK: 'symlink',
             stat.S_IFCHR: 'char', stat.S_IFBLK: 'block', stat.S_IFIFO: 'fifo',
             stat.S_IFSOCK: 'socket'}
    checked = 0
    for p in paths:
        if p not in ents:
            continue
        e = ents[p]
        if p == b'/' and '--no-root' in opts:
            continue
        full = root + p if p != b'/' else root
        st = stats[p]
        t = types[stat.S_IFMT(st.st_mode)]
        key = (st.st_dev, st.st_ino)
        if t != 'dir' and st.st_nlink > 1:
            if key in first_of:
                if e['type'] != 'hardlink' or b(e, 'link') != first_of[key]:
                    err(p, 'expected hardlink to %r, got %s %r' % (first_of[key], e['type'], b(e, 'link')))
                checked += 1
                continue
            first_of[key] = p
        if e['type'] != t:
            err(p, 'type %s != %s' % (e['type'], t)); continue
        if int(e['mode'], 8) != stat.S_IMODE(st.st_mode):
            err(p, 'mode %s != %o' % (e['mode'], stat.S_IMODE(st.st_mode)))
        if e['uid'] != st.st_uid or e['gid'] != st.st_gid:
            err(p, 'owner %d:%d != %d:%d' % (e['uid'], e['gid'], st.st_uid, st.st_gid))
        # reading a symlink moves its atime (relatime); compare it for the rest
        no_atime = '--no-atime' in opts or t == 'symlink'
        tkeys = ('mtime',) + (() if '--no-ctime' in opts else ('ctime',))
        for k in tkeys + (() if no_atime else ('atime',)):
            ns = getattr(st, 'st_' + k + '_ns')
            if e[k] * 10**9 + e[k + '_ns'] != ns:
                err(p, '%s %d.%09d != %d' % (k, e[k], e[k + '_ns'], ns))
        if t in ('char', 'block'):
            if e.get('rdev') != [os.major(st.st_rdev), os.minor(st.st_rdev)]:
                err(p, 'rdev %r != %d,%d' % (e.get('rdev'), os.major(st.st_rdev), os.minor(st.st_rdev)))
        if t == 'symlink':
            if b(e, 'link') != os.readlink(full):
                err(p, 'symlink target differs')
        want_x = {}
        for n in os.listxattr(full, follow_symlinks=False):
            want_x[os.fsencode(n)] = os.getxattr(full, n, follow_symlinks=False)
        got_x = {b(x, 'name'): b(x, 'value') for x in e.get('xattrs', [])}
        if want_x != got_x:
            err(p, 'xattrs %r != %r' % (got_x, want_x))
        if t == 'file':
            if e['size'] != st.st_size:
                err(p, 'size %d != %d' % (e['size'], st.st_size))
            fd = os.open(full, os.O_RDONLY)
            try:
                rng = data_ranges(fd, st.st_size)
                holes, pos = [], 0
                for d, h in rng:
                    if d > pos: holes.append([pos, d - pos])
                    pos = h
                if pos < st.st_size: holes.append([pos, st.st_size - pos])
                if holes != e.get('holes', []):
                    err(p, 'holes %r != %r' % (e.get('holes', []), holes))
                # content: chunks cover the data ranges in order, never spanning a hole
                chunks = list(e['chunks'])
                for d, h in rng:
                    off = d
                    while off < h:
                        if not chunks:
                            err(p, 'chunks end early'); break
                        c = chunks.pop(0)
                        data = os.pread(fd, c['len'], off)
                        chunk = chunks_from.get(c['digest'])
                        if chunk[c['off']:c['off'] + c['len']] != data:
                            err(p, 'piece at %d differs' % off); break
                        off += c['len']
                if chunks:
                    err(p, '%d extra chunks' % len(chunks))
            finally:
                os.close(fd)
        checked += 1
    for x in errors[:30]:
        print(x, file=sys.stderr)
    if errors:
        print('%d differences' % len(errors), file=sys.stderr)
        sys.exit(1)
    print('checked %d entries: all fields match' % checked)

main()
