#!/bin/bash
# Benchmark VM snapshots and live upgrade (issue 17): snapshot time and size for a 256 MiB
# guest that touched 32 MiB, restore -> first guest instruction, and the pause of a live
# upgrade of that guest.
#
# Usage: bench/vm_snapshot.sh
# Environment:
#   LAZYBLK  the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS     restores and live upgrades (default 10 each; medians reported)
#
# The guest (assembled here, PVH entry, paging off) writes one byte to each 4 KiB page of
# 32 MiB from 16 MiB, then loops writing 'x' to COM1 forever. `lazyblk -v run --boot pvh
# --mem 256 --control SOCK` runs it; once it prints, `snapshot SNAP` on the socket takes the
# snapshot, whose log line gives the pause (the VM is paused for the whole write: RAM
# scanned, 32 MiB written, state, fsyncs); the size is what SNAP occupies on disk. Then `lazyblk run --restore SNAP`
# is spawned RUNS times (the ram file in the page cache after the first, untimed one) with
# stdout on a pipe: restore = first byte - spawn (exec, open and check the snapshot, map
# RAM, verify its digest — reads the 32 MiB —, set up vCPUs and devices, the first
# instruction after the restored RIP, within the guest's output loop). The process is
# killed once it printed. Before that, the snapshotted VM is upgraded RUNS times in a row
# (`upgrade` on its socket: exec of the same binary, which takes over RAM and state); each
# answer "ok upgraded: paused N ms" gives the pause (from vmm_pause to the vCPUs running
# again in the new process).
#
# Writes: build/bench/vm_snapshot.json and the `vm_snapshot` section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-10}
OUT=$ROOT/build/bench
JSON=$OUT/vm_snapshot.json
MD=$ROOT/docs/benchmarks.md

die() { echo "bench/vm_snapshot: $*" >&2; exit 1; }
[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for t in gcc ld python3; do command -v $t >/dev/null || die "$t not found"; done
[ -r /dev/kvm ] && [ -w /dev/kvm ] || die "no usable /dev/kvm"

GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/vm_snapshot-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/g.S" <<'G'
	.code32
	.globl _start
_start:	movl $0x1000000, %edi
	movl $8192, %ecx
1:	movl %ecx, (%edi)
	addl $4096, %edi
	loop 1b
	movw $0x3f8, %dx
	movb $'x', %al
2:	outb %al, %dx
	jmp 2b
	.section .note.Xen, "a", @note
	.balign 4
	.long 4, 4, 18
	.asciz "Xen"
	.long _start
G
gcc -c "$WORK/g.S" -o "$WORK/g.o"
ld -static -nostdlib -Ttext=0x200000 -e _start "$WORK/g.o" -o "$WORK/g.elf"
HW=$(grep -qwE 'vmx|svm' /proc/cpuinfo && echo "hardware (vmx/svm)" || echo "software (no vmx/svm)")

python3 - "$WORK" "$LAZYBLK" "$RUNS" "$JSON" "$WORK/section.md" "$GIT_REV" "$HW" <<'PY'
import json, os, re, socket, statistics, subprocess, sys, time
work, lazyblk, runs, jpath, mdpath, rev, hw = sys.argv[1:]
runs = int(runs)
snap = os.path.join(work, 'snap')
err = open(os.path.join(work, 'snap.err'), 'w+')
# the console into a file (never a full pipe: a vCPU blocked writing it cannot pause)
con = os.path.join(work, 'snap.out')
sock = os.path.join(work, 'ctl')
p = subprocess.Popen([lazyblk, '-v', 'run', '--boot', 'pvh', '--kernel',
                      os.path.join(work, 'g.elf'), '--mem', '256', '--control', sock],
                     stdin=subprocess.DEVNULL, stdout=open(con, 'wb'), stderr=err)
for _ in range(600):                      # the guest touched its 32 MiB once it prints
    if os.path.getsize(con):
        break
    time.sleep(0.05)

def ctl(req):
    c = socket.socket(socket.AF_UNIX)
    c.connect(sock)
    c.sendall(req.encode() + b'\n')
    c.shutdown(socket.SHUT_WR)
    out = b''
    while True:
        got = c.recv(4096)
        if not got:
            return out.decode().strip()
        out += got

ctl('snapshot ' + snap)
err.seek(0)
m = re.search(r'VM snapshot written to .* \(VM paused ([0-9.]+) ms\)', err.read())
pause = float(m.group(1)) if m else None
upgrades = []
for _ in range(runs if pause is not None else 0):
    r = ctl('upgrade')
    m = re.fullmatch(r'ok upgraded: paused ([0-9.]+) ms', r)
    if not m:
        p.kill()
        sys.exit('bench/vm_snapshot: upgrade: ' + r)
    upgrades.append(float(m.group(1)))
    time.sleep(0.2)
p.kill()
p.wait()
if pause is None:
    err.seek(0)
    sys.exit('bench/vm_snapshot: no snapshot: ' + err.read())
size = {f: os.stat(os.path.join(snap, f)).st_blocks * 512 for f in os.listdir(snap)}

def restore():
    t0 = time.monotonic()
    q = subprocess.Popen([lazyblk, '-q', 'run', '--restore', snap], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    b = os.read(q.stdout.fileno(), 1)
    t1 = time.monotonic()
    q.kill()
    q.wait()
    if b != b'x':
        sys.exit('bench/vm_snapshot: restore: %r %s' % (b, q.stderr.read()))
    return (t1 - t0) * 1e3

restore()                                 # the ram file into the page cache, untimed
res = [restore() for _ in range(runs)]
summary = {'pause_ms': pause, 'size_bytes': size, 'restore_ms': statistics.median(res),
           'restore_runs_ms': res, 'upgrade_pause_ms': statistics.median(upgrades),
           'upgrade_runs_ms': upgrades}
json.dump({'kvm': hw, 'git': rev, 'results': summary}, open(jpath, 'w'), indent=1)
mib = lambda n: n / 1048576
lines = [
    '## vm_snapshot: VM snapshot, restore and live upgrade (%s)' % time.strftime('%Y-%m-%d'),
    '',
    'bench/vm_snapshot.sh: a 256 MiB PVH guest that touched 32 MiB; %d restores and %d live '
    'upgrades, medians; KVM: %s; lazyblk %s; load average %.1f at the end (%d CPUs).'
    % (runs, runs, hw, rev, os.getloadavg()[0], os.cpu_count()),
    '',
    '| snapshot (VM paused) | size on disk (ram + vm.state) | restore -> first guest instruction '
    '| live upgrade (VM paused) |',
    '|---:|---:|---:|---:|',
    '| %.1f ms | %.1f MiB + %.1f KiB | %.1f ms | %.1f ms |' % (
        pause, mib(size.get('ram', 0)), size.get('vm.state', 0) / 1024, summary['restore_ms'],
        summary['upgrade_pause_ms']),
    '',
    'Restores (ms): %s. Upgrades (ms): %s.' % (' '.join('%.1f' % x for x in sorted(res)),
                                              ' '.join('%.1f' % x for x in sorted(upgrades))),
    '',
    'Goals: restore <= 5 ms (Firecracker publishes a few ms), live upgrade pause <= 20 ms. '
    'The restore includes the process start and the check of the RAM digest (reads the 32 '
    'MiB); the upgrade pause the state save, the disks\' flush, the exec, the new process\'s '
    'start-up and the rebuilt VM (RAM is handed over, not copied).',
]
open(mdpath, 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
PY
python3 "$ROOT/bench/lib/mdsection.py" "$MD" vm_snapshot <"$WORK/section.md"
echo "bench/vm_snapshot: results in $JSON and $MD"
