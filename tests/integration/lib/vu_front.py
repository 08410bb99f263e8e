#!/usr/bin/env python3
# A hostile vhost-user front-end (master) for t_vhost_user_hostile.sh. Usage: vu_front.py MODE SOCK
#   unsealed  guest memory in a memfd not sealed against shrinking: SET_MEM_TABLE must be refused
#             (REPLY_ACK 1); the front-end then truncates the memfd to 0 and starts queue 0
#             anyway (a server that had mapped it would SIGBUS on the ring), and the server must
#             still answer on this connection.
#   sealed    the memory sealed (F_SEAL_SHRINK | F_SEAL_GROW, as QEMU's memory-backend-memfd):
#             accepted; ftruncate to a smaller size fails with EPERM; a GET_ID request on queue 0
#             completes with the server's serial.
#   noread    GET_FEATURES sent over and over, the replies never read, until the socket's buffers
#             are full; prints "full" and then waits (holding the connection) until killed.
# Exit status 0 when the server behaved, 1 (with a line on stderr) when not.
import errno, fcntl, mmap, os, select, socket, struct, sys, time

GET_FEATURES, SET_FEATURES, SET_OWNER, SET_MEM_TABLE = 1, 2, 3, 5
SET_VRING_NUM, SET_VRING_ADDR, SET_VRING_BASE = 8, 9, 10
SET_VRING_KICK, SET_VRING_CALL = 12, 13
GET_PROTOCOL_FEATURES, SET_PROTOCOL_FEATURES, GET_QUEUE_NUM, SET_VRING_ENABLE = 15, 16, 17, 18
VERSION, REPLY, NEED_REPLY = 1, 4, 8
F_VERSION_1, F_PROTOCOL_FEATURES, PF_REPLY_ACK = 1 << 32, 1 << 30, 1 << 3
MEM = 1 << 20                    # guest memory: one region at guest-physical 0
UVA = 0x7f0000000000             # where this "front-end" says it mapped it
QSIZE = 16
DESC, AVAIL, USED, HDR, DATA, STATUS = 0x0, 0x1000, 0x2000, 0x3000, 0x3100, 0x3200
VIRTIO_BLK_T_GET_ID = 8


def fail(msg):
    print("vu_front: " + msg, file=sys.stderr)
    sys.exit(1)


class Front:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.s.settimeout(60)  # a generous bound on an answer, not a timing check

    def send(self, req, payload=b"", fds=(), flags=0):
        msg = struct.pack("<III", req, VERSION | flags, len(payload)) + payload
        try:
            socket.send_fds(self.s, [msg], list(fds)) if fds else self.s.sendall(msg)
        except OSError as e:
            fail("request %d: the server hung up (%s)" % (req, e))

    def recv(self, req):
        h = self.s.recv(12, socket.MSG_WAITALL)
        if len(h) < 12:
            fail("request %d: the server hung up (crashed?) instead of replying" % req)
        r, flags, size = struct.unpack("<III", h)
        if r != req or flags != VERSION | REPLY:
            fail("request %d: bad reply header %r" % (req, h))
        return self.s.recv(size, socket.MSG_WAITALL) if size else b""

    def get_u64(self, req):
        self.send(req)
        return struct.unpack("<Q", self.recv(req))[0]

    def ack(self, req, payload=b"", fds=()):
        self.send(req, payload, fds, NEED_REPLY)
        return struct.unpack("<Q", self.recv(req))[0]

    def negotiate(self):
        if not self.get_u64(GET_FEATURES) & F_VERSION_1:
            fail("no VIRTIO_F_VERSION_1")
        if not self.get_u64(GET_PROTOCOL_FEATURES) & PF_REPLY_ACK:
            fail("no REPLY_ACK")
        self.send(SET_PROTOCOL_FEATURES, struct.pack("<Q", PF_REPLY_ACK))
        if self.ack(SET_OWNER) or self.ack(SET_FEATURES, struct.pack("<Q", F_VERSION_1 | F_PROTOCOL_FEATURES)):
            fail("negotiation refused")

    def set_mem(self, memfd):
        table = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, MEM, UVA, 0)
        return self.ack(SET_MEM_TABLE, table, [memfd])

    def start_queue(self, kick, call):
        rc = [self.ack(SET_VRING_NUM, struct.pack("<II", 0, QSIZE)),
              self.ack(SET_VRING_BASE, struct.pack("<II", 0, 0)),
              self.ack(SET_VRING_ADDR, struct.pack("<IIQQQQ", 0, 0, UVA + DESC, UVA + USED, UVA + AVAIL, 0)),
              self.ack(SET_VRING_CALL, struct.pack("<Q", 0), [call]),
              self.ack(SET_VRING_KICK, struct.pack("<Q", 0), [kick]),
              self.ack(SET_VRING_ENABLE, struct.pack("<II", 0, 1))]
        return rc


def memfd(sealed):
    fd = os.memfd_create("guest", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, MEM)
    if sealed:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd


def get_id_request(mem):
    """A GET_ID chain (header, 20 bytes to fill, status) at descriptor 0, made available."""
    struct.pack_into("<IIQ", mem, HDR, VIRTIO_BLK_T_GET_ID, 0, 0)
    mem[STATUS] = 0xee
    for i, (addr, n, fl) in enumerate([(HDR, 16, 1), (DATA, 20, 1 | 2), (STATUS, 1, 2)]):
        struct.pack_into("<QIHH", mem, DESC + 16 * i, addr, n, fl, i + 1)
    struct.pack_into("<HHH", mem, AVAIL, 0, 1, 0)    # flags, idx 1, ring[0] = head 0


def mode_unsealed(path):
    f, fd = Front(path), memfd(False)
    f.negotiate()
    rc = f.set_mem(fd)
    os.ftruncate(fd, 0)                  # the hostile part: shrink what the server may have mapped
    kick, call = os.eventfd(0, os.EFD_CLOEXEC), os.eventfd(0, os.EFD_CLOEXEC)
    f.start_queue(kick, call)            # a server with the memory mapped reads the ring now
    os.eventfd_write(kick, 1)
    time.sleep(0.2)
    if f.get_u64(GET_QUEUE_NUM) < 1:
        fail("GET_QUEUE_NUM: no queues")
    if rc != 1:
        fail("SET_MEM_TABLE of an unsealed memfd: REPLY_ACK %d, want 1 (refused)" % rc)


def mode_sealed(path):
    f, fd = Front(path), memfd(True)
    mem = mmap.mmap(fd, MEM)
    f.negotiate()
    if f.set_mem(fd):
        fail("SET_MEM_TABLE of a sealed memfd refused")
    try:
        os.ftruncate(fd, MEM // 2)
        fail("ftruncate of the sealed memfd succeeded")
    except PermissionError:
        pass
    get_id_request(mem)
    kick, call = os.eventfd(0, os.EFD_CLOEXEC), os.eventfd(0, os.EFD_CLOEXEC)
    if any(f.start_queue(kick, call)):
        fail("queue 0 refused")
    os.eventfd_write(kick, 1)
    if not select.select([call], [], [], 120)[0]:
        fail("GET_ID: no completion within 120 s")
    if mem[STATUS] != 0 or struct.unpack_from("<H", mem, USED + 2)[0] != 1:
        fail("GET_ID: status %d" % mem[STATUS])
    print("serial " + bytes(mem[DATA:DATA + 20]).rstrip(b"\0").decode())


def mode_noread(path):
    f = Front(path)
    f.s.setblocking(False)
    msg = struct.pack("<III", GET_FEATURES, VERSION, 0)
    pending, full = b"", 0
    deadline = time.time() + 120
    while full < 20:                     # full, and still full a while later: the server is stuck
        if time.time() > deadline:
            fail("the socket never filled up")
        pending = pending or msg
        try:
            pending = pending[f.s.send(pending):]
            full = 0
        except BlockingIOError:
            full += 1
            time.sleep(0.05)
    print("full", flush=True)
    while True:
        time.sleep(1)


def mode_fullcall(path):
    """The call eventfd's counter one short of its maximum, then a request: a server whose
    write of the completion's notification blocks would hang its queue, and its stop."""
    f, fd = Front(path), memfd(True)
    mem = mmap.mmap(fd, MEM)
    f.negotiate()
    if f.set_mem(fd):
        fail("SET_MEM_TABLE of a sealed memfd refused")
    get_id_request(mem)
    kick, call = os.eventfd(0, os.EFD_CLOEXEC), os.eventfd(0, os.EFD_CLOEXEC)
    os.eventfd_write(call, 0xfffffffffffffffe)
    if any(f.start_queue(kick, call)):
        fail("queue 0 refused")
    os.eventfd_write(kick, 1)
    wait_used(mem, 1)
    print("completed", flush=True)
    # a second request: the queue thread gets to it only once it is past the first one's
    # notification (a thread blocked writing the full eventfd never completes it), so its
    # completion says "not blocked" without waiting for a moment
    mem[STATUS] = 0xee
    struct.pack_into("<HH", mem, AVAIL + 2, 2, 0)     # idx 2, ring[1] = head 0
    os.eventfd_write(kick, 1)
    wait_used(mem, 2)
    print("completed 2", flush=True)
    while True:
        time.sleep(1)


def wait_used(mem, n):
    """Until the used ring's index is n (a generous 120 s: a state, not a moment)."""
    deadline = time.time() + 120
    while struct.unpack_from("<H", mem, USED + 2)[0] != n:
        if time.time() > deadline:
            fail("GET_ID: request %d not completed within 120 s" % n)
        time.sleep(0.05)


{"unsealed": mode_unsealed, "sealed": mode_sealed, "noread": mode_noread,
 "fullcall": mode_fullcall}[sys.argv[1]](sys.argv[2])
