#!/bin/bash
# Benchmark a sandbox that travels (issue 27, docs/run.md "Snapshots in a store"): a paused
# Linux VM snapshotted into a store, published by tag to a docker-registry, and resumed on a
# host whose store is empty, its RAM fetched lazily (userfaultfd) through the link emulator
# at 1 Gbit/s, 1 ms round trip; against "download the snapshot, then restore locally" through
# the same link. Also: a recorded working set replayed (--prefetch) against a restore from a
# warm local store, twenty clones of one snapshot on one host against one, and what a second
# snapshot a minute later stores against the pages that changed.
#
# Usage: bench/vm_travel.sh [--report]
#   --report  write the section again from the recorded run (build/bench/vm_travel.json)
# Environment:
#   LAZYBLK  the lazyblk binary (set by `make bench`; default build/lazyblk)
#   LINKEM   the link emulator (default build/tools/linkem; docs/linkem.md)
#   RUNS     runs per measurement of parts 3 and 4, alternating (default 3; medians)
#   CLONES   clones at once in part 5 (default 20)
#   TRAVEL_MEM, TRAVEL_FILL, TRAVEL_GAP  guest RAM (MiB, default 1024), MiB of it filled with
#            random data (default 200), seconds between the two snapshots (default 60): the
#            issue's figures; smaller ones only to try the script out
#   LAZYBLK_TEST_KVM=nested  measure in the nested VM even where KVM runs Linux here
#   NESTED_TIMEOUT  bound of the nested run in seconds (default 14400)
#
# Where it runs: as bench/vm_linux.sh. A stock Linux kernel needs a KVM with vmx or svm;
# where there is none, the measuring part runs in the nested VM of
# tests/integration/lib/nested.sh (QEMU TCG, one vCPU, emulated AMD-V, kvm_amd, 4 GiB, this
# machine's / read-only over virtiofs, tmpfs on /tmp and /dev/shm). Everything then runs at
# TCG speed there — the guests, lazyblk, the registry, nginx, curl, zstd and the link
# emulator itself — so absolute times are nested TCG times, not hardware figures: only
# ratios measured in the same run are results. The inputs (the image, the kernel) are made
# here, outside, in build/bench; the nested part prints its raw figures as one line
# "VM_TRAVEL-RESULT {json}" and this part writes the JSON and the section.
#
# The guest: Debian's generic kernel (tests/integration/lib/kernel.sh's kernel_generic, as
# t_vm_travel: its vmgenid driver gives clones their own random numbers), 1 vCPU, --mem
# TRAVEL_MEM, the initramfs `lazyblk run IMG -- CMD` builds, an image of busybox-static and
# /bin/travel (`lazyblk import`, `lazyblk mkfs --size 256M`): it mounts a tmpfs, fills
# TRAVEL_FILL MiB of it from /dev/urandom, writes 1 MiB to its disk, prints "ready MD5", then
# starts a ticker printing "tick N" every 10 ms (shell builtins: `read -t 0.01` on a FIFO)
# while it reads console lines; a line "work" stops the ticker, reads the data (md5sum of
# the tmpfs file) and prints "done MD5" (checked against the ready line); then it waits,
# not ticking, for "end" (exit 7) or "tick".
#
# The servers, on the measuring machine's loopback: docker-registry (as
# tests/integration/lib/remote.sh starts it) and nginx (scripts/lib/nginx_conf.sh), each
# reached through its own linkem `--rate 1gbit --delay 500us` (500 µs one way: a 1 ms round
# trip), a fresh linkem per run (its byte counts are the run's). The registry, nginx and
# linkem run at nice -10: they stand for other machines (bench/lib/coldlib.sh). Pushing is
# not timed and goes to the registry directly.
#
# 1-2. Boot (`lazyblk run IMG --store A --overlay OV --kernel K --mem M --control SOCK --
#    /bin/travel FILL`), wait for "ready" and 3 s of ticks; `pause`, `snapshot OLD1` (the
#    directory format: vm.state, sparse ram, disk.delta), `snapshot S1 --store A`, `resume`
#    on the control socket; TRAVEL_GAP s after that resume, the same again (OLD2, S2); the
#    VM ends. S1 is pushed by tag (`lazyblk push --remote oci://REG/bench/travel:v1 S1 --store
#    A`); OLD1 packed for the peer's download as the fairest form found: `tar --sparse` of
#    the directory (only the ram file's data, not its holes) through `zstd -3` (what is left
#    of the ram is random data and kernel pages; the store's chunks are zstd frames too),
#    served by nginx.
# 3. Resumed on an empty host, RUNS times each, alternating (one untimed tag restore first:
#    the --trace-record run of part 4):
#      lazy:  `lazyblk -v run --restore oci://LINK/bench/travel:v1 --store EMPTY --overlay NEW
#             --control SOCK`; spawn -> the first byte on its stdout (the guest's console)
#      peer:  `curl -sS URL | zstd -dc | tar -x` of the packed OLD1 through the same link,
#             then `lazyblk -v run IMG.layout --store IMGSTORE --restore DIR --overlay NEW`;
#             download start -> the first byte on its stdout. The peer host is given the
#             base image (its layout and store: busybox, a few MiB) beforehand, untimed: an
#             advantage the lazy side does not get (it fetches the snapshot's disk layers).
#    Each process's own figure beside it: `stats` first_output_ns - start_ns.
#    Goal: lazy <= 0.2 x peer.
# 4. Working set: a restore by tag on an empty store with --trace-record T; "work" is sent
#    at its first output, "done" awaited, `stats` taken (lazy_ram bytes_frame: the
#    compressed bytes of the chunks it loaded in all, the touched RAM), then "end" (the trace
#    is written at exit). Then RUNS
#    times each, alternating: a restore by tag on an empty store with --prefetch T, and a
#    restore from the warm local store (`run --restore S1 --store A --overlay NEW`: every
#    chunk local); each gets "work" at its first byte of output: work -> "done", and
#    lazy_ram.bytes_at_first_output (bytes_frame when the first console byte went out: what
#    its faults and the prefetch had loaded by then; a chunk a fault and the prefetch both
#    load counts twice, so it may overstate what crossed the link).
#    The -v logs of every restore are kept in the JSON.
#    Goals: bytes_at_first_output <= 15 % of the touched RAM; prefetch work -> done <= 1.3 x
#    the warm local store's.
# 5. Clones: host memory = MemTotal - MemAvailable (/proc/meminfo, after sync and
#    drop_caches, 5 s after the last "done") with the clones running, minus the same before
#    the first started. One clone, measured that way, then CLONES at once: each `lazyblk -q
#    run --restore S1 --store A --overlay OWN` started after the previous printed "done"
#    (each runs the workload once, then waits). Beside it: the sum over the clones of their
#    Pss minus Pss_Shmem (/proc/PID/smaps_rollup) plus the shared tmpfs cache file's
#    allocated bytes (/dev/shm/lazyblk-UID/*.ram, counted once). Goal: CLONES at once <=
#    1.5 x one clone.
# 6. Pages that changed between the two snapshots: pages whose bytes differ between OLD1/ram
#    and OLD2/ram (a hole reads as zeros), both taken in the same pauses as S1 and S2; pages
#    stored: the "N pages stored" S2's snapshot answered. Goal: stored <= 1.2 x changed.
#
# Writes: build/bench/vm_travel.json (every run's figures) and the `vm_travel` section of
# docs/benchmarks.md.
set -euo pipefail
SELF=$(realpath "$0")
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
LINKEM=${LINKEM:-$ROOT/build/tools/linkem}
RUNS=${RUNS:-3}
CLONES=${CLONES:-20}
MEM=${TRAVEL_MEM:-1024}
FILL=${TRAVEL_FILL:-200}
GAP=${TRAVEL_GAP:-60}

