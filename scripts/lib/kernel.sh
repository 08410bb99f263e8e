# shellcheck shell=bash
# Debian's stock cloud kernel (linux-image-*-cloud-amd64), fetched once with apt-get
# download + dpkg-deb -x and reused: the same cache and steps as
# tests/integration/lib/kernel.sh (sourced by scripts/run-sample.sh and bench/guest.sh,
# which do not use the test library: it sets traps and needs the tests' helpers).
#
#   KC=$(kernel_cache)          $LAZYBLK_KERNEL_CACHE, else /var/cache/lazyblk-test/kernel,
#                               else ~/.cache/lazyblk-test/kernel; a directory that cannot be
#                               written but already holds the cloud kernel is used as it is
#                               (the nested VM of the tests sees the host's / read-only)
#   KERNEL=$(fetch_kernel "$KC") the vmlinuz path; its modules are in $KC/root/lib/modules/VER
#   KERNEL=$(fetch_kernel "$KC" amd64)  Debian's generic kernel instead (linux-image-amd64:
#                               ext4 and crc32c as modules), in $KC/amd64/
# Both return non-zero (and print nothing on stdout) when they cannot.

kernel_cache() {
  local d=${LAZYBLK_KERNEL_CACHE:-/var/cache/lazyblk-test/kernel}
  if [ ! -w "$d" ] && ls "$d"/root/boot/vmlinuz-*-cloud-amd64 >/dev/null 2>&1; then
    echo "$d"
    return 0
  fi
  if ! mkdir -p "$d" 2>/dev/null || [ ! -w "$d" ]; then
    d=${XDG_CACHE_HOME:-$HOME/.cache}/lazyblk-test/kernel
    mkdir -p "$d" || return 1
  fi
  echo "$d"
}

# in the current directory; retries once after apt-get update (root). Each apt-get at most
# 10 minutes: a mirror that stops answering must not hold a test run.
_kernel_apt_download() {
  timeout 600 apt-get download -q=2 -o APT::Sandbox::User=root "$@" >/dev/null 2>&1 && return 0
  [ "$(id -u)" -eq 0 ] || return 1
  timeout 600 apt-get update -q=2 >/dev/null 2>&1 || return 1
  timeout 600 apt-get download -q=2 -o APT::Sandbox::User=root "$@" >/dev/null 2>&1
}

fetch_kernel() { # fetch_kernel KC [FLAVOUR]: cloud-amd64 (default) in KC, others in KC/FLAVOUR
  local kc=$1 fl=${2:-cloud-amd64} dir k deb ver dl
  dir=$kc
  [ "$fl" = cloud-amd64 ] || dir=$kc/$fl
  dl=$dir/dl
  k=$(ls "$dir"/root/boot/vmlinuz-*-"$fl" 2>/dev/null | sort -V | tail -1)
  if [ -n "$k" ] && [ -d "$dir/root/lib/modules/${k##*/vmlinuz-}" ]; then echo "$k"; return 0; fi
  mkdir -p "$dl"
  deb=$(ls "$dl"/linux-image-*-"$fl"_*.deb "$dir"/../linux-image-*-"$fl"_*.deb 2>/dev/null |
    grep -v -e unsigned -e "linux-image-${fl}_" | { [ "$fl" = cloud-amd64 ] && cat || grep -v cloud; } |
    sort -V | tail -1)
  if [ -z "$deb" ]; then
    (cd "$dl" && _kernel_apt_download "linux-image-$fl") || return 1
    ver=$(dpkg-deb -f "$(ls "$dl"/linux-image-"$fl"_*.deb | tail -1)" Depends |
      grep -o "linux-image-[0-9][^ ,]*-$fl" | head -1)
    [ -n "$ver" ] || return 1
    (cd "$dl" && _kernel_apt_download "$ver") || return 1
    deb=$(ls "$dl"/"$ver"_*.deb | tail -1)
  fi
  rm -rf "$dir/root.tmp" && dpkg-deb -x "$deb" "$dir/root.tmp" && rm -rf "$dir/root" &&
    mv "$dir/root.tmp" "$dir/root" || return 1
  k=$(ls "$dir"/root/boot/vmlinuz-*-"$fl" 2>/dev/null | sort -V | tail -1)
  [ -n "$k" ] && echo "$k"
}
