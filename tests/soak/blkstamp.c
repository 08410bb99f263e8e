/* SPDX-License-Identifier: MIT */
/*
 * blkstamp: the writer and the checker of the crash-consistency soak (tests/soak/soak.sh,
 * docs/reliability.md). Standalone: no library code, so that it checks lazyblk from the
 * outside, as a client.
 *
 *   blkstamp init  --nbd SOCK --journal J --first BLOCK --blocks N
 *   blkstamp write (--nbd SOCK | --vhost-user SOCK) --journal J [--seed S] [--depth D]
 *                  [--stop FILE]
 *   blkstamp check --nbd SOCK --journal J [--crashed]
 *   blkstamp crash --overlay OVERLAY [--seed S] [--all | --state-first]
 *   blkstamp renew --journal J
 *
 * The disk region [first, first + N) of 4 KiB blocks is stamped: every write fills whole
 * blocks, each with a stamp that names the block and the write's sequence number, and
 * bytes derived from both (so a block holds exactly one write, checked byte for byte).
 * The writer keeps up to D requests in flight (never two on the same block), sends a
 * FLUSH every few writes and, when a FLUSH completes, records in the journal (written
 * and fdatasync'ed) the sequence number of the newest write to each block acknowledged
 * before that FLUSH was sent: what the server has promised to keep. When the server
 * goes away (the soak kills it with SIGKILL) it also records the newest acknowledged
 * write of each block, flushed or not, and exits 0.
 *
 * check reads the region back from the restarted server and counts, per block:
 *   torn       neither a whole stamp of this block nor the base content (init's hash)
 *   lost       older than the last write acknowledged before the last completed FLUSH
 *   lost_acked older than the last acknowledged write (kill -9 of the process alone
 *              must lose nothing acknowledged: lazyblk's overlay says so)
 * and exits 1 if any is not 0. What it read becomes the floor for the next cycle.
 * check --crashed (after `blkstamp crash`, a simulated host crash): acknowledged writes
 * not flushed may be gone, but every block still reads as one whole write or its base:
 * a block first written since the last FLUSH that reads as zeros is counted apart as
 * "zeroed" (the defect lazyblk had before OVERLAY.live, docs/reliability.md) and fails
 * the cycle as a torn one does. Totals over every cycle stay in the journal; `blkstamp
 * stats --journal J` prints them.
 *
 * renew: the server will start on a new overlay (the soak removed the old one while no
 * server ran): every block holds its base again, and none has been written (the blocks
 * the writer's first writes go to are all there again). The totals stay.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096u
#define MAX_DEPTH 16u
#define MAX_RUN 4u                       /* blocks per write: 1..MAX_RUN */
#define MAGIC "LZSOAK01"
#define JMAGIC "LZSOAKJ1"
#define MAX_SECONDS 120                  /* a writer nobody kills gives up */
#define FRESH_PER_WRITER 48u             /* first writes after a FLUSH (or FUA), a writer */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("blkstamp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/*
 * write: a server killed before the handshake is over is a cycle without writes, not an
 * error (the soak kills at a random moment).
 */
static bool gone_is_ok;

static void handshake_gone(const char *path, const char *how)
{
	if (!gone_is_ok)
		die("%s: %s", path, how);
	printf("write: writes_acked 0 flushes 0 (the server went away during the handshake)\n");
	exit(0);
}

/* ---- stamps ------------------------------------------------------------------------- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The one content of write seq to block b: magic, b, seq, filler from (b, seq), seq. */
static void stamp(uint8_t *p, uint64_t b, uint64_t seq)
{
	uint64_t s = mix(b * 0x9e3779b97f4a7c15ULL ^ mix(seq));

	memcpy(p, MAGIC, 8);
	memcpy(p + 8, &b, 8);
	memcpy(p + 16, &seq, 8);
	for (unsigned i = 24; i < BLK - 8; i += 8) {
		uint64_t v = mix(s += 0x9e3779b97f4a7c15ULL);

		memcpy(p + i, &v, 8);
	}
	memcpy(p + BLK - 8, &seq, 8);
}

/* The sequence number a whole, valid stamp of block b carries; 0 if p is none. */
static uint64_t stamp_seq(const uint8_t *p, uint64_t b)
{
	static uint8_t want[BLK];
	uint64_t pb, seq;

	if (memcmp(p, MAGIC, 8))
		return 0;
	memcpy(&pb, p + 8, 8);
	memcpy(&seq, p + 16, 8);
	if (pb != b || !seq)
		return 0;
	stamp(want, b, seq);
	return memcmp(p, want, BLK) ? 0 : seq;
}

static uint64_t hash_block(const uint8_t *p)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (unsigned i = 0; i < BLK; i += 8) {
		uint64_t v;

		memcpy(&v, p + i, 8);
		h = mix(h ^ v);
	}
	return h;
}

/* ---- the journal -------------------------------------------------------------------- */

