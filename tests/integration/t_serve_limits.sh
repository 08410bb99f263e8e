#!/bin/bash
# The serve path stays within its memory bound: the server's peak virtual size is measured
# while a well-behaved client copies the whole disk, then a server under
# `prlimit --as=` twice that takes 1,000 connection attempts (connect/close, garbage,
# NBD_CMD_READ and NBD_CMD_WRITE with a 4 GiB length field; lib/nbdhostile.py flood) and
# still serves the disk byte for byte. docs/security.md, "Limits", lists every bound.
. "$(dirname "$0")/lib/common.sh"
for tool in prlimit nbdcopy nbdinfo python3; do
  command -v "$tool" >/dev/null || skip "t_serve_limits: $tool not installed"
done
# AddressSanitizer reserves terabytes of address space: an address-space limit cannot apply
if ldd "$LAZYBLK" 2>/dev/null | grep libasan >/dev/null; then
  skip "t_serve_limits: an ASan build cannot run under prlimit --as"
fi
. "$TESTLIB/serve.sh"

mkdir -p "$T/src"
head -c 20000000 /dev/urandom >"$T/src/random"
seq 1 200000 >"$T/src/numbers"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/m" >/dev/null
"$LAZYBLK" mkfs "$T/m" -o "$T/l" --size 128M >/dev/null
"$LAZYBLK" export "$T/l" --store "$T/store" -o "$T/ref.raw" >/dev/null
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"

# ---- the normal peak: a whole-disk copy, then a second copy (the cache warm)
start_server norm "$URI" "$T/l" --store "$T/store" --overlay "$T/ov" --nbd "unix:$SOCK"
nbdcopy "$URI" "$T/a.raw"
nbdcopy "$URI" "$T/a.raw"
peak=$(awk '/^VmPeak:/ { print $2 }' "/proc/$SRV/status")
stop_server "$SRV" norm
cmp "$T/a.raw" "$T/ref.raw" || die "the copy differs from lazyblk export"
limit=$(( peak * 2 * 1024 ))
echo "normal peak virtual size ${peak} kB: serving under prlimit --as=$limit"

# ---- under the limit: 1,000 hostile connection attempts, then a well-behaved client
rm -f "$T/ov" "$T/ov.state"
prlimit --as="$limit" -- "$LAZYBLK" serve "$T/l" --store "$T/store" --overlay "$T/ov" \
  --nbd "unix:$SOCK" >"$T/lim.out" 2>"$T/lim.err" &
SRV=$!
SERVERS+=("$SRV")
wait_for -p "$SRV" has "$T/lim.out" "^serving " ||
  die "the server did not start under the limit: $(cat "$T/lim.err")"
python3 "$TESTLIB/nbdhostile.py" flood "$SOCK" 1000 >"$T/flood.out" 2>&1 ||
  die "flood: $(tail -5 "$T/flood.out")"
kill -0 "$SRV" 2>/dev/null || die "the server died under the flood: $(tail -5 "$T/lim.err")"
grep -q "write of 4294967295 bytes, disconnecting" "$T/lim.err" ||
  die "no log line for the 4 GiB write"
nbdinfo --size "$URI" >/dev/null || die "nbdinfo failed after the flood"
nbdcopy "$URI" "$T/b.raw" || die "nbdcopy failed after the flood: $(tail -5 "$T/lim.err")"
cmp "$T/b.raw" "$T/ref.raw" || die "the disk differs after the flood"
stop_server "$SRV" lim
echo "serve limits: 1,000 hostile connections and 4 GiB lengths within --as=$limit"
