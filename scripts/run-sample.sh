#!/bin/bash
# `make run`: build a small real container image from Debian packages, import it, synthesize
# its ext4 disk, and boot it as a micro-VM whose root disk is read lazily from the store.
#
#   1. apt-get download busybox-static, libc6 and base-files into build/sample/cache
#      (reused on later runs, so a rerun needs no network);
#   2. dpkg-deb -x them into a root filesystem, add busybox applet symlinks;
#   3. pack it with umoci as a two-layer OCI image layout (layer 2 adds and deletes
#      files, so the import has to apply an OCI whiteout);
#   4. lazyblk import oci:DIR:latest --store build/sample/store -o build/sample/sample.manifest
#   5. show what the manifest and the store hold, and cross-check the manifest (and the
#      file bytes its chunks give, decompressed with zstd) against the tree that
#      `umoci unpack` produces from the same image;
#   9. lazyblk mkfs + lazyblk export, checked with e2fsck -fn and debugfs;
#  10. Debian's linux-image-cloud-amd64, fetched once (scripts/lib/kernel.sh: the cache the
#      QEMU tests use, /var/cache/lazyblk-test/kernel);
#  11. boot the image with the store published as static files over HTTP (a loopback
#      python3 http.server) and an empty local cache store, so every chunk the guest needs
#      is fetched on demand: where /proc/cpuinfo has vmx/svm, with the built-in VMM
#      (`lazyblk run`); otherwise QEMU TCG (-accel tcg) with `lazyblk initramfs` and the
#      Debian kernel, its root disk served by `lazyblk serve --vhost-user` (over NBD while
#      this lazyblk has no vhost-user); the guest runs $CMD, whose output is printed;
#  12. the lazy-loading figures: disk and file-data size against the chunks and bytes
#      actually fetched (the server's --stats-json; the cache store), and the time from
#      the VMM's start to the guest's first user-space instruction (the initramfs's /init
#      writes 1 to the boot-timer port 0x440: under QEMU an isa-debugcon on that port,
#      stamped by scripts/lib/qemu_boot.py; the built-in VMM logs it itself).
#
# Environment: LAZYBLK = the lazyblk binary (set by the Makefile; default build/lazyblk);
# LAZYBLK_SAMPLE_VMM=qemu|builtin forces the VMM; LAZYBLK_KERNEL_CACHE the kernel cache.
# Idempotent: everything except the package and kernel caches is rebuilt on every run.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
LAZYBLK=${LAZYBLK:-$ROOT/build/lazyblk}
S=$ROOT/build/sample
CACHE=$S/cache
PKGS=(busybox-static libc6 base-files)
PY=$(command -v /usr/bin/python3 || command -v python3)

heading() { printf '\n==== %s ====\n' "$*"; }
die() { echo "run-sample: $*" >&2; exit 1; }

[ -x "$LAZYBLK" ] || die "LAZYBLK=$LAZYBLK is not an executable (run make first)"
for t in umoci dpkg-deb apt-get zstd; do
  command -v "$t" >/dev/null || die "$t not found (scripts/deps.sh installs it)"
done
[ -n "$PY" ] || die "python3 not found"

UMOCI_ROOTLESS=()
if [ "$(id -u)" -ne 0 ]; then
  echo "run-sample: not root; using umoci --rootless (file owners will not be preserved)" >&2
  UMOCI_ROOTLESS=(--rootless)
fi

# ---------------------------------------------------------------------------
heading "1. Debian packages (cache: ${CACHE#"$ROOT"/})"
mkdir -p "$CACHE"
cached_deb() { ls -t "$CACHE/$1"_*.deb 2>/dev/null | head -1 || true; }
fetch() { # apt-get download into the cache; -o Sandbox: no "_apt cannot access" warning as root
  (cd "$CACHE" && apt-get download -q=2 -o APT::Sandbox::User=root "$@")
}
need=()
for p in "${PKGS[@]}"; do
  [ -n "$(cached_deb "$p")" ] || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "downloading: ${need[*]}"
  if ! fetch "${need[@]}"; then
    [ "$(id -u)" -eq 0 ] || die "apt-get download failed and apt-get update needs root"
    echo "apt-get download failed; running apt-get update and retrying"
    apt-get update -q=2
    fetch "${need[@]}" || die "apt-get download ${need[*]} failed"
  fi
