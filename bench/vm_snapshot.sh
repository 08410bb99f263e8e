#!/bin/bash
# Benchmark VM snapshots and live upgrade (issue 17): snapshot time and size for a 256 MiB
# guest that touched 32 MiB, restore -> first guest instruction (and -> first output), and
# the pause of a live upgrade of that guest.
#
# Usage: bench/vm_snapshot.sh
# Environment:
#   LAZYBLK  the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS     restores and live upgrades (default 20 each; medians reported)
#   QEMU     the QEMU peer (default qemu-system-x86_64)
#
# The guest (assembled here, PVH entry, paging off) writes one byte to each 4 KiB page of
# 32 MiB from 16 MiB, then loops writing 'x' to COM1 forever. `lazyblk -v run --boot pvh
# --mem 256 --control SOCK` runs it; once it prints, `snapshot SNAP` on the socket takes the
# snapshot, whose log line gives the pause (the VM is paused for the whole write: RAM
# scanned, 32 MiB written, state, fsyncs); the size is what SNAP occupies on disk. Then
# `lazyblk run --restore SNAP --control SOCK` is spawned RUNS times (posix_spawn; the ram file
# in the page cache after the first, untimed one) with stdout on a pipe, and once it printed,
# `stats` on its socket gives `start_ns` (run's start) and the vCPU's `first_exit_ns` (its
# first exit out of KVM_RUN: the guest's first instruction after the restored RIP had run, an
# `out` to COM1 within the guest's loop), both CLOCK_MONOTONIC like the spawn time taken here:
#   restore -> first instruction  first_exit - start: opening and checking the snapshot,
#                                 the VM, RAM mapped, vCPUs and devices set (what
#                                 Firecracker's snapshot-load latency counts: its process
#                                 is already running);
#   spawn -> first instruction    first_exit - spawn: the same with exec and process start;
#   spawn -> first output         the first console byte read here: the guest's output is
#                                 held until the RAM digest (checked while it runs, reading
#                                 the 32 MiB) matched.
# The process is killed after. Before that, the snapshotted VM is upgraded RUNS times in a row
# (`upgrade` on its socket: exec of the same binary, which takes over RAM and state); each
# answer "ok upgraded: paused N ms" gives the pause (from vmm_pause to the vCPUs running
# again in the new process).
#
# Peer, measured in the same run: QEMU microvm ($QEMU -M microvm,x-option-roms=off,rtc=off
# -accel kvm -m 256 -nodefaults -no-user-config -display none -serial stdio -kernel G, as in
# bench/vmm.sh, plus -global migration.store-global-state=off) runs the same guest with its
# console into a file and a QMP socket. Once it printed, QMP `stop` then `migrate` to
# "exec:cat > FILE" (QEMU 7.2 rejects a file: URI: "expects a valid migration protocol"),
# `query-migrate` polled every ms until "completed": the snapshot time is from sending
# `stop` to reading "completed" (the VM paused throughout, as for lazyblk's snapshot), the
# size what FILE occupies on disk (QEMU's migration stream: zero pages as flags, the
# touched ones in full).
# Then `$QEMU ... -incoming "exec:cat FILE"` is spawned RUNS times (posix_spawn, the first
# untimed run warms the page cache) with stdout on a pipe; spawn -> first output is the
# first console byte read here. Without store-global-state=off, a VM stopped before the
# migration stays paused on the incoming side until a QMP `cont`; with it, QEMU starts the
# VM as soon as the stream is loaded, so no QMP round trip is counted. QEMU gives no
# equivalent of `first_exit_ns`, nor a live upgrade, so those cells say n/a. If QEMU is
# missing or any QEMU step fails, one line says why and the peer is reported unavailable
# (lazyblk's results are kept).
#
# The same figures with a Linux guest (Debian's cloud kernel, against QEMU microvm's
# migration to a file and -incoming, nested where KVM here cannot run Linux) are
# bench/vm_linux.sh's, which bench/vmm.sh runs after this one.
#
# Writes: build/bench/vm_snapshot.json and the `vm_snapshot` section of docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-20}
QEMU=${QEMU:-qemu-system-x86_64}
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
# the peer is optional: without it lazyblk's figures are still reported
QVER=$("$QEMU" --version 2>/dev/null | sed -n 1p) || QVER=""

PYTHONPATH="$ROOT/bench/lib" python3 - "$WORK" "$LAZYBLK" "$RUNS" "$JSON" "$WORK/section.md" "$GIT_REV" "$HW" "$QEMU" \
  "$QVER" <<'PY'
