#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets: fuzz/make-corpus.py LAZYBLK OUTDIR.

Stored formats come from the real thing: a small tree (files, a directory, a symlink, a
hard link, an xattr, a sparse file) imported by LAZYBLK (the manifest), laid out by its
mkfs (the layout), tarred by GNU tar (the tar seeds and the OCI / docker-archive layers),
a delta of that layout applied by `overlay apply` (the overlay state). What lazyblk does
not write, or writes only with a client attached, is encoded here from docs/formats.md
and the protocols: the delta, the trace, NBD and vhost-user sessions, guest rings,
registry documents and challenges, image configs. Each OUTDIR/TARGET/ gets a few files;
the whole corpus stays small (it is committed: fuzz/corpus/). Needs tar and setfattr.
"""
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..',
                                'tests', 'integration', 'lib'))
from lzcrc import crc32c  # noqa: E402  (one crc32c for every helper that writes our formats)

BLOCK = 4096


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def make_tree(src):
    os.makedirs(os.path.join(src, "etc", "d"))
    with open(os.path.join(src, "etc", "hello"), "w") as f:
        f.write("hello\n")
    with open(os.path.join(src, "etc", "d", "data"), "wb") as f:
        f.write(bytes(range(256)) * 20)
    with open(os.path.join(src, "sparse"), "wb") as f:
        f.seek(64 << 10)
        f.write(b"end")
    os.symlink("../hello", os.path.join(src, "etc", "d", "link"))
    os.link(os.path.join(src, "etc", "hello"), os.path.join(src, "hard"))
    subprocess.run(["setfattr", "-n", "user.k", "-v", "v", os.path.join(src, "etc", "hello")],
                   check=False)


def tar_bytes(src, *opts):
    return subprocess.run(["tar", "-C", src, "-b", "1", "-cf", "-", *opts, "."], check=True,
                          stdout=subprocess.PIPE).stdout


def stored(out, lz, t):
    src = os.path.join(t, "src")
    make_tree(src)
    run(lz, "-q", "import", src, "--store", os.path.join(t, "store"), "-o",
        os.path.join(t, "a.manifest"))
    put(out, "manifest", "tree.manifest", open(os.path.join(t, "a.manifest"), "rb").read())
    put(out, "mkfs", "tree.manifest", open(os.path.join(t, "a.manifest"), "rb").read())
    layout = os.path.join(t, "a.layout")
    run(lz, "-q", "mkfs", os.path.join(t, "a.manifest"), "-o", layout, "--size", "8M",
        "--journal", "4M", "--inodes", "64")
    put(out, "layout", "tree.layout", open(layout, "rb").read())
    put(out, "layout", "tree-v1.layout", layout_version(open(layout, "rb").read(), 1))
    hdr = open(layout, "rb").read(BLOCK)
    delta = make_delta(hashlib.sha256(hdr).digest(), struct.unpack_from("<Q", hdr, 16)[0])
    put(out, "delta", "tree.delta", delta)
    with open(os.path.join(t, "d"), "wb") as f:
        f.write(delta)
    run(lz, "-q", "overlay", "apply", os.path.join(t, "d"), "--layout", layout, "-o",
        os.path.join(t, "ov"))
    put(out, "overlay_state", "tree.state", open(os.path.join(t, "ov.state"), "rb").read())
    layer = os.path.join(t, "b.layout")
    run(lz, "-q", "commit", os.path.join(t, "ov"), "--layout", layout, "--store",
        os.path.join(t, "store"), "-o", layer)
    put(out, "layout", "tree-commit.layout", open(layer, "rb").read())
    put(out, "layout", "tree-commit-v2.layout", layout_version(open(layer, "rb").read(), 2))
    return src


def layout_version(b, version):
    """A version 3 layout as the older version it can be written in (docs/formats.md): 1 for
    one without a parent, 2 for a layer (its metadata runs' layer fields are all 0)."""
    b = bytearray(b)
    struct.pack_into("<I", b, 8, version)
    struct.pack_into("<I", b, 144, 0)
    struct.pack_into("<I", b, 144, crc32c(bytes(b[:168 if version == 1 else 208])))
    return bytes(b)


def make_delta(digest, blocks):
    # blocks 3 and 4 dirty, 10..19 zeroed, the last one dirty
    state = {3: 1, 4: 1, blocks - 1: 1}
    state.update({b: 2 for b in range(10, 20)})
    extents, order = [], sorted(state)
    for b in order:
        if extents and extents[-1][0] + extents[-1][1] == b and extents[-1][2] == state[b]:
            extents[-1][1] += 1
        else:
            extents.append([b, 1, state[b]])
    dirty = sum(1 for s in state.values() if s == 1)
    zero = len(state) - dirty
    h = bytearray(128)
    struct.pack_into("<8sIIQQ32sQQQI", h, 0, b"LZBKDLTA", 1, BLOCK, blocks * BLOCK, blocks,
                     digest, dirty, zero, len(extents), 0)
    struct.pack_into("<I", h, 92, crc32c(bytes(h)))
    body = bytes(h) + bytes(BLOCK - 128)
    body += b"".join(bytes([b & 0xff]) * BLOCK for b in order if state[b] == 1)
    body += b"".join(struct.pack("<QQII", b, n, s, 0) for b, n, s in extents)
    return body + hashlib.sha256(body).digest()


def trace(out):
    strings = b"\0/etc/hello\0/etc/d/data\0"
    recs = [(0, 0, 0, 4096, 0), (10, 1 << 20, 0, 6, 1), (20, 2 << 20, 0, 5120, 12),
            (20, 3 << 20, 4096, 1024, 12)]
    h = struct.pack("<8sIIQQ32s32sQQI44x", b"LZBKTRAC", 1, 160, len(recs), len(strings),
                    bytes(32), bytes(32), 1700000000, 30, 0)
    body = h + b"".join(struct.pack("<QQQII", *r) for r in recs) + strings
    put(out, "trace", "boot.trace", body + hashlib.sha256(body).digest())


def oci(out, layer):
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Cmd": ["/bin/sh", "-c", "echo hi"], "Env": ["PATH=/bin"],
                         "User": "1000:1000", "WorkingDir": "/etc"},
              "rootfs": {"type": "layers", "diff_ids": ["@3"]}}
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": "@2", "size": "#2"},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                            "digest": "@3", "size": "#3"}]}
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "@1",
         "size": "#1", "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}

    def js(o):  # sizes unquoted: "#N" becomes a number
        return json.dumps(o).replace('"#', "#").replace('#1"', "#1").replace(
            '#2"', "#2").replace('#3"', "#3").encode()
    sep = b"\n----\n"
    put(out, "oci", "layout", sep.join([js(index), js(manifest), js(config), layer]))
    put(out, "oci_config", "config.json", json.dumps(config).encode())
    put(out, "oci_config", "docker.json", json.dumps(
        {"config": {"Entrypoint": ["/init"], "Cmd": None, "Env": ["A=1", "B=2"],
                    "User": "root", "ExposedPorts": {"80/tcp": {}}}}).encode())


