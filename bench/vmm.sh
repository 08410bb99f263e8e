#!/bin/bash
# Benchmark the built-in VMM's own overhead against QEMU microvm: process start -> first
# guest instruction, and guest halt -> process exit, on the same tiny guest.
#
# Usage: bench/vmm.sh
# Environment:
#   LAZYBLK  the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS     runs per VMM, alternating (default 10; medians reported)
#
# The guest (assembled here, ~40 bytes of 32-bit code with a PVH note) is entered through
# PVH by both: `lazyblk run --boot pvh --kernel G --mem 16` and
# `qemu-system-x86_64 -M microvm,x-option-roms=off,rtc=off -accel kvm -m 16 -nodefaults
# -no-user-config -display none -serial stdio -kernel G -device isa-debug-exit` (QEMU loads
# the ELF through its PVH note, after its qboot firmware). Its first instruction writes 'S'
# to COM1; then it writes "E\n", the exit status (port 0x441, for lazyblk) and port 0xf4
# (isa-debug-exit, for QEMU), and halts with interrupts off. A python harness spawns each
# VMM with stdout on a pipe and takes CLOCK_MONOTONIC at spawn, at the first byte ('S'),
# at the last byte ('\n') and when the process has exited (waitpid):
#   start = first byte - spawn     (exec, VMM set-up, firmware if any, first instruction)
#   stop  = exit - last byte       (halt detection or debug-exit, teardown, process exit)
# The serial output is unbuffered in both, so a byte reaches the pipe when the guest's OUT
# instruction is handled. KVM on the benchmark host may be a software implementation (see
# docs/design.md, "Kinds of host"); both VMMs use the same one.
#
# Writes: build/bench/vmm.json and the `vmm` section of docs/benchmarks.md; then runs
# bench/vm_snapshot.sh (snapshot, restore, live upgrade: its own section) unless VMM_SNAPSHOT=0,
# and bench/vm_linux.sh (a Linux guest against QEMU microvm: boot, snapshot, restore, upgrade;
# nested where KVM here cannot run Linux; its own section) unless VMM_LINUX=0, with
# RUNS=$VM_LINUX_RUNS (default 3: a Linux boot takes seconds to tens of seconds there).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-10}
OUT=$ROOT/build/bench
JSON=$OUT/vmm.json
MD=$ROOT/docs/benchmarks.md
QEMU=qemu-system-x86_64

