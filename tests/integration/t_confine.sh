#!/bin/bash
# Confinement (docs/security.md): serve and run with --user nobody --seccomp. The confined
# server is uid/gid 65534 in every thread with no capabilities, no_new_privs and the filter
# (Seccomp: 2) in every thread; it serves NBD reads and writes (with a vhost-user socket
# beside it that answers), its control socket (stats, a snapshot), chunks fetched from a
# remote over HTTP (kept in the cache as nobody), --run's command (as nobody), and
# --exit-with-parent (the switch clears the parent-death signal: asked for again). An intruder inside it (tests/integration/lib/intruder.c,
# LD_PRELOADed: a thread that was there before the confinement) has exec, fork, netlink, a
# new listening socket, a user namespace refused with EPERM, io_uring with ENOSYS, and the
# server keeps serving. A cache nobody cannot write is refused at start with one line; the
# usage errors are one line each. lazyblk run boots the test guest confined (KVM ioctls
# allowed), on a raw disk and on the lazy image (store, overlay, --stats-json as nobody),
# and it passes its disk checks.
. "$(dirname "$0")/lib/common.sh"
[ "$(id -u)" -eq 0 ] || skip "t_confine: not root (--user needs root)"
getent passwd nobody >/dev/null || skip "t_confine: no user nobody"
for tool in nbdinfo nbdcopy python3 gcc; do
  command -v "$tool" >/dev/null || skip "t_confine: $tool is not installed"
done
. "$TESTLIB/remote.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/nested.sh"
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)
# LSan stops the world with ptrace and a clone of its own, which the filter refuses; and
# an LD_PRELOADed library comes before ASan's runtime (SAN=1 builds)
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:verify_asan_link_order=0
chmod 755 "$T" # the confined server reaches what it writes through $T
mkdir -m 0777 "$T/w" # written by nobody: snapshots, statistics, --run's files

# ---- usage: one line each
"$LAZYBLK" serve --help >"$T/help.txt"
grep -q -- "--user USER\[:GROUP\]" "$T/help.txt" || die "serve --help lacks --user"
grep -q -- "--seccomp" "$T/help.txt" || die "serve --help lacks --seccomp"
"$LAZYBLK" run --help >"$T/help.txt"
grep -q -- "--seccomp" "$T/help.txt" || die "run --help lacks --seccomp"
head -c 1M /dev/zero >"$T/raw"
expect_error "no such user" "--user no-such-user-lz: no such user" -- \
  "$LAZYBLK" serve --raw "$T/raw" --nbd "unix:$T/x.sock" --user no-such-user-lz
expect_rc 2 "$LAZYBLK" serve --raw "$T/raw" --nbd "unix:$T/x.sock" --user no-such-user-lz
expect_error "root" "--user root: that is root (uid 0)" -- \
  "$LAZYBLK" serve --raw "$T/raw" --nbd "unix:$T/x.sock" --user root
expect_error "no group" "--user nobody:no-such-group-lz: no such group" -- \
  "$LAZYBLK" run --kernel "$T/raw" --user nobody:no-such-group-lz
if command -v setpriv >/dev/null; then
  chmod 666 "$T/raw"
  expect_error "not root" "--user daemon: cannot switch to uid" -- \
    setpriv --reuid "$NOBODY" --regid "$NOGROUP" --clear-groups \
    "$LAZYBLK" serve --raw "$T/raw" --nbd "unix:$T/w/np.sock" --user daemon
fi

# ---- an image, and the intruder
mkdir -p "$T/src"
head -c 3M /dev/urandom >"$T/src/a.bin"
echo hello >"$T/src/b.txt"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/img.raw" >/dev/null
gcc -shared -fPIC -O2 -o "$T/intruder.so" "$TESTLIB/intruder.c" -lpthread ||
  die "cannot build the intruder"
mkfifo "$T/intruder.fifo"