def docker_archive(out, layer):
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [
                             "sha256:" + hashlib.sha256(layer).hexdigest()]}}).encode()
    cname = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cname, "RepoTags": ["fuzz:latest"],
                            "Layers": ["l1/layer.tar"]}]).encode()
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in (("manifest.json", manifest), (cname, config),
                           ("l1/layer.tar", layer)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    put(out, "docker_archive", "image.tar", b.getvalue())


def oci_archive(out, layer):
    def blob(data):
        return "sha256:" + hashlib.sha256(data).hexdigest(), data
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["sh"]},
                         "rootfs": {"type": "layers", "diff_ids": [
                             "sha256:" + hashlib.sha256(layer).hexdigest()]}}).encode()
    cd, _ = blob(config)
    ld, _ = blob(layer)
    manifest = json.dumps({"schemaVersion": 2,
                           "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": cd, "size": len(config)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                                       "digest": ld, "size": len(layer)}]}).encode()
    md, _ = blob(manifest)
    index = json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": md,
         "size": len(manifest), "platform": {"os": "linux", "architecture": "amd64"},
         "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}).encode()
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name in ("blobs", "blobs/sha256"):
            ti = tarfile.TarInfo(name)
            ti.type = tarfile.DIRTYPE
            tf.addfile(ti)
        for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
                           ("index.json", index),
                           ("blobs/sha256/" + md[7:], manifest),
                           ("blobs/sha256/" + cd[7:], config),
                           ("blobs/sha256/" + ld[7:], layer)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    put(out, "oci_archive", "image.tar", b.getvalue())


