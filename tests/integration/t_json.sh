#!/bin/bash
# --json: import, mkfs, export, push, cas stats and cas verify print their summary as one
# JSON object on stdout (nothing else there), with the same figures as the text and as the
# other commands (manifest show --summary, the store's files); a path that needs escaping
# stays valid JSON; verify lists the bad chunks and still exits 1; without --json the text
# is unchanged.
. "$(dirname "$0")/lib/common.sh"
command -v python3 >/dev/null || skip "t_json: python3 is not installed"

# jcheck NAME FILE PYEXPR...: FILE is exactly one JSON object (d) and each PYEXPR holds.
jcheck() {
  local name=$1 file=$2
  shift 2
  python3 - "$file" "$@" <<'EOF' || die "$name: $(cat "$file")"
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("}\n") and text.count("\n") == 1, "not one line of JSON: %r" % text
d = json.loads(text)
for e in sys.argv[2:]:
    assert eval(e), e
EOF
  echo "ok: $name"
}
nfiles() { find "$1" -type f | wc -l; }
nbytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'; }

SRC="$T/we\"ird"   # a quote in the path: escaped in the JSON
mkdir -p "$SRC/d"
head -c 3M /dev/urandom >"$SRC/big"
for i in 1 2 3; do head -c 20000 /dev/urandom >"$SRC/d/f$i"; done
ln -s big "$SRC/link"

# ---- import
"$LAZYBLK" import "$SRC" --store "$T/s" -o "$T/m" --json >"$T/import.json" 2>"$T/err" ||
  die "import --json: $(cat "$T/err")"
[ ! -s "$T/err" ] || die "import --json wrote to stderr: $(cat "$T/err")"
"$LAZYBLK" manifest show --summary "$T/m" >"$T/summary"
chunks=$(sed -n 's/^chunks .* references to \([0-9]*\) chunks.*/\1/p' "$T/summary")
fbytes=$(sed -n 's/^file bytes *\([0-9]*\) .*/\1/p' "$T/summary")
digest=$(sed -n 's/^manifest *\(sha256:[0-9a-f]*\) .*/\1/p' "$T/summary")
jcheck "import --json" "$T/import.json" \
  "d['src'] == '$T/we\"ird'" "d['entries'] == 7" "d['chunks'] == $chunks" \
  "d['file_bytes'] == $fbytes" "d['new_chunks'] == $(nfiles "$T/s/chunks")" \
  "d['new_bytes'] == $(nbytes "$T/s/chunks")" "d['dup_chunks'] == 0" \
  "d['manifest'] == '$T/m'" "d['manifest_digest'] == '$digest'" \
  "isinstance(d['seconds'], float)"
"$LAZYBLK" import "$SRC" --store "$T/s" -o "$T/m" --json >"$T/import2.json"
jcheck "import --json again" "$T/import2.json" "d['new_chunks'] == 0" "d['new_bytes'] == 0" \
  "d['dup_chunks'] == $chunks"
# the text is unchanged
"$LAZYBLK" import "$SRC" --store "$T/s" -o "$T/m" >"$T/import.txt"
grep -Eq "^imported .*: 7 entries, .* in $chunks chunks \(0 new, 0 B stored\), [0-9.]+ s$" \
  "$T/import.txt" && grep -Eq "^manifest $T/m sha256:[0-9a-f]{64}$" "$T/import.txt" &&
  [ "$(wc -l <"$T/import.txt")" -eq 2 ] || die "import text: $(cat "$T/import.txt")"

# ---- mkfs
"$LAZYBLK" mkfs "$T/m" -o "$T/l" --json >"$T/mkfs.json"
"$LAZYBLK" mkfs "$T/m" -o "$T/l2" >"$T/mkfs.txt"
ldigest=$(sed -n 's/^layout .* \(sha256:[0-9a-f]*\)$/\1/p' "$T/mkfs.txt")
groups=$(sed -n 's/.* \([0-9]*\) groups,.*/\1/p' "$T/mkfs.txt")
jcheck "mkfs --json" "$T/mkfs.json" "d['layout'] == '$T/l'" "d['layout_digest'] == '$ldigest'" \
  "d['groups'] == $groups" "d['size_bytes'] == d['blocks'] * 4096" "d['inodes'] > 0" \
  "d['used_blocks'] > 0" "d['data_runs'] > 0" "len(d['uuid']) == 36" "d['manifest'] == '$T/m'"
[ "$(wc -l <"$T/mkfs.txt")" -eq 2 ] && grep -q "^mkfs $T/m: [0-9]* MiB ext4, $groups groups" \
  "$T/mkfs.txt" || die "mkfs text: $(cat "$T/mkfs.txt")"

