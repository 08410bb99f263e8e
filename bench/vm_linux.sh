#!/bin/bash
# Benchmark the built-in VMM with a Linux guest (issue 25, item 4), against QEMU microvm in
# the same (possibly nested) VM: boot to user space and to the command's exit; snapshot,
# restore -> first guest instruction and -> first guest output, live-upgrade pause, against
# QEMU's migration to a file and -incoming.
#
# Usage: bench/vm_linux.sh
# Environment:
#   LAZYBLK  the lazyblk binary (set by `make bench`; default build/lazyblk)
#   RUNS     boots, restores and upgrades per VMM, alternating (default 3; medians)
#   QEMU     the peer (default qemu-system-x86_64)
#   LAZYBLK_TEST_KVM=nested  measure in the nested VM even where KVM runs Linux here
#   NESTED_TIMEOUT  bound of the nested run in seconds (default 3600)
#
# Where it runs: a stock Linux kernel needs a KVM with vmx or svm. Where /dev/kvm has
# neither (a software KVM, or none), the measuring part runs in the nested VM of
# tests/integration/lib/nested.sh (QEMU TCG with an emulated AMD-V CPU, kvm_amd, this
# machine's / read-only over virtiofs, tmpfs on /tmp): both VMMs then run under the nested
# KVM, whose guests run at TCG speed. Absolute times measured there are nested TCG times,
# not hardware figures: only the ratios to the peer, measured in the same VM in the same
# run, are reported as results. The inputs (image, raw export, initramfs) are made here,
# outside, in build/bench; the nested part prints its raw figures as one line
# "VM_LINUX-RESULT {json}" and this part writes the JSON and the section. There a busy loop
# at SCHED_IDLE (lib/nested_init.sh) keeps the nested VM's vCPU from ever halting: idle,
# that VM stalled for minutes (its timers not firing) in several runs here; the loop gets
# only the CPU time nothing else wants.
#
# The guest, the same for both VMMs: Debian's stock cloud kernel (scripts/lib/kernel.sh,
# the tests' cache), 1 vCPU, 512 MiB, an initramfs built by `lazyblk initramfs --kernel K
# -o FILE -- CMD` given to both (--initrd / -initrd), and an image of busybox-static, a
# message file and a tick loop (`lazyblk import` of a directory, `lazyblk mkfs --size 128M`):
# lazyblk boots the layout and its store with a fresh overlay; QEMU a fresh copy of its raw
# export (`lazyblk export`) as a virtio-blk-device on microvm's virtio-mmio:
#   lazyblk -v run IMG.layout --store S --overlay OV --kernel K --initrd I --mem 512
#       --append "console=ttyS0 reboot=k panic=-1"
#   $QEMU -M microvm,x-option-roms=off,rtc=on -accel kvm -cpu host,tsc-deadline=off -smp 1
#       -m 512 -nodefaults -no-user-config -display none -no-reboot -serial stdio -kernel K
#       -initrd I -append "console=ttyS0 reboot=t panic=-1"
#       -drive id=d0,file=IMG.raw,format=raw,if=none -device virtio-blk-device,drive=d0
# (each VMM's own way to end the VM on `reboot -f`: lazyblk has an i8042 whose reset ends
# it; microvm has none, QEMU's documentation says reboot=t, a triple fault, with -no-reboot).
# microvm gets rtc=on: its default (with ACPI: no RTC) leaves Linux to probe a missing CMOS
# clock ("rtc_cmos: broken or not accessible": 3-7 s in the nested VM; QEMU 7.2's ACPI
# tables do not say there is none, lazyblk's FADT does). Its guest CPU has no TSC deadline
# timer, as lazyblk's guests have it (lazyblk's CPUID does not offer it): with it, QEMU's
# guest stalled for minutes in the nested VM (at the reboot; in the snapshot part) in half the
# runs, while lazyblk's guests never did. The inputs
# (store, layout, raw export, kernel, initramfs) are copied into the measuring machine's own
# file system first, untimed: in the nested VM the host's / is read-only virtiofs.
#
# 1. Boot. The initramfs /init writes 1 to port 0x440 once /proc, /sys and /dev are mounted,
#    before anything else (vmm-glue/initramfs/init.sh): the first user-space mark. lazyblk
#    logs it as "boot-timer: 1 at N ms" on stderr (-v); QEMU gets `-chardev
#    socket,id=dbg,path=P -device isa-debugcon,iobase=0x440,chardev=dbg`, whose byte arrives
#    on the socket this harness listens on. The command is `/bin/cat /etc/bench-msg`; the
#    console must show the message and `lazyblk-exit: 0` for both. One python process
#    spawns each VMM (posix_spawn) and takes CLOCK_MONOTONIC at the spawn, when the mark
#    arrives (stderr line / debugcon byte) and when the process has exited (a pidfd):
#      boot -> user space   mark - spawn
#      boot -> exit         exit - spawn (mount, the command, sync, unmount, reboot, exit)
#    One untimed boot each first (lazyblk decompresses the bzImage once and caches the
#    vmlinux; QEMU's guest decompresses it at every boot: that is part of what is compared),
#    then RUNS boots each, alternating.
# 2. Snapshot, restore, upgrade: the command is /bin/ticks, a busybox sh loop that prints
#    "tick N" every 10 ms with shell builtins only (echo; read -t 0.01 on a FIFO), so the
#    first output after a restore comes at most 10 ms after the guest runs again.
#    lazyblk: `lazyblk -v run ... --control SOCK` boots it; 3 s after the first tick,
#    `snapshot DIR` on the socket (the time of the request, and the pause its log line
#    gives; the size: what DIR occupies on disk); then RUNS `upgrade` requests, each
#    answering "ok upgraded: paused N ms" (the pause), the ticks going on in between; the
#    VM is killed. Restores: `lazyblk -q run IMG.layout --store S --restore DIR --overlay
#    NEW --control SOCK2` with stdout on a pipe: spawn -> first output is the first
#    console byte; `stats` on SOCK2 then gives start_ns and the vCPU's first_exit_ns:
#    restore -> first instruction = first_exit - start (in the process, as Firecracker
#    counts its snapshot load), spawn -> first instruction = first_exit - spawn.
#    QEMU: the same guest under the command line above plus `-global
#    migration.store-global-state=off` and `-qmp unix:Q,server=on,wait=off`; 3 s after the
#    first tick, QMP `stop`, `migrate` to "exec:cat > FILE" (this QEMU 7.2 has no file:
#    URI), `query-migrate` polled every ms until completed: the snapshot time is `stop` ->
#    completed, the size what FILE occupies. Restores: the same command line with
#    `-incoming "exec:cat FILE"` (store-global-state=off: the VM runs once the stream is
#    loaded, no `cont`) on a fresh copy of the disk as the migration left it; spawn ->
#    first output as for lazyblk. QEMU has no first-instruction figure and no live upgrade.
#    One untimed restore each first (page cache), then RUNS each, alternating.
#
# Goals (docs/benchmarks.md states each as met or not, with the ratio):
#   boot -> user space            lazyblk <= 0.5 x QEMU microvm
#   restore -> first output       lazyblk spawn -> first output <= 0.2 x QEMU's -incoming
#   live-upgrade pause            <= 0.5 x QEMU's snapshot + restore (stop -> migration
#                                 completed, plus -incoming spawn -> first output); lazyblk's
#                                 own snapshot pause + restore is reported beside it
#
# Writes: build/bench/vm_linux.json (every run's figures; the console and stderr of each VMM's
# last boot, with the guest kernel's timestamps; lazyblk's -v log of its last restore) and
# the `vm_linux` section of docs/benchmarks.md.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
RUNS=${RUNS:-3}
QEMU=${QEMU:-qemu-system-x86_64}

die() { echo "bench/vm_linux: $*" >&2; exit 1; }

# measure WORK SCRATCH KERNEL RUNS QEMU: the measuring part (here or in the nested VM);
# prints the line VM_LINUX-RESULT {json}
measure() {
  PYTHONPATH="$ROOT/bench/lib" python3 - "$@" "$LAZYBLK" <<'PY'
import json, os, re, select, shlex, shutil, socket, statistics, subprocess, sys, time
from qmp_migrate import migrate_to_file
work, scratch, kernel, runs, qemu, lazyblk = sys.argv[1:]
runs = int(runs)
qemu = shutil.which(qemu) or qemu          # posix_spawn takes a path
LIMIT = 300                                # s: a hang guard for one step (a boot: ~20 s nested)
SETTLE = 3                                 # s after the first tick before snapshotting
MEM = '512'
APPEND_L = 'console=ttyS0 reboot=k panic=-1'
APPEND_Q = 'console=ttyS0 reboot=t panic=-1'
MSG = open(os.path.join(work, 'root/etc/bench-msg'), 'rb').read().strip()
# every input into this machine's own file system first (untimed): in the nested VM, WORK is
# the host's / over virtiofs, read-only, while the VMs' disks and snapshots are on its tmpfs
inp = os.path.join(scratch, 'in')
os.mkdir(inp)
subprocess.run(['cp', '-a', '--sparse=always'] + [os.path.join(work, f) for f in (
    'store', 'img.layout', 'img.manifest', 'img.raw', 'boot.cpio', 'ticks.cpio')] + [inp],
    check=True)
shutil.copyfile(kernel, os.path.join(inp, os.path.basename(kernel)))
kernel = os.path.join(inp, os.path.basename(kernel))
IMG = [os.path.join(inp, 'img.layout'), '--store', os.path.join(inp, 'store')]
RAW = os.path.join(inp, 'img.raw')
INITRD = {k: os.path.join(inp, k + '.cpio') for k in ('boot', 'ticks')}
BT1 = re.compile(rb'boot-timer: 1 at ([0-9.]+) ms')

CONSOLE = {}
RESTORE_LOG = ['']                       # the last restore's stderr (-v)

class Fail(Exception):
    pass

def log(msg):
    print('bench/vm_linux: ' + msg, file=sys.stderr, flush=True)

def spawn(argv, out, err):
    nul = os.open(os.devnull, os.O_RDONLY)
    try:
        return os.posix_spawn(argv[0], argv, os.environ,
                              file_actions=[(os.POSIX_SPAWN_DUP2, nul, 0),
                                            (os.POSIX_SPAWN_DUP2, out, 1),
                                            (os.POSIX_SPAWN_DUP2, err, 2)])
    finally:
        os.close(nul)

def reap(pid):
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)

def fresh(path):                           # path, and an overlay's .state beside it, removed
    for p in (path, path + '.state'):
        if os.path.lexists(p):
            os.unlink(p)
    return path

def copy_disk(src, dst):                   # untimed; keeps the holes
    subprocess.run(['cp', '--sparse=always', src, fresh(dst)], check=True)

def tail(data, n=15):
    return '\n'.join(data.decode(errors='replace').replace('\r', '').splitlines()[-n:])

def qemu_argv(disk, initrd):
    return [qemu, '-M', 'microvm,x-option-roms=off,rtc=on', '-accel', 'kvm',
            '-cpu', 'host,tsc-deadline=off',
            '-smp', '1', '-m', MEM, '-nodefaults', '-no-user-config', '-display', 'none',
            '-no-reboot', '-serial', 'stdio', '-kernel', kernel, '-initrd', initrd,
            '-append', APPEND_Q, '-drive', 'id=d0,file=%s,format=raw,if=none' % disk,
            '-device', 'virtio-blk-device,drive=d0']

# ---- 1. boot ----------------------------------------------------------------------------
def boot(kind):
    ro, wo = os.pipe()
    rerr, werr = os.pipe()
    lsock = None
    if kind == 'lazyblk':
        argv = [lazyblk, '-v', 'run'] + IMG + [
            '--overlay', fresh(os.path.join(scratch, 'boot.ov')), '--kernel', kernel,
            '--initrd', INITRD['boot'], '--mem', MEM, '--append', APPEND_L]
    else:
        disk = os.path.join(scratch, 'boot.raw')
        copy_disk(RAW, disk)
        dbg = fresh(os.path.join(scratch, 'dbg.sock'))
        lsock = socket.socket(socket.AF_UNIX)
        lsock.bind(dbg)
        lsock.listen(1)
        argv = qemu_argv(disk, INITRD['boot']) + [
            '-chardev', 'socket,id=dbg,path=' + dbg,
            '-device', 'isa-debugcon,iobase=0x440,chardev=dbg']
    t0 = time.monotonic_ns()
    pid = spawn(argv, wo, werr)
    os.close(wo)
    os.close(werr)
    pfd = os.pidfd_open(pid)
    watch = {ro: 'out', rerr: 'err', pfd: 'exit'}
    if lsock:
        watch[lsock.fileno()] = 'listen'
    conns = []
    buf = {'out': b'', 'err': b'', 'dbg': b''}
    t_user = t_exit = None
    end = time.monotonic() + LIMIT
    try:
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise Fail('%s: boot not done after %d s: %s' % (kind, LIMIT, tail(buf['out'])))
            # once the process has exited: what is left in the pipes, 5 s at most
            rl = select.select(list(watch), [], [], min(left, 5) if t_exit else left)[0]
            now = time.monotonic_ns()
            if not rl and t_exit:
                break
            for fd in rl:
                w = watch[fd]
                if w == 'exit':
                    t_exit = now
                    del watch[fd]
                    continue
                if w == 'listen':
                    c = lsock.accept()[0]
                    conns.append(c)
                    watch[c.fileno()] = 'dbg'
                    continue
                d = os.read(fd, 65536)
                if not d:
                    del watch[fd]
                    continue
                buf[w] += d
                if t_user is None and (b'\x01' in buf['dbg'] if w == 'dbg' else
                                       w == 'err' and BT1.search(buf['err'])):
                    t_user = now
            if t_exit and not any(v in ('out', 'err') for v in watch.values()):
                break
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except BaseException:
        reap(pid)
        raise
    finally:
        for fd in (ro, rerr, pfd):
            os.close(fd)
        for c in conns:
            c.close()
        if lsock:
            lsock.close()
    out = buf['out']
    if status != 0 or MSG not in out or b'lazyblk-exit: 0' not in out or t_user is None:
        raise Fail('%s: boot: exit status %s, mark %s, console:\n%s\nstderr:\n%s' % (
            kind, status, 'seen' if t_user else 'not seen', tail(out), tail(buf['err'], 5)))
    r = {'user_ms': (t_user - t0) / 1e6, 'exit_ms': (t_exit - t0) / 1e6}
    CONSOLE[kind] = (out.decode(errors='replace').replace('\r', ''),
                     buf['err'].decode(errors='replace'))    # the last boot's, for the JSON
    m = BT1.search(buf['err'])
    if m:
        r['mark_logged_ms'] = float(m.group(1))   # lazyblk's own clock, from its start
    return r

# ---- 2. snapshot, restore, upgrade ------------------------------------------------------
def ctl(path, req, timeout=LIMIT):
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(timeout)
    c.connect(path)
    c.sendall(req.encode() + b'\n')
    c.shutdown(socket.SHUT_WR)
    out = b''
    while True:
        got = c.recv(4096)
        if not got:
            c.close()
            return out.decode().strip()
        out += got

def wait_for(pred, what, pid=None, con=None):
    end = time.monotonic() + LIMIT
    while not pred():
        why = None
        if pid is not None and os.waitpid(pid, os.WNOHANG)[0]:
            why = what + ': the VM ended'
        elif time.monotonic() > end:
            why = what + ': not after %d s' % LIMIT
        if why:
            raise Fail(why + ('; its console ends with:\n' + tail(open(con, 'rb').read())
                              if con else ''))
        time.sleep(0.05)

def size_of(path):
    if os.path.isdir(path):
        return sum(os.stat(os.path.join(path, f)).st_blocks * 512 for f in os.listdir(path))
    return os.stat(path).st_blocks * 512

def ticking(con):
    with open(con, 'rb') as f:
        return b'tick ' in f.read()

def lazyblk_snapshot():
    con, errp = os.path.join(scratch, 'l.out'), os.path.join(scratch, 'l.err')
    sock, snap = fresh(os.path.join(scratch, 'l.sock')), os.path.join(scratch, 'l.snap')
    fo, fe = os.open(con, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), \
        os.open(errp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    pid = spawn([lazyblk, '-v', 'run'] + IMG + [
        '--overlay', fresh(os.path.join(scratch, 'l.ov')), '--kernel', kernel,
        '--initrd', INITRD['ticks'], '--mem', MEM, '--append', APPEND_L, '--control', sock],
        fo, fe)
    os.close(fo)
    os.close(fe)
    try:
        wait_for(lambda: ticking(con), 'lazyblk: no tick', pid, con)
        time.sleep(SETTLE)
        t0 = time.monotonic_ns()
        r = ctl(sock, 'snapshot ' + snap)
        t1 = time.monotonic_ns()
        if r != 'ok ' + snap:
            raise Fail('lazyblk: snapshot: ' + r)
        m = re.search(r'VM snapshot written to .* \(VM paused ([0-9.]+) ms\)', open(errp).read())
        if not m:
            raise Fail('lazyblk: snapshot: no pause logged')
        res = {'snapshot_paused_ms': float(m.group(1)), 'snapshot_request_ms': (t1 - t0) / 1e6,
               'size_bytes': {f: size_of(os.path.join(snap, f)) for f in os.listdir(snap)}}
        ups = []
        for _ in range(runs):
            n = os.path.getsize(con)
            r = ctl(sock, 'upgrade')
            m = re.fullmatch(r'ok upgraded: paused ([0-9.]+) ms', r)
            if not m:
                raise Fail('lazyblk: upgrade: ' + r)
            ups.append(float(m.group(1)))
            wait_for(lambda: os.path.getsize(con) > n + 64, 'lazyblk: no tick after the upgrade',
                     pid, con)
            time.sleep(1)
        res['upgrade_paused_ms'] = ups
    finally:
        reap(pid)
    return snap, res

def lazyblk_restore(snap, i):
    rsock = fresh(os.path.join(scratch, 'r.sock'))
    ro, wo = os.pipe()
    fe = os.open(os.path.join(scratch, 'r.err'), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    argv = [lazyblk, '-v', 'run'] + IMG + [
        '--restore', snap, '--overlay', fresh(os.path.join(scratch, 'r%d.ov' % i)),
        '--control', rsock]
    t0 = time.monotonic_ns()
    pid = spawn(argv, wo, fe)
    os.close(wo)
    os.close(fe)
    try:
        b = os.read(ro, 1) if select.select([ro], [], [], LIMIT)[0] else b''
        t1 = time.monotonic_ns()
        st = json.loads(ctl(rsock, 'stats')) if b else None
    finally:
        reap(pid)
        os.close(ro)
        fresh(os.path.join(scratch, 'r%d.ov' % i))
    if st is None:
        raise Fail('lazyblk: restore: no output: ' + open(os.path.join(scratch, 'r.err')).read())
    fe_ns = st['vcpus'][0]['first_exit_ns']
    RESTORE_LOG[0] = open(os.path.join(scratch, 'r.err')).read()   # the last, for the JSON
    return {'first_instruction_ms': (fe_ns - st['start_ns']) / 1e6,
            'spawn_first_instruction_ms': (fe_ns - t0) / 1e6,
            'spawn_first_output_ms': (t1 - t0) / 1e6}

QGLOBAL = ['-global', 'migration.store-global-state=off']

def qemu_snapshot():
    con, errp = os.path.join(scratch, 'q.out'), os.path.join(scratch, 'q.err')
    qsock, state = fresh(os.path.join(scratch, 'qmp.sock')), os.path.join(scratch, 'q.state')
    disk = os.path.join(scratch, 'q.raw')
    copy_disk(RAW, disk)
    fo, fe = os.open(con, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), \
        os.open(errp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    pid = spawn(qemu_argv(disk, INITRD['ticks']) + QGLOBAL +
                ['-qmp', 'unix:%s,server=on,wait=off' % qsock], fo, fe)
    os.close(fo)
    os.close(fe)
    try:
        wait_for(lambda: ticking(con), 'qemu: no tick', pid, con)
        time.sleep(SETTLE)
        t0, t1, st = migrate_to_file(qsock, state, LIMIT, lambda m: Fail('qemu: ' + m),
                                     lambda: ': ' + open(errp).read()[-300:])
    finally:
        reap(pid)
    return state, disk, {'snapshot_ms': (t1 - t0) / 1e6, 'migrate_total_time_ms':
                         st.get('total-time'), 'size_bytes': size_of(state)}

def qemu_restore(state, disk):
    rdisk = os.path.join(scratch, 'qr.raw')
    copy_disk(disk, rdisk)
    ro, wo = os.pipe()
    fe = os.open(os.path.join(scratch, 'qr.err'), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    t0 = time.monotonic_ns()
    pid = spawn(qemu_argv(rdisk, INITRD['ticks']) + QGLOBAL +
                ['-incoming', 'exec:cat ' + shlex.quote(state)], wo, fe)
    os.close(wo)
    os.close(fe)
    try:
        b = os.read(ro, 1) if select.select([ro], [], [], LIMIT)[0] else b''
        t1 = time.monotonic_ns()
    finally:
        reap(pid)
        os.close(ro)
    if not b:
        raise Fail('qemu: -incoming: no output: ' + open(os.path.join(scratch, 'qr.err')).read())
    return {'spawn_first_output_ms': (t1 - t0) / 1e6}

# ---- the runs ---------------------------------------------------------------------------
def run_phase(name, fn):
    try:
        return fn(), None
    except (Fail, OSError, ValueError, KeyError, subprocess.CalledProcessError) as e:
        log('%s unavailable: %s' % (name, e))
        return None, str(e) or type(e).__name__

res = {'runs': runs, 'boot': {}, 'snapshot': {}, 'errors': {}}
t_start = time.monotonic()
for kind in ('lazyblk', 'qemu'):
    log('boot: %s, untimed' % kind)
    r, why = run_phase('boot ' + kind, lambda: boot(kind))
    if why:
        res['errors']['boot ' + kind] = why
        if kind == 'lazyblk':
            raise SystemExit('bench/vm_linux: lazyblk run does not boot the guest: ' + why)
# lazyblk failing ends the benchmark; the peer failing (a hang guard, a QMP error) makes it
# unavailable for the rest of that part, with the reason in the section
peer = 'boot qemu' not in res['errors']
res['boot'] = {k: [] for k in ['lazyblk'] + (['qemu'] if peer else [])}
for i in range(runs):
    for k in list(res['boot']):
        r, why = (boot(k), None) if k == 'lazyblk' else run_phase('boot qemu', lambda: boot(k))
        if why:
            res['errors']['boot qemu'] = why
            del res['boot']['qemu']
            continue
        log('boot %d: %s: user space %.0f ms, exit %.0f ms' % (i + 1, k, r['user_ms'], r['exit_ms']))
        res['boot'][k].append(r)

for k, v in CONSOLE.items():
    log('boot: %s: the console ends with:\n%s' % (k, '\n'.join(v[0].splitlines()[-3:])))
log('snapshot: lazyblk')
snap, res['snapshot']['lazyblk'] = lazyblk_snapshot()
log('snapshot: qemu')
qs, why = run_phase('qemu migrate', qemu_snapshot)
if why:
    res['errors']['snapshot qemu'] = why
else:
    res['snapshot']['qemu'] = qs[2]
lr, qr = [], []

def peer_restore():
    global qs
    r, why = run_phase('qemu -incoming', lambda: qemu_restore(qs[0], qs[1]))
    if why:
        res['errors']['snapshot qemu'] = why
        del res['snapshot']['qemu']
        qs = None
    return r

lazyblk_restore(snap, 0)                   # untimed: the page cache
if qs:
    peer_restore()
for i in range(runs):
    lr.append(lazyblk_restore(snap, i + 1))
    log('restore %d: lazyblk: first output %.0f ms' % (i + 1, lr[-1]['spawn_first_output_ms']))
    r = peer_restore() if qs else None
    if r:
        qr.append(r)
        log('restore %d: qemu: first output %.0f ms' % (i + 1, r['spawn_first_output_ms']))
res['snapshot']['lazyblk']['restores'] = lr
if qs:
    res['snapshot']['qemu']['restores'] = qr
res['last_boot'] = {k: {'console': v[0], 'stderr': v[1]} for k, v in CONSOLE.items()}
res['last_restore'] = {'lazyblk': {'stderr': RESTORE_LOG[0]}}
res['env'] = {
    'kernel': os.uname().release, 'cpus': os.cpu_count(), 'load_end': os.getloadavg()[0],
    'kvm_hw': bool(re.search(r'\b(vmx|svm)\b', open('/proc/cpuinfo').read())),
    'nested': bool(os.environ.get('LAZYBLK_NESTED')),
    'qemu': subprocess.run([qemu, '--version'], capture_output=True, text=True).stdout.split('\n')[0],
    'qemu_path': qemu,
    'seconds': time.monotonic() - t_start}
print('VM_LINUX-RESULT ' + json.dumps(res), flush=True)
PY
}

# Inside the nested VM (lib/nested.sh ran this script again there): measure, print.
if [ -n "${LAZYBLK_NESTED:-}" ]; then
  S=$(mktemp -d /tmp/vm_linux.XXXXXX)
  measure "$LAZYBLK_BENCH_WORK" "$S" "$LAZYBLK_BENCH_KERNEL" "$LAZYBLK_BENCH_RUNS" \
    "$LAZYBLK_BENCH_QEMU"
  rm -rf "$S"
  exit 0
fi

[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
LAZYBLK=$(realpath "$LAZYBLK")
[[ "$RUNS" =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"
for t in python3 cpio "$QEMU"; do command -v "$t" >/dev/null || die "$t not found"; done
BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ] || readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP; then
  die "$BUSYBOX is not a static busybox (apt-get install busybox-static)"
fi
. "$ROOT/scripts/lib/kernel.sh"
KC=$(kernel_cache) || die "no kernel cache directory"
KERNEL=$(fetch_kernel "$KC") || die "cannot fetch linux-image-cloud-amd64 (no network or apt?)"

OUT=$ROOT/build/bench
JSON=$OUT/vm_linux.json
MD=$ROOT/docs/benchmarks.md
GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
HOST_KVM=$( { [ -r /dev/kvm ] && [ -w /dev/kvm ]; } || { echo none; exit; }
  grep -qwE 'vmx|svm' /proc/cpuinfo && echo "hardware (vmx/svm)" || echo "software (no vmx/svm)")
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
mkdir -p "$OUT"
# outside /tmp: the nested VM sees this machine's / but a /tmp of its own
WORK=$(mktemp -d "$OUT/vm_linux-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# the image: busybox, a message, the tick loop
R=$WORK/root
mkdir -p "$R/bin" "$R/etc"
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
echo "bench-msg: the command ran in the image" >"$R/etc/bench-msg"
cat >"$R/bin/ticks" <<'EOF'
#!/bin/sh
# a tick every 10 ms, shell builtins only (no fork): read -t on a FIFO nobody writes
mkfifo /dev/shm/ticks
exec 3<>/dev/shm/ticks
i=0
while :; do
  i=$((i + 1))
  echo "tick $i"
  read -t 0.01 x <&3
done
EOF
chmod 755 "$R/bin/ticks"
"$LAZYBLK" import "$R" --store "$WORK/store" -o "$WORK/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$WORK/img.manifest" -o "$WORK/img.layout" --size 128M >/dev/null
"$LAZYBLK" export "$WORK/img.layout" --store "$WORK/store" -o "$WORK/img.raw" >/dev/null
"$LAZYBLK" initramfs --kernel "$KERNEL" -o "$WORK/boot.cpio" -- /bin/cat /etc/bench-msg >/dev/null
"$LAZYBLK" initramfs --kernel "$KERNEL" -o "$WORK/ticks.cpio" -- /bin/ticks >/dev/null

if grep -qwE 'vmx|svm' /proc/cpuinfo && [ -r /dev/kvm ] && [ -w /dev/kvm ] &&
   [ "${LAZYBLK_TEST_KVM:-}" != nested ]; then
  WHERE=direct
  echo "bench/vm_linux: measuring here (KVM: $HOST_KVM)" >&2
  mkdir "$WORK/scratch"
  measure "$WORK" "$WORK/scratch" "$KERNEL" "$RUNS" "$QEMU" >"$WORK/result.out"
else
  WHERE=nested
  echo "bench/vm_linux: no KVM here that runs Linux (KVM: $HOST_KVM): measuring in the nested VM of tests/integration/lib/nested.sh" >&2
  # lib/nested.sh passes on the LAZYBLK* variables (and runs $0 again there)
  export LAZYBLK LAZYBLK_BENCH_WORK=$WORK LAZYBLK_BENCH_KERNEL=$KERNEL LAZYBLK_BENCH_RUNS=$RUNS
  LAZYBLK_BENCH_QEMU=$(command -v "$QEMU")
  export LAZYBLK_BENCH_QEMU
  export NESTED_TIMEOUT=${NESTED_TIMEOUT:-3600}
  rc=0
  (
    # the tests' helpers nested.sh needs (T, die, skip, wait_for_state); its VM, its trap
    . "$ROOT/tests/integration/lib/common.sh"
    . "$ROOT/tests/integration/lib/nested.sh"
    nested_run "$SELF"
  ) >"$WORK/result.out" || rc=$?
  grep -v '^VM_LINUX-RESULT ' "$WORK/result.out" >&2 || true
  [ "$rc" -eq 0 ] || die "the nested run failed (exit $rc)"
fi
grep -q '^VM_LINUX-RESULT ' "$WORK/result.out" || die "no result from the measuring part"

python3 - "$WORK/result.out" "$JSON" "$WORK/section.md" "$WHERE" "$HOST_KVM" "$GIT_REV" \
  "$(basename "$KERNEL")" "$LOAD0" <<'PY'
import json, os, re, statistics, sys, time
rpath, jpath, mdpath, where, host_kvm, rev, kname, load0 = sys.argv[1:]
m = re.search(r'^model name\s*:\s*(.*)$', open('/proc/cpuinfo').read(), re.M)
cpu = m.group(1) if m else 'unknown CPU'

line = [l for l in open(rpath, errors='replace') if l.startswith('VM_LINUX-RESULT ')][-1]
res = json.loads(line.split(' ', 1)[1])
res.update({'where': where, 'host_kvm': host_kvm, 'git': rev, 'guest_kernel': kname,
            'host': {'cpus': os.cpu_count(), 'cpu': cpu, 'load_start': float(load0),
                     'load_end': os.getloadavg()[0]}})
json.dump(res, open(jpath, 'w'), indent=1)
runs, env, boot, snap = res['runs'], res['env'], res['boot'], res['snapshot']
med = statistics.median
fmt = lambda x: '%.0f ms' % x if x >= 100 else '%.1f ms' % x
srt = lambda v: ' '.join('%.0f' % x for x in sorted(v))

def goal(name, num, den, limit):
    if num is None or den is None:
        return '- %s: peer unavailable, not judged.' % name
    r = num / den
    return '- %s: %.2f× (goal ≤ %.1f×): **%s**.' % (name, r, limit, 'met' if r <= limit else 'not met')

lines = ['## vm_linux: a Linux guest in `lazyblk run` vs QEMU microvm: boot, snapshot, restore, '
         'live upgrade (%s)' % time.strftime('%Y-%m-%d'), '']
host = res['host']
machine = '%d × %s, load average %.1f at the start and %.1f at the end' % (
    host['cpus'], host['cpu'], host['load_start'], host['load_end'])
if where == 'nested':
    lines += ['**All times below are nested TCG times, not hardware figures.** This machine (%s) '
              'has no KVM that runs Linux (KVM here: %s), so both VMMs ran inside the nested VM '
              'of `tests/integration/lib/nested.sh` (QEMU TCG, one thread, one vCPU, `-cpu max` '
              'with emulated AMD-V, kvm_amd; kernel %s there): every guest instruction, and all '
              'the VMMs\' own work, runs at TCG speed. Only the ratios to the peer, measured in the '
              'same nested VM in the same run, are results; they too are bent by TCG (guest-side '
              'work, such as decompressing the kernel, costs far more there than on hardware). '
              'A busy loop at SCHED_IDLE kept the nested VM\'s vCPU from halting (idle, it stalled '
              'for minutes).'
              % (machine, host_kvm, env['kernel']), '']
else:
    lines += ['KVM: %s, measured directly on this machine (%s).' % (host_kvm, machine), '']
lines += ['bench/vm_linux.sh, %d alternating runs per VMM, medians; the guest: Debian\'s %s, 1 vCPU, '
          '512 MiB, the same initramfs (`lazyblk initramfs`) and the same image (lazyblk: the '
          'layout and its store; QEMU: its raw export on virtio-blk-device over virtio-mmio); '
          '%s; lazyblk %s; in the measuring VM: load average %.1f at the end (%d CPU%s%s), %.0f s '
          'for the whole measurement.'
          % (runs, kname, env['qemu'], rev, env['load_end'], env['cpus'],
             '' if env['cpus'] == 1 else 's',
             ', the SCHED_IDLE loop counting 1' if where == 'nested' else '', env['seconds']), '']
lb, qb = boot.get('lazyblk'), boot.get('qemu')
lu = med(r['user_ms'] for r in lb)
le = med(r['exit_ms'] for r in lb)
qu = med(r['user_ms'] for r in qb) if qb else None
qe = med(r['exit_ms'] for r in qb) if qb else None
lines += ['| boot | spawn -> first user-space instruction | spawn -> command\'s exit (VMM exited) |',
          '|---|---:|---:|',
          '| lazyblk run | %s | %s |' % (fmt(lu), fmt(le))]
if qb:
    lines += ['| QEMU microvm | %s | %s |' % (fmt(qu), fmt(qe)),
              '| lazyblk / QEMU | **%.2f×** | **%.2f×** |' % (lu / qu, le / qe)]
else:
    lines += ['| QEMU microvm | unavailable: %s | |' % res['errors'].get('boot qemu', '?').replace('|', '/').replace('\n', ' / ')]
lines += ['', 'Sorted runs (ms): lazyblk user space %s, exit %s%s; lazyblk\'s own log of the mark '
          '(from its process start) %s.' % (
              srt(r['user_ms'] for r in lb), srt(r['exit_ms'] for r in lb),
              '; QEMU user space %s, exit %s' % (srt(r['user_ms'] for r in qb),
                                                 srt(r['exit_ms'] for r in qb)) if qb else '',
              srt(r.get('mark_logged_ms', 0) for r in lb)), '']

def phases(con):
    # from a boot's console: the guest clock's start (KVM's clock at the VM's creation) to the
    # kernel's first timestamp (firmware, real-mode set-up, decompression), and the kernel's
    # own start up to `Run /init`, both in guest seconds
    off = re.search(r'sched offset of ([0-9]+) cycles', con)
    mhz = re.search(r'tsc: Detected ([0-9.]+) MHz', con)
    init = re.search(r'\[ *([0-9.]+)\] Run /init as init process', con)
    if not (off and mhz and init):
        return None
    return int(off.group(1)) / (float(mhz.group(1)) * 1e6), float(init.group(1))

ph = {k: phases(v['console']) for k, v in res.get('last_boot', {}).items()}
if ph.get('lazyblk') and ph.get('qemu'):
    lines += ['Where the boot goes, from the last boot\'s console (guest clock, kvm-clock\'s "sched '
              'offset" and the kernel\'s timestamps; under TCG it need not keep pace with the wall '
              'clock): before the kernel (firmware, real-mode set-up, decompression) lazyblk %.2f s, '
              'QEMU %.2f s; the kernel up to `Run /init` lazyblk %.2f s, QEMU %.2f s (%.2f×). '
              'lazyblk writes the guest\'s console output a line at a time (a write per byte '
              'took a third of its boot here, [run.md](run.md)); QEMU\'s time before the kernel is its '
              'firmware and the decompression in the guest.' % (
                  ph['lazyblk'][0], ph['qemu'][0], ph['lazyblk'][1], ph['qemu'][1],
                  ph['lazyblk'][1] / ph['qemu'][1]), '']
ls, qs = snap['lazyblk'], snap.get('qemu')
lr = ls['restores']
l_fi = med(r['first_instruction_ms'] for r in lr)
l_sfi = med(r['spawn_first_instruction_ms'] for r in lr)
l_out = med(r['spawn_first_output_ms'] for r in lr)
l_up = med(ls['upgrade_paused_ms'])
q_out = med(r['spawn_first_output_ms'] for r in qs['restores']) if qs else None
sz = ls['size_bytes']
mib = lambda n: n / 1048576
lines += ['| snapshot, restore, upgrade | snapshot (VM paused) | size on disk | restore -> first '
          'guest instruction | spawn -> first guest instruction | spawn -> first guest output | '
          'live upgrade (VM paused) |',
          '|---|---:|---:|---:|---:|---:|---:|',
          '| lazyblk run | %s (request: %s) | %.1f MiB (ram %.1f MiB, vm.state %.1f KiB) | %s | %s '
          '| %s | %s |' % (fmt(ls['snapshot_paused_ms']), fmt(ls['snapshot_request_ms']),
                           mib(sum(sz.values())), mib(sz.get('ram', 0)),
                           sz.get('vm.state', 0) / 1024, fmt(l_fi), fmt(l_sfi), fmt(l_out),
                           fmt(l_up))]
if qs:
    lines += ['| QEMU microvm (migrate to a file, -incoming) | %s | %.1f MiB (one stream) | n/a | '
              'n/a | %s | n/a |' % (fmt(qs['snapshot_ms']), mib(qs['size_bytes']), fmt(q_out))]
else:
    lines += ['| QEMU microvm (migrate to a file, -incoming) | unavailable: %s | | | | | |'
              % res['errors'].get('snapshot qemu', '?').replace('|', '/').replace('\n', ' / ')]
# the last restore's -v log: the vCPUs resumed, then the RAM check let the output go
rlog = res.get('last_restore', {}).get('lazyblk', {}).get('stderr', '')
m_res = re.search(r'resuming \d+ vCPUs? at ([0-9.]+) ms', rlog)
m_chk = re.search(r'snapshot RAM checked at ([0-9.]+) ms', rlog)
held = ''
if m_res and m_chk:
    held = (' In the last restore (its `-v` log, from the process start) the vCPU resumed at %.0f '
            'ms and the check of the snapshot\'s RAM digest (XXH3 over its %.1f MiB of pages, on '
            'the nested VM\'s one CPU beside the guest) let the guest\'s output and disk requests '
            'go at %.0f ms: %.0f ms of lazyblk\'s restore -> first output is that check, which '
            'QEMU\'s `-incoming` does not make.' % (
                float(m_res.group(1)), mib(sz.get('ram', 0)), float(m_chk.group(1)),
                float(m_chk.group(1)) - float(m_res.group(1))))
lines += ['', 'Sorted runs (ms): lazyblk restore -> first instruction %s; spawn -> first output %s; '
          'upgrades %s%s.%s' % (srt(r['first_instruction_ms'] for r in lr),
                                srt(r['spawn_first_output_ms'] for r in lr),
                                srt(ls['upgrade_paused_ms']),
                                '; QEMU -incoming spawn -> first output %s' % srt(
                                    r['spawn_first_output_ms'] for r in qs['restores']) if qs else '',
                                held),
          '', 'Goals (lazyblk / QEMU, medians):',
          goal('boot -> first user-space instruction vs QEMU microvm', lu, qu, 0.5),
          goal('restore (spawn) -> first guest output vs QEMU\'s `-incoming`', l_out, q_out, 0.2),
          goal('live-upgrade pause vs QEMU\'s snapshot + restore (`stop` -> migration completed, '
               'plus `-incoming` spawn -> first output: %s)' % (
                   fmt(qs['snapshot_ms'] + q_out) if qs else 'n/a'),
               l_up, qs['snapshot_ms'] + q_out if qs else None, 0.5),
          '- beside it, lazyblk\'s own snapshot pause + restore -> first output: %s; the upgrade '
          'pause is %.2f× that.' % (fmt(ls['snapshot_paused_ms'] + l_out),
                                    l_up / (ls['snapshot_paused_ms'] + l_out)),
          '',
          'Command lines (boot): `lazyblk -v run IMG.layout --store S --overlay OV --kernel K '
          '--initrd I --mem 512 --append "console=ttyS0 reboot=k panic=-1"` and `%s -M '
          'microvm,x-option-roms=off,rtc=on -accel kvm -cpu host,tsc-deadline=off -smp 1 -m 512 '
          '-nodefaults '
          '-no-user-config -display none -no-reboot -serial stdio -kernel K -initrd I -append '
          '"console=ttyS0 reboot=t panic=-1" -drive id=d0,file=IMG.raw,format=raw,if=none -device '
          'virtio-blk-device,drive=d0 -chardev socket,id=dbg,path=P -device '
          'isa-debugcon,iobase=0x440,chardev=dbg`; all inputs copied to the measuring VM\'s tmpfs '
          'first. microvm gets `rtc=on`: with its default (no RTC under ACPI) the Linux guest '
          'probed the missing CMOS clock for seconds; `tsc-deadline=off` gives its guest the '
          'timers lazyblk\'s guests have: with the TSC deadline timer, QEMU\'s guest stalled for '
          'minutes in the nested VM in half the runs here.' % os.path.basename(env['qemu_path']),
          '',
          'How (bench/vm_linux.sh\'s header has the details): the first user-space instruction is '
          'the initramfs /init\'s first act, a write of 1 to port 0x440 (lazyblk logs it on stderr, '
          'QEMU passes it to an `isa-debugcon` chardev socket the harness reads); the command '
          '`/bin/cat` of a file of the image (its output and `lazyblk-exit: 0` checked on both '
          'consoles); exit = the VMM process exited (lazyblk: `reboot=k`, its i8042; QEMU: '
          '`reboot=t` and `-no-reboot`, as QEMU documents for microvm). lazyblk decompresses the '
          'bzImage once and caches the vmlinux (the untimed first boot), the QEMU guest decompresses '
          'it at every boot. Snapshots of a guest printing a tick every 10 ms, 3 s after its first '
          'tick: lazyblk `snapshot DIR` on the control socket, QEMU `stop` + `migrate` to '
          '`exec:cat > FILE`; restores: `lazyblk run IMG --store S --restore DIR --overlay NEW` '
          'vs `-incoming "exec:cat FILE"` with `-global migration.store-global-state=off` (no '
          '`cont` round trip), both timed from the spawn to the first console byte; the upgrade: '
          '`upgrade` on the control socket ("ok upgraded: paused N ms"). QEMU has no '
          'first-instruction figure and no live upgrade (n/a).']
open(mdpath, 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
PY
python3 "$ROOT/bench/lib/mdsection.py" "$MD" vm_linux <"$WORK/section.md"
echo "bench/vm_linux: results in $JSON and $MD"