struct jhdr {
	char magic[8];
	uint64_t first, n;               /* the region, in 4 KiB blocks */
	uint64_t next_seq;
	uint64_t cycles, writes, flushes; /* totals: checks, writes acknowledged, FLUSHes */
	uint64_t fua;                    /* total FUA writes acknowledged (NBD) */
	uint64_t torn, lost, lost_acked;
	uint64_t zeroed;                 /* after a host crash: see cmd_check */
	uint64_t last_writes, last_flushes; /* the last writer's */
};

struct journal {
	int fd;
	struct jhdr h;
	uint64_t *flushed;               /* newest write acknowledged before the last FLUSH */
	uint64_t *acked;                 /* newest write acknowledged */
	uint64_t *base;                  /* hash of the block before any write */
};

static void j_alloc(struct journal *j)
{
	j->flushed = calloc(j->h.n, 8);
	j->acked = calloc(j->h.n, 8);
	j->base = calloc(j->h.n, 8);
	if (!j->flushed || !j->acked || !j->base)
		die("out of memory");
}

static void pio(bool wr, int fd, void *p, size_t len, off_t off)
{
	while (len) {
		ssize_t n = wr ? pwrite(fd, p, len, off) : pread(fd, p, len, off);

		if (n <= 0)
			die("journal: %s", n ? strerror(errno) : "truncated");
		p = (uint8_t *)p + n;
		len -= (size_t)n;
		off += n;
	}
}

static void j_save(struct journal *j)
{
	size_t a = j->h.n * 8;

	pio(true, j->fd, &j->h, sizeof(j->h), 0);
	pio(true, j->fd, j->flushed, a, sizeof(j->h));
	pio(true, j->fd, j->acked, a, (off_t)(sizeof(j->h) + a));
	pio(true, j->fd, j->base, a, (off_t)(sizeof(j->h) + 2 * a));
	if (fdatasync(j->fd) < 0)
		die("journal: fdatasync: %s", strerror(errno));
}

static void j_load(struct journal *j, const char *path)
{
	size_t a;

	j->fd = open(path, O_RDWR | O_CLOEXEC);
	if (j->fd < 0)
		die("%s: %s", path, strerror(errno));
	pio(false, j->fd, &j->h, sizeof(j->h), 0);
	if (memcmp(j->h.magic, JMAGIC, 8) || !j->h.n || j->h.n > (1u << 20))
		die("%s: not a blkstamp journal", path);
	j_alloc(j);
	a = j->h.n * 8;
	pio(false, j->fd, j->flushed, a, sizeof(j->h));
	pio(false, j->fd, j->acked, a, (off_t)(sizeof(j->h) + a));
	pio(false, j->fd, j->base, a, (off_t)(sizeof(j->h) + 2 * a));
}

/* ---- the transports ------------------------------------------------------------------ */

enum op { OP_READ, OP_WRITE, OP_WRITE_FUA, OP_FLUSH };

struct xport {
	bool fua;                        /* takes OP_WRITE_FUA */
	/* queue one request (tag < MAX_DEPTH); false: the server is gone */
	bool (*submit)(struct xport *x, unsigned tag, enum op op, uint64_t off, uint32_t len,
		       void *buf);
	/* one completion: its tag and status (0 ok); false: the server is gone */
	bool (*wait)(struct xport *x, unsigned *tag, int *status);
};

static bool send_all(int fd, const void *p, size_t len)
{
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p = (const uint8_t *)p + n;
		len -= (size_t)n;
	}
	return true;
}

static bool recv_all(int fd, void *p, size_t len)
{
	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p = (uint8_t *)p + n;
		len -= (size_t)n;
	}
	return true;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || strlen(path) >= sizeof(a.sun_path))
		die("%s: bad socket path", path);
	strcpy(a.sun_path, path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (errno == ECONNREFUSED || errno == ENOENT)
			handshake_gone(path, strerror(errno));
		die("%s: %s", path, strerror(errno));
	}
	return fd;
}

/* -- NBD: fixed newstyle, NBD_OPT_EXPORT_NAME "", simple replies */

struct nbd {
	struct xport x;
	int fd;
	uint64_t size;
	void *rbuf[MAX_DEPTH];           /* where a READ's data goes */
	uint32_t rlen[MAX_DEPTH];
};

struct nbd_req {
	uint32_t magic;
	uint16_t flags, type;
	uint64_t handle, off;
	uint32_t len;
} __attribute__((packed));

struct nbd_rep {
	uint32_t magic, error;
	uint64_t handle;
} __attribute__((packed));

static bool nbd_submit(struct xport *x, unsigned tag, enum op op, uint64_t off, uint32_t len,
		       void *buf)
{
	struct nbd *c = (struct nbd *)x;
	static const uint16_t type[] = { [OP_READ] = 0, [OP_WRITE] = 1, [OP_WRITE_FUA] = 1,
					 [OP_FLUSH] = 3 };
	struct nbd_req r = { htobe32(0x25609513), htobe16(op == OP_WRITE_FUA ? 1 : 0),
			     htobe16(type[op]), htobe64(tag),
			     htobe64(op == OP_FLUSH ? 0 : off), htobe32(op == OP_FLUSH ? 0 : len) };

	c->rbuf[tag] = op == OP_READ ? buf : NULL;
	c->rlen[tag] = op == OP_READ ? len : 0;
	return send_all(c->fd, &r, sizeof(r)) &&
	       (op == OP_READ || op == OP_FLUSH || send_all(c->fd, buf, len));
}