# ---- export
"$LAZYBLK" export "$T/l" --store "$T/s" -o "$T/disk.raw" --json >"$T/export.json"
jcheck "export --json" "$T/export.json" "d['layout'] == '$T/l'" "d['output'] == '$T/disk.raw'" \
  "d['disk_bytes'] == $(stat -c %s "$T/disk.raw")" "d['chunks'] == $chunks" \
  "d['chunk_loads'] >= d['chunks']" "d['written_bytes'] <= d['disk_bytes']" \
  "d['mapped_bytes'] >= $fbytes" "d['cas']['disk_hits'] >= $chunks" \
  "d['cas']['remote_fetches'] == 0"
"$LAZYBLK" export "$T/l" --store "$T/s" -o "$T/disk2.raw" >"$T/export.txt"
grep -Eq "^exported $T/l to $T/disk2.raw: .* disk, .* of non-zero blocks, $chunks chunks, [0-9.]+ s$" \
  "$T/export.txt" || die "export text: $(cat "$T/export.txt")"

# ---- cas stats
"$LAZYBLK" cas stats --store "$T/s" --json >"$T/stats.json"
jcheck "cas stats --json" "$T/stats.json" "d['chunks'] == $(nfiles "$T/s/chunks")" \
  "d['stored_bytes'] == $(nbytes "$T/s/chunks")" "d['raw_bytes'] >= $fbytes" \
  "d['bad_headers'] == 0" "d['plain_files'] == 0" "d['plain_bytes'] == 0"
"$LAZYBLK" cas stats --store "$T/s" | grep -q "^chunks        $(nfiles "$T/s/chunks")$" ||
  die "cas stats text"

# ---- cas verify: clean, then with a corrupt chunk (exit 1, listed, text unchanged)
"$LAZYBLK" cas verify --store "$T/s" --json >"$T/verify.json"
n=$(nfiles "$T/s/chunks")
jcheck "cas verify --json" "$T/verify.json" "d['checked'] == $n" "d['ok'] == $n" \
  "d['corrupt'] == 0" "d['plain_checked'] == 0" "d['plain_bad'] == 0" "d['bad'] == []"
bad=$(find "$T/s/chunks" -type f -size +100k | head -1)
printf 'garbage' | dd of="$bad" bs=1 seek=100 conv=notrunc status=none
rc=0
"$LAZYBLK" cas verify --store "$T/s" --json >"$T/verify2.json" 2>"$T/err" || rc=$?
[ "$rc" -eq 1 ] || die "cas verify --json of a corrupt store: exit $rc"
grep -q "^lazyblk: cas verify: 1 corrupt chunk in " "$T/err" || die "verify: $(cat "$T/err")"
jcheck "cas verify --json, corrupt" "$T/verify2.json" "d['corrupt'] == 1" "d['ok'] == $n - 1" \
  "d['bad'][0]['digest'] == 'sha256:$(basename "$bad")'" "d['bad'][0]['plain'] is False" \
  "len(d['bad'][0]['reason']) > 0" "len(d['bad']) == 1"
rc=0
"$LAZYBLK" cas verify --store "$T/s" >"$T/verify.txt" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] && grep -q "^corrupt: $(basename "$bad") (" "$T/verify.txt" &&
  grep -q "^verified $n chunks: $((n - 1)) ok, 1 corrupt$" "$T/verify.txt" ||
  die "verify text: $(cat "$T/verify.txt")"

# ---- usage
expect_error "gc --json" "--json is for cas stats and cas verify" -- \
  "$LAZYBLK" cas gc --store "$T/s" --keep "$T/l" --json

# ---- push (a private nginx with WebDAV)
if command -v nginx >/dev/null; then
  . "$TESTLIB/remote.sh"
  "$LAZYBLK" import "$SRC" --store "$T/p" -o "$T/pm" >/dev/null
  np=$(nfiles "$T/p/chunks")
  mkdir -p "$T/www"
  start_nginx "$T/www" --dav
  "$LAZYBLK" push --store "$T/p" --remote "$NGINX_URL" --json >"$T/push.json"
  jcheck "push --json" "$T/push.json" "d['remote'] == '$NGINX_URL'" "d['chunks'] == $np" \
    "d['uploaded'] == $np" "d['uploaded_bytes'] == $(nbytes "$T/p/chunks")" \
    "d['present'] == 0" "isinstance(d['seconds'], float)"
  "$LAZYBLK" push --store "$T/p" --remote "$NGINX_URL" --json >"$T/push2.json"
  jcheck "push --json again" "$T/push2.json" "d['uploaded'] == 0" "d['present'] == $np"
  "$LAZYBLK" push --store "$T/p" --remote "$NGINX_URL" >"$T/push.txt"
  grep -Eq "^pushed $np chunks to .*: 0 uploaded \(0 B\), $np already there, [0-9.]+ s$" \
    "$T/push.txt" || die "push text: $(cat "$T/push.txt")"
else
  echo "push: skipped (nginx is not installed)"
fi
echo "t_json: ok"