die() { echo "bench/vm_travel: $*" >&2; exit 1; }

# measure WORK SCRATCH KERNEL RUNS CLONES MEM FILL GAP: the measuring part (here or in the
# nested VM); prints the line VM_TRAVEL-RESULT {json}
measure() {
  ROOT=$ROOT python3 - "$@" "$LAZYBLK" "$LINKEM" <<'PY'
import atexit, glob, json, os, re, select, shutil, signal, socket, statistics, subprocess, sys
import threading, time
work, scratch, kernel, runs, nclones, mem, fill, gap, lazyblk, linkem = sys.argv[1:]
runs, nclones, fill, gap = int(runs), int(nclones), int(fill), float(gap)
ROOT = os.environ['ROOT']
LIMIT = 3600                               # s: a hang guard for one step
RATE, DELAY = '1gbit', '500us'             # linkem: 500 us one way, a 1 ms round trip
APPEND = 'console=ttyS0 reboot=k panic=-1'
REPO = 'bench/travel:v1'
UID = os.getuid()
SHM = '/dev/shm/lazyblk-%d' % UID          # lazyram's cache directory (lazyram.h)
t_start = time.monotonic()

class Fail(Exception):
    pass

def log(msg):
    print('bench/vm_travel: ' + msg, file=sys.stderr, flush=True)

def P(*a):
    return os.path.join(scratch, *a)

def now():
    return time.monotonic_ns()

def mib(n):
    return n / 1048576

def renice(pid):                           # the servers stand for other machines
    try:
        os.setpriority(os.PRIO_PROCESS, pid, -10)
    except OSError as e:
        log('note: cannot renice %d: %s' % (pid, e))

# every input into this machine's own file system first (untimed): in the nested VM, WORK
# is the host's / over virtiofs, read-only (the kernel stays in the kernel cache, its modules
# beside it: it is read at the boot only, untimed)
inp = P('in')
os.mkdir(inp)
subprocess.run(['cp', '-a', os.path.join(work, 'img.store'), os.path.join(work, 'img.layout'),
                os.path.join(work, 'img.manifest'), inp], check=True)
LAYOUT, IMGSTORE = os.path.join(inp, 'img.layout'), os.path.join(inp, 'img.store')
A = P('A')                                 # the store the VM runs from and snapshots into
subprocess.run(['cp', '-a', IMGSTORE, A], check=True)
shutil.copyfile(os.path.join(inp, 'img.manifest'), P('img.manifest'))

# ---- servers ----------------------------------------------------------------------------
SERVERS = []

@atexit.register
def servers_stop():
    for p in SERVERS:
        if p.poll() is None:
            p.kill()
            p.wait()

def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p

def http_up(url, proc, what):
    for _ in range(1200):
        if subprocess.run(['curl', '-s', '-o', '/dev/null', '--max-time', '5', url]).returncode == 0:
            return
        if proc.poll() is not None:
            raise Fail('%s exited at start' % what)
        time.sleep(0.1)
    raise Fail('%s does not answer on %s' % (what, url))

def start_registry():
    root, port = P('registry'), free_port()
    os.mkdir(root)
    with open(P('registry.yml'), 'w') as f:
        f.write('version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n'
                'storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n'
                '  maintenance:\n    uploadpurging:\n      enabled: false\n'
                'http:\n  addr: 127.0.0.1:%d\n  secret: lazyblk-bench-secret\n' % (root, port))
    p = subprocess.Popen(['docker-registry', 'serve', P('registry.yml')], stdin=subprocess.DEVNULL,
                         stdout=open(P('registry.log'), 'w'), stderr=subprocess.STDOUT)
    SERVERS.append(p)
    renice(p.pid)
    http_up('http://127.0.0.1:%d/v2/' % port, p, 'docker-registry')
    return port

def start_nginx(www):
    d, port = P('nginx'), free_port()
    subprocess.run(['bash', '-c', '. "$1/scripts/lib/nginx_conf.sh"; nginx_conf "$2" "$3" "$4"',
                    'nginx_conf', ROOT, d, str(port), www], check=True)
    p = subprocess.Popen(['nginx', '-p', d, '-c', os.path.join(d, 'nginx.conf'), '-e',
                          os.path.join(d, 'error.log')], stdin=subprocess.DEVNULL,
                         stdout=open(os.path.join(d, 'stdout'), 'w'), stderr=subprocess.STDOUT)
    SERVERS.append(p)
    renice(p.pid)
    http_up('http://127.0.0.1:%d/' % port, p, 'nginx')
    return port

class Link:
    """A fresh linkem in front of 127.0.0.1:port for one run; stop() gives its byte counts."""
    def __init__(self, port):
        self.p = subprocess.Popen([linkem, '--listen', '127.0.0.1:0', '--connect',
                                   '127.0.0.1:%d' % port, '--rate', RATE, '--delay', DELAY],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=open(P('linkem.err'), 'a'))
        renice(self.p.pid)
        line = self.p.stdout.readline().decode()
        m = re.match(r'linkem: listening on 127\.0\.0\.1:([0-9]+)', line)
        if not m:
            raise Fail('linkem did not start: %r %s' % (line, open(P('linkem.err')).read()))
        self.port = int(m.group(1))

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        out = self.p.stdout.read().decode()
        self.p.wait()
        m = re.search(r'linkem: up ([0-9]+) bytes, down ([0-9]+) bytes, ([0-9]+) connections', out)
        return {'up': int(m.group(1)), 'down': int(m.group(2)), 'conns': int(m.group(3))} if m else {}

# ---- a VM and its console ---------------------------------------------------------------
class VM:
    """lazyblk run with its console on pipes: a thread reads stdout, noting when the first
    byte came and when each line did; on_first (a string) is written to the console at once
    when the first byte comes (its time kept)."""
    def __init__(self, name, argv, on_first=None):
        self.name, self.buf, self.lines, self.partial = name, b'', [], b''
        self.t_first = self.t_sent = None
        self.cv = threading.Condition()
        self.on_first = on_first
        rin, self.win = os.pipe()
        self.rout, wout = os.pipe()
        self.errpath = P(name + '.err')
        fe = os.open(self.errpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.t_spawn = now()
        self.pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_DUP2, rin, 0), (os.POSIX_SPAWN_DUP2, wout, 1),
            (os.POSIX_SPAWN_DUP2, fe, 2)])
        for fd in (rin, wout, fe):
            os.close(fd)
        self.status = None
        self.th = threading.Thread(target=self._read, daemon=True)
        self.th.start()

    def _read(self):
        while True:
            try:
                d = os.read(self.rout, 65536)
            except OSError:
                d = b''
            t = now()
            with self.cv:
                if not d:
                    self.eof = True
                    self.cv.notify_all()
                    break
                if self.t_first is None:
                    self.t_first = t
                    if self.on_first:
                        os.write(self.win, self.on_first.encode() + b'\n')
                        self.t_sent = now()
                self.buf += d
                self.partial += d
                *done, self.partial = self.partial.split(b'\n')
                for l in done:
                    self.lines.append((t, l.replace(b'\r', b'').decode(errors='replace')))
                self.cv.notify_all()

    def send(self, text):
        t = now()
        os.write(self.win, text.encode() + b'\n')
        return t

    def alive(self):
        if self.status is None:
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p:
                self.status = os.waitstatus_to_exitcode(st)
        return self.status is None

    def reap(self, limit):
        t = time.monotonic() + limit
        while self.alive() and time.monotonic() < t:
            time.sleep(0.05)

    def tail(self, n=15):
        out = '\n'.join(l for _, l in self.lines[-n:])
        try:
            err = open(self.errpath, errors='replace').read()[-1500:]
        except OSError:
            err = ''
        return 'console:\n%s\nstderr:\n%s' % (out, err)

    def wait_line(self, regex, start=0, limit=LIMIT):
        """(index, time, match) of the first line from index start matching regex."""
        rx = re.compile(regex)
        end = time.monotonic() + limit
        i = start
        with self.cv:
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i][1])
                    if m:
                        return i, self.lines[i][0], m
                    i += 1
                if getattr(self, 'eof', False):
                    self.reap(10)
                if not self.alive() or getattr(self, 'eof', False):
                    raise Fail('%s: no line /%s/: the VM ended (status %s); %s' % (
                        self.name, regex, self.status, self.tail()))
                if time.monotonic() > end:
                    raise Fail('%s: no line /%s/ after %d s; %s' % (self.name, regex, limit,
                                                                   self.tail()))
                self.cv.wait(0.5)

    def wait_first(self, limit=LIMIT):
        end = time.monotonic() + limit
        with self.cv:
            while self.t_first is None:
                if not self.alive():
                    raise Fail('%s: ended before any output (status %s); %s' % (
                        self.name, self.status, self.tail()))
                if time.monotonic() > end:
                    raise Fail('%s: no output after %d s; %s' % (self.name, limit, self.tail()))
                self.cv.wait(0.2)
        return self.t_first

    def end(self, want=7, limit=600):
        """'end' on the console; the guest exits 7. Killed after limit s."""
        try:
            self.send('end')
        except OSError:
            pass
        self.reap(limit)
        killed = self.alive()
        if killed:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            self.status = -9
        os.close(self.win)
        self.th.join(30)
        os.close(self.rout)
        if killed or self.status != want:
            raise Fail('%s: ended with %s, want %d%s; %s' % (
                self.name, self.status, want, ' (killed)' if killed else '', self.tail()))

    def kill(self):
        if self.alive():
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            self.status = -9

