#!/usr/bin/env python3
"""Loopback peers for t_linkem.sh and bench/linkem.sh (linkem: tests/tools/linkem.c).

  linkem_peers.py server PORTFILE
      echo server on 127.0.0.1 (a free port, written to PORTFILE): echoes every byte; on
      the client's end of stream it sends b"BYE\\n" and closes (so a half-close must be
      forwarded for the client to see BYE). One line per finished connection on stdout:
      "closed BYTES eof" or "closed BYTES reset".
  linkem_peers.py clients PORT N BYTES
      N concurrent connections, each sends BYTES seeded random bytes then shuts down its
      sending side, reads until the end and checks it got exactly its bytes + b"BYE\\n"
      (sha256). Prints "ok N BYTES"; exit 1 on any mismatch.
  linkem_peers.py reset PORT
      connect, send 100 kB, close with a reset (SO_LINGER 0).
  linkem_peers.py refused PORT
      connect, send a little; expect the end of stream or a reset, never data.
  linkem_peers.py rtt PORT COUNT SIZE
      (for bench/linkem.sh) on one connection to the echo server, COUNT times: send SIZE
      bytes, wait until they are back. Prints JSON: the round trips in ms, and the time
      from connect() to the first echo (the connection's first round trip, handshake
      included).
"""
import hashlib, os, random, socket, struct, sys, threading


def server(portfile):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % s.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    lock = threading.Lock()

    def handle(c):
        n, how = 0, "eof"
        try:
            while True:
                d = c.recv(1 << 16)
                if not d:
                    break
                n += len(d)
                c.sendall(d)
            c.sendall(b"BYE\n")
            c.shutdown(socket.SHUT_WR)
        except OSError:
            how = "reset"
        c.close()
        with lock:
            print("closed %d %s" % (n, how), flush=True)

    while True:
        c, _ = s.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()


def one_client(port, size, seed, errors):
    data = random.Random(seed).randbytes(size)
    s = socket.create_connection(("127.0.0.1", port))

    def send():
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=send)
    t.start()
    h, n = hashlib.sha256(), 0
    while True:
        d = s.recv(1 << 16)
        if not d:
            break
        h.update(d)
        n += len(d)
    t.join()
    s.close()
    if h.digest() != hashlib.sha256(data + b"BYE\n").digest():
        errors.append("connection %d: got %d bytes, want %d, or different bytes"
                      % (seed, n, size + 4))


def clients(port, n, size):
    errors = []
    ts = [threading.Thread(target=one_client, args=(port, size, i, errors)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        sys.exit("\n".join(errors))
    print("ok %d %d" % (n, size))


def reset(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(os.urandom(100000))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def refused(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(30)
    try:
        s.sendall(b"hello")
        d = s.recv(100)
    except ConnectionResetError:
        d = b""
    if d:
        sys.exit("refused: got data %r" % d)
    print("closed")


def recv_exactly(s, n):
    got = 0
    while got < n:
        d = s.recv(n - got)
        if not d:
            sys.exit("rtt: the connection ended")
        got += len(d)


def rtt(port, count, size):
    import json, time
    msg = b"x" * size
    t0 = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(msg)
    recv_exactly(s, size)
    first = (time.perf_counter() - t0) * 1e3
    ms = []
    for _ in range(count):
        t = time.perf_counter()
        s.sendall(msg)
        recv_exactly(s, size)
        ms.append((time.perf_counter() - t) * 1e3)
    s.close()
    print(json.dumps({"first_ms": first, "rtt_ms": ms}))


cmd = sys.argv[1]
if cmd == "server":
    server(sys.argv[2])
elif cmd == "clients":
    clients(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
elif cmd == "reset":
    reset(int(sys.argv[2]))
elif cmd == "refused":
    refused(int(sys.argv[2]))
elif cmd == "rtt":
    rtt(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
else:
    sys.exit("unknown command " + cmd)
