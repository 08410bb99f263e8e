#!/bin/busybox sh
# shellcheck shell=sh
# /init of the nested VM that lib/nested.sh boots where a machine has no /dev/kvm: the
# modules (lib/nested.sh lists them), the host's / read-only over virtiofs with fresh tmpfs
# on /tmp, /run, /var/tmp and /dev/shm, then the job named by lazyblk.job= on the kernel
# command line, run in that root, between the lines NESTED-BEGIN and NESTED-END rc=N.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# what udev would make: bash's process substitution and /dev/stdin use them
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
while read -r m; do
  insmod "/mods/$m.ko" || echo "nested: insmod $m failed"
done </mods/order
ip link set lo up
job=$(sed -n 's/.*lazyblk\.job=\([^ ]*\).*/\1/p' /proc/cmdline)
if ! mount -t virtiofs -o ro host /host; then
  echo "nested: cannot mount the host's / (virtiofs)"
  poweroff -f
fi
cp "/host$job" /job.sh
mkdir -p /dev/pts /dev/shm
for d in proc sys dev; do mount --bind "/$d" "/host/$d"; done
mount -t devpts devpts /host/dev/pts
# the directories of the host's /tmp (and the like) the job needs (lazyblk.keep=A,B: the
# checkout and the binary when they live there), kept visible, read-only, over the tmpfs
keep=$(sed -n 's/.*lazyblk\.keep=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
i=0
for k in $keep; do
  i=$((i + 1)); mkdir -p "/keep/$i"; mount --bind "/host$k" "/keep/$i"
done
for d in tmp run var/tmp dev/shm; do mount -t tmpfs -o mode=1777 tmpfs "/host/$d"; done
i=0
for k in $keep; do
  i=$((i + 1)); mkdir -p "/host$k"; mount --move "/keep/$i" "/host$k"
done
cp /job.sh /host/run/nested-job.sh
# This VM's vCPU must not halt: idle, it stalled for minutes (its timers not firing, QEMU's
# TCG thread outside asleep) in several runs here, with nested guests paused or waiting. A
# busy loop at SCHED_IDLE gets only the CPU time nothing else wants.
chroot /host chrt --idle 0 /bin/sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
# A heartbeat on the second serial port (a file on the host): lib/nested.sh's watchdog stops
# the VM when it no longer moves (the VM's timers stopped firing, or the VM froze), and shows
# its last lines when a test fails: the VM's uptime and load, then each thread of lazyblk,
# QEMU, nginx and linkem with its state, user and system ticks and where it waits.
beat() {
  echo "beat $(cat /proc/uptime) load $(cat /proc/loadavg)"
  for t in /proc/[0-9]*/task/[0-9]*; do
    read -r c <"$t/comm" 2>/dev/null || continue
    case $c in
      lazyblk*|qemu*|nginx*|linkem*)
        echo "  $c ${t#/proc/} $(cut -d' ' -f3,14,15 "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)" ;;
    esac
  done
}
(while :; do beat; sleep 10; done) </dev/null >/dev/ttyS1 2>/dev/null &
echo NESTED-BEGIN
# through a pipe, as the test runner's log file would be: no terminal, no progress lines
{
  chroot /host /bin/bash /run/nested-job.sh </dev/null 2>&1
  echo "NESTED-END rc=$?"
} | cat
poweroff -f
