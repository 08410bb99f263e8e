# Sourced: make_edge_tree DIR [BIG] — a tree with every kind of thing an image can hold:
# nanosecond, pre-1970 and post-2038 times, owners (incl. > 65535), setuid/setgid/sticky,
# xattrs (user/trusted/security, small and large enough to need an xattr block), POSIX
# ACLs, hardlinks, char/block devices (small and large numbers), fifos, sockets, fast and
# slow symlinks up to 4095 bytes, sparse files (holes, many extents, > 4 GiB), empty files,
# 255-byte and non-UTF-8 names. With BIG=1 also a directory of 100,000 entries.
make_edge_tree() {
  local X=$1 big=${2:-0}
  mkdir -p "$X/dir"
  echo hello >"$X/plain"
  touch -d '2001-02-03 04:05:06.123456789' "$X/plain"
  : >"$X/empty"
  echo old >"$X/pre1970" && touch -d '1960-06-01 12:00:00.5' "$X/pre1970"
  echo new >"$X/post2038" && touch -d '2200-01-01 00:00:00.999999999' "$X/post2038"
  echo owned >"$X/owned" && chown 1234:56789 "$X/owned"
  echo big-ids >"$X/bigids" && chown 4000000000:4000000001 "$X/bigids"
  echo s >"$X/setuid" && chmod 4755 "$X/setuid"
  mkdir "$X/setgid" && chmod 2775 "$X/setgid"
  mkdir "$X/sticky" && chmod 1777 "$X/sticky"
  echo x >"$X/xattrs"
  setfattr -n user.comment -v "a comment" "$X/xattrs"
  setfattr -n user.binary -v 0x00ff00fe01 "$X/xattrs"
  setfattr -n trusted.overlay -v 0x79 "$X/xattrs"
  setfattr -n security.capability -v 0x0100000200200000000000000000000000000000 "$X/xattrs"
  echo y >"$X/xattr-block"
  setfattr -n user.big -v "$(head -c 1500 /dev/zero | tr '\0' 'b')" "$X/xattr-block"
  setfattr -n user.big2 -v "$(head -c 900 /dev/zero | tr '\0' 'c')" "$X/xattr-block"
  setfattr -n user.dir -v on-a-dir "$X/dir"
  if command -v setfacl >/dev/null; then
    echo acl >"$X/acl" && setfacl -m u:1234:rw,g:99:r "$X/acl"
    mkdir "$X/acl-dir" && setfacl -d -m u:1234:rwx "$X/acl-dir" && setfacl -m g:5:rx "$X/acl-dir"
  fi
  echo linked >"$X/link-a" && ln "$X/link-a" "$X/link-b" && ln "$X/link-a" "$X/dir/link-c"
  mknod "$X/chr" c 1 3 && mknod "$X/blk" b 7 200 && mknod "$X/bigdev" c 300 70000
  mkfifo "$X/fifo"
  python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$X/sock"
  ln -s plain "$X/short-link"
  ln -s "$(printf 'x%.0s' $(seq 1 59))" "$X/link-59"
  ln -s "$(printf 'y%.0s' $(seq 1 60))" "$X/link-60"
  local long
  long=$(python3 -c "print('/'.join(['d'*250]*16)[:4095])")
  ln -s "$long" "$X/long-link"
  touch -h -d '1999-12-31 23:59:59.000000001' "$X/short-link"
  truncate -s 10M "$X/sparse"
  printf 'middle' | dd of="$X/sparse" bs=4096 seek=1000 conv=notrunc status=none
  printf 'end' | dd of="$X/sparse" bs=1 seek=$((10*1024*1024 - 3)) conv=notrunc status=none
  truncate -s 1G "$X/all-hole"
  # 12 data islands: more than 4 extents, so an extent tree of depth 1
  truncate -s 48M "$X/islands"
  for i in $(seq 0 11); do
    head -c 10000 /dev/urandom | dd of="$X/islands" bs=4096 seek=$((i * 1024)) conv=notrunc status=none
  done
  # over 4 GiB, data at both ends
  truncate -s 5G "$X/huge"
  printf 'start' | dd of="$X/huge" conv=notrunc status=none
  printf 'past 4 GiB' | dd of="$X/huge" bs=1M seek=5000 conv=notrunc status=none
  head -c 3000000 /dev/urandom >"$X/three-chunks"
  local name
  name=$(printf 'caf\xe9-latin1')
  echo latin1 >"$X/$name"
  echo long-name >"$X/$(printf 'n%.0s' $(seq 1 255))"
  mkdir "$X/medium-dir"
  for i in $(seq 1 300); do : >"$X/medium-dir/file-with-a-longish-name-$i"; done
  if [ "$big" = 1 ]; then
    mkdir "$X/big-dir"
    python3 -c "
import os, sys
d = sys.argv[1]
for i in range(100000):
    open(os.path.join(d, 'entry-%06d' % i), 'w').close()" "$X/big-dir"
  fi
}
