# Sourced after common.sh: a small multi-layer, multi-platform OCI image built with umoci
# from Debian packages, for the registry tests (t_import_registry.sh) and the end-to-end
# test of issue 16.
#
#   build_multiarch_image DIR TAG [EXTRA_DIR]
#       makes DIR an OCI image layout whose index.json tags TAG as an image index
#       (application/vnd.oci.image.index.v1+json) holding two images:
#         linux/amd64  layer 1: a guest-runnable busybox root: the static busybox
#                      (Debian's busybox-static) at /bin/busybox, a symlink /bin/APPLET ->
#                      busybox for each of its applets, /sbin/init -> ../bin/busybox,
#                      empty /dev /proc /sys /tmp /run /root, /etc/passwd and /etc/group
#                      for root, and /e2e/, an empty directory left to the tests' scripts;
#                      layer 2: Debian's hello package (/usr/bin/hello and its docs);
#                      layer 3 (with EXTRA_DIR): EXTRA_DIR's contents at /;
#                      config: Cmd ["/bin/sh"], os linux, architecture amd64
#         linux/arm64  synthetic: the same layers plus one holding /ARCH-arm64, a config
#                      saying architecture arm64 (it does not run on arm64; it is there
#                      to be told apart)
#       Sets MULTIARCH_AMD64 and MULTIARCH_ARM64 (the two manifests' digests, sha256:…)
#       and MULTIARCH_INDEX (the index's). Skips the test (77) when umoci, dpkg-deb or the
#       packages are not to be had.
#
#   umoci_debs_dir      prints the directory holding busybox-static and hello .debs: fetched
#                       once with apt-get download into $LAZYBLK_TEST_CACHE/debs (default
#                       /var/cache/lazyblk-test/debs, else ~/.cache/lazyblk-test/debs)
umoci_debs_dir() {
  local cache=${LAZYBLK_TEST_CACHE:-/var/cache/lazyblk-test} pkg
  mkdir -p "$cache/debs" 2>/dev/null && [ -w "$cache/debs" ] || cache=$HOME/.cache/lazyblk-test
  mkdir -p "$cache/debs"
  for pkg in busybox-static hello; do
    ls "$cache/debs/${pkg}_"*.deb >/dev/null 2>&1 && continue
    command -v apt-get >/dev/null || skip "no apt-get to fetch $pkg"
    (cd "$cache/debs" && apt-get download "$pkg" >/dev/null 2>&1) ||
      skip "apt-get download $pkg failed (apt-get update?)"
  done
  echo "$cache/debs"
}