def nbd(out):
    opt = lambda o, d=b"": struct.pack(">QII", 0x49484156454F5054, o, len(d)) + d
    req = lambda t, off, ln, fl=0, d=b"": struct.pack(">IHHQQI", 0x25609513, fl, t, 7, off,
                                                      ln) + d
    go = opt(7, struct.pack(">I", 0) + struct.pack(">HH", 1, 3))
    meta = opt(10, struct.pack(">I", 0) + struct.pack(">I", 2) + struct.pack(">I", 15) +
               b"base:allocation" + struct.pack(">I", 13) + b"lazyblk:dirty")
    reqs = (req(1, 4096, 512, 1, b"w" * 512) + req(0, 0, 8192) + req(4, 8192, 4096) +
            req(6, 65536, 4096, 2) + req(7, 0, 1 << 20) + req(5, 0, 4096) + req(3, 0, 0) +
            req(2, 0, 0))
    put(out, "nbd", "structured", struct.pack(">I", 3) + opt(8) + meta + opt(9, meta[16:]) +
        opt(3) + opt(6, go[16:]) + go + reqs)
    put(out, "nbd", "oldstyle-name", struct.pack(">I", 1) + opt(1, b"") + reqs)
    put(out, "nbd", "abort", struct.pack(">I", 1) + opt(2))


AVAIL, USED, DATA, INFLIGHT = 0x200, 0x300, 0x1000, 0x2800


def ring_memory(mem, chains):
    """A split ring of 32 in guest memory mem (desc at 0, avail AVAIL, used USED) holding
    chains: lists of (addr, len, flags), descriptors from 0 on."""
    gpa, d, heads = 0x10000, 0, []
    for chain in chains:
        heads.append(d)
        for i, (addr, ln, fl) in enumerate(chain):
            more = i + 1 < len(chain)
            struct.pack_into("<QIHH", mem, d * 16, gpa + addr, ln, fl | more, d + 1 if more else 0)
            d += 1
    struct.pack_into("<HH", mem, AVAIL, 0, len(heads))
    for i, h in enumerate(heads):
        struct.pack_into("<H", mem, AVAIL + 4 + 2 * i, h)


def blk_chain(mem, k, typ, sector, data_len, write_data):
    """Request k: its header at 0x600 + k * 0x40, status 0x20 after, data at DATA + k * 0x400."""
    at, data = 0x600 + k * 0x40, DATA + k * 0x400
    struct.pack_into("<IIQ", mem, at, typ, 0, sector)
    chain = [(at, 16, 0)]
    if data_len:
        chain.append((data, data_len, 0 if write_data else 2))
    return chain + [(at + 0x20, 1, 2)]


def guest(out):
    mem = bytearray(INFLIGHT)
    chains = [blk_chain(mem, 0, 0, 0, 512, False),    # read
              blk_chain(mem, 1, 1, 8, 1024, True),     # write
              blk_chain(mem, 2, 4, 0, 0, False),       # flush
              blk_chain(mem, 3, 8, 0, 20, False)]      # get id
    struct.pack_into("<QII", mem, DATA + 4 * 0x400, 16, 8, 0)
    chains.append(blk_chain(mem, 4, 11, 0, 16, True))  # discard
    struct.pack_into("<QII", mem, DATA + 5 * 0x400, 32, 8, 1)
    chains.append(blk_chain(mem, 5, 13, 0, 16, True))  # write zeroes
    ring_memory(mem, chains)
    cfg = lambda flags, feat: struct.pack("<BBHHHHHH2xI", 5, flags, 0, AVAIL, USED, 0, 0,
                                          INFLIGHT, feat)
    put(out, "virtio_blk", "requests", cfg(0, 0xffffffff) + mem)
    put(out, "virtio_blk", "event-idx", cfg(2, 0xffffffff) + mem)
    put(out, "vring", "chains", cfg(0, 0) + mem)
    # the read through an indirect table at 0x500: descriptor 0 points at it
    ind = bytearray(mem)
    struct.pack_into("<QIHH", ind, 0, 0x10000 + 0x500, 48, 4, 0)
    for i, (addr, ln, fl) in enumerate(chains[0]):
        struct.pack_into("<QIHH", ind, 0x500 + 16 * i, 0x10000 + addr, ln,
                         fl | (1 if i < 2 else 0), i + 1 if i < 2 else 0)
    put(out, "virtio_blk", "indirect", cfg(1, 0xffffffff) + ind)
    put(out, "vring", "indirect", cfg(1 | 2, 0) + ind)
    # an in-flight region at INFLIGHT (version 1, 32 descs) with head 0 in flight
    inf = ind + struct.pack("<QHHHH", 0, 1, 32, 0, 0) + struct.pack("<B5xHQ", 1, 0, 1)
    put(out, "vring", "inflight", cfg(1 | 4 | 8, 0) + inf)
    put(out, "virtio_blk", "inflight", cfg(1 | 4 | 8, 0xffffffff) + inf)
    return bytes(mem)