else
  echo "all packages cached; no download"
fi
for p in "${PKGS[@]}"; do
  deb=$(cached_deb "$p")
  [ -n "$deb" ] || die "no .deb for $p in $CACHE"
  printf '  %-16s %-28s %8s KiB\n' "$p" "$(dpkg-deb -f "$deb" Version)" $(( $(stat -c %s "$deb") / 1024 ))
done

# ---------------------------------------------------------------------------
heading "2. Root filesystem"
RFS=$S/rootfs
rm -rf "$RFS" "$S/oci" "$S/bundle" "$S/check" "$S/store" "$S/sample.manifest"
mkdir -p "$RFS"
for p in "${PKGS[@]}"; do
  dpkg-deb -x "$(cached_deb "$p")" "$RFS"
done
mkdir -p "$RFS"/{bin,sbin,usr/bin,usr/sbin,root,tmp,proc,sys,dev,run,var/tmp}
chmod 1777 "$RFS/tmp" "$RFS/var/tmp"
chmod 0700 "$RFS/root"
# Applet symlinks for everything busybox offers, where no real file is there already.
nlinks=0
while read -r applet; do
  [ -n "$applet" ] || continue
  [ "$applet" = "/bin/busybox" ] && continue
  if [ ! -e "$RFS$applet" ] && [ ! -L "$RFS$applet" ]; then
    mkdir -p "$RFS$(dirname "$applet")"
    ln -s /bin/busybox "$RFS$applet"
    nlinks=$((nlinks + 1))
  fi
done < <("$RFS/bin/busybox" --list-full | sed 's,^,/,')
[ -L "$RFS/bin/sh" ] || ln -sf busybox "$RFS/bin/sh"
# base-files ships /etc/os-release -> ../usr/lib/os-release (Debian's); say what this is.
cat > "$RFS/etc/lazyblk-release" <<'EOF'
NAME="lazyblk sample"
ID=lazyblk-sample
ID_LIKE=debian
PRETTY_NAME="lazyblk sample image (busybox-static + libc6 + base-files)"
EOF
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$RFS/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$RFS/etc/group"
echo "rootfs: $(find "$RFS" | wc -l) entries, $(du -s --apparent-size -B1 "$RFS" | cut -f1) bytes, $nlinks busybox applet symlinks"

# ---------------------------------------------------------------------------
heading "3. OCI image layout (umoci)"
OCI=$S/oci
B=$S/bundle
umoci init --layout "$OCI"
umoci new --image "$OCI:latest"
# Layer 1: the root filesystem.
umoci unpack "${UMOCI_ROOTLESS[@]}" --image "$OCI:latest" "$B"
cp -a "$RFS/." "$B/rootfs/"
umoci repack --image "$OCI:latest" "$B"
rm -rf "$B"
# Layer 2: add two files and delete one (an OCI whiteout in the layer tar).
umoci unpack "${UMOCI_ROOTLESS[@]}" --image "$OCI:latest" "$B"
echo "built by lazyblk scripts/run-sample.sh" > "$B/rootfs/etc/motd"
echo "lazyblk-sample" > "$B/rootfs/etc/hostname"
WHITEOUT=/usr/share/doc/busybox-static/copyright
[ -e "$B/rootfs$WHITEOUT" ] || die "expected $WHITEOUT in the rootfs"
rm -f "$B/rootfs$WHITEOUT"
umoci repack --image "$OCI:latest" "$B"
rm -rf "$B"
umoci config --image "$OCI:latest" --os linux --architecture amd64 \
  --config.cmd /bin/sh --config.workingdir / \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --author "lazyblk run-sample"
umoci gc --layout "$OCI"
"$PY" - "${OCI#"$ROOT"/}" <<'EOF'
import json, os, sys
oci = sys.argv[1]
def blob(d):
    alg, h = d.split(":")
    return os.path.join(oci, "blobs", alg, h)
idx = json.load(open(os.path.join(oci, "index.json")))
m = idx["manifests"][0]
man = json.load(open(blob(m["digest"])))
print(f"image {oci}:latest  manifest {m['digest'][:19]}...")
for i, l in enumerate(man["layers"], 1):
    print(f"  layer {i}: {l['mediaType'].rsplit('.', 1)[-1]:5} {l['size']:>10} bytes  {l['digest'][:19]}...")
