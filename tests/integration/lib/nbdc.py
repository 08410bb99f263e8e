"""A raw-protocol NBD client for the integration tests (t_nbd.sh, t_serve_raw.sh): read-only
refusals, hostile input, an idle client, a disk that fills up (t_overlay_full.sh). Usage:
nbdc.py ro-write SOCK | hostile SOCK SIZE | idle SOCK | fill SOCK OFF MAX
(SOCK: the server's unix socket). Prints "CMD: ok", or fails with an assertion."""
import os, random, socket, struct, sys, time

OPTS, REQ, SIMPLE = 0x49484156454F5054, 0x25609513, 0x67446698
EPERM, EINVAL, ENOSPC = 1, 22, 28

def conn(path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(path)
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
    """True once the server hangs up (anything it still sends is skipped)."""
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True

def hello(s, flags=3):
    h = recvn(s, 18)
    assert h[:16] == b"NBDMAGICIHAVEOPT", h
    s.sendall(struct.pack(">I", flags))

def opt(s, o, data=b""):
    s.sendall(struct.pack(">QII", OPTS, o, len(data)) + data)

def rep(s):
    _, o, t, n = struct.unpack(">QIII", recvn(s, 20))
    return o, t, recvn(s, n)

def go(s):
    hello(s)
    opt(s, 7, struct.pack(">IH", 0, 0))
    while True:
        o, t, d = rep(s)
        assert o == 7 and t in (1, 3), (o, t)
        if t == 1:
            return

def req(s, typ, off, n, handle=1, flags=0, payload=b""):
    s.sendall(struct.pack(">IHHQQI", REQ, flags, typ, handle, off, n) + payload)

def simple(s, handle=1):
    magic, err, h = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == SIMPLE and h == handle, (hex(magic), h)
    return err

def ro_write(path):
    s = conn(path)
    go(s)
    req(s, 1, 0, 4096, payload=b"\xff" * 4096)
    assert simple(s) == EPERM
    req(s, 4, 0, 4096)
    assert simple(s) == EPERM
    req(s, 6, 0, 4096)
    assert simple(s) == EPERM
    req(s, 3, 0, 0)
    assert simple(s) == 0
    req(s, 2, 0, 0)
    assert closed(s)

def hostile(path, size):
    rnd = random.Random(1)
    # garbage instead of client flags, options or requests
    s = conn(path)
    s.sendall(os.urandom(4096))
    assert closed(s)
    for i in range(40):
        s = conn(path)
        hello(s)
        try:
            s.sendall(struct.pack(">Q", OPTS) + os.urandom(rnd.randint(1, 3000)))
            s.shutdown(socket.SHUT_WR)
            closed(s)
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.close()
    # huge and malformed options get errors, then a disconnect for the huge one
    s = conn(path)
    hello(s)
    opt(s, 6, b"\x00\x00\x10\x00")                     # INFO: name longer than the data
    assert rep(s)[1] == 0x80000003
    opt(s, 0x7777, b"x")                               # unknown option
    assert rep(s)[1] == 0x80000001
    s.sendall(struct.pack(">QII", OPTS, 7, 0xFFFFFFF0))  # 4 GiB of option data
    assert closed(s)
    # bad requests get errors and the stream stays in step
    s = conn(path)
    go(s)
    req(s, 0, 1, 512); assert simple(s) == EINVAL                # misaligned
    req(s, 0, size, 512); assert simple(s) == EINVAL             # past the end
    req(s, 0, 2**64 - 512, 1024); assert simple(s) == EINVAL     # wraps around
    req(s, 0, 0, 64 << 20); assert simple(s) == EINVAL           # over 32 MiB
    req(s, 99, 0, 4096); assert simple(s) == EINVAL              # unknown command
    req(s, 0, 0, 4096, flags=0x100); assert simple(s) == EINVAL  # unknown flag
    req(s, 1, 0, 1000, payload=b"x" * 1000); assert simple(s) == EINVAL
    req(s, 7, 0, 4096); assert simple(s) == EINVAL               # no context selected
    req(s, 0, 0, 4096, handle=9)
    assert simple(s, 9) == 0 and len(recvn(s, 4096)) == 4096
    req(s, 1, 0, 64 << 20)                                       # a 64 MiB write
    assert simple(s) == EINVAL and closed(s)
    # a bad request magic, a truncated header, a truncated payload
    s = conn(path); go(s); s.sendall(b"\0" * 28); assert closed(s)
    s = conn(path); go(s); s.sendall(struct.pack(">IHH", REQ, 0, 0)); s.close()
    s = conn(path); go(s); req(s, 1, 0, 1 << 20, payload=b"y" * 1000); s.close()
    # a client vanishing with reads in flight
    s = conn(path)
    go(s)
    for i in range(32):
        req(s, 0, 0, 1 << 20, handle=i)
    s.close()

def idle(path):
    s = conn(path)
    go(s)
    print("idle: connected", flush=True)
    s.settimeout(60)
    assert closed(s)

def fill(path, off, most):
    """256 KiB writes from off on until one fails: it must fail with ENOSPC, its payload
    taken and the connection kept (a read and a later write on it are answered, the write
    with ENOSPC again). Prints the writes that failed."""
    s = conn(path)
    go(s)
    n, err, data = 0, 0, os.urandom(256 << 10)
    while n < most:
        req(s, 1, off + n * len(data), len(data), handle=n, payload=data)
        err = simple(s, n)
        if err:
            break
        n += 1
    assert err == ENOSPC, (n, err)
    req(s, 0, off, 4096, handle=1 << 40)
    assert simple(s, 1 << 40) == 0 and len(recvn(s, 4096)) == 4096
    req(s, 1, off + (n + 1) * len(data), len(data), handle=1 << 41, payload=data)
    assert simple(s, 1 << 41) == ENOSPC
    req(s, 2, 0, 0)
    assert closed(s)
    print("fill: %d writes took, then 2 failed with ENOSPC" % n)

cmd = sys.argv[1]
if cmd == "ro-write":
    ro_write(sys.argv[2])
elif cmd == "hostile":
    hostile(sys.argv[2], int(sys.argv[3]))
elif cmd == "idle":
    idle(sys.argv[2])
elif cmd == "fill":
    fill(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
print(cmd + ": ok")
