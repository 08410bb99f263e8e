"""crc32c as lazyblk's formats use it (docs/formats.md): Castagnoli, reflected, seeded by the
caller (~0 for a header), no final inversion (as ext4 stores it). For the test helpers that
write lazyblk files from the formats alone (mkdelta.py, hintpatch.py,
fuzz/make-corpus.py)."""


def crc32c(data, crc=0xFFFFFFFF):
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc
