#!/usr/bin/env python3
"""Tars at ext4's limits, written header by header (tarfile is too slow for 65,000
members, and cannot write sparse members).

  mktar_limits.py links OUT N        file /f and N hard links to it (/lNNN/NNNNN)
  mktar_limits.py sparse OUT SIZE    /big: SIZE bytes, a hole then 4096 bytes of data at
                                     its end (a PAX 1.0 sparse member, as GNU tar writes)
"""
import sys


def header(name, typeflag, size=0, linkname='', mode=0o644):
    h = bytearray(512)

    def put(off, length, value):
        b = value.encode() if isinstance(value, str) else value
        assert len(b) <= length, (name, off, value)
        h[off:off + len(b)] = b

    put(0, 100, name)
    put(100, 8, '%07o\0' % mode)
    put(108, 8, '%07o\0' % 0)
    put(116, 8, '%07o\0' % 0)
    put(124, 12, '%011o\0' % size)
    put(136, 12, '%011o\0' % 1700000000)
    put(148, 8, ' ' * 8)
    put(156, 1, typeflag)
    put(157, 100, linkname)
    put(257, 6, 'ustar\0')
    put(263, 2, '00')
    put(148, 8, '%06o\0 ' % sum(h))
    return bytes(h)


def padded(data):
    return data + b'\0' * (-len(data) % 512)


def pax(records):
    body = b''
    for k, v in records:
        rec = ' %s=%s\n' % (k, v)
        n = len(rec) + 1
        while len(str(n)) + len(rec) != n:
            n += 1
        body += (str(n) + rec).encode()
    return header('./PaxHeaders/big', 'x', len(body)) + padded(body)


def links(out, n):
    with open(out, 'wb') as f:
        f.write(header('f', '0', 3) + padded(b'hi\n'))
        for k in range(n):
            if k % 1000 == 0:
                f.write(header('l%03d/' % (k // 1000), '5', mode=0o755))
            f.write(header('l%03d/%05d' % (k // 1000, k), '1', linkname='f'))
        f.write(b'\0' * 1024)


def sparse(out, size):
    data = b'end of a very sparse file\n'.ljust(4096, b'.')
    smap = padded(b'1\n%d\n%d\n' % (size - len(data), len(data)))
    with open(out, 'wb') as f:
        f.write(pax([('GNU.sparse.major', 1), ('GNU.sparse.minor', 0),
                     ('GNU.sparse.name', 'big'), ('GNU.sparse.realsize', size)]))
        f.write(header('GNUSparseFile.0/big', '0', len(smap) + len(data)))
        f.write(smap + padded(data))
        f.write(b'\0' * 1024)


if sys.argv[1] == 'links':
    links(sys.argv[2], int(sys.argv[3]))
else:
    sparse(sys.argv[2], int(sys.argv[3]))