def ctl(path, req, timeout=LIMIT):
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(timeout)
    c.connect(path)
    c.sendall(req.encode() + b'\n')
    c.shutdown(socket.SHUT_WR)
    out = b''
    while True:
        got = c.recv(65536)
        if not got:
            c.close()
            return out.decode().strip()
        out += got

def fresh(path):
    for p in (path, path + '.state'):
        if os.path.lexists(p):
            os.unlink(p)
    return path

def shm_clean():
    """No restore runs: the lazy RAM cache must be gone (its last user removes it); what a
    killed run left is removed, so that the next restore starts cold."""
    left = glob.glob(os.path.join(SHM, '*'))
    for f in left:
        os.unlink(f)
    return [os.path.basename(f) for f in left]

MD5 = [None]

def restore(kind, name, argv_tail, on_first=None, workload=False, trace_record=None,
            prefetch=None):
    """One restore: spawn -> first output; with workload, 'work' at the first output and
    -> 'done'; stats on the control socket; 'end'. Returns the figures."""
    sock = fresh(P(name + '.sock'))
    argv = [lazyblk, '-v', 'run'] + argv_tail + ['--control', sock]
    if trace_record:
        argv += ['--trace-record', trace_record]
    if prefetch:
        argv += ['--prefetch', prefetch]
    vm = VM(name, argv, on_first='work' if workload else None)
    try:
        t1 = vm.wait_first()
        r = {'spawn_first_output_ms': (t1 - vm.t_spawn) / 1e6}
        if workload:
            _, t2, m = vm.wait_line(r'^done ([0-9a-f]{32})$')
            if m.group(1) != MD5[0]:
                raise Fail('%s: the data read back has md5 %s, not %s' % (name, m.group(1), MD5[0]))
            r['work_done_ms'] = (t2 - vm.t_sent) / 1e6
        else:
            vm.wait_line(r'^tick [0-9]+$')
        st = json.loads(ctl(sock, 'stats'))
        r['first_output_in_process_ms'] = (st['first_output_ns'] - st['start_ns']) / 1e6
        if 'lazy_ram' in st:
            r['lazy_ram'] = st['lazy_ram']
        vm.end()
    finally:
        vm.kill()
    r['log'] = open(vm.errpath, errors='replace').read()[-4000:]
    left = shm_clean()
    if left:
        log('note: %s left %s in %s' % (name, left, SHM))
    return r

# ---- 1-2. boot, two snapshots, publish --------------------------------------------------
def meminfo():
    d = {}
    for l in open('/proc/meminfo'):
        k, v = l.split(':')
        d[k] = int(v.split()[0]) * 1024
    return d

def host_used():
    """MemTotal - MemAvailable, after sync and (as root) drop_caches."""
    subprocess.run(['sync'])
    try:
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write('3\n')
    except OSError:
        pass
    time.sleep(1)
    m = meminfo()
    return m['MemTotal'] - m['MemAvailable']

def snap_pair(sock, i):
    """pause; the directory snapshot OLDi and the store snapshot Si; resume."""
    old, new = P('old%d' % i), P('s%d' % i)
    t = now()
    r = ctl(sock, 'pause')
    if r != 'ok paused':
        raise Fail('pause: ' + r)
    try:
        r = ctl(sock, 'snapshot ' + old)
        if r != 'ok ' + old:
            raise Fail('snapshot %s: %s' % (old, r))
        t1 = now()
        r = ctl(sock, 'snapshot %s --store %s' % (new, A))
        t2 = now()
        m = re.fullmatch(r'ok \S+ sha256:([0-9a-f]{64}) \(RAM: ([0-9]+) pages stored, ([0-9]+) '
                         r'kept; disk: ([0-9]+) blocks\)', r)
        if not m:
            raise Fail('snapshot %s --store: %s' % (new, r))
    finally:
        r2 = ctl(sock, 'resume')
    if r2 != 'ok running':
        raise Fail('resume: ' + r2)
    return t, {'id': m.group(1), 'pages_stored': int(m.group(2)), 'pages_kept': int(m.group(3)),
               'disk_blocks': int(m.group(4)), 'dir_snapshot_ms': (t1 - t) / 1e6,
               'store_snapshot_ms': (t2 - t1) / 1e6}

