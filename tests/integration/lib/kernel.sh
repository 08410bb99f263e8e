# Sourced by integration tests that boot Debian's stock cloud kernel under QEMU (after
# common.sh). Debian's linux-image-cloud-amd64 is fetched once (apt-get download +
# dpkg-deb -x) into $LAZYBLK_KERNEL_CACHE (default /var/cache/lazyblk-test/kernel, else
# ~/.cache/lazyblk-test/kernel) and reused.
#
#   kernel_require   sets KERNEL (vmlinuz) and KVER, or skips the test (exit 77)
#   kernel_generic   sets KERNEL_GENERIC (Debian's generic kernel), or returns 1
#   busybox_require  sets BUSYBOX (a static busybox), or skips the test
#   busybox_root DIR DIR/bin holds busybox and a link for each of its applets
#   qemu_vu, vu_*    boot it under QEMU TCG with a `lazyblk serve --vhost-user` disk

# kernel_cache and fetch_kernel: one copy, shared with scripts/run-sample.sh and bench/.
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/scripts/lib/kernel.sh"

kernel_require() {
  local kc
  kc=$(kernel_cache) || skip "no writable kernel cache directory"
  KERNEL=$(fetch_kernel "$kc") || skip "cannot fetch linux-image-cloud-amd64 (no network or apt?)"
  KVER=${KERNEL##*/vmlinuz-}
}

# kernel_generic: sets KERNEL_GENERIC to Debian's generic kernel (linux-image-amd64, whose
# ext4 and crc32c are modules), or returns 1 (nothing set) when it cannot be fetched
kernel_generic() {
  local kc
  kc=$(kernel_cache) || return 1
  KERNEL_GENERIC=$(fetch_kernel "$kc" amd64) || return 1
}

busybox_require() {
  BUSYBOX=/bin/busybox
  [ -x "$BUSYBOX" ] && ! grep -q INTERP <<<"$(readelf -l "$BUSYBOX" 2>/dev/null)" ||
    skip "$BUSYBOX is not a static busybox (install busybox-static)"
}
busybox_root() {
  local a
  mkdir -p "$1/bin"
  cp "$BUSYBOX" "$1/bin/busybox"
  for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -s busybox "$1/bin/$a"; done
}

# qemu_vu NAME INITRD SOCK [CHARDEV-OPTS]: QEMU (TCG) boots $KERNEL with INITRD, its disk a
# vhost-user-blk-pci on SOCK (guest memory shared from a memfd); the console goes to
# $T/NAME.log. Returns QEMU's exit status (124: still running after ${VU_TIMEOUT:-600} s: a
# hang guard, generous for a loaded machine; a guest that works ends in well under a minute).
qemu_vu() {
  local name=$1 initrd=$2 sock=$3 copts=${4:-}
  timeout "${VU_TIMEOUT:-600}" qemu-system-x86_64 -M pc -accel tcg -m 512M -smp "${VU_SMP:-2}" \
    -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
    -chardev "socket,id=c0,path=$sock$copts" -device vhost-user-blk-pci,chardev=c0 \
    -kernel "$KERNEL" -initrd "$initrd" -append "console=ttyS0 reboot=k panic=-1 no_timer_check" \
    -nographic -serial stdio -nodefaults -no-reboot </dev/null >"$T/$name.log" 2>&1
}

# vu_check_boot NAME RC: QEMU ended by itself (exit 0), no I/O errors on the console.
vu_check_boot() {
  local name=$1 rc=$2
  [ "$rc" -ne 124 ] || { tail -30 "$T/$name.log" >&2; die "$name: QEMU did not power off in time"; }
  [ "$rc" -eq 0 ] || { tail -30 "$T/$name.log" >&2; die "$name: QEMU exited $rc"; }
  ! grep -Eq "I/O error|EXT4-fs error|blk_update_request" "$T/$name.log" ||
    { grep -E "I/O error|EXT4-fs error|blk_update_request" "$T/$name.log" | head >&2; die "$name: I/O errors in the guest"; }
}

# vu_exit_status NAME: the N of the guest's last `lazyblk-exit: N`.
vu_exit_status() {
  tr -d '\r' <"$T/$1.log" | sed -n 's/^lazyblk-exit: \([0-9]*\)$/\1/p' | tail -1
}

# vu_serve NAME ARGS...: `lazyblk serve ARGS` in the background (output in $T/NAME.out/.err,
# pid in VU_PID, killed when the test exits: the first call replaces common.sh's EXIT trap,
# $T is still removed); returns once the socket $VU_SOCK exists.
VU_PIDS=()
vu_cleanup() {
  local p
  for p in "${VU_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # with remote.sh: its servers too (it kills ours when its trap is the one installed)
  if [ "$(type -t remote_cleanup)" = function ]; then remote_cleanup; else rm -rf "$T"; fi
}
vu_serve() {
  local name=$1; shift
  [ "${#VU_PIDS[@]}" -gt 0 ] || trap vu_cleanup EXIT
  rm -f "$VU_SOCK"
  "$LAZYBLK" serve "$@" >"$T/$name.out" 2>"$T/$name.err" &
  VU_PID=$!
  VU_PIDS+=("$VU_PID")
  local rc=0
  wait_for_state -p "$VU_PID" test -S "$VU_SOCK" && return 0 || rc=$?
  [ "$rc" -ne 2 ] || { cat "$T/$name.err" >&2; die "$name: server exited"; }
  die "$name: no socket $VU_SOCK"
}

# vu_stop PID NAME: SIGTERM; exit status 0 and statistics printed.
vu_stop() {
  local pid=$1 name=$2 rc=0
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$T/$name.err" >&2; die "$name: exit $rc after SIGTERM"; }
  grep -q "^requests " "$T/$name.out" || die "$name: no statistics at exit"
}

# vu_kill9 PID: the server dies without any cleanup.
vu_kill9() {
  kill -9 "$1"
  wait "$1" 2>/dev/null || true
}
