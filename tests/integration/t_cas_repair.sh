#!/bin/bash
# cas verify --repair --remote URL: corrupt chunks (a flipped byte, a truncated file) are
# reported by cas verify, fetched again from a copy of the store served by nginx, checked and
# put in place, so that a second verify is clean; a chunk the remote does not have, or has
# bad too, stays bad (the store's copy untouched) and the exit status says so; a bad plain
# copy is removed. --repair and --remote go together, and only with verify.
# (a copy of the store made with cp stands for one made with lazyblk push)
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl python3; do
	command -v "$tool" >/dev/null || skip "t_cas_repair: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx

mkdir -p "$T/src"
for i in 1 2 3 4 5 6; do head -c 200000 /dev/urandom >"$T/src/f$i"; done
"$LAZYBLK" import "$T/src" --store "$T/s" -o "$T/a.manifest" --chunk-size 64K >/dev/null
cp -a "$T/s" "$T/remote"
start_nginx "$T/remote"
URL=$NGINX_URL

mapfile -t C < <(cd "$T/s/chunks" && find . -type f -printf '%f\n' | sort | head -4)
[ "${#C[@]}" -eq 4 ] || die "fewer than 4 chunks"
# a bad plain copy (a server writes them; any file there is checked)
bad_plain() { mkdir -p "$T/s/plain/${C[0]:0:2}" && echo garbage >"$T/s/plain/${C[0]:0:2}/${C[0]}"; }
verify() { "$LAZYBLK" cas verify --store "$T/s" "$@"; }

# ---- usage
expect_error "--repair without --remote" "--repair needs --remote URL" -- verify --repair
expect_rc 2 verify --repair
expect_error "--remote without --repair" "--remote is only for --repair" -- verify --remote "$URL"
expect_error "--repair for gc" "--repair is only for cas verify" -- \
	"$LAZYBLK" cas gc --store "$T/s" --keep "$T/a.manifest" --repair
expect_error "a URL of no remote" "ftp://x" -- verify --repair --remote ftp://x
verify >/dev/null || die "the store is not clean to start with"

# ---- two bad chunks and a bad plain copy: reported, then repaired
flip_byte "$(chunk_file "$T/s" "${C[0]}")"
f1=$(chunk_file "$T/s" "${C[1]}")
head -c "$(( $(stat -c %s "$f1") / 2 ))" "$f1" >"$T/half" && cat "$T/half" >"$f1"
expect_error "verify finds them" "2 corrupt chunks in $T/s" -- verify
grep -q "^corrupt: ${C[0]} " "$T/.out" && grep -q "^corrupt: ${C[1]} " "$T/.out" ||
	die "verify did not name both chunks: $(cat "$T/.out")"
bad_plain
verify --repair --remote "$URL" >"$T/rep.out" 2>"$T/rep.err" ||
	die "repair failed: $(cat "$T/rep.out" "$T/rep.err")"
[ ! -s "$T/rep.err" ] || die "repair wrote to stderr: $(cat "$T/rep.err")"
for c in "${C[0]}" "${C[1]}"; do
	grep -q "^repaired: $c$" "$T/rep.out" || die "$c not repaired: $(cat "$T/rep.out")"
	cmp "$(chunk_file "$T/s" "$c")" "$(chunk_file "$T/remote" "$c")" || die "$c: not the remote's"
done
grep -q "2 corrupt, 2 repaired, 0 still bad" "$T/rep.out" || die "summary: $(cat "$T/rep.out")"
grep -q "1 bad (removed)" "$T/rep.out" || die "plain summary: $(cat "$T/rep.out")"
[ -z "$(ls "$T/s/tmp")" ] || die "repair left files in tmp/: $(ls "$T/s/tmp")"
verify >/dev/null || die "a second verify is not clean"
echo "ok: two corrupt chunks and a bad plain copy repaired; a second verify is clean"

# ---- one the remote does not have, one it has bad too: they stay bad
flip_byte "$(chunk_file "$T/s" "${C[2]}")"
flip_byte "$(chunk_file "$T/s" "${C[3]}")"
cp "$(chunk_file "$T/s" "${C[2]}")" "$T/c2.bad"
rm "$(chunk_file "$T/remote" "${C[2]}")"
flip_byte "$(chunk_file "$T/remote" "${C[3]}")" 3
# one line on stderr: the first failure (the remote's "not found") or the count not repaired
expect_error "unrepairable chunks" "lazyblk: cas verify: " -- verify --repair --remote "$URL"
grep -Eq "chunk ${C[2]}: not found at |2 corrupt chunks in $T/s not repaired" "$T/.err" ||
	die "unrepairable chunks: $(cat "$T/.err")"
grep -q "^still bad: ${C[2]} (the remote does not have it)$" "$T/.out" ||
	die "missing chunk: $(cat "$T/.out")"
grep -q "^still bad: ${C[3]} (the remote's copy is bad too: " "$T/.out" ||
	die "bad remote chunk: $(cat "$T/.out")"
grep -q "2 corrupt, 0 repaired, 2 still bad" "$T/.out" || die "summary: $(cat "$T/.out")"
cmp "$T/c2.bad" "$(chunk_file "$T/s" "${C[2]}")" || die "an unrepaired chunk was changed"
expect_rc 1 verify
echo "ok: chunks the remote cannot give stay bad, exit 1"
# --json with --repair: one object on stdout with the counts, exit 1 all the same
rc=0
verify --repair --remote "$URL" --json >"$T/rep.json" 2>/dev/null || rc=$?
[ "$rc" -eq 1 ] || die "repair --json: exit $rc"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["corrupt"] == 2 and d["repaired"] == 0 and d["still_bad"] == 2, d
assert len(d["bad"]) == 2, d' "$T/rep.json" || die "repair --json: $(cat "$T/rep.json")"
echo "ok: verify --repair --json"