def ram_pages_changed(a, b):
    """Pages whose bytes differ between two ram files (holes read as zeros)."""
    PG = 4096
    n = 0
    with open(a, 'rb') as fa, open(b, 'rb') as fb:
        size = max(os.fstat(fa.fileno()).st_size, os.fstat(fb.fileno()).st_size)
        off = 0
        BLK = 1 << 20
        while off < size:
            x, y = os.pread(fa.fileno(), BLK, off), os.pread(fb.fileno(), BLK, off)
            x, y = x.ljust(BLK, b'\0'), y.ljust(BLK, b'\0')
            if x != y:
                for p in range(0, BLK, PG):
                    if x[p:p + PG] != y[p:p + PG]:
                        n += 1
            off += BLK
    return n

def dir_bytes(d):
    return sum(os.stat(os.path.join(d, f)).st_blocks * 512 for f in os.listdir(d))

res = {'runs': runs, 'clones_n': nclones, 'mem_mib': int(mem), 'fill_mib': fill, 'gap_s': gap,
       'link': {'rate': RATE, 'delay_one_way': DELAY}}
reg_port = start_registry()
www = P('www')
os.mkdir(www)
ng_port = start_nginx(www)
log('servers: docker-registry on %d, nginx on %d' % (reg_port, ng_port))

sock = fresh(P('vm.sock'))
vm = VM('boot', [lazyblk, 'run', LAYOUT, '--store', A, '--overlay', fresh(P('ov.boot')),
                 '--kernel', kernel, '--mem', mem, '--append', APPEND, '--control', sock,
                 '--', '/bin/travel', str(fill)])
try:
    t0 = vm.t_spawn
    i, t, m = vm.wait_line(r'^ready ([0-9a-f]{32})$')
    MD5[0] = m.group(1)
    log('booted, %d MiB filled (md5 %s) in %.0f s' % (fill, MD5[0], (t - t0) / 1e9))
    res['boot_ready_s'] = (t - t0) / 1e9
    vm.wait_line(r'^tick [0-9]+$', i)
    time.sleep(3)
    ts1, s1 = snap_pair(sock, 1)
    tr1 = now()
    log('snapshot 1: %s' % s1)
    while time.monotonic_ns() < tr1 + gap * 1e9:
        time.sleep(0.1)
    if not vm.alive():
        raise Fail('the VM ended between the snapshots; ' + vm.tail())
    ts2, s2 = snap_pair(sock, 2)
    s2['after_first_s'] = (ts2 - ts1) / 1e9
    s2['after_resume_s'] = (ts2 - tr1) / 1e9
    log('snapshot 2, %.1f s after the first (%.1f s after its resume): %s' % (
        s2['after_first_s'], s2['after_resume_s'], s2))
    n = len(vm.lines)
    vm.wait_line(r'^tick [0-9]+$', n)
    vm.end()
finally:
    vm.kill()
shm_clean()
res['snapshots'] = [s1, s2]
res['old_dir_bytes'] = [dir_bytes(P('old1')), dir_bytes(P('old2'))]
changed = ram_pages_changed(P('old1', 'ram'), P('old2', 'ram'))
res['pages_changed'] = changed
log('pages changed between the snapshots: %d; the second stored %d' % (changed, s2['pages_stored']))
shutil.rmtree(P('old2'))

t = now()
subprocess.run([lazyblk, 'push', '--remote', 'oci://127.0.0.1:%d/%s' % (reg_port, REPO), P('s1'),
                '--store', A], check=True, stdout=subprocess.DEVNULL)
res['push_s'] = (now() - t) / 1e9
t = now()
subprocess.run('tar -C %s --sparse -cf - old1 | zstd -q -3 -T1 >%s' % (
    scratch, os.path.join(www, 'old1.tar.zst')), shell=True, check=True)
res['pack_s'] = (now() - t) / 1e9
res['download_bytes'] = os.path.getsize(os.path.join(www, 'old1.tar.zst'))
res['registry_bytes'] = int(subprocess.run(['du', '-sb', P('registry')], capture_output=True,
                                           text=True).stdout.split()[0])
shutil.rmtree(P('old1'))
log('pushed S1 (%.0f s, registry %.1f MiB); OLD1 packed (%.1f MiB)' % (
    res['push_s'], mib(res['registry_bytes']), mib(res['download_bytes'])))

# ---- 4a. the working set, recorded (also the untimed first tag restore) -----------------
TRACE = P('ws.trace')
seq = [0]

def lazy_run(name, workload=False, trace_record=None, prefetch=None):
    seq[0] += 1
    cache = P('cache.%d' % seq[0])
    link = Link(reg_port)
    try:
        r = restore('lazy', name, ['--restore', 'oci://127.0.0.1:%d/%s' % (link.port, REPO),
                                   '--store', cache, '--overlay', fresh(P('ov.%d' % seq[0]))],
                    workload=workload, trace_record=trace_record, prefetch=prefetch)
    finally:
        r_link = link.stop()
    r['link'] = r_link
    shutil.rmtree(cache, ignore_errors=True)
    fresh(P('ov.%d' % seq[0]))
    return r

def warm_run(name, workload=False):
    seq[0] += 1
    r = restore('warm', name, ['--restore', P('s1'), '--store', A, '--overlay',
                               fresh(P('ov.%d' % seq[0]))], workload=workload)
    fresh(P('ov.%d' % seq[0]))
    return r

def peer_run(name):
    seq[0] += 1
    dest = P('peer.%d' % seq[0])
    os.mkdir(dest)
    link = Link(ng_port)
    try:
        t0 = now()
        subprocess.run('curl -sSf http://127.0.0.1:%d/old1.tar.zst | zstd -dc | tar -C %s -xf -'
                       % (link.port, dest), shell=True, check=True)
        t1 = now()
    finally:
        r_link = link.stop()
    r = restore('peer', name, [LAYOUT, '--store', IMGSTORE, '--restore',
                               os.path.join(dest, 'old1'), '--overlay',
                               fresh(P('ov.%d' % seq[0]))])
    r['download_ms'] = (t1 - t0) / 1e6
    r['first_output_ms'] = r['download_ms'] + r['spawn_first_output_ms']
    r['link'] = r_link
    shutil.rmtree(dest)
    fresh(P('ov.%d' % seq[0]))
    return r

log('4: recording the working set (a restore by tag on an empty store, the workload)')
rec = lazy_run('record', workload=True, trace_record=TRACE)
if not os.path.exists(TRACE):
    raise Fail('--trace-record wrote no trace')
res['record'] = rec
touched = rec['lazy_ram']['bytes_frame']          # no prefetch there: each chunk once
res['touched_bytes'] = touched
log('recorded: first output %.0f ms, work -> done %.0f ms, %.1f MiB fetched in all' % (
    rec['spawn_first_output_ms'], rec['work_done_ms'], mib(touched)))

