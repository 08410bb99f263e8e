#!/bin/bash
# Ctrl-C at a random moment of import, export, push and warm (issue 14, item 13): each is
# started ROUNDS times (default 10) and sent SIGINT after a random time within its measured
# run time. It exits 130 with one line "lazyblk: CMD: interrupted" (or 0 if it had finished),
# no temporary file is left anywhere (the output directory, the store's tmp/, the cache's,
# the pushed remote's), and the stores verify clean. Then each once more, interrupted at a
# moment made to be mid-run rather than hoped for (issue 24, item 10): export, push and warm
# talk to a remote through lib/faultproxy.py, whose gate holds their chunk requests until
# the SIGINT was sent; import reads a file on an nbdfuse mount whose NBD server is stopped
# (SIGSTOP), so it is blocked reading its source when the SIGINT comes. Each must exit 130
# with the one line. Before, SIGINT killed import and export where they stood:
# DISK.raw.tmp.XXXXXX and STORE/tmp/* stayed behind. Then SIGKILL: an export leaves nothing;
# a killed import's staged chunks are listed by cas gc --dry-run and swept, once older than
# the grace period, by the next import.
. "$(dirname "$0")/lib/common.sh"
for tool in nginx curl python3 env; do
  command -v "$tool" >/dev/null || skip "t_interrupt: $tool is not installed"
done
. "$TESTLIB/remote.sh"
need_nginx
ROUNDS=${INTERRUPT_ROUNDS:-10}

# ---- the image: text (slow to compress at --level 12) and random bytes, in 64 KiB chunks
mkdir -p "$T/src" "$T/out"
python3 - "$T/src" <<'EOF'
import random, sys
r = random.Random(14)
words = ["".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(r.randint(2, 9)))
         for _ in range(5000)]
for i in range(3):
    with open(f"{sys.argv[1]}/t{i}.txt", "w") as f:
        f.write(" ".join(r.choice(words) for _ in range(400000)))
EOF
head -c $((16 << 20)) /dev/urandom >"$T/src/random.bin"
IMPORT=(import "$T/src" --level 12 --chunk-size 64K)
"$LAZYBLK" "${IMPORT[@]}" --store "$T/src.store" -o "$T/a.manifest" >/dev/null
"$LAZYBLK" mkfs "$T/a.manifest" -o "$T/a.layout" >/dev/null
mkdir -p "$T/dav/chunks"
start_nginx "$T/dav" --dav
DAV=$NGINX_URL
start_nginx "$T/src.store"
URL=$NGINX_URL

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# no_temps WHAT: no temporary file in the output directory or any store's tmp/.
no_temps() {
  local left
  left=$({ find "$T/imp.store/tmp" "$T/src.store/tmp" "$T/cache/tmp" -type f
    find "$T/out" "$T/dav" -name '*.tmp*'; } 2>/dev/null || true)
  [ -z "$left" ] || die "$1: temporary files left: $left"
}

# verify WHAT STORE: the store verifies clean.
verify() {
  "$LAZYBLK" cas verify --store "$2" >"$T/verify.out" 2>&1 ||
    { cat "$T/verify.out" >&2; die "$1: $2 does not verify"; }
}

# interrupt NAME PREP CHECK -- ARGS...: measure one uninterrupted run of lazyblk ARGS, then
# ROUNDS times: PREP, start it, SIGINT after a random time within that run time, wait,
# check the exit and the one line, no_temps, CHECK. Any moment must be handled right; that
# one lands mid-run is not left to chance here but made sure of by held_round below.
interrupt() {
  local name=$1 prep=$2 check=$3 t0 ms i rc pid delay hit=0 done=0
  shift 4
  $prep
  t0=$(now_ms)
  "$LAZYBLK" "$@" >/dev/null || die "$name: the uninterrupted run failed"
  ms=$(($(now_ms) - t0))
  $check
  for i in $(seq 1 "$ROUNDS"); do
    $prep
    delay=$((RANDOM % (ms * 9 / 10 + 1)))
    # a script's background job starts with SIGINT ignored: give it the default back
    env --default-signal=INT "$LAZYBLK" "$@" >"$T/int.out" 2>"$T/int.err" &
    pid=$!
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -INT "$pid" 2>/dev/null || true
    rc=0
    wait "$pid" || rc=$?
    case $rc in
    0) done=$((done + 1)) ;;
    130)
      # nothing said: the signal came before the command took it over, and killed it
      if [ -s "$T/int.err" ]; then
        [ "$(wc -l <"$T/int.err")" -eq 1 ] && grep -q "^lazyblk: $name: interrupted" "$T/int.err" ||
          { cat "$T/int.err" >&2; die "$name: round $i: not one 'interrupted' line"; }
        hit=$((hit + 1))
      fi
      ;;
    *) cat "$T/int.err" >&2; die "$name: round $i: exit $rc" ;;
    esac
    no_temps "$name (round $i, SIGINT after $delay ms of $ms)"
    $check
  done
  echo "$name: $ROUNDS rounds in a run of $ms ms: $hit interrupted, $done finished"
}