def vhost_user(out, ring):
    msg = lambda r, p=b"", fl=1: struct.pack("<III", r, fl, len(p)) + p
    u64 = lambda v: struct.pack("<Q", v)
    st = lambda i, n: struct.pack("<II", i, n)
    uva = 0x7F0000000000
    feats = (1 << 32) | (1 << 30) | (1 << 28) | (1 << 29) | (1 << 9) | (1 << 6)
    pf = (1 << 0) | (1 << 3) | (1 << 9) | (1 << 12) | (1 << 13)
    s = (msg(1) + msg(15) + msg(16, u64(pf)) + msg(2, u64(feats)) + msg(3) + msg(17) +
         msg(24, struct.pack("<III", 0, 60, 0) + bytes(60)) +
         msg(31, struct.pack("<QQHHI", 0, 0, 1, 32, 0)) +
         msg(0x7F, ring) +
         msg(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0x10000, 64 << 10, uva, 0)) +
         msg(8, st(0, 32)) +
         msg(9, struct.pack("<IIQQQQ", 0, 0, uva, uva + USED, uva + AVAIL, 0)) +
         msg(10, st(0, 0)) + msg(13, u64(0)) + msg(14, u64(0)) + msg(12, u64(0)) +
         msg(18, st(0, 1), 1 | 8) + msg(11, st(0, 0)) + msg(34))
    put(out, "vhost_user", "session", s)
    put(out, "vhost_user", "inflight", msg(1) + msg(15) + msg(16, u64(pf)) +
        msg(32, struct.pack("<QQHHI", 4096, 0, 1, 32, 0)) + msg(4))


def registry(out):
    hexa = hashlib.sha256(b"a").hexdigest()
    hexb = hashlib.sha256(b"b").hexdigest()
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": "sha256:" + hexa, "size": 123,
                            "artifactType": "application/vnd.lazyblk.chunks.v1"}]}
    man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
           "artifactType": "application/vnd.lazyblk.chunks.v1",
           "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                      "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
                      "size": 2},
           "layers": [{"mediaType": "application/vnd.lazyblk.chunk.v1+zstd",
                       "digest": "sha256:" + hexa, "size": 10,
                       "annotations": {"org.lazyblk.chunk": hexb}},
                      {"mediaType": "application/vnd.lazyblk.chunk.v1+zstd",
                       "digest": "sha256:" + hexb, "size": 11,
                       "annotations": {"org.lazyblk.chunk": hexa}}]}
    put(out, "registry", "index.json", b"\0" + json.dumps(index).encode())
    put(out, "registry", "manifest.json", b"\0" + json.dumps(man).encode())
    put(out, "registry", "bearer", b"\1" + b'Bearer realm="https://auth.example/token",'
        b'service="registry.example",scope="repository:a/b:pull"')
    put(out, "registry", "bearer-escaped", b"\1" + b'bearer Realm="http://x/t?a=1", '
        b'error="insufficient_scope", scope=repository:x:pull,push, service="s\\"q"')
    put(out, "registry", "token.json", b"\2" + json.dumps(
        {"token": "abc", "access_token": "abc", "expires_in": 300}).encode())
    put(out, "registry", "location-relative", b"\3" + b"http://127.0.0.1:5000/v2/r/blobs/uploads/"
        b"\n../uploads/u1?_state=x")
    put(out, "registry", "location-userinfo", b"\3" + b"http://127.0.0.1:5000/v2/r/blobs/uploads/"
        b"\nhttp://127.0.0.1:5000@127.0.0.2:5001/up")
    put(out, "registry", "http-date", b"\1" + b"Mon, 07 Dec 2026 03:42:21 GMT")
    tagged = [("a" * 64, 512, "application/vnd.lazyblk.image.v1"),
              ("b" * 64, 300, "application/vnd.lazyblk.chunks.v1")]
    put(out, "registry", "image-index-tag", b"\0" + json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "artifactType": "application/vnd.lazyblk.image.v1",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": "sha256:" + h, "size": n, "artifactType": t}
                      for h, n, t in tagged]}, separators=(",", ":")).encode())
    put(out, "registry", "link-next", b"\3" + b'</v2/r/tags/list?n=100&last=a>; rel="prev", '
        b'</v2/r/tags/list?n=100&last=z>; title="more"; rel="next"')