import json, os, re, select, shlex, shutil, socket, statistics, subprocess, sys, time
from qmp_migrate import migrate_to_file
work, lazyblk, runs, jpath, mdpath, rev, hw, qemu, qver = sys.argv[1:]
qemu = shutil.which(qemu) or qemu        # posix_spawn takes a path
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
    return ctl_at(sock, req)

def ctl_at(path, req):
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
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

def restore(i):
    rsock = os.path.join(work, 'r%d' % i)
    rd, wr = os.pipe()
    rerr = os.open(os.path.join(work, 'restore.err'), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    nul = os.open(os.devnull, os.O_RDONLY)
    t0 = time.monotonic_ns()
    pid = os.posix_spawn(lazyblk, [lazyblk, '-q', 'run', '--restore', snap, '--control', rsock],
                         os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, nul, 0),
                                                   (os.POSIX_SPAWN_DUP2, wr, 1),
                                                   (os.POSIX_SPAWN_DUP2, rerr, 2),
                                                   (os.POSIX_SPAWN_CLOSE, rd)])
    os.close(wr)
    b = os.read(rd, 1)
    t1 = time.monotonic_ns()
    st = json.loads(ctl_at(rsock, 'stats')) if b == b'x' else None
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    for fd in (rd, rerr, nul):
        os.close(fd)
    if st is None:
        sys.exit('bench/vm_snapshot: restore: %r %s' % (
            b, open(os.path.join(work, 'restore.err')).read()))
    fe = st['vcpus'][0]['first_exit_ns']
    return (fe - st['start_ns']) / 1e6, (fe - t0) / 1e6, (t1 - t0) / 1e6

restore(0)                                # the ram file into the page cache, untimed
runs_r = [restore(i + 1) for i in range(runs)]
inproc = [r[0] for r in runs_r]
spawn_fi = [r[1] for r in runs_r]
spawn_out = [r[2] for r in runs_r]
summary = {'pause_ms': pause, 'size_bytes': size, 'restore_ms': statistics.median(inproc),
           'restore_runs_ms': inproc, 'spawn_first_instruction_ms': statistics.median(spawn_fi),
           'spawn_first_instruction_runs_ms': spawn_fi,
           'spawn_first_output_ms': statistics.median(spawn_out),
           'spawn_first_output_runs_ms': spawn_out,
           'upgrade_pause_ms': statistics.median(upgrades), 'upgrade_runs_ms': upgrades}

class PeerError(Exception):
    pass

qbase = [qemu, '-M', 'microvm,x-option-roms=off,rtc=off', '-accel', 'kvm', '-m', '256',
         '-nodefaults', '-no-user-config', '-display', 'none', '-serial', 'stdio',
         '-kernel', os.path.join(work, 'g.elf'), '-global', 'migration.store-global-state=off']
qstate = os.path.join(work, 'qemu.state')
qerr_path = os.path.join(work, 'qemu.err')

def qemu_err():
    try:
        t = open(qerr_path).read().strip().splitlines()
    except OSError:
        return ''
    t = [x for x in t if 'warning' not in x]   # the CPUID feature warnings
    return ': ' + t[-1] if t else ''

def qemu_snapshot():
    qsock, qcon = os.path.join(work, 'qmp'), os.path.join(work, 'qemu.out')
    q = subprocess.Popen(qbase + ['-qmp', 'unix:%s,server=on,wait=off' % qsock],
                         stdin=subprocess.DEVNULL, stdout=open(qcon, 'wb'),
                         stderr=open(qerr_path, 'wb'))
    try:
        for _ in range(600):              # the guest touched its 32 MiB once it prints
            if os.path.getsize(qcon) or q.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.getsize(qcon):
            raise PeerError('the guest printed nothing' + qemu_err())
        t0, t1, st = migrate_to_file(qsock, qstate, 60, PeerError, qemu_err, connect_limit=30)
        return (t1 - t0) / 1e6, st.get('total-time'), os.stat(qstate).st_blocks * 512
    finally:
        q.kill()
        q.wait()

def qemu_restore():
    rd, wr = os.pipe()
    rerr = os.open(qerr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    nul = os.open(os.devnull, os.O_RDONLY)
    t0 = time.monotonic_ns()
    pid = os.posix_spawn(qemu, qbase + ['-incoming', 'exec:cat ' + shlex.quote(qstate)],
                         os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, nul, 0),
                                                   (os.POSIX_SPAWN_DUP2, wr, 1),
                                                   (os.POSIX_SPAWN_DUP2, rerr, 2),
                                                   (os.POSIX_SPAWN_CLOSE, rd)])
    os.close(wr)
    b = os.read(rd, 1) if select.select([rd], [], [], 30)[0] else b''
    t1 = time.monotonic_ns()
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    for fd in (rd, rerr, nul):
        os.close(fd)
    if b != b'x':
        raise PeerError('-incoming: no output within 30 s' + qemu_err())
    return (t1 - t0) / 1e6

