# shellcheck shell=bash
# Sourced after common.sh (and kernel.sh or scripts/lib/kernel.sh, for _kernel_apt_download)
# by t_images_e2e.sh. A multi-arch OCI image built with umoci from Debian packages.
# (Helper D's minimal version, issue 16; helper A writes lib/umoci_image.sh with a function of
# the same name: the lead keeps one.)
#
#   deb_cached PACKAGE        print the path of PACKAGE's .deb, fetched once (apt-get
#                             download) into $LAZYBLK_DEB_CACHE (default
#                             /var/cache/lazyblk-test/debs, else ~/.cache/lazyblk-test/debs)
#                             and reused, as lib/kernel.sh caches the kernel; non-zero if it
#                             cannot
#   build_multiarch_image DIR TAG [EXTRA_DIR]
#                             an OCI layout DIR whose TAG is an image index of
#                               linux/amd64: layer 1 busybox-static (with its applet links:
#                                            a static root the guest runs in), layer 2
#                                            hello, layer 3 EXTRA_DIR's contents at /
#                               linux/arm64/v8: synthetic, one layer holding /ARCH-arm64
#                             (skips the test when umoci or a package is missing)

deb_cached() {
  local pkg=$1 d deb
  d=${LAZYBLK_DEB_CACHE:-/var/cache/lazyblk-test/debs}
  if ! mkdir -p "$d" 2>/dev/null || [ ! -w "$d" ]; then
    d=${XDG_CACHE_HOME:-$HOME/.cache}/lazyblk-test/debs
    mkdir -p "$d" || return 1
  fi
  deb=$(ls "$d/${pkg}"_*_amd64.deb 2>/dev/null | sort -V | tail -1)
  if [ -z "$deb" ]; then
    (cd "$d" && _kernel_apt_download "$pkg") || return 1
    deb=$(ls "$d/${pkg}"_*_amd64.deb 2>/dev/null | sort -V | tail -1)
  fi
  [ -n "$deb" ] && echo "$deb"
}

# _umoci_layer IMAGE:TAG SRC WORK: a layer holding SRC's contents at / (by unpack, copy,
# repack: umoci insert writes a layer tar without the end-of-archive padding)
_umoci_layer() {
  rm -rf "$3/b"
  umoci unpack --rootless --image "$1" "$3/b" >/dev/null 2>&1 || die "umoci unpack $1"
  cp -a "$2/." "$3/b/rootfs/"
  umoci repack --image "$1" "$3/b" >/dev/null 2>&1 || die "umoci repack $1"
}

build_multiarch_image() {
  local dir=$1 tag=$2 extra=${3:-} w deb bb a
  command -v umoci >/dev/null || skip "umoci is not installed (scripts/deps.sh)"
  w=$(mktemp -d "$T/umoci.XXXXXX")
  umoci init --layout "$dir"

  # linux/amd64 (umoci new takes the host's platform)
  umoci new --image "$dir:$tag-amd64"
  deb=$(deb_cached busybox-static) || skip "cannot fetch busybox-static (no network or apt?)"
  dpkg-deb -x "$deb" "$w/l1"
  bb=$w/l1/bin/busybox
  [ -x "$bb" ] || die "busybox-static: no bin/busybox in $deb"
  for a in $("$bb" --list-full); do
    [ -e "$w/l1/$a" ] || { mkdir -p "$w/l1/$(dirname "$a")"; ln -s /bin/busybox "$w/l1/$a"; }
  done
  mkdir -p "$w/l1/tmp" "$w/l1/proc" "$w/l1/sys" "$w/l1/dev"
  _umoci_layer "$dir:$tag-amd64" "$w/l1" "$w"
  deb=$(deb_cached hello) || skip "cannot fetch hello (no network or apt?)"
  dpkg-deb -x "$deb" "$w/l2"
  _umoci_layer "$dir:$tag-amd64" "$w/l2" "$w"
  [ -z "$extra" ] || _umoci_layer "$dir:$tag-amd64" "$extra" "$w"

  # linux/arm64/v8: synthetic, a marker only
  umoci new --image "$dir:$tag-arm64"
  umoci config --image "$dir:$tag-arm64" --architecture arm64 --os linux >/dev/null
  mkdir -p "$w/arm"
  echo arm64 >"$w/arm/ARCH-arm64"
  _umoci_layer "$dir:$tag-arm64" "$w/arm" "$w"

  # the index, under TAG (the per-arch tags go: the index reaches their manifests)
  python3 - "$dir" "$tag" <<'PYEOF'
import hashlib, json, os, sys
d, tag = sys.argv[1:]
IDX = "application/vnd.oci.image.index.v1+json"
top = json.load(open(d + "/index.json"))
ref = "org.opencontainers.image.ref.name"
by = {m["annotations"][ref]: m for m in top["manifests"]}
mans = []
for arch, plat in (("amd64", {"architecture": "amd64", "os": "linux"}),
                   ("arm64", {"architecture": "arm64", "os": "linux", "variant": "v8"})):
    m = dict(by[tag + "-" + arch])
    m.pop("annotations", None)
    m["platform"] = plat
    mans.append(m)
blob = json.dumps({"schemaVersion": 2, "mediaType": IDX, "manifests": mans}).encode()
h = hashlib.sha256(blob).hexdigest()
open("%s/blobs/sha256/%s" % (d, h), "wb").write(blob)
top["manifests"] = [m for m in top["manifests"] if m["annotations"][ref] not in
                    (tag + "-amd64", tag + "-arm64", tag)]
top["manifests"].append({"mediaType": IDX, "digest": "sha256:" + h, "size": len(blob),
                         "annotations": {ref: tag}})
with open(d + "/index.json.tmp", "w") as f:
    json.dump(top, f)
os.rename(d + "/index.json.tmp", d + "/index.json")
PYEOF
  umoci gc --layout "$dir" >/dev/null
  rm -rf "$w"
}
