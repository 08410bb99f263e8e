#!/bin/bash
# Hostile manifests: every offset, length and count a manifest holds, set out of range with
# a valid checksum (lib/mfpatch.py), must be refused by the reader with one line, by
# `manifest show` and `mkfs` alike (and `repack`, for a link target on a file), before
# anything reads through it (issue 15, item 1: an xattr name out of range used to crash both
# in the xattr order check).
. "$(dirname "$0")/lib/common.sh"
PATCH="$TESTLIB/mfpatch.py"

mkdir -p "$T/src/d"
echo hi >"$T/src/d/f"
ln "$T/src/d/f" "$T/src/d/h"
ln -s f "$T/src/d/s"
python3 -c "
import os, sys
os.setxattr(sys.argv[1], 'user.a', b'1'); os.setxattr(sys.argv[1], 'user.b', b'2')" \
  "$T/src/d/f" 2>/dev/null || skip "no user xattrs on $T"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/good.manifest" >/dev/null 2>&1
# entries: 0 /, 1 /d, 2 /d/f (xattrs 0 and 1), 3 /d/h (hardlink), 4 /d/s (symlink)
"$LAZYBLK" manifest show "$T/good.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/good.manifest" -o "$T/good.layout" >/dev/null

FAR=0x10000000000         # 1 TiB past the strings: unmapped
WRAP=0xffffffffffffff00   # strings + off wraps below the buffer
n=0
bad() { # bad WANT PATCH-ARGS...: the patched manifest is refused by show and mkfs
  local want=$1; shift
  n=$((n + 1))
  python3 "$PATCH" "$T/good.manifest" "$T/bad$n.manifest" "$@"
  expect_error "show: $*" "bad$n.manifest: $want" -- "$LAZYBLK" manifest show "$T/bad$n.manifest"
  expect_error "mkfs: $*" "bad$n.manifest: $want" -- "$LAZYBLK" mkfs "$T/bad$n.manifest" -o "$T/bad.layout"
  [ ! -e "$T/bad.layout" ] || die "mkfs wrote a layout from bad$n.manifest"
}

bad "bad xattr name" xattr 1 name_off=$FAR
bad "bad xattr name" xattr 0 name_off=$WRAP
bad "bad xattr name" xattr 1 name_len=0xffffffff
bad "bad xattr name" xattr 0 name_len=8     # "user.a\0" "1": a NUL inside the name
bad "bad xattr value" xattr 0 value_off=$FAR
bad "bad xattr value" xattr 1 value_off=$WRAP
bad "entry range out of bounds" entry 2 xattr_first=$FAR
bad "entry range out of bounds" entry 2 xattr_count=3
bad "entry range out of bounds" entry 2 chunk_first=$FAR
bad "bad entry path" entry 2 path_off=$FAR
bad "bad entry path" entry 1 path_off=$WRAP
bad "bad entry path" entry 3 path_len=0xffffffff
bad "bad link target" entry 3 link_off=$FAR
bad "bad link target" entry 4 link_off=$WRAP
bad "bad link target" entry 4 link_len=0xffffffff
bad "bad config range" header config_off=$FAR config_len=2
bad "truncated" header entry_count=6
# a link target on a regular file: never checked, and `repack`, which copies every entry
# whole, read 32 KiB past the manifest (fuzz_trace_plan; issue 24)
bad "link target on an entry that is not a link" entry 2 link_off=0 link_len=32768
python3 - "$T/f.trace" <<'PY'
import hashlib, struct, sys
strings, recs = b"\0/d/f\0", [(0, 0, 0, 3, 1)]
h = struct.pack("<8sIIQQ32s32sQQI44x", b"LZBKTRAC", 1, 160, len(recs), len(strings),
                bytes(32), bytes(32), 1700000000, 30, 0)
body = h + b"".join(struct.pack("<QQQII", *r) for r in recs) + strings
open(sys.argv[1], "wb").write(body + hashlib.sha256(body).digest())
PY
"$LAZYBLK" repack "$T/good.manifest" --trace "$T/f.trace" --store "$T/store" \
  -o "$T/repacked.manifest" >/dev/null
expect_error "repack: a file with a link target" "bad$n.manifest: link target on an entry" -- \
  "$LAZYBLK" repack "$T/bad$n.manifest" --trace "$T/f.trace" --store "$T/store" \
  -o "$T/repacked2.manifest"
echo "ok: $n hostile manifests refused"
