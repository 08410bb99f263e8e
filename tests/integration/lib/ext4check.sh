# Sourced: check_layout NAME MANIFEST STORE [mkfs options...]
# mkfs → export → e2fsck -fn (must be clean) → htrees checked by debugfs → loop mount
# read-only → every field compared with the manifest (check_tree.py --mounted).
# Leaves $T/NAME.raw for further checks.
check_layout() {
  local name=$1 man=$2 store=$3; shift 3
  "$LAZYBLK" mkfs "$man" -o "$T/$name.layout" "$@"
  "$LAZYBLK" export "$T/$name.layout" --store "$store" -o "$T/$name.raw"
  e2fsck_clean "$name" "$T/$name.raw"
  # every hashed directory: debugfs parses the htree without complaint
  local dirs
  dirs=$("$LAZYBLK" manifest show "$man" | python3 -c '
import json, sys
m = json.load(sys.stdin)
size = {}
for e in m["entries"]:
    p = e.get("path")
    name = p.rsplit("/", 1)[1].encode() if p and p != "/" else bytes.fromhex(e.get("path_hex", "")).rsplit(b"/", 1)[-1]
    parent = (p.rsplit("/", 1)[0] or "/") if p else None
    if parent is None or p == "/": continue
    size[parent] = size.get(parent, 24 + 12) + 8 + (len(name) + 3) // 4 * 4
# directories whose entries do not fit one block are hashed (htree)
print("\n".join(d for d, s in size.items() if s > 4096 and d.isprintable() and " " not in d))')
  local d
  for d in $dirs; do
    debugfs -R "htree $d" "$T/$name.raw" >"$T/htree.out" 2>&1 || die "$name: debugfs htree $d failed"
    grep -q "Root node dump" "$T/htree.out" || die "$name: $d is not an htree: $(head -3 "$T/htree.out")"
    # entry lines are "INODE 0xHASH-MINOR (RECLEN) NAME"; anything else must not complain
    if grep -vE '^[0-9]+ 0x[0-9a-f]+-[0-9a-f]+ \(|^Entry #|^Reading directory block' "$T/htree.out" |
       grep -qiwE "corrupt\w*|bad|invalid|error\w*|fail\w*"; then
      die "$name: htree $d: $(grep -vE '^[0-9]+ 0x|^Entry #|^Reading' "$T/htree.out" | grep -iwE 'corrupt\w*|bad|invalid|error\w*|fail\w*' | head -3)"
    fi
  done
  mkdir -p "$T/mnt"
  mount -o loop,ro "$T/$name.raw" "$T/mnt"
  "$LAZYBLK" manifest show "$man" >"$T/$name.json"
  local rc=0
  python3 "$TESTLIB/check_tree.py" "$T/mnt" "$T/$name.json" "$store" --mounted || rc=$?
  umount "$T/mnt"
  [ $rc -eq 0 ] || die "$name: the mounted filesystem differs from the manifest"
  echo "ok: $name: e2fsck clean, $(echo "$dirs" | grep -c . || true) htrees, mount matches"
}

e2fsck_clean() {
  local name=$1 img=$2 rc=0
  e2fsck -fn "$img" >"$T/fsck.out" 2>&1 || rc=$?
  if [ $rc -ne 0 ] || grep -vqE '^(e2fsck [0-9]|Pass [1-5]|.*: [0-9]+/[0-9]+ files)' "$T/fsck.out"; then
    cat "$T/fsck.out" | head -40 >&2
    die "$name: e2fsck -fn is not clean (exit $rc)"
  fi
}
