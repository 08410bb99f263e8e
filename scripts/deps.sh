#!/bin/bash
# Install the Debian packages lazyblk needs to build and test; skips what is present.
# Usage: scripts/deps.sh [--check]   (--check: exit 1 if anything is missing, install nothing)
set -euo pipefail
PKGS=(
  build-essential pkg-config
  liburing-dev libzstd-dev libssl-dev libcurl4-openssl-dev libcmocka-dev
  zlib1g-dev liblzma-dev liblz4-dev libseccomp-dev libxxhash-dev
  libarchive-dev libjson-c-dev
  e2fsprogs umoci skopeo zstd attr busybox-static python3 xz-utils time acl
  libnbd-bin python3-libnbd qemu-utils fuse3
  nginx-light docker-registry curl
  acpica-tools
  qemu-system-x86
  shellcheck man-db strace xxhash cpio socat
  clang-14 libclang-rt-14-dev
)
# shellcheck: `make check-sh` (part of `make test`) checks the guest's scripts.
# clang-14 / libclang-rt-14-dev: the fuzz targets (libFuzzer; `make fuzz`, and `make fuzz-smoke`
# in `make test`).
# strace: t_vm_snapshot.sh counts a restore's KVM_GET_SUPPORTED_CPUID calls.
# xxhash (xxhsum): t_vm_snapshot.sh re-seals the VM snapshots it crafts (XXH3-128 digests).
# cpio (with qemu-system-x86's virtiofsd and busybox-static): the nested VM in which the KVM
# tests run on a host without /dev/kvm (tests/integration/lib/nested.sh).
# socat: t_vm_linux.sh's control requests in the nested VM, where a python3 start takes seconds.
# man-db: t_install.sh renders the man pages `make install` installs.
# nginx-light / docker-registry: the remote tests run private instances on free loopback
# ports (their own config, logs and pid files under the test's temp dir); the system nginx
# that the package starts on port 80 is neither used nor touched.
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
if [ "${1:-}" = "--check" ]; then
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "missing packages: ${missing[*]}" >&2
  exit 1
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