# interrupted_ok NAME PID WHAT: lazyblk (PID) exits 130 with one line "lazyblk: NAME:
# interrupted..."; no_temps
interrupted_ok() {
  local name=$1 pid=$2 rc=0
  wait "$pid" || rc=$?
  [ "$rc" -eq 130 ] || { cat "$T/int.err" >&2; die "$name ($3): exit $rc, want 130"; }
  [ "$(wc -l <"$T/int.err")" -eq 1 ] && grep -q "^lazyblk: $name: interrupted" "$T/int.err" ||
    { cat "$T/int.err" >&2; die "$name ($3): not one 'interrupted' line"; }
  no_temps "$name ($3)"
  echo "$name: interrupted $3: $(cat "$T/int.err")"
}

# held_round NAME PREP CHECK -- ARGS...: PREP, start lazyblk ARGS, whose remote is the proxy
# (mode gate:all: it holds every chunk request), wait until the proxy holds one (so the
# command is mid-run, its signal handling in place), SIGINT, open the gate: exit 130, one
# line, no temporary files, CHECK.
held_round() {
  local name=$1 prep=$2 check=$3 pid
  shift 4
  $prep
  proxy_reset
  proxy_mode gate:all
  env --default-signal=INT "$LAZYBLK" "$@" >"$T/int.out" 2>"$T/int.err" &
  pid=$!
  proxy_wait gate_waiting 1 "$pid"
  kill -INT "$pid"
  proxy_release
  interrupted_ok "$name" "$pid" "while the remote held its request"
  $check
}

# import: a store of its own each round (an existing one would make the import instant)
imp_prep() { rm -rf "$T/imp.store" "$T/out/b.manifest"; }
imp_check() { [ ! -d "$T/imp.store" ] || verify import "$T/imp.store"; }
interrupt import imp_prep imp_check -- \
  "${IMPORT[@]}" --store "$T/imp.store" -o "$T/out/b.manifest"

# export: into $T/out
exp_prep() { rm -f "$T/out/a.raw"; }
exp_check() { :; }
interrupt export exp_prep exp_check -- export "$T/a.layout" --store "$T/src.store" -o "$T/out/a.raw"
verify export "$T/src.store"

# push: to an empty WebDAV remote each round
push_prep() { rm -rf "$T/dav/chunks" && mkdir -p "$T/dav/chunks"; }
push_check() { verify push "$T/dav"; }
interrupt push push_prep push_check -- push --store "$T/src.store" --remote "$DAV"

# warm: every chunk from the remote into an empty cache each round
warm_prep() { rm -rf "$T/cache"; }
warm_check() { [ ! -d "$T/cache" ] || verify warm "$T/cache"; }
interrupt warm warm_prep warm_check -- warm "$T/a.layout" --all --store "$T/cache" --remote "$URL"

# ---- the same, interrupted at a moment that is surely mid-run
start_proxy "$URL"
# (one reader thread: export polls its flag between pieces, so pieces must be left to start;
# with 16 threads every piece of this small image is under way before the signal)
# (an empty cache: what the warm rounds left there would spare it the remote)
held_exp_prep() { exp_prep; rm -rf "$T/cache"; }
held_round export held_exp_prep exp_check -- export "$T/a.layout" --store "$T/cache" \
  --remote "$PROXY_URL/" --fetch-concurrency 1 -o "$T/out/a.raw"
held_round warm warm_prep warm_check -- warm "$T/a.layout" --all --store "$T/cache" \
  --remote "$PROXY_URL/"
stop_proxy
start_proxy "$DAV"
held_round push push_prep push_check -- push --store "$T/src.store" --remote "$PROXY_URL/"
stop_proxy

