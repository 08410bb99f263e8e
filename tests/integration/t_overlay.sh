#!/bin/bash
# Overlays and deltas through the command line: lazyblk overlay show|apply and lazyblk
# snapshot; usage errors; a delta written by an independent encoder (lib/mkdelta.py)
# applied and snapshotted back byte for byte; damaged, foreign and busy inputs refused
# with one line.
. "$(dirname "$0")/lib/common.sh"

json_field() { # json_field FIELD < JSON
  python3 -c "import json,sys; print(json.load(sys.stdin)[sys.argv[1]])" "$1"
}

grep -q "^usage: lazyblk overlay show" <<<"$("$LAZYBLK" overlay --help)" || die "overlay --help"
grep -q "^usage: lazyblk snapshot OVERLAY -o DELTA" <<<"$("$LAZYBLK" snapshot --help)" ||
  die "snapshot --help"
grep -q "^  overlay " <<<"$("$LAZYBLK" --help)" || die "overlay missing from lazyblk --help"

# usage errors: exit 2, one line
expect_rc 2 "$LAZYBLK" overlay
expect_rc 2 "$LAZYBLK" snapshot
expect_error "unknown overlay command" "unknown overlay command 'frob'" -- "$LAZYBLK" overlay frob x
expect_error "show needs OVERLAY" "missing OVERLAY" -- "$LAZYBLK" overlay show
expect_error "apply needs DELTA" "missing DELTA" -- "$LAZYBLK" overlay apply --layout l -o o
expect_error "apply needs --layout" "missing --layout IMAGE.layout" -- "$LAZYBLK" overlay apply d -o o
expect_error "apply needs -o" "missing -o OVERLAY" -- "$LAZYBLK" overlay apply d --layout l
expect_error "apply unknown option" "unknown option '--bogus'" -- "$LAZYBLK" overlay apply --bogus d
expect_error "apply option argument" "option '--layout' needs an argument" -- \
  "$LAZYBLK" overlay apply d -o o --layout
expect_error "show extra argument" "unexpected argument 'y'" -- "$LAZYBLK" overlay show x y
expect_error "snapshot needs OVERLAY" "missing OVERLAY" -- "$LAZYBLK" snapshot -o d
expect_error "snapshot needs -o" "missing -o DELTA" -- "$LAZYBLK" snapshot ov
expect_error "snapshot unknown option" "unknown option '-Z'" -- "$LAZYBLK" snapshot -Z ov
expect_error "snapshot extra argument" "unexpected argument 'b'" -- "$LAZYBLK" snapshot a b -o d

# two layouts of different disks
mkdir -p "$T/src" "$T/src2"
echo hello >"$T/src/hello"
echo other >"$T/src2/other"
"$LAZYBLK" import "$T/src" --store "$T/store" -o "$T/a.manifest" >/dev/null
"$LAZYBLK" import "$T/src2" --store "$T/store" -o "$T/b.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/a.manifest" -o "$T/a.layout" --size 96M >/dev/null
"$LAZYBLK" mkfs "$T/b.manifest" -o "$T/b.layout" >/dev/null
blocks=$(python3 -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(24), 16)[0])" "$T/a.layout")
digest=$(head -c 4096 "$T/a.layout" | sha256sum | cut -d' ' -f1)

# A delta written from the documented format, applied, shown, snapshotted back.
read -r dirty zero < <(python3 "$TESTLIB/mkdelta.py" "$T/a.layout" "$T/d1" 1)
[ "$dirty" -gt 0 ] && [ "$zero" -gt 0 ] || die "mkdelta wrote an uninteresting delta"
"$LAZYBLK" overlay apply "$T/d1" --layout "$T/a.layout" -o "$T/ov" | grep -q "^applied " ||
  die "overlay apply"
