#!/bin/bash
# Acceptance (issue 16, item 1): lazyblk import docker://HOST:PORT/REPO[:TAG|@DIGEST] pulls
# from a registry. A multi-layer image built with umoci from Debian packages, its index
# holding linux/amd64 and a synthetic linux/arm64 image (lib/umoci_image.sh), is put into a
# private docker-registry with skopeo copy --all; then
#   - docker:// (the host's platform, amd64) gives the same lazyblk manifest digest as
#     skopeo copy of the tag to an OCI layout followed by import oci:, and as the tag's
#     index by digest (@sha256:…);
#   - --platform linux/arm64 picks the other image (another digest), and so does
#     import oci:DIR:TAG --platform linux/arm64 of the layout with the index;
#   - oci-archive:FILE[:TAG] (skopeo copy --all … oci-archive:) gives the same digests;
#   - errors, one line each: an unknown tag (the tag and repository named), a platform the
#     index lacks (what it has listed), an unreachable registry (host:port named), a plain-
#     HTTP registry asked over https (--insecure suggested), and a blob a proxy tampers with
#     (faultproxy.py --mode flip: refused naming the blob's digest; nothing written to -o,
#     STORE/tmp left empty, cas verify clean);
#   - an oci-archive with a hostile member name is refused.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/remote.sh"
. "$TESTLIB/umoci_image.sh"
need_registry
command -v skopeo >/dev/null || skip "skopeo is not installed (scripts/deps.sh)"
cd "$T"

build_multiarch_image "$T/img" t1
start_registry
REG=127.0.0.1:$REG_PORT
skopeo copy -q --all --dest-tls-verify=false oci:"$T/img":t1 "docker://$REG/lz/multi:t1" >/dev/null
skopeo copy -q --src-tls-verify=false "docker://$REG/lz/multi:t1" oci:"$T/one":t1 >/dev/null
skopeo copy -q --all --src-tls-verify=false "docker://$REG/lz/multi:t1" \
  oci-archive:"$T/multi.tar":t1 >/dev/null

# digest SRC [ARGS]: the lazyblk manifest digest of importing SRC (into one store)
digest() {
  local src=$1 out
  shift
  out=$("$LAZYBLK" import "$src" --store "$T/store" -o "$T/m.manifest" --json "$@") ||
    die "import $src $* failed"
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])["manifest_digest"])' "$out"
}
ref_oci=$(digest oci:"$T/one":t1)
pull_amd=$(digest "docker://$REG/lz/multi:t1" --insecure)
[ "$pull_amd" = "$ref_oci" ] || die "docker:// gives $pull_amd, skopeo + oci: gives $ref_oci"
echo "ok: docker:// (amd64) = skopeo copy + import oci: ($pull_amd)"
pull_arm=$(digest "docker://$REG/lz/multi:t1" --insecure --platform linux/arm64)
[ "$pull_arm" != "$pull_amd" ] || die "--platform linux/arm64 gives the amd64 image"
echo "ok: --platform linux/arm64 picks another image ($pull_arm)"
[ "$(digest oci:"$T/img":t1 --platform linux/arm64)" = "$pull_arm" ] ||
  die "oci:DIR:TAG --platform linux/arm64 differs from docker:// --platform linux/arm64"