# ---- 3. lazy restore by tag vs download then restore ------------------------------------
res['lazy'], res['peer'] = [], []
for i in range(runs):
    order = ('lazy', 'peer') if i % 2 == 0 else ('peer', 'lazy')
    for k in order:
        r = lazy_run('lazy%d' % i) if k == 'lazy' else peer_run('peer%d' % i)
        res[k].append(r)
        log('3: run %d: %s: first output %.0f ms%s' % (
            i + 1, k, r.get('first_output_ms', r['spawn_first_output_ms']),
            ' (download %.0f ms)' % r['download_ms'] if k == 'peer' else ''))

# ---- 4b. prefetch vs the warm local store -----------------------------------------------
warm_run('warmup')                         # untimed: the plain copies, the page cache
res['prefetch'], res['warm'] = [], []
for i in range(runs):
    order = ('prefetch', 'warm') if i % 2 == 0 else ('warm', 'prefetch')
    for k in order:
        r = lazy_run('prefetch%d' % i, workload=True, prefetch=TRACE) if k == 'prefetch' \
            else warm_run('warm%d' % i, workload=True)
        res[k].append(r)
        log('4: run %d: %s: first output %.0f ms, work -> done %.0f ms%s' % (
            i + 1, k, r['spawn_first_output_ms'], r['work_done_ms'],
            ', %.1f MiB at the first output' % mib(r['lazy_ram']['bytes_at_first_output'])
            if k == 'prefetch' else ''))

# ---- 5. clones --------------------------------------------------------------------------
for p in SERVERS:                          # the servers' memory out of the picture
    p.kill()
    p.wait()
shutil.rmtree(P('registry'))
shutil.rmtree(www)

def smaps(pid):
    d = {}
    try:
        for l in open('/proc/%d/smaps_rollup' % pid):
            m = re.match(r'(\w+):\s+([0-9]+) kB', l)
            if m:
                d[m.group(1)] = int(m.group(2)) * 1024
    except OSError:
        pass
    return d

def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for t in glob.glob('/proc/%d/task/*/children' % p):
            try:
                todo += [int(x) for x in open(t).read().split()]
            except OSError:
                pass
    return out

def clones(n):
    """n clones from the warm local store, each after the previous printed done; host
    memory with them all waiting, minus before."""
    shm_clean()
    before = host_used()
    vms = []
    try:
        for i in range(n):
            seq[0] += 1
            vm = VM('clone%d' % i, [lazyblk, '-q', 'run', '--restore', P('s1'), '--store', A,
                                    '--overlay', fresh(P('ov.clone%d' % i))], on_first='work')
            vms.append(vm)
            _, _, m = vm.wait_line(r'^done ([0-9a-f]{32})$')
            if m.group(1) != MD5[0]:
                raise Fail('clone %d: md5 %s, not %s' % (i, m.group(1), MD5[0]))
        time.sleep(5)
        after = host_used()
        pss = sum(s.get('Pss', 0) - s.get('Pss_Shmem', 0)
                  for v in vms for s in map(smaps, tree(v.pid)))
        shm = sum(os.stat(f).st_blocks * 512 for f in glob.glob(os.path.join(SHM, '*')))
        for vm in vms:
            vm.end()
    finally:
        for vm in vms:
            vm.kill()
    for i in range(n):
        fresh(P('ov.clone%d' % i))
    shm_clean()
    return {'host_bytes': after - before, 'pss_private_bytes': pss, 'shm_cache_bytes': shm,
            'pss_bytes': pss + shm, 'used_before': before, 'used_after': after}

log('5: one clone')
res['clone1'] = clones(1)
log('5: one clone: host %.1f MiB (Pss + cache %.1f MiB)' % (
    mib(res['clone1']['host_bytes']), mib(res['clone1']['pss_bytes'])))
log('5: %d clones' % nclones)
res['clonesN'] = clones(nclones)
log('5: %d clones: host %.1f MiB (Pss + cache %.1f MiB)' % (
    nclones, mib(res['clonesN']['host_bytes']), mib(res['clonesN']['pss_bytes'])))

res['env'] = {
    'kernel': os.uname().release, 'cpus': os.cpu_count(), 'load_end': os.getloadavg()[0],
    'mem_total': meminfo()['MemTotal'],
    'nested': bool(os.environ.get('LAZYBLK_NESTED')),
    'registry': subprocess.run(['docker-registry', '--version'], capture_output=True,
                               text=True).stdout.strip(),
    'seconds': time.monotonic() - t_start}
print('VM_TRAVEL-RESULT ' + json.dumps(res), flush=True)
PY
}

