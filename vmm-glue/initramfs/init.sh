#!/bin/sh
# lazyblk initramfs /init (vmm-glue/initramfs/init.sh, built into lazyblk): load the virtio
# modules, mount the image disk, run one command in it, report its exit status, end the VM.
# shellcheck disable=SC1091  # /etc/lazyblk/config: written by the builder
export PATH=/bin HOME=/
say() { echo "lazyblk-init: $*"; }
# shellcheck disable=SC2059  # the format is the bytes, as octal escapes
outb() { printf "\\$(printf %o $(($1 & 255)))\\$(printf %o $(($1 >> 8)))\\$(printf %o $(($2 & 255)))" | lazyblk-outb 2>/dev/null; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
grep -q ' /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev
outb 0x440 1   # boot timer: user space reached
. /etc/lazyblk/config
finish() {
	rc=$1
	kill -KILL -1 2>/dev/null
	sync
	for m in dev/.lazyblk dev/shm dev/pts dev sys proc; do
		grep -q " /newroot/$m " /proc/mounts && umount "/newroot/$m" 2>/dev/null
	done
	if grep -q ' /newroot ' /proc/mounts; then
		umount /newroot 2>/dev/null || mount -o remount,ro /newroot 2>/dev/null ||
			say "cannot unmount the root filesystem"
	fi
	sync
	echo "lazyblk-exit: $rc"
	# shellcheck disable=SC2059  # the format is the byte, as an octal escape
	outb 0x441 "$rc" || { [ -c /dev/port ] && printf "\\$(printf %o $((rc & 255)))" |
		dd of=/dev/port bs=1 seek=1089 count=1 2>/dev/null; }
	reboot -f
	sleep 3
	poweroff -f
	exit "$rc"
}
while read -r m; do
	[ -n "$m" ] && { insmod "/lib/modules/$LZ_KVER/$m.ko" || say "insmod $m failed"; }
done < /etc/lazyblk/modules
rm -rf /lib/modules
i=0
while [ ! -b "/dev/$LZ_ROOT" ]; do
	i=$((i + 1))
	if [ $i -gt $((LZ_ROOT_WAIT * 100)) ]; then
		say "no /dev/$LZ_ROOT after $LZ_ROOT_WAIT s (is the virtio-blk disk attached?)"
		finish 125
	fi
	usleep 10000
done
mkdir -p /newroot
mount -t "$LZ_FSTYPE" -o rw "/dev/$LZ_ROOT" /newroot ||
	{ say "cannot mount /dev/$LZ_ROOT ($LZ_FSTYPE) read-write"; finish 125; }
for d in proc sys dev; do
	[ -d "/newroot/$d" ] || mkdir -p "/newroot/$d" || { say "no /$d in the image"; finish 125; }
done
{ mount -t proc proc /newroot/proc && mount -t sysfs sysfs /newroot/sys &&
	mount -t devtmpfs devtmpfs /newroot/dev; } || { say "cannot mount proc/sys/dev in the image"; finish 125; }
mkdir -p /newroot/dev/pts /newroot/dev/shm /newroot/dev/.lazyblk
mount -t devpts -o ptmxmode=0666,mode=0620 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777,nosuid,nodev shm /newroot/dev/shm
{ mount -t tmpfs -o mode=0755,size=8m lazyblk /newroot/dev/.lazyblk &&
	cp /bin/busybox /bin/lazyblk-exec /etc/lazyblk/stage2 /etc/lazyblk/config \
		/etc/lazyblk/cmd /etc/lazyblk/env /newroot/dev/.lazyblk/; } ||
	{ say "cannot set up /dev/.lazyblk"; finish 125; }
tty=/dev/console
[ -c "/dev/$LZ_CONSOLE" ] && tty="/dev/$LZ_CONSOLE"
outb 0x440 2   # boot timer: the command starts
# shellcheck disable=SC2094  # the console: the command's stdin, stdout and stderr
env -i /bin/busybox setsid -c /bin/busybox chroot /newroot /dev/.lazyblk/busybox sh \
	/dev/.lazyblk/stage2 <"$tty" >"$tty" 2>&1
finish $?
