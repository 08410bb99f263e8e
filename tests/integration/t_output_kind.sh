#!/bin/bash
# Every command that writes -o PATH writes a new file and renames it into place. An existing
# PATH that is not a regular file (a device node such as /dev/null, a FIFO, a directory, a
# socket) must be refused with one line and left as it was: found when a test run as root
# replaced /dev/null with a regular file (the rename of an export's temporary file over it).
. "$(dirname "$0")/lib/common.sh"

S=$T/store
mkdir -p "$T/src/d"
echo hello >"$T/src/d/f"
"$LAZYBLK" import "$T/src" --store "$S" -o "$T/m.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/m.manifest" -o "$T/a.layout" >/dev/null

# the nodes: a character device (root only), a FIFO, a directory, a socket
kinds=()
if [ "$(id -u)" = 0 ] && mknod -m 666 "$T/chr" c 1 3 2>/dev/null; then kinds+=(chr); fi
mkfifo "$T/fifo" && kinds+=(fifo)
mkdir "$T/dir" && kinds+=(dir)
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$T/sock" &&
  kinds+=(sock)
kind_of() { stat -c %F "$1"; }

for k in "${kinds[@]}"; do
  P=$T/$k
  before=$(kind_of "$P")
  expect_error "import -o $k" "not a regular file" -- \
    "$LAZYBLK" import "$T/src" --store "$S" -o "$P"
  expect_error "mkfs -o $k" "not a regular file" -- "$LAZYBLK" mkfs "$T/m.manifest" -o "$P"
  expect_error "export -o $k" "not a regular file" -- \
    "$LAZYBLK" export "$T/a.layout" --store "$S" -o "$P"
  expect_error "initramfs -o $k" "not a regular file" -- "$LAZYBLK" initramfs -o "$P"
  expect_error "snapshot -o $k" "not a regular file" -- "$LAZYBLK" snapshot "$T/nope" -o "$P"
  expect_error "overlay apply -o $k" "not a regular file" -- \
    "$LAZYBLK" overlay apply "$T/nope" --layout "$T/a.layout" -o "$P"
  expect_error "commit -o $k" "not a regular file" -- \
    "$LAZYBLK" commit "$T/nope" --layout "$T/a.layout" --store "$S" -o "$P"
  expect_error "repack -o $k" "not a regular file" -- \
    "$LAZYBLK" repack "$T/m.manifest" --trace "$T/nope" --store "$S" -o "$P"
  [ "$(kind_of "$P")" = "$before" ] || die "$P: was $before, now $(kind_of "$P")"
done
[ -c /dev/null ] || die "/dev/null is no longer a character device"

# a symbolic link is replaced (the link, not its target), as before; a regular file too
ln -s "$T/target" "$T/link"
"$LAZYBLK" mkfs "$T/m.manifest" -o "$T/link" >/dev/null
[ -f "$T/link" ] && [ ! -L "$T/link" ] && [ ! -e "$T/target" ] || die "-o SYMLINK: not replaced"
"$LAZYBLK" mkfs "$T/m.manifest" -o "$T/link" >/dev/null || die "-o FILE: not replaced"
echo "t_output_kind: ok (${kinds[*]})"