static bool nbd_wait(struct xport *x, unsigned *tag, int *status)
{
	struct nbd *c = (struct nbd *)x;
	struct nbd_rep r;
	uint64_t h;

	if (!recv_all(c->fd, &r, sizeof(r)))
		return false;
	h = be64toh(r.handle);
	if (be32toh(r.magic) != 0x67446698 || h >= MAX_DEPTH)
		die("nbd: bad reply");
	*tag = (unsigned)h;
	*status = (int)be32toh(r.error);
	if (!*status && c->rbuf[h] && !recv_all(c->fd, c->rbuf[h], c->rlen[h]))
		return false;
	return true;
}

static struct xport *nbd_open(const char *path)
{
	struct nbd *c = calloc(1, sizeof(*c));
	uint8_t hello[18];
	uint32_t cflags;
	uint16_t sflags, tflags;
	struct __attribute__((packed)) { uint64_t magic; uint32_t opt, len; } o;

	if (!c)
		die("out of memory");
	c->fd = unix_connect(path);
	if (!recv_all(c->fd, hello, sizeof(hello)))
		handshake_gone(path, "the server hung up during the handshake");
	if (memcmp(hello, "NBDMAGICIHAVEOPT", 16))
		die("%s: not an NBD newstyle server", path);
	memcpy(&sflags, hello + 16, 2);
	sflags = be16toh(sflags);
	cflags = htobe32(1 | (sflags & 2));       /* FIXED_NEWSTYLE, NO_ZEROES if offered */
	o.magic = htobe64(0x49484156454F5054ULL);
	o.opt = htobe32(1);                        /* NBD_OPT_EXPORT_NAME, the default export */
	o.len = 0;
	if (!send_all(c->fd, &cflags, 4) || !send_all(c->fd, &o, sizeof(o)) ||
	    !recv_all(c->fd, &c->size, 8) || !recv_all(c->fd, &tflags, 2))
		handshake_gone(path, "the server hung up during the handshake");
	c->size = be64toh(c->size);
	if (!(sflags & 2)) {
		uint8_t zero[124];

		if (!recv_all(c->fd, zero, sizeof(zero)))
			handshake_gone(path, "the server hung up during the handshake");
	}
	if (!(be16toh(tflags) & (1u << 2)))
		die("%s: the export does not take FLUSH", path);
	c->x.fua = be16toh(tflags) & (1u << 3);
	c->x.submit = nbd_submit;
	c->x.wait = nbd_wait;
	return &c->x;
}

/* -- vhost-user: a virtio-blk front-end with its guest memory in a memfd (guest-physical
 * 0 is the memfd's start), one split virtqueue (queue 0), no event index */

#define VU_QSIZE 64u
#define VU_RAM (1u << 20)
#define VU_SLOT (16u + MAX_RUN * BLK + 16u)   /* header, data, status (rounded) */
#define VRING_DESC 0x0u
#define VRING_AVAIL 0x1000u
#define VRING_USED 0x2000u
#define VU_BUFS 0x4000u

struct vdesc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

struct vu {
	struct xport x;
	int fd, memfd, kick, call;
	uint8_t *ram;
	uint16_t avail_idx, last_used;
};

struct vu_msg {
	uint32_t req, flags, size;
	uint8_t payload[256];
} __attribute__((packed));

/* A message; for GET_* (a u64 reply) the reply goes to p; with ack, a refusal is fatal. */
static void vu_send(struct vu *v, uint32_t req, void *p, uint32_t size, int fd, bool ack)
{
	struct vu_msg m = { req, 1 | (ack ? 1u << 3 : 0), size, { 0 } };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { &m, 12 + size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (size)
		memcpy(m.payload, p, size);
	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(v->fd, &mh, MSG_NOSIGNAL) != (ssize_t)(12 + size))
		handshake_gone("vhost-user", "the server hung up during the handshake");
	if (ack || req == 1 || req == 15 || req == 17) {  /* GET_*: a u64 reply */
		struct vu_msg r;

		if (!recv_all(v->fd, &r, 12) || !recv_all(v->fd, r.payload, 8))
			handshake_gone("vhost-user", "the server hung up during the handshake");
		if (r.req != req || r.size != 8)
			die("vhost-user: bad reply to request %u", req);
		if (ack && *(uint64_t *)r.payload)
			die("vhost-user: request %u refused", req);
		if (!ack)
			memcpy(p, r.payload, 8);
	}
}

static void vu_u64(struct vu *v, uint32_t req, uint64_t val)
{
	vu_send(v, req, &val, 8, -1, true);
}

static void vu_state(struct vu *v, uint32_t req, uint32_t a, uint32_t b)
{
	uint32_t s[2] = { a, b };

	vu_send(v, req, s, 8, -1, true);
}

