#!/bin/bash
# lazyblk run: --help, usage errors, kernels that are not kernels; then (with a usable
# /dev/kvm) tiny guests assembled here: console output, the exit-status port, the boot
# timer, i8042 reset, halt detection, and an emulation failure ending the run cleanly.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/nested.sh"

out=$("$LAZYBLK" run --help)
grep -q "^usage: lazyblk run IMAGE.layout|REF --store DIR" <<<"$out" || die "run --help: $out"
for opt in --kernel --initrd --append --cpus --mem --disk --hugepages --populate --boot \
           --cache-dir --remote --modules; do
  grep -q -- "$opt" <<<"$out" || die "run --help lacks $opt"
done

# start-up cost: libcurl and libarchive (and the ~40 objects behind them) are loaded only by
# the commands that use them (common/dl.h), never at exec
loaded=$(LD_DEBUG=files "$LAZYBLK" --version 2>&1 >/dev/null | grep -oE 'file=[^ ]+' | sort -u)
grep -qE 'libcurl|libarchive|libgnutls|libkrb5' <<<"$loaded" &&
  die "lazyblk loads network/archive libraries at start: $(echo $loaded)"

printf 'not a kernel\n' >"$T/text"
expect_usage() {  # NAME WANT ARGS...: exit status 2 and one line
  local name=$1 want=$2; shift 2
  expect_error "$name" "$want" -- "$LAZYBLK" run "$@"
  local rc=0; "$LAZYBLK" run "$@" >/dev/null 2>&1 || rc=$?
  [ $rc -eq 2 ] || die "$name: exit $rc, want 2"
}
expect_usage "missing --kernel" "missing --kernel" --mem 64
expect_usage "missing --kernel with image" "missing --kernel" img.layout --store "$T/s"
expect_usage "--cpus 0" "bad --cpus '0'" --kernel "$T/text" --cpus 0
expect_usage "--cpus 65" "bad --cpus '65'" --kernel "$T/text" --cpus 65
expect_usage "--cpus abc" "bad --cpus 'abc'" --kernel "$T/text" --cpus abc
memrange="is not a size from 4M to 1T (a number with K, M, G or T: powers of 1024; without one, MiB)"
expect_usage "--mem 0" "--mem: '0' $memrange" --kernel "$T/text" --mem 0
expect_usage "--mem 2" "--mem: '2' $memrange" --kernel "$T/text" --mem 2
expect_usage "--mem -5" "--mem: '-5' $memrange" --kernel "$T/text" --mem -5
expect_usage "--mem 1GB" "--mem: '1GB' $memrange" --kernel "$T/text" --mem 1GB
expect_usage "--mem huge" "--mem: '99999999999' $memrange" --kernel "$T/text" --mem 99999999999
expect_usage "--mem 4100K" "--mem: '4100K' is not a whole number of MiB" --kernel "$T/text" --mem 4100K
expect_usage "--boot" "bad --boot 'bios'" --kernel "$T/text" --boot bios
expect_usage "--store without image" "need IMAGE.layout" --kernel "$T/text" --store "$T/s"
expect_usage "--stats-json without image" "need IMAGE.layout" --kernel "$T/text" --stats-json "$T/j"
expect_usage "image without --store" "missing --store" img.layout --kernel "$T/text"
expect_usage "CMD without image" "-- CMD needs IMAGE.layout" --kernel "$T/text" -- /bin/true
expect_usage "two images" "unexpected argument" a.layout b.layout --store "$T/s" --kernel k
expect_usage "bad --disk" "bad --disk" --kernel "$T/text" --disk ,ro
expect_usage "unknown option" "unknown option '--bogus'" --kernel "$T/text" --bogus
expect_usage "--kernel without argument" "option '--kernel' needs an argument" --kernel
expect_usage "--modules without image" "--modules, --stats-json" --kernel "$T/text" --modules none
expect_usage "--modules with --initrd" "--modules is for the built initramfs: drop --initrd" \
  img.layout --store "$T/s" --kernel "$T/text" --initrd "$T/text" --modules none