# report RESULT JSON SECTION WHERE HOST_KVM REV KERNEL LOAD0: the JSON (from the measuring
# part's RESULT line and this machine's figures) and the section; with RESULT the JSON
# itself (--report), the section again from a recorded run
report() {
  python3 - "$@" <<'PY'
import json, os, re, statistics, sys, time
rpath, jpath, mdpath, where, host_kvm, rev, kname, load0 = sys.argv[1:]
if rpath == jpath:
    res = json.load(open(jpath))
    where, host_kvm, rev, kname = res['where'], res['host_kvm'], res['git'], res['guest_kernel']
else:
    m = re.search(r'^model name\s*:\s*(.*)$', open('/proc/cpuinfo').read(), re.M)
    cpu = m.group(1) if m else 'unknown CPU'
    line = [l for l in open(rpath, errors='replace') if l.startswith('VM_TRAVEL-RESULT ')][-1]
    res = json.loads(line.split(' ', 1)[1])
    res.update({'where': where, 'host_kvm': host_kvm, 'git': rev, 'guest_kernel': kname,
                'host': {'cpus': os.cpu_count(), 'cpu': cpu, 'load_start': float(load0),
                         'load_end': os.getloadavg()[0]}})
    json.dump(res, open(jpath, 'w'), indent=1)
med = statistics.median
env, runs, n = res['env'], res['runs'], res['clones_n']
mib = lambda b: b / 1048576
fmt = lambda x: '%.0f ms' % x if x >= 100 else '%.1f ms' % x
srt = lambda v: ' '.join('%.0f' % x for x in sorted(v))
verdict = lambda r, lim: '**%s**' % ('met' if r <= lim else 'not met')

lines = ['## vm_travel: a paused VM resumed by tag on an empty host, its RAM fetched lazily '
         '(issue 27) (%s)' % time.strftime('%Y-%m-%d'), '']
host = res['host']
machine = '%d × %s, load average %.1f at the start and %.1f at the end' % (
    host['cpus'], host['cpu'], host['load_start'], host['load_end'])
if where == 'nested':
    lines += ['**All times below are nested TCG times, not hardware figures.** This machine (%s) '
              'has no KVM that runs Linux (KVM here: %s), so everything ran inside the nested VM '
              'of `tests/integration/lib/nested.sh` (QEMU TCG, one thread, one vCPU, %.1f GiB, '
              'emulated AMD-V, kvm_amd; kernel %s there): the guests, lazyblk, docker-registry, '
              'nginx, curl, zstd, tar and the link emulator all ran at TCG speed on that one '
              'vCPU. Only the ratios, measured in the same run, are results; the link emulator '
              'cannot keep 1 Gbit/s there (the throughputs it achieved are given).'
              % (machine, host_kvm, env['mem_total'] / 2**30, env['kernel']), '']
else:
    lines += ['KVM: %s, measured directly on this machine (%s).' % (host_kvm, machine), '']
s1, s2 = res['snapshots']
lines += ['bench/vm_travel.sh; lazyblk %s; the guest: Debian\'s %s, 1 vCPU, %d MiB of RAM, the '
          'initramfs `lazyblk run IMG -- /bin/travel %d` builds, an image of busybox-static '
          '(256 MiB disk): it filled %d MiB of a tmpfs from /dev/urandom and 1 MiB of its disk, '
          'then printed a tick every 10 ms; the workload, on a console line "work": md5sum of '
          'the tmpfs file, then "done MD5" (checked against the MD5 printed before the '
          'snapshot, in every run). The link: `linkem --rate %s --delay %s` (one way: a 1 ms '
          'round trip), a fresh one per run, in front of docker-registry (%s) for lazyblk and '
          'of nginx for the peer; registry, nginx and linkem at nice -10. %d alternating runs '
          'per measurement, medians; %.0f s for the whole measurement, load average %.1f at '
          'its end (%d CPU%s%s).'
          % (rev, kname, res['mem_mib'], res['fill_mib'], res['fill_mib'], res['link']['rate'],
             res['link']['delay_one_way'], env['registry'] or 'docker-registry', runs,
             env['seconds'], env['load_end'], env['cpus'], '' if env['cpus'] == 1 else 's',
             ', the nested VM\'s SCHED_IDLE loop counting 1' if where == 'nested' else ''), '']
lines += ['The snapshot pushed: %s (`snapshot --store`: %d pages stored, %d kept, %d disk '
          'blocks; %s paused for it, %s for the directory snapshot in the same pause); in the '
          'registry %.1f MiB; the directory snapshot (vm.state, sparse ram, disk.delta) %.1f MiB '
          'on disk, packed for the peer (`tar --sparse | zstd -3`) %.1f MiB.'
          % (s1['id'][:12], s1['pages_stored'], s1['pages_kept'], s1['disk_blocks'],
             fmt(s1['store_snapshot_ms']), fmt(s1['dir_snapshot_ms']), mib(res['registry_bytes']),
             mib(res['old_dir_bytes'][0]), mib(res['download_bytes'])), '']

# 3
lz, pr = res['lazy'], res['peer']
l_fo = med(r['spawn_first_output_ms'] for r in lz)
p_fo = med(r['first_output_ms'] for r in pr)
p_dl = med(r['download_ms'] for r in pr)
p_rs = med(r['spawn_first_output_ms'] for r in pr)
rate = lambda r: r['link'].get('down', 0) * 8 / (r['download_ms'] / 1e3) / 1e6
lines += ['### Resumed on an empty host: time to the guest\'s first output', '',
          '| | download | restore: spawn -> first output | total | of which in the process '
          '(start -> first output) | bytes over the link (down) |',
          '|---|---:|---:|---:|---:|---:|',
          '| lazyblk `run --restore oci://…:TAG --store EMPTY` | — | %s | **%s** | %s | %.1f MiB '
          '(lazy RAM by the first output: %.1f MiB) |' % (
              fmt(l_fo), fmt(l_fo), fmt(med(r['first_output_in_process_ms'] for r in lz)),
              mib(med(r['link'].get('down', 0) for r in lz)),
              mib(med(r['lazy_ram']['bytes_at_first_output'] for r in lz))),
          '| peer: download (`curl | zstd -dc | tar -x`), then `run --restore DIR` | %s (%.0f '
          'Mbit/s) | %s | **%s** | %s | %.1f MiB |' % (
              fmt(p_dl), med(rate(r) for r in pr), fmt(p_rs), fmt(p_fo),
              fmt(med(r['first_output_in_process_ms'] for r in pr)),
              mib(med(r['link'].get('down', 0) for r in pr))),
          '', 'Sorted runs (ms): lazy %s; peer total %s (download %s).' % (
              srt(r['spawn_first_output_ms'] for r in lz), srt(r['first_output_ms'] for r in pr),
              srt(r['download_ms'] for r in pr)), '']
g1 = l_fo / p_fo

def logged(pat, runs_):                    # a figure of each run's -v log, median
    v = [float(m.group(1)) for m in (re.search(pat, r.get('log', '')) for r in runs_) if m]
    return med(v) if v else None

RESUME, CHECKED = r'resuming \d+ vCPUs? at ([0-9.]+) ms', r'snapshot RAM checked at ([0-9.]+) ms'
l_res, p_res, p_chk = logged(RESUME, lz), logged(RESUME, pr), logged(CHECKED, pr)
if l_res and p_res and p_chk:
    lines += ['Where the time goes (medians; each process\'s `-v` log, from its start): lazyblk '
              'resumed the vCPU at %s (before that: the tag resolved, the document, the layouts, '
              'the vm.state and page map chunks fetched through the link), then the guest\'s '
              'faults brought in %.1f MiB of RAM, a chunk at a time, before its first output at '
              '%s. The peer\'s restore resumed at %s and let the output go at %s, once the check '
              'of its RAM file\'s digest was done; its download ran at %.0f Mbit/s: linkem, nginx, '
              'curl, zstd and tar share the one vCPU, and 1 Gbit/s is not reached here.' % (
                  fmt(l_res), mib(med(r['lazy_ram']['bytes_at_first_output'] for r in lz)),
                  fmt(med(r['first_output_in_process_ms'] for r in lz)), fmt(p_res), fmt(p_chk),
                  med(rate(r) for r in pr)), '']

# 4
rec, pf, wm = res['record'], res['prefetch'], res['warm']
touched = res['touched_bytes']
pf_b = med(r['lazy_ram']['bytes_at_first_output'] for r in pf)
pf_w = med(r['work_done_ms'] for r in pf)
wm_w = med(r['work_done_ms'] for r in wm)
g2, g3 = pf_b / touched, pf_w / wm_w
lines += ['### A recorded working set', '',
          'The touched RAM: what the recording restore (by tag, empty store, `--trace-record`, '
          '"work" at its first output) loaded in all, %.1f MiB (lazy_ram bytes_frame: the '
          'compressed chunks, %d of them, %d pages filled).' % (
              mib(touched), rec['lazy_ram']['chunks_fetched'], rec['lazy_ram']['pages_filled']),
          '',
          '| | spawn -> first output | RAM loaded by the first output | work -> done | RAM loaded '
          'in all (of it fetched by the prefetch) | bytes over the link (down) |',
          '|---|---:|---:|---:|---:|---:|',
          '| recording: by tag, empty store, `--trace-record` (one run) | %s | %.1f MiB | %s | '
          '%.1f MiB | %.1f MiB |' % (
              fmt(rec['spawn_first_output_ms']), mib(rec['lazy_ram']['bytes_at_first_output']),
              fmt(rec['work_done_ms']), mib(touched), mib(rec['link'].get('down', 0))),
          '| by tag, empty store, `--prefetch TRACE` | %s | %.1f MiB (**%.1f %%** of the touched) '
          '| **%s** | %.1f MiB (%.1f MiB) | %.1f MiB |' % (
              fmt(med(r['spawn_first_output_ms'] for r in pf)), mib(pf_b), 100 * g2, fmt(pf_w),
              mib(med(r['lazy_ram']['bytes_frame'] for r in pf)),
              mib(med(r['lazy_ram']['prefetch_bytes'] for r in pf)),
              mib(med(r['link'].get('down', 0) for r in pf))),
          '| warm local store (`run --restore S1 --store A`) | %s | — | **%s** | %.1f MiB (from '
          'the local store) | — |' % (fmt(med(r['spawn_first_output_ms'] for r in wm)), fmt(wm_w),
                                      mib(med(r['lazy_ram']['bytes_frame'] for r in wm))),
          '', 'Sorted runs (ms): prefetch work -> done %s, first output %s; warm work -> done %s.' % (
              srt(r['work_done_ms'] for r in pf), srt(r['spawn_first_output_ms'] for r in pf),
              srt(r['work_done_ms'] for r in wm)), '']
pf_ch = med(r['lazy_ram']['chunks_fetched'] for r in pf)
rec_ch = rec['lazy_ram']['chunks_fetched']
lines += ['The replays loaded %d chunks (median) for the %d the recording touched, while the '
          'link carried about what it carried for the recording (%.1f MiB, %.1f MiB): the '
          'chunks came once from the registry but were loaded (decompressed, verified) twice, '
          'by the prefetch and by the guest\'s fault on a page of the chunk the prefetch was '
          'still fetching: the prefetch, one chunk at a time, did not get ahead of the guest\'s '
          'sequential read. work -> done with the replay was %.2f× '
          'the recording\'s, which had no prefetch. In this nested VM the prefetch thread, the '
          'registry and the link emulator share the one vCPU with the guest.' % (
              pf_ch, rec_ch, mib(med(r['link'].get('down', 0) for r in pf)),
              mib(rec['link'].get('down', 0)), pf_w / rec['work_done_ms']), '']

# 5
c1, cn = res['clone1'], res['clonesN']
g4 = cn['host_bytes'] / c1['host_bytes']
lines += ['### Clones on one host', '',
          '| | host memory (MemTotal − MemAvailable, minus before) | Σ (Pss − Pss_Shmem) + '
          'the shared cache file |',
          '|---|---:|---:|',
          '| one clone | %.1f MiB | %.1f MiB + %.1f MiB |' % (
              mib(c1['host_bytes']), mib(c1['pss_private_bytes']), mib(c1['shm_cache_bytes'])),
          '| %d clones at once | %.1f MiB | %.1f MiB + %.1f MiB |' % (
              n, mib(cn['host_bytes']), mib(cn['pss_private_bytes']), mib(cn['shm_cache_bytes'])),
          '| ratio | **%.2f×** | %.2f× |' % (g4, cn['pss_bytes'] / c1['pss_bytes']), '',
          'Per clone beyond the first: %.1f MiB of host memory. The shared cache file '
          '(/dev/shm/lazyblk-UID/ID.ram: the pages brought in, none of the clones\' writes) is '
          'there once in both cases (%.1f MiB, %.1f MiB); what grows is each clone\'s own '
          'memory, %.1f MiB of Pss outside it per clone (the VMM process: its page map, '
          'buffers and threads; and the pages its guest wrote, private copies). The goal '
          'would allow %.1f MiB per clone beyond the first.' % (
              mib((cn['host_bytes'] - c1['host_bytes']) / max(n - 1, 1)),
              mib(c1['shm_cache_bytes']), mib(cn['shm_cache_bytes']),
              mib(cn['pss_private_bytes'] / n),
              mib(0.5 * c1['host_bytes'] / max(n - 1, 1))), '']

# 6
g5 = s2['pages_stored'] / res['pages_changed'] if res['pages_changed'] else float('inf')
lines += ['### A second snapshot', '',
          '%.1f s after the first (the VM ticking meanwhile): %d pages stored, %d kept; %d '
          'pages changed (their bytes differ between the two directory snapshots taken in the '
          'same pauses); %s paused for it.' % (
              s2['after_first_s'], s2['pages_stored'], s2['pages_kept'], res['pages_changed'],
              fmt(s2['store_snapshot_ms'])), '']

lines += ['### Goals', '',
          '- time to the first output, lazy by tag vs download then restore: %.3f× (goal ≤ 0.2×): '
          '%s.' % (g1, verdict(g1, 0.2)),
          '- RAM fetched before the first output with the working set replayed: %.1f %% of the '
          'touched RAM (goal ≤ 15 %%): %s.' % (100 * g2, verdict(g2, 0.15)),
          '- work -> done with the working set replayed vs a warm local store: %.2f× (goal ≤ '
          '1.3×): %s.' % (g3, verdict(g3, 1.3)),
          '- host memory of %d clones vs one: %.2f× (goal ≤ 1.5×): %s.' % (n, g4, verdict(g4, 1.5)),
          '- pages a second snapshot stored vs the pages that changed: %.2f× (goal ≤ 1.2×): %s.'
          % (g5, verdict(g5, 1.2)), '',
          'Commands: boot `lazyblk run IMG.layout --store A --overlay OV --kernel K --mem %d '
          '--append "console=ttyS0 reboot=k panic=-1" --control SOCK -- /bin/travel %d`; on '
          'SOCK `pause`, `snapshot OLD`, `snapshot S --store A`, `resume`; `lazyblk push --remote '
          'oci://REG/bench/travel:v1 S1 --store A`; lazy `lazyblk -v run --restore '
          'oci://LINK/bench/travel:v1 --store EMPTY --overlay NEW --control C [--trace-record T '
          '| --prefetch T]`; warm `lazyblk -v run --restore S1 --store A --overlay NEW`; peer '
          '`curl -sSf http://LINK/old1.tar.zst | zstd -dc | tar -x` then `lazyblk -v run '
          'IMG.layout --store IMGSTORE --restore OLD1 --overlay NEW` (the base image given to the '
          'peer beforehand). Times are taken by the harness: spawn (or the download\'s start) -> '
          'the first byte on the VM\'s stdout; "work" written at that first byte -> the "done" '
          'line. bench/vm_travel.sh\'s header has the details.' % (res['mem_mib'], res['fill_mib'])]
open(mdpath, 'w').write('\n'.join(lines) + '\n')
print('\n'.join(lines))
PY
}