cfg = json.load(open(blob(man["config"]["digest"])))
print(f"  config: cmd={cfg['config'].get('Cmd')} os={cfg['os']} arch={cfg['architecture']}")
EOF

# ---------------------------------------------------------------------------
heading "4. lazyblk import"
STORE=$S/store
MAN=$S/sample.manifest
echo "+ lazyblk import oci:${OCI#"$ROOT"/}:latest --store ${STORE#"$ROOT"/} -o ${MAN#"$ROOT"/}"
"$LAZYBLK" import "oci:$OCI:latest" --store "$STORE" -o "$MAN"

heading "5. Manifest summary (lazyblk manifest show --summary)"
"$LAZYBLK" manifest show --summary "$MAN"

heading "6. Sample entries (lazyblk manifest show | python3)"
"$LAZYBLK" manifest show "$MAN" > "$S/sample.manifest.json"
"$PY" - "$S/sample.manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
ents = m["entries"]
by = {e["path"]: e for e in ents}
want = ["/bin/busybox", "/bin/sh", "/bin/ls", "/etc/os-release", "/usr/lib/os-release",
        "/etc/lazyblk-release", "/etc/motd", "/lib64/ld-linux-x86-64.so.2",
        "/lib/x86_64-linux-gnu/libc.so.6", "/tmp", "/root"]
pick = [by[p] for p in want if p in by]
# plus the two largest regular files not already shown
files = sorted((e for e in ents if e["type"] == "file" and e["path"] not in want),
               key=lambda e: -e.get("size", 0))
pick += files[:2]
print(f"manifest version {m.get('version')}, chunk size {m.get('chunk_size')}, "
      f"{len(ents)} entries, digest {str(m.get('digest'))[:23]}...")
print(f"{'type':8} {'mode':>5} {'uid:gid':>7} {'size':>9} {'chunks':>6}  path")
for e in pick:
    link = f" -> {e['link']}" if e.get("link") else ""
    print(f"{e['type']:8} {e.get('mode', ''):>5} {str(e.get('uid'))+':'+str(e.get('gid')):>7} "
          f"{e.get('size', 0):>9} {len(e.get('chunks') or []):>6}  {e['path']}{link}")
EOF

heading "7. Chunk store (lazyblk cas stats)"
"$LAZYBLK" cas stats --store "$STORE"
echo "store on disk: $(du -s --apparent-size -B1 "$STORE" | cut -f1) bytes in $(find "$STORE" -type f | wc -l) files"

# ---------------------------------------------------------------------------
heading "8. Cross-check against umoci unpack of the same image"
umoci unpack "${UMOCI_ROOTLESS[@]}" --image "$OCI:latest" "$S/check" >/dev/null
"$PY" - "$S/sample.manifest.json" "$S/check/rootfs" "$WHITEOUT" "$STORE" <<'EOF'
import hashlib, json, os, stat, subprocess, sys
mpath, root, whiteout, store = sys.argv[1:]
chunk_cache = {}
def chunk(d):
    """A chunk's bytes, read straight from the store (docs/formats.md) with zstd -d."""
    if d not in chunk_cache:
        raw = subprocess.run(["zstd", "-dcq", os.path.join(store, "chunks", d[:2], d)],
                             check=True, capture_output=True).stdout
        if hashlib.sha256(raw).hexdigest() != d:
            raise SystemExit(f"chunk {d} in the store does not hash to its name")
        chunk_cache[d] = raw
    return chunk_cache[d]
m = json.load(open(mpath))
man = {}
for e in m["entries"]:
    p = "/" + e["path"].strip("/")
    man[p] = e
ref = {}
for d, dirs, files in os.walk(root):
    for n in dirs + files:
        full = os.path.join(d, n)
        st = os.lstat(full)
        p = "/" + os.path.relpath(full, root)
        t = {stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "symlink",
             stat.S_IFCHR: "char", stat.S_IFBLK: "block", stat.S_IFIFO: "fifo",
             stat.S_IFSOCK: "socket"}[stat.S_IFMT(st.st_mode)]
        ref[p] = (t, st, os.readlink(full) if t == "symlink" else None)
problems = []
man.pop("/", None)
for p in sorted(set(ref) - set(man))[:10]:
    problems.append(f"missing from manifest: {p}")
