"""Hostile NBD clients for t_nbd_limits.sh (the server's deadlines, connection limit and
memory bound). Each command exits 0 and prints "CMD: ok ..." when the server behaved, or
fails with an assertion. No timing is asserted beyond "eventually, within a generous
timeout". Usage:
  nbdhostile.py silent SOCK N      N clients connect and never send; all are closed
  nbdhostile.py loris SOCK         a handshake sent one byte a second; it is cut
  nbdhostile.py idle SOCK          a client idle after the handshake; it is closed
  nbdhostile.py trickle SOCK       a write payload sent one byte a second; it is cut
  nbdhostile.py busy SOCK SECS     a read every 0.5 s for SECS; every one answered
  nbdhostile.py hold SOCK          silent, slow-loris, idle and stalled (reads it never
                                   takes the replies of) clients, held until the server goes
  nbdhostile.py refused SOCK       a connection past --max-connections: closed at once
  nbdhostile.py flood SOCK N       N connection attempts (connect/close, garbage, 4 GiB
                                   length fields); the server keeps answering
(SOCK: the server's unix socket)."""
import os, socket, struct, sys, threading, time

OPTS, REQ, SIMPLE = 0x49484156454F5054, 0x25609513, 0x67446698
EINVAL = 22
LONG = 60  # the generous timeout: the server must act well before it


def conn(path, timeout=LONG):
    """A connection (a blocking connect: it waits while the server's backlog is full)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.settimeout(timeout)
    return s


def recvn(s, n):
    b = b""
    while len(b) < n:
        d = s.recv(n - len(b))
        if not d:
            raise EOFError("server closed")
        b += d
    return b


def closed(s):
    """True once the server hangs up (what it still sends is skipped); False on timeout."""
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def go(s):
    h = recvn(s, 18)
    assert h[:16] == b"NBDMAGICIHAVEOPT", h
    s.sendall(struct.pack(">I", 3))
    s.sendall(struct.pack(">QII", OPTS, 7, 6) + struct.pack(">IH", 0, 0))
    while True:
        _, o, t, n = struct.unpack(">QIII", recvn(s, 20))
        recvn(s, n)
        assert o == 7 and t in (1, 3), (o, t)
        if t == 1:
            return


def req(s, typ, off, n, handle=1, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ, flags, typ, handle, off, n) + payload)


def simple(s, handle=1):
    magic, err, h = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == SIMPLE and h == handle, (hex(magic), h)
    return err


def silent(path, n):
    socks = [conn(path) for _ in range(n)]
    print("silent: %d connected" % n, flush=True)
    for s in socks:
        assert closed(s), "a silent client was never disconnected"
    print("silent: ok, all %d closed" % n)


def loris_byte(i):
    """Byte i of a handshake that never ends: the client flags, then an NBD_OPT_GO with
    64 KiB of data (the most the server takes) that comes one byte at a time."""
    head = struct.pack(">I", 3) + struct.pack(">QII", OPTS, 7, 65536)
    return head[i:i + 1] if i < len(head) else b"x"


def loris(path):
    s = conn(path)
    recvn(s, 18)
    print("loris: connected", flush=True)
    t0 = time.monotonic()
    s.settimeout(1)
    i = 0
    while time.monotonic() - t0 < LONG:
        try:
            if s.recv(65536) == b"":
                print("loris: ok, cut after %d bytes" % i)
                return
        except socket.timeout:
            pass
        except ConnectionResetError:
            print("loris: ok, cut after %d bytes" % i)
            return
        try:
            s.send(loris_byte(i))
        except (BrokenPipeError, ConnectionResetError):
            print("loris: ok, cut after %d bytes" % i)
            return
        i += 1
    raise AssertionError("a slow-loris handshake was never cut")


def trickle(path):
    """After the handshake: a 1 MiB write whose payload comes one byte a second."""
    s = conn(path)
    go(s)
    req(s, 1, 0, 1 << 20, handle=7)
    s.settimeout(1)
    t0, i = time.monotonic(), 0
    while time.monotonic() - t0 < LONG:
        try:
            if s.recv(65536) == b"":
                print("trickle: ok, cut after %d payload bytes" % i)
                return
        except socket.timeout:
            pass
        except ConnectionResetError:
            break
        try:
            s.send(b"t")
        except (BrokenPipeError, ConnectionResetError):
            break
        i += 1
    else:
        raise AssertionError("a trickled write payload was never cut")
    print("trickle: ok, cut after %d payload bytes" % i)


def idle(path):
    s = conn(path)
    go(s)
    print("idle: connected", flush=True)
    assert closed(s), "an idle client was never disconnected"
    print("idle: ok, disconnected")


def busy(path, secs):
    s = conn(path)
    go(s)
    end, h = time.monotonic() + secs, 0
    while time.monotonic() < end:
        h += 1
        req(s, 0, 0, 4096, handle=h)
        assert simple(s, h) == 0, "read failed"
        recvn(s, 4096)
        time.sleep(0.5)
    req(s, 2, 0, 0)
    print("busy: ok, %d reads answered" % h)


def hold(path):
    socks = []
    for _ in range(3):
        socks.append(conn(path))                 # silent
    s = conn(path); recvn(s, 18); s.send(b"\0\0"); socks.append(s)  # half a message
    s = conn(path); go(s); socks.append(s)       # idle
    s = conn(path, timeout=5); go(s)             # reads whose replies it never takes
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        for h in range(64):
            req(s, 0, 0, 1 << 20, handle=h)
    except (socket.timeout, BrokenPipeError, ConnectionResetError):
        pass
    socks.append(s)
    print("hold: connected", flush=True)
    time.sleep(3600)


def refused(path):
    s = conn(path)
    try:
        data = s.recv(18)
    except ConnectionResetError:
        data = b""
    assert data == b"", "a connection past the limit got a handshake: %r" % data
    print("refused: ok, closed at once")


def garbage(path, i):
    s = conn(path)  # LONG: a loaded machine may be slow to answer, never 60 s
    try:
        if i % 4 == 1:
            s.sendall(os.urandom(64))
        elif i % 4 == 2:
            go(s)
            req(s, 0, 0, 0xFFFFFFFF, handle=i)   # a 4 GiB read: refused
            assert simple(s, i) == EINVAL
        elif i % 4 == 3:
            go(s)
            req(s, 1, 0, 0xFFFFFFFF, handle=i)   # a 4 GiB write: refused, cut
            assert simple(s, i) == EINVAL
            assert closed(s)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        pass
    s.close()


def flood(path, n):
    errs = []

    def worker(first):
        try:
            for i in range(first, n, 8):
                garbage(path, i)
        except Exception as e:  # noqa: anything is a failure of the server
            errs.append(repr(e))
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs, errs[:3]
    print("flood: ok, %d connection attempts" % n)


cmd, path = sys.argv[1], sys.argv[2]
if cmd == "silent":
    silent(path, int(sys.argv[3]))
elif cmd == "loris":
    loris(path)
elif cmd == "idle":
    idle(path)
elif cmd == "trickle":
    trickle(path)
elif cmd == "busy":
    busy(path, float(sys.argv[3]))
elif cmd == "hold":
    hold(path)
elif cmd == "refused":
    refused(path)
elif cmd == "flood":
    flood(path, int(sys.argv[3]))
else:
    sys.exit("unknown command " + cmd)