# --modules DIR reaches the initramfs builder (before KVM, so no /dev/kvm needed): a fake
# bzImage (its setup header names the version) with no modules anywhere gets the builder's
# "pass --modules DIR", which is now an option of run
kver=6.1.0-99-test-amd64
mkdir -p "$T/k/boot" "$T/mods/$kver" "$T/nomods"
{ head -c 8192 /dev/zero | tr '\0' '\220'; } >"$T/k/boot/vmlinuz-$kver"
patch_k() { printf "$2" | dd of="$T/k/boot/vmlinuz-$kver" bs=1 seek=$(($1)) conv=notrunc 2>/dev/null; }
patch_k 0x1f1 '\x04'; patch_k 0x202 'HdrS\x0f\x02'; patch_k 0x20e '\x00\x04'
patch_k 0x600 "$kver (builder@example) #1 SMP Debian\0"
printf 'kernel/drivers/block/virtio_blk.ko\nkernel/drivers/virtio/virtio_mmio.ko\nkernel/fs/ext4/ext4.ko\n' \
  >"$T/mods/$kver/modules.builtin"
if [ -x /bin/busybox ] && ! grep -q INTERP <<<"$(LC_ALL=C readelf -l /bin/busybox 2>/dev/null)" &&
   command -v readelf >/dev/null; then
  runk() { XDG_CACHE_HOME="$T/cache" "$LAZYBLK" ${V:-} run "$T/missing.layout" --store "$T/s" \
             --kernel "$T/k/boot/vmlinuz-$kver" "$@" -- /bin/true; }
  expect_error "run without modules" "in /lib/modules: pass --modules DIR" -- runk
  grep -qF "run: initramfs: no modules for kernel $kver next to" "$T/.err" || die "$(cat "$T/.err")"
  expect_error "run --modules (no modules there)" "initramfs: $T/nomods: no kernel modules for $kver there" -- \
    runk --modules "$T/nomods"
  # with modules (all built in here), the initramfs is built and the run goes on to the disk
  rc=0; V=-v runk --modules "$T/mods" </dev/null >"$T/out" 2>"$T/err" || rc=$?
  [ $rc -eq 1 ] || { cat "$T/err"; die "run --modules DIR: exit $rc, want 1 (no layout)"; }
  grep -q "initramfs $T/cache/lazyblk/initramfs/.*cpio (ready at" "$T/err" ||
    die "run --modules DIR: no initramfs built: $(cat "$T/err")"
  grep -q "missing.layout" "$T/err" || die "run --modules DIR: not the layout's error: $(cat "$T/err")"
  V=-v runk --modules none </dev/null >/dev/null 2>"$T/err" || true
  grep -q "initramfs .*cpio (ready at" "$T/err" || die "run --modules none: $(cat "$T/err")"
  echo "ok: run --modules DIR / none reach the initramfs builder"
  # a cache directory another user made first (HOME and XDG_CACHE_HOME unset: the shared
  # /var/tmp/lazyblk-initramfs-UID) is neither read nor written: the initramfs is built
  # without a name, after one warning (on 18dca29 it went there, the env readable to them)
  if [ "$(id -u)" = 0 ]; then
    theirs="$T/theirs/lazyblk/initramfs"
    mkdir -p "$theirs" && chown -R 65534:65534 "$T/theirs"
    rc=0; XDG_CACHE_HOME="$T/theirs" "$LAZYBLK" -v run "$T/missing.layout" --store "$T/s" \
      --kernel "$T/k/boot/vmlinuz-$kver" --modules none -- /bin/true </dev/null >"$T/out" \
      2>"$T/err" || rc=$?
    [ $rc -eq 1 ] || { cat "$T/err"; die "run, cache of another user: exit $rc, want 1"; }
    grep -qF "initramfs cache directory $theirs not used (owned by another user): building without a cache" \
      "$T/err" || die "run, cache of another user: no warning: $(cat "$T/err")"
    [ "$(grep -c 'not used' "$T/err")" = 1 ] || die "more than one warning: $(cat "$T/err")"
    grep -q "initramfs /proc/self/fd/[0-9]* (ready at" "$T/err" ||
      die "run, cache of another user: not built without a cache: $(cat "$T/err")"
    [ -z "$(ls -A "$theirs")" ] || die "run wrote into another user's cache: $(ls -A "$theirs")"
    expect_error "initramfs, cache of another user" \
      "cache directory $theirs: owned by another user (not used): give a private --cache-dir, or -o FILE" -- \
      "$LAZYBLK" initramfs --kernel "$T/k/boot/vmlinuz-$kver" --modules none --cache-dir "$theirs" -- /bin/true
    "$LAZYBLK" initramfs --kernel "$T/k/boot/vmlinuz-$kver" --modules none --cache-dir "$theirs" \
      -o "$T/own.cpio" -- /bin/true 2>"$T/err" || die "initramfs -o: $(cat "$T/err")"
    [ -s "$T/own.cpio" ] && [ -z "$(ls -A "$theirs")" ] || die "initramfs -o: not built apart"
    grep -q "not used (owned by another user)" "$T/err" || die "initramfs -o: $(cat "$T/err")"
    echo "ok: a cache directory of another user is not used"
  fi