def image_doc(out):
    """The documents of an image by reference (docs/images.md), as lazyblk writes them."""
    def sha(b):
        return "sha256:" + hashlib.sha256(b).hexdigest()

    def dumps(o):
        return json.dumps(o, separators=(",", ":")).encode()

    top, base, man = (hashlib.sha256(x).hexdigest() for x in (b"top", b"base", b"manifest"))
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "artifactType": "application/vnd.lazyblk.image.v1",
                "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": sha(b"{}"),
                           "size": 2},
                "layers": [{"mediaType": "application/vnd.lazyblk.layout.v1", "digest": sha(b"t"),
                            "size": 8192, "annotations": {"org.lazyblk.layout": top}},
                           {"mediaType": "application/vnd.lazyblk.layout.v1", "digest": sha(b"b"),
                            "size": 49408, "annotations": {"org.lazyblk.layout": base}},
                           {"mediaType": "application/vnd.lazyblk.manifest.v1", "digest": sha(b"m"),
                            "size": 1468}],
                "annotations": {"org.lazyblk.chunks": "3", "org.lazyblk.disk-size": "8388608"}}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "artifactType": "application/vnd.lazyblk.image.v1",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": sha(dumps(manifest)), "size": len(dumps(manifest)),
                            "artifactType": "application/vnd.lazyblk.image.v1"},
                           {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": sha(b"chunks"), "size": 300,
                            "artifactType": "application/vnd.lazyblk.chunks.v1"}]}
    image_json = {"schemaVersion": 1, "mediaType": "application/vnd.lazyblk.image.v1+json",
                  "layouts": [{"digest": "sha256:" + top, "sha256": sha(b"t"), "size": 8192},
                              {"digest": "sha256:" + base, "sha256": sha(b"b"), "size": 49408}],
                  "manifest": {"digest": "sha256:" + man, "sha256": sha(b"m"), "size": 1468},
                  "disk_size": 8388608, "chunks": 3, "created": "2026-12-01T22:00:00Z"}
    put(out, "image_doc", "oci-index.json", b"\0" + dumps(index))
    put(out, "image_doc", "oci-manifest.json", b"\1" + dumps(manifest))
    put(out, "image_doc", "image.json", b"\2" + dumps(image_json) + b"\n")
    put(out, "image_doc", "index.json", b"\3" + dumps({"schemaVersion": 1,
                                                      "images": ["app", "base-1.2", "web_x"]}))
    put(out, "image_doc", "refs-oci", b"\4oci://127.0.0.1:5000/lib/app:v1.2")
    put(out, "image_doc", "refs-digest", b"\4oci+http://h/r@" + sha(b"x").encode())
    put(out, "image_doc", "refs-http", b"\4https://h:8080/store/images/app")


