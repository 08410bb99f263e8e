"""QEMU's snapshot for the VM benchmarks (bench/vm_snapshot.sh, bench/vm_linux.sh): over
QMP, `stop` then `migrate` to "exec:cat > STATE", `query-migrate` polled every millisecond
until it ended. The VM is paused throughout, as for lazyblk's snapshot."""
import json
import shlex
import socket
import time


def migrate_to_file(sock_path, state, limit, fail, closed=lambda: '', connect_limit=None):
    """Migrate the QEMU listening for QMP on sock_path into the file state; returns
    (t0_ns, t1_ns, query-migrate's last answer): t0 just before `stop`, t1 once the
    migration completed. Anything else raises fail(message): QMP closed (closed() adds
    QEMU's last words), an error answer, a migration that failed or took over limit s.
    Each QMP read waits at most connect_limit s (default: limit)."""
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(connect_limit or limit)
    c.connect(sock_path)
    f = c.makefile('rwb')

    def qmp(cmd, **args):
        msg = {'execute': cmd}
        if args:
            msg['arguments'] = args
        f.write(json.dumps(msg).encode() + b'\n')
        f.flush()
        while True:                       # skip the events (STOP, MIGRATION, ...)
            line = f.readline()
            if not line:
                raise fail('QMP closed' + closed())
            r = json.loads(line)
            if 'error' in r:
                raise fail('QMP %s: %s' % (cmd, r['error'].get('desc')))
            if 'return' in r:
                return r['return']

    try:
        f.readline()                      # the greeting
        qmp('qmp_capabilities')
        t0 = time.monotonic_ns()
        qmp('stop')
        qmp('migrate', uri='exec:cat > ' + shlex.quote(state))
        while True:
            st = qmp('query-migrate')
            if st.get('status') in ('completed', 'failed', 'cancelled'):
                break
            if time.monotonic_ns() - t0 > limit * 1e9:
                raise fail('migrate: not completed after %d s' % limit)
            time.sleep(0.001)
        t1 = time.monotonic_ns()
        if st['status'] != 'completed':
            raise fail('migrate: %s %s' % (st['status'], st.get('error-desc', '')))
        return t0, t1, st
    finally:
        c.close()
