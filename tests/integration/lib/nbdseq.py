#!/usr/bin/env python3
# A small NBD client (fixed newstyle, OPT_GO, simple replies) that stamps sequence
# numbers into 4 KiB blocks, for the live-snapshot test.
#
#   nbdseq.py live SOCK FIRST N SNAPS OUTDIR LAZYBLK CONTROL
#       write blocks FIRST..FIRST+N-1 once each (seq 1..N), then random blocks of that
#       range without pause, one request at a time; meanwhile ask SNAPS snapshots with
#       `LAZYBLK snapshot --server CONTROL -o OUTDIR/snapI.delta`. Writes OUTDIR/writes
#       (the block of every seq, u32 each; seq = index + 1) and OUTDIR/cuts (per snapshot
#       "I S0 S1": every write <= S0 completed before the request, every write >= S1
#       started after the reply).
#   nbdseq.py check RAW FIRST N WRITES S0 S1
#       RAW (the disk from a delta applied to the base) must be one cut S in [S0, S1):
#       every block holds the last write to it with seq <= S, whole.
#   nbdseq.py burst SOCK BLOCK:COUNT...   write stamped whole blocks and flush
import os, random, socket, struct, subprocess, sys, threading

BLOCK = 4096
IHAVEOPT, OPT_REPLY = 0x49484156454F5054, 0x3E889045565A9
REQ_MAGIC, SIMPLE_MAGIC = 0x25609513, 0x67446698
CMD_WRITE, CMD_DISC, CMD_FLUSH = 1, 2, 3
STAMP = 0x51455359424B5A4C  # "LZKBYSEQ"


def stamp(seq, block):
    return struct.pack("<QQQQ", STAMP, seq, block, ~seq & (2**64 - 1)) * (BLOCK // 32)


class NBD:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        magic, opt, flags = struct.unpack(">8sQH", self.recv(18))
        if magic != b"NBDMAGIC" or opt != IHAVEOPT or not flags & 1:
            raise SystemExit("nbdseq: not a fixed-newstyle NBD server")
        self.s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
        self.s.sendall(struct.pack(">QII", IHAVEOPT, 7, 6) + struct.pack(">IH", 0, 0))
        while True:
            magic, opt, rtype, ln = struct.unpack(">QIII", self.recv(20))
            data = self.recv(ln)
            if magic != OPT_REPLY or rtype & 0x80000000:
                raise SystemExit("nbdseq: OPT_GO refused (%#x)" % rtype)
            if rtype == 3 and struct.unpack(">H", data[:2])[0] == 0:
                self.size = struct.unpack(">Q", data[2:10])[0]
            if rtype == 1:
                break
        self.handle = 0

    def recv(self, n):
        buf = b""
        while len(buf) < n:
            got = self.s.recv(n - len(buf))
            if not got:
                raise SystemExit("nbdseq: server closed the connection")
            buf += got
        return buf

    def cmd(self, typ, off, length, data=b""):
        self.handle += 1
        self.s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, typ, self.handle, off, length)
                       + data)
        magic, err, h = struct.unpack(">IIQ", self.recv(16))
        if magic != SIMPLE_MAGIC or h != self.handle or err:
            raise SystemExit("nbdseq: command %d at %d: error %d" % (typ, off, err))

    def write(self, off, data):
        self.cmd(CMD_WRITE, off, len(data), data)

    def flush(self):
        self.cmd(CMD_FLUSH, 0, 0)

    def close(self):
        self.s.sendall(struct.pack(">IHHQQI", REQ_MAGIC, 0, CMD_DISC, 0, 0, 0))
        self.s.close()


