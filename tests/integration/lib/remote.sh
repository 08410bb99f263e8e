# Sourced after common.sh by the remote tests: a private nginx, a private docker-registry and
# a fault-injecting proxy (faultproxy.py), each on a free loopback port, each killed when
# the test exits. Also sources serve.sh (for start_server/stop_server) unless the test did;
# source serve.sh before this file, never after (serve.sh would reset the cleanup trap).
#
#   need_nginx / need_registry          skip (77) when the tool is missing
#   free_port                           print an unused 127.0.0.1 TCP port
#   start_nginx ROOT [--dav|--dav-gc]   serve ROOT at $NGINX_URL, that is
#                                       http://127.0.0.1:$NGINX_PORT$NGINX_PREFIX/, under a
#                                       path prefix of this test's own (--dav: PUT allowed;
#                                       --dav-gc: PUT, DELETE and JSON directory listings);
#                                       sets NGINX_URL NGINX_PREFIX NGINX_PORT NGINX_PID
#                                       NGINX_DIR NGINX_LOG (access log: "METHOD URI STATUS
#                                       BYTES")
#   nginx_count [METHOD] [URI_REGEX] [STATUS] [LOG]   count access-log lines that match,
#                                       among this test's requests (those under NGINX_PREFIX;
#                                       URI_REGEX sees the URI without the prefix)
#   start_registry                      docker-registry at http://127.0.0.1:$REG_PORT, data
#                                       in $REG_ROOT (= $T/registry); sets REG_PID
#   start_proxy UPSTREAM_URL [ARGS...]  faultproxy.py in front of UPSTREAM_URL (ARGS: --auth
#                                       U:P, --basic U:P, --redirect-blobs, --mode M); sets
#                                       PROXY_PORT PROXY_PID PROXY_URL (http://127.0.0.1:PORT)
#   proxy_mode MODE | proxy_reset | proxy_stats | proxy_stat KEY
#   proxy_release                       let every held request go (the mode becomes pass)
#   proxy_park_also METHOD:REGEX        hold those requests too, the ones held staying held
#   proxy_wait KEY N [PID]              until proxy_stat KEY >= N (e.g. gate_waiting 1: a
#                                       request is held by mode gate: or park:); dies after the common deadline, or
#                                       when PID (the client) ended first
#   proxy_wait_held ERE [PID]           until a request whose "METHOD path" matches ERE is
#                                       held at the gate now (park:/gate: modes), as
#                                       proxy_wait
#   start_fake NAME [ARGS...]           fakeregistry.py (ARGS: --listen, --store, --realm,
#                                       ...); sets FAKE_PORT FAKE_PID, its request log is
#                                       $T/NAME.log ("METHOD PATH AUTHORIZATION" a line)
#   stop_pid PID                        kill one server started here and reap it
#   stop_proxy / stop_nginx / stop_registry   the last one started of each kind
#   json_get FILE KEY                   a key of a JSON object file (e.g. serve --stats-json)
#   json_expr FILE PYEXPR               die unless PYEXPR holds (s = the JSON object)
#   stats_has FILE KEY...               die unless every KEY is present; the remote keys of
#                                       serve --stats-json are in $REMOTE_STATS_KEYS
#   store_chunk_bytes DIR               sum of the file sizes under DIR/chunks
#   chunk_count DIR / chunk_file DIR DIGEST / check_cache_dir DIR (only verified chunks)
#   make_image DIR MB / build_image NAME MB [IMPORT_ARGS]   a test image and its reference
#   first_chunk MANIFEST PATH / file_offset RAW PATH        where a file's data lives
#   expect_fail_line NAME ERE -- CMD    one "lazyblk: " line matching ERE, non-zero exit
#   no_partial_output FILE              a failed export left neither FILE nor FILE.tmp*
#   nbd_readcheck SOCK REF [fail:OFF] [ok:OFF]   read a served disk, never wrong bytes
#   flip_byte FILE [OFFSET]
[ "$(type -t serve_cleanup)" = function ] || . "$TESTLIB/serve.sh"
. "$TESTLIB/../../../scripts/lib/nginx_conf.sh"

