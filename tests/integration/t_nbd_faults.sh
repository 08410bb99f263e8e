#!/bin/bash
# A chunk missing from the store, or corrupt, fails exactly the reads that need it (EIO),
# never serves wrong bytes, and the server keeps serving everything else.
. "$(dirname "$0")/lib/common.sh"
for tool in qemu-io nbdinfo nbdcopy; do
  command -v $tool >/dev/null || skip "$tool is not installed"
done
mkdir -p "$T/src"
head -c 3000000 /dev/urandom >"$T/src/victim.bin"
head -c 3000000 /dev/urandom >"$T/src/other.bin"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/m" >/dev/null
"$LAZYBLK" mkfs "$T/m" -o "$T/l" >/dev/null
"$LAZYBLK" export "$T/l" --store "$T/store" -o "$T/ref.raw" --no-plain >/dev/null
vblk=$(debugfs -R "bmap /victim.bin 0" "$T/ref.raw" 2>/dev/null)
oblk=$(debugfs -R "bmap /other.bin 0" "$T/ref.raw" 2>/dev/null)
digest=$("$LAZYBLK" manifest show "$T/m" | python3 -c '
import json, sys
e = {x["path"]: x for x in json.load(sys.stdin)["entries"]}
print(e["/victim.bin"]["chunks"][0]["digest"])')
. "$TESTLIB/serve.sh"
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
start_server srv "$URI" "$T/l" --store "$T/store" --overlay "$T/ov" --nbd "unix:$SOCK"
qread() { qemu-io -f raw -c "read -v $(( $1 * 4096 )) 4096" "$URI" 2>&1 || true; }

# corrupt: one flipped byte in the compressed chunk → EIO, not wrong bytes
f=$T/store/chunks/${digest:0:2}/$digest
cp "$f" "$T/saved"
python3 -c "
import sys; p=sys.argv[1]; d=bytearray(open(p,'rb').read()); d[len(d)//2]^=1; open(p,'wb').write(d)" "$f"
out=$(qread "$vblk")
grep -q "Input/output error" <<<"$out" || die "corrupt chunk was served: $(echo "$out" | head -3)"
out=$(qread "$oblk")
grep -q "read 4096/4096" <<<"$out" || die "an unaffected read failed: $out"
# missing: EIO again
rm -f "$f"
out=$(qread "$vblk")
grep -q "Input/output error" <<<"$out" || die "missing chunk: $(echo "$out" | head -3)"
kill -0 $SRV || die "the server died"
grep -q "$digest" "$T/srv.err" || die "the server did not name the chunk"
# restored: the same read now succeeds with the right bytes
cp "$T/saved" "$f"
qemu-io -f raw -c "read $(( vblk * 4096 )) 4096" "$URI" >/dev/null || die "read after restore failed"
nbdcopy "$URI" "$T/copy.raw"
cmp "$T/copy.raw" "$T/ref.raw" || die "disk differs after restore"
echo "faults: exactly the affected reads fail"