static bool vu_submit(struct xport *x, unsigned tag, enum op op, uint64_t off, uint32_t len,
		      void *buf)
{
	struct vu *v = (struct vu *)x;
	uint64_t slot = VU_BUFS + (uint64_t)tag * VU_SLOT, hdr = slot, data = slot + 16;
	uint64_t st = slot + 16 + MAX_RUN * BLK;
	struct vdesc *d = (struct vdesc *)(v->ram + VRING_DESC) + 3 * tag;
	uint16_t *avail = (uint16_t *)(v->ram + VRING_AVAIL);
	uint32_t type = op == OP_READ ? 0 : op == OP_WRITE ? 1 : 4;
	uint64_t sector = op == OP_FLUSH ? 0 : off / 512;

	if (len > MAX_RUN * BLK)
		die("vhost-user: request too long");
	memcpy(v->ram + hdr, &type, 4);
	memset(v->ram + hdr + 4, 0, 4);
	memcpy(v->ram + hdr + 8, &sector, 8);
	v->ram[st] = 0xee;
	if (op == OP_WRITE_FUA)
		die("vhost-user: virtio-blk has no FUA");
	if (op == OP_WRITE)
		memcpy(v->ram + data, buf, len);
	d[0] = (struct vdesc){ hdr, 16, 1, (uint16_t)(3 * tag + 1) };
	if (op == OP_FLUSH) {
		d[0].next = (uint16_t)(3 * tag + 2);
	} else {
		d[1] = (struct vdesc){ data, len, (uint16_t)(1 | (op == OP_READ ? 2 : 0)),
				       (uint16_t)(3 * tag + 2) };
	}
	d[2] = (struct vdesc){ st, 1, 2, 0 };
	avail[2 + v->avail_idx % VU_QSIZE] = (uint16_t)(3 * tag);
	v->avail_idx++;
	__atomic_store_n(&avail[1], v->avail_idx, __ATOMIC_RELEASE);
	return eventfd_write(v->kick, 1) == 0;
}

static bool vu_wait(struct xport *x, unsigned *tag, int *status)
{
	struct vu *v = (struct vu *)x;
	uint16_t *used_idx = (uint16_t *)(v->ram + VRING_USED + 2);
	uint32_t *ring = (uint32_t *)(v->ram + VRING_USED + 4);

	for (;;) {
		struct pollfd p[2] = { { v->call, POLLIN, 0 }, { v->fd, POLLIN, 0 } };
		eventfd_t e;

		if (__atomic_load_n(used_idx, __ATOMIC_ACQUIRE) != v->last_used) {
			uint32_t id = ring[2 * (v->last_used % VU_QSIZE)];

			v->last_used++;
			if (id % 3 || id / 3 >= MAX_DEPTH)
				die("vhost-user: bad used id %u", id);
			*tag = id / 3;
			*status = v->ram[VU_BUFS + (uint64_t)*tag * VU_SLOT + 16 + MAX_RUN * BLK];
			return true;
		}
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (p[1].revents)  /* the server hung up (nothing else comes on this socket) */
			return false;
		if (p[0].revents)
			eventfd_read(v->call, &e);
	}
}

static struct xport *vu_open(const char *path)
{
	struct vu *v = calloc(1, sizeof(*v));
	uint64_t feat = 0, pf = 0, want;
	struct { uint32_t n, pad; uint64_t gpa, size, uva, off; } mt = {
		1, 0, 0, VU_RAM, 0, 0 };
	struct { uint32_t index, flags; uint64_t desc, used, avail, log; } ad = { 0 };

