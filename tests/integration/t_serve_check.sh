#!/bin/bash
# serve (and run, which opens the image the same way) refuses at start, with one line, what
# could only fail every read later: a --store that is not the image's, a remote that does not
# answer (a closed port) or does not hold the image, an OCI tag that does not exist.
# --no-check starts anyway (the reads then fail), and the good cases start.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx docker-registry curl nbdinfo python3; do
  command -v "$tool" >/dev/null || skip "t_serve_check: $tool is not installed"
done
. "$TESTLIB/remote.sh"
SOCK=$T/nbd.sock
NBD="nbd+unix:///?socket=$SOCK"

mkdir -p "$T/src" "$T/other"
head -c 3000000 /dev/urandom >"$T/src/a.bin"
head -c 100000 /dev/urandom >"$T/src/b.bin"
echo other >"$T/other/x"
"$LAZYBLK" import "$T/src" --store "$T/a.store" -o "$T/a.manifest" >/dev/null
"$LAZYBLK" import "$T/other" --store "$T/o.store" -o "$T/o.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/a.manifest" -o "$T/a.layout" >/dev/null
L=$T/a.layout
serve() { timeout 60 "$LAZYBLK" serve "$L" --nbd "unix:$SOCK" "$@"; }
# starts: the server says it is serving (start_server checks the URI answers), then stops
starts() { start_server "$1" "$NBD" "$L" --nbd "unix:$SOCK" "${@:2}"; stop_server "$SRV" "$1"; }

# ---- a store that is not the image's: refused, naming the store and a chunk
expect_fail_line "wrong store" "store $T/o\.store does not hold the image's chunks \(sha256:[0-9a-f]{64} missing\); wrong --store\? \(--no-check to serve anyway\)" -- \
  serve --store "$T/o.store"
[ ! -e "$SOCK" ] || die "a refused serve left its socket"
starts nocheck --store "$T/o.store" --no-check
starts good --store "$T/a.store"
# one chunk of the first ones gone: refused as well (the check looks at more than one)
cp -a "$T/a.store" "$T/m.store"
rm -rf "$T/m.store/plain"
victim=$(find "$T/m.store/chunks" -type f | head -1)
rm "$victim"
c=$(basename "$victim")
expect_fail_line "a first chunk missing" "sha256:$c missing" -- serve --store "$T/m.store"

# run opens the image the same way, before the kernel: the same line, and --no-check gets
# as far as the kernel (no /dev/kvm needed: the kernel here is not one)
echo "not a kernel" >"$T/text"
expect_fail_line "run, wrong store" "^lazyblk: run: store .* does not hold the image's chunks" -- \
  "$LAZYBLK" run "$L" --store "$T/o.store" --kernel "$T/text" --initrd "$T/text"
expect_fail_line "run --no-check" "^lazyblk: run: kernel .*: not a kernel" -- \
  "$LAZYBLK" run "$L" --store "$T/o.store" --kernel "$T/text" --initrd "$T/text" --no-check

# ---- an HTTP remote: a closed port, a tree without the image, the good one
dead=$(free_port)
expect_fail_line "unreachable remote" "^lazyblk: serve: remote http://127\.0\.0\.1:$dead/x/: .*(onnect|refused).* \(--no-check to serve anyway\)$" -- \
  serve --store "$T/e1" --remote "http://127.0.0.1:$dead/x/" --fetch-retries 1
starts nocheck-http --store "$T/e2" --remote "http://127.0.0.1:$dead/x/" --no-check
start_nginx "$T/o.store"
expect_fail_line "remote without the image" "remote .* does not hold the image's chunks \(sha256:[0-9a-f]{64} not found\); wrong --remote\?" -- \
  serve --store "$T/e3" --remote "$NGINX_URL"
stop_nginx
start_nginx "$T/a.store"
starts good-http --store "$T/e4" --remote "$NGINX_URL"
stop_nginx

# ---- an OCI registry: a tag that does not exist, the tag pushed
start_registry
U=oci://127.0.0.1:$REG_PORT/lazyblk/check
env -u LAZYBLK_REMOTE_USER "$LAZYBLK" push --store "$T/a.store" --remote "$U" >/dev/null ||
  die "push failed"
expect_fail_line "oci tag that does not exist" "remote $U:nope: no such tag" -- \
  serve --store "$T/e5" --remote "$U:nope"
starts nocheck-oci --store "$T/e6" --remote "$U:nope" --no-check
# the tag exists but lists another image's chunks
env -u LAZYBLK_REMOTE_USER "$LAZYBLK" push --store "$T/o.store" --remote "$U:other" >/dev/null ||
  die "push failed"
expect_fail_line "oci tag of another image" "remote $U:other: its chunk index does not list" -- \
  serve --store "$T/e7" --remote "$U:other"
starts good-oci --store "$T/e8" --remote "$U"
stop_registry
expect_fail_line "registry down (refused before this change too)" "$U: the registry did not answer" -- \
  serve --store "$T/e9" --remote "$U" --fetch-retries 0

# ---- --no-check with --raw is a usage error (nothing to check)
head -c 1M /dev/zero >"$T/raw"
expect_rc 2 "$LAZYBLK" serve --raw "$T/raw" --no-check --nbd "unix:$SOCK"
echo "PASS"
