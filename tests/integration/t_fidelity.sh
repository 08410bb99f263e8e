#!/bin/bash
# What an image says about its files survives import → mkfs → export → mount, checked
# against an independent unpacker of the same input:
#   an OCI layout made with umoci, whose layers carry a "/" entry (umoci insert IMG DIR /):
#     against umoci unpack, the root directory's owner, mode, times and xattrs included;
#   tars made with GNU tar --acls (with and without --xattrs) from a tree with POSIX ACLs
#     (a mask wider than group::, named users and groups, a default ACL, an ACL on the root
#     directory), setuid, user.* xattrs and nanosecond times: against tar -xpf --acls.
# Each goes through lazyblk import, mkfs, export, e2fsck -fn and a read-only loop mount,
# and the mounted tree is compared with the unpacked one: modes, owners, getfacl,
# getfattr, contents, mtimes in nanoseconds.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/ext4check.sh"
for tool in umoci setfacl getfacl getfattr e2fsck; do
  command -v "$tool" >/dev/null || skip "skip: $tool is not installed"
done
[ "$(id -u)" -eq 0 ] || skip "skip: needs root (chown, loop mounts, umoci unpack keeping owners)"
export TZ=UTC
trap 'mountpoint -q "$T/mnt" && umount "$T/mnt"; rm -rf "$T"' EXIT

# dump DIR: one line per path (the root is "."): type and mode, owner, size, mtime in ns,
# link target, content hash; then getfacl and getfattr of every path. Not compared: atime
# (the tars carry none, the unpackers set their own clock, reading moves it) and ctime
# (the kernel's clock at unpack or mkfs time, never the image's). A mounted image's
# lost+found is mkfs's own, not the image's.
dump() {
  (
    cd "$1"
    find . -path ./lost+found -prune -o -printf '%p %y %#m %U:%G %s %T@ %l\n' | LC_ALL=C sort
    find . -path ./lost+found -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum
    find . -path ./lost+found -prune -o ! -type l -print0 | LC_ALL=C sort -z |
      xargs -0r getfacl -n -p 2>/dev/null
    find . -path ./lost+found -prune -o -print0 | LC_ALL=C sort -z |
      xargs -0r getfattr -h -d -m - -e hex 2>/dev/null
  )
}

# fidelity NAME SRC REF: import SRC, check the manifest against the unpacked tree REF, make
# the disk (check_layout: e2fsck, mount matches the manifest), and compare the mounted tree
# with REF.
fidelity() {
  local name=$1 src=$2 ref=$3
  "$LAZYBLK" import "$src" --store "$T/store" -o "$T/$name.manifest" 2>"$T/$name.err" ||
    { cat "$T/$name.err" >&2; die "$name: import failed"; }
  "$LAZYBLK" manifest show "$T/$name.manifest" >"$T/$name.json"
  python3 "$TESTLIB/check_tree.py" "$ref" "$T/$name.json" "$T/store" --no-atime --no-ctime ||
    die "$name: the manifest differs from the unpacked tree"
  check_layout "$name" "$T/$name.manifest" "$T/store"
  mkdir -p "$T/mnt"
  mount -o loop,ro "$T/$name.raw" "$T/mnt"
  dump "$T/mnt" >"$T/$name.got"
  umount "$T/mnt"
  dump "$ref" >"$T/$name.want"
  diff -u "$T/$name.want" "$T/$name.got" >&2 || die "$name: the mounted disk differs from $ref"
  rm -f "$T/$name.raw" "$T/$name.layout"
  echo "ok: $name: the mounted disk matches $(basename "$ref") ($(wc -l <"$T/$name.want") lines)"
}

