# shellcheck shell=bash
# Debian's stock cloud kernel (linux-image-*-cloud-amd64), fetched once with apt-get
# download + dpkg-deb -x and reused: the same cache and steps as
# tests/integration/lib/kernel.sh (sourced by scripts/run-sample.sh and bench/guest.sh,
# which do not use the test library: it sets traps and needs the tests' helpers).
#
#   KC=$(kernel_cache)          $LAZYBLK_KERNEL_CACHE, else /var/cache/lazyblk-test/kernel,
#                               else ~/.cache/lazyblk-test/kernel
#   KERNEL=$(fetch_kernel "$KC") the vmlinuz path; its modules are in $KC/root/lib/modules/VER
# Both return non-zero (and print nothing on stdout) when they cannot.

kernel_cache() {
  local d=${LAZYBLK_KERNEL_CACHE:-/var/cache/lazyblk-test/kernel}
  if ! mkdir -p "$d" 2>/dev/null || [ ! -w "$d" ]; then
    d=${XDG_CACHE_HOME:-$HOME/.cache}/lazyblk-test/kernel
    mkdir -p "$d" || return 1
  fi
  echo "$d"
}

_kernel_apt_download() { # in the current directory; retries once after apt-get update (root)
  apt-get download -q=2 -o APT::Sandbox::User=root "$@" >/dev/null 2>&1 && return 0
  [ "$(id -u)" -eq 0 ] || return 1
  apt-get update -q=2 >/dev/null 2>&1 || return 1
  apt-get download -q=2 -o APT::Sandbox::User=root "$@" >/dev/null 2>&1
}

fetch_kernel() {
  local kc=$1 k deb ver
  k=$(ls "$kc"/root/boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -1)
  if [ -n "$k" ] && [ -d "$kc/root/lib/modules/${k##*/vmlinuz-}" ]; then echo "$k"; return 0; fi
  mkdir -p "$kc/dl"
  deb=$(ls "$kc"/dl/linux-image-*-cloud-amd64_*.deb "$kc"/../linux-image-*-cloud-amd64_*.deb \
    2>/dev/null | grep -v -e unsigned -e 'linux-image-cloud-amd64_' | sort -V | tail -1)
  if [ -z "$deb" ]; then
    (cd "$kc/dl" && _kernel_apt_download linux-image-cloud-amd64) || return 1
    ver=$(dpkg-deb -f "$(ls "$kc"/dl/linux-image-cloud-amd64_*.deb | tail -1)" Depends |
      grep -o 'linux-image-[0-9][^ ,]*-cloud-amd64' | head -1)
    [ -n "$ver" ] || return 1
    (cd "$kc/dl" && _kernel_apt_download "$ver") || return 1
    deb=$(ls "$kc"/dl/"$ver"_*.deb | tail -1)
  fi
  rm -rf "$kc/root.tmp" && dpkg-deb -x "$deb" "$kc/root.tmp" && rm -rf "$kc/root" &&
    mv "$kc/root.tmp" "$kc/root" || return 1
  k=$(ls "$kc"/root/boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -1)
  [ -n "$k" ] && echo "$k"
}