for p in sorted(set(man) - set(ref))[:10]:
    problems.append(f"extra in manifest: {p} ({man[p]['type']})")
for p in sorted(set(ref) & set(man)):
    t, st, link = ref[p]
    e = man[p]
    et = e["type"]
    if et == "hardlink":
        et = "file"  # a hard link is a regular file in the unpacked tree
    if et != t:
        problems.append(f"{p}: type {e['type']} in manifest, {t} on disk"); continue
    if int(str(e.get("mode", "0")), 8) & 0o7777 != stat.S_IMODE(st.st_mode):
        problems.append(f"{p}: mode {e.get('mode')} in manifest, {oct(stat.S_IMODE(st.st_mode))} on disk")
    if t == "file" and e["type"] == "file":
        if e.get("size") != st.st_size:
            problems.append(f"{p}: size {e.get('size')} in manifest, {st.st_size} on disk")
        elif not e.get("holes"):
            data = b"".join(chunk(c["digest"])[c.get("off", 0):c.get("off", 0) + c["len"]]
                            for c in e.get("chunks") or [])
            with open(os.path.join(root, p.lstrip("/")), "rb") as f:
                if data != f.read():
                    problems.append(f"{p}: the bytes its chunks give differ from the file's")
    if t == "symlink" and e.get("link") != link:
        problems.append(f"{p}: link {e.get('link')!r} in manifest, {link!r} on disk")
    if os.geteuid() == 0 and (e.get("uid"), e.get("gid")) != (st.st_uid, st.st_gid):
        problems.append(f"{p}: owner {e.get('uid')}:{e.get('gid')} in manifest, {st.st_uid}:{st.st_gid} on disk")
if whiteout in man:
    problems.append(f"{whiteout} was deleted in layer 2 (whiteout) but is in the manifest")
if any(os.path.basename(p).startswith(".wh.") for p in man):
    problems.append("manifest contains .wh.* whiteout marker files")
if "/etc/motd" not in man:
    problems.append("/etc/motd (added in layer 2) is missing from the manifest")
print(f"{len(ref)} paths in umoci's tree, {len(man)} in the manifest (excluding /)")
if problems:
    print(f"MISMATCH ({len(problems)} problems, first 20):")
    for x in problems[:20]:
        print("  " + x)
    sys.exit(1)
print("OK: same paths, types, modes, sizes, owners and link targets; every file's bytes,")
print(f"    read back from {len(chunk_cache)} chunks of the store with zstd -d, equal the file; whiteout applied")
EOF
rm -rf "$S/check"

heading "9. The ext4 disk (lazyblk mkfs, then lazyblk export to look at it)"
LAYOUT=$S/sample.layout
DISK=$S/sample.raw
echo "+ lazyblk mkfs ${MAN#"$ROOT"/} -o ${LAYOUT#"$ROOT"/}"
"$LAZYBLK" mkfs "$MAN" -o "$LAYOUT"
echo "+ lazyblk export ${LAYOUT#"$ROOT"/} --store ${STORE#"$ROOT"/} -o ${DISK#"$ROOT"/}"
"$LAZYBLK" export "$LAYOUT" --store "$STORE" -o "$DISK"
echo "+ e2fsck -fn ${DISK#"$ROOT"/}"
e2fsck -fn "$DISK" 2>&1 | sed 's/^/  /'
echo "+ debugfs -R 'ls -l /etc' ${DISK#"$ROOT"/} | head"
debugfs -R "ls -l /etc" "$DISK" 2>/dev/null | head -8 | sed 's/^/  /'
echo "+ debugfs -R 'cat /etc/motd'"
debugfs -R "cat /etc/motd" "$DISK" 2>/dev/null | sed 's/^/  /'

# ---------------------------------------------------------------------------
heading "10. Kernel: Debian's linux-image-cloud-amd64"
. "$ROOT/scripts/lib/kernel.sh"   # the kernel_cache/fetch_kernel of tests/integration/lib/kernel.sh
KC=$(kernel_cache) || die "no writable kernel cache directory (set LAZYBLK_KERNEL_CACHE)"
KERNEL=$(fetch_kernel "$KC") ||
  die "cannot fetch linux-image-cloud-amd64 into $KC (apt-get download failed: network or apt sources?)"
echo "kernel: $KERNEL (cache: $KC)"

# ---------------------------------------------------------------------------
heading "11. Boot the image lazily"
CMD='grep PRETTY_NAME /etc/os-release; cat /etc/motd; echo "kernel $(uname -r), $(ls /usr/bin | wc -l) programs in /usr/bin, $(grep MemTotal /proc/meminfo | tr -s " ")"; echo hello from the lazy image'
BOOT=$S/boot
CSTORE=$BOOT/cache-store       # the local store: empty at the start, filled from the remote
OV=$BOOT/sample.overlay
rm -rf "$BOOT"
mkdir -p "$BOOT"
PIDS=()
cleanup() { local p; for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# The store as static files over HTTP on a free loopback port (the layout lazyblk push and
# --remote http://.../ use: chunks/XX/DIGEST); the guest's disk has only CSTORE locally.
"$PY" - "$STORE" "$BOOT/http.port" >"$BOOT/http.log" 2>&1 <<'PYEOF' &
import functools, http.server, os, sys
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                      functools.partial(H, directory=sys.argv[1]))
with open(sys.argv[2] + ".tmp", "w") as f: f.write(str(srv.server_address[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
srv.serve_forever()
PYEOF
PIDS+=($!)
for _ in $(seq 100); do [ -s "$BOOT/http.port" ] && break; sleep 0.05; done
[ -s "$BOOT/http.port" ] || die "the loopback HTTP server for the store did not start: $(cat "$BOOT/http.log")"
URL="http://127.0.0.1:$(cat "$BOOT/http.port")/"
echo "remote: ${STORE#"$ROOT"/} served as static files at $URL; local cache store: ${CSTORE#"$ROOT"/} (empty)"

VMM=${LAZYBLK_SAMPLE_VMM:-}
if [ -z "$VMM" ]; then
  if grep -qwE 'vmx|svm' /proc/cpuinfo; then VMM=builtin; else VMM=qemu; fi
fi
BOOT_JSON=$BOOT/boot.json
STATS=$BOOT/stats.json
CON=$BOOT/console.log
case "$VMM" in
builtin)
  [ -e /dev/kvm ] || die "/dev/kvm is missing (load kvm_intel or kvm_amd)"
  echo "hardware virtualization present (vmx/svm): booting with the built-in VMM (lazyblk run, KVM)"
  echo "+ lazyblk run ${LAYOUT#"$ROOT"/} --store ${CSTORE#"$ROOT"/} --remote $URL --overlay ${OV#"$ROOT"/} --kernel $KERNEL --mem 512 -- /bin/sh -c '...'"
  echo "---- guest output ----"
  start=$(date +%s%N)
  set +o pipefail
  timeout 300 "$LAZYBLK" run "$LAYOUT" --store "$CSTORE" --remote "$URL" --overlay "$OV" \
    --kernel "$KERNEL" --mem 512 --append "console=ttyS0 reboot=k panic=-1 quiet" \
    -- /bin/sh -c "$CMD" </dev/null 2>"$BOOT/run.err" | tee "$CON" |
    sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e 's/\r//g' |
    grep -v -e '^\[ *[0-9]*\.[0-9]*\]' -e '^lazyblk-exit:'
  rc=${PIPESTATUS[0]}
  set -o pipefail
  end=$(date +%s%N)
  echo "---- end of guest output ----"
  [ "$rc" -ne 124 ] || die "the guest did not finish within 300 s (console: ${CON#"$ROOT"/})"
  [ "$rc" -eq 0 ] || { tail -5 "$BOOT/run.err" >&2; die "lazyblk run exited $rc (log: ${BOOT#"$ROOT"/}/run.err)"; }
  "$PY" - "$BOOT/run.err" "$BOOT_JSON" "$(( (end - start) / 1000000 ))" <<'PYEOF'
import json, re, sys
t = {}
for l in open(sys.argv[1]):
    m = re.search(r"boot-timer: (\d+) at ([0-9.]+) ms", l)
    if m: t.setdefault(m.group(1), float(m.group(2)))
json.dump({"boot_timer": t, "wall_ms": float(sys.argv[3])}, open(sys.argv[2], "w"))
PYEOF
  ;;
qemu)
  command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
  if "$LAZYBLK" serve --help | grep -q -- '--vhost-user PATH.*not available'; then
    TRANSPORT=nbd
    echo "no vmx/svm in /proc/cpuinfo (no hardware virtualization): booting with QEMU TCG (software CPU) over NBD (this lazyblk has no --vhost-user yet)"
  else
    TRANSPORT=vhost-user
    echo "no vmx/svm in /proc/cpuinfo (no hardware virtualization): booting with QEMU TCG (software CPU) over vhost-user-blk"
  fi
  echo "+ lazyblk initramfs --kernel $KERNEL --manifest ${MAN#"$ROOT"/} --busybox ${RFS#"$ROOT"/}/bin/busybox -- /bin/sh -c '...'"
  INITRD=$("$LAZYBLK" initramfs --kernel "$KERNEL" --manifest "$MAN" --busybox "$RFS/bin/busybox" \
    -- /bin/sh -c "$CMD") || die "lazyblk initramfs failed"
  echo "  $INITRD ($(stat -c %s "$INITRD") bytes, cached)"
  SOCK=$BOOT/disk.sock
  if [ "$TRANSPORT" = vhost-user ]; then
    LISTEN=(--vhost-user "$SOCK")
    QDISK=(-object memory-backend-memfd,id=mem,size=512M,share=on -machine memory-backend=mem
           -chardev "socket,id=vu,path=$SOCK" -device vhost-user-blk-pci,chardev=vu)
  else
    LISTEN=(--nbd "unix:$SOCK")
    QDISK=(-drive "file=nbd+unix:///?socket=$SOCK,format=raw,if=virtio")
  fi
  echo "+ lazyblk serve ${LAYOUT#"$ROOT"/} --store ${CSTORE#"$ROOT"/} --remote $URL --overlay ${OV#"$ROOT"/} ${LISTEN[0]} ${LISTEN[1]#"$ROOT"/} --stats-json ${STATS#"$ROOT"/} &"
  "$LAZYBLK" serve "$LAYOUT" --store "$CSTORE" --remote "$URL" --overlay "$OV" \
    "${LISTEN[@]}" --stats-json "$STATS" >"$BOOT/serve.log" 2>&1 &
  SERVE_PID=$!
  PIDS+=("$SERVE_PID")
  for _ in $(seq 200); do [ -S "$SOCK" ] && break; kill -0 $SERVE_PID 2>/dev/null || break; sleep 0.05; done
  [ -S "$SOCK" ] || die "lazyblk serve did not start: $(tail -1 "$BOOT/serve.log")"
  echo "+ qemu-system-x86_64 -M pc -accel tcg -m 512M -kernel ${KERNEL##*/} -initrd ${INITRD##*/} ${QDISK[*]//"$ROOT"\//}"
  echo "---- guest output ----"
  rc=0
  "$PY" "$ROOT/scripts/lib/qemu_boot.py" --echo --log "$CON" --json "$BOOT_JSON" --timeout 300 -- \
    qemu-system-x86_64 -M pc -accel tcg -m 512M -smp 1 -nodefaults -nographic -serial stdio \
    -no-reboot -kernel "$KERNEL" -initrd "$INITRD" -append "console=ttyS0 reboot=k panic=-1 quiet" \
    "${QDISK[@]}" || rc=$?
  echo "---- end of guest output ----"
  kill -TERM $SERVE_PID 2>/dev/null || true
  src=0; wait $SERVE_PID || src=$?
  [ "$rc" -ne 124 ] || die "the guest did not finish within 300 s (console: ${CON#"$ROOT"/})"
  [ "$rc" -eq 0 ] || { tail -5 "$CON" >&2; die "QEMU exited $rc (console: ${CON#"$ROOT"/})"; }
  [ "$src" -eq 0 ] || { tail -3 "$BOOT/serve.log" >&2; die "lazyblk serve exited $src (log: ${BOOT#"$ROOT"/}/serve.log)"; }
  [ -s "$STATS" ] || die "lazyblk serve wrote no statistics to ${STATS#"$ROOT"/}"
  ;;
*) die "LAZYBLK_SAMPLE_VMM=$VMM: want qemu or builtin" ;;
esac
es=$(tr -d '\r' <"$CON" | sed -n 's/.*lazyblk-exit: \([0-9]*\).*/\1/p' | tail -1)
[ "$es" = 0 ] || die "the guest command exited '${es:-?}' (want 0; console: ${CON#"$ROOT"/})"
grep -q "hello from the lazy image" "$CON" ||
  die "the guest's output lacks 'hello from the lazy image' (console: ${CON#"$ROOT"/})"

