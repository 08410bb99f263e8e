#!/usr/bin/env python3
"""Rewrite fields of a lazyblk manifest and fix its trailing sha256, so that only the
reader's validation stands between the crafted values and their use (docs/formats.md).

usage: mfpatch.py IN OUT [header|entry N|xattr N|chunk N|hole N FIELD=VALUE...]...
       mfpatch.py IN OUT --append-string TEXT   (prints the new string's offset)
"""
import hashlib
import struct
import sys

HDR = ('<8sIIQQQQQQIII20s', ['magic', 'version', 'header_size', 'entry_count',
       'chunk_count', 'hole_count', 'xattr_count', 'strings_size', 'config_off',
       'config_len', 'chunk_size', 'flags', 'reserved'])
ENTRY = ('<QIB3sIIIIIIqqqIIIIQQIIQIIQQ', ['path_off', 'path_len', 'type', 'pad0', 'mode',
         'uid', 'gid', 'rdev_major', 'rdev_minor', 'pad1', 'atime', 'mtime', 'ctime',
         'atime_ns', 'mtime_ns', 'ctime_ns', 'pad2', 'size', 'link_off', 'link_len',
         'xattr_count', 'chunk_first', 'chunk_count', 'hole_count', 'hole_first',
         'xattr_first'])
CHUNK = ('<32sII', ['digest', 'len', 'off'])
HOLE = ('<QQ', ['off', 'len'])
XATTR = ('<QQII', ['name_off', 'value_off', 'name_len', 'value_len'])
assert struct.calcsize(HDR[0]) == 96 and struct.calcsize(ENTRY[0]) == 136
assert struct.calcsize(CHUNK[0]) == 40 and struct.calcsize(XATTR[0]) == 24


def sections(buf):
    h = dict(zip(HDR[1], struct.unpack_from(HDR[0], buf, 0)))
    off = 96
    at = {}
    for kind, fmt, n in (('entry', ENTRY, h['entry_count']), ('chunk', CHUNK, h['chunk_count']),
                         ('hole', HOLE, h['hole_count']), ('xattr', XATTR, h['xattr_count'])):
        at[kind] = (off, fmt, n)
        off += n * struct.calcsize(fmt[0])
    at['strings'] = off
    return h, at


def patch(buf, fmt, base, assigns):
    vals = dict(zip(fmt[1], struct.unpack_from(fmt[0], buf, base)))
    for a in assigns:
        k, v = a.split('=', 1)
        if k not in vals:
            sys.exit('mfpatch: no field ' + k)
        vals[k] = int(v, 0)
    struct.pack_into(fmt[0], buf, base, *[vals[k] for k in fmt[1]])


def main():
    src, dst, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    buf = bytearray(open(src, 'rb').read()[:-32])
    if args[:1] == ['--append-string']:
        h, at = sections(buf)
        print(h['strings_size'])
        s = args[1].encode() + b'\0'
        buf += s
        struct.pack_into('<Q', buf, 48, h['strings_size'] + len(s))
        args = []
    while args:
        h, at = sections(buf)
        if args[0] == 'header':
            base, fmt, args = 0, HDR, args[1:]
        else:
            off, fmt, n = at[args[0]]
            i = int(args[1])
            if i >= n:
                sys.exit('mfpatch: %s %d: only %d' % (args[0], i, n))
            base, args = off + i * struct.calcsize(fmt[0]), args[2:]
        assigns = []
        while args and '=' in args[0]:
            assigns.append(args.pop(0))
        patch(buf, fmt, base, assigns)
    buf += hashlib.sha256(buf).digest()
    open(dst, 'wb').write(buf)


main()