class Writer(threading.Thread):
    def __init__(self, nbd, first, n):
        super().__init__(daemon=True)
        self.nbd, self.first, self.n = nbd, first, n
        self.log = []        # block of seq i + 1
        self.started = 0     # highest seq sent
        self.done = 0        # highest seq answered
        self.stop = False
        self.error = None

    def one(self, block):
        seq = len(self.log) + 1
        self.started = seq
        self.nbd.write(block * BLOCK, stamp(seq, block))
        self.log.append(block)
        self.done = seq

    def run(self):
        try:
            rnd = random.Random(1)
            for b in range(self.first, self.first + self.n):
                self.one(b)
            while not self.stop:
                self.one(self.first + rnd.randrange(self.n))
        except BaseException as e:  # reported by the main thread
            self.error = e


def live(sock, first, n, snaps, outdir, lazyblk, control):
    nbd = NBD(sock)
    w = Writer(nbd, int(first), int(n))
    w.start()
    cuts = []
    for i in range(int(snaps)):
        target = w.done + int(n) if i == 0 else w.done + 2000
        while w.done < target and w.is_alive():
            threading.Event().wait(0.01)
        if not w.is_alive():
            break
        s0 = w.done
        r = subprocess.run([lazyblk, "snapshot", "--server", control, "-o",
                            os.path.join(outdir, "snap%d.delta" % i)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        s1 = w.started + 1
        if r.returncode:
            raise SystemExit("nbdseq: snapshot %d: %s" % (i, r.stdout.strip()))
        cuts.append((i, s0, s1))
        print("snapshot %d: S0=%d S1=%d (%d writes in the window): %s" %
              (i, s0, s1, s1 - 1 - s0, r.stdout.strip()))
    w.stop = True
    w.join()
    if w.error:
        raise SystemExit("nbdseq: writer: %s" % w.error)
    nbd.flush()
    nbd.close()
    with open(os.path.join(outdir, "writes"), "wb") as f:
        f.write(struct.pack("<%dI" % len(w.log), *w.log))
    with open(os.path.join(outdir, "cuts"), "w") as f:
        for c in cuts:
            f.write("%d %d %d\n" % c)
    print("%d writes" % len(w.log))


def check(raw, first, n, writes, s0, s1):
    first, n, s0, s1 = int(first), int(n), int(s0), int(s1)
    data = open(writes, "rb").read()
    log = struct.unpack("<%dI" % (len(data) // 4), data)
    per = {}  # block -> its seqs, ascending
    for i, b in enumerate(log):
        per.setdefault(b, []).append(i + 1)
    lo, hi = s0, s1 - 1  # the cut S: every block's stamp constrains it
    with open(raw, "rb") as f:
        for b in range(first, first + n):
            f.seek(b * BLOCK)
            blk = f.read(BLOCK)
            seq = struct.unpack_from("<QQ", blk)[1]
            if blk != stamp(seq, b):
                raise SystemExit("block %d: not a whole stamp of itself" % b)
            seqs = per.get(b, [])
            if seq not in seqs:
                raise SystemExit("block %d: seq %d was never written to it" % (b, seq))
            k = seqs.index(seq)
            nxt = seqs[k + 1] - 1 if k + 1 < len(seqs) else len(log)
            # S >= seq and S < the next write to b
            if seq > hi or nxt < lo:
                raise SystemExit("block %d holds seq %d (next write %d): outside the "
                                 "request window [%d, %d]" % (b, seq, nxt + 1, s0, s1 - 1))
            lo, hi = max(lo, seq), min(hi, nxt)
            if lo > hi:
                raise SystemExit("block %d holds seq %d: no single cut in [%d, %d] "
                                 "explains every block" % (b, seq, s0, s1 - 1))
    print("consistent cut: S in [%d, %d] (window [%d, %d])" % (lo, hi, s0, s1 - 1))


def burst(sock, *ranges):
    nbd = NBD(sock)
    seq = 1
    for r in ranges:
        b, c = (int(x) for x in r.split(":"))
        for i in range(b, b + c):
            nbd.write(i * BLOCK, stamp(seq, i))
            seq += 1
    nbd.flush()
    nbd.close()


if __name__ == "__main__":
    modes = {"live": live, "check": check, "burst": burst}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        raise SystemExit("usage: nbdseq.py live|check|burst ARGS...")
    modes[sys.argv[1]](*sys.argv[2:])
