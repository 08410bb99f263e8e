#!/bin/bash
# Live snapshots through the control socket (lazyblk serve --control, lazyblk snapshot
# --server): a writer (lib/nbdseq.py, a raw NBD client) stamps a global sequence number
# into random blocks of a scratch region without pause while snapshots are asked; each
# delta, applied to the base and read back with nbdcopy, must be one consistent cut inside
# the request window, and match the base everywhere else. Also: the control protocol's
# answers to bad requests, the overlay's allocated size after a burst of writes (no
# copy-up) and the lazyblk:dirty map of it.
. "$(dirname "$0")/lib/common.sh"

for tool in nbdinfo nbdcopy python3; do
  command -v "$tool" >/dev/null || skip "t_snapshot_live: $tool not installed"
done

. "$TESTLIB/serve.sh"
. "$TESTLIB/control.sh"

# ---- usage
"$LAZYBLK" serve --help >"$T/help.txt" # a file: under pipefail, an early grep -q exit is a SIGPIPE
grep -q -- "--control PATH" "$T/help.txt" || die "serve --help lacks --control"
grep -q "^       lazyblk snapshot --server CONTROL_PATH -o DELTA" <<<"$("$LAZYBLK" snapshot --help)" ||
  die "snapshot --help lacks --server"
expect_error "server needs -o" "missing -o DELTA" -- "$LAZYBLK" snapshot --server "$T/c.sock"
expect_error "server takes no OVERLAY" "unexpected argument 'ov'" -- \
  "$LAZYBLK" snapshot --server "$T/c.sock" ov -o d
expect_error "no server" "is a server running with --control here?" -- \
  "$LAZYBLK" snapshot --server "$T/c.sock" -o "$T/d"

# ---- a base image with room after its files: the scratch region is its second half
mkdir -p "$T/src/dir"
head -c 2000000 /dev/urandom >"$T/src/big"
seq 1 5000 >"$T/src/dir/seq"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 64M --journal 4M >/dev/null
"$LAZYBLK" export "$T/img.layout" --store "$T/store" -o "$T/base.raw" >/dev/null
blocks=$(( $(stat -c %s "$T/base.raw") / 4096 ))
first=$((blocks / 2)); n=$((blocks - first))

sock=$T/nbd.sock; csock=$T/ctl.sock
uri="nbd+unix:///?socket=$sock"
start_server live "$uri" "$T/img.layout" --store "$T/store" --overlay "$T/ov" \
  --control "$csock" --nbd "unix:$sock"
[ "$(stat -c %a "$csock")" = 600 ] || die "control socket mode $(stat -c %a "$csock")"

# ---- the control protocol: answers, and bad requests that must not hurt the server
r=$(ctl "$csock" $'stats\n')
python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert 'dirty_blocks' in d and 'snapshot_copies' in d" "$r" ||
  die "stats reply: $r"
[ "$(ctl "$csock" $'flush\n')" = ok ] || die "flush reply"
[ "$(ctl "$csock" $'flush\r\nstats\n' | head -1)" = ok ] || die "two requests, CRLF"
[ "$(ctl "$csock" $'frob\n')" = "error unknown request 'frob' (want snapshot DELTA_PATH, stats, flush or trace stop)" ] ||
  die "unknown request: $(ctl "$csock" $'frob\n')"
ctl "$csock" $'\n' | grep -q "^error empty request" || die "empty request"
ctl "$csock" $'trace stop\n' | grep -q "^error not recording a trace" || die "trace stop without a trace"
ctl "$csock" $'snapshot\n' | grep -q "^error snapshot needs a DELTA_PATH" || die "no path"
ctl "$csock" $'snapshot rel.delta\n' | grep -q "^error DELTA_PATH must be absolute" ||
  die "relative path"
ctl "$csock" "snapshot $T/no/such/dir/d"$'\n' | grep -q "^error $T/no/such/dir/d: " ||
  die "unwritable delta"
ctl "$csock" 'sta\0ts'$'\n' | grep -q "^error request holds a NUL byte" || die "NUL"
ctl "$csock" "$(head -c 10000 /dev/zero | tr '\0' a)" | grep -q "^error request too long" ||
  die "long request"
ctl "$csock" "stats" | grep -q . && die "a request without its newline was answered"
python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'snap'); s.close()" "$csock"
expect_error "server cannot write the delta" "$T/no/dir/d: No such file or directory" -- \
  "$LAZYBLK" snapshot --server "$csock" -o "$T/no/dir/d"
