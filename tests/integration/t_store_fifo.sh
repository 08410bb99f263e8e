#!/bin/bash
# A FIFO (or anything that is not a regular file) at STORE/chunks/xx/HEX or
# STORE/plain/xx/HEX is a corrupt chunk or a bad plain copy, never opened (issue 24, item 3;
# on 7515cfa its blocking open() hung export, serve's reads, cas stats and cas verify for
# good, and serve then ignored SIGTERM):
#   - export without a remote fails with one line naming the chunk, "not a regular file";
#     with a remote it fetches the chunk, serves it and puts a real file in its place;
#   - serve answers the reads that need it with EIO and every other read with the right
#     bytes, and SIGTERM ends it; a FIFO as a plain copy is removed and the chunk served;
#   - cas stats counts it unreadable, cas verify names it ("not a regular file");
#   - a FIFO given where a file is read (a layout, a manifest, a trace, a delta, an --order
#     file, a --keep file, a kernel, an initrd, serve --raw) is refused with one line.
# Every command that could block runs under `timeout`, and serve's exit after SIGTERM is
# waited for at most 120 s: a hang fails the test instead of hanging it.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl nbdinfo debugfs zstd python3; do
  command -v "$tool" >/dev/null || skip "t_store_fifo: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

build_image a 2
# the second chunk of /random.bin and the disk offset of its first byte
read -r D FOFF < <("$LAZYBLK" manifest show "$T/a.manifest" | python3 -c '
import json, sys
c = {x["path"]: x for x in json.load(sys.stdin)["entries"]}["/random.bin"]["chunks"]
print(c[1]["digest"], c[0]["len"])')
B=$(debugfs -R "bmap /random.bin $((FOFF / 4096))" "$T/a.raw" 2>/dev/null)
[ -n "$B" ] && [ "$B" -gt 0 ] || die "debugfs: no block for /random.bin at $FOFF"
OFF=$((B * 4096 + FOFF % 4096))
fifo_at() { rm -f "$1" && mkfifo "$1"; }
for s in s1 s2 s3; do cp -a "$T/a.store" "$T/$s"; done
fifo_at "$(chunk_file "$T/s1" "$D")"                     # s1: the chunk is a FIFO
fifo_at "$(chunk_file "$T/s3" "$D")"                     # s3: the same, with a remote
mkdir -p "$T/s2/plain/${D:0:2}"; mkfifo "$T/s2/plain/${D:0:2}/$D"  # s2: its plain copy
TO="timeout -k 5 120"

# ---- export
expect_fail_line "export, chunk FIFO, no remote" "chunk $D is corrupt \(not a regular file\)" -- \
  $TO "$LAZYBLK" export "$T/a.layout" --store "$T/s1" -o "$T/x1.raw"
no_partial_output "$T/x1.raw"
[ -p "$(chunk_file "$T/s1" "$D")" ] || die "a store without a remote lost the chunk's entry"
mkdir -p "$T/www"
cp -a "$T/a.store/chunks" "$T/www/"
start_nginx "$T/www"
$TO "$LAZYBLK" export "$T/a.layout" --store "$T/s3" --remote "$NGINX_URL" -o "$T/x3.raw" \
  2>"$T/x3.err" >"$T/x3.out" || { cat "$T/x3.err" >&2; die "export with a remote failed"; }
cmp "$T/a.raw" "$T/x3.raw" || die "export with a remote: wrong bytes"
grep -q "^store .*, 1 failed verification" "$T/x3.out" && grep -q "^remote .*1 chunks fetched" \
  "$T/x3.out" || die "export with a remote: the FIFO was not counted corrupt: $(cat "$T/x3.out")"
f=$(chunk_file "$T/s3" "$D")
[ -f "$f" ] && [ ! -p "$f" ] || die "the FIFO was not replaced by the fetched chunk"
[ "$(zstd -dc "$f" | sha256sum | cut -d' ' -f1)" = "$D" ] || die "the fetched chunk is wrong"
echo "ok: export: a FIFO chunk is corrupt (one line), fetched again with a remote"

# ---- cas stats, cas verify
$TO "$LAZYBLK" cas stats --store "$T/s1" --json >"$T/stats.json" || die "cas stats failed"
json_expr "$T/stats.json" "s['bad_headers'] == 1 and s['chunks'] == $(chunk_count "$T/a.store")"
$TO "$LAZYBLK" cas stats --store "$T/s1" | grep -q "^unreadable    1 " || die "cas stats text"
rc=0; $TO "$LAZYBLK" cas verify --store "$T/s1" >"$T/v1.out" 2>"$T/v1.err" || rc=$?
[ $rc -eq 1 ] || die "cas verify of a FIFO chunk: exit $rc, want 1"
grep -qx "corrupt: $D (not a regular file)" "$T/v1.out" || die "cas verify: $(cat "$T/v1.out")"
rc=0; $TO "$LAZYBLK" cas verify --store "$T/s2" >"$T/v2.out" 2>"$T/v2.err" || rc=$?
[ $rc -eq 1 ] || die "cas verify of a FIFO plain copy: exit $rc, want 1"
grep -qx "bad plain copy: $D (not a regular file)" "$T/v2.out" || die "cas verify: $(cat "$T/v2.out")"
[ ! -e "$T/s2/plain/${D:0:2}/$D" ] || die "cas verify left the bad plain copy"
mkfifo "$T/s2/plain/${D:0:2}/$D"
echo "ok: cas stats counts the FIFO unreadable, cas verify names it"

# ---- serve: reads through NBD, then SIGTERM
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
# stop_within NAME: SIGTERM to $SRV, which must exit 0 (at most 120 s: else it hangs)
stop_within() {
  local rc=0
  kill -TERM "$SRV"
  timeout 120 tail --pid="$SRV" -f /dev/null || die "$1: serve did not end after SIGTERM"
  wait "$SRV" || rc=$?
  [ $rc -eq 0 ] || { cat "$T/$1.err" >&2; die "$1: exit $rc after SIGTERM"; }
}
# (--no-check: the start-up check counts a chunk that is not a regular file as missing)
start_server fifo-chunk "$URI" "$T/a.layout" --store "$T/s1" --nbd "unix:$SOCK" --no-check
nbd_readcheck "$SOCK" "$T/a.raw" "fail:$OFF" >"$T/r1.json" ||
  die "serve with a FIFO chunk: $(cat "$T/r1.json")"
json_expr "$T/r1.json" "s['ok_bytes'] > 0 and s['failed_bytes'] > 0"
stop_within fifo-chunk
grep -q "chunk $D is corrupt (not a regular file)" "$T/fifo-chunk.err" ||
  die "serve did not say why: $(cat "$T/fifo-chunk.err")"
rm -f "$SOCK"
start_server fifo-plain "$URI" "$T/a.layout" --store "$T/s2" --nbd "unix:$SOCK"
nbd_readcheck "$SOCK" "$T/a.raw" "ok:$OFF" >"$T/r2.json" ||
  die "serve with a FIFO plain copy: $(cat "$T/r2.json")"
json_expr "$T/r2.json" "s['failed_bytes'] == 0"
stop_within fifo-plain
grep -q "plain copy of chunk $D in .* is bad (not a regular file): removed" "$T/fifo-plain.err" ||
  die "serve did not say why: $(cat "$T/fifo-plain.err")"
[ ! -p "$T/s2/plain/${D:0:2}/$D" ] || die "the FIFO plain copy is still there"
echo "ok: serve: a FIFO chunk fails its reads with EIO, a FIFO plain copy is replaced; SIGTERM ends it"

# ---- a FIFO named on the command line: one line, never opened (each hung on 7515cfa)
mkfifo "$T/f.fifo"
F=$T/f.fifo
fifo_refused() { # fifo_refused NAME ERE CMD...
  local name=$1 want=$2; shift 2
  expect_fail_line "$name" "$want" -- $TO "$LAZYBLK" "$@"
}
fifo_refused "export FIFO.layout" "f.fifo: not a regular file" export "$F" --store "$T/a.store" -o "$T/o.raw"
fifo_refused "mkfs FIFO.manifest" "f.fifo: not a regular file" mkfs "$F" -o "$T/o.layout"
fifo_refused "mkfs --order FIFO" "--order .*f.fifo: not a regular file" mkfs "$T/a.manifest" --order "$F" -o "$T/o.layout"
fifo_refused "manifest show FIFO" "f.fifo: not a regular file" manifest show "$F"
fifo_refused "trace show FIFO" "f.fifo: not a regular file" trace show "$F"
fifo_refused "overlay apply FIFO" "f.fifo: not a regular file" overlay apply "$F" --layout "$T/a.layout" -o "$T/ov"
fifo_refused "commit FIFO" "f.fifo: not a regular file" commit "$F" --layout "$T/a.layout" --store "$T/a.store" -o "$T/c.layout"
fifo_refused "cas gc --keep FIFO" "f.fifo: not a regular file; nothing removed" cas gc --store "$T/a.store" --keep "$F"
fifo_refused "run --kernel FIFO" "kernel .*f.fifo: not a regular file" run --kernel "$F"
# (an ELF passes run's kernel check: /bin/true)
fifo_refused "run --initrd FIFO" "initrd .*f.fifo: not a non-empty regular file" \
  run --kernel /bin/true --initrd "$F"
fifo_refused "serve --raw FIFO --read-only" "f.fifo: not a disk" serve --raw "$F" --read-only --nbd "unix:$T/raw.sock"