[ -f "$T/ov" ] && [ -f "$T/ov.state" ] || die "apply made no OVERLAY / OVERLAY.state"
[ "$(stat -c %s "$T/ov")" -eq $((blocks * 4096)) ] || die "OVERLAY is not the disk's size"
[ "$(stat -c %s "$T/ov.state")" -eq $((4096 + (blocks + 31) / 32 * 8)) ] ||
  die "OVERLAY.state size"
ls "$T" | grep -q tmp && die "temporary files left: $(ls "$T")"
show=$("$LAZYBLK" overlay show --json "$T/ov")
[ "$(json_field dirty_blocks <<<"$show")" -eq "$dirty" ] || die "show: dirty: $show"
[ "$(json_field zero_blocks <<<"$show")" -eq "$zero" ] || die "show: zero: $show"
[ "$(json_field blocks <<<"$show")" -eq "$blocks" ] || die "show: blocks: $show"
[ "$(json_field layout <<<"$show")" = "$digest" ] || die "show: layout digest: $show"
[ "$(json_field allocated_bytes <<<"$show")" -le $((dirty * 4096)) ] ||
  die "show: OVERLAY not sparse: $show"
"$LAZYBLK" overlay show "$T/ov" | grep -q "^dirty      $dirty blocks" || die "overlay show text"
"$LAZYBLK" snapshot "$T/ov" -o "$T/d2" | grep -q "^snapshot of " || die "snapshot"
cmp "$T/d1" "$T/d2" || die "snapshot of an applied delta differs from the delta"
# applying over an existing overlay replaces it
python3 "$TESTLIB/mkdelta.py" "$T/a.layout" "$T/d3" 2 >/dev/null
"$LAZYBLK" overlay apply "$T/d3" --layout "$T/a.layout" -o "$T/ov" >/dev/null
"$LAZYBLK" snapshot "$T/ov" -o "$T/d4" >/dev/null
cmp "$T/d3" "$T/d4" || die "apply over an existing overlay"
cp "$T/ov" "$T/ov.saved"; cp "$T/ov.state" "$T/ov.state.saved"

# deltas refused: foreign, damaged; OVERLAY untouched
expect_error "foreign delta" "$T/d1: delta belongs to another layout" -- \
  "$LAZYBLK" overlay apply "$T/d1" --layout "$T/b.layout" -o "$T/ov"
expect_error "missing delta" "$T/none: No such file or directory" -- \
  "$LAZYBLK" overlay apply "$T/none" --layout "$T/a.layout" -o "$T/ov"
expect_error "missing layout" "$T/none.layout: No such file or directory" -- \
  "$LAZYBLK" overlay apply "$T/d1" --layout "$T/none.layout" -o "$T/ov"
expect_error "layout as delta" "bad magic (not a lazyblk delta)" -- \
  "$LAZYBLK" overlay apply "$T/a.layout" --layout "$T/a.layout" -o "$T/ov"
size=$(stat -c %s "$T/d1")
cp "$T/d1" "$T/bad"; printf '\xff' | dd of="$T/bad" bs=1 seek=5000 conv=notrunc status=none
expect_error "corrupt data" "checksum mismatch (file corrupt)" -- \
  "$LAZYBLK" overlay apply "$T/bad" --layout "$T/a.layout" -o "$T/ov"
cp "$T/d1" "$T/bad"; truncate -s $((size - 1)) "$T/bad"
expect_error "truncated delta" "truncated delta" -- \
  "$LAZYBLK" overlay apply "$T/bad" --layout "$T/a.layout" -o "$T/ov"
cp "$T/d1" "$T/bad"; truncate -s 1000 "$T/bad"
expect_error "short delta" "truncated delta" -- \
  "$LAZYBLK" overlay apply "$T/bad" --layout "$T/a.layout" -o "$T/ov"
cp "$T/d1" "$T/bad"; echo x >>"$T/bad"
expect_error "longer delta" "trailing garbage" -- \
  "$LAZYBLK" overlay apply "$T/bad" --layout "$T/a.layout" -o "$T/ov"