build_multiarch_image() {
  local dir=$1 tag=$2 extra=${3:-} debs work root a
  for a in umoci dpkg-deb python3; do
    command -v "$a" >/dev/null || skip "$a is not installed (scripts/deps.sh)"
  done
  debs=$(umoci_debs_dir)
  work=$(mktemp -d "$T/umoci.XXXXXX")
  dpkg-deb -x "$(ls "$debs"/busybox-static_*.deb | head -1)" "$work/bb" || die "dpkg-deb busybox-static"
  dpkg-deb -x "$(ls "$debs"/hello_*.deb | head -1)" "$work/hello" || die "dpkg-deb hello"
  [ -x "$work/bb/bin/busybox" ] || die "busybox-static has no /bin/busybox"

  umoci init --layout "$dir" >/dev/null
  umoci new --image "$dir:build" >/dev/null
  umoci unpack --rootless --image "$dir:build" "$work/b" >/dev/null 2>&1 || die "umoci unpack"
  root=$work/b/rootfs
  mkdir -p "$root/bin" "$root/sbin" "$root/etc" "$root/dev" "$root/proc" "$root/sys" \
    "$root/tmp" "$root/run" "$root/root" "$root/e2e"
  chmod 1777 "$root/tmp"
  cp "$work/bb/bin/busybox" "$root/bin/busybox"
  for a in $("$root/bin/busybox" --list); do
    [ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
  done
  ln -sf ../bin/busybox "$root/sbin/init"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  umoci repack --image "$dir:build" "$work/b" >/dev/null 2>&1 || die "umoci repack"
  # layer 2 by unpack + repack (umoci insert writes a layer tar without its end padding)
  umoci unpack --rootless --image "$dir:build" "$work/h" >/dev/null 2>&1 || die "umoci unpack"
  cp -a "$work/hello/usr" "$work/h/rootfs/"
  umoci repack --image "$dir:build" "$work/h" >/dev/null 2>&1 || die "umoci repack"
  if [ -n "$extra" ]; then # layer 3: EXTRA_DIR's contents at /
    umoci unpack --rootless --image "$dir:build" "$work/x" >/dev/null 2>&1 || die "umoci unpack"
    cp -a "$extra/." "$work/x/rootfs/"
    umoci repack --image "$dir:build" "$work/x" >/dev/null 2>&1 || die "umoci repack"
  fi
  umoci config --image "$dir:build" --os linux --architecture amd64 --config.cmd /bin/sh \
    >/dev/null 2>&1 || die "umoci config"

  # the index: amd64 (what umoci built, tagged build) and a synthetic arm64 sibling
  eval "$(python3 - "$dir" "$tag" <<'PY'
import hashlib, json, os, sys
d, tag = sys.argv[1], sys.argv[2]
blobs = os.path.join(d, "blobs", "sha256")
def put(obj):
    b = json.dumps(obj, separators=(",", ":")).encode()
    h = hashlib.sha256(b).hexdigest()
    open(os.path.join(blobs, h), "wb").write(b)
    return "sha256:" + h, len(b)
def get(digest):
    return json.load(open(os.path.join(blobs, digest.split(":")[1])))
idx = json.load(open(os.path.join(d, "index.json")))
amd = [m for m in idx["manifests"]
       if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == "build"][0]
man = get(amd["digest"])
cfg = get(man["config"]["digest"])
cfg["architecture"] = "arm64"
# the arm64 image also has a layer of its own: /ARCH-arm64 (a marker tests look for)
import gzip, io, tarfile
raw = io.BytesIO()
with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tf:
    ti = tarfile.TarInfo("ARCH-arm64"); ti.size = 6; ti.mode = 0o644
    tf.addfile(ti, io.BytesIO(b"arm64\n"))
raw = raw.getvalue()
gz = gzip.compress(raw, mtime=0)
lh = hashlib.sha256(gz).hexdigest()
open(os.path.join(blobs, lh), "wb").write(gz)
cfg["rootfs"]["diff_ids"].append("sha256:" + hashlib.sha256(raw).hexdigest())
man["layers"].append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                      "digest": "sha256:" + lh, "size": len(gz)})
cd, cs = put(cfg)
man["config"] = dict(man["config"], digest=cd, size=cs)
arm_d, arm_s = put(man)
mt = "application/vnd.oci.image.manifest.v1+json"
index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
         "manifests": [
             {"mediaType": mt, "digest": amd["digest"], "size": amd["size"],
              "platform": {"architecture": "amd64", "os": "linux"}},
             {"mediaType": mt, "digest": arm_d, "size": arm_s,
              "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}}]}
xd, xs = put(index)
top = {"schemaVersion": 2, "manifests": [
    {"mediaType": index["mediaType"], "digest": xd, "size": xs,
     "annotations": {"org.opencontainers.image.ref.name": tag}}]}
open(os.path.join(d, "index.json"), "w").write(json.dumps(top))
print("MULTIARCH_AMD64=%s MULTIARCH_ARM64=%s MULTIARCH_INDEX=%s" % (amd["digest"], arm_d, xd))
PY
)"
  umoci gc --layout "$dir" >/dev/null 2>&1 || true
  rm -rf "$work"
}
