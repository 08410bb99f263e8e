# shellcheck shell=bash
# Sourced by the integration tests that need KVM (after common.sh).
#
# Some machines have no /dev/kvm at all: their kernel is itself a guest and offers no
# virtualization to its own processes. Others have a software /dev/kvm that runs the
# project's freestanding test guest but not a stock Linux kernel (no vmx/svm in
# /proc/cpuinfo). There the tests run again inside a nested VM that has a real KVM: Debian's
# cloud kernel (lib/kernel.sh fetches it) under QEMU in TCG mode with an emulated AMD-V CPU
# (-cpu max: SVM with nested paging), kvm_amd loaded, this machine's / shared read-only over
# virtiofs, fresh tmpfs on /tmp, /run, /var/tmp and /dev/shm (lib/nested_init.sh is its
# /init; a busy loop there at SCHED_IDLE keeps the VM's vCPU from halting, where it
# stalled). The same binary, the same test script, the same environment; its output and
# exit status are the test's.
#
#   kvm_require [--long MINUTES]  returns when a /dev/kvm is usable here (software or
#                   hardware); else runs the test nested and exits with its status (--long:
#                   a test that takes MINUTES nested skips in `make test`, saying so, and runs
#                   nested in `make test-nested`)
#   kvm_require_hw [--long MINUTES]  returns when KVM here can run a stock Linux kernel
#                   (vmx or svm); else runs the test nested and exits with its status
#                   (--long: as kvm_require's)
#   tmo SECS        a time limit scaled for where the test runs (x LAZYBLK_TIME_SCALE: 10 in
#                   the nested VM, where everything runs at TCG speed; common.sh)
# Call them before the test starts anything: the nested run starts over. A test that cannot
# run nested skips (77) saying why (no QEMU, virtiofsd, cpio, busybox or kernel).
#
#   LAZYBLK_TEST_NESTED=0  skip instead of nesting (a quick `make test` on such a host)
#   LAZYBLK_TEST_KVM=nested  nest even where /dev/kvm works (to see what a host without
#                   KVM runs, and how long it takes)
#
# NESTED_TIMEOUT (s) bounds each nested run: by default three times the MINUTES of --long,
# at least 20 minutes, so that a test that hangs there fails well within the budget of a CI
# run. A watchdog stops a VM whose heartbeat (nested_init.sh: a line on its second serial
# port every 10 s, with what lazyblk's threads do) has not moved for NESTED_STALL seconds
# (default 180): the test bed, not the test, stopped, and the test runs again, saying
# "retry:" (run-integration.sh shows those lines), at most NESTED_TRIES times in all
# (default 3). Seen here: a stall in about one run in four of t_run_hw, in a boot of
# Debian's generic kernel, the L1 vCPU busy in the nested guest and the VM's own timer
# interrupts never taken (its heartbeat stops; with -smp 2 boots took over ten times as
# long): QEMU 7.2's TCG, not lazyblk, which the heartbeat shows running the guest.
#
# Everything in the nested VM runs at TCG speed, the test's own tools included (each python3
# or sed the test starts). Seen here (2 CPUs, shared): t_run_cli 1 minute, t_vmm_guest 3,
# t_vm_upgrade (20 upgrades) 3, t_run_hw 5, t_vm_linux 6, t_confine 7, t_vm_snapshot 10,
# t_run_control 19; the last three are --long: only `make test-nested` runs them nested.
# (Before nested_init.sh's busy loop, t_vm_upgrade took over 36 minutes: the idle VM
# stalled.)

kvm_usable() { [ -r /dev/kvm ] && [ -w /dev/kvm ]; }
kvm_hw() { kvm_usable && grep -qwE 'vmx|svm' /proc/cpuinfo; }
_kvm_here() { [ -n "${LAZYBLK_NESTED:-}" ] || [ "${LAZYBLK_TEST_KVM:-}" != nested ]; }

