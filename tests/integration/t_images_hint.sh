#!/bin/bash
# An image fetched by reference names its layouts' parents by digest only (issue 24, item 2,
# and the STORE/layouts point of its review). A layered image (lazyblk commit over a base)
# is pushed to an HTTP store; copies of it are published whose top layout's parent hint
# is patched (lib/hintpatch.py) to "../x" (STORE/x a FIFO), to "hint.fifo"
# (STORE/layouts/hint.fifo a FIFO) and to an absolute path (a FIFO). On 7515cfa the hint
# was opened with a blocking open(): export, serve, warm and cas gc --remote hung for good.
# Now:
#   - the hint of a fetched layout is never opened: the parent is STORE/layouts/<digest>;
#     export, serve (read through NBD, then SIGTERM), warm and cas gc --remote work, and
#     give the image's bytes; a commit's own "../base.layout" hint works the same way;
#   - an absolute hint is refused with one line;
#   - a FIFO where a fetched file goes (the presence check) is replaced, not opened;
#   - cas gc --keep REF removes the files of STORE/layouts/ no kept image uses, after the
#     grace period (on 7515cfa it never removed any);
#   - an image whose files add up to more than 4 GiB is refused before anything is fetched.
# Every command that could block runs under `timeout`: a hang fails the test.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl nbdinfo debugfs python3; do
  command -v "$tool" >/dev/null || skip "t_images_hint: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx
TO="timeout -k 5 120"

# ---- a layered image, pushed by name
build_image a 2
mkdir -p "$T/c" "$T/www"
python3 "$TESTLIB/mkdelta.py" "$T/a.layout" "$T/d.delta" 7 >/dev/null
"$LAZYBLK" commit "$T/d.delta" --layout "$T/a.layout" --store "$T/a.store" \
  -o "$T/c/top.layout" >/dev/null
python3 - "$T/c/top.layout" <<'EOF' || die "the commit's hint is not ../a.layout"
import struct, sys
b = open(sys.argv[1], "rb").read()
n, = struct.unpack_from("<I", b, 200)
assert b[-n:] == b"../a.layout", b[-n:]
EOF
"$LAZYBLK" export "$T/c/top.layout" --store "$T/a.store" -o "$T/top.raw" >/dev/null
start_nginx "$T/www" --dav-gc
REF=${NGINX_URL}images
"$LAZYBLK" push --store "$T/a.store" --remote "$REF/good" "$T/c/top.layout" >/dev/null
TOP=$(head -c 4096 "$T/c/top.layout" | sha256sum | cut -d' ' -f1)
BASE=$(head -c 4096 "$T/a.layout" | sha256sum | cut -d' ' -f1)
S=$T/s
DOTDOT=$(python3 "$TESTLIB/hintpatch.py" "$T/www" good dotdot ../x)
FIFO=$(python3 "$TESTLIB/hintpatch.py" "$T/www" good fifo hint.fifo)

# ---- export by reference: the parent by its digest, whatever the hint says
for n in good dotdot fifo; do
  $TO "$LAZYBLK" export "$REF/$n" --store "$S" -o "$T/$n.raw" >/dev/null 2>"$T/$n.err" ||
    { cat "$T/$n.err" >&2; die "export of $n"; }
  cmp "$T/top.raw" "$T/$n.raw" || die "export of $n: not the image's bytes"
  # the FIFOs the hints name, once the export of good has made the store
  [ -p "$S/x" ] || mkfifo "$S/x" "$S/layouts/hint.fifo" "$T/abs.fifo"
done
[ -p "$S/x" ] && [ -p "$S/layouts/hint.fifo" ] || die "a FIFO at a hint was replaced"
echo "ok: export by reference of a commit's '../' hint, a '../x' FIFO hint, a FIFO hint"

# ---- serve by reference: every read through NBD, then SIGTERM
SOCK=$T/nbd.sock
URI="nbd+unix:///?socket=$SOCK"
start_server fifo "$URI" "$REF/fifo" --store "$S" --nbd "unix:$SOCK"
nbd_readcheck "$SOCK" "$T/top.raw" >"$T/r.json" || die "serve of fifo: $(cat "$T/r.json")"
json_expr "$T/r.json" "s['failed_bytes'] == 0"
kill -TERM "$SRV"
timeout 120 tail --pid="$SRV" -f /dev/null || die "serve did not end after SIGTERM"
rc=0; wait "$SRV" || rc=$?
[ $rc -eq 0 ] || { cat "$T/fifo.err" >&2; die "serve: exit $rc after SIGTERM"; }
echo "ok: serve by reference of the FIFO hint image, SIGTERM ends it"

