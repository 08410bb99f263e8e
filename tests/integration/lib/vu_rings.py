#!/usr/bin/env python3
"""A hostile vhost-user master: vu_rings.py SOCKET overlap|plain.

Shares 64 KiB of guest memory (a memfd) holding one FLUSH request, sets up queue 0 with 256
entries and kicks it. With `overlap` the available ring lies 2 bytes before the used ring
(used->flags is avail->idx, used->idx is avail->ring[0]): the device's own writes keep the
ring looking non-empty. Then GET_VRING_BASE, which stops the queue, and must be answered.
Prints "ok", or "no reply to GET_VRING_BASE" and exits 1 when the server does not answer
within 20 s (it stopped serving: the queue's drain never ended).
"""
import os
import socket
import struct
import sys

VERSION_1 = 1 << 32
UVA = 0x7F0000000000
MEM = 64 << 10
NUM = 256


def send(s, req, payload=b"", fds=None):
    msg = struct.pack("<III", req, 1, len(payload)) + payload
    if fds:
        socket.send_fds(s, [msg], fds)
    else:
        s.sendall(msg)


def recv_reply(s, req):
    hdr = b""
    while len(hdr) < 12:
        b = s.recv(12 - len(hdr))
        if not b:
            raise ConnectionError("server closed the connection")
        hdr += b
    r, _, size = struct.unpack("<III", hdr)
    body = b""
    while len(body) < size:
        b = s.recv(size - len(body))
        if not b:
            raise ConnectionError("server closed the connection")
        body += b
    assert r == req, (r, req)
    return body


def guest_memory(fd, avail, used):
    mem = bytearray(MEM)
    # desc 0: the request header (FLUSH), desc 1: its status byte
    struct.pack_into("<QIHH", mem, 0, 0x2000, 16, 1, 1)
    struct.pack_into("<QIHH", mem, 16, 0x2020, 1, 2, 0)
    struct.pack_into("<IIQ", mem, 0x2000, 4, 0, 0)
    if avail + 4 <= used:  # a plain ring: one request available
        struct.pack_into("<HHH", mem, avail, 0, 1, 0)
    os.pwrite(fd, bytes(mem), 0)


def main():
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "overlap":
        used = 0x1004
        avail = used - 2
    else:
        avail, used = 0x1000, 0x1400
    mem = os.memfd_create("guest")
    os.ftruncate(mem, MEM)
    guest_memory(mem, avail, used)
    call, kick = os.eventfd(0), os.eventfd(0)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(path)
    send(s, 1)
    recv_reply(s, 1)
    send(s, 2, struct.pack("<Q", VERSION_1))
    send(s, 3)
    send(s, 5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, MEM, UVA, 0), [mem])
    send(s, 8, struct.pack("<II", 0, NUM))
    send(s, 9, struct.pack("<IIQQQQ", 0, 0, UVA, UVA + used, UVA + avail, 0))
    send(s, 10, struct.pack("<II", 0, 0))
    send(s, 13, struct.pack("<Q", 0), [call])
    send(s, 12, struct.pack("<Q", 0), [kick])
    os.eventfd_write(kick, 1)
    send(s, 11, struct.pack("<II", 0, 0))
    try:
        recv_reply(s, 11)
    except socket.timeout:
        print("no reply to GET_VRING_BASE")
        sys.exit(1)
    status = os.pread(mem, 1, 0x2020)
    s.close()
    print("ok", status.hex())


main()