OUT=$ROOT/build/bench
JSON=$OUT/vm_travel.json
MD=$ROOT/docs/benchmarks.md
# --report: the section again from the recorded run in build/bench/vm_travel.json
if [ "${1:-}" = --report ]; then
  [ -f "$JSON" ] || die "no $JSON: run the benchmark first"
  S=$(mktemp)
  report "$JSON" "$JSON" "$S" - - - - 0
  python3 "$ROOT/bench/lib/mdsection.py" "$MD" vm_travel <"$S"
  rm -f "$S"
  exit 0
fi

# Inside the nested VM (lib/nested.sh ran this script again there): measure, print.
if [ -n "${LAZYBLK_NESTED:-}" ]; then
  S=$(mktemp -d /tmp/vm_travel.XXXXXX)
  rc=0
  measure "$LAZYBLK_BENCH_WORK" "$S" "$LAZYBLK_BENCH_KERNEL" "$LAZYBLK_BENCH_RUNS" \
    "$LAZYBLK_BENCH_CLONES" "$LAZYBLK_BENCH_MEM" "$LAZYBLK_BENCH_FILL" "$LAZYBLK_BENCH_GAP" || rc=$?
  rm -rf "$S"
  exit "$rc"
fi

[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
LAZYBLK=$(realpath "$LAZYBLK")
[ -x "$LINKEM" ] || die "LINKEM=$LINKEM is not an executable (make builds build/tools/linkem)"
LINKEM=$(realpath "$LINKEM")
for v in RUNS CLONES MEM FILL GAP; do
  [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer"
done
[ "$FILL" -lt "$MEM" ] || die "TRAVEL_FILL ($FILL MiB) must be below TRAVEL_MEM ($MEM MiB)"
for t in python3 cpio curl zstd tar nginx docker-registry qemu-system-x86_64; do
  command -v "$t" >/dev/null || die "$t not found (scripts/deps.sh)"
done
BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ] || readelf -l "$BUSYBOX" 2>/dev/null | grep -q INTERP; then
  die "$BUSYBOX is not a static busybox (apt-get install busybox-static)"
fi
. "$ROOT/scripts/lib/kernel.sh"
KC=$(kernel_cache) || die "no kernel cache directory"
# the generic kernel, as t_vm_travel's guest (its vmgenid driver); the nested VM boots the
# cloud one (lib/nested.sh fetches it)
KERNEL=$(fetch_kernel "$KC" amd64) || die "cannot fetch linux-image-amd64 (no network or apt?)"

GIT_REV=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo "no commit")
HOST_KVM=$( { [ -r /dev/kvm ] && [ -w /dev/kvm ]; } || { echo none; exit; }
  grep -qwE 'vmx|svm' /proc/cpuinfo && echo "hardware (vmx/svm)" || echo "software (no vmx/svm)")
