#!/bin/bash
# ext4's limits at mkfs (issue 15): what ext4 cannot hold is refused with one line naming
# the file, and what it can hold right up to the limit makes a filesystem e2fsck passes.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/ext4check.sh"
command -v e2fsck >/dev/null || skip "e2fsck not installed"
MKTAR="$TESTLIB/mktar_limits.py"

# image NAME MKTAR-ARGS...: a tar from mktar_limits.py imported to $T/NAME.manifest
image() {
  local name=$1; shift
  python3 "$MKTAR" "$1" "$T/$name.tar" "${@:2}"
  "$LAZYBLK" import "$T/$name.tar" --store "$T/store" -o "$T/$name.manifest" >/dev/null 2>&1
  rm -f "$T/$name.tar"
}
# clean NAME: mkfs, export and e2fsck -fn clean
clean() {
  "$LAZYBLK" mkfs "$T/$1.manifest" -o "$T/$1.layout" >/dev/null
  "$LAZYBLK" export "$T/$1.layout" --store "$T/store" -o "$T/$1.raw" >/dev/null
  e2fsck_clean "$1" "$T/$1.raw"
  echo "ok: $1: e2fsck clean"
}

# --- hard links (item 5): a file may have 65,000 names; only a directory's count overflows
image links-max links 64999
clean links-max
rm -f "$T/links-max.raw"
image links-over links 65100
expect_error "65,101 hard links" "/f: 65101 hard links, more than ext4's limit of 65000" -- \
  "$LAZYBLK" mkfs "$T/links-over.manifest" -o "$T/links-over.layout"
[ ! -e "$T/links-over.layout" ] || die "mkfs left a layout for 65,101 links"

# --- file size (item 6): logical block numbers are 32-bit, so ext4's largest file is
# (2^32 - 1) blocks = 16 TiB - 4 KiB (the kernel's s_maxbytes); sparse files count too
MAX=$(( ((1 << 32) - 1) * 4096 ))
image size-max sparse $MAX
clean size-max
# the kernel reads the data at the very end (skipped without loop devices)
mkdir -p "$T/mnt"
if mount -o loop,ro "$T/size-max.raw" "$T/mnt" 2>/dev/null; then
  tail_ok=0
  python3 - "$T/mnt/big" "$MAX" <<'PY' || tail_ok=$?
import os, sys
f = open(sys.argv[1], 'rb')
assert os.fstat(f.fileno()).st_size == int(sys.argv[2])
f.seek(int(sys.argv[2]) - 4096)
assert f.read(26) == b'end of a very sparse file\n'
PY
  umount "$T/mnt"
  [ "$tail_ok" -eq 0 ] || die "size-max: the last block of /big does not read back"
  echo "ok: size-max: the kernel reads /big's last block"
fi
rm -f "$T/size-max.raw"
for size in $((MAX + 1)) $((17 << 40)); do
  image "size-$size" sparse "$size"
  expect_error "a sparse file of $size bytes" \
    "/big: $size bytes, larger than ext4's largest file ($MAX bytes" -- \
    "$LAZYBLK" mkfs "$T/size-$size.manifest" -o "$T/size.layout"
  [ ! -e "$T/size.layout" ] || die "mkfs left a layout for a file of $size bytes"
done