REMOTE_PIDS=()
remote_cleanup() {
  local p
  # and the vhost-user servers of kernel.sh's vu_serve, when a test uses both
  for p in "${REMOTE_PIDS[@]}" ${VU_PIDS[@]+"${VU_PIDS[@]}"}; do kill -9 "$p" 2>/dev/null || true; done
  for p in "${REMOTE_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  serve_cleanup
}
trap remote_cleanup EXIT
# (re-)installed by every start_* below, so a later trap from serve.sh cannot orphan a server
_remote_track() { REMOTE_PIDS+=("$1"); trap remote_cleanup EXIT; }

need_nginx() { command -v nginx >/dev/null || skip "nginx is not installed (scripts/deps.sh)"; }
need_registry() {
  command -v docker-registry >/dev/null || skip "docker-registry is not installed (scripts/deps.sh)"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL PID NAME LOG: until URL answers (any HTTP status), or die.
_http_up() { curl -s -o /dev/null --max-time 10 "$1"; }
wait_http() {
  local url=$1 pid=$2 name=$3 log=$4 rc=0
  wait_for_state -p "$pid" _http_up "$url" && return 0 || rc=$?
  cat "$log" >&2 || true
  [ "$rc" -eq 2 ] && die "$name exited at start"
  die "$name does not answer on $url"
}

stop_pid() {
  local pid=$1
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

_NGINX_N=0
start_nginx() {
  local root dav=""
  root=$(cd "$1" && pwd) || die "start_nginx: no directory $1"
  [ "${2:-}" = "--dav" ] &&
    dav="dav_methods PUT; create_full_put_path on; dav_access user:rw group:r all:r;"
  # --dav-gc: also DELETE, and directories listed as JSON (what cas gc --remote http needs)
  [ "${2:-}" = "--dav-gc" ] &&
    dav="dav_methods PUT DELETE; create_full_put_path on; dav_access user:rw group:r all:r;
      autoindex on; autoindex_format json;"
  _NGINX_N=$((_NGINX_N + 1))
  NGINX_DIR=$T/nginx.$_NGINX_N
  NGINX_PORT=$(free_port)
  NGINX_LOG=$NGINX_DIR/access.log
  # the test's requests go under a prefix of its own, so that a request someone else sends
  # to the port (any process on the machine may) is never counted as the test's
  NGINX_PREFIX=/t-$$-$RANDOM-$_NGINX_N
  NGINX_URL=http://127.0.0.1:$NGINX_PORT$NGINX_PREFIX/
  mkdir -p "$NGINX_DIR/www"
  ln -s "$root" "$NGINX_DIR/www$NGINX_PREFIX"
  nginx_conf "$NGINX_DIR" "$NGINX_PORT" "$NGINX_DIR/www" 1 "$dav"
  : >"$NGINX_LOG"
  nginx -p "$NGINX_DIR" -c "$NGINX_DIR/nginx.conf" -e "$NGINX_DIR/error.log" \
    >"$NGINX_DIR/stdout" 2>&1 &
  NGINX_PID=$!
  _remote_track "$NGINX_PID"
  # the readiness probe asks outside the prefix: nginx may log it after curl has its answer,
  # so truncating the log afterwards would not always keep it out of the test's count
  wait_http "http://127.0.0.1:$NGINX_PORT/ready-probe" "$NGINX_PID" nginx "$NGINX_DIR/error.log"
  : >"$NGINX_LOG"
}
stop_nginx() { stop_pid "$NGINX_PID"; }

# nginx_count [METHOD] [URI_REGEX] [STATUS] [LOG]: access-log lines of this test's requests
# (URI under NGINX_PREFIX) matching all given fields ('' or '.' matches anything); URI_REGEX
# is matched against the URI without the prefix ('^/chunks/').
nginx_count() {
  local m=${1:-.} u=${2:-.} s=${3:-.} log=${4:-$NGINX_LOG}
  awk -v m="$m" -v u="$u" -v s="$s" -v p="$NGINX_PREFIX" '
    index($2, p "/") != 1 { next }
    { uri = substr($2, length(p) + 1) }
    ($1 ~ "^(" m ")$" || m == ".") && uri ~ u && ($3 ~ "^(" s ")$" || s == ".") { n++ }
    END { print n + 0 }' "$log"
}

start_registry() {
  REG_ROOT=$T/registry
  REG_PORT=$(free_port)
  mkdir -p "$REG_ROOT"
  cat >"$T/registry.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $REG_ROOT
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$REG_PORT
  secret: lazyblk-test-secret
EOF
  docker-registry serve "$T/registry.yml" >"$T/registry.log" 2>&1 &
  REG_PID=$!
  _remote_track "$REG_PID"
  local rc=0
  wait_for_state -p "$REG_PID" curl -fsS -o /dev/null --max-time 10 "http://127.0.0.1:$REG_PORT/v2/" \
    2>/dev/null && return 0 || rc=$?
  cat "$T/registry.log" >&2
  [ "$rc" -eq 2 ] && die "docker-registry exited"
  die "docker-registry does not answer on 127.0.0.1:$REG_PORT"
}
stop_registry() { stop_pid "$REG_PID"; }

_PROXY_N=0
start_proxy() {
  local up=$1 pf
  shift
  _PROXY_N=$((_PROXY_N + 1))
  pf=$T/proxy.$_PROXY_N.port
  python3 "$TESTLIB/faultproxy.py" "$up" --port-file "$pf" "$@" \
    >"$T/proxy.$_PROXY_N.log" 2>&1 &
  PROXY_PID=$!
  _remote_track "$PROXY_PID"
  wait_for_state -p "$PROXY_PID" test -s "$pf" ||
    { cat "$T/proxy.$_PROXY_N.log" >&2; die "faultproxy did not start"; }
  PROXY_PORT=$(cat "$pf")
  PROXY_URL=http://127.0.0.1:$PROXY_PORT
  curl -fsS -o /dev/null --max-time 30 "$PROXY_URL/__proxy/stats" || die "faultproxy does not answer"
}
stop_proxy() { stop_pid "$PROXY_PID"; }

start_fake() {
  local name=$1 pf=$T/$1.port
  shift
  rm -f "$pf"
  : >"$T/$name.log"
  python3 "$TESTLIB/fakeregistry.py" --port-file "$pf" --log "$T/$name.log" "$@" \
    >"$T/$name.out" 2>&1 &
  FAKE_PID=$!
  _remote_track "$FAKE_PID"
  wait_for_state -p "$FAKE_PID" test -s "$pf" || { cat "$T/$name.out" >&2; die "$name did not start"; }
  FAKE_PORT=$(cat "$pf")
}

proxy_mode() {
  curl -fsS -o /dev/null --max-time 30 -X POST --data-binary "$1" "$PROXY_URL/__proxy/mode" ||
    die "proxy_mode $1 refused"
}
proxy_reset() { curl -fsS -o /dev/null --max-time 30 -X POST "$PROXY_URL/__proxy/reset"; }
proxy_release() {
  curl -fsS -o /dev/null --max-time 30 -X POST "$PROXY_URL/__proxy/release" ||
    die "proxy_release refused"
}
proxy_park_also() {
  curl -fsS -o /dev/null --max-time 30 -X POST --data-binary "$1" "$PROXY_URL/__proxy/park" ||
    die "proxy_park_also $1 refused"
}
_proxy_ge() { [ "$(proxy_stat "$1" 2>/dev/null || echo 0)" -ge "$2" ]; }
proxy_wait() {
  local rc=0
  wait_for_state ${3:+-p "$3"} _proxy_ge "$1" "$2" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  [ "$rc" -eq 2 ] && die "proxy_wait $1 >= $2: the client (pid $3) ended first: $(proxy_stats)"
  die "proxy_wait $1 >= $2: not reached in ${LAZYBLK_TEST_WAIT:-120} s: $(proxy_stats)"
}
_proxy_held() {
  proxy_stats 2>/dev/null | python3 -c '
import json, re, sys
sys.exit(0 if any(re.search(sys.argv[1], h) for h in json.load(sys.stdin)["gate_held_now"]) else 1)' "$1"
}
proxy_wait_held() {
  local rc=0
  wait_for_state ${2:+-p "$2"} _proxy_held "$1" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  [ "$rc" -eq 2 ] && die "proxy_wait_held $1: the client (pid $2) ended first: $(proxy_stats)"
  die "proxy_wait_held $1: not held in ${LAZYBLK_TEST_WAIT:-120} s: $(proxy_stats)"
}
proxy_stats() { curl -fsS --max-time 30 "$PROXY_URL/__proxy/stats"; }
# proxy_stat KEY (KEY may be by_status.500): a number, 0 when absent
proxy_stat() {
  proxy_stats | python3 -c '
import json, sys
d = json.load(sys.stdin)
for k in sys.argv[1].split("."):
    d = d.get(k, 0) if isinstance(d, dict) else 0
print(d)' "$1"
}

json_get() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# the bytes a --cache-size bound covers: chunk files and their plain copies (STORE/plain)
store_chunk_bytes() {
  if [ -d "$1/chunks" ]; then
    { find "$1/chunks" -type f -printf '%s\n'; [ ! -d "$1/plain" ] || find "$1/plain" -type f -printf '%s\n'; } |
      awk '{ s += $1 } END { print s + 0 }'
  else
    echo 0
  fi
}

# make_image DIR RANDOM_MB: real files (copyright texts from /usr/share/doc, a few python
# packages) plus RANDOM_MB MiB of random data in DIR/random.bin and 20 small random files.
make_image() {
  local dir=$1 mb=$2 py docs f
  mkdir -p "$dir/doc" "$dir/py" "$dir/small"
  mapfile -t docs < <(find /usr/share/doc -maxdepth 2 -name copyright -type f 2>/dev/null | sort)
  for f in "${docs[@]:0:300}"; do
    mkdir -p "$dir/doc/$(basename "$(dirname "$f")")"
    cp "$f" "$dir/doc/$(basename "$(dirname "$f")")/"
  done
  py=$(ls -d /usr/lib/python3.[0-9]* 2>/dev/null | head -1)
  if [ -n "$py" ]; then
    for m in json email http; do cp -a "$py/$m" "$dir/py/" 2>/dev/null || true; done
  fi
  head -c "$((mb << 20))" /dev/urandom >"$dir/random.bin"
  for i in $(seq 1 20); do head -c $((i * 3001)) /dev/urandom >"$dir/small/f$i"; done
}

# image_from_tree NAME SIZE [IMPORT_ARGS...]: the tree $T/NAME.src imported into
# $T/NAME.store, laid out by mkfs as $T/NAME.layout (a disk of SIZE, 4 MiB journal) and
# exported as the reference disk $T/NAME.raw.
image_from_tree() {
  local n=$1 size=$2
  shift 2
  "$LAZYBLK" import "$T/$n.src" --store "$T/$n.store" -o "$T/$n.manifest" "$@" >/dev/null
  "$LAZYBLK" mkfs "$T/$n.manifest" -o "$T/$n.layout" --size "$size" --journal 4M >/dev/null
  "$LAZYBLK" export "$T/$n.layout" --store "$T/$n.store" -o "$T/$n.raw" >/dev/null
}

# build_image NAME RANDOM_MB [IMPORT_ARGS...]: make_image into $T/NAME.src, then
# image_from_tree with a disk of RANDOM_MB + 48 MiB.
build_image() {
  local n=$1 mb=$2
  shift 2
  make_image "$T/$n.src" "$mb"
  image_from_tree "$n" "$((mb + 48))M" "$@"
}

# chunk_count STORE: number of chunk files in STORE.
chunk_count() { find "$1/chunks" -type f 2>/dev/null | wc -l; }

# first_chunk MANIFEST PATH: digest of the first chunk of file PATH (e.g. /random.bin).
first_chunk() {
  "$LAZYBLK" manifest show "$1" | python3 -c '
import json, sys
e = {x["path"]: x for x in json.load(sys.stdin)["entries"]}
print(e[sys.argv[1]]["chunks"][0]["digest"])' "$2"
}

# file_offset RAW PATH: byte offset in the disk of the first block of file PATH.
file_offset() {
  local b
  b=$(debugfs -R "bmap $2 0" "$1" 2>/dev/null)
  [ -n "$b" ] && [ "$b" -gt 0 ] || die "debugfs: no block for $2 in $1"
  echo $((b * 4096))
}

# chunk_file STORE DIGEST
chunk_file() { echo "$1/chunks/${2:0:2}/$2"; }

# expect_fail_line NAME ERE -- CMD...: like expect_error (non-zero exit, exactly one stderr
# line starting "lazyblk: ") with an extended regex for the line; sets FAIL_SECS. Exit 124
# (from a `timeout` wrapper) counts as a hang.
expect_fail_line() {
  local name=$1 want=$2; shift 3
  local rc=0 t0 lines
  t0=$(date +%s)
  "$@" >"$T/.out" 2>"$T/.err" || rc=$?
  FAIL_SECS=$(( $(date +%s) - t0 ))
  [ "$rc" -ne 0 ] || die "$name: expected failure, got exit 0"
  [ "$rc" -ne 124 ] || die "$name: timed out (hangs)"
  lines=$(wc -l <"$T/.err")
  [ "$lines" -eq 1 ] || { cat "$T/.err" >&2; die "$name: expected 1 stderr line, got $lines"; }
  grep -q '^lazyblk: ' "$T/.err" || die "$name: stderr not prefixed: $(cat "$T/.err")"
  grep -qE -- "$want" "$T/.err" || die "$name: stderr does not match /$want/: $(cat "$T/.err")"
  echo "ok: $name (${FAIL_SECS}s) -> $(cat "$T/.err")"
}

# no_partial_output FILE: neither FILE nor FILE.tmp* exists (a failed export leaves nothing).
no_partial_output() {
  [ ! -e "$1" ] || die "failed export left $1"
  ! compgen -G "$1.tmp*" >/dev/null || die "failed export left $(compgen -G "$1.tmp*")"
}

# check_cache_dir STORE: every file under STORE/chunks is a committed chunk (xx/<64 hex>)
# whose zstd frame decompresses (zstd CLI) to bytes with that sha256.
check_cache_dir() {
  local bad f
  bad=$(find "$1/chunks" -type f -regextype posix-extended \
    ! -regex '.*/chunks/[0-9a-f]{2}/[0-9a-f]{64}' 2>/dev/null)
  [ -z "$bad" ] || die "stray files in $1/chunks: $(echo "$bad" | head -5)"
  find "$1/chunks" -type f | while read -r f; do
    [ "$(zstd -dc "$f" | sha256sum | cut -d' ' -f1)" = "$(basename "$f")" ] ||
      { echo "$f"; break; }
  done >"$T/.badchunks"
  [ ! -s "$T/.badchunks" ] || die "chunk file does not verify: $(cat "$T/.badchunks")"
}

# nbd_readcheck SOCK REF.raw [--bs N] [fail:OFF ...] [ok:OFF ...]: read the whole disk served
# on unix socket SOCK, request by request (default 256 KiB), compare every successful read
# with REF.raw. Prints a JSON summary {size, ok_bytes, failed_bytes, errors: {errno: n},
# failed: [[off, len], ...]}. Fails (exit 1) if any read returned bytes different from
# REF.raw, an error other than EIO came back, the server hung up, or an assertion does not
# hold: fail:OFF (the read covering byte OFF failed), ok:OFF (it succeeded).
nbd_readcheck() {
  python3 - "$@" <<'EOF'
import json, socket, struct, sys

args = sys.argv[1:]
sock, ref = args[0], args[1]
bs = 256 << 10
asserts = []
i = 2
while i < len(args):
    if args[i] == "--bs":
        bs = int(args[i + 1]); i += 2; continue
    kind, off = args[i].split(":"); asserts.append((kind, int(off))); i += 1

def recvn(s, n):
    b = bytearray()
    while len(b) < n:
        d = s.recv(min(n - len(b), 1 << 20))
        if not d:
            sys.exit("readcheck: the server closed the connection")
        b += d
    return bytes(b)

s = socket.socket(socket.AF_UNIX)
s.settimeout(120)
s.connect(sock)
h = recvn(s, 18)
assert h[:16] == b"NBDMAGICIHAVEOPT", h
s.sendall(struct.pack(">I", 3))
s.sendall(struct.pack(">QII", 0x49484156454F5054, 7, 6) + struct.pack(">IH", 0, 0))
size = None
while True:
    _, o, t, n = struct.unpack(">QIII", recvn(s, 20))
    d = recvn(s, n)
    if t == 3 and n >= 12 and struct.unpack(">H", d[:2])[0] == 0:
        size = struct.unpack(">Q", d[2:10])[0]
    if t == 1:
        break
    if t & 0x80000000:
        sys.exit("readcheck: OPT_GO refused (%#x)" % t)
f = open(ref, "rb")
refsize = f.seek(0, 2)
if size != refsize:
    sys.exit("readcheck: served size %s != reference %d" % (size, refsize))
ok = failed = 0
errors, franges, results = {}, [], {}
off, handle = 0, 0
while off < size:
    n = min(bs, size - off)
    handle += 1
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, handle, off, n))
    magic, err, hd = struct.unpack(">IIQ", recvn(s, 16))
    assert magic == 0x67446698 and hd == handle, (hex(magic), hd)
    if err:
        failed += n
        errors[str(err)] = errors.get(str(err), 0) + 1
        franges.append([off, n])
        results[off] = False
    else:
        data = recvn(s, n)
        f.seek(off)
        want = f.read(n)
        if data != want:
            first = next(k for k in range(n) if data[k] != want[k])
            sys.exit("readcheck: WRONG BYTES served at offset %d" % (off + first))
        ok += n
        results[off] = True
    off += n
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 0, 0, 0))
s.close()
print(json.dumps({"size": size, "ok_bytes": ok, "failed_bytes": failed, "errors": errors,
                  "failed": franges[:50]}))
