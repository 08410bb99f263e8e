#!/bin/bash
# A Linux guest's lifecycle in the built-in VMM (docs/run.md): Debian's stock kernels (the
# cloud one and the generic one) booted by `lazyblk run --control` on a lazy image, the
# container command a loop that, for tick N = 1, 2, 3, ..., appends N to /data/log, syncs,
# reads 8 bytes of /dev/urandom and prints "tick N RANDOM" (so tick N printed means record N
# acknowledged), then waits a second for a line on its console (the command's stdin, fed by
# the test through a FIFO): "end" ends it with status 7. For each kernel:
#   - boot; `pause`: no tick, no overlay write and almost no CPU time for 3 s; `resume`:
#     the ticks go on with no gap and no repeat;
#   - `snapshot DIR` while the guest writes; `upgrade` (same PID, the ticks go on); the
#     first VM, told to end, has counted 1..LAST with no gap and its disk holds 1..LAST;
#   - two restores of the snapshot at once, each with its own overlay and console: each
#     goes on from the snapshot (no boot messages, its first tick right after the
#     snapshot's last) with no gap, and once told to end, its disk holds 1..its LAST (the
#     snapshot's records and its own, each acknowledged one);
#   - with the generic kernel (CONFIG_VMGENID=y: Linux's vmgenid driver sees the new VM
#     generation ID and reseeds), the two clones draw different random bytes after the
#     restore. The cloud kernel has no vmgenid driver: its clones are reported, not
#     checked (docs/run.md, "What clones share", says what to do there).
# It needs a KVM that runs Linux: where there is none here (no /dev/kvm, or a software one
# without vmx/svm), it runs in the nested VM of lib/nested.sh (about 5 minutes here).
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/serve.sh"
. "$TESTLIB/control.sh"
. "$TESTLIB/nested.sh"

kvm_require_hw
. "$TESTLIB/kernel.sh"
busybox_require
command -v debugfs >/dev/null || skip "no debugfs"
kernel_require
kernel_generic || skip "cannot fetch Debian's generic kernel (linux-image-amd64)"

R=$T/root
busybox_root "$R"
mkdir -p "$R/data"
cat >"$R/bin/ticks" <<'EOF'
#!/bin/sh
# the kernel's messages off the console from here: one printed in the middle of a tick line
# (the generic kernel warns after a pause) cut it, and the tick seemed lost
dmesg -n 1 2>/dev/null
i=0
while :; do
  i=$((i + 1))
  echo $i >>/data/log
  sync
  r=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "tick $i $r"
  # (a second before the end: the console tty drains its last tick line first)
  if read -r -t 1 line && [ "$line" = end ]; then sleep 1; exit 7; fi
done
EOF
chmod 755 "$R/bin/ticks"
"$LAZYBLK" import "$R" --store "$T/store" -o "$T/img.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/img.manifest" -o "$T/img.layout" --size 128M >/dev/null
IMG=("$T/img.layout" --store "$T/store")