expect_error "overlay busy" "in use by a server" -- "$LAZYBLK" snapshot "$T/ov" -o "$T/x.delta"
r=$(ctl "$csock" $'stats\n')
python3 -c "import json,sys; json.loads(sys.argv[1])" "$r" || die "server hurt by bad requests"

# ---- live snapshots: a writer stamping sequence numbers, three snapshots while it runs
python3 "$TESTLIB/nbdseq.py" live "$sock" "$first" "$n" 3 "$T" "$LAZYBLK" "$csock" |
  tee "$T/live.txt"
[ "$(wc -l <"$T/cuts")" -eq 3 ] || die "expected 3 snapshots"
copies=$(ctl "$csock" $'stats\n' | python3 -c "import json,sys; print(json.load(sys.stdin)['snapshot_copies'])")
echo "blocks saved by writers during snapshots: $copies"

# a snapshot the server is still asked for after the writer: a clean, complete delta
"$LAZYBLK" snapshot --server "$csock" -o "$T/final.delta" | grep -q "^snapshot by the server" ||
  die "snapshot --server"
ls "$T" | grep -q '\.tmp\.' && die "temporary files left: $(ls "$T")"

while read -r i s0 s1; do
  "$LAZYBLK" overlay apply "$T/snap$i.delta" --layout "$T/img.layout" -o "$T/ov$i" >/dev/null
  start_server "ro$i" "nbd+unix:///?socket=$T/ro$i.sock" "$T/img.layout" --store "$T/store" \
    --overlay "$T/ov$i" --read-only --nbd "unix:$T/ro$i.sock"
  pid=$SRV
  nbdcopy "nbd+unix:///?socket=$T/ro$i.sock" "$T/snap$i.raw"
  stop_server "$pid" "ro$i"
  python3 "$TESTLIB/nbdseq.py" check "$T/snap$i.raw" "$first" "$n" "$T/writes" "$s0" "$s1" ||
    die "snapshot $i is not the disk as of its request"
  cmp -n $((first * 4096)) "$T/snap$i.raw" "$T/base.raw" ||
    die "snapshot $i differs from the base outside the scratch region"
  rm -f "$T/snap$i.raw" "$T/ov$i" "$T/ov$i.state"
done <"$T/cuts"

# the final delta equals the disk now (the overlay at rest gives the same delta offline)
nbdcopy "$uri" "$T/now.raw"
stop_server "${SERVERS[0]}" live
"$LAZYBLK" snapshot "$T/ov" -o "$T/offline.delta" >/dev/null
cmp "$T/final.delta" "$T/offline.delta" || die "live and offline snapshots of a still overlay differ"
cmp -n $((first * 4096)) "$T/now.raw" "$T/base.raw" || die "writes outside the scratch region"
[ ! -e "$csock" ] || die "control socket left behind"

# ---- a burst of whole-block writes: allocated size and the lazyblk:dirty map
rm -f "$T/ov" "$T/ov.state"
start_server burst "$uri" "$T/img.layout" --store "$T/store" --overlay "$T/ov" \
  --nbd "unix:$sock"
# scattered runs, some inside the files' data (no copy-up of the chunks around them)
ranges="3:1 100:7 517:64 $((first + 5)):1 $((blocks - 300)):256"
python3 "$TESTLIB/nbdseq.py" burst "$sock" $ranges
want=0; : >"$T/dirty.want"
for r in $ranges; do
  b=${r%:*}; c=${r#*:}
  want=$((want + c * 4096))
  echo "$((b * 4096)) $((c * 4096))" >>"$T/dirty.want"
done
nbdinfo --map=lazyblk:dirty "$uri" | awk '$3 == 1 { print $1, $2 }' >"$T/dirty.txt"
cmp -s "$T/dirty.txt" "$T/dirty.want" ||
  die "dirty map: $(tr '\n' ';' <"$T/dirty.txt") want $(tr '\n' ';' <"$T/dirty.want")"
alloc=$(( $(stat -c '%b * %B' "$T/ov") ))
echo "wrote $want bytes, overlay allocates $alloc"
[ "$alloc" -ge "$want" ] && [ "$alloc" -le $((want + 4 * 4096)) ] ||
  die "overlay allocates $alloc bytes for $want written"
stop_server "$SRV" burst
echo "t_snapshot_live: ok"