if set(errors) - {"5"}:
    sys.exit("readcheck: errors other than EIO: %s" % errors)
for kind, o in asserts:
    r = results[o - o % bs]
    if kind == "fail" and r:
        sys.exit("readcheck: the read at %d succeeded, want EIO" % o)
    if kind == "ok" and not r:
        sys.exit("readcheck: the read at %d failed" % o)
EOF
}

# stats_has FILE KEY...: every KEY is in the JSON object in FILE.
stats_has() {
  python3 - "$@" <<'EOF' || die "stats JSON $1 lacks keys"
import json, sys
s = json.load(open(sys.argv[1]))
missing = [k for k in sys.argv[2:] if k not in s]
if missing:
    sys.exit("missing: %s in %s" % (missing, s))
EOF
}
REMOTE_STATS_KEYS="disk_hits disk_bytes remote_fetches remote_bytes remote_requests
  remote_retries remote_failures verify_failures fetch_ms_p50 fetch_ms_p90 fetch_ms_p99
  fetch_ms_max cache_limit_bytes cache_used_bytes cache_evictions"

# json_expr FILE PYEXPR: evaluate PYEXPR with s = the JSON object in FILE; exit 1 (printing
# the object) when it is false. E.g. json_expr stats.json 's["verify_failures"] > 0'
json_expr() {
  python3 - "$1" "$2" <<'EOF' || die "$1: not ($2)"
import json, sys
s = json.load(open(sys.argv[1]))
if not eval("(" + sys.argv[2] + ")", {}, {"s": s}):
    print("%s: %s" % (sys.argv[1], json.dumps(s)), file=sys.stderr)
    sys.exit(1)
EOF
}

# flip_byte FILE [OFFSET]: flip one bit of FILE (default: the middle byte), same length.
flip_byte() {
  python3 - "$1" "${2:-}" <<'EOF'
import sys
p = sys.argv[1]
d = bytearray(open(p, "rb").read())
i = int(sys.argv[2]) if sys.argv[2] else len(d) // 2
d[i] ^= 1
open(p, "wb").write(d)
EOF
}