# _kvm_nest WHAT [MINUTES]: no KVM here that can run this test (WHAT says what is missing):
# skip, or run it nested (MINUTES: how long it takes there) and exit with its status
_kvm_nest() {
  [ -z "${LAZYBLK_NESTED:-}" ] ||
    skip "no $1 even in the nested VM (did kvm_amd load? see its console)"
  [ "${LAZYBLK_TEST_NESTED:-}" != 0 ] ||
    skip "no $1 here (LAZYBLK_TEST_NESTED=0: not run in a nested VM)"
  nested_run "$0" "${2:-}"
}

kvm_require() {
  kvm_usable && _kvm_here && return 0
  # --long MINUTES: nested, the test takes that long, more than `make test` can give it
  [ -n "${LAZYBLK_NESTED:-}" ] || [ "${1:-}" != --long ] || [ "${LAZYBLK_TEST_NESTED:-}" = 1 ] ||
    skip "no usable /dev/kvm, and in a nested VM this test takes about $2 minutes, more than make test's budget: make test-nested runs it"
  _kvm_nest "usable /dev/kvm" "${2:-}"
}

kvm_require_hw() {
  kvm_hw && _kvm_here && return 0
  [ -n "${LAZYBLK_NESTED:-}" ] || [ "${1:-}" != --long ] || [ "${LAZYBLK_TEST_NESTED:-}" = 1 ] ||
    skip "no KVM with vmx/svm here, and in a nested VM this test takes about $2 minutes, more than make test's budget: make test-nested runs it"
  _kvm_nest "KVM with vmx/svm" "${2:-}"
}

# The modules the nested VM loads, in order (virtio-pci and virtiofs for /, then KVM).
NESTED_MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
  fuse virtiofs irqbypass kvm kvm-amd"
NESTED_VIRTIOFSD=${NESTED_VIRTIOFSD:-/usr/lib/qemu/virtiofsd}

# nested_initrd DIR MODDIR: DIR/initrd.gz with busybox, the modules and lib/nested_init.sh.
nested_initrd() {
  local d=$1 moddir=$2 m f
  rm -rf "$d/ird" && mkdir -p "$d/ird/bin" "$d/ird/mods" "$d/ird/proc" "$d/ird/sys" \
    "$d/ird/dev" "$d/ird/host"
  cp /bin/busybox "$d/ird/bin/busybox"
  cp "$TESTLIB/nested_init.sh" "$d/ird/init" && chmod 755 "$d/ird/init"
  : >"$d/ird/mods/order"
  for m in $NESTED_MODULES; do
    f=$(find "$moddir" \( -name "$m.ko" -o -name "$m.ko.xz" \) -print -quit)
    [ -n "$f" ] || continue   # built in
    case $f in
      *.xz) xz -dc "$f" >"$d/ird/mods/$m.ko" ;;
      *) cp "$f" "$d/ird/mods/$m.ko" ;;
    esac
    echo "$m" >>"$d/ird/mods/order"
  done
  (cd "$d/ird" && find . | cpio -o -H newc --quiet | gzip -1 >"$d/initrd.gz")
}

nested_on_exit() {
  kill "$NESTED_QEMU" 2>/dev/null || true
  if [ -n "$NESTED_PREV_TRAP" ]; then   # "trap -- 'CMD' EXIT": run CMD
    eval "set -- $NESTED_PREV_TRAP"
    eval "$3"
  fi
}

