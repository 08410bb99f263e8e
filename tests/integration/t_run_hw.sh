#!/bin/bash
# `lazyblk run` boots Debian's stock kernels as their packages ship them (the cloud kernel,
# with ext4 and virtio built in, and the generic one, whose ext4 and crc32c are modules the
# built initramfs loads) straight into a lazy image whose chunks come from a remote: an HTTP
# store (nginx) reached through the link emulator, the local cache empty at each boot. For
# each kernel, on one overlay:
#   1. the container command's output on the console and its exit status (5), the guest
#      reading a file right, a write; the boot's reads recorded (--trace-record);
#   2. a second boot (an empty cache again) sees the first one's write, with --prefetch of
#      that trace (the statistics say the prefetch fetched chunks);
#   3. a write-heavy command: untar of 3000 files + sync, the files' bytes checked in the
#      guest; the overlay then committed and exported, and e2fsck -fn finds the
#      filesystem clean.
# It needs a KVM that runs Linux: where there is none here (no /dev/kvm, or a software one
# without vmx/svm), it runs in the nested VM of lib/nested.sh (about 4 minutes here: TCG).
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/remote.sh"
. "$TESTLIB/nested.sh"

kvm_require_hw
. "$TESTLIB/kernel.sh"
busybox_require
command -v e2fsck >/dev/null || skip "no e2fsck"
need_nginx
LINKEM=${LINKEM:-$(dirname "$LAZYBLK")/tools/linkem}
[ -x "$LINKEM" ] || skip "linkem not built ($LINKEM): run make"
. "$TESTLIB/../../../scripts/lib/linkem.sh"
kernel_require
kernel_generic || skip "cannot fetch Debian's generic kernel (linux-image-amd64)"

# an image with busybox, some data and a tarball of 3000 small files in 60 directories
R=$T/root
busybox_root "$R"
mkdir -p "$R/data" "$R/etc"
head -c 200000 /dev/urandom >"$R/data/x"
XSUM=$(sha256sum "$R/data/x" | cut -d' ' -f1)
python3 - "$T/files" <<'PY'
import os, random, sys
r = random.Random(25)
for d in range(60):
    os.makedirs(f"{sys.argv[1]}/d{d:02}")
    for f in range(50):
        with open(f"{sys.argv[1]}/d{d:02}/f{f:02}", "wb") as o:
            o.write(r.randbytes(r.randrange(0, 3000)))
PY
(cd "$T/files" && tar -cf "$R/data/files.tar" .)
FSUM=$(cd "$T/files" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)
rm -rf "$T/files"
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 256M >/dev/null

# the remote: the store as static files (nginx), through a 100 Mbit/s, 2 ms link
start_nginx "$T/store"
linkem_start "$T/linkem.out" "$T/linkem.err" --connect "127.0.0.1:$NGINX_PORT" \
  --rate 100mbit --delay 1ms
_remote_track "$LINKEM_PID"
REMOTE=http://127.0.0.1:$LINKEM_PORT$NGINX_PREFIX/

# run NAME KERNEL OVERLAY ARGS...: lazyblk run of the image, an empty cache $T/NAME.cache
# with the remote; console in $T/NAME.out, stderr in $T/NAME.err, status in RC
run() {
  local name=$1 kernel=$2 ov=$3
  shift 3
  RC=0
  # (nested, a boot takes 30 to 60 s; a hang shows the stacks of lazyblk's threads)
  bounded "$(tmo 45)" "$LAZYBLK" run "$T/img.layout" --store "$T/$name.cache" \
    --remote "$REMOTE" --overlay "$ov" --kernel "$kernel" --mem 512 \
    --append "console=ttyS0 reboot=k panic=-1" --stats-json "$T/$name.json" "$@" \
    >"$T/$name.out" 2>"$T/$name.err" </dev/null || RC=$?
  [ "$RC" -ne 124 ] ||
    { tail -n 20 "$T/$name.out" >&2; tail -n 330 "$T/$name.err" >&2; die "$name: lazyblk run hung"; }
}
fail_run() { tail -n 20 "$T/$1.out" "$T/$1.err" >&2; die "$1: $2"; }

boots() { # boots K KERNEL: the three boots of the header with kernel KERNEL (named K)
  local k=$1 kernel=$2 ov=$T/$1.ov n
  run "$k.1" "$kernel" "$ov" --trace-record "$T/$k.trace" -- \
    /bin/sh -c "echo hello-from-lazyblk; sha256sum /data/x; echo written-by-$k >/data/new; sync; exit 5"
  [ "$RC" -eq 5 ] || fail_run "$k.1" "exit status $RC, want 5"
  grep -q "^hello-from-lazyblk" "$T/$k.1.out" || fail_run "$k.1" "no command output on the console"
  grep -q "$XSUM" "$T/$k.1.out" || fail_run "$k.1" "the guest read /data/x wrongly"
  n=$(chunk_count "$T/$k.1.cache")
  [ "$n" -gt 0 ] || die "$k.1: no chunk came from the remote"
  [ -s "$T/$k.trace" ] || die "$k.1: no trace recorded"
  echo "ok: $k: booted from the remote ($n chunks fetched), output and exit status 5 kept"

  run "$k.2" "$kernel" "$ov" --prefetch "$T/$k.trace" -- /bin/cat /data/new
  [ "$RC" -eq 0 ] || fail_run "$k.2" "exit $RC"
  grep -q "^written-by-$k" "$T/$k.2.out" || fail_run "$k.2" "the overlay lost the first boot's write"
  n=$(json_get "$T/$k.2.json" prefetch_done)
  [ "$n" -gt 0 ] || die "$k.2: the prefetch of the trace fetched nothing: $(cat "$T/$k.2.json")"
  echo "ok: $k: second boot sees the write; --prefetch of the recorded trace did $n chunks"

  run "$k.3" "$kernel" "$ov" -- /bin/sh -c \
    'mkdir /w && tar -xf /data/files.tar -C /w && sync && cd /w &&
     echo "files $(find . -type f | wc -l) sum $(find . -type f | sort | xargs cat | sha256sum)"'
  [ "$RC" -eq 0 ] || fail_run "$k.3" "untar: exit $RC"
  grep -q "^files 3000 sum $FSUM" "$T/$k.3.out" ||
    fail_run "$k.3" "the guest's untarred files differ: $(grep '^files' "$T/$k.3.out")"
  "$LAZYBLK" commit "$ov" --layout "$T/img.layout" --store "$T/$k.3.cache" \
    -o "$T/$k.commit.layout" >/dev/null
  "$LAZYBLK" export "$T/$k.commit.layout" --store "$T/$k.3.cache" --remote "$REMOTE" \
    -o "$T/$k.raw" >/dev/null
  RC=0; e2fsck -fn "$T/$k.raw" >"$T/$k.fsck" 2>&1 || RC=$?
  [ "$RC" -eq 0 ] || { cat "$T/$k.fsck" >&2; die "$k: e2fsck -fn of the overlay's disk: exit $RC"; }
  rm -f "$T/$k.raw"
  echo "ok: $k: 3000 files untarred and synced, the overlay's disk e2fsck-clean"
}

boots cloud "$KERNEL"
boots generic "$KERNEL_GENERIC"
echo "run with Linux guests (cloud and generic kernels): ok"
