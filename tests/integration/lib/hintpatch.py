#!/usr/bin/env python3
"""Publish a copy of an HTTP store's image with another parent hint in its top layout, from
docs/formats.md and docs/images.md alone: hintpatch.py WWW FROM_NAME TO_NAME HINT.

The top layout of WWW/images/FROM_NAME/image.json (a layer: version 2, or 3 with flag 1) gets HINT as its
parent hint; its body_sha256, header_crc (over the 208 bytes of header and parent record,
crc32c seeded with ~0, not inverted) and so its layout digest are recomputed, the file is
written as WWW/layouts/<new digest>.layout, and WWW/images/TO_NAME/image.json names it in
place of the old top (the parents, manifest and counts as they were). TO_NAME is added to
images/index.json. Prints the new layout digest (hex)."""
import hashlib
import json
import os
import struct
import sys

from lzcrc import crc32c

BLOCK = 4096


def main():
    www, src, dst, hint = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].encode()
    with open(os.path.join(www, "images", src, "image.json")) as f:
        img = json.load(f)
    top = img["layouts"][0]["digest"].split(":")[1]
    with open(os.path.join(www, "layouts", top + ".layout"), "rb") as f:
        b = bytearray(f.read())
    version, = struct.unpack_from("<I", b, 8)
    flags, = struct.unpack_from("<I", b, 60)
    old_len, = struct.unpack_from("<I", b, 200)
    assert version in (2, 3) and flags == 1, "not a layer over a parent"
    b = b[:len(b) - old_len] + hint
    struct.pack_into("<I", b, 200, len(hint))
    b[112:144] = hashlib.sha256(b[BLOCK:]).digest()
    struct.pack_into("<I", b, 144, 0)
    struct.pack_into("<I", b, 144, crc32c(bytes(b[:208])))
    digest = hashlib.sha256(b[:BLOCK]).hexdigest()
    with open(os.path.join(www, "layouts", digest + ".layout"), "wb") as f:
        f.write(b)
    img["layouts"][0] = {"digest": "sha256:" + digest,
                         "sha256": "sha256:" + hashlib.sha256(b).hexdigest(), "size": len(b)}
    os.makedirs(os.path.join(www, "images", dst), exist_ok=True)
    with open(os.path.join(www, "images", dst, "image.json"), "w") as f:
        json.dump(img, f, separators=(",", ":"))
    index = os.path.join(www, "images", "index.json")
    with open(index) as f:
        names = json.load(f)
    names["images"] = sorted(set(names["images"]) | {dst})
    with open(index, "w") as f:
        json.dump(names, f, separators=(",", ":"))
    print(digest)


if __name__ == "__main__":
    main()