# _nested_boot DIR LIMIT KEEP: virtiofsd and the VM for DIR/job.sh (console in DIR/console.log),
# at most LIMIT seconds; a watchdog stops the VM when its heartbeat (nested_init.sh writes one
# on its second serial port every 10 s) has not moved for NESTED_STALL seconds (default 180)
# and leaves DIR/stalled. Returns QEMU's exit status (124: over LIMIT).
_nested_boot() {
  local d=$1 limit=$2 keep=$3 vfs=$1/vfs.sock rc=0 wd
  rm -f "$d/stalled" "$d/heartbeat.log" "$vfs"
  "$NESTED_VIRTIOFSD" --socket-path="$vfs" -o source=/ -o cache=auto -o sandbox=chroot \
    >"$d/virtiofsd.log" 2>&1 &
  wait_for_state test -S "$vfs" ||
    { cat "$d/virtiofsd.log" >&2; die "nested VM: virtiofsd did not start"; }
  # One TCG thread and one CPU: with QEMU 7.2's multi-threaded TCG the nested guests
  # triple-faulted or stopped after a few seconds (a counting guest, with no upgrade, pause
  # or snapshot, in each of 3 runs); with one thread 12,000 counts went by without a fault.
  timeout "$limit" qemu-system-x86_64 -M q35 -accel tcg,thread=single \
    -cpu max -smp 1 -m 4G \
    -object memory-backend-memfd,id=mem,size=4G,share=on -numa node,memdev=mem \
    -chardev "socket,id=vfs,path=$vfs" -device vhost-user-fs-pci,chardev=vfs,tag=host \
    -kernel "$KERNEL" -initrd "$d/initrd.gz" \
    -append "console=ttyS0 quiet loglevel=3 reboot=k panic=-1 no_timer_check lazyblk.job=$d/job.sh${keep:+ lazyblk.keep=$keep}" \
    -nographic -serial stdio -chardev "file,id=hb,path=$d/heartbeat.log" -serial chardev:hb \
    -nodefaults -no-reboot </dev/null >"$d/console.log" 2>&1 &
  # the test killed (a runner's timeout): the VM goes with it, then the test's own EXIT trap
  NESTED_QEMU=$!
  [ -n "${NESTED_PREV_TRAP+set}" ] || NESTED_PREV_TRAP=$(trap -p EXIT)
  trap nested_on_exit EXIT
  (
    last=-1 still=0
    while kill -0 "$NESTED_QEMU" 2>/dev/null; do
      sleep 10
      n=$(stat -c %s "$d/heartbeat.log" 2>/dev/null || echo 0)
      if [ "$n" != "$last" ]; then last=$n still=0; else still=$((still + 10)); fi
      if [ "$still" -ge "${NESTED_STALL:-180}" ]; then
        : >"$d/stalled"
        kill "$NESTED_QEMU" 2>/dev/null
        break
      fi
    done
  ) </dev/null >/dev/null 2>&1 &
  wd=$!
  wait "$NESTED_QEMU" || rc=$?
  kill "$wd" 2>/dev/null
  wait "$wd" 2>/dev/null
  return "$rc"
}