# import: the last file it reads (sorted: z_held/disk) is on an nbdfuse mount whose server is
# stopped, so it is blocked reading its source when the SIGINT comes; the server goes on
# afterwards and the import stops at its next check
if command -v nbdfuse >/dev/null && command -v fusermount3 >/dev/null && [ -c /dev/fuse ]; then
  mkdir -p "$T/fsrc/z_held"
  cp "$T/src/t0.txt" "$T/fsrc/a.txt"
  head -c $((4 << 20)) /dev/urandom >"$T/held.raw"
  eval "orig_$(declare -f serve_cleanup)"
  serve_cleanup() { fusermount3 -u "$T/fsrc/z_held" 2>/dev/null || true; orig_serve_cleanup; }
  start_server held "nbd+unix:///?socket=$T/held.sock" --raw "$T/held.raw" --read-only \
    --nbd "unix:$T/held.sock"
  HELD=$SRV
  nbdfuse -r "$T/fsrc/z_held/disk" --unix "$T/held.sock" &
  FUSE=$!
  SERVERS+=("$FUSE")
  wait_for -p "$FUSE" test -f "$T/fsrc/z_held/disk" || die "nbdfuse did not mount"
  kill -STOP "$HELD"
  imp_prep
  env --default-signal=INT "$LAZYBLK" import "$T/fsrc" --level 12 --chunk-size 64K --store "$T/imp.store" \
    -o "$T/out/b.manifest" >"$T/int.out" 2>"$T/int.err" &
  pid=$!
  # it has the held file open: it is reading it, and cannot get past it while HELD is stopped
  reading_held() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q -- "-> $T/fsrc/z_held/disk$"; }
  wait_for -p "$pid" reading_held "$pid" || die "import never opened $T/fsrc/z_held/disk"
  kill -INT "$pid"
  kill -CONT "$HELD"
  interrupted_ok import "$pid" "while blocked reading its source"
  imp_check
  fusermount3 -u "$T/fsrc/z_held"
  wait "$FUSE" 2>/dev/null || true
  stop_server "$HELD" held
else
  echo "note: no nbdfuse or /dev/fuse: import is not interrupted at a held moment here"
fi

# ---- SIGKILL: an export leaves nothing (its file has no name until it is complete); an
# import's staged chunks stay in STORE/tmp until gc or the next writer sweeps them
kill_mid() { # kill_mid DELAY_MS ARGS...: SIGKILL lazyblk ARGS after DELAY_MS
  local delay=$1 pid
  shift
  "$LAZYBLK" "$@" >/dev/null 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
exp_prep
kill_mid 100 export "$T/a.layout" --store "$T/src.store" -o "$T/out/a.raw"
no_temps "export (SIGKILL)"
imp_prep
for _ in 1 2 3; do # until the kill lands while chunks are staged
  kill_mid 1000 "${IMPORT[@]}" --store "$T/imp.store" -o "$T/out/b.manifest"
  [ -z "$(ls -A "$T/imp.store/tmp" 2>/dev/null)" ] || break
  imp_prep
done
n=0
[ ! -d "$T/imp.store/tmp" ] || n=$(find "$T/imp.store/tmp" -type f | wc -l)
if [ "$n" -gt 0 ]; then
  "$LAZYBLK" cas gc --store "$T/imp.store" --dry-run >"$T/gc.out"
  grep -q "^gc: would remove 0 stale temporary files (0 B), $n temporary files\? newer than the grace period" \
    "$T/gc.out" || die "gc --dry-run after a killed import: $(cat "$T/gc.out")"
  find "$T/imp.store/tmp" -type f -exec touch -m -d '20 minutes ago' {} +
  "$LAZYBLK" cas gc --store "$T/imp.store" --dry-run >"$T/gc.out"
  grep -q "^gc: would remove $n stale temporary files\? (" "$T/gc.out" ||
    die "gc --dry-run after a killed import, 20 minutes on: $(cat "$T/gc.out")"
  # the next import opens the store for writing: the dead importer's files go
  "$LAZYBLK" "${IMPORT[@]}" --store "$T/imp.store" -o "$T/out/b.manifest" >/dev/null
  no_temps "import after a killed import"
  verify "import after a killed import" "$T/imp.store"
  echo "killed import: $n staged files swept by the next import"
else
  echo "note: no SIGKILL landed while an import had chunks staged (3 tries); sweep not checked here"
fi
echo "interrupt: ok"