[ "$(digest oci:"$T/img":t1)" = "$pull_amd" ] || die "oci:DIR:TAG of the index differs"
echo "ok: oci:DIR:TAG with an index follows --platform too"
[ "$(digest "docker://$REG/lz/multi@$MULTIARCH_INDEX" --insecure)" = "$pull_amd" ] ||
  die "docker://…@INDEX-DIGEST differs"
[ "$(digest "docker://$REG/lz/multi@$MULTIARCH_ARM64" --insecure)" = "$pull_arm" ] ||
  die "docker://…@ARM64-MANIFEST-DIGEST differs"
echo "ok: by digest (the index, a manifest)"
[ "$(digest oci-archive:"$T/multi.tar")" = "$pull_amd" ] || die "oci-archive: differs"
[ "$(digest oci-archive:"$T/multi.tar":t1 --platform linux/arm64)" = "$pull_arm" ] ||
  die "oci-archive:FILE:TAG --platform linux/arm64 differs"
echo "ok: oci-archive: gives the same digests"
[ -z "$(ls -A "$T/store/tmp" 2>/dev/null)" ] || die "STORE/tmp not empty: $(ls "$T/store/tmp")"

imp() { "$LAZYBLK" import "$@" --store "$T/s2" -o "$T/bad.manifest"; }
expect_error "unknown tag" "docker://$REG/lz/multi:nope: tag 'nope' not found in repository $REG/lz/multi" \
  -- imp "docker://$REG/lz/multi:nope" --insecure
expect_error "missing platform" "has no linux/s390x image (platforms: linux/amd64, linux/arm64/v8)" \
  -- imp "docker://$REG/lz/multi:t1" --insecure --platform linux/s390x
dead=$(free_port)
expect_error "unreachable registry" "registry 127.0.0.1:$dead unreachable" \
  -- imp "docker://127.0.0.1:$dead/lz/multi:t1" --insecure
expect_error "plain HTTP without --insecure" "needs --insecure" -- imp "docker://$REG/lz/multi:t1"
expect_error "unknown digest" "manifest sha256:$(printf '%064d' 0) not found" \
  -- imp "docker://$REG/lz/multi@sha256:$(printf '%064d' 0)" --insecure
expect_error "bad platform" "--platform: 'linux' is not OS/ARCH" -- imp "docker://$REG/lz/multi:t1" --platform linux
expect_error "--insecure elsewhere" "--insecure is for docker:// sources only" -- imp oci:"$T/one":t1 --insecure
expect_rc 2 imp oci:"$T/one":t1 --insecure
[ ! -e "$T/bad.manifest" ] || die "a failed pull wrote -o"

# a proxy that flips a byte of every blob body
start_proxy "http://$REG" --mode flip
expect_fail_line "tampered blob" "docker://127\.0\.0\.1:$PROXY_PORT/lz/multi:t1: blob sha256:[0-9a-f]{64}: digest mismatch: the registry sent sha256:[0-9a-f]{64}" \
  -- imp "docker://127.0.0.1:$PROXY_PORT/lz/multi:t1" --insecure
bad=$(sed -n 's/.*blob sha256:\([0-9a-f]\{64\}\).*/\1/p' "$T/.err")
[ -e "$T/one/blobs/sha256/$bad" ] || die "the blob named ($bad) is not one of the image's"
[ ! -e "$T/bad.manifest" ] || die "the tampered pull wrote -o"
[ -z "$(ls -A "$T/s2/tmp" 2>/dev/null)" ] || die "the tampered pull left $(ls "$T/s2/tmp")"
"$LAZYBLK" cas verify --store "$T/s2" >/dev/null || die "cas verify after the tampered pull"
proxy_mode pass
[ "$(digest "docker://127.0.0.1:$PROXY_PORT/lz/multi:t1" --insecure)" = "$pull_amd" ] ||
  die "through the proxy (pass) the digest differs"
echo "ok: a tampered blob is refused, nothing written, the store consistent"

# Ctrl-C while the blobs are on their way (the proxy's gate holds every blob GET until the
# SIGINT was sent: the pull is provably mid-fetch): exit 130, one line, no -o, nothing left
# in STORE/tmp
proxy_mode gate:all
proxy_reset
rm -rf "$T/s3"
env --default-signal=INT "$LAZYBLK" import "docker://127.0.0.1:$PROXY_PORT/lz/multi:t1" --insecure \
  --store "$T/s3" -o "$T/int.manifest" >"$T/int.out" 2>"$T/int.err" &
pid=$!
proxy_wait gate_waiting 1 "$pid"
kill -INT "$pid"
proxy_release
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 130 ] || { cat "$T/int.err" >&2; die "interrupted pull: exit $rc, want 130"; }
[ "$(wc -l <"$T/int.err")" -eq 1 ] && grep -q "^lazyblk: import: interrupted" "$T/int.err" ||
  { cat "$T/int.err" >&2; die "interrupted pull: not one 'interrupted' line"; }
[ ! -e "$T/int.manifest" ] || die "the interrupted pull wrote -o"
[ -z "$(ls -A "$T/s3/tmp" 2>/dev/null)" ] || die "the interrupted pull left $(ls "$T/s3/tmp")"
echo "ok: Ctrl-C during the fetch: exit 130, nothing left"

# the progress line (-p: plain lines, one a second) while the blobs come (1.5 s each)
proxy_mode delay:all:1.5
"$LAZYBLK" -p import "docker://127.0.0.1:$PROXY_PORT/lz/multi:t1" --insecure --store "$T/s3" \
  -o "$T/p.manifest" >/dev/null 2>"$T/p.err" || { cat "$T/p.err" >&2; die "pull with -p failed"; }
grep -qE "^fetching docker://127\.0\.0\.1:$PROXY_PORT/lz/multi:t1: [0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]?i?B \([0-9]+%\)" \
  "$T/p.err" || die "no fetching progress line: $(cat "$T/p.err")"
echo "ok: progress: $(grep -m1 ^fetching "$T/p.err")"
proxy_mode pass

# token auth (credentials from LAZYBLK_REMOTE_USER/PASSWORD, as the oci:// remote takes
# them), blobs redirected to another host (which never sees them), and 500s retried
start_proxy "http://$REG" --auth alice:s3cret --redirect-blobs --mode err500:1
P=127.0.0.1:$PROXY_PORT
expect_error "no credentials" "the registry wants credentials (set LAZYBLK_REMOTE_USER" \
  -- imp "docker://$P/lz/multi:t1" --insecure
[ "$(LAZYBLK_REMOTE_USER=alice LAZYBLK_REMOTE_PASSWORD=s3cret digest "docker://$P/lz/multi:t1" \
  --insecure --store "$T/s4")" = "$pull_amd" ] || die "the authenticated pull differs"
[ "$(proxy_stat tokens_issued)" -gt 0 ] || die "no token was issued: $(proxy_stats)"
[ "$(proxy_stat redirects)" -gt 0 ] || die "no blob was redirected: $(proxy_stats)"
[ "$(proxy_stat leaked_auth)" -eq 0 ] || die "credentials sent to the redirect target: $(proxy_stats)"
[ "$(proxy_stat faults_injected)" -gt 0 ] || die "no 500 was injected: $(proxy_stats)"
echo "ok: token auth, redirects without credentials, a 500 retried"

# a blob cut off halfway (the connection reset) is fetched again from its start
proxy_mode reset
proxy_reset
[ "$(LAZYBLK_REMOTE_USER=alice LAZYBLK_REMOTE_PASSWORD=s3cret digest "docker://$P/lz/multi:t1" \
  --insecure --store "$T/s5")" = "$pull_amd" ] ||
  die "the pull with resets differs"
[ "$(proxy_stat faults_injected)" -gt 0 ] || die "no reset was injected: $(proxy_stats)"
echo "ok: blobs cut off halfway are fetched again ($(proxy_stat faults_injected) resets)"

# an oci-archive with a hostile member
mkdir -p "$T/hostile" && cp -a "$T/one/." "$T/hostile/"
echo x >"$T/x" && tar -C "$T/hostile" -cf "$T/hostile.tar" . -P "$T/x" 2>/dev/null
expect_error "oci-archive with a hostile member" "is not a file of an OCI image layout (refused)" \
  -- imp oci-archive:"$T/hostile.tar"
# a truncated oci-archive, one without oci-layout, a blob member whose content was changed
head -c $(( $(stat -c %s "$T/multi.tar") / 2 )) "$T/multi.tar" >"$T/trunc.tar"
expect_fail_line "truncated oci-archive" "oci-archive:.*trunc\.tar: " -- imp oci-archive:"$T/trunc.tar"
mkdir -p "$T/nolayout" && cp -a "$T/one/." "$T/nolayout/" && rm "$T/nolayout/oci-layout"
tar -C "$T/nolayout" -cf "$T/nolayout.tar" .
expect_error "oci-archive without oci-layout" "no oci-layout member (not an OCI image archive)" \
  -- imp oci-archive:"$T/nolayout.tar"
mkdir -p "$T/flipped" && cp -a "$T/one/." "$T/flipped/"
cfg=$(python3 -c '
import json, sys
d = sys.argv[1] + "/blobs/sha256/"
m = json.load(open(d + json.load(open(sys.argv[1] + "/index.json"))["manifests"][0]["digest"][7:]))
print(m["config"]["digest"][7:])' "$T/flipped")
flip_byte "$T/flipped/blobs/sha256/$cfg"
tar -C "$T/flipped" -cf "$T/flipped.tar" .
expect_error "oci-archive with a changed blob" "config sha256:$cfg: digest mismatch" -- imp oci-archive:"$T/flipped.tar"
[ ! -e "$T/bad.manifest" ] || die "a refused oci-archive wrote -o"
[ -z "$(ls -A "$T/s2/tmp" 2>/dev/null)" ] || die "a refused oci-archive left $(ls "$T/s2/tmp")"
echo "t_import_registry: ok"