# ---- warm and cas gc --remote (which fetches every image of the store)
$TO "$LAZYBLK" warm "$REF/dotdot" --all --store "$S" >/dev/null 2>"$T/warm.err" ||
  { cat "$T/warm.err" >&2; die "warm of dotdot"; }
$TO "$LAZYBLK" cas gc --remote "$NGINX_URL" --store "$S" --dry-run >"$T/gc.out" 2>"$T/gc.err" ||
  { cat "$T/gc.err" >&2; die "cas gc --remote"; }
grep -q "kept .* (3 images)" "$T/gc.out" || die "cas gc --remote: $(cat "$T/gc.out")"
echo "ok: warm and cas gc --remote of images with FIFO hints"

# ---- an absolute hint: refused with one line
ABS=$(python3 "$TESTLIB/hintpatch.py" "$T/www" good abs "$T/abs.fifo")
expect_fail_line "absolute hint" "base layout sha256:$BASE: the parent hint is an absolute path \(refused in an image fetched by reference\)" -- \
  $TO "$LAZYBLK" export "$REF/abs" --store "$S" -o "$T/abs.raw"
no_partial_output "$T/abs.raw"

# ---- the presence check: a FIFO where a fetched layout goes is replaced, not opened
mkdir -p "$T/s2/layouts"
mkfifo "$T/s2/layouts/$TOP.layout"
$TO "$LAZYBLK" export "$REF/good" --store "$T/s2" -o "$T/s2.raw" >/dev/null 2>"$T/s2.err" ||
  { cat "$T/s2.err" >&2; die "export with a FIFO at the layout's place"; }
cmp "$T/top.raw" "$T/s2.raw" || die "export with a FIFO at the layout's place: wrong bytes"
[ -f "$T/s2/layouts/$TOP.layout" ] && [ ! -p "$T/s2/layouts/$TOP.layout" ] ||
  die "the FIFO at the layout's place was not replaced"
echo "ok: a FIFO at STORE/layouts/<digest>.layout is fetched over"

# ---- cas gc --keep REF: the files of STORE/layouts/ no kept image uses go
for d in "$TOP" "$BASE" "$DOTDOT" "$FIFO" "$ABS"; do
  [ -f "$S/layouts/$d.layout" ] || die "$d.layout was not fetched into $S/layouts"
done
$TO "$LAZYBLK" cas gc --store "$S" --keep "$REF/good" >"$T/g1.out" || die "cas gc --keep"
[ -f "$S/layouts/$DOTDOT.layout" ] || die "a fresh layout was removed within the grace period"
$TO "$LAZYBLK" cas gc --store "$S" --keep "$REF/good" --grace 0 >"$T/g2.out" || die "cas gc --keep"
grep -q ", 3 files of $S/layouts (" "$T/g2.out" || die "cas gc: $(cat "$T/g2.out")"
for d in "$DOTDOT" "$FIFO" "$ABS"; do
  [ ! -e "$S/layouts/$d.layout" ] || die "cas gc left $d.layout, of no kept image"
done
[ -f "$S/layouts/$TOP.layout" ] && [ -f "$S/layouts/$BASE.layout" ] ||
  die "cas gc removed a layout of the kept image"
[ -p "$S/layouts/hint.fifo" ] || die "cas gc removed a name lazyblk does not write"
$TO "$LAZYBLK" export "$REF/good" --store "$S" -o "$T/again.raw" >/dev/null || die "export after gc"
cmp "$T/top.raw" "$T/again.raw" || die "export after gc: wrong bytes"
echo "ok: cas gc removes the fetched layouts no kept image uses: $(cat "$T/g2.out")"

# ---- what one image may put in STORE/layouts: 4 GiB in all
python3 - "$T/www" <<'EOF'
import json, os, sys
www = sys.argv[1]
img = json.load(open(os.path.join(www, "images", "good", "image.json")))
for l in img["layouts"]:
    l["size"] = 3 << 30
os.makedirs(os.path.join(www, "images", "huge"))
json.dump(img, open(os.path.join(www, "images", "huge", "image.json"), "w"))
EOF
expect_fail_line "an image of more than 4 GiB" "image huge at .*: its files are more than 4294967296 bytes in all, more than lazyblk fetches" -- \
  $TO "$LAZYBLK" export "$REF/huge" --store "$T/s3" -o "$T/huge.raw"
[ -z "$(ls -A "$T/s3/layouts" 2>/dev/null)" ] || die "files fetched for a refused image"
