#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The test guest's disk patterns (see vblk.c).

  disk.py make FILE [SECTORS]      write pattern A (default 16384 sectors = 8 MiB)
  disk.py check FILE [SCRATCH] [--discard-zeroes] [--log GUEST_OUTPUT] [--ignore SECTOR]...
                                   after a raw-mode run: the guest's writes are there,
                                   zeroed ranges are zero, everything else is still A.
                                   --discard-zeroes: DISCARDed ranges must be zeros (else
                                   they may be either); --log: the two-range DISCARD is only
                                   expected when the guest reports it; --ignore: a sector
                                   that may differ (QEMU as the reference device lets the
                                   hostile OUT from unassigned memory land on sector 8)
  disk.py find DISK FILE            the first sector where FILE's first 4 KiB appear in DISK
  disk.py sums DISK SCRATCH 1|2    image mode: testguest.sumN= arguments (FNV-1a 64) over
                                   regions of DISK (an export of the image): 1: before the
                                   guest's changes; 2: the changed regions as the guest left
                                   them (for a second run on the same overlay)
  disk.py counts DISK [LBA]        count mode: the valid records (count.c) in the 64 sectors
                                   at LBA (default 0), one "seq S count N" line each, by seq

Pattern A: the little-endian u64 at every 8-byte-aligned byte offset OFF is
(OFF // 8) ^ 0x5a5a5a5a5a5a5a5a; pattern B (written by the guest) uses 0xc3c3c3c3c3c3c3c3.
"""
import sys
from array import array

A = 0x5A5A5A5A5A5A5A5A
B = 0xC3C3C3C3C3C3C3C3


def pattern(first_word, nwords, x):
    return array("Q", (w ^ x for w in range(first_word, first_word + nwords)))


def make(path, sectors):
    with open(path, "wb") as f:
        step = 2048  # sectors per write
        for s in range(0, sectors, step):
            n = min(step, sectors - s)
            f.write(pattern(s * 64, n * 64, A).tobytes())


def expected_ranges(scratch, discard_zeroes, two_ranges):
    """(first sector, count, 'B' | 'Z') changed by the guest."""
    r = [(scratch, 9, "B"), (scratch + 1001, 12, "B"),
         (scratch + 3001, 23, "Z"), (scratch + 3200, 16, "Z")]
    if discard_zeroes:
        r += [(scratch + 2048, 64, "Z")]
        if two_ranges:
            r += [(scratch + 4096, 8, "Z"), (scratch + 4160, 8, "Z")]
    return r


def check(path, scratch, discard_zeroes, log, ignore):
    data = open(path, "rb").read()
    sectors = len(data) // 512
    two_ranges = True
    if log is not None:
        two_ranges = "guest: DISCARD 2 ranges: ok" in open(log, errors="replace").read()
    want = bytearray(pattern(0, sectors * 64, A).tobytes())
    for first, n, kind in expected_ranges(scratch, discard_zeroes, two_ranges):
        lo, hi = first * 512, (first + n) * 512
        want[lo:hi] = bytes(hi - lo) if kind == "Z" else pattern(first * 64, n * 64, B).tobytes()
    if not discard_zeroes:  # discarded ranges may read either way: take them from the disk
        for first, n in ((scratch + 2048, 64), (scratch + 4096, 8), (scratch + 4160, 8)):
            lo, hi = first * 512, (first + n) * 512
            if data[lo:hi] == bytes(hi - lo):
                want[lo:hi] = data[lo:hi]
    for s in ignore:
        want[s * 512:(s + 1) * 512] = data[s * 512:(s + 1) * 512]
    if data == bytes(want):
        print(f"disk: ok ({sectors} sectors: guest writes present, zeroed ranges zero, rest pattern A)")
        return 0
    bad = [s for s in range(sectors) if data[s * 512:(s + 1) * 512] != want[s * 512:(s + 1) * 512]]
    print(f"disk: {len(bad)} sector(s) differ from what the guest wrote, first {bad[:8]}")
    return 1


def fnv1a(b):
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def sums(path, scratch, phase):
    data = bytearray(open(path, "rb").read())
    if phase == 1:
        regions = [(0, 128), (scratch, 128), (scratch + 2000, 64), (scratch + 5000, 16)]
    else:
        for first, n, kind in expected_ranges(scratch, True, True):
            lo, hi = first * 512, (first + n) * 512
            data[lo:hi] = bytes(hi - lo) if kind == "Z" else pattern(first * 64, n * 64, B).tobytes()
        regions = [(scratch - 8, 24), (scratch + 1000, 16), (scratch + 2040, 80),
                   (scratch + 2992, 40), (scratch + 3192, 32), (scratch + 4088, 88)]
    print(" ".join(f"testguest.sum{i}={lba}:{n}:{fnv1a(data[lba * 512:(lba + n) * 512]):016x}"
                   for i, (lba, n) in enumerate(regions)))


def counts(path, lba):
    import struct
    with open(path, "rb") as f:
        f.seek(lba * 512)
        d = f.read(64 * 512)
    recs = []
    for i in range(len(d) // 512):
        r = d[i * 512:i * 512 + 32]
        magic, seq, n, h = struct.unpack("<4Q", r)
        if magic == 0x31544E554F435A4C and h == fnv1a(r[:24]):
            recs.append((seq, n))
    for seq, n in sorted(recs):
        print("seq %d count %d" % (seq, n))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "counts":
        return counts(argv[1], int(argv[2]) if len(argv) > 2 else 0)
    if len(argv) == 3 and argv[0] == "find":
        d = open(argv[1], "rb").read()
        o = d.find(open(argv[2], "rb").read(4096))
        print(o // 512 if o >= 0 and o % 4096 == 0 else -1)
        return 0 if o >= 0 and o % 4096 == 0 else 1
    if len(argv) == 4 and argv[0] == "sums":
        sums(argv[1], int(argv[2]), int(argv[3]))
        return 0
    if len(argv) >= 2 and argv[0] == "make":
        make(argv[1], int(argv[2]) if len(argv) > 2 else 16384)
        return 0
    if len(argv) >= 2 and argv[0] == "check":
        scratch, dz, log, ignore, i = 2048, False, None, [], 2
        while i < len(argv):
            a = argv[i]
            if a == "--discard-zeroes":
                dz = True
            elif a == "--log":
                i += 1
                log = argv[i]
            elif a == "--ignore":
                i += 1
                ignore.append(int(argv[i]))
            else:
                scratch = int(a)
            i += 1
        return check(argv[1], scratch, dz, log, ignore)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