ticks() { tr -d '\r' <"$1" | sed -n 's/^tick \([0-9][0-9]*\) [0-9a-f]\{16\}$/\1/p'; }
last_tick() { ticks "$1" | tail -n 1; }
_tick_ge() { [ "$(last_tick "$1")" -ge "$2" ] 2>/dev/null; }
wait_tick() { # wait_tick LOG N PID: the VM PID printed tick N and still runs
  local rc=0
  wait_for_state -p "$3" _tick_ge "$1" "$2" || rc=$?
  if [ "$rc" -eq 0 ] && kill -0 "$3" 2>/dev/null; then return 0; fi
  tail -n 20 "$1" "$1.err" >&2
  [ "$rc" -eq 1 ] || die "the VM ended (waiting for tick $2)"
  die "no tick $2 (at $(last_tick "$1"))"
}
# ticks_from LOG FIRST: the ticks of LOG are FIRST, FIRST+1, ..., LAST (set)
ticks_from() {
  local want
  LAST=$(last_tick "$1")
  want=$(ticks "$1" | awk -v f="$2" 'NR - 1 + f != $1 { print NR - 1 + f; exit }')
  [ -z "$want" ] && return 0
  # the console around the tick that is not there
  tr -d '\r' <"$1" | grep -n -B3 -A3 "^tick $((want + 1)) " | head -n 20 >&2 || true
  die "$1: the ticks are not $2, $(($2 + 1)), ..., $LAST: no line 'tick $want …'"
}
random_of() { tr -d '\r' <"$1" | sed -n "s/^tick $2 \([0-9a-f]\{16\}\)\$/\1/p"; }
# disk_log K OVERLAY NAME: /data/log of the image with OVERLAY's writes is 1..LAST
disk_log() {
  local k=$1 ov=$2 n=$3
  "$LAZYBLK" commit "$ov" --layout "$T/img.layout" --store "$T/$k.cstore" \
    -o "$T/$n.layout" >/dev/null
  cp -r "$T/store/." "$T/$k.cstore/"
  "$LAZYBLK" export "$T/$n.layout" --store "$T/$k.cstore" -o "$T/$n.raw" >/dev/null
  debugfs -R "cat /data/log" "$T/$n.raw" 2>/dev/null >"$T/$n.disklog"
  rm -f "$T/$n.raw"
  [ "$(seq 1 "$LAST")" = "$(cat "$T/$n.disklog")" ] ||
    die "$n: /data/log on its disk is not 1..$LAST: $(tr '\n' ' ' <"$T/$n.disklog" | tail -c 300)"
}
cputicks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
ovstat() { stat -c '%s %.9Y' "$1" "$1.state" 2>/dev/null; }
# vm_start NAME ARGS...: lazyblk run ARGS in the background, its console's input the FIFO
# $T/NAME.in held open here (fd in CONS), output in $T/NAME.log(.err); PID set
vm_start() {
  local name=$1
  shift
  mkfifo "$T/$name.in"
  "$LAZYBLK" run "${IMG[@]}" "$@" >"$T/$name.log" 2>"$T/$name.log.err" <"$T/$name.in" &
  PID=$!
  SERVERS+=("$PID")
  exec {CONS}>"$T/$name.in"
}
# vm_end NAME PID FD: "end" on its console; the run ends with the guest's status 7
vm_end() {
  local r=0
  echo end >&"$3"
  timeout "$(tmo 120)" tail --pid="$2" -f /dev/null || true
  wait "$2" || r=$?
  local fd=$3
  exec {fd}>&-
  [ "$r" -eq 7 ] || { tail -n 5 "$T/$1.log" "$T/$1.log.err" >&2; die "$1: ended with $r, want 7"; }
}

