#!/bin/bash
# Issue 24, item 5: text a registry or an image controls never reaches the terminal as it is.
#   - trace show: paths with an escape sequence, a newline that forges a line, a
#     right-to-left override, bytes that are not UTF-8 and a backslash are printed escaped
#     (\xHH, \\); --json still has them byte for byte;
#   - an error line naming a hostile tar member comes out escaped (the logger's pass);
#   - images ls and cas gc --remote of a registry whose tag list holds hostile names (an
#     escape sequence, "../x", a space, 129 bytes, a number): those are skipped and counted
#     (a warning, "tags_skipped" in --json, a clause in gc's line), the real image tag is
#     listed and its chunks kept; before, one such tag ended the whole listing or gc.
. "$(dirname "$0")/lib/common.sh"
for tool in docker-registry curl python3; do
  command -v "$tool" >/dev/null || skip "t_text_output: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_registry

# clean FILE: no control byte but \n, no DEL, valid UTF-8 without C1 or bidi controls
clean() {
  python3 - "$1" <<'PY' || die "$1 holds raw control bytes: $(od -c "$1" | head -5)"
import sys
b = open(sys.argv[1], "rb").read()
bad = [c for c in b if (c < 0x20 and c != 0x0a) or c == 0x7f]
s = b.decode("utf-8")  # raises on bytes that are not UTF-8
bad += [c for c in s if 0x80 <= ord(c) <= 0x9f or ord(c) in (0x61c, 0x200e, 0x200f)
        or 0x2028 <= ord(c) <= 0x202e or 0x2066 <= ord(c) <= 0x2069]
sys.exit(1 if bad else 0)
PY
}

# ---- trace show: a trace whose paths an image chose
python3 - "$T/hostile.trace" <<'PY'
import hashlib, struct, sys
paths = [b"/\x1b]0;pwned\x07", b"/a\nlazyblk: forged", b"/\xe2\x80\xaetxt.exe",
         b"/caf\xc3\xa9\xff", b"/back\\slash"]
strings, offs = b"\0", []
for p in paths:
    offs.append(len(strings))
    strings += p + b"\0"
recs = b"".join(struct.pack("<QQQII", 10 * i, 4096 * i, 0, 4096, o) for i, o in enumerate(offs))
hdr = struct.pack("<8sIIQQ32s32sQQI44x", b"LZBKTRAC", 1, 160, len(paths), len(strings),
                  b"\1" * 32, b"\2" * 32, 1764633600, 1000, 0)
body = hdr + recs + strings
open(sys.argv[1], "wb").write(body + hashlib.sha256(body).digest())
PY
"$LAZYBLK" trace show "$T/hostile.trace" >"$T/show.txt" 2>"$T/show.err" || die "trace show failed"
clean "$T/show.txt"
for want in '/\x1b]0;pwned\x07 0+4096' '/a\x0alazyblk: forged 0+4096' \
  '/\xe2\x80\xaetxt.exe 0+4096' '/café\xff 0+4096' '/back\\slash 0+4096'; do
  grep -qF -- "$want" "$T/show.txt" || die "trace show lacks '$want': $(cat "$T/show.txt")"
done
[ "$(grep -c '^lazyblk' "$T/show.txt")" -eq 0 ] || die "trace show printed a forged line"
"$LAZYBLK" trace show --json "$T/hostile.trace" >"$T/show.json"
python3 - "$T/show.json" <<'PY' || die "trace show --json lost the bytes"
import json, sys
r = json.load(open(sys.argv[1]))["records"]
got = [x["path"].encode() if "path" in x else bytes.fromhex(x["path_hex"]) for x in r]
assert got == [b"/\x1b]0;pwned\x07", b"/a\nlazyblk: forged", b"/\xe2\x80\xaetxt.exe",
               b"/caf\xc3\xa9\xff", b"/back\\slash"], got
PY
echo "ok: trace show escapes the paths of an image (--json keeps them exact)"

# ---- an error line that names a member of a hostile tar
python3 - "$T/evil.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    i = tarfile.TarInfo("x/../../\x1b[2J\x1b]0;pwned\x07\nlazyblk: forged")
    i.size = 1
    t.addfile(i, io.BytesIO(b"x"))
PY
rc=0
"$LAZYBLK" import "$T/evil.tar" --store "$T/s0" -o "$T/evil.manifest" >/dev/null \
  2>"$T/evil.err" || rc=$?
[ "$rc" -ne 0 ] || die "a tar member climbing out of the image was imported"
[ "$(wc -l <"$T/evil.err")" -eq 1 ] || die "import: not one line: $(cat -A "$T/evil.err")"
clean "$T/evil.err"
grep -qF '\x1b[2J\x1b]0;pwned\x07\x0alazyblk: forged' "$T/evil.err" ||
  die "import error line: $(cat -A "$T/evil.err")"
echo "ok: an error naming a hostile tar member is one escaped line: $(cat "$T/evil.err")"

# ---- a registry whose tag list holds hostile names
build_image a 2
start_registry
R=oci://127.0.0.1:$REG_PORT/t/img
"$LAZYBLK" push --store "$T/a.store" --remote "$R:v1" "$T/a.layout" >/dev/null
long=$(printf 'a%.0s' $(seq 1 129))
tags="[\"\\u001b]0;pwned\\u0007\",\"../x\",\"v1\",\"a b\",\"$long\",7,\"lazyblk-chunks\"]"
start_proxy "http://127.0.0.1:$REG_PORT" --tags-list "{\"name\":\"t/img\",\"tags\":$tags}"
P=oci://127.0.0.1:$PROXY_PORT/t/img
"$LAZYBLK" images ls --remote "$P" >"$T/ls.txt" 2>"$T/ls.err" ||
  die "images ls failed: $(cat -A "$T/ls.err")"
clean "$T/ls.txt"
clean "$T/ls.err"
grep -q '^v1 ' "$T/ls.txt" || die "images ls lacks v1: $(cat "$T/ls.txt")"
[ "$(wc -l <"$T/ls.txt")" -eq 1 ] || die "images ls: $(cat -A "$T/ls.txt")"
grep -q "warning: 5 tags of the registry's list skipped: not valid tag names" "$T/ls.err" ||
  die "images ls warning: $(cat "$T/ls.err")"
"$LAZYBLK" images ls --remote "$P" --json >"$T/ls.json" 2>/dev/null || die "images ls --json failed"
json_expr "$T/ls.json" 's["tags_skipped"] == 5 and [i["name"] for i in s["images"]] == ["v1"]'
echo "ok: images ls skips and counts 5 hostile tags, lists v1"

"$LAZYBLK" cas gc --remote "$P:lazyblk-chunks" >"$T/gc.txt" 2>"$T/gc.err" ||
  die "cas gc --remote failed: $(cat -A "$T/gc.err")"
clean "$T/gc.txt"
grep -q "(1 image tag); 5 tags of the registry's list skipped (not valid tag names)" "$T/gc.txt" ||
  die "gc line: $(cat "$T/gc.txt")"
"$LAZYBLK" export "$R:v1" --store "$T/s1" -o "$T/s1.raw" >/dev/null
cmp "$T/s1.raw" "$T/a.raw" || die "the image's chunks after gc"
echo "ok: cas gc --remote skips the 5 hostile tags and keeps v1's chunks"
