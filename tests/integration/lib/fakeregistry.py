#!/usr/bin/env python3
"""A small, hostile-when-asked OCI registry for lazyblk's remote tests (python3 stdlib only).

    fakeregistry.py --port-file FILE --log FILE [--listen HOST] [--store DIR] [options]

With --store: the chunks of a lazyblk store DIR (DIR/chunks/xx/NAME, the frame as the
blob), published under every repository and tag as lazyblk publishes them (oci_index.h): the
tag is an image index, its manifests list up to 4000 chunk layers each.
    GET  /v2/                                  200
    GET  /v2/REPO/manifests/TAG                the image index
    GET  /v2/REPO/manifests/sha256:D           one of its manifests
    GET|HEAD /v2/REPO/blobs/sha256:D           a chunk's frame (404 if unknown)
    POST /v2/REPO/blobs/uploads/               202, Location: --upload-location
    PUT  anything                              201 (the body is read and dropped)
    GET  /token                                {"token": "..."} (see --token-basic)
Anything else is 404. Every request is logged to --log, one line each, flushed:
"METHOD PATH AUTHORIZATION" (AUTHORIZATION: the header's value, or "-").

Options:
    --realm URL        requests under /v2/ without "Authorization: Bearer ..." answer 401
                       with a Bearer challenge naming URL ("self": http://HOST:PORT/token of
                       this server); any bearer token is then accepted
    --token-basic U:P  GET /token answers 401 unless it carries HTTP Basic U:P
    --upload-location L  the Location of an upload POST ("{port}" stands for this server's
                       port; default "u1", relative to the POST's path)
    --bomb-index N     the tag's document is an image index whose manifests array holds
                       N bytes of {},{},... (a JSON bomb; nothing else changes)
    --redirect-blobs BASE  blob GETs (after the auth check) answer 307 to BASE + the path
    --empty-first      the first GET of a tag lists no chunk; later ones list them all
    --index-delay S    GETs of a tag after the first wait S seconds before the answer
    --tags-list BODY   GET /v2/REPO/tags/list answers BODY (200, application/json); without
                       it, 404 as for anything else
    --huge-config N    the tag's document is an OCI image manifest (no layers) whose config
                       is N bytes of zeros, served as a blob under its digest (a docker://
                       import must refuse it from the descriptor, before downloading it)
"""
import argparse
import base64
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IDX = "application/vnd.oci.image.index.v1+json"
MAN = "application/vnd.oci.image.manifest.v1+json"
EMPTY = "application/vnd.oci.empty.v1+json"
CHUNK = "application/vnd.lazyblk.chunk.v1+zstd"
ART = "application/vnd.lazyblk.chunks.v1"
MAX_LAYERS = 4000


