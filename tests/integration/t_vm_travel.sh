#!/bin/bash
# A sandbox that travels (docs/run.md, "Snapshots in a store"): a Linux guest (Debian's
# generic kernel, for its vmgenid driver) booted by `lazyblk run --control` fills FILL MiB
# of its RAM (a tmpfs file of random bytes, its md5 printed) and writes files to its disk,
# then ticks as t_vm_linux's guest does ("tick N RANDOM", N appended to /data/log) and
# answers "check" on its console with the md5 of its RAM data and of a disk file.
#   - `snapshot --vm SOCK DIR --store A` while it ticks; a second snapshot stores only what
#     changed (fewer pages than the first);
#   - `push --remote oci://…:TAG DIR --store A` to a private docker-registry; the VM ends;
#   - two `run --restore oci://…:TAG --store B` at once, B empty: each goes on from the
#     snapshot (no boot), its RAM data and disk file check out, it keeps ticking, its ticks
#     continue the snapshot's, and the two draw different random bytes (vmgenid);
#   - refusals: a disk image's tag given to --restore, the snapshot's tag served as a disk.
# FILL is 200 (MiB) unless LAZYBLK_TRAVEL_FILL says another; nested (no hardware KVM here)
# the test takes about 25 minutes, so only make test-nested runs it there (--long), and
# make test runs t_vm_store.sh, the same path with the test guest.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/remote.sh"
. "$TESTLIB/nested.sh"

kvm_require_hw --long 25
. "$TESTLIB/kernel.sh"
busybox_require
need_registry
kernel_require
kernel_generic || skip "cannot fetch Debian's generic kernel (linux-image-amd64)"
FILL=${LAZYBLK_TRAVEL_FILL:-200}

R=$T/root
busybox_root "$R"
mkdir -p "$R/data" "$R/mnt/ram"
cat >"$R/bin/travel" <<'EOF'
#!/bin/sh
dmesg -n 1 2>/dev/null
mount -t tmpfs -o size=90% tmpfs /mnt/ram || exit 3
dd if=/dev/urandom of=/mnt/ram/data bs=1M count="$1" 2>/dev/null || exit 4
dd if=/dev/urandom of=/data/blob bs=64k count=16 2>/dev/null && sync || exit 5
echo "filled $(md5sum </mnt/ram/data | cut -d' ' -f1) $(md5sum </data/blob | cut -d' ' -f1)"
i=0
while :; do
  i=$((i + 1))
  echo $i >>/data/log
  sync
  r=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "tick $i $r"
  if read -r -t 1 line; then
    case $line in
    end) exit 7 ;;
    check) echo "check $(md5sum </mnt/ram/data | cut -d' ' -f1) $(md5sum </data/blob | cut -d' ' -f1) $(sed -n 1p /data/log)" ;;
    esac
  fi
done
EOF
chmod 755 "$R/bin/travel"
"$LAZYBLK" import "$R" --store "$T/A" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 256M >/dev/null
find "$T/A/chunks" -type f | sort >"$T/chunks.before"   # the image's: not the snapshot's

ticks() { tr -d '\r' <"$1" | sed -n 's/^tick \([0-9][0-9]*\) [0-9a-f]\{16\}$/\1/p'; }
last_tick() { ticks "$1" | tail -n 1; }
_tick_ge() { [ "$(last_tick "$1")" -ge "$2" ] 2>/dev/null; }
_has_line() { grep -q "$2" < <(tr -d '\r' <"$1"); }
wait_line() { # wait_line LOG REGEX PID
  local rc=0
  wait_for_state -p "$3" _has_line "$1" "$2" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  tail -n 20 "$1" "$1.err" >&2
  die "no line '$2' in $1 (rc $rc)"
}
wait_tick() { wait_line "$1" "^tick $2 " "$3"; }
random_of() { tr -d '\r' <"$1" | sed -n "s/^tick $2 \([0-9a-f]\{16\}\)\$/\1/p"; }
vm_start() { # vm_start NAME ARGS...: PID, CONS (its console's input)
  local name=$1
  shift
  mkfifo "$T/$name.in"
  "$LAZYBLK" run "$@" >"$T/$name.log" 2>"$T/$name.log.err" <"$T/$name.in" &
  PID=$!
  SERVERS+=("$PID")
  exec {CONS}>"$T/$name.in"
}
vm_end() { # vm_end NAME PID FD: "end"; the run ends with the guest's 7
  local r=0 fd=$3
  echo end >&"$fd"
  timeout "$(tmo 120)" tail --pid="$2" -f /dev/null || true
  wait "$2" || r=$?
  exec {fd}>&-
  [ "$r" -eq 7 ] || { tail -n 5 "$T/$1.log" "$T/$1.log.err" >&2; die "$1: ended with $r, want 7"; }
}