	if (!v)
		die("out of memory");
	v->fd = unix_connect(path);
	/* sealed against shrinking, as QEMU's memory-backend-memfd is: lazyblk requires it */
	v->memfd = memfd_create("blkstamp-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (v->memfd < 0 || ftruncate(v->memfd, VU_RAM) < 0 ||
	    fcntl(v->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		die("memfd: %s", strerror(errno));
	v->ram = mmap(NULL, VU_RAM, PROT_READ | PROT_WRITE, MAP_SHARED, v->memfd, 0);
	if (v->ram == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	v->kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	v->call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	vu_send(v, 1, &feat, 0, -1, false);                   /* GET_FEATURES */
	vu_send(v, 15, &pf, 0, -1, false);                    /* GET_PROTOCOL_FEATURES */
	want = (1ULL << 30) | (1ULL << 32) | (1ULL << 9);     /* PROTOCOL_FEATURES, VERSION_1, FLUSH */
	if ((feat & want) != want || !(pf & (1ULL << 3)))
		die("vhost-user: the device lacks FLUSH, VERSION_1 or REPLY_ACK");
	pf = 1ULL << 3;                                       /* REPLY_ACK */
	vu_send(v, 16, &pf, 8, -1, false);                    /* SET_PROTOCOL_FEATURES */
	vu_send(v, 3, NULL, 0, -1, true);                     /* SET_OWNER */
	vu_u64(v, 2, want);                                   /* SET_FEATURES */
	mt.uva = (uint64_t)(uintptr_t)v->ram;
	vu_send(v, 5, &mt, sizeof(mt), v->memfd, true);       /* SET_MEM_TABLE */
	vu_state(v, 8, 0, VU_QSIZE);                          /* SET_VRING_NUM */
	vu_state(v, 10, 0, 0);                                /* SET_VRING_BASE */
	ad.desc = (uint64_t)(uintptr_t)(v->ram + VRING_DESC);
	ad.used = (uint64_t)(uintptr_t)(v->ram + VRING_USED);
	ad.avail = (uint64_t)(uintptr_t)(v->ram + VRING_AVAIL);
	vu_send(v, 9, &ad, sizeof(ad), -1, true);             /* SET_VRING_ADDR */
	want = 0;
	vu_send(v, 13, &want, 8, v->call, true);              /* SET_VRING_CALL */
	vu_send(v, 12, &want, 8, v->kick, true);              /* SET_VRING_KICK */
	vu_state(v, 18, 0, 1);                                /* SET_VRING_ENABLE */
	v->x.submit = vu_submit;
	v->x.wait = vu_wait;
	return &v->x;
}

/* ---- init and check: read the region over NBD ----------------------------------------- */

static uint8_t *read_region(struct xport *x, const struct jhdr *h)
{
	uint8_t *buf = malloc(h->n * BLK);
	const uint64_t step = 64;

	if (!buf)
		die("out of memory");
	for (uint64_t b = 0; b < h->n; b += step) {
		uint64_t n = h->n - b < step ? h->n - b : step;
		unsigned tag;
		int st;

		if (!x->submit(x, 0, OP_READ, (h->first + b) * BLK, (uint32_t)(n * BLK),
			       buf + b * BLK) || !x->wait(x, &tag, &st))
			die("read: the server went away");
		if (st)
			die("read of block %llu: error %d", (unsigned long long)(h->first + b), st);
	}
	return buf;
}

static int cmd_init(const char *nbd, const char *jpath, uint64_t first, uint64_t n)
{
	struct journal j = { 0 };
	struct xport *x = nbd_open(nbd);
	uint8_t *buf;

	if (!n || ((struct nbd *)x)->size / BLK < first + n)
		die("the region does not fit the disk");
	memcpy(j.h.magic, JMAGIC, 8);
	j.h.first = first;
	j.h.n = n;
	j.h.next_seq = 1;
	j_alloc(&j);
	buf = read_region(x, &j.h);
	static const uint8_t zero[BLK];
	uint64_t zeros = 0;

	for (uint64_t b = 0; b < n; b++) {
		j.base[b] = hash_block(buf + b * BLK);
		zeros += !memcmp(buf + b * BLK, zero, BLK);
	}
	/* a block that reads as zeros is torn unless the base was zeros: say how many were */
	printf("init: %llu blocks, %llu of them zeros\n", (unsigned long long)n,
	       (unsigned long long)zeros);
	j.fd = open(jpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (j.fd < 0)
		die("%s: %s", jpath, strerror(errno));
	j_save(&j);
	return 0;
}

static void print_totals(const struct jhdr *h)
{
	printf("cycles %llu writes_acked %llu flushes %llu fua %llu lost %llu lost_acked %llu "
	       "torn %llu zeroed %llu\n", (unsigned long long)h->cycles,
	       (unsigned long long)h->writes, (unsigned long long)h->flushes,
	       (unsigned long long)h->fua, (unsigned long long)h->lost,
	       (unsigned long long)h->lost_acked, (unsigned long long)h->torn,
	       (unsigned long long)h->zeroed);
}

static int cmd_check(const char *nbd, const char *jpath, bool crashed)
{
	struct journal j = { 0 };
	struct xport *x;
	static const uint8_t zero[BLK];
	uint64_t torn = 0, lost = 0, lost_acked = 0, zeroed = 0;
	uint8_t *buf;

	j_load(&j, jpath);
	x = nbd_open(nbd);
	buf = read_region(x, &j.h);
	for (uint64_t i = 0; i < j.h.n; i++) {
		const uint8_t *p = buf + i * BLK;
		uint64_t b = j.h.first + i, seq = stamp_seq(p, b);

		/*
		 * The defect of an overlay whose state reached the disk before the data
		 * (docs/reliability.md): a block first written since the last FLUSH, marked
		 * dirty without its data, reads as zeros after a host crash. Named and
		 * counted apart from the other torn blocks; it fails the cycle as they do.
		 */
		if (crashed && !seq && !j.flushed[i] && hash_block(p) != j.base[i] &&
		    !memcmp(p, zero, BLK)) {
			if (zeroed++ < 5)
				fprintf(stderr, "blkstamp: block %llu: zeros (an unflushed first "
					"write, marked dirty without its data)\n",
					(unsigned long long)b);
			j.base[i] = hash_block(p);  /* the disk's content from now on */
			j.acked[i] = 0;
			continue;
		}
		if (!seq && hash_block(p) != j.base[i]) {
			if (torn++ < 5)
				fprintf(stderr, "blkstamp: block %llu: torn (neither a whole write nor "
					"the base)\n", (unsigned long long)b);
			continue;
		}
		if (seq < j.flushed[i]) {
			if (lost++ < 5)
				fprintf(stderr, "blkstamp: block %llu: write %llu lost (flushed; "
					"the disk has %llu)\n", (unsigned long long)b,
					(unsigned long long)j.flushed[i], (unsigned long long)seq);
		} else if (seq < j.acked[i]) {
			if (lost_acked++ < 5)
				fprintf(stderr, "blkstamp: block %llu: write %llu lost (acknowledged; "
					"the disk has %llu)\n", (unsigned long long)b,
					(unsigned long long)j.acked[i], (unsigned long long)seq);
		}
		/* what the restarted server serves is the floor from now on */
		j.flushed[i] = j.acked[i] = seq;
	}
	j.h.cycles++;
	j.h.torn += torn;
	j.h.lost += lost;
	j.h.lost_acked += lost_acked;
	j.h.zeroed += zeroed;
	j_save(&j);
	printf("check: writes_acked %llu flushes %llu lost %llu lost_acked %llu torn %llu "
	       "zeroed %llu\n", (unsigned long long)j.h.last_writes,
	       (unsigned long long)j.h.last_flushes, (unsigned long long)lost,
	       (unsigned long long)lost_acked, (unsigned long long)torn,
	       (unsigned long long)zeroed);
	return torn || lost || zeroed || (lost_acked && !crashed) ? 1 : 0;
}

/*
 * Undo, in OVERLAY and OVERLAY.state, the pages crashsim.so logged as not yet synced:
 * every one (all), each with probability 1/2, or (state_first) every one of OVERLAY and
 * none of OVERLAY.state, as if the kernel had written the states back and none of the data
 * (what turned a first write into zeros before OVERLAY.live). Empties the logs.
 */
static int cmd_crash(const char *ov, uint64_t seed, bool all, bool state_first)
{
	uint64_t undone = 0, kept = 0, rng = mix(seed);

	for (int i = 0; i < 2; i++) {
		char path[4096], undo[4200];
		uint8_t rec[8 + BLK];
		int fd, log;
		off_t at = 0;

		snprintf(path, sizeof(path), "%s%s", ov, i ? ".state" : "");
		snprintf(undo, sizeof(undo), "%s.undo", path);
		fd = open(path, O_WRONLY | O_CLOEXEC);
		log = open(undo, O_RDWR | O_CLOEXEC);
		if (fd < 0 || log < 0)
			die("%s: %s", fd < 0 ? path : undo, strerror(errno));
		while (pread(log, rec, sizeof(rec), at) == (ssize_t)sizeof(rec)) {
			uint64_t page;

			at += (off_t)sizeof(rec);
			memcpy(&page, rec, 8);
			rng = mix(rng + 1);
			if (state_first ? i == 1 : !all && (rng & 1)) {
				kept++;
				continue;
			}
			pio(true, fd, rec + 8, BLK, (off_t)(page * BLK));
			undone++;
		}
		if (ftruncate(log, 0) < 0)
			die("%s: %s", undo, strerror(errno));
		close(log);
		close(fd);
	}
	printf("crash: %llu unsynced pages undone, %llu kept\n", (unsigned long long)undone,
	       (unsigned long long)kept);
	return 0;
}

static int cmd_renew(const char *jpath)
{
	struct journal j = { 0 };

	j_load(&j, jpath);
	memset(j.flushed, 0, j.h.n * 8);
	memset(j.acked, 0, j.h.n * 8);
	j_save(&j);
	return 0;
}

/* ---- write ----------------------------------------------------------------------------- */

struct slot {
	bool busy;
	enum op op;
	uint64_t seq, first, n;          /* a write: blocks [first, first + n) of the region */
};

struct writer {
	struct journal j;
	struct xport *x;
	struct slot s[MAX_DEPTH];
	uint8_t *busy;                   /* per block: a write in flight */
	uint64_t *snap;                  /* acked[] when the FLUSH in flight was sent */
	bool flushing;
	bool fresh;                      /* a FLUSH or FUA write completed (1 in 8): the next
					    write is a first one (while fresh_left) */
	unsigned fresh_left;
	uint64_t hot;                    /* other writes go to blocks [0, hot) of the region */
	uint64_t rng, writes, flushes, fua, since_flush, flush_every;
};

static uint64_t rnd(struct writer *w, uint64_t n)
{
	w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (mix(w->rng) >> 11) % n;
}

/*
 * A block of [hot, n) that no write is known to have reached (what the disk has is its
 * base), not in flight; n if none is left.
 */
static uint64_t fresh_block(const struct writer *w)
{
	uint64_t b = w->hot;

	while (b < w->j.h.n && (w->j.acked[b] || w->j.flushed[b] || w->busy[b]))
		b++;
	return b;
}

/*
 * Queue a write of 1..MAX_RUN free blocks in slot t; false if the server is gone. After a
 * FLUSH or a FUA write has completed (the server flushed), one time in 8, the next write is
 * one block's first write since its base, from the last quarter of the region, which only
 * these go to: so that the soak has such a write unflushed when the server dies, the case
 * an overlay that puts a state on the disk before its data turns into zeros. A writer makes
 * FRESH_PER_WRITER of them (spread over its first completions: about the whole of a cycle
 * over vhost-user, a quarter of one over NBD, whose FUA writes complete often), so that
 * the quarter lasts (soak.sh starts a new overlay every few host crashes: blkstamp renew),
 * and then the stop write (stop: one such block, or the writer fails: the soak would no
 * longer test what it is for).
 */
static bool w_write(struct writer *w, unsigned t, bool stop)
{
	static uint8_t buf[MAX_RUN * BLK];
	struct slot *s = &w->s[t];
	uint64_t n = 1 + rnd(w, MAX_RUN), b = w->j.h.n, end = w->hot;

	if (stop || (w->fresh && w->fresh_left)) {
		b = fresh_block(w);
		if (stop && b == w->j.h.n)
			die("no block of the region's last quarter is left that was never written: "
			    "start a new overlay (blkstamp renew)");
	}
	if (b < w->j.h.n) {
		w->fresh = false;
		w->fresh_left -= !stop;
		n = 1;
		end = w->j.h.n;
	} else {
		do {
			b = rnd(w, w->hot);
		} while (w->busy[b]);
	}
	for (s->n = 0; s->n < n && b + s->n < end && !w->busy[b + s->n]; s->n++)
		;
	s->first = b;
	s->seq = w->j.h.next_seq++;
	s->op = w->x->fua && !rnd(w, 8) && !stop ? OP_WRITE_FUA : OP_WRITE;
	for (uint64_t i = 0; i < s->n; i++) {
		w->busy[b + i] = 1;
		stamp(buf + i * BLK, w->j.h.first + b + i, s->seq);
	}
	s->busy = true;
	return w->x->submit(w->x, t, s->op, (w->j.h.first + b) * BLK, (uint32_t)(s->n * BLK),
			    buf);
}

static bool w_flush(struct writer *w, unsigned t)
{
	memcpy(w->snap, w->j.acked, w->j.h.n * 8);
	w->flushing = true;
	w->s[t].op = OP_FLUSH;
	w->s[t].busy = true;
	w->since_flush = 0;
	w->flush_every = 4 + rnd(w, 60);
	return w->x->submit(w->x, t, OP_FLUSH, 0, 0, NULL);
}

static void w_done(struct writer *w, unsigned t, int status)
{
	struct slot *s = &w->s[t];

	if (t >= MAX_DEPTH || !s->busy)
		die("a completion for no request (tag %u)", t);
	if (status)
		die("%s failed with status %d while the server ran", s->op == OP_FLUSH ? "FLUSH" :
		    "a write", status);
	s->busy = false;
	if (s->op == OP_FLUSH) {
		w->flushing = false;
		w->fresh |= !rnd(w, 8);
		w->flushes++;
		/* a FUA write acknowledged since the FLUSH was sent may be newer */
		for (uint64_t i = 0; i < w->j.h.n; i++)
			if (w->snap[i] > w->j.flushed[i])
				w->j.flushed[i] = w->snap[i];
		w->j.h.last_writes = w->writes;
		w->j.h.last_flushes = w->flushes;
		j_save(&w->j);
		return;
	}
	for (uint64_t i = 0; i < s->n; i++) {
		w->busy[s->first + i] = 0;
		w->j.acked[s->first + i] = s->seq;
		if (s->op == OP_WRITE_FUA)     /* durable on its own */
			w->j.flushed[s->first + i] = s->seq;
	}
	w->writes++;
	if (s->op == OP_WRITE_FUA) { /* recorded with the next FLUSH, or when the server dies */
		w->fua++;
		w->fresh |= !rnd(w, 8);      /* a flush as well */
	}
}

/*
 * With stop (a path): once a file is there, send nothing more but wait for every request
 * in flight, then write one block never written before (no FUA), and once that is
 * acknowledged print "stopped" and wait for the server to go away: the soak then kills it,
 * a host crash with a first write acknowledged and not flushed, nothing in flight.
 */
static int cmd_write(struct xport *x, const char *jpath, uint64_t seed, unsigned depth,
		     const char *stop)
{
	struct writer w = { .x = x, .rng = seed, .flush_every = 16,
			    .fresh_left = FRESH_PER_WRITER };
	time_t end = time(NULL) + MAX_SECONDS;
	unsigned inflight = 0;
	int stopping = 0;  /* 1: draining, 2: the first write sent, 3: stopped */

	j_load(&w.j, jpath);
	/* this writer's counts start at 0 in the journal (blkstamp flushes reads them while it runs) */
	w.j.h.last_writes = w.j.h.last_flushes = 0;
	j_save(&w.j);
	w.busy = calloc(w.j.h.n, 1);
	w.snap = calloc(w.j.h.n, 8);
	if (!w.busy || !w.snap)
		die("out of memory");
	if (w.j.h.n < 4 * MAX_DEPTH * MAX_RUN)
		die("the region is too small for %u requests in flight", MAX_DEPTH);
	w.hot = w.j.h.n / 4 * 3;
	for (;;) {
		unsigned t = 0, tag;
		int st;

		if (!stopping && stop && access(stop, F_OK) == 0)
			stopping = 1;
		if (stopping == 1 && !inflight) {
			stopping = 2;
			inflight++;
			if (!w_write(&w, 0, true))
				goto gone;
		} else if (stopping == 2 && !inflight) {
			printf("stopped\n");
			fflush(stdout);
			stopping = 3;
		}
		while (!stopping && inflight < depth) {
			bool ok;

			while (w.s[t].busy)
				t++;
			if (!w.flushing && w.since_flush >= w.flush_every) {
				ok = w_flush(&w, t);
			} else {
				ok = w_write(&w, t, false);
				w.since_flush++;
			}
			inflight++;
			if (!ok)
				goto gone;
		}
		if (!x->wait(x, &tag, &st))
			goto gone;
		w_done(&w, tag, st);
		inflight--;
		if (stopping != 3 && time(NULL) > end)
			die("nobody killed the server within %d s", MAX_SECONDS);
	}
gone:
	/* the server died: keep what it acknowledged, flushed or not */
	w.j.h.writes += w.writes;
	w.j.h.flushes += w.flushes;
	w.j.h.fua += w.fua;
	w.j.h.last_writes = w.writes;
	w.j.h.last_flushes = w.flushes;
	j_save(&w.j);
	printf("write: writes_acked %llu flushes %llu fua %llu\n", (unsigned long long)w.writes,
	       (unsigned long long)w.flushes, (unsigned long long)w.fua);
	return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

static const char usage[] =
	"usage: blkstamp init  --nbd SOCK --journal J --first BLOCK --blocks N\n"
	"       blkstamp write (--nbd SOCK | --vhost-user SOCK) --journal J [--seed S] [--depth D]\n"
	"                      [--stop FILE]\n"
	"       blkstamp check --nbd SOCK --journal J [--crashed]\n"
	"       blkstamp crash --overlay OVERLAY [--seed S] [--all | --state-first]\n"
	"       blkstamp renew --journal J   (a new overlay: every block its base again)\n"
	"       blkstamp stats --journal J\n"
	"       blkstamp flushes --journal J   (FLUSHes the running or last writer completed)\n";

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nbd", required_argument, NULL, 'n' },
		{ "vhost-user", required_argument, NULL, 'v' },
		{ "journal", required_argument, NULL, 'j' },
		{ "first", required_argument, NULL, 'f' },
		{ "blocks", required_argument, NULL, 'b' },
		{ "seed", required_argument, NULL, 's' },
		{ "depth", required_argument, NULL, 'd' },
		{ "crashed", no_argument, NULL, 'c' },
		{ "overlay", required_argument, NULL, 'o' },
		{ "all", no_argument, NULL, 'a' },
		{ "state-first", no_argument, NULL, 'F' },
		{ "stop", required_argument, NULL, 'S' },
		{ NULL, 0, NULL, 0 },
	};
	const char *nbd = NULL, *vu = NULL, *jpath = NULL, *ov = NULL, *stop = NULL, *cmd;
	bool crashed = false, all = false, state_first = false;
	uint64_t first = 0, n = 0, seed = 1;
	unsigned depth = 8;
	int c;

	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': nbd = optarg; break;
		case 'v': vu = optarg; break;
		case 'j': jpath = optarg; break;
		case 'f': first = strtoull(optarg, NULL, 0); break;
		case 'b': n = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'd': depth = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'c': crashed = true; break;
		case 'o': ov = optarg; break;
		case 'a': all = true; break;
		case 'F': state_first = true; break;
		case 'S': stop = optarg; break;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (!strcmp(cmd, "crash") && ov && optind == argc && !(all && state_first))
		return cmd_crash(ov, seed, all, state_first);
	if (!jpath || optind != argc || !depth || depth > MAX_DEPTH) {
		fputs(usage, stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(cmd, "stats")) {
		struct journal j = { 0 };

		j_load(&j, jpath);
		print_totals(&j.h);
		return 0;
	}
	if (!strcmp(cmd, "renew"))
		return cmd_renew(jpath);
	if (!strcmp(cmd, "flushes")) {
		struct journal j = { 0 };

		j_load(&j, jpath);
		printf("%llu\n", (unsigned long long)j.h.last_flushes);
		return 0;
	}
	gone_is_ok = !strcmp(cmd, "write");
	if (!strcmp(cmd, "write") && (!nbd) != (!vu))
		return cmd_write(nbd ? nbd_open(nbd) : vu_open(vu), jpath, seed, depth, stop);
	if (!nbd || vu) {
		fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(cmd, "init"))
		return cmd_init(nbd, jpath, first, n);
	if (!strcmp(cmd, "check"))
		return cmd_check(nbd, jpath, crashed);
	fputs(usage, stderr);
	return 2;
}