# ---- an OCI layout whose layers have a "/" entry
IMG=$T/img
umoci init --layout "$IMG" >/dev/null
umoci new --image "$IMG:t" >/dev/null
D=$T/insert1
mkdir -p "$D/etc/sub" "$D/bin"
echo hello >"$D/etc/hello"
echo deep >"$D/etc/sub/deep"
echo s >"$D/bin/suid" && chmod 4755 "$D/bin/suid"
echo x >"$D/etc/xattr" && setfattr -n user.comment -v "a comment" "$D/etc/xattr"
echo owned >"$D/etc/owned" && chown 1234:5678 "$D/etc/owned"
ln -s hello "$D/etc/link"
touch -d '2001-02-03 04:05:06.123456789' "$D/etc/hello" "$D/etc/sub" "$D/etc"
chmod 0751 "$D" && chown 12:34 "$D" && setfattr -n user.root -v one "$D"
touch -d '2002-03-04 05:06:07.5' "$D"
umoci insert --image "$IMG:t" "$D" / >/dev/null
# a second layer's "/" replaces the root's attributes again (mode, owner, times, xattrs)
D=$T/insert2
mkdir -p "$D/var"
echo v >"$D/var/v"
chmod 0705 "$D" && chown 56:78 "$D" && setfattr -n user.other -v two "$D"
touch -d '2003-04-05 06:07:08' "$D"
umoci insert --image "$IMG:t" "$D" / >/dev/null
umoci unpack --image "$IMG:t" "$T/bundle" >/dev/null
fidelity oci "oci:$IMG:t" "$T/bundle/rootfs"
# ---- tars with POSIX ACLs. f660: mode 0660 with group::r-- and mask::rw- (the mode's
# group bits are the mask); named: named entries GNU tar writes by name (daemon, adm);
# dacl: a default ACL, inherited by what is made in it; the root directory has an ACL too.
S=$T/src
mkdir -p "$S"
echo a >"$S/f660" && chmod 0660 "$S/f660" && setfacl -m u:1234:rw,g::r "$S/f660"
echo n >"$S/named" && setfacl -m u:daemon:r,g:adm:rw "$S/named"
echo s >"$S/suid" && chmod 4755 "$S/suid" && setfattr -n user.k -v v "$S/suid"
echo x >"$S/xattrs" && setfattr -n user.a -v one "$S/xattrs" &&
  setfattr -n user.b -v 0x00ff01 "$S/xattrs"
mkdir "$S/dacl" && chmod 2770 "$S/dacl"
setfacl -d -m u:1234:rwx,g:5:rx "$S/dacl" && setfacl -m g:5:rx "$S/dacl"
echo c >"$S/dacl/child" && mkdir "$S/dacl/sub" && echo d >"$S/dacl/sub/deep"
setfattr -n user.dir -v d "$S/dacl"
chmod 0750 "$S" && setfacl -m u:1234:rx "$S" && setfattr -n user.root -v r "$S"
[ "$(stat -c %a "$S/f660")" = 660 ] && getfacl -cp "$S/f660" | grep -qx 'mask::rw-' &&
  getfacl -cp "$S/f660" | grep -qx 'group::r--' || die "setfacl did not make the f660 case"
touch -d '2001-02-03 04:05:06.123456789' "$S/f660" "$S/named" "$S/dacl/sub/deep"
touch -d '1999-12-31 23:59:59.000000001' "$S/suid" "$S/xattrs" "$S/dacl/child" "$S/dacl/sub"
touch -d '2010-01-01 00:00:00.5' "$S/dacl" "$S"
tar --acls --xattrs --xattrs-include='*' --numeric-owner --format=posix -C "$S" -cf "$T/x.tar" .
tar --acls --numeric-owner --format=posix -C "$S" -cf "$T/acl.tar" . # text ACLs only
for t in x acl; do
  opts=(--acls --numeric-owner)
  [ $t = x ] && opts+=(--xattrs --xattrs-include='*')
  mkdir "$T/$t.ref"
  tar "${opts[@]}" -xpf "$T/$t.tar" -C "$T/$t.ref"
  fidelity "tar-$t" "$T/$t.tar" "$T/$t.ref"
done
echo "fidelity: all good"