cp "$T/d1" "$T/bad"; printf '\x07' | dd of="$T/bad" bs=1 seek=70 conv=notrunc status=none
expect_error "delta header" "header checksum mismatch" -- \
  "$LAZYBLK" overlay apply "$T/bad" --layout "$T/a.layout" -o "$T/ov"
cmp "$T/ov" "$T/ov.saved" && cmp "$T/ov.state" "$T/ov.state.saved" ||
  die "a refused apply changed OVERLAY"

# overlays refused: missing, foreign files, damaged state, missing or resized data
expect_error "no overlay" "$T/none: no such overlay" -- "$LAZYBLK" snapshot "$T/none" -o "$T/d"
expect_error "show no overlay" "no such overlay" -- "$LAZYBLK" overlay show "$T/none"
echo "not an overlay" >"$T/plain"
expect_error "plain file" "state file missing" -- "$LAZYBLK" overlay show "$T/plain"
cp "$T/a.layout" "$T/plain.state"; truncate -s $((blocks * 4096)) "$T/plain"
expect_error "layout as state" "bad magic (not a lazyblk overlay state file)" -- \
  "$LAZYBLK" snapshot "$T/plain" -o "$T/d"
truncate -s 4200 "$T/ov.state"
expect_error "truncated state" "truncated state file" -- "$LAZYBLK" snapshot "$T/ov" -o "$T/d"
truncate -s 100 "$T/ov.state"
expect_error "short state" "truncated state file" -- "$LAZYBLK" overlay show "$T/ov"
cp "$T/ov.state.saved" "$T/ov.state"; printf '\xff' >>"$T/ov.state"
expect_error "longer state" "trailing garbage" -- "$LAZYBLK" overlay show "$T/ov"
cp "$T/ov.state.saved" "$T/ov.state"
# one bit of the layout digest flipped (setting the byte could leave it as it was: the digest
# differs from run to run)
b=$(od -An -tu1 -j40 -N1 "$T/ov.state" | tr -d ' ')
printf "\\x$(printf %02x $((b ^ 1)))" | dd of="$T/ov.state" bs=1 seek=40 conv=notrunc status=none
expect_error "state header" "checksum mismatch" -- "$LAZYBLK" overlay show "$T/ov"
cp "$T/ov.state.saved" "$T/ov.state"
printf '\xff' | dd of="$T/ov.state" bs=1 seek=4100 conv=notrunc status=none
expect_error "bad state bits" "invalid block state" -- "$LAZYBLK" overlay show "$T/ov"
cp "$T/ov.state.saved" "$T/ov.state"
truncate -s $((blocks * 4096 - 4096)) "$T/ov"
expect_error "short data" "wrong size" -- "$LAZYBLK" snapshot "$T/ov" -o "$T/d"
rm "$T/ov"
expect_error "no data" "overlay data file missing" -- "$LAZYBLK" snapshot "$T/ov" -o "$T/d"
[ ! -e "$T/d" ] || die "a failed snapshot left DELTA"
cp "$T/ov.saved" "$T/ov"

# a busy overlay (a server holds its lock) is neither snapshotted offline nor replaced
python3 -c 'import fcntl,sys,time; f=open(sys.argv[1]); fcntl.flock(f, fcntl.LOCK_EX); print("locked", flush=True); time.sleep(3600)' \
  "$T/ov.state" >"$T/lock.out" &
holder=$!
wait_for -p "$holder" has "$T/lock.out" locked || die "the lock holder did not take the lock"
expect_error "busy snapshot" "in use by a server" -- "$LAZYBLK" snapshot "$T/ov" -o "$T/d"
expect_error "busy apply" "$T/ov: overlay is in use by another process" -- \
  "$LAZYBLK" overlay apply "$T/d1" --layout "$T/a.layout" -o "$T/ov"
