#!/bin/bash
# Issue 24, item 6: files holding image or guest data get 0644 filtered by the umask
# (common/fsutil.h FS_DATA_MODE), never widened afterwards. Under umask 077 every file that
# import, mkfs, export, overlay apply, snapshot (offline and through a server's control
# socket), serve (its overlay and state, a recorded trace), commit and a fetch by reference
# (layouts of an HTTP store) write is 0600; under umask 022, 0644. Before, the overlay's
# state, deltas, exported disks, manifests, traces and fetched layouts were fchmod'ed to
# 0644 whatever the umask. (The initramfs cache file: test_initramfs's test_image_config.)
# serve's unix sockets (--nbd unix:, --control) are 0600 under every umask (the follow-up's
# item 6: the NBD socket was 0777 less the umask).
. "$(dirname "$0")/lib/common.sh"
for tool in nbdinfo nginx curl python3; do
  command -v "$tool" >/dev/null || skip "t_file_modes: $tool is not installed"
done
. "$TESTLIB/serve.sh"
. "$TESTLIB/remote.sh"
need_nginx

mkdir -p "$T/www"
start_nginx "$T/www" --dav-gc

# make UMASK: every command that writes data, under that umask, into $T/UMASK
make_all() {
  local um=$1 d=$T/$1 sock ctl
  sock=$d/nbd.sock
  ctl=$d/ctl.sock
  umask "$um"
  mkdir -p "$d/src/dir"
  echo hello >"$d/src/dir/a"
  head -c 300000 /dev/urandom >"$d/src/b"
  "$LAZYBLK" import "$d/src" --store "$d/store" -o "$d/img.manifest" >/dev/null
  "$LAZYBLK" mkfs "$d/img.manifest" -o "$d/img.layout" >/dev/null
  "$LAZYBLK" export "$d/img.layout" --store "$d/store" -o "$d/img.raw" >/dev/null
  python3 "$TESTLIB/mkdelta.py" "$d/img.layout" "$d/in.delta" 1 >/dev/null
  "$LAZYBLK" overlay apply "$d/in.delta" --layout "$d/img.layout" -o "$d/ov" >/dev/null
  "$LAZYBLK" snapshot "$d/ov" -o "$d/off.delta" >/dev/null
  "$LAZYBLK" commit "$d/ov" --layout "$d/img.layout" --store "$d/store" -o "$d/c.layout" >/dev/null
  start_server "s$um" "nbd+unix:///?socket=$sock" "$d/img.layout" --store "$d/store" \
    --overlay "$d/ov2" --nbd "unix:$sock" --control "$ctl" --trace-record "$d/t.trace"
  # the sockets are the server user's alone whatever the umask: --nbd unix: as --control
  # (issue 24 follow-up, item 6: the NBD socket was 0777 less the umask, 0775 under 002)
  for f in "$sock" "$ctl"; do
    [ "$(stat -c %a "$f")" = 600 ] || die "umask $um: socket $f is $(stat -c %a "$f"), want 600"
  done
  "$LAZYBLK" snapshot --server "$ctl" -o "$d/live.delta" >/dev/null
  stop_server "$SRV" "s$um"
  "$LAZYBLK" push --store "$d/store" --remote "${NGINX_URL}images/m$um" "$d/img.layout" >/dev/null
  "$LAZYBLK" export "${NGINX_URL}images/m$um" --store "$d/fetched" -o "$d/f.raw" >/dev/null
  umask 022
}

# check UMASK WANT: the named outputs have mode WANT exactly; no file under $T/UMASK (but
# the test's own) has a bit WANT lacks
check() {
  local um=$1 want=$2 d=$T/$1 f m bad=""
  for f in img.manifest img.layout img.raw ov ov.state off.delta c.layout ov2 ov2.state ov2.live \
    live.delta t.trace f.raw; do
    [ -f "$d/$f" ] || die "umask $um: $f was not written"
    m=$(stat -c %a "$d/$f")
    [ "$m" = "$want" ] || bad="$bad $f:$m"
  done
  for f in $(find "$d/store/chunks" "$d/fetched/layouts" -type f | head -5); do
    m=$(stat -c %a "$f")
    [ "$m" = "$want" ] || bad="$bad ${f#"$d"/}:$m"
  done
  while read -r m f; do
    [ $((0$m & ~0$want)) -eq 0 ] || bad="$bad ${f#"$d"/}:$m"
  done < <(find "$d" -type f ! -path "$d/src/*" ! -name in.delta -printf '%m %p\n')
  [ -z "$bad" ] || die "umask $um: files wider than $want:$bad"
  echo "ok: umask $um: every output file is $want (or narrower)"
}

make_all 077
check 077 600
make_all 022
check 022 644
# umask 002 (a shared group): the NBD socket of a writable export stays the user's
umask 002
start_server s002 "nbd+unix:///?socket=$T/002.sock" "$T/022/img.layout" --store "$T/022/store" \
  --overlay "$T/ov002" --nbd "unix:$T/002.sock"
m=$(stat -c %a "$T/002.sock")
stop_server "$SRV" s002
umask 022
[ "$m" = 600 ] || die "umask 002: --nbd unix: socket is $m, want 600"
echo "ok: umask 002: the NBD socket is 600"