LOAD0=$(cut -d' ' -f1 /proc/loadavg)
mkdir -p "$OUT"
# outside /tmp: the nested VM sees this machine's / but a /tmp of its own
WORK=$(mktemp -d "$OUT/vm_travel-work.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# the image: busybox and the guest's program
R=$WORK/root
mkdir -p "$R/bin" "$R/data" "$R/mnt/ram"
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
cat >"$R/bin/travel" <<'GUEST'
#!/bin/sh
# bench/vm_travel's guest: FILL ($1) MiB of random data in a tmpfs, 1 MiB on the disk, then a
# ticker in the background (a tick every 10 ms, builtins only: read -t on a FIFO nobody
# writes) while this shell reads console lines, blocking (busybox's `read -t` reads a byte at
# a time against one deadline: at TCG speed a line it times out in is lost): "work" stops the
# ticker and reads the data back (md5sum), "tick" starts it again, "end" exits 7
dmesg -n 1 2>/dev/null
mount -t tmpfs -o size=90% tmpfs /mnt/ram || exit 3
dd if=/dev/urandom of=/mnt/ram/data bs=1M count="$1" 2>/dev/null || exit 4
dd if=/dev/urandom of=/data/blob bs=64k count=16 2>/dev/null && sync || exit 5
echo "ready $(md5sum </mnt/ram/data | cut -d' ' -f1)"
mkfifo /mnt/ram/nap || exit 6
ticker() {
  exec 3<>/mnt/ram/nap
  i=0
  while :; do
    i=$((i + 1))
    echo "tick $i"
    read -t 0.01 x <&3
  done
}
ticker &
t=$!
while read -r line; do
  case $line in
  work) kill "$t"; echo "done $(md5sum </mnt/ram/data | cut -d' ' -f1)" ;;
  tick) ticker & t=$! ;;
  end) kill "$t" 2>/dev/null; exit 7 ;;
  esac
done
exit 8
GUEST
chmod 755 "$R/bin/travel"
"$LAZYBLK" import "$R" --store "$WORK/img.store" -o "$WORK/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$WORK/img.manifest" -o "$WORK/img.layout" --size 256M >/dev/null

if grep -qwE 'vmx|svm' /proc/cpuinfo && [ -r /dev/kvm ] && [ -w /dev/kvm ] &&
   [ "${LAZYBLK_TEST_KVM:-}" != nested ]; then
  WHERE=direct
  echo "bench/vm_travel: measuring here (KVM: $HOST_KVM)" >&2
  mkdir "$WORK/scratch"
  measure "$WORK" "$WORK/scratch" "$KERNEL" "$RUNS" "$CLONES" "$MEM" "$FILL" "$GAP" \
    >"$WORK/result.out"
else
  WHERE=nested
  echo "bench/vm_travel: no KVM here that runs Linux (KVM: $HOST_KVM): measuring in the nested VM of tests/integration/lib/nested.sh" >&2
  # lib/nested.sh passes on the LAZYBLK* variables and LINKEM (and runs $0 again there)
  export LAZYBLK LINKEM LAZYBLK_BENCH_WORK=$WORK LAZYBLK_BENCH_KERNEL=$KERNEL
  export LAZYBLK_BENCH_RUNS=$RUNS LAZYBLK_BENCH_CLONES=$CLONES LAZYBLK_BENCH_MEM=$MEM
  export LAZYBLK_BENCH_FILL=$FILL LAZYBLK_BENCH_GAP=$GAP
  export NESTED_TIMEOUT=${NESTED_TIMEOUT:-14400}
  rc=0
  (
    # the tests' helpers nested.sh needs (T, die, skip, wait_for_state); its VM, its trap
    . "$ROOT/tests/integration/lib/common.sh"
    . "$ROOT/tests/integration/lib/nested.sh"
    nested_run "$SELF"
  ) >"$WORK/result.out" || rc=$?
  grep -v '^VM_TRAVEL-RESULT ' "$WORK/result.out" >&2 || true
  [ "$rc" -eq 0 ] || die "the nested run failed (exit $rc)"
fi
grep -q '^VM_TRAVEL-RESULT ' "$WORK/result.out" || die "no result from the measuring part"


report "$WORK/result.out" "$JSON" "$WORK/section.md" "$WHERE" "$HOST_KVM" "$GIT_REV" \
  "$(basename "$KERNEL")" "$LOAD0"
python3 "$ROOT/bench/lib/mdsection.py" "$MD" vm_travel <"$WORK/section.md"
echo "bench/vm_travel: results in $JSON and $MD"