kill "$holder"; wait "$holder" 2>/dev/null || true
cmp "$T/ov.state" "$T/ov.state.saved" || die "busy apply changed OVERLAY.state"
"$LAZYBLK" snapshot "$T/ov" -o "$T/d5" >/dev/null
cmp "$T/d3" "$T/d5" || die "snapshot after the lock is gone"

# ---- real overlays, written by real clients through lazyblk serve --nbd
"$LAZYBLK" serve --help >"$T/help.txt" # a file: under pipefail, an early grep -q exit is a SIGPIPE
if ! grep -q -- "--nbd unix:PATH" "$T/help.txt"; then
  echo "overlay: ok (lazyblk serve not available: served part skipped)"; exit 0
fi
for tool in qemu-io nbdcopy nbdinfo; do
  command -v "$tool" >/dev/null || { echo "overlay: ok ($tool missing: served part skipped)"; exit 0; }
done
. "$TESTLIB/serve.sh"
sock="$T/srv.sock"
uri="nbd+unix:///?socket=$sock"
serve() { # serve NAME LAYOUT OVERLAY
  start_server "$1" "$uri" "$2" --store "$T/store" --overlay "$3" --nbd "unix:$sock"
}
"$LAZYBLK" export "$T/a.layout" --store "$T/store" -o "$T/ref.raw" >/dev/null
python3 - "$T/ref.raw" "$T/want.raw" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[0:8192] = b"\xab" * 8192
d[1048576:1048576 + 512] = b"\xcd" * 512          # part of a block: the rest is the base
d[2097152:2097152 + 65536] = bytes(65536)
d[3145728:3145728 + 65536] = bytes(65536)
open(sys.argv[2], "wb").write(d)
PY

# writes, then kill -9: the restarted server serves every write
serve w1 "$T/a.layout" "$T/live"
qemu-io -f raw "$uri" -c "write -P 0xab 0 8192" -c "write -P 0xcd 1M 512" \
  -c "write -z 2M 64k" -c "discard 3M 64k" >/dev/null || die "qemu-io writes"
expect_error "served overlay is busy" "in use by a server" -- \
  "$LAZYBLK" snapshot "$T/live" -o "$T/live.delta"
kill -9 "$SRV"; wait "$SRV" 2>/dev/null || true
show=$("$LAZYBLK" overlay show --json "$T/live")
[ "$(json_field dirty_blocks <<<"$show")" -eq 3 ] || die "live: dirty: $show"
[ "$(json_field zero_blocks <<<"$show")" -eq 32 ] || die "live: zeroed: $show"
serve w2 "$T/a.layout" "$T/live"
nbdcopy "$uri" "$T/live.raw"
cmp "$T/live.raw" "$T/want.raw" || die "after kill -9 the served disk lacks writes"
stop_server "$SRV" w2

# another layout's server refuses the overlay
expect_error "served foreign overlay" "overlay belongs to another layout" -- \
  "$LAZYBLK" serve "$T/b.layout" --store "$T/store" --overlay "$T/live" --nbd "unix:$sock"

# fork: snapshot offline, apply to a new overlay, serve it: the same disk
"$LAZYBLK" snapshot "$T/live" -o "$T/live.delta" >/dev/null
"$LAZYBLK" overlay apply "$T/live.delta" --layout "$T/a.layout" -o "$T/fork" >/dev/null
serve f1 "$T/a.layout" "$T/fork"
nbdcopy "$uri" "$T/fork.raw"
cmp "$T/fork.raw" "$T/want.raw" || die "the forked overlay serves another disk"
qemu-io -f raw "$uri" -c "write -P 0xee 0 4096" >/dev/null || die "write to the fork"
stop_server "$SRV" f1
"$LAZYBLK" snapshot "$T/live" -o "$T/live2.delta" >/dev/null
cmp "$T/live.delta" "$T/live2.delta" || die "writing to the fork changed the original"
echo "overlay: ok"
