# Sourced by integration tests that boot Debian's stock cloud kernel under QEMU (after
# common.sh). Debian's linux-image-cloud-amd64 is fetched once (apt-get download +
# dpkg-deb -x) into $LAZYBLK_KERNEL_CACHE (default /var/cache/lazyblk-test/kernel, else
# ~/.cache/lazyblk-test/kernel) and reused.
#
#   kernel_require   sets KERNEL (vmlinuz) and KVER, or skips the test (exit 77)

# The cache directory (created), or fails.
kernel_cache() {
  local d=${LAZYBLK_KERNEL_CACHE:-/var/cache/lazyblk-test/kernel}
  if ! mkdir -p "$d" 2>/dev/null || [ ! -w "$d" ]; then
    d=${XDG_CACHE_HOME:-$HOME/.cache}/lazyblk-test/kernel
    mkdir -p "$d" || return 1
  fi
  echo "$d"
}

# Prints the vmlinuz path of an unpacked linux-image-*-cloud-amd64 under $KC/root.
fetch_kernel() {
  local kc=$1 k deb ver
  k=$(ls "$kc"/root/boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -1)
  if [ -n "$k" ] && [ -d "$kc/root/lib/modules/${k##*/vmlinuz-}" ]; then echo "$k"; return 0; fi
  mkdir -p "$kc/dl"
  # a package someone already downloaded next to the cache is reused
  deb=$(ls "$kc"/dl/linux-image-*-cloud-amd64_*.deb "$kc"/../linux-image-*-cloud-amd64_*.deb \
    2>/dev/null | grep -v unsigned | sort -V | tail -1)
  if [ -z "$deb" ]; then
    (cd "$kc/dl" && apt-get download linux-image-cloud-amd64 >/dev/null 2>&1) || return 1
    ver=$(dpkg-deb -f "$kc"/dl/linux-image-cloud-amd64_*.deb Depends |
      grep -o 'linux-image-[0-9][^ ,]*-cloud-amd64' | head -1)
    [ -n "$ver" ] || return 1
    (cd "$kc/dl" && apt-get download "$ver" >/dev/null 2>&1) || return 1
    deb=$(ls "$kc"/dl/"$ver"_*.deb | tail -1)
  fi
  rm -rf "$kc/root.tmp" && dpkg-deb -x "$deb" "$kc/root.tmp" && rm -rf "$kc/root" &&
    mv "$kc/root.tmp" "$kc/root" || return 1
  k=$(ls "$kc"/root/boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -1)
  [ -n "$k" ] && echo "$k"
}

kernel_require() {
  local kc
  kc=$(kernel_cache) || skip "no writable kernel cache directory"
  KERNEL=$(fetch_kernel "$kc") || skip "cannot fetch linux-image-cloud-amd64 (no network or apt?)"
  KVER=${KERNEL##*/vmlinuz-}
}