start_registry
TAG=oci://127.0.0.1:$REG_PORT/sandbox/travel:v1
sock=$T/vm.sock
vm_start vm "$T/img.layout" --store "$T/A" --overlay "$T/ov" --kernel "$KERNEL_GENERIC" \
  --mem 512 --append "console=ttyS0 reboot=k panic=-1" --control "$sock" -- /bin/travel "$FILL"
pid=$PID cons=$CONS
wait_line "$T/vm.log" '^filled ' "$pid"
want=$(tr -d '\r' <"$T/vm.log" | sed -n 's/^filled //p')
wait_tick "$T/vm.log" 2 "$pid"
echo "ok: booted, $FILL MiB of RAM filled ($want), ticking"

out=$("$LAZYBLK" snapshot --vm "$sock" "$T/snap1" --store "$T/A") || die "snapshot: $out"
s1=$(last_tick "$T/vm.log")
[[ $out =~ sha256:[0-9a-f]{64}\ \(RAM:\ ([0-9]+)\ pages\ stored ]] || die "snapshot said '$out'"
p1=${BASH_REMATCH[1]}
[ "$p1" -ge $((FILL * 256)) ] || die "the first snapshot stored $p1 pages, fewer than the $FILL MiB filled"
wait_tick "$T/vm.log" $((s1 + 2)) "$pid"
s1=$(last_tick "$T/vm.log")   # printed whole before the request: in the snapshot
out=$("$LAZYBLK" snapshot --vm "$sock" "$T/snap" --store "$T/A") || die "snapshot 2: $out"
s2=$(last_tick "$T/vm.log")
[[ $out =~ \(RAM:\ ([0-9]+)\ pages\ stored,\ ([0-9]+)\ kept ]] || die "snapshot 2 said '$out'"
p2=${BASH_REMATCH[1]} k2=${BASH_REMATCH[2]}
[ "$p2" -lt $((p1 / 4)) ] && [ "$k2" -ge $((FILL * 256)) ] ||
  die "the second snapshot stored $p2 pages (the first $p1), kept $k2: not only what changed"
echo "ok: two snapshots into the store while ticking: $p1 pages, then $p2 stored and $k2 kept"

"$LAZYBLK" push --remote "$TAG" "$T/snap" --store "$T/A" >"$T/push.out" 2>&1 ||
  { cat "$T/push.out" >&2; die "push of the snapshot failed"; }
wait_tick "$T/vm.log" $((s2 + 2)) "$pid"
vm_end vm "$pid" "$cons"
echo "ok: pushed to $TAG; the first VM ended"

# the wrong kind of tag, either way, refused in one line
"$LAZYBLK" push --remote "oci://127.0.0.1:$REG_PORT/sandbox/disk:v1" "$T/img.layout" --store "$T/A" \
  >/dev/null 2>&1 || die "push of the disk image failed"
r=0
"$LAZYBLK" run --restore "oci://127.0.0.1:$REG_PORT/sandbox/disk:v1" --store "$T/X" \
  >/dev/null 2>"$T/kind.err" || r=$?
[ "$r" -ne 0 ] && [ "$(wc -l <"$T/kind.err")" -eq 1 ] && grep -q "disk image, not a VM snapshot" "$T/kind.err" ||
  die "a disk image's tag restored: rc $r, $(cat "$T/kind.err")"
r=0
"$LAZYBLK" serve "$TAG" --store "$T/X" --nbd "unix:$T/x.nbd" >/dev/null 2>"$T/kind.err" || r=$?
[ "$r" -ne 0 ] && grep -q "VM snapshot, not a disk image" "$T/kind.err" ||
  die "a VM snapshot's tag served as a disk: rc $r, $(cat "$T/kind.err")"
echo "ok: a disk image's tag is not restored, a snapshot's not served as a disk"

# two clones at once from the tag, on an empty store
for i in a b; do
  vm_start "$i" --restore "$TAG" --store "$T/B" --overlay "$T/ov.$i"
  eval "p$i=\$PID c$i=\$CONS"
done
for i in a b; do
  eval "pid=\$p$i cons=\$c$i"
  wait_line "$T/$i.log" '^tick ' "$pid"
  f=$(ticks "$T/$i.log" | sed -n 1p)
  [ "$f" -gt "$s1" ] && [ "$f" -le $((s2 + 1)) ] ||
    die "clone $i went on at tick $f (the snapshot was taken between ticks $s1 and $s2)"
  ! grep -Eq "Linux version|Run /init" "$T/$i.log" || die "clone $i booted again"
  echo check >&"$cons"
  wait_line "$T/$i.log" '^check ' "$pid"
  got=$(tr -d '\r' <"$T/$i.log" | sed -n 's/^check //p' | sed -n 1p)
  [ "$got" = "$want 1" ] || die "clone $i: RAM data, disk file and log: '$got', want '$want 1'"
  wait_tick "$T/$i.log" $((f + 3)) "$pid"
  eval "f$i=$f"
done
a=""; b=""
for ((t = f + 1; t <= f + 3; t++)); do
  a+="$(random_of "$T/a.log" "$t") "; b+="$(random_of "$T/b.log" "$t") "
done
[ -n "${a// /}" ] && [ "$a" != "$b" ] || die "the clones drew the same random bytes: $a/ $b"
for i in a b; do
  eval "pid=\$p$i cons=\$c$i"
  vm_end "$i" "$pid" "$cons"
done
[ -n "$(find "$T/B/layouts" -name "*.layout" -print -quit)" ] || die "the clones' store holds no layout"
echo "ok: two clones restored by tag from an empty store went on (ticks $fa.. and $fb..), RAM and files checked out, different random bytes: $a/ $b"
# a RAM chunk that cannot be had: the VM stops with one line, the guest never goes on
mkdir -p "$T/C"
cp -a "$T/A/." "$T/C/"
python3 - "$T/snap/snapshot.json" >"$T/keep.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for x in [d["state"]] + d["ram"]["map"]:
    print(x["digest"].split(":")[1])
PY
n=0
while read -r f; do
  grep -qxF "$(basename "$f")" "$T/keep.txt" && continue
  grep -qxF "$f" "$T/chunks.before" && continue
  printf 'x' | dd of="$T/C/${f#$T/A/}" bs=1 seek=20 conv=notrunc status=none
  n=$((n + 1))
done < <(cd "$T/A" && find "$T/A/chunks" -type f | sort)
[ "$n" -gt 0 ] || die "no RAM chunk to corrupt"
r=0
timeout "$(tmo 300)" "$LAZYBLK" run --restore "$T/snap" --store "$T/C" --overlay "$T/ov.c" \
  </dev/null >"$T/c.log" 2>"$T/c.err" || r=$?
[ "$r" -eq 1 ] || die "a restore whose RAM chunks are corrupt ended with $r: $(tail -n 3 "$T/c.err")"
grep -q "guest RAM: " "$T/c.err" || die "no 'guest RAM:' line: $(cat "$T/c.err")"
! grep -q "^tick " "$T/c.log" || die "the guest went on with RAM that failed verification"
echo "ok: $n corrupt RAM chunks: the VM stopped ($(grep -m1 'guest RAM: ' "$T/c.err" | cut -c1-120)...)"
echo "VM snapshots travel by tag: ok"