life() { # life K KERNEL
  local k=$1 kernel=$2 log=$T/$1.vm.log sock=$T/$1.sock pid cons n c0 c1 o0 o1 s0 s1 r f a b i
  # shellcheck disable=SC2034  # set and read through eval
  local pa pb ca cb fa=0 fb=0
  vm_start "$k.vm" --overlay "$T/$k.ov" --kernel "$kernel" --mem 512 \
    --append "console=ttyS0 reboot=k panic=-1" --control "$sock" -- /bin/ticks
  pid=$PID cons=$CONS
  wait_tick "$log" 3 "$pid"
  echo "ok: $k: booted, ticking"

  r=$(ctl_req "$sock" pause)
  [ "$r" = "ok paused" ] || die "$k: pause: $r"
  n=$(last_tick "$log"); c0=$(cputicks "$pid"); o0=$(ovstat "$T/$k.ov")
  sleep 3
  c1=$(cputicks "$pid"); o1=$(ovstat "$T/$k.ov")
  [ "$(last_tick "$log")" = "$n" ] || die "$k: paused, but the ticks went from $n to $(last_tick "$log")"
  [ "$o0" = "$o1" ] || die "$k: paused, but the overlay changed: $o0 -> $o1"
  [ $((c1 - c0)) -lt $(( $(getconf CLK_TCK) / 5 )) ] ||
    die "$k: paused, but the VM used $((c1 - c0)) clock ticks of CPU in 3 s"
  [ "$(ctl_req "$sock" resume)" = "ok running" ] || die "$k: resume"
  wait_tick "$log" $((n + 2)) "$pid"
  echo "ok: $k: paused at tick $n for 3 s (no tick, no disk write, $((c1 - c0)) clock ticks of CPU), resumed"

  s0=$(last_tick "$log")
  r=$(ctl_req "$sock" "snapshot $T/$k.snap")
  s1=$(last_tick "$log")
  [ "$r" = "ok $T/$k.snap" ] || die "$k: snapshot answered '$r': $(tail -n 3 "$log.err")"
  wait_tick "$log" $((s1 + 2)) "$pid"
  echo "ok: $k: snapshot while writing, between ticks $s0 and $s1"

  r=$(ctl_req "$sock" upgrade)
  [[ "$r" =~ ^ok\ upgraded:\ paused\ [0-9.]+\ ms$ ]] || die "$k: upgrade: '$r': $(tail -n 3 "$log.err")"
  kill -0 "$pid" 2>/dev/null || die "$k: process $pid is gone after the upgrade"
  wait_tick "$log" $(( $(last_tick "$log") + 2 )) "$pid"
  echo "ok: $k: live upgrade ($r), same pid $pid"

  vm_end "$k.vm" "$pid" "$cons"
  ticks_from "$log" 1
  disk_log "$k" "$T/$k.ov" "$k.vm"
  echo "ok: $k: the first VM counted 1..$LAST through pause, snapshot and upgrade; its disk holds them all"

  # two restores at once, each with its own overlay and console
  for i in a b; do
    vm_start "$k.$i" --overlay "$T/$k.ov.$i" --restore "$T/$k.snap"
    eval "p$i=\$PID c$i=\$CONS"
  done
  for i in a b; do
    eval "pid=\$p$i cons=\$c$i"
    wait_tick "$T/$k.$i.log" 1 "$pid"   # any tick: the first one tells where it went on
    f=$(ticks "$T/$k.$i.log" | sed -n 1p)
    wait_tick "$T/$k.$i.log" $((f + 4)) "$pid"
    eval "f$i=$f"
  done
  for i in a b; do
    eval "pid=\$p$i cons=\$c$i f=\$f$i"
    vm_end "$k.$i" "$pid" "$cons"
    ! grep -Eq "Linux version|Run /init|lazyblk-init" "$T/$k.$i.log" || die "$k: clone $i booted again"
    [ "$f" -gt "$s0" ] && [ "$f" -le $((s1 + 1)) ] ||
      die "$k: clone $i starts at tick $f (the snapshot was taken between ticks $s0 and $s1)"
    ticks_from "$T/$k.$i.log" "$f"
    disk_log "$k" "$T/$k.ov.$i" "$k.$i"
    echo "ok: $k: clone $i went on from tick $f to $LAST; its disk holds 1..$LAST"
  done

  # the random bytes each clone drew after the restore (the first tick it printed may have
  # read them before the snapshot)
  a=""; b=""
  for ((i = fa + 1; i <= fa + 3; i++)); do
    a+="$(random_of "$T/$k.a.log" "$i") "; b+="$(random_of "$T/$k.b.log" "$i") "
  done
  if [ "$k" = generic ]; then
    grep -q "^CONFIG_VMGENID=y" "$(dirname "$kernel")"/config-* ||
      die "$k: the generic kernel has no CONFIG_VMGENID=y"
    for ((i = 1; i <= 3; i++)); do
      [ "$(echo "$a" | cut -d' ' -f$i)" != "$(echo "$b" | cut -d' ' -f$i)" ] ||
        die "$k: tick $((fa + i)): both clones drew $(echo "$a" | cut -d' ' -f$i)"
    done
    echo "ok: $k: the clones drew different random bytes after the restore (vmgenid): $a/ $b"
  elif [ "$a" = "$b" ]; then
    echo "note: $k: no vmgenid driver: both clones drew $a(docs/run.md, \"What clones share\")"
  else
    echo "note: $k: the clones drew different random bytes: $a/ $b"
  fi
}

life cloud "$KERNEL"
life generic "$KERNEL_GENERIC"
echo "Linux guest lifecycle (cloud and generic kernels): ok"