# nested_run SCRIPT [MINUTES]: SCRIPT again in the nested VM (MINUTES: how long it takes there);
# exits with its status.
nested_run() {
  local script d rc=0 res v scale keep limit try
  script=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  command -v qemu-system-x86_64 >/dev/null ||
    skip "no usable /dev/kvm, and no qemu-system-x86_64 for a nested VM"
  [ -x "$NESTED_VIRTIOFSD" ] || skip "no usable /dev/kvm, and no $NESTED_VIRTIOFSD for a nested VM"
  command -v cpio >/dev/null || skip "no usable /dev/kvm, and no cpio to build a nested VM"
  [ -x /bin/busybox ] || skip "no usable /dev/kvm, and no /bin/busybox to build a nested VM"
  # shellcheck source=kernel.sh
  . "$TESTLIB/kernel.sh"
  kernel_require   # KERNEL, KVER (or skips)
  # the nested VM sees the host's / read-only: both Debian kernels fetched now, while the
  # cache is writable (a test there that wants the generic one finds it)
  kernel_generic || true
  d=$T/.nested
  mkdir -p "$d"
  nested_initrd "$d" "$(dirname "$KERNEL")/../lib/modules/$KVER/kernel"

  # the job: this environment's variables that a test reads, the same directory, the script
  {
    echo "export LAZYBLK_NESTED=1"
    printf 'export LAZYBLK=%q\n' "$(realpath "$LAZYBLK")"
    for v in $(compgen -e); do
      case $v in
        LAZYBLK*|GUEST|PATH|HOME|CI|SAN|ASAN_OPTIONS|UBSAN_OPTIONS|LSAN_OPTIONS|MSAN_OPTIONS|\
        PYTHON*|LANG|LC_*|TZ|VU_*|KERNEL_*|LINKEM) printf 'export %s=%q\n' "$v" "${!v}" ;;
      esac
    done
    # TCG speed: time limits x10 (tmo, wait_for; LAZYBLK_NESTED_SCALE=N: xN); the kernel
    # cache read-only as fetched
    # here; caches of lazyblk itself (initramfs, vmlinux) on the VM's tmpfs, kept for the
    # run of the test
    scale=${LAZYBLK_NESTED_SCALE:-10}
    echo "export LAZYBLK_TIME_SCALE=$scale LAZYBLK_TEST_WAIT=$((120 * scale))"
    printf 'export LAZYBLK_KERNEL_CACHE=%q\n' "$(kernel_cache)"
    echo "export XDG_CACHE_HOME=/var/tmp/lazyblk-nested-cache"
    echo 'mkdir -p "$XDG_CACHE_HOME"'
    printf 'cd %q 2>/dev/null || cd /\n' "$PWD"
    printf 'exec bash %q\n' "$script"
  } >"$d/job.sh"

  # what the job needs from a directory the VM covers with a tmpfs (a checkout in /tmp):
  # the top directory there of the script and of the binary, kept visible (nested_init.sh)
  keep=""
  for v in "$script" "$(realpath "$LAZYBLK")"; do
    case $v in
      /tmp/*/*|/run/*/*|/var/tmp/*/*|/dev/shm/*/*)
        v=$(echo "$v" | sed -E 's#^(/var/tmp|/dev/shm|/tmp|/run)/([^/]+)/.*#\1/\2#')
        case ",$keep," in *",$v,"*) ;; *) keep=${keep:+$keep,}$v ;; esac ;;
    esac
  done
  echo "note: no KVM here that runs this test: it runs in a nested VM (QEMU TCG, emulated AMD-V, kvm_amd)"
  limit=${NESTED_TIMEOUT:-$(( ${2:-0} * 3 * 60 > 1200 ? ${2:-0} * 3 * 60 : 1200 ))}
  for try in $(seq 1 "${NESTED_TRIES:-3}"); do
    rc=0
    _nested_boot "$d" "$limit" "$keep" || rc=$?
    [ -e "$d/stalled" ] && [ "$try" -lt "${NESTED_TRIES:-3}" ] || break
    # a VM that stopped making progress is the test bed failing, not the test: again
    echo "retry: the nested VM stalled (no heartbeat for ${NESTED_STALL:-180} s; try $try); its console:" >&2
    tr -d '\r' <"$d/console.log" | tail -n 15 >&2
  done
  tr -d '\r' <"$d/console.log" >"$d/console.txt"
  res=$(sed -n 's/^NESTED-END rc=\([0-9]*\)$/\1/p' "$d/console.txt" | tail -1)
  if [ -z "$res" ] || [ "$res" != 0 ] && [ "$res" != 77 ]; then
    # what the VM's threads were doing at its last heartbeat (nested_init.sh)
    echo "the nested VM's last heartbeat:" >&2
    # (every reader reads to the end: under pipefail, one that quits early (sed q, head)
    # kills the writer with SIGPIPE, and set -e ended the harness before the test's output)
    tac "$d/heartbeat.log" 2>/dev/null | sed -n '1,/^beat /p' | tac | sed -n 1,60p >&2
  fi
  if [ -z "$res" ]; then
    tail -n 40 "$d/console.txt" >&2
    [ ! -e "$d/stalled" ] ||
      die "nested VM: it stalled at each of ${NESTED_TRIES:-3} tries (no heartbeat for ${NESTED_STALL:-180} s)"
    die "nested VM: the test did not finish (QEMU exit $rc; 124 is over $limit s)"
  fi
  # the test's own output (its last line is what a skip says)
  # (the line of NESTED-BEGIN may start with the firmware's terminal escapes)
  sed -n '/NESTED-BEGIN$/,/^NESTED-END rc=/p' "$d/console.txt" | sed '1d;$d'
  exit "$res"
}
