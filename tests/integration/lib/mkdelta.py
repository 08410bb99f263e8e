#!/usr/bin/env python3
"""Write a lazyblk delta from docs/formats.md alone (an encoder independent of blkd/),
for a layout: mkdelta.py LAYOUT OUT SEED. Dirty blocks hold bytes derived from SEED;
some are all zeros; some ranges are zeroed. Prints "dirty zero" counts."""
import hashlib
import random
import struct
import sys

from lzcrc import crc32c

BLOCK = 4096


def main():
    layout, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(layout, "rb") as f:
        hdr = f.read(BLOCK)
    digest = hashlib.sha256(hdr).digest()
    (blocks,) = struct.unpack_from("<Q", hdr, 16)
    rng = random.Random(seed)
    state = [0] * blocks
    for _ in range(12):  # runs of dirty and zeroed blocks, later ones win
        start = rng.randrange(blocks)
        n = min(rng.randrange(1, 40), blocks - start)
        st = 1 if rng.random() < 0.7 else 2
        state[start:start + n] = [st] * n
    state[blocks - 1] = 1  # the last block too
    extents, i = [], 0
    while i < blocks:
        j = i
        while j < blocks and state[j] == state[i]:
            j += 1
        if state[i]:
            extents.append((i, j - i, state[i]))
        i = j
    dirty = sum(1 for s in state if s == 1)
    zero = sum(1 for s in state if s == 2)
    data = bytearray()
    for b, s in enumerate(state):
        if s == 1:
            data += bytes(BLOCK) if b % 5 == 0 else rng.randbytes(BLOCK)
    h = bytearray(128)
    struct.pack_into("<8sIIQQ32sQQQI", h, 0, b"LZBKDLTA", 1, BLOCK, blocks * BLOCK, blocks,
                     digest, dirty, zero, len(extents), 0)
    struct.pack_into("<I", h, 92, crc32c(bytes(h)))
    body = bytes(h) + bytes(BLOCK - 128) + bytes(data)
    body += b"".join(struct.pack("<QQII", b, n, s, 0) for b, n, s in extents)
    with open(out, "wb") as f:
        f.write(body + hashlib.sha256(body).digest())
    print(dirty, zero)


main()