def doc(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def build(chunks):
    """chunks: [(name, blob_digest, size)] -> (index bytes, {digest: manifest bytes})"""
    empty = "sha256:" + hashlib.sha256(b"{}").hexdigest()
    mans, descs = {}, []
    groups = [chunks[i:i + MAX_LAYERS] for i in range(0, len(chunks), MAX_LAYERS)] or [[]]
    for g in groups:
        m = doc({"schemaVersion": 2, "mediaType": MAN, "artifactType": ART,
                 "config": {"mediaType": EMPTY, "digest": empty, "size": 2},
                 "layers": [{"mediaType": CHUNK, "digest": "sha256:" + b, "size": s,
                             "annotations": {"org.lazyblk.chunk": n}} for n, b, s in g]})
        d = "sha256:" + hashlib.sha256(m).hexdigest()
        mans[d] = m
        descs.append({"mediaType": MAN, "digest": d, "size": len(m), "artifactType": ART})
    return doc({"schemaVersion": 2, "mediaType": IDX, "artifactType": ART,
                "manifests": descs}), mans


class State:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.log = open(a.log, "a", buffering=1)
        self.tag_gets = 0
        self.blobs = {}
        chunks = []
        if a.store:
            for root, _, files in os.walk(os.path.join(a.store, "chunks")):
                for f in files:
                    p = os.path.join(root, f)
                    data = open(p, "rb").read()
                    b = hashlib.sha256(data).hexdigest()
                    self.blobs[b] = p
                    chunks.append((f, b, len(data)))
        chunks.sort()
        self.index, self.mans = build(chunks)
        self.empty_index, m = build([])
        self.mans.update(m)
        if a.huge_config:
            h = hashlib.sha256()
            zeros = bytes(1 << 20)
            for _ in range(a.huge_config >> 20):
                h.update(zeros)
            h.update(bytes(a.huge_config & ((1 << 20) - 1)))
            self.huge_digest = h.hexdigest()
            self.huge_manifest = doc({
                "schemaVersion": 2, "mediaType": MAN,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": "sha256:" + self.huge_digest, "size": a.huge_config},
                "layers": []})
        if a.bomb_index:
            n = a.bomb_index // 3
            self.bomb = (b'{"schemaVersion":2,"mediaType":"' + IDX.encode() +
                         b'","manifests":[' + b",".join([b"{}"] * n) + b"]}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body=b"", ctype="application/json", headers=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_zeros(self, n):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return
        zeros = bytes(1 << 20)
        try:
            while n > 0:
                self.wfile.write(zeros[:min(n, len(zeros))])
                n -= min(n, len(zeros))
        except OSError:
            pass

    def record(self):
        st = self.server.st
        with st.lock:
            st.log.write("%s %s %s\n" % (self.command, self.path,
                                         self.headers.get("Authorization", "-")))

    def drain(self):
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            b = self.rfile.read(min(n, 1 << 20))
            if not b:
                break
            n -= len(b)

    def authorized(self):
        a = self.server.st.a
        if not a.realm or not self.path.startswith("/v2/"):
            return True
        if self.headers.get("Authorization", "").startswith("Bearer "):
            return True
        realm = a.realm
        if realm == "self":
            realm = "http://%s:%d/token" % self.server.server_address[:2]
        self.send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', headers=[
            ("WWW-Authenticate",
             'Bearer realm="%s",service="fake",scope="repository:x:pull"' % realm)])
        return False

    def token(self):
        a = self.server.st.a
        if a.token_basic:
            want = "Basic " + base64.b64encode(a.token_basic.encode()).decode()
            if self.headers.get("Authorization") != want:
                return self.send(401, b"{}", headers=[("WWW-Authenticate", 'Basic realm="t"')])
        self.send(200, b'{"token":"tok-123"}')

    def do_GET(self):
        self.record()
        st = self.server.st
        path = self.path.split("?", 1)[0]
        if path == "/token":
            return self.token()
        if not self.authorized():
            return
        parts = path.split("/")
        if path == "/v2/":
            return self.send(200, b"{}")
        if st.a.tags_list is not None and path.endswith("/tags/list"):
            return self.send(200, st.a.tags_list.encode(), "application/json")
        if len(parts) >= 5 and parts[-2] == "manifests":
            ref = parts[-1]
            if ref.startswith("sha256:"):
                m = st.mans.get(ref)
                return self.send(200, m, MAN) if m else self.send(404, b"{}")
            if st.a.huge_config:
                return self.send(200, st.huge_manifest, MAN)
            with st.lock:
                st.tag_gets += 1
                first = st.tag_gets == 1
            if st.a.bomb_index:
                return self.send(200, st.bomb, IDX)
            if not first and st.a.index_delay:
                time.sleep(st.a.index_delay)
            body = st.empty_index if first and st.a.empty_first else st.index
            return self.send(200, body, IDX)
        if len(parts) >= 5 and parts[-2] == "blobs" and parts[-1].startswith("sha256:"):
            if st.a.redirect_blobs:
                return self.send(307, b"", headers=[("Location", st.a.redirect_blobs + path)])
            if st.a.huge_config and parts[-1] == "sha256:" + st.huge_digest:
                return self.send_zeros(st.a.huge_config)
            p = st.blobs.get(parts[-1][7:])
            if not p:
                return self.send(404, b"{}")
            return self.send(200, open(p, "rb").read(), "application/octet-stream")
        self.send(404, b"{}")

    do_HEAD = do_GET

    def do_POST(self):
        self.record()
        self.drain()
        if not self.authorized():
            return
        if self.path.split("?", 1)[0].endswith("/blobs/uploads/"):
            loc = self.server.st.a.upload_location or "u1"
            loc = loc.replace("{port}", str(self.server.server_address[1]))
            return self.send(202, b"", headers=[("Location", loc)])
        self.send(404, b"{}")

    def do_PUT(self):
        self.record()
        self.drain()
        if not self.authorized():
            return
        self.send(201, b"")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--listen", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--store")
    ap.add_argument("--realm")
    ap.add_argument("--token-basic")
    ap.add_argument("--upload-location")
    ap.add_argument("--bomb-index", type=int, default=0)
    ap.add_argument("--redirect-blobs")
    ap.add_argument("--empty-first", action="store_true")
    ap.add_argument("--index-delay", type=float, default=0)
    ap.add_argument("--tags-list")
    ap.add_argument("--huge-config", type=int, default=0)
    a = ap.parse_args()
    srv = ThreadingHTTPServer((a.listen, a.port), Handler)
    srv.daemon_threads = True
    srv.st = State(a)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, a.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
