#!/bin/bash
# Credentials stay with the registry (issue 15, item 4): a hostile registry (fakeregistry.py)
# whose 401 names a token realm on another host or port over plain http gets no credentials
# sent there, one on the registry itself gets them; an upload Location on another host, or
# with userinfo tricks (http://127.0.0.1:P@127.0.0.2:P2/up), is refused and nothing is sent
# there; blob redirects to another port of the same host carry no credentials either, and a
# 401 from the host a blob was redirected to is not followed to its realm (issue 24). A tag
# list that is not a JSON object stops `images ls` and `cas gc --remote oci` with one line.
. "$(dirname "$0")/lib/common.sh"
for tool in python3 curl; do
  command -v "$tool" >/dev/null || skip "t_remote_hostile: $tool is not installed"
done
. "$TESTLIB/remote.sh"
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null ||
  skip "t_remote_hostile: 127.0.0.2 is not usable"
set -u
CREDS=(env LAZYBLK_REMOTE_USER=alice LAZYBLK_REMOTE_PASSWORD=s3cret)

build_image a 2 --chunk-size 256K

# sinks: token endpoints (and upload targets) on another host, and on another port
start_fake sink2 --listen 127.0.0.2
S2=$FAKE_PORT
start_fake sink1
S1=$FAKE_PORT

# no Authorization header of any kind reached LOG
no_auth() { ! awk '$3 != "-"' "$1" | grep -q . || die "$2: credentials sent: $(cat "$1")"; }

# ---- a token realm on another host, then on another port, both plain http
for realm in "http://127.0.0.2:$S2/token" "http://127.0.0.1:$S1/token"; do
  start_fake reg --store "$T/a.store" --realm "$realm"
  n=$((${n:-0} + 1))
  "${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e$n" \
    --remote "oci://127.0.0.1:$FAKE_PORT/x/y" -o "$T/o$n.raw" >/dev/null ||
    die "export with the realm $realm failed"
  cmp "$T/o$n.raw" "$T/a.raw" || die "export with the realm $realm differs"
  stop_pid "$FAKE_PID"
done
grep -q '^GET /token' "$T/sink2.log" || die "the other host's realm was not asked for a token"
grep -q '^GET /token' "$T/sink1.log" || die "the other port's realm was not asked for a token"
no_auth "$T/sink2.log" "realm on another host"
no_auth "$T/sink1.log" "realm on another port"
echo "ok: realms on another host and port over http get no credentials"

# ---- the realm on the registry itself gets them (and refuses without them)
start_fake reg --store "$T/a.store" --realm self --token-basic alice:s3cret
"${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e9" \
  --remote "oci://127.0.0.1:$FAKE_PORT/x/y" -o "$T/o9.raw" >/dev/null ||
  die "export with the realm on the registry failed"
cmp "$T/o9.raw" "$T/a.raw" || die "export with the realm on the registry differs"
grep -q "^GET /token.* Basic $(printf alice:s3cret | base64)\$" "$T/reg.log" ||
  die "the registry's own realm got no credentials: $(cat "$T/reg.log")"
stop_pid "$FAKE_PID"
echo "ok: the realm on the registry gets the credentials"

# ---- blobs redirected to the same host on another port: the bearer token stays behind
start_fake blobs --store "$T/a.store"
B=$FAKE_PORT
start_fake reg --store "$T/a.store" --realm self --token-basic alice:s3cret \
  --redirect-blobs "http://127.0.0.1:$B"
"${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e10" \
  --remote "oci://127.0.0.1:$FAKE_PORT/x/y" -o "$T/o10.raw" >/dev/null ||
  die "export through blob redirects failed"
cmp "$T/o10.raw" "$T/a.raw" || die "export through blob redirects differs"
grep -q "^GET /v2/x/y/blobs/" "$T/blobs.log" || die "no blob was redirected"
no_auth "$T/blobs.log" "blob redirects to another port"
stop_pid "$FAKE_PID"
echo "ok: blob redirects to another port carry no credentials"

# ---- blobs redirected to a host that answers 401 with a challenge of its own: not followed
# (its realm would get a token request, and over https the credentials; issue 24)
start_fake evil --store "$T/a.store" --realm self
E=$FAKE_PORT
start_fake reg --store "$T/a.store" --realm self --token-basic alice:s3cret \
  --redirect-blobs "http://127.0.0.1:$E"
expect_fail_line "a redirected host's challenge" "redirected to asks for credentials: refused" -- \
  timeout 60 "${CREDS[@]}" "$LAZYBLK" export "$T/a.layout" --store "$T/e11" \
  --remote "oci://127.0.0.1:$FAKE_PORT/x/y" -o "$T/o11.raw" --fetch-retries 0
grep -q "^GET /v2/x/y/blobs/" "$T/evil.log" || die "no blob was redirected"
! grep -q "^GET /token" "$T/evil.log" ||
  die "the redirected host's realm was asked for a token: $(cat "$T/evil.log")"
no_auth "$T/evil.log" "a redirected host's challenge"
stop_pid "$FAKE_PID"
echo "ok: a challenge from a host the registry redirected to is not followed"

# ---- upload locations: one on the registry works; other hosts and userinfo are refused
start_fake reg --realm self
"${CREDS[@]}" "$LAZYBLK" push --store "$T/a.store" --remote "oci://127.0.0.1:$FAKE_PORT/x/y" \
  >/dev/null || die "push with a relative upload location failed"
grep -q '^PUT /v2/x/y/blobs/uploads/u1?digest=sha256:' "$T/reg.log" ||
  die "no blob was uploaded: $(cat "$T/reg.log")"
stop_pid "$FAKE_PID"
for loc in "http://127.0.0.1:{port}@127.0.0.2:$S2/up" "http://127.0.0.1:@127.0.0.2:$S2/up" \
  "http://127.0.0.2:$S2/up" "http://127.0.0.1:$S1/up" "//127.0.0.2:$S2/up"; do
  start_fake reg --realm self --upload-location "$loc"
  P=$FAKE_PORT
  expect_fail_line "upload location $loc" "upload location .*(another host|credentials)" -- \
    timeout 60 "${CREDS[@]}" "$LAZYBLK" push --store "$T/a.store" \
    --remote "oci://127.0.0.1:$P/x/y" --fetch-retries 0
  stop_pid "$FAKE_PID"
done
! grep -q "^PUT" "$T/sink2.log" "$T/sink1.log" ||
  die "a blob went to another host: $(cat "$T/sink2.log" "$T/sink1.log")"
no_auth "$T/sink2.log" "upload locations"
no_auth "$T/sink1.log" "upload locations"
echo "ok: upload locations on another host or port, or with userinfo tricks, refused"

# ---- a tag list that is not a JSON object: images ls and cas gc stop with one line (gc
# must not take it for a repository without images and drop their chunks from the index)
start_fake reg --store "$T/a.store" --tags-list '["a", "b"]'
expect_fail_line "images ls, tag list not an object" "tag list is not a JSON object" -- \
  timeout 60 "$LAZYBLK" images ls --remote "oci://127.0.0.1:$FAKE_PORT/x/y"
expect_fail_line "cas gc, tag list not an object" "tag list is not a JSON object" -- \
  timeout 60 "$LAZYBLK" cas gc --remote "oci://127.0.0.1:$FAKE_PORT/x/y" --dry-run
stop_pid "$FAKE_PID"
echo "remote hostile: ok"
