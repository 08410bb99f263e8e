#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 proxy for lazyblk's remote tests (python3 stdlib only).

    faultproxy.py UPSTREAM_URL --port-file FILE [--listen HOST] [--port N] [--mode MODE]
                  [--auth USER:PASS] [--basic USER:PASS] [--redirect-blobs]
                  [--redirect-host HOST] [--tags-list BODY] [--tags-page N]

Forwards GET/HEAD/PUT/POST/PATCH/DELETE (headers and bodies) to UPSTREAM_URL and passes
status, headers and body back; Location headers that point at the upstream are rewritten to
point at the proxy. Keep-alive on both sides of the client connection (HTTP/1.1).

Control (never subject to faults or auth):
    POST /__proxy/mode    body: a mode string (resets the per-path fault counters)
    GET  /__proxy/stats   JSON counters: requests (main listener), redirected_requests,
                          by_status, by_method, by_kind ("PUT chunk", "POST upload",
                          "GET blob", ...), faults_injected, chunk_gets, redirects,
                          leaked_auth, auth_challenges, tokens_issued, token_refused,
                          inflight_max (most requests handled at once), gate_waiting
                          (requests held by the gate now), gate_held (held in all),
                          gate_passed, gate_timeouts
    POST /__proxy/reset   zero the counters and the per-path fault state
    POST /__proxy/release open the gate of the gate: mode: the requests held go on, the
                          mode becomes pass (and the rules of /__proxy/park go)
    POST /__proxy/park    body METHOD:REGEX: from now on, also hold at the gate the requests
                          of METHOD (ANY: all) whose path matches REGEX, as park: does,
                          without opening the gate for those held now (a push's layout
                          upload held by the mode, then its lease's rewrites too); a mode
                          change or a release ends the rules

Fault modes apply only to GETs of chunk/blob paths (containing "/chunks/" or
"/blobs/sha256:"), so manifests, tags and tokens keep working:
    pass               forward unchanged
    err500:N           the first N GETs of each path answer 500
    err500:always      every GET answers 500
    reset              first GET of each path: headers with the real Content-Length, half
                       the body, then an abrupt close (RST, SO_LINGER 0)
    flip               every GET: one byte in the middle of the body flipped, same length
    flip:once          only the first GET of each path
    stall:SECONDS      first GET of each path: nothing for SECONDS, then close
    stallbody:SECONDS  first GET of each path: headers and 16 body bytes, stall, close
    down               every request (not only chunk GETs) is closed without a response
    hold:HEX           GETs of other chunk paths wait (at most 300 s, then counted in
                       hold_timeouts) until a GET of a path containing HEX was answered:
                       shows whether a client can get one chunk while others are pending
    delay:HEX:SECONDS  a GET of a path containing HEX waits SECONDS before it is forwarded
                       (HEX "all": every chunk GET)
    gate:HEX[:K]       a GET or PUT of a chunk/blob path containing HEX (HEX "all": every
                       one) is held, not forwarded, until POST /__proxy/release (or a mode
                       change) opens the gate; the first K (default 0) pass. A test waits
                       for gate_waiting (held now) to know that a request is provably in
                       flight, then releases it: no timing involved. A held request gives
                       up after 900 s (counted in gate_timeouts) so that a failed test ends
    park:METHOD:REGEX  the same gate for any request (not only chunk paths) of METHOD (ANY:
                       every method) whose path matches REGEX (re.search), its body read
                       first: e.g. a push held mid-upload. gate_held_now in the stats lists
                       the "METHOD path" of each request held now
Always: chunk_gets_by_path (chunk GETs per path) and done_order (chunk paths in the order
their answers were sent, the first 10000).
Any mode may end in @N: at most N faults are injected, then requests pass (e.g. stall:10@3
stalls the first GETs of three paths only).
"Remote down" can also be a stopped proxy (the listening port closed).
A test that needs a request in flight (or a client busy) uses gate:, never delay: or stall:
with a sleep: a sleep only hopes that the moment has come (docs/conventions.md, "Tests that
never flake").

--auth USER:PASS: /v2/ paths need "Authorization: Bearer TOKEN" with a token from
GET /token?service=..&scope=.. (HTTP Basic USER:PASS); otherwise 401 with a Bearer
challenge naming realm http://HOST:PORT/token, service lazyblk-test and the repository
scope (pull; pull,push for methods other than GET/HEAD). Authorization is stripped before
forwarding.
--basic USER:PASS: every proxied path needs HTTP Basic USER:PASS (401 otherwise).
--redirect-blobs: chunk/blob GETs (after the auth check) answer 307 to a second listener
on --redirect-host (default 127.0.0.2, another port if that address is unusable), which
serves the same path from the upstream, applies the fault mode, and counts requests that
carry an Authorization header as leaked_auth.
--tags-list BODY: GET /v2/REPO/tags/list answers BODY (200, application/json) instead of
the upstream's list (a registry whose tag list holds hostile names); --tags-list 404: it
answers 404 (a registry that does not list tags).
--tags-page N: GET /v2/REPO/tags/list answers the upstream's list in pages of N tags
(sorted; ?last=TAG: the tags after it), each but the last with a Link: <...>; rel="next"
header to the next page, as registries page their lists (the distribution spec); the client
must follow them.
"""
import argparse
import base64
import http.client
import json
import os
import re
import secrets
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
       "trailer", "trailers", "transfer-encoding", "upgrade", "expect", "host",
       "content-length"}


class State:
    def __init__(self, args):
        self.lock = threading.Lock()
        self.mode = args.mode
        self.auth = args.auth
        self.basic = args.basic
        self.redirect = args.redirect_blobs
        self.tags_list = args.tags_list
        self.tags_page = args.tags_page
        up = urllib.parse.urlsplit(args.upstream)
        if up.scheme != "http" or not up.hostname:
            sys.exit("faultproxy: upstream must be http://HOST[:PORT][/PREFIX]")
        self.up_host = up.hostname
        self.up_port = up.port or 80
        self.up_prefix = up.path.rstrip("/")
        self.up_origin = "http://%s:%d" % (self.up_host, self.up_port)
        self.origin = None        # http://HOST:PORT of the main listener
        self.redir_origin = None  # of the redirect listener
        self.tokens = {}          # token -> set of (repo, action)
        self.budget = None        # faults left under MODE@N (None: unlimited)
        self.gate = threading.Event()  # set: the gate of gate: is open
        self.reset()

    def reset(self):
        with self.lock:
            # requests held right now stay counted: they leave the gate later and count down
            waiting = getattr(self, "c", {}).get("gate_waiting", 0)
            held_now = getattr(self, "c", {}).get("gate_held_now", [])
            self.per_path = {}
            self.held = threading.Event()
            self.c = {"chunk_gets_by_path": {}, "done_order": [], "hold_timeouts": 0,
                      "requests": 0, "by_status": {}, "by_method": {}, "faults_injected": 0,
                      "chunk_gets": 0, "redirects": 0, "redirected_requests": 0,
                      "leaked_auth": 0, "auth_challenges": 0, "tokens_issued": 0,
                      "token_refused": 0, "by_kind": {}, "inflight_max": 0,
                      "gate_waiting": 0, "gate_held": 0, "gate_passed": 0,
                      "gate_timeouts": 0, "gate_held_now": []}
            self.c["gate_waiting"] = waiting
            self.c["gate_held_now"] = held_now
            self.inflight = 0

    def count(self, key, n=1):
        with self.lock:
            self.c[key] += n

    def status(self, code):
        with self.lock:
            k = str(code)
            self.c["by_status"][k] = self.c["by_status"].get(k, 0) + 1

    def nth_get(self, path):
        """1 for the first chunk GET of path since the last mode change, 2 for the next..."""
        with self.lock:
            n = self.per_path.get(path, 0) + 1
            self.per_path[path] = n
            self.c["chunk_gets"] += 1
            self.c["chunk_gets_by_path"][path] = self.c["chunk_gets_by_path"].get(path, 0) + 1
            return n

    def set_mode(self, mode):
        m = re.fullmatch(r"(pass|err500:(\d+|always)|reset|flip(:once)?|"
                         r"stall:\d+(\.\d+)?|stallbody:\d+(\.\d+)?|down|hold:[0-9a-f]+|"
                         r"delay:(?:all|[0-9a-f]+):\d+(\.\d+)?|gate:(?:all|[0-9a-f]+)(?::\d+)?|"
                         r"park:[A-Z]+:[^@]+)(@(\d+))?", mode)
        if not m:
            return False
        with self.lock:
            self.mode = m.group(1)
            self.budget = int(m.group(8)) if m.group(8) else None
            self.per_path = {}
            self.park_also = []
            self.held = threading.Event()
            self.gate.set()  # requests held under the old mode go on
            self.gate = threading.Event()
        return True

    def gate_wait(self, first, what="?"):
        """gate:KEY[:FIRST]: hold this request until the gate opens (the first FIRST pass).
        what ("METHOD path") is listed in gate_held_now while it is held."""
        with self.lock:
            gate = self.gate
            if gate.is_set() or self.c["gate_passed"] < first:
                self.c["gate_passed"] += 1
                return
            self.c["gate_waiting"] += 1
            self.c["gate_held"] += 1
            self.c["gate_held_now"].append(what)
        opened = gate.wait(900)
        with self.lock:
            self.c["gate_waiting"] -= 1
            self.c["gate_held_now"].remove(what)
            if not opened:
                self.c["gate_timeouts"] += 1

    def park(self, method, path):
        """park:METHOD:REGEX (and the rules of /__proxy/park): hold a request it names at
        the gate, as gate: does."""
        with self.lock:
            mode = self.mode
            also = list(self.park_also)
        p = path.split("?", 1)[0]
        for want, rx in also:
            if (want == "ANY" or want == method) and re.search(rx, p):
                return self.gate_wait(0, "%s %s" % (method, p))
        if not mode.startswith("park:"):
            return
        want, rx = mode.split(":", 2)[1:]
        if (want == "ANY" or want == method) and re.search(rx, p):
            self.gate_wait(0, "%s %s" % (method, p))

    def take_fault(self):
        """Count one injected fault; False once the mode's budget (MODE@N) is spent."""
        with self.lock:
            if self.budget is not None:
                if self.budget <= 0:
                    return False
                self.budget -= 1
            self.c["faults_injected"] += 1
            return True

    def snapshot(self):
        with self.lock:
            d = json.loads(json.dumps(self.c))
            d["mode"] = self.mode
            d["faults_left"] = self.budget
            d["redirect_origin"] = self.redir_origin
            return d


def kind_of(method, path):
    """'METHOD KIND' for the by_kind counters: KIND is chunk (a /chunks/ path), blob, upload
    (/blobs/uploads/), manifest, tags, token, ping (/v2/) or other."""
    p = path.split("?", 1)[0]
    if "/chunks/" in p:
        k = "chunk"
    elif "/blobs/uploads" in p:
        k = "upload"
    elif "/blobs/" in p:
        k = "blob"
    elif "/manifests/" in p:
        k = "manifest"
    elif "/tags/" in p:
        k = "tags"
    elif p.startswith("/token"):
        k = "token"
    elif p.rstrip("/") == "/v2":
        k = "ping"
    else:
        k = "other"
    return "%s %s" % (method, k)


def is_chunk_path(path):
    p = path.split("?", 1)[0]
    return "/chunks/" in p or "/blobs/sha256:" in p


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "faultproxy"
    sys_version = ""
    redirect_listener = False

    def log_message(self, fmt, *args):  # quiet; stats are the record
        if os.environ.get("FAULTPROXY_VERBOSE"):
            sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    @property
    def st(self):
        return self.server.state

    # ---- plumbing
    def read_body(self):
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            out = bytearray()
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise ConnectionError("truncated chunked body")
                n = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(n)
                self.rfile.readline(3)
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, code, body=b"", headers=(), ctype=None, head_len=None):
        self.send_response(code)
        seen_ct = False
        for k, v in headers:
            if k.lower() == "content-type":
                seen_ct = True
            self.send_header(k, v)
        if ctype and not seen_ct:
            self.send_header("Content-Type", ctype)
        length = head_len if head_len is not None else len(body)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)
        if not self.path.startswith("/__proxy/"):
            self.st.status(code)

    def send_json(self, code, obj, headers=()):
        self.send(code, json.dumps(obj).encode(), headers, "application/json")

    def abort(self, rst=True):
        """Drop the client connection without (the rest of) a response."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        try:
            if rst:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def upstream(self, method, body):
        path = self.st.up_prefix + self.path
        hdrs = {}
        for k, v in self.headers.items():
            kl = k.lower()
            if kl in HOP:
                continue
            if kl == "authorization" and (self.st.auth or self.st.basic):
                continue
            hdrs[k] = v
        hdrs["Host"] = "%s:%d" % (self.st.up_host, self.st.up_port)
        if body or method in ("PUT", "POST", "PATCH"):
            hdrs["Content-Length"] = str(len(body))
        c = http.client.HTTPConnection(self.st.up_host, self.st.up_port, timeout=120)
        try:
            c.request(method, path, body=body if body else None, headers=hdrs)
            r = c.getresponse()
            data = r.read()
            headers = []
            head_len = None
            for k, v in r.getheaders():
                kl = k.lower()
                if kl == "content-length" and method == "HEAD":
                    head_len = int(v)
                if kl in HOP:
                    continue
                if kl == "location":
                    v = self.rewrite_location(v)
                headers.append((k, v))
            return r.status, headers, data, head_len
        finally:
            c.close()

    def rewrite_location(self, v):
        for origin in (self.st.up_origin, "http://localhost:%d" % self.st.up_port):
            if v.startswith(origin):
                rest = v[len(origin):]
                if self.st.up_prefix and rest.startswith(self.st.up_prefix):
                    rest = rest[len(self.st.up_prefix):]
                return self.st.origin + rest
        return v

    def tags_page(self):
        """--tags-page N: the upstream's tag list, sorted, N tags after ?last=, and a Link
        to the next page while there are more (the distribution spec's pagination)."""
        path, _, query = self.path.partition("?")
        q = urllib.parse.parse_qs(query)
        self.path = path
        try:
            code, _, data, _ = self.upstream("GET", b"")
        except (OSError, http.client.HTTPException) as e:
            return self.send(502, ("upstream: %s\n" % e).encode(), ctype="text/plain")
        if code != 200:
            return self.send(code, data, ctype="application/json")
        doc = json.loads(data)
        tags = sorted(doc.get("tags") or [])
        last = q.get("last", [None])[0]
        if last is not None:
            tags = [t for t in tags if t > last]
        n = self.st.tags_page
        doc["tags"] = tags[:n]
        headers = []
        if len(tags) > n:
            headers.append(("Link", '<%s?n=%d&last=%s>; rel="next"' % (
                path, n, urllib.parse.quote(tags[n - 1]))))
        self.send(200, json.dumps(doc).encode(), headers, "application/json")

    # ---- auth
    def basic_ok(self, cred):
        h = self.headers.get("Authorization", "")
        if not h.lower().startswith("basic "):
            return False
        try:
            return base64.b64decode(h[6:].strip()).decode() == cred
        except Exception:
            return False

    def need_basic(self, realm="lazyblk-test"):
        self.st.count("auth_challenges")
        self.send_json(401, {"errors": [{"code": "UNAUTHORIZED", "message": "need basic auth"}]},
                       [("WWW-Authenticate", 'Basic realm="%s"' % realm)])

    def token_endpoint(self):
        if not self.basic_ok(self.st.auth):
            self.st.count("token_refused")
            return self.need_basic()
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        granted = set()
        for scope in q.get("scope", []):
            for one in scope.split(" "):
                parts = one.split(":")
                if len(parts) >= 3 and parts[0] == "repository":
                    repo = ":".join(parts[1:-1])
                    for a in parts[-1].split(","):
                        granted.add((repo, a))
        tok = secrets.token_hex(16)
        with self.st.lock:
            self.st.tokens[tok] = granted
        self.st.count("tokens_issued")
        self.send_json(200, {"token": tok, "access_token": tok, "expires_in": 300,
                             "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    def bearer_ok(self):
        """None if authorized, else the scope to put in the challenge ('' for /v2/)."""
        p = urllib.parse.urlsplit(self.path).path
        m = re.match(r"^/v2/(.+?)/(blobs|manifests|tags|referrers)/", p)
        repo = m.group(1) if m else None
        action = "pull" if self.command in ("GET", "HEAD") else "push"
        scope = ""
        if repo:
            scope = "repository:%s:%s" % (repo, "pull" if action == "pull" else "pull,push")
        h = self.headers.get("Authorization", "")
        if h.lower().startswith("bearer "):
            tok = h[7:].strip()
            with self.st.lock:
                granted = self.st.tokens.get(tok)
            if granted is not None and (repo is None or (repo, action) in granted):
                return None
        return scope

    def need_bearer(self, scope):
        self.st.count("auth_challenges")
        ch = 'Bearer realm="%s/token",service="lazyblk-test"' % self.st.origin
        if scope:
            ch += ',scope="%s"' % scope
        self.send_json(401, {"errors": [{"code": "UNAUTHORIZED",
                                         "message": "authentication required"}]},
                       [("WWW-Authenticate", ch),
                        ("Docker-Distribution-Api-Version", "registry/2.0")])

    # ---- control
    def control(self):
        p = urllib.parse.urlsplit(self.path).path
        if p == "/__proxy/stats" and self.command == "GET":
            return self.send_json(200, self.st.snapshot())
        if p == "/__proxy/mode" and self.command == "POST":
            mode = self.read_body().decode().strip()
            if self.st.set_mode(mode):
                return self.send(200, b"ok\n", ctype="text/plain")
            return self.send(400, b"bad mode\n", ctype="text/plain")
        if p == "/__proxy/release" and self.command == "POST":
            self.read_body()
            with self.st.lock:
                self.st.mode = "pass"
                self.st.park_also = []
                self.st.gate.set()
            return self.send(200, b"ok\n", ctype="text/plain")
        if p == "/__proxy/park" and self.command == "POST":
            rule = self.read_body().decode().strip()
            m = re.fullmatch(r"([A-Z]+):(.+)", rule)
            if not m:
                return self.send(400, b"bad rule\n", ctype="text/plain")
            with self.st.lock:
                self.st.park_also.append((m.group(1), m.group(2)))
            return self.send(200, b"ok\n", ctype="text/plain")
        if p == "/__proxy/reset" and self.command == "POST":
            self.read_body()
            self.st.reset()
            return self.send(200, b"ok\n", ctype="text/plain")
        self.read_body()
        return self.send(404, b"no such control\n", ctype="text/plain")

    # ---- the request
    def handle_any(self):
        if self.path.startswith("/__proxy/"):
            return self.control()
        st = self.st
        with st.lock:
            mode = st.mode
            st.c["by_method"][self.command] = st.c["by_method"].get(self.command, 0) + 1
            k = kind_of(self.command, self.path)
            st.c["by_kind"][k] = st.c["by_kind"].get(k, 0) + 1
            st.c["redirected_requests" if self.redirect_listener else "requests"] += 1
        if mode == "down" and st.take_fault():
            return self.abort(rst=False)
        body = self.read_body()
        chunk_get = self.command == "GET" and is_chunk_path(self.path)

        if self.redirect_listener:
            if self.headers.get("Authorization"):
                st.count("leaked_auth")
        else:
            if self.path.startswith("/token") and st.auth:
                return self.token_endpoint()
            if st.basic and not self.basic_ok(st.basic):
                return self.need_basic()
            if st.auth and self.path.startswith("/v2"):
                scope = self.bearer_ok()
                if scope is not None:
                    return self.need_bearer(scope)
            tags = self.command == "GET" and self.path.split("?", 1)[0].endswith("/tags/list")
            if tags and st.tags_list == "404":
                return self.send_json(404, {"errors": [{"code": "NAME_UNKNOWN",
                                                        "message": "no tag list here"}]})
            if tags and st.tags_list is not None:
                return self.send(200, st.tags_list.encode(), ctype="application/json")
            if tags and st.tags_page:
                return self.tags_page()
            if chunk_get and st.redirect and st.redir_origin:
                st.count("redirects")
                return self.send(307, b"", [("Location", st.redir_origin + self.path)])

        st.park(self.command, self.path)
        n = st.nth_get(self.path) if chunk_get else 0
        if mode.startswith("gate:") and self.command in ("GET", "PUT") and \
                is_chunk_path(self.path):
            parts = mode.split(":")
            if parts[1] == "all" or parts[1] in self.path:
                st.gate_wait(int(parts[2]) if len(parts) > 2 else 0)
        if chunk_get and mode.startswith("err500:"):
            lim = mode.split(":", 1)[1]
            if (lim == "always" or n <= int(lim)) and st.take_fault():
                return self.send(500, b"injected 500\n", ctype="text/plain")
        if chunk_get and mode.startswith("hold:"):
            key = mode.split(":", 1)[1]
            if key not in self.path and not st.held.wait(300):
                st.count("hold_timeouts")
        if chunk_get and mode.startswith("delay:") and \
                (mode.split(":")[1] == "all" or mode.split(":")[1] in self.path):
            time.sleep(float(mode.split(":")[2]))
        if chunk_get and n == 1 and mode.startswith("stall:") and st.take_fault():
            time.sleep(float(mode.split(":", 1)[1]))
            return self.abort(rst=False)

        try:
            code, headers, data, head_len = self.upstream(self.command, body)
        except (OSError, http.client.HTTPException) as e:
            return self.send(502, ("upstream: %s\n" % e).encode(), ctype="text/plain")

        if chunk_get and code == 200 and data:
            if mode == "reset" and n == 1 and st.take_fault():
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[:len(data) // 2])
                st.status(code)
                return self.abort(rst=True)
            if mode.startswith("stallbody:") and n == 1 and st.take_fault():
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[:16])
                self.wfile.flush()
                st.status(code)
                time.sleep(float(mode.split(":", 1)[1]))
                return self.abort(rst=False)
            if (mode == "flip" or (mode == "flip:once" and n == 1)) and st.take_fault():
                b = bytearray(data)
                b[len(b) // 2] ^= 0x01
                data = bytes(b)
        self.send(code, data, headers, head_len=head_len)
        if chunk_get:
            with st.lock:
                if len(st.c["done_order"]) < 10000:
                    st.c["done_order"].append(self.path)
            if mode.startswith("hold:") and mode.split(":", 1)[1] in self.path:
                st.held.set()

    def do_GET(self):
        st = self.st
        with st.lock:
            st.inflight += 1
            st.c["inflight_max"] = max(st.c["inflight_max"], st.inflight)
        try:
            self.handle_any()
        finally:
            with st.lock:
                st.inflight -= 1

    do_HEAD = do_PUT = do_POST = do_PATCH = do_DELETE = do_GET


class RedirectHandler(Handler):
    redirect_listener = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("upstream")
    ap.add_argument("--listen", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--mode", default="pass")
    ap.add_argument("--auth")
    ap.add_argument("--basic")
    ap.add_argument("--redirect-blobs", action="store_true")
    ap.add_argument("--redirect-host", default="127.0.0.2")
    ap.add_argument("--tags-list")
    ap.add_argument("--tags-page", type=int, default=0)
    args = ap.parse_args()
    state = State(args)
    if not state.set_mode(args.mode):
        sys.exit("faultproxy: bad mode %r" % args.mode)
    srv = Server((args.listen, args.port), Handler)
    srv.state = state
    port = srv.server_address[1]
    state.origin = "http://%s:%d" % (args.listen, port)
    servers = [srv]
    if args.redirect_blobs:
        try:
            r = Server((args.redirect_host, 0), RedirectHandler)
        except OSError:
            r = Server((args.listen, 0), RedirectHandler)
        r.state = state
        state.redir_origin = "http://%s:%d" % r.server_address[:2]
        servers.append(r)
    for s in servers[1:]:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