# io_worker TASKDIR: the task is an io_uring worker of the kernel (PF_IO_WORKER, 0x10 in the
# flags of its stat, and named iou-*): it runs no user code, and one of a ring made before
# the switch keeps root's ids until it ends, idle (no request reaches it afterwards:
# io_uring_enter is refused); a user thread that names itself iou-* is still checked
io_worker() {
  local stat comm rest
  local -a f
  comm=$(cat "$1/comm" 2>/dev/null) && stat=$(cat "$1/stat" 2>/dev/null) || return 1
  [[ "$comm" == iou-* ]] || return 1
  rest=${stat##*) }
  read -r -a f <<<"$rest"
  (( ${f[6]:-0} & 0x10 ))
}

# check_confined PID: every thread is nobody, without capabilities, no_new_privs, filtered
# (a thread that ends meanwhile is skipped, and so are io_uring's kernel workers)
check_confined() {
  local pid=$1 t st n=0
  for t in /proc/"$pid"/task/*; do
    io_worker "$t" && continue
    st=$(cat "$t/status" 2>/dev/null) || continue
    [ -n "$st" ] || continue
    grep -q "^Uid:[[:space:]]*${NOBODY}[[:space:]]*${NOBODY}[[:space:]]*${NOBODY}[[:space:]]*$NOBODY$" <<<"$st" ||
      die "thread $t: $(grep ^Uid <<<"$st"), want uid $NOBODY"
    grep -q "^Gid:[[:space:]]*${NOGROUP}[[:space:]]" <<<"$st" || die "thread $t: $(grep ^Gid <<<"$st")"
    grep -q "^Groups:[[:space:]]*$" <<<"$st" || die "thread $t: $(grep ^Groups <<<"$st")"
    grep -q "^CapEff:[[:space:]]*0000000000000000$" <<<"$st" || die "thread $t: $(grep ^CapEff <<<"$st")"
    grep -q "^CapPrm:[[:space:]]*0000000000000000$" <<<"$st" || die "thread $t: $(grep ^CapPrm <<<"$st")"
    grep -q "^NoNewPrivs:[[:space:]]*1$" <<<"$st" || die "thread $t: no_new_privs not set"
    grep -q "^Seccomp:[[:space:]]*2$" <<<"$st" || die "thread $t: $(grep ^Seccomp: <<<"$st"), want 2"
    n=$((n + 1))
  done
  [ "$n" -gt 1 ] || die "$pid: no threads to check"
  echo "ok: $n threads of $pid: uid $NOBODY, no capabilities, no_new_privs, seccomp filter"
}

# ---- serve: local store, overlay, control socket, NBD and vhost-user, the intruder inside
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
INTRUDER_FIFO=$T/intruder.fifo INTRUDER_OUT=$T/intruder.out LD_PRELOAD=$T/intruder.so \
  start_server srv "$URI" "$T/img.layout" --store "$T/store" --overlay "$T/img.overlay" \
  --control "$T/ctl.sock" --nbd "unix:$SOCK" --vhost-user "$T/vu.sock" --user nobody --seccomp \
  --stats-json "$T/w/stats.json"
check_confined "$SRV"
grep -q "over vhost-user on $T/vu.sock" "$T/srv.out" || die "confined: no vhost-user serving line"
python3 - "$T/vu.sock" <<'EOF' || die "confined: vhost-user does not answer GET_FEATURES"
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); s.settimeout(60)
s.sendall(struct.pack("<III", 1, 1, 0))  # GET_FEATURES
h = s.recv(20)
assert len(h) == 20 and struct.unpack("<III", h[:12]) == (1, 5, 8), h
EOF
nbdcopy "$URI" "$T/read1.raw"
cmp "$T/read1.raw" "$T/img.raw" || die "confined: the disk read differs from lazyblk export"
head -c 1M /dev/urandom >"$T/patch"
cp "$T/img.raw" "$T/want.raw"
dd if="$T/patch" of="$T/want.raw" bs=1M conv=notrunc status=none
nbdcopy "$T/patch" "$URI" || die "confined: nbdcopy could not write"
nbdcopy "$URI" "$T/read2.raw"
cmp "$T/read2.raw" "$T/want.raw" || die "confined: the write does not read back"
ctl "$T/ctl.sock" $'stats\n' | grep -q '"writes":' || die "confined: control stats"
r=$(ctl "$T/ctl.sock" "snapshot $T/w/d1"$'\n')
[ "$r" = "ok $T/w/d1 256" ] || die "confined: control snapshot: $r"
[ "$(stat -c %u "$T/w/d1")" = "$NOBODY" ] || die "the snapshot was not written as nobody"
echo "ok: confined serve: reads match the export, writes read back, control stats and snapshot"

# the intruder acts: refused; the server goes on
echo go >"$T/intruder.fifo"
intruder_done() { grep -qx "done" "$T/intruder.out" 2>/dev/null; }
wait_for intruder_done || true
grep -qx "done" "$T/intruder.out" || die "the intruder did not finish: $(cat "$T/intruder.out")"
for want in "getpid ok" "execve EPERM" "fork EPERM" "socket-netlink EPERM" "socket-inet ok" \
  "bind EPERM" "unshare-user EPERM" "ptrace EPERM" "io_uring_setup ENOSYS" "open-shadow EACCES"; do
  grep -qx "$want" "$T/intruder.out" || die "intruder: want '$want', got: $(tr '\n' ' ' <"$T/intruder.out")"
done
echo "ok: intruder: $(grep -v "done" "$T/intruder.out" | tr '\n' ',' | sed 's/,$//')"
kill -0 "$SRV" || die "the server died after the intruder's calls"
nbdcopy "$URI" "$T/read3.raw"
cmp "$T/read3.raw" "$T/want.raw" || die "after the intruder: the disk reads differently"
ctl "$T/ctl.sock" $'stats\n' | grep -q '"reads":' || die "after the intruder: control stats"
check_confined "$SRV"
stop_server "$SRV" srv
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(not s["writes"] > 0)' \
  "$T/w/stats.json" || die "--stats-json not written at exit as nobody"
echo "ok: the server kept serving after the refused calls, and stopped cleanly"

# ---- a remote over HTTP: fetched chunks kept in a cache nobody owns
need_nginx
start_nginx "$T/store"
mkdir "$T/cache"
chown nobody: "$T/cache"
start_server rem "$URI" "$T/img.layout" --store "$T/cache" --remote "$NGINX_URL" \
  --nbd "unix:$SOCK" --user nobody --seccomp
check_confined "$SRV"
nbdcopy "$URI" "$T/read4.raw"
cmp "$T/read4.raw" "$T/img.raw" || die "confined, remote: the disk read differs from the export"
[ "$(nginx_count GET '^/chunks/' 200)" -gt 0 ] || die "confined, remote: no chunk fetched"
[ "$(find "$T/cache/chunks" -type f -user nobody | wc -l)" -gt 0 ] ||
  { find "$T/cache" -ls; cat "$T/rem.err"; die "confined, remote: no chunk kept in the cache as nobody"; }
stop_server "$SRV" rem
echo "ok: confined serve with a remote: $(nginx_count GET '^/chunks/' 200) chunks fetched over HTTP"

# a cache nobody cannot write: one line at start, exit 1
mkdir -m 0755 "$T/rootcache"
expect_error "cache not writable" "$T/rootcache: Permission denied as uid $NOBODY" -- \
  "$LAZYBLK" serve "$T/img.layout" --store "$T/rootcache" --remote "$NGINX_URL" \
  --nbd "unix:$T/w/rc.sock" --user nobody --seccomp
expect_rc 1 "$LAZYBLK" serve "$T/img.layout" --store "$T/rootcache" --remote "$NGINX_URL" \
  --nbd "unix:$T/w/rc.sock" --user nobody --seccomp

# ---- --run: the command runs as nobody; its private socket directory is removed at exit
mkdir -m 0755 "$T/runtmp"
chown nobody: "$T/runtmp"
rc=0
# shellcheck disable=SC2016 # $OUT and $uri are the command's
OUT=$T/w/run.txt TMPDIR=$T/runtmp "$LAZYBLK" serve --raw "$T/raw" --user nobody --seccomp \
  --run 'id -u >"$OUT"; nbdinfo --size "$uri" >>"$OUT"; exit 7' \
  >"$T/run.out" 2>"$T/run.err" </dev/null || rc=$?
[ "$rc" -eq 7 ] || { cat "$T/run.err" >&2; die "--run: exit $rc, want the command's 7"; }
[ "$(tr '\n' ' ' <"$T/w/run.txt")" = "$NOBODY 1048576 " ] ||
  die "--run: the command saw '$(cat "$T/w/run.txt")', want uid $NOBODY and the disk's size"
[ -z "$(ls -A "$T/runtmp")" ] || die "--run: left in TMPDIR: $(find "$T/runtmp" -ls)"
echo "ok: serve --run: the command ran as nobody, its socket directory removed at exit"

# ---- --exit-with-parent: the switch to USER clears the parent-death signal; it is asked for
# again, so the confined server still stops when the shell that started it is killed
bash -c "'$LAZYBLK' serve --raw '$T/raw' --nbd 'unix:$T/ewp.sock' --exit-with-parent \
  --user nobody --seccomp >'$T/ewp.out' 2>'$T/ewp.err' & echo \$! >'$T/ewp.pid'; wait" &
parent=$!
ewp_serving() { [ -s "$T/ewp.pid" ] && grep -q '^serving ' "$T/ewp.out"; }
wait_for -p "$parent" ewp_serving || true
child=$(cat "$T/ewp.pid")
SERVERS+=("$child")
grep -q '^serving ' "$T/ewp.out" || die "--exit-with-parent: not serving"
wait_for -p "$child" has "/proc/$child/status" "^Seccomp:[[:space:]]*2$" || true
{ kill -9 "$parent"; wait "$parent"; } 2>/dev/null || true
child_gone() { ! kill -0 "$child" 2>/dev/null; }
wait_for child_gone || true
! kill -0 "$child" 2>/dev/null || die "--exit-with-parent: the confined server outlived its parent"
grep -q "^requests " "$T/ewp.out" || die "--exit-with-parent: no orderly stop (statistics)"
echo "ok: --exit-with-parent still works after the switch to nobody"

# ---- lazyblk run: the freestanding test guest's disk checks, confined (KVM's ioctls allowed)
GUEST=${GUEST:-$(dirname "$LAZYBLK")/guest/testguest.elf}
if [ ! -f "$GUEST" ] || { ! kvm_usable && [ "${LAZYBLK_TEST_NESTED:-}" != 1 ]; }; then
  echo "ok: lazyblk run part skipped (no usable /dev/kvm or no test guest at $GUEST)"
  exit 0
fi
kvm_require --long 7   # (nested: the parts above run again there)
python3 "$TESTLIB/../../guest/disk.py" make "$T/gdisk.img"
rc=0
timeout 300 "$LAZYBLK" run --kernel "$GUEST" --disk "$T/gdisk.img" --cpus 2 --mem 64 \
  --append "testguest.discard_zeroes=1" --user nobody --seccomp \
  >"$T/guest.log" 2>"$T/guest.err" </dev/null || rc=$?
tr -d '\r' <"$T/guest.log" >"$T/guest.txt"
if [ "$rc" -ne 0 ] || ! grep -qx "guest: PASS" "$T/guest.txt"; then
  tail -n 20 "$T/guest.txt" "$T/guest.err" >&2
  die "confined run: exit $rc, want 0 and guest: PASS"
fi
grep -q "guest: .*FAIL" "$T/guest.txt" && die "confined run: the guest reports failures"
python3 "$TESTLIB/../../guest/disk.py" check "$T/gdisk.img" --discard-zeroes --log "$T/guest.txt" ||
  die "confined run: disk contents"
echo "ok: lazyblk run --user nobody --seccomp: $(grep -c ': ok' "$T/guest.txt") guest checks, PASS"

# the lazy image as the guest's disk, confined: chunks read from the store, the guest's
# writes in the overlay, the statistics written at exit as nobody
scr=$(python3 "$TESTLIB/../../guest/disk.py" find "$T/img.raw" "$T/src/a.bin") ||
  die "a.bin not found in the export"
sums=$(python3 "$TESTLIB/../../guest/disk.py" sums "$T/img.raw" "$scr" 1)
printf 'x' >"$T/dummy.initrd"
rc=0
# shellcheck disable=SC2086 # $sums: several kernel arguments
timeout 300 "$LAZYBLK" run "$T/img.layout" --store "$T/store" --overlay "$T/g.overlay" \
  --kernel "$GUEST" --initrd "$T/dummy.initrd" --cpus 1 --mem 64 --stats-json "$T/w/g.json" \
  --append "testguest.mode=image testguest.scratch=$scr testguest.discard_zeroes=1 $sums" \
  --user nobody --seccomp >"$T/gimg.log" 2>"$T/gimg.err" </dev/null || rc=$?
tr -d '\r' <"$T/gimg.log" >"$T/gimg.txt"
if [ "$rc" -ne 0 ] || ! grep -qx "guest: PASS" "$T/gimg.txt"; then
  tail -n 20 "$T/gimg.txt" "$T/gimg.err" >&2
  die "confined run of the lazy image: exit $rc, want 0 and guest: PASS"
fi
python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(not (s["reads"] > 0 and s["writes"] > 0 and s["dirty_blocks"] > 0))' "$T/w/g.json" ||
  die "confined run of the lazy image: statistics $(cat "$T/w/g.json")"
echo "ok: lazyblk run IMAGE --user nobody --seccomp: $(grep -c ': ok' "$T/gimg.txt") guest checks, PASS"