def trace_plan(out, lz, t, src):
    """Manifest and trace together (fuzz/fuzz_trace_plan.c): flags, two entry indexes, the
    manifest's length, the manifest, the trace. The tree in 4 KiB chunks; a trace that touches
    the whole disk and reads three files; one seed that shares pieces between two files
    (after parsing), one whose manifest shares them (refused)."""
    m = os.path.join(t, "tp.manifest")
    run(lz, "-q", "import", src, "--store", os.path.join(t, "tp-store"), "-o", m,
        "--chunk-size", "4096")
    mb = open(m, "rb").read()
    entries = json.loads(subprocess.run([lz, "manifest", "show", m], check=True,
                                        stdout=subprocess.PIPE).stdout)["entries"]
    idx = {e["path"]: i for i, e in enumerate(entries)}
    strings = b"\0/etc/d/data\0/etc/hello\0/sparse\0"
    recs = [(0, 0, 0, 1 << 30, 0), (5, 1 << 20, 4096, 1024, 1), (6, 2 << 20, 0, 6, 13),
            (9, 3 << 20, 65536, 3, 24), (12, 4 << 20, 0, 5120, 1)]
    h = struct.pack("<8sIIQQ32s32sQQI44x", b"LZBKTRAC", 1, 160, len(recs), len(strings),
                    bytes(32), bytes(32), 1700000000, 30, 0)
    body = h + b"".join(struct.pack("<QQQII", *r) for r in recs) + strings
    tr = body + hashlib.sha256(body).digest()

    def seed(name, flags, a, b, man):
        put(out, "trace_plan", name, bytes([flags, a, b]) + struct.pack("<I", len(man)) + man + tr)

    seed("replay", 0, 0, 0, mb)
    seed("all-same-4k", 2 | 4 | (1 << 3), 0, 0, mb)
    seed("shared", 1 | 2 | (3 << 3), idx["/etc/hello"], idx["/etc/d/data"], mb)
    # the manifest itself: /etc/hello names /etc/d/data's pieces (refused by the reader)
    hdr = struct.unpack_from("<8sIIQQ", mb, 0)
    ent = 96 + idx["/etc/hello"] * 136
    data = 96 + idx["/etc/d/data"] * 136
    bad = bytearray(mb[:-32])
    bad[ent + 80:ent + 88] = mb[data + 80:data + 88]        # size
    bad[ent + 104:ent + 120] = mb[data + 104:data + 120]    # chunk_first, chunk_count, hole_count
    assert hdr[4] >= 2
    bad += hashlib.sha256(bytes(bad)).digest()
    seed("overlap-refused", 0, 0, 0, bytes(bad))


def rammap(out):
    """Page maps (docs/formats.md, "RAM page map"): two chunks over 128 pages, and none."""
    def enc(npages, chunks, pages):
        nz = sum(1 for c, _ in pages.values() if c)
        h = struct.pack("<8sIIQIIQI20x", b"LZRAMMAP", 1, 64, npages * 4096, 4096, len(chunks),
                        nz, 0)
        body = b"".join(struct.pack("<32sII", d, n, 0) for d, n in chunks)
        return h + body + b"".join(struct.pack("<II", *pages.get(p, (0, 0)))
                                   for p in range(npages))
    a, b = hashlib.sha256(b"a").digest(), hashlib.sha256(b"b").digest()
    put(out, "rammap", "two-chunks.map",
        enc(128, [(a, 3), (b, 64)], {1: (1, 0), 2: (2, 5), 3: (1, 2), 10: (2, 63), 11: (1, 2)}))
    put(out, "rammap", "zero.map", enc(16, [], {}))


def snapdoc(out):
    """Snapshot documents (docs/formats.md, "VM snapshot document"): 1 MiB of RAM, a map of
    2 chunks (64 + 2 x 40 + 256 x 8 bytes); with a disk and a parent, and without."""
    h = lambda c: "sha256:" + c * 64
    doc = ('{"mediaType":"application/vnd.lazyblk.vm-snapshot.v1+json","version":1,'
           '"created":"2026-12-08T10:00:00Z","machine":{"mem":1048576,"cpus":1,'
           '"cpu":"00112233445566778899aabbccddeeff","cpuModel":"GenuineIntel family 6 model 85'
           ' stepping 7"},"kernel":"%s","state":{"digest":"%s","size":70000},'
           '"ram":{"map":[{"digest":"%s","size":2192}],"pages":5,"chunks":2,"bytes":274432}'
           % (h("1"), h("2"), h("3")))
    put(out, "snapdoc", "plain.json", (doc + "}").encode())
    put(out, "snapdoc", "disk-parent.json", (doc + ',"disk":{"layout":"%s","size":8589934592},'
                                             '"parent":"%s"}' % (h("4"), h("5"))).encode())


def main():
    lz, out = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="lazyblk-corpus.") as t:
        src = stored(out, lz, t)
        gnu = tar_bytes(src, "--format=gnu", "--sparse")
        pax = tar_bytes(src, "--format=pax", "--sparse", "--xattrs", "--xattrs-include=user.*")
        put(out, "tar", "gnu-sparse.tar", gnu)
        put(out, "tar", "pax-xattrs.tar", pax)
        ustar = tar_bytes(os.path.join(src, "etc"), "--format=ustar")
        put(out, "tar", "ustar.tar", ustar)
        oci(out, ustar)
        docker_archive(out, ustar)
        oci_archive(out, ustar)
        trace_plan(out, lz, t, src)
    trace(out)
    image_doc(out)
    rammap(out)
    snapdoc(out)
    nbd(out)
    ring = guest(out)
    vhost_user(out, ring)
    registry(out)


main()
