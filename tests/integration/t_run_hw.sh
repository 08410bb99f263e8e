#!/bin/bash
# Issue 6's hardware acceptance: on a machine with hardware virtualization (vmx/svm in
# /proc/cpuinfo), `lazyblk run` boots Debian's stock cloud kernel (the vmlinuz file as the
# package ships it) straight into the lazy image through the initramfs it builds, runs the
# container command, prints its output on the console and exits with its status; the
# overlay keeps what the guest wrote. Where KVM is software (this development machine) it skips, saying so.
. "$(dirname "$0")/lib/common.sh"

grep -qwE 'vmx|svm' /proc/cpuinfo ||
  skip "no hardware virtualization here (no vmx/svm in /proc/cpuinfo): /dev/kvm is software and cannot run a stock Linux kernel (t_run_debian_kernel checks how far it gets)"
[ -r /dev/kvm ] && [ -w /dev/kvm ] || skip "no usable /dev/kvm"
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! grep -q INTERP <<<"$(readelf -l "$BUSYBOX" 2>/dev/null)" ||
  skip "$BUSYBOX is not a static busybox (install busybox-static)"
. "$TESTLIB/kernel.sh"
kernel_require

# an image with a shell and some data
R=$T/root
mkdir -p "$R/bin" "$R/data" "$R/etc"
cp "$BUSYBOX" "$R/bin/busybox"
for a in sh echo cat sha256sum touch sync; do ln -s busybox "$R/bin/$a"; done
head -c 200000 /dev/urandom >"$R/data/x"
XSUM=$(sha256sum "$R/data/x" | cut -d' ' -f1)
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 256M >/dev/null

run() { # NAME ARGS... : lazyblk run with the image; output in $T/NAME.out, status in RC
  local name=$1; shift
  RC=0
  timeout 300 "$LAZYBLK" run "$T/img.layout" --store "$T/store" --overlay "$T/img.ov" \
    --kernel "$KERNEL" --mem 512 --append "console=ttyS0 reboot=k panic=-1" "$@" \
    >"$T/$name.out" 2>"$T/$name.err" </dev/null || RC=$?
  [ "$RC" -ne 124 ] || die "$name: lazyblk run hung"
}

run cmd -- /bin/sh -c "echo hello-from-lazyblk; sha256sum /data/x; echo written >/data/new; sync; exit 5"
[ "$RC" -eq 5 ] || { tail -20 "$T/cmd.out" "$T/cmd.err" >&2; die "exit status $RC, want 5"; }
grep -q "hello-from-lazyblk" "$T/cmd.out" || die "no command output on the console"
grep -q "$XSUM" "$T/cmd.out" || die "the guest read /data/x wrongly"

run second -- /bin/cat /data/new
[ "$RC" -eq 0 ] || die "second boot: exit $RC"
grep -q "^written" "$T/second.out" || die "the overlay lost the first boot's write"
echo "run on hardware KVM: command output, exit status 5, the overlay kept the write"
echo "run hw: ok"
