#!/bin/bash
# The overlay and the layout at run time, against a local user who can write where they
# live: a symbolic link planted at the overlay path (or its .state) is refused and its
# target never created, a FIFO there does not hang the server, and metadata bytes of the
# layout rewritten in place after the server opened (and verified) it never reach a client.
. "$(dirname "$0")/lib/common.sh"
for tool in qemu-io nbdcopy python3; do
  command -v "$tool" >/dev/null || skip "t_file_safety: $tool not installed"
done
. "$TESTLIB/serve.sh"

mkdir -p "$T/src/d"
seq 1 5000 >"$T/src/d/numbers"
echo hello >"$T/src/hello"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/m" >/dev/null
"$LAZYBLK" mkfs "$T/m" -o "$T/l" --size 128M >/dev/null
"$LAZYBLK" export "$T/l" --store "$T/store" -o "$T/ref.raw" >/dev/null
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"

# ---- the overlay path, or its state file, a dangling symbolic link: refused, not created
ln -s "$T/target" "$T/ov"
expect_error "overlay symlink" "ov: overlay path is a symbolic link (refused)" -- \
  timeout 60 "$LAZYBLK" serve "$T/l" --store "$T/store" --overlay "$T/ov" --nbd "unix:$SOCK"
[ ! -e "$T/target" ] || die "the overlay symlink's target was created"
ln -s "$T/target2" "$T/ov2.state"
expect_error "state symlink" "state file path is a symbolic link (refused)" -- \
  timeout 60 "$LAZYBLK" serve "$T/l" --store "$T/store" --overlay "$T/ov2" --nbd "unix:$SOCK"
[ ! -e "$T/target2" ] || die "the state file symlink's target was created"
# a symlink to a good overlay is refused too (a link is never followed)
start_server ov "$URI" "$T/l" --store "$T/store" --overlay "$T/ov3" --nbd "unix:$SOCK"
stop_server "$SRV" ov
ln -s "$T/ov3" "$T/ov4"
ln -s "$T/ov3.state" "$T/ov4.state"
expect_error "link to an overlay" "symbolic link (refused)" -- \
  timeout 60 "$LAZYBLK" serve "$T/l" --store "$T/store" --overlay "$T/ov4" --nbd "unix:$SOCK"
# a FIFO where the state file should be: refused at once, not a hang
mkfifo "$T/ov5.state"
expect_error "state FIFO" "not a regular file" -- \
  timeout 60 "$LAZYBLK" serve "$T/l" --store "$T/store" --overlay "$T/ov5" --read-only \
  --nbd "unix:$SOCK"

# ---- the layout's metadata rewritten in place while it is served
start_server lay "$URI" "$T/l" --store "$T/store" --nbd "unix:$SOCK"
# the disk blocks of the first two metadata blocks of the area; fill the first with 0xEE
read -r victim other < <(python3 - "$T/l" <<'EOF'
import struct, sys
f = open(sys.argv[1], "r+b")
h = f.read(4096)
meta_blocks, nmeta = struct.unpack_from("<QQ", h, 24)
f.seek(4096 + meta_blocks * 4096)
runs = [struct.unpack("<QQII", f.read(24)) for _ in range(nmeta)]
lba = {}
for l, first, count, _ in runs:
    for i in range(count):
        lba[first + i] = l + i
f.seek(4096)
f.write(b"\xee" * 4096)          # area block 0, in place (same inode, same size)
f.close()
print(lba[0], lba[1])
EOF
)
out=$(qemu-io -r -f raw -c "read -v $(( victim * 4096 )) 4096" "$URI" 2>&1 || true)
if grep -q "ee ee ee ee" <<<"$out"; then die "modified layout bytes were served"; fi
grep -q "Input/output error" <<<"$out" || die "no error for the modified block: $out"
grep -q "metadata block 0 changed since the layout was opened" "$T/lay.err" ||
  die "no log line for the modified block: $(cat "$T/lay.err")"
# the other blocks are served as verified
qemu-io -r -f raw -c "read -v $(( other * 4096 )) 4096" "$URI" >"$T/other.txt" 2>&1 ||
  die "an unmodified metadata block failed: $(cat "$T/other.txt")"
dd if="$T/ref.raw" bs=4096 skip="$other" count=1 status=none | od -An -tx1 -v |
  tr -s ' \n' ' ' >"$T/want.hex"
grep -o '^[0-9a-f]*: *\([0-9a-f][0-9a-f] \)*' "$T/other.txt" | sed 's/^[0-9a-f]*: *//' |
  tr -s ' \n' ' ' >"$T/got.hex"
[ "$(tr -d ' ' <"$T/got.hex")" = "$(tr -d ' ' <"$T/want.hex")" ] ||
  die "an unmodified metadata block differs from the reference"
kill -0 "$SRV" || die "the server died"
stop_server "$SRV" lay
echo "file safety: symlinks and FIFOs refused, modified layout metadata never served"
