#!/usr/bin/env python3
"""Run one QEMU boot of a `lazyblk initramfs` guest and time it.

usage: qemu_boot.py [--log FILE] [--json FILE] [--timeout SECS] [--echo] -- QEMU ARGS...

Adds an isa-debugcon device on I/O port 0x440 (the boot-timer port lazyblk's /init writes:
1 on reaching user space, 2 when the command starts) whose chardev is a unix socket this
script listens on, so each byte is stamped with the milliseconds since QEMU was started.
The serial console (QEMU's stdout) goes to --log, stamped per line; with --echo the
guest's lines (ANSI escapes and kernel log lines removed) are also printed as they come.
--json gets {"qemu_rc", "wall_ms", "boot_timer": {"1": ms, "2": ms}, "exit_status",
"exit_ms", "cpu_ms"} where exit_status is the N of the console's last `lazyblk-exit: N` and
cpu_ms QEMU's user + system CPU time (getrusage of the reaped child).
Exit status: QEMU's (124 on timeout, after killing it).
"""
import json, os, re, resource, socket, subprocess, sys, tempfile, threading, time

ANSI = re.compile(r'\x1b(\[[0-9;?]*[A-Za-z]|c)')
KMSG = re.compile(r'^\[\s*\d+\.\d+\]')


def main():
    argv = sys.argv[1:]
    if '--' not in argv:
        sys.exit('usage: qemu_boot.py [--log F] [--json F] [--timeout S] [--echo] -- QEMU ARGS')
    i = argv.index('--')
    opts, qemu = argv[:i], argv[i + 1:]
    log_path = json_path = None
    timeout, echo = 600.0, False
    j = 0
    while j < len(opts):
        o = opts[j]
        if o == '--log': log_path = opts[j + 1]; j += 2
        elif o == '--json': json_path = opts[j + 1]; j += 2
        elif o == '--timeout': timeout = float(opts[j + 1]); j += 2
        elif o == '--echo': echo = True; j += 1
        else: sys.exit('qemu_boot.py: unknown option ' + o)

    tmp = tempfile.mkdtemp(prefix='lazyblk-boot.')
    sock_path = os.path.join(tmp, 'bt.sock')
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(1)
    timer = {}
    t0 = [0.0]

    def ms():
        return round((time.monotonic() - t0[0]) * 1000.0, 1)

    def debugcon():
        try:
            c, _ = srv.accept()
            while True:
                b = c.recv(64)
                if not b:
                    break
                now = ms()
                for v in b:
                    timer.setdefault(str(v), now)
        except OSError:
            pass

    th = threading.Thread(target=debugcon, daemon=True)
    th.start()
    cmd = qemu + ['-chardev', 'socket,id=lzbt,path=' + sock_path,
                  '-device', 'isa-debugcon,iobase=0x440,chardev=lzbt']
    log = open(log_path, 'w') if log_path else None
    t0[0] = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    killer = threading.Timer(timeout, p.kill)
    killer.start()
    exit_status = exit_ms = None
    for raw in p.stdout:
        line = raw.decode('utf-8', 'replace').rstrip('\r\n')
        now = ms()
        clean = ANSI.sub('', line).replace('\r', '')
        if log:
            log.write('%9.1f %s\n' % (now, clean))
            log.flush()
        m = re.match(r'^lazyblk-exit: (\d+)$', clean)
        if m:
            exit_status, exit_ms = int(m.group(1)), now
        if echo and clean and not KMSG.match(clean) and not clean.startswith(
                ('SeaBIOS', 'Booting from ROM', 'lazyblk-exit:')):
            print(clean, flush=True)
    rc = p.wait()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_ms = round((ru.ru_utime + ru.ru_stime) * 1000.0, 1)
    timed_out = not killer.is_alive() and rc != 0
    killer.cancel()
    wall = ms()
    srv.close()
    try:
        os.unlink(sock_path)
        os.rmdir(tmp)
    except OSError:
        pass
    if timed_out:
        rc = 124
    res = {'qemu_rc': rc, 'wall_ms': wall, 'boot_timer': timer,
           'exit_status': exit_status, 'exit_ms': exit_ms, 'cpu_ms': cpu_ms}
    if json_path:
        with open(json_path, 'w') as f:
            json.dump(res, f, indent=1)
    sys.exit(rc)


main()