# ---------------------------------------------------------------------------
heading "12. Lazy loading: what the boot needed of the image"
"$LAZYBLK" cas stats --store "$CSTORE" >"$BOOT/cache-store.stats" 2>/dev/null || : >"$BOOT/cache-store.stats"
"$LAZYBLK" cas stats --store "$STORE" >"$BOOT/store.stats"
"$PY" - "$DISK" "$S/sample.manifest.json" "$BOOT/store.stats" "$BOOT/cache-store.stats" \
  "$BOOT_JSON" "$STATS" "$VMM" <<'PYEOF'
import json, os, re, sys
disk, manj, st_all, st_cache, bootj, statsj, vmm = sys.argv[1:]
def cas(p):
    t = open(p).read()
    g = lambda k: int((re.search(r"^%s\s+(\d+)" % k, t, re.M) or [0, 0])[1])
    return g("chunks"), g("raw bytes"), g("stored bytes")
def mib(n): return "%.1f MiB" % (n / 1048576)
m = json.load(open(manj))
files = [e for e in m["entries"] if e["type"] == "file"]
data = sum(e.get("size", 0) for e in files)
c_all, raw_all, stored_all = cas(st_all)
c_got, raw_got, stored_got = cas(st_cache)
print("image     disk %s (synthesized ext4), file data %s in %d files; store: %d chunks, %s compressed"
      % (mib(os.path.getsize(disk)), mib(data), len(files), c_all, mib(stored_all)))
