# shellcheck shell=bash
# Sourced by the tests that forge a VM snapshot's vm.state (docs/formats.md, "VM
# snapshots"): each function takes a directory holding vm.state.
#
#   edit DIR PYTHON   run PYTHON on the bytearray b of DIR/vm.state (records: rec(tag, idx))
#   fixsum DIR        make vm.state's digests right again after an edit (state, then header)
#   cpusig DIR        the header's CPU signature made the one of vm.state's CPUID record

# fixsum DIR: make vm.state's digests right again after an edit (state, then header)
fixsum() {
  python3 - "$1/vm.state" <<'PY'
import subprocess, sys
def xxh128(data):   # XXH3-128, canonical (xxhsum -H2, from Debian's xxhash)
    out = subprocess.run(["xxhsum", "-H2", "-"], input=bytes(data), capture_output=True,
                         check=True).stdout
    return bytes.fromhex(out.split()[0].decode())
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[192:208] = xxh128(b[512:])
b[496:512] = xxh128(b[:496])
open(p, "wb").write(b)
PY
}
# cpusig DIR: the header's CPU signature made the one of vm.state's CPUID record (as
# vm_snapshot.c's cpu_sig_pick: 24 u32 registers of chosen leaves, XXH3-128)
cpusig() {
  python3 - "$1/vm.state" <<'PY'
import struct, subprocess, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
off = 512
while True:
    t, i, n, _ = struct.unpack_from("<4I", b, off)
    if t == 35:
        break
    off += 16 + (n + 7) // 8 * 8
nent = struct.unpack_from("<I", b, off + 16)[0]
ents = [struct.unpack_from("<7I", b, off + 24 + 40 * k) for k in range(nent)]
regs = []
for fn, idx, mask in ((0, 0, 0xf), (1, 0, 0xd), (7, 0, 0xf), (7, 1, 0xf), (0xd, 0, 0xf),
                      (0xd, 1, 0xf), (0x80000001, 0, 0xc), (0x80000008, 0, 0x1)):
    for e in ents:
        if (e[0], e[1]) == (fn, idx):
            regs += [e[3 + r] for r in range(4) if mask & (1 << r)]
            break
regs = (regs + [0] * 24)[:24]
out = subprocess.run(["xxhsum", "-H2", "-"], input=struct.pack("<24I", *regs),
                     capture_output=True, check=True).stdout
b[40:56] = bytes.fromhex(out.split()[0].decode())
open(p, "wb").write(b)
PY
}
# edit DIR PYTHON: run PYTHON on the bytearray b of DIR/vm.state (records: rec(tag, idx))
edit() {
  python3 - "$1/vm.state" "$2" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
def rec(tag, idx=0):
    off = 512
    while off < len(b):
        t, i, n, _ = struct.unpack_from("<4I", b, off)
        if (t, i) == (tag, idx):
            return off + 16
        off += 16 + (n + 7) // 8 * 8
    sys.exit("no record")
exec(sys.argv[2])
open(p, "wb").write(b)
PY
}