die() { echo "bench/vmm: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for t in gcc ld python3 $QEMU; do command -v $t >/dev/null || die "$t not found"; done
[ -r /dev/kvm ] && [ -w /dev/kvm ] || die "no usable /dev/kvm"

GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/vmm-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/g.S" <<'G'
	.code32
	.globl _start
_start:	movw $0x3f8, %dx
	movb $'S', %al
	outb %al, %dx
	movb $'E', %al
	outb %al, %dx
	movb $'\n', %al
	outb %al, %dx
	movw $0x441, %dx
	xorb %al, %al
	outb %al, %dx
	movw $0xf4, %dx
	outb %al, %dx
	cli
1:	hlt
	jmp 1b
	.section .note.Xen, "a", @note
	.balign 4
	.long 4, 4, 18
	.asciz "Xen"
	.long _start
G
gcc -c "$WORK/g.S" -o "$WORK/g.o"
ld -static -nostdlib -Ttext=0x200000 -e _start "$WORK/g.o" -o "$WORK/g.elf"
HW=$(grep -qwE 'vmx|svm' /proc/cpuinfo && echo "hardware (vmx/svm)" || echo "software (no vmx/svm)")
QVER=$($QEMU --version | sed -n 1p)

python3 - "$WORK/g.elf" "$LAZYBLK" "$QEMU" "$RUNS" "$JSON" "$WORK/section.md" "$GIT_REV" \
  "$HW" "$QVER" <<'PY'
import json, os, statistics, subprocess, sys, time
elf, lazyblk, qemu, runs, jpath, mdpath, rev, hw, qver = sys.argv[1:]
runs = int(runs)
cmds = {
    'lazyblk run': [lazyblk, '-q', 'run', '--boot', 'pvh', '--kernel', elf, '--mem', '16'],
    'qemu microvm': [qemu, '-M', 'microvm,x-option-roms=off,rtc=off', '-accel', 'kvm',
                     '-m', '16', '-nodefaults', '-no-user-config', '-display', 'none',
                     '-serial', 'stdio', '-kernel', elf,
                     '-device', 'isa-debug-exit,iobase=0xf4,iosize=4'],
}

def once(cmd):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    first = last = None
    data = b''
    while True:
        b = os.read(p.stdout.fileno(), 1)
        if not b:
            break
        now = time.monotonic()
        data += b
        if first is None:
            first = now
        if b == b'\n':
            last = now
            break
    p.wait()
    t_exit = time.monotonic()
    if not data.startswith(b'SE') or first is None or last is None:
        sys.exit('bench/vmm: %s: unexpected guest output %r (exit %s)' % (cmd[0], data, p.returncode))
    return (first - t0) * 1e3, (t_exit - last) * 1e3, (t_exit - t0) * 1e3

res = {k: [] for k in cmds}
for k in cmds:  # warm the page cache, untimed
    once(cmds[k])
for i in range(runs):
    for k in cmds:
        res[k].append(once(cmds[k]))
summary = {}
for k, v in res.items():
    summary[k] = {
        'start_ms': statistics.median(x[0] for x in v),
        'stop_ms': statistics.median(x[1] for x in v),
        'total_ms': statistics.median(x[2] for x in v),
        'runs': [{'start_ms': a, 'stop_ms': b, 'total_ms': c} for a, b, c in v],
    }
json.dump({'kvm': hw, 'qemu': qver, 'git': rev, 'results': summary}, open(jpath, 'w'), indent=1)
l, q = summary['lazyblk run'], summary['qemu microvm']
lines = [
    '## vmm: VMM start-up and shut-down overhead (%s)' % time.strftime('%Y-%m-%d'),
    '',
    'bench/vmm.sh, %d alternating runs each, medians; the same ~40-byte PVH guest, 16 MiB; '
    'KVM: %s; %s; lazyblk %s.' % (runs, hw, qver, rev),
    '',
    '| VMM | process start -> first guest instruction | guest halt -> process exit | total |',
    '|---|---:|---:|---:|',
]
for k in cmds:
    s = summary[k]
    lines.append('| %s | %.1f ms | %.1f ms | %.1f ms |' % (k, s['start_ms'], s['stop_ms'], s['total_ms']))
lines += ['',
          'Start-up: QEMU microvm / lazyblk = %.1fx; shut-down: %.1fx (goal: >= 10x less start-up '
          'overhead than QEMU microvm).' % (q['start_ms'] / l['start_ms'], q['stop_ms'] / max(l['stop_ms'], 0.001))]
open(mdpath, 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
PY
python3 "$ROOT/bench/lib/mdsection.py" "$MD" vmm <"$WORK/section.md"
echo "bench/vmm: results in $JSON and $MD"
# The snapshot side of the VMM (snapshot time and size, restore -> first guest instruction,
# live-upgrade pause) is its own script and section; VMM_SNAPSHOT=0 skips it.
if [ "${VMM_SNAPSHOT:-1}" != 0 ]; then
  LAZYBLK=$LAZYBLK "$ROOT/bench/vm_snapshot.sh"
fi
# A Linux guest (Debian's cloud kernel) in lazyblk run and in QEMU microvm, in a nested VM
# where KVM here cannot run Linux: its own script and section; VMM_LINUX=0 skips it.
if [ "${VMM_LINUX:-1}" != 0 ]; then
  LAZYBLK=$LAZYBLK RUNS=${VM_LINUX_RUNS:-3} "$ROOT/bench/vm_linux.sh"
fi