def qemu_peer():
    if not qver:
        raise PeerError('%s not found or does not run' % qemu)
    qpause, qtotal, qsize = qemu_snapshot()
    qemu_restore()                        # the state file into the page cache, untimed
    qruns = [qemu_restore() for _ in range(runs)]
    return {'snapshot_ms': qpause, 'migrate_total_time_ms': qtotal, 'size_bytes': qsize,
            'spawn_first_output_ms': statistics.median(qruns),
            'spawn_first_output_runs_ms': qruns}

try:
    peer = qemu_peer()
    peer_why = None
except (PeerError, OSError, ValueError, KeyError) as e:
    peer, peer_why = None, str(e) or type(e).__name__
    print('bench/vm_snapshot: QEMU peer unavailable: ' + peer_why, file=sys.stderr)
json.dump({'kvm': hw, 'git': rev, 'results': summary,
           'qemu': {'version': qver, 'results': peer, 'unavailable': peer_why}},
          open(jpath, 'w'), indent=1)
mib = lambda n: n / 1048576
lines = [
    '## vm_snapshot: VM snapshot, restore and live upgrade (%s)' % time.strftime('%Y-%m-%d'),
    '',
    'bench/vm_snapshot.sh: a 256 MiB PVH guest that touched 32 MiB; %d restores and %d live '
    'upgrades, medians; KVM: %s; lazyblk %s; load average %.1f at the end (%d CPUs).'
    % (runs, runs, hw, rev, os.getloadavg()[0], os.cpu_count()),
    '',
    '| | snapshot (VM paused) | size on disk | restore -> first guest instruction '
    '| spawn -> first guest instruction | spawn -> first guest output | live upgrade (VM paused) |',
    '|---|---:|---:|---:|---:|---:|---:|',
    '| lazyblk run | %.1f ms | %.1f MiB + %.1f KiB (ram + vm.state) | %.1f ms | %.1f ms | %.1f ms '
    '| %.1f ms |' % (
        pause, mib(size.get('ram', 0)), size.get('vm.state', 0) / 1024, summary['restore_ms'],
        summary['spawn_first_instruction_ms'], summary['spawn_first_output_ms'],
        summary['upgrade_pause_ms']),
]
if peer:
    lines.append('| QEMU microvm (migrate to a file, -incoming) | %.1f ms | %.1f MiB (one stream) '
                 '| n/a | n/a | %.1f ms | n/a |' % (peer['snapshot_ms'], mib(peer['size_bytes']),
                                                   peer['spawn_first_output_ms']))
else:
    lines.append('| QEMU microvm (migrate to a file, -incoming) | unavailable: %s | | | | | |'
                 % peer_why.replace('|', '/'))
lines += [
    '',
    'Sorted runs (ms): restore -> first instruction %s; spawn -> first instruction %s; '
    'spawn -> first output %s; upgrades %s.' % tuple(
        ' '.join('%.1f' % x for x in sorted(v)) for v in (inproc, spawn_fi, spawn_out, upgrades))
    + (' QEMU spawn -> first output %s.' % ' '.join(
        '%.1f' % x for x in sorted(peer['spawn_first_output_runs_ms'])) if peer else ''),
    '',
    'QEMU peer (%s): the same guest under `-M microvm -accel kvm -m 256`, driven through QMP: '
    '`stop`, `migrate` to `exec:cat > FILE` (this QEMU has no `file:` URI), `query-migrate` '
    'polled until completed (the snapshot time: from `stop` to completed); restored by spawning '
    'it with `-incoming "exec:cat FILE"` and `-global migration.store-global-state=off` so the '
    'VM runs once the stream is loaded (no `cont`); QEMU reports no first-instruction time and '
    'has no live upgrade (n/a).' % (qver or qemu),
    '',
    'Goals: restore <= 5 ms (Firecracker publishes a few ms for loading a snapshot into its '
    'already running process: the first column counts the same, from `run`\'s start to the '
    'guest\'s first exit out of KVM_RUN), live upgrade pause <= 20 ms. The spawn columns add '
    'exec and process start; the guest\'s output (and its disk requests) are held until the '
    'RAM digest matched, which is checked while the guest runs (reads the 32 MiB). The upgrade '
    'pause: the state save, the disks\' flush, the exec, the new process\'s start-up and the '
    'rebuilt VM (RAM is handed over, not copied).',
]
open(mdpath, 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
PY
python3 "$ROOT/bench/lib/mdsection.py" "$MD" vm_snapshot <"$WORK/section.md"
echo "bench/vm_snapshot: results in $JSON and $MD"
