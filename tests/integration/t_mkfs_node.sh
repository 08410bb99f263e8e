#!/bin/bash
# mkfs on a real node_modules tree: npm installs popular packages (express, lodash, react,
# typescript, webpack, eslint, babel, jest, ...; > 20,000 entries: deep trees, many small
# files, large directories, .bin symlinks, scoped packages) into a cache under build/corpus/node/,
# keyed on the package list, so only the first run needs the npm registry. The tree is
# imported and check_layout makes a layout, exports it, requires e2fsck -fn to be clean and
# debugfs to read every htree, loop-mounts it and compares every field with the manifest.
# Then node itself loads every package, and runs tsc, from the mounted disk.
#
# Environment: NODE_PKGS overrides the package list (a different list gets its own cache).
# Exit 77 (skip) when npm/node are missing or the install fails.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/ext4check.sh"
[ -e /dev/loop-control ] || skip "no loop device support"

ROOT=$(cd "$TESTLIB/../../.." && pwd)
PKGS=${NODE_PKGS:-"express lodash react react-dom typescript webpack eslint @babel/core
  @babel/preset-env jest rxjs date-fns core-js @types/node"}
read -r -a PKG_LIST <<< "${PKGS//$'\n'/ }"
KEY=$(printf '%s\n' "${PKG_LIST[@]}" | sort -u | sha256sum | cut -c1-16)
CACHE=$ROOT/build/corpus/node/$KEY
MIN_ENTRIES=20000

# 1. the corpus: install once (under a lock, into a temporary directory renamed into place)
command -v node >/dev/null || skip "node not found"
command -v npm >/dev/null || skip "npm not found"
mkdir -p "$ROOT/build/corpus/node"
t0=$EPOCHREALTIME
(
  flock 9
  if [ ! -e "$CACHE/.complete" ]; then
    rm -rf "$CACHE" "$CACHE.tmp"
    mkdir -p "$CACHE.tmp"
    echo '{"name": "lazyblk-node-corpus", "private": true}' >"$CACHE.tmp/package.json"
    echo "npm install ${PKG_LIST[*]} into ${CACHE#"$ROOT"/} (once)"
    if ! timeout 900 npm install --prefix "$CACHE.tmp" --no-audit --no-fund --ignore-scripts --fetch-retries=1 \
         --loglevel=error "${PKG_LIST[@]}" >"$T/npm.log" 2>&1; then
      tail -5 "$T/npm.log"
      rm -rf "$CACHE.tmp"
      exit 3
    fi
    printf '%s\n' "${PKG_LIST[@]}" >"$CACHE.tmp/.complete"
    mv "$CACHE.tmp" "$CACHE"
  fi
) 9>"$ROOT/build/corpus/node/.lock" || {
  [ $? -eq 3 ] && skip "npm install failed (no registry?): $(grep -m1 -iE 'err' "$T/npm.log" | cut -c1-150)"
  die "could not prepare the node corpus"
}
NM=$CACHE/node_modules
n=$(find "$NM" | wc -l)
printf 'corpus: %s, %d entries (%d dirs, %d symlinks), %s (%.1f s)\n' "${NM#"$ROOT"/}" "$n" \
  "$(find "$NM" -type d | wc -l)" "$(find "$NM" -type l | wc -l)" \
  "$(du -sh --apparent-size "$NM" | cut -f1)" "$(echo "$EPOCHREALTIME - $t0" | bc)"
[ "$n" -ge "$MIN_ENTRIES" ] || die "the node corpus has $n entries, want >= $MIN_ENTRIES (package list too small?)"

# 2. import, then mkfs → export → e2fsck → htrees → mount → field-by-field comparison
stamp() { printf '  %-32s %6.2f s\n' "$1" "$(echo "$EPOCHREALTIME - $2" | bc)"; }
t=$EPOCHREALTIME
"$LAZYBLK" import "$NM" --store "$T/store" -o "$T/node.manifest"
stamp "import" "$t"
t=$EPOCHREALTIME
check_layout node "$T/node.manifest" "$T/store"
stamp "check_layout" "$t"

# 3. node uses the tree from the mounted disk (mounted at a directory named node_modules, so
#    node's own resolution finds it): require every package, run tsc (its .bin symlink, and
#    the native compiler typescript >= 7 ships in a platform package) on a small program
t=$EPOCHREALTIME
APP=$T/app
mkdir -p "$APP/node_modules"
trap 'mountpoint -q "$APP/node_modules" 2>/dev/null && umount "$APP/node_modules"; rm -rf "$T"' EXIT
mount -o loop,ro "$T/node.raw" "$APP/node_modules"
for p in "${PKG_LIST[@]}"; do
  case $p in @types/*) continue;; esac   # type declarations only, nothing to require
  (cd "$APP" && node -e "require(process.argv[1])" "$p") ||
    die "node cannot require $p from the mounted disk"
done
if [ -L "$APP/node_modules/.bin/tsc" ]; then
  # shellcheck disable=SC2016  # ${n} is TypeScript, not shell
  printf 'const n: number = 42;\nconsole.log(`tsc ok ${n}`);\n' >"$APP/hello.ts"
  (cd "$APP" && node_modules/.bin/tsc --outDir out hello.ts) || die "tsc from the mounted disk failed"
  [ "$(node "$APP/out/hello.js")" = "tsc ok 42" ] || die "tsc output does not run"
fi
umount "$APP/node_modules"
stamp "node require + tsc (mounted)" "$t"
echo "mkfs node_modules: all good"