else
  echo "SKIP: no static /bin/busybox (and readelf): run --modules not exercised"
fi

kvm_require   # (nested: the command-line checks above run again there)

expect_error "missing kernel" "No such file or directory" -- \
  "$LAZYBLK" run --kernel "$T/missing" --mem 16
expect_error "directory as kernel" "kernel $T" -- "$LAZYBLK" run --kernel "$T" --mem 16
expect_error "text as kernel" "not a kernel (neither a bzImage nor an ELF vmlinux)" -- \
  "$LAZYBLK" -q run --kernel "$T/text" --mem 16
# a bzImage cut short: the setup header is there, the payload is not
{ head -c 512 /dev/zero | tr '\0' '\1'; } >"$T/short"
printf '\x55\xaa\xeb\x6aHdrS\x0f\x02' | dd of="$T/short" bs=1 seek=$((0x1fe)) conv=notrunc 2>/dev/null
printf '\x01' | dd of="$T/short" bs=1 seek=$((0x236)) conv=notrunc 2>/dev/null  # XLF_KERNEL_64
dd if=/dev/zero of="$T/short" bs=1 count=1 seek=2047 conv=notrunc 2>/dev/null
expect_error "truncated bzImage" "truncated" -- \
  "$LAZYBLK" -q run --kernel "$T/short" --mem 16
expect_error "missing --disk" "--disk $T/nodisk" -- \
  "$LAZYBLK" -q run --kernel "$T/text" --disk "$T/nodisk"

command -v gcc >/dev/null && command -v ld >/dev/null || skip "no gcc/ld to build the tiny guests"
guest() {  # NAME: assemble $T/NAME.S (64-bit code entered at 0x200000) into $T/NAME.elf
  gcc -c "$T/$1.S" -o "$T/$1.o" && ld -static -nostdlib -Ttext=0x200000 -e _start \
    "$T/$1.o" -o "$T/$1.elf" || die "cannot build guest $1"
}
cat >"$T/hello.S" <<'G'
	.globl _start
_start:	movw $0x440, %dx
	movb $42, %al
	outb %al, %dx
	leaq msg(%rip), %rsi
	movw $0x3f8, %dx
1:	lodsb
	testb %al, %al
	jz 2f
	outb %al, %dx
	jmp 1b
2:	movw $0x441, %dx
	movb $7, %al
	outb %al, %dx
	cli
	hlt
	jmp 2b
msg:	.asciz "hello from the guest\n"
G
cat >"$T/reset.S" <<'G'
	.globl _start
_start:	movb $0xfe, %al
	outb %al, $0x64
1:	jmp 1b
G
cat >"$T/xrstor.S" <<'G'
	.globl _start