print("fetched   %d of %d chunks from the remote: %s of %s compressed (%.0f%%), %s of %s uncompressed"
      % (c_got, c_all, mib(stored_got), mib(stored_all),
         100.0 * stored_got / stored_all if stored_all else 0, mib(raw_got), mib(raw_all)))
if os.path.exists(statsj) and os.path.getsize(statsj):
    s = json.load(open(statsj))
    print("server    %d reads (%s), %d writes (%s), %d flushes; 4 KiB blocks served: %d metadata, %d from chunks, %d zero, %d overlay"
          % (s["reads"], mib(s["read_bytes"]), s["writes"], mib(s["write_bytes"]), s["flushes"],
             s["blocks_from_metadata"], s["blocks_from_chunks"], s["blocks_zero"], s["blocks_from_overlay"]))
    print("          chunk_loads %d (%s decompressed), memory-cache hits %d; remote_fetches %d (%s, p50 %.1f ms); disk_hits %d; store_read_bytes %d"
          % (s["chunk_loads"], mib(s["chunk_loaded_bytes"]), s["chunk_cache_hits"],
             s.get("remote_fetches", 0), mib(s.get("remote_bytes", 0)), s.get("fetch_ms_p50", 0),
             s.get("disk_hits", 0), s["store_read_bytes"]))
    print("          overlay: %d dirty blocks (the guest's writes)" % s["dirty_blocks"])
b = json.load(open(bootj))
t = b.get("boot_timer", {})
what = "QEMU's start (TCG)" if vmm == "qemu" else "lazyblk run's start"
if "1" in t:
    print("time      %.0f ms from %s to the guest's first user-space instruction (/init: boot-timer port 0x440 = 1)"
          % (t["1"], what))
    print("          %.0f ms to the command's start (0x440 = 2); the VM ended after %.0f ms"
          % (t.get("2", float("nan")), b.get("wall_ms", float("nan"))))
else:
    print("time      boot timer not seen; the VM ran %.0f ms" % b.get("wall_ms", float("nan")))
PYEOF

heading "Done"
echo "image:    ${OCI#"$ROOT"/} (OCI layout, tag latest)"
echo "manifest: ${MAN#"$ROOT"/}"
echo "store:    ${STORE#"$ROOT"/}"
echo "layout:   ${LAYOUT#"$ROOT"/} (ext4 metadata + block map; disk: ${DISK#"$ROOT"/})"
echo "boot:     ${BOOT#"$ROOT"/}/ (console.log, boot.json$([ -s "$STATS" ] && echo ", stats.json"); VMM: $VMM)"