_start:	movq %cr4, %rax
	orq $(1 << 18), %rax
	movq %rax, %cr4
	xorl %ecx, %ecx
	movl $3, %eax
	xorl %edx, %edx
	xsetbv
	leaq area(%rip), %rdi
	movl $3, %eax
	xorl %edx, %edx
	xrstor (%rdi)
	cli
	hlt
	.balign 64
area:	.zero 1024
G
for g in hello reset xrstor; do guest $g; done

rc=0
"$LAZYBLK" run --kernel "$T/hello.elf" --mem 16 </dev/null >"$T/out" 2>"$T/err" || rc=$?
[ $rc -eq 7 ] || { cat "$T/err"; die "hello: exit $rc, want 7 (the exit-status port)"; }
grep -qx "hello from the guest" "$T/out" || die "hello: console output: $(cat "$T/out")"
grep -Eq "^lazyblk: run: boot-timer: 42 at [0-9.]+ ms$" "$T/err" || die "no boot-timer line: $(cat "$T/err")"
echo "ok: hello guest -> exit 7, console and boot timer"
# where KVM is software, run says so (once, at the start, and not under -q)
notice="^lazyblk: run: no hardware virtualization (no vmx/svm in /proc/cpuinfo): KVM here is a software implementation; a Linux guest will be very slow"
if ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
  [ "$(grep -c "$notice" "$T/err")" -eq 1 ] || die "hello: no software-KVM notice: $(cat "$T/err")"
  [ "$(head -1 "$T/err" | grep -c "$notice")" -eq 1 ] || die "hello: the notice is not first: $(cat "$T/err")"
  line=$(head -1 "$T/err")
  rc=0
  "$LAZYBLK" -q run --kernel "$T/hello.elf" --mem 16 </dev/null >/dev/null 2>"$T/err" || rc=$?
  [ $rc -eq 7 ] || { cat "$T/err"; die "hello -q: exit $rc, want 7"; }
  grep -q "no hardware virtualization" "$T/err" && die "hello -q: the notice under -q: $(cat "$T/err")"
  echo "ok: software-KVM notice (not under -q): $line"
else
  echo "SKIP: vmx/svm in /proc/cpuinfo: no software-KVM notice to check"
fi

rc=0
"$LAZYBLK" run --kernel "$T/hello.elf" --mem 64 --cpus 4 --populate </dev/null >"$T/out" 2>"$T/err" || rc=$?
[ $rc -eq 7 ] || { cat "$T/err"; die "hello on 4 vCPUs: exit $rc, want 7"; }
echo "ok: 4 vCPUs (the APs never started count as halted)"

rc=0
timeout 60 "$LAZYBLK" -q run --kernel "$T/reset.elf" --mem 16 </dev/null >"$T/out" 2>"$T/err" || rc=$?
[ $rc -eq 0 ] || { cat "$T/err"; die "reset: exit $rc, want 0"; }
echo "ok: i8042 reset ends the VM"

if ! grep -qwE 'vmx|svm' /proc/cpuinfo; then
  rc=0
  timeout 60 "$LAZYBLK" run --kernel "$T/xrstor.elf" --mem 16 </dev/null >"$T/out" 2>"$T/err" || rc=$?
  [ $rc -eq 1 ] || { cat "$T/err"; die "xrstor: exit $rc, want 1"; }
  grep -q "^lazyblk: run: no hardware virtualization (no vmx/svm in /proc/cpuinfo)" "$T/err" ||
    die "no software-KVM notice: $(cat "$T/err")"
  grep -q "^lazyblk: run: vCPU 0: KVM internal error: emulation failure at rip 0x.*KVM here is a software implementation" "$T/err" ||
    die "emulation failure not reported: $(cat "$T/err")"
  [ "$(wc -l <"$T/err")" -eq 2 ] || die "xrstor: more than the notice and the error: $(cat "$T/err")"
  echo "ok: emulation failure -> $(tail -1 "$T/err")"
fi
echo "run cli: ok"
