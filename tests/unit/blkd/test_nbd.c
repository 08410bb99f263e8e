/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the NBD export (blkd/transport/nbd*.c): a client written here against the
 * protocol text drives nbd_conn_run() over a socketpair, and nbd_serve() over a unix
 * socket. The disk is a raw file on a temporary directory, opened with disk_raw_open()
 * (blkd/disk/disk.h): its bytes and its allocation map (SEEK_DATA/SEEK_HOLE) are the
 * file's. A thin test disk in front of it counts the requests, injects faults (a read or
 * a write that fails at a given block) and keeps the dirty map (the lazyblk:dirty
 * context) that a raw file does not have; a few tests export the raw disk alone.
 */
#include "../helpers.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../../../blkd/disk/disk_int.h"
#include "../../../blkd/engine/engine.h"
#include "../../../blkd/overlay/overlay.h"
#include "../../../blkd/transport/nbd.h"
#include "../../../blkd/transport/nbd_conn.h"
#include "../../../blkd/transport/nbd_proto.h"
#include "../../../cas/chunk.h"
#include "../../../cas/store.h"
#include "../../../common/log.h"
#include "../../../layout/layout.h"

/* ---- the disk: a raw file, behind a test disk */

#define BLK 4096u
#define DISK ((uint64_t)2 << 20)
#define NBLK (DISK / BLK)
#define BASE_BLOCKS 256u       /* the file holds data in blocks [0, 256); the rest is a hole */
#define FAIL_READ_BLOCK 300u   /* data in the file too (a bad chunk): reads touching it, -EIO */
#define FAIL_WRITE_BLOCK 301u  /* writes touching it fail with -ENOSPC */

enum { CLEAN, DIRTY, ZEROED };

struct tdisk {
	struct disk raw;           /* disk_raw_open() of the file */
	struct disk d;             /* what the export gets: this test disk */
	pthread_mutex_t lock;
	uint8_t state[NBLK];       /* for the dirty context */
	unsigned reads, writes, fua_writes, flushes, discards, zeroes, statuses;
	uint64_t read_bytes;
};

static bool touches(uint64_t off, uint64_t len, uint64_t block)
{
	return len && off < (block + 1) * BLK && off + len > block * BLK;
}

static void count(struct tdisk *t, unsigned *counter)
{
	pthread_mutex_lock(&t->lock);
	(*counter)++;
	pthread_mutex_unlock(&t->lock);
}

static void mark(struct tdisk *t, uint64_t off, uint64_t len, uint8_t st)
{
	pthread_mutex_lock(&t->lock);
	for (uint64_t b = off / BLK; len && b * BLK < off + len; b++)
		t->state[b] = st;
	pthread_mutex_unlock(&t->lock);
}

static int t_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	struct tdisk *t = ctx;
	int ret;

	if (touches(off, len, FAIL_READ_BLOCK))
		return -EIO;
	ret = disk_read(&t->raw, off, len, buf);
	if (!ret) {
		pthread_mutex_lock(&t->lock);
		t->reads++;
		t->read_bytes += len;
		pthread_mutex_unlock(&t->lock);
	}
	return ret;
}

static int t_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	struct tdisk *t = ctx;
	int ret;

	if (touches(off, len, FAIL_WRITE_BLOCK))
		return -ENOSPC;
	ret = disk_write(&t->raw, off, len, buf, fua);
	if (!ret) {
		mark(t, off, len, DIRTY);
		count(t, &t->writes);
		if (fua)
			count(t, &t->fua_writes);
	}
	return ret;
}

static int t_flush(void *ctx)
{
	struct tdisk *t = ctx;

	count(t, &t->flushes);
	return disk_flush(&t->raw);
}

static int t_discard(void *ctx, uint64_t off, uint64_t len)
{
	struct tdisk *t = ctx;
	int ret = disk_discard(&t->raw, off, len);

	if (!ret) {
		mark(t, off, len, ZEROED);
		count(t, &t->discards);
	}
	return ret;
}

static int t_write_zeroes(void *ctx, uint64_t off, uint64_t len, bool may_unmap)
{
	struct tdisk *t = ctx;
	int ret = disk_write_zeroes(&t->raw, off, len, may_unmap);

	if (!ret) {
		mark(t, off, len, ZEROED);
		count(t, &t->zeroes);
	}
	return ret;
}

/* Allocation: the raw file's. Dirty: blocks written, trimmed or zeroed, per 4 KiB block. */
static int t_block_status(void *ctx, enum disk_ctx c, uint64_t off, uint64_t len,
			  disk_extent_fn cb, void *arg)
{
	struct tdisk *t = ctx;
	uint64_t end = off + len, start = off;
	int ret;

	count(t, &t->statuses);
	if (c == DISK_CTX_ALLOCATION)
		return disk_block_status(&t->raw, c, off, len, cb, arg);
	if (off % 512 || len % 512 || off > DISK || len > DISK - off || !len)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	for (uint64_t b = off / BLK + 1; b * BLK < end; b++) {
		if (!t->state[b] == !t->state[b - 1])
			continue;
		ret = cb(arg, start, b * BLK - start, t->state[b - 1] ? DISK_STATUS_DIRTY : 0);
		if (ret) {
			pthread_mutex_unlock(&t->lock);
			return ret > 0 ? 0 : ret;
		}
		start = b * BLK;
	}
	ret = cb(arg, start, end - start, t->state[(end - 1) / BLK] ? DISK_STATUS_DIRTY : 0);
	pthread_mutex_unlock(&t->lock);
	return ret < 0 ? ret : 0;
}

static const struct disk_ops tdisk_ops = {
	.read = t_read,
	.write = t_write,
	.flush = t_flush,
	.discard = t_discard,
	.write_zeroes = t_write_zeroes,
	.block_status = t_block_status,
};

/* ---- fixture: the disk and a server thread on one end of a socketpair */

struct fixture {
	struct tdisk t;
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t *base;               /* the disk as it started */
	uint8_t *now;                /* the file as it is (disk_now()) */
	struct nbd_offer x;
	int cfd, sfd;
	pthread_t th;
	bool running;
	int ret;                     /* nbd_conn_run's result */
};

/* The file's bytes now. */
static const uint8_t *disk_now(struct fixture *f)
{
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, f->now, DISK, 0), (ssize_t)DISK);
	close(fd);
	return f->now;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	uint64_t seed = 7;
	int fd;

	if (!f)
		return -1;
	f->base = calloc(1, DISK);
	f->now = malloc(DISK);
	if (!f->base || !f->now)
		return -1;
	/* a sparse file: data in [0, 256) and in FAIL_READ_BLOCK, holes elsewhere */
	prng_fill(&seed, f->base, BASE_BLOCKS * BLK);
	prng_fill(&seed, f->base + FAIL_READ_BLOCK * BLK, BLK);
	tmpdir_make(f->dir);
	path_fmt(f->path, "%s/disk.raw", f->dir);
	fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)DISK) ||
	    pwrite(fd, f->base, BASE_BLOCKS * BLK, 0) != (ssize_t)(BASE_BLOCKS * BLK) ||
	    pwrite(fd, f->base + FAIL_READ_BLOCK * BLK, BLK, FAIL_READ_BLOCK * BLK) != BLK ||
	    fsync(fd) || close(fd))
		return -1;
	if (disk_raw_open(f->path, false, &f->t.raw))
		return -1;
	pthread_mutex_init(&f->t.lock, NULL);
	f->t.d = (struct disk){ .ops = &tdisk_ops, .ctx = &f->t, .size = DISK,
				.description = "a test disk", .can_flush = true,
				.can_fua = true, .can_discard = true, .can_write_zeroes = true,
				.can_multi_conn = true,
				.status = DISK_CTX_BIT(DISK_CTX_ALLOCATION) |
					  DISK_CTX_BIT(DISK_CTX_DIRTY) };
	f->x = (struct nbd_offer){ .d = &f->t.d, .name = "", .size = DISK };
	f->cfd = f->sfd = -1;
	*state = f;
	return 0;
}

static void *server_main(void *arg)
{
	struct fixture *f = arg;

	f->ret = nbd_conn_run(&f->x, f->sfd, 1, NULL);
	shutdown(f->sfd, SHUT_RDWR); /* as nbd_serve does: the client sees the end */
	return NULL;
}

static void start(struct fixture *f)
{
	int sv[2];
	struct timeval tv = { 60, 0 }; /* a bound on an answer, not a timing check */

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	f->cfd = sv[0];
	f->sfd = sv[1];
	/* a server that stops answering fails the test instead of hanging it */
	setsockopt(f->cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(pthread_create(&f->th, NULL, server_main, f), 0);
	f->running = true;
}

/* Close the client side and wait for the server; its nbd_conn_run() result. */
static int finish(struct fixture *f)
{
	if (!f->running)
		return f->ret;
	close(f->cfd);
	f->cfd = -1;
	pthread_join(f->th, NULL);
	close(f->sfd);
	f->sfd = -1;
	f->running = false;
	return f->ret;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	finish(f);
	disk_close(&f->t.raw);
	rm_rf(f->dir);
	free(f->base);
	free(f->now);
	pthread_mutex_destroy(&f->t.lock);
	free(f);
	return 0;
}

/* ---- the test client */

static void c_send(int fd, const void *p, size_t n)
{
	assert_int_equal(nbd_send(fd, p, n), 0);
}

static void c_recv(int fd, void *p, size_t n)
{
	assert_int_equal(nbd_recv(fd, p, n), 0);
}

/* The server hung up (possibly after sending what is still unread: skip that). */
static void c_expect_eof(int fd)
{
	uint8_t buf[4096];
	ssize_t n;

	do
		n = recv(fd, buf, sizeof(buf), 0);
	while (n > 0);
	assert_true(n == 0 || errno == ECONNRESET);
}

static void c_hello(int fd, uint32_t cflags)
{
	uint8_t h[18], f[4];

	c_recv(fd, h, sizeof(h));
	assert_true(be64_get(h) == NBD_MAGIC);
	assert_true(be64_get(h + 8) == NBD_OPTS_MAGIC);
	assert_int_equal(be16_get(h + 16), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	be32_put(f, cflags);
	c_send(fd, f, 4);
}

static void c_opt(int fd, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t h[16];

	be64_put(h, NBD_OPTS_MAGIC);
	be32_put(h + 8, opt);
	be32_put(h + 12, len);
	c_send(fd, h, sizeof(h));
	if (len)
		c_send(fd, data, len);
}

struct rep {
	uint32_t opt, type, len;
	uint8_t data[8192];
};

static void c_rep(int fd, struct rep *r)
{
	uint8_t h[20];

	c_recv(fd, h, sizeof(h));
	assert_true(be64_get(h) == NBD_REP_MAGIC);
	r->opt = be32_get(h + 8);
	r->type = be32_get(h + 12);
	r->len = be32_get(h + 16);
	assert_true(r->len <= sizeof(r->data));
	c_recv(fd, r->data, r->len);
}

/* An option whose only reply is of type want. */
static void c_opt_expect(int fd, uint32_t opt, const void *data, uint32_t len, uint32_t want)
{
	struct rep r;

	c_opt(fd, opt, data, len);
	c_rep(fd, &r);
	assert_int_equal(r.opt, opt);
	assert_int_equal(r.type, want);
}

/* Option data of INFO/GO: name, then the information requests. */
static uint32_t info_data(uint8_t *buf, const char *name, const uint16_t *req, uint16_t nreq)
{
	uint32_t nl = (uint32_t)strlen(name), p = 0;

	be32_put(buf, nl);
	memcpy(buf + 4, name, nl);
	p = 4 + nl;
	be16_put(buf + p, nreq);
	p += 2;
	for (uint16_t i = 0; i < nreq; i++, p += 2)
		be16_put(buf + p, req[i]);
	return p;
}

/* Option data of LIST/SET_META_CONTEXT. */
static uint32_t meta_data(uint8_t *buf, const char *name, const char *const *q, uint32_t nq)
{
	uint32_t nl = (uint32_t)strlen(name), p;

	be32_put(buf, nl);
	memcpy(buf + 4, name, nl);
	p = 4 + nl;
	be32_put(buf + p, nq);
	p += 4;
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t ql = (uint32_t)strlen(q[i]);

		be32_put(buf + p, ql);
		memcpy(buf + p + 4, q[i], ql);
		p += 4 + ql;
	}
	return p;
}

/* Context replies of a meta option into names (ids too), up to the final reply's type. */
static uint32_t c_meta_replies(int fd, uint32_t opt, char names[][64], uint32_t ids[],
			       unsigned *n)
{
	struct rep r;

	*n = 0;
	for (;;) {
		c_rep(fd, &r);
		assert_int_equal(r.opt, opt);
		if (r.type != NBD_REP_META_CONTEXT)
			return r.type;
		assert_true(r.len > 4 && r.len - 4 < 64);
		ids[*n] = be32_get(r.data);
		memcpy(names[*n], r.data + 4, r.len - 4);
		names[*n][r.len - 4] = '\0';
		(*n)++;
	}
}

struct session {
	uint16_t tflags;
	uint32_t ctx_id[NBD_CTX_COUNT]; /* 0: not selected */
};

/* Handshake through NBD_OPT_GO, optionally with structured replies and contexts. */
static void c_connect(int fd, bool structured, bool alloc, bool dirty, struct session *s)
{
	const char *q[2];
	char names[4][64];
	uint32_t ids[4], nq = 0, len;
	uint8_t buf[256];
	unsigned n;
	struct rep r;
	bool got_export = false;

	memset(s, 0, sizeof(*s));
	c_hello(fd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	if (structured)
		c_opt_expect(fd, NBD_OPT_STRUCTURED_REPLY, NULL, 0, NBD_REP_ACK);
	if (alloc)
		q[nq++] = "base:allocation";
	if (dirty)
		q[nq++] = "lazyblk:dirty";
	if (nq) {
		len = meta_data(buf, "", q, nq);
		c_opt(fd, NBD_OPT_SET_META_CONTEXT, buf, len);
		assert_int_equal(c_meta_replies(fd, NBD_OPT_SET_META_CONTEXT, names, ids, &n),
				 NBD_REP_ACK);
		assert_int_equal(n, nq);
		for (unsigned i = 0; i < n; i++) {
			int c = !strcmp(names[i], "base:allocation") ? NBD_CTX_ALLOCATION
								    : NBD_CTX_DIRTY;

			assert_true(ids[i] != 0);
			s->ctx_id[c] = ids[i];
		}
	}
	len = info_data(buf, "", NULL, 0);
	c_opt(fd, NBD_OPT_GO, buf, len);
	for (;;) {
		c_rep(fd, &r);
		assert_int_equal(r.opt, NBD_OPT_GO);
		if (r.type == NBD_REP_ACK)
			break;
		assert_int_equal(r.type, NBD_REP_INFO);
		if (be16_get(r.data) == NBD_INFO_EXPORT) {
			assert_int_equal(r.len, 12);
			assert_true(be64_get(r.data + 2) == DISK);
			s->tflags = be16_get(r.data + 10);
			got_export = true;
		}
	}
	assert_true(got_export);
}

static void c_req(int fd, uint16_t flags, uint16_t type, uint64_t handle, uint64_t off,
		  uint32_t len, const void *payload)
{
	uint8_t h[NBD_REQUEST_SIZE];

	be32_put(h, NBD_REQUEST_MAGIC);
	be16_put(h + 4, flags);
	be16_put(h + 6, type);
	be64_put(h + 8, handle);
	be64_put(h + 16, off);
	be32_put(h + 24, len);
	c_send(fd, h, sizeof(h));
	if (payload)
		c_send(fd, payload, len);
}

/* A simple reply for handle; its error. With data and no error, dlen bytes follow. */
static uint32_t c_simple(int fd, uint64_t handle, void *data, size_t dlen)
{
	uint8_t h[NBD_SIMPLE_REPLY_SIZE];
	uint32_t err;

	c_recv(fd, h, sizeof(h));
	assert_int_equal(be32_get(h), NBD_SIMPLE_REPLY_MAGIC);
	assert_true(be64_get(h + 8) == handle);
	err = be32_get(h + 4);
	if (!err && data)
		c_recv(fd, data, dlen);
	return err;
}

struct chunk {
	uint16_t flags, type;
	uint64_t handle;
	uint32_t len;
	uint8_t *p;                  /* malloc'ed payload */
};

static void c_chunk(int fd, struct chunk *c)
{
	uint8_t h[NBD_CHUNK_HDR_SIZE];

	c_recv(fd, h, sizeof(h));
	assert_int_equal(be32_get(h), NBD_STRUCTURED_REPLY_MAGIC);
	c->flags = be16_get(h + 4);
	c->type = be16_get(h + 6);
	c->handle = be64_get(h + 8);
	c->len = be32_get(h + 16);
	assert_true(c->len <= NBD_MAX_PAYLOAD + 8);
	c->p = malloc(c->len + 1);
	assert_non_null(c->p);
	c_recv(fd, c->p, c->len);
}

/* A structured reply that is one error chunk; its error. */
static uint32_t c_error_chunk(int fd, uint64_t handle)
{
	struct chunk c;
	uint32_t err;

	c_chunk(fd, &c);
	assert_true(c.handle == handle);
	assert_int_equal(c.type, NBD_REPLY_TYPE_ERROR);
	assert_int_equal(c.flags, NBD_REPLY_FLAG_DONE);
	assert_true(c.len >= 6);
	assert_int_equal(be16_get(c.p + 4), c.len - 6); /* the message fills the rest */
	err = be32_get(c.p);
	free(c.p);
	return err;
}

/* A structured read reply into buf: data chunks until DONE; 0 or the error. */
static uint32_t c_sread(int fd, uint64_t handle, uint64_t off, uint8_t *buf, uint32_t len)
{
	uint32_t err = 0;
	struct chunk c;

	do {
		c_chunk(fd, &c);
		assert_true(c.handle == handle);
		if (c.type == NBD_REPLY_TYPE_OFFSET_DATA) {
			uint64_t at = be64_get(c.p);

			assert_true(c.len > 8);
			assert_true(at >= off && at + c.len - 8 <= off + len);
			memcpy(buf + (at - off), c.p + 8, c.len - 8);
		} else if (c.type == NBD_REPLY_TYPE_OFFSET_HOLE) {
			uint64_t at = be64_get(c.p);
			uint32_t n = be32_get(c.p + 8);

			assert_int_equal(c.len, 12);
			assert_true(n && at >= off && at + n <= off + len);
			memset(buf + (at - off), 0, n);
		} else if (c.type == NBD_REPLY_TYPE_ERROR) {
			err = be32_get(c.p);
		} else {
			assert_int_equal(c.type, NBD_REPLY_TYPE_NONE);
		}
		free(c.p);
	} while (!(c.flags & NBD_REPLY_FLAG_DONE));
	return err;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 31 + (i >> 9));
}

/* ---- handshake */

static void test_hello_and_bad_client_flags(void **state)
{
	struct fixture *f = *state;

	start(f);
	c_hello(f->cfd, 1u << 5);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), -EPROTO);
}

static void test_probe_and_abort(void **state)
{
	struct fixture *f = *state;

	start(f); /* connect and leave */
	assert_int_equal(finish(f), 0);

	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	c_opt_expect(f->cfd, NBD_OPT_ABORT, "ignored", 7, NBD_REP_ACK);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
}

static void test_export_name_old_style(void **state)
{
	struct fixture *f = *state;
	uint8_t r[134], zeros[124] = { 0 }, buf[512];

	/* without NO_ZEROES: size, flags and 124 zero bytes */
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	c_opt(f->cfd, NBD_OPT_EXPORT_NAME, "anything", 8);
	c_recv(f->cfd, r, sizeof(r));
	assert_true(be64_get(r) == DISK);
	assert_int_equal(be16_get(r + 8) & (NBD_FLAG_HAS_FLAGS | NBD_FLAG_READ_ONLY),
			 NBD_FLAG_HAS_FLAGS);
	assert_memory_equal(r + 10, zeros, sizeof(zeros));
	c_req(f->cfd, 0, NBD_CMD_READ, 1, 4096, 512, NULL);
	assert_int_equal(c_simple(f->cfd, 1, buf, 512), 0);
	assert_memory_equal(buf, f->base + 4096, 512);
	c_req(f->cfd, 0, NBD_CMD_DISC, 2, 0, 0, NULL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);

	/* with NO_ZEROES: exactly 10 bytes, then transmission */
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	c_opt(f->cfd, NBD_OPT_EXPORT_NAME, NULL, 0);
	c_recv(f->cfd, r, 10);
	assert_true(be64_get(r) == DISK);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 3, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 3, NULL, 0), 0);
	assert_int_equal(f->t.flushes, 1);
	assert_int_equal(finish(f), 0);

	/* a named export: another name ends the session (this option cannot fail) */
	f->x.name = "disk";
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	c_opt(f->cfd, NBD_OPT_EXPORT_NAME, "other", 5);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), -ENOENT);
}

static void test_info_go_list(void **state)
{
	struct fixture *f = *state;
	const uint16_t want[] = { NBD_INFO_NAME, NBD_INFO_BLOCK_SIZE, NBD_INFO_DESCRIPTION, 77 };
	uint8_t buf[256];
	bool seen[4] = { false };
	uint32_t len, want_flags;
	struct rep r;

	f->x.name = "disk";
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);

	c_opt(f->cfd, NBD_OPT_LIST, NULL, 0);
	c_rep(f->cfd, &r);
	assert_int_equal(r.type, NBD_REP_SERVER);
	assert_int_equal(r.len, 8);
	assert_int_equal(be32_get(r.data), 4);
	assert_memory_equal(r.data + 4, "disk", 4);
	c_rep(f->cfd, &r);
	assert_int_equal(r.type, NBD_REP_ACK);
	c_opt_expect(f->cfd, NBD_OPT_LIST, "x", 1, NBD_REP_ERR_INVALID);

	len = info_data(buf, "nope", want, 4);
	c_opt_expect(f->cfd, NBD_OPT_INFO, buf, len, NBD_REP_ERR_UNKNOWN);

	len = info_data(buf, "disk", want, 4);
	c_opt(f->cfd, NBD_OPT_INFO, buf, len);
	for (;;) {
		c_rep(f->cfd, &r);
		assert_int_equal(r.opt, NBD_OPT_INFO);
		if (r.type == NBD_REP_ACK)
			break;
		assert_int_equal(r.type, NBD_REP_INFO);
		switch (be16_get(r.data)) {
		case NBD_INFO_EXPORT:
			assert_int_equal(r.len, 12);
			assert_true(be64_get(r.data + 2) == DISK);
			want_flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
				     NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |
				     NBD_FLAG_CAN_MULTI_CONN;
			assert_int_equal(be16_get(r.data + 10), want_flags);
			seen[0] = true;
			break;
		case NBD_INFO_BLOCK_SIZE:
			assert_int_equal(r.len, 14);
			assert_int_equal(be32_get(r.data + 2), 512);
			assert_int_equal(be32_get(r.data + 6), 4096);
			assert_int_equal(be32_get(r.data + 10), 32u << 20);
			seen[1] = true;
			break;
		case NBD_INFO_NAME:
			assert_int_equal(r.len, 6);
			assert_memory_equal(r.data + 2, "disk", 4);
			seen[2] = true;
			break;
		case NBD_INFO_DESCRIPTION:
			seen[3] = true;
			break;
		default:
			fail_msg("unexpected info type %u", be16_get(r.data));
		}
	}
	assert_true(seen[0] && seen[1] && seen[2] && seen[3]);

	/* GO with the default name: DF is advertised once structured replies are on */
	c_opt_expect(f->cfd, NBD_OPT_STRUCTURED_REPLY, NULL, 0, NBD_REP_ACK);
	len = info_data(buf, "", NULL, 0);
	c_opt(f->cfd, NBD_OPT_GO, buf, len);
	c_rep(f->cfd, &r);
	assert_int_equal(r.type, NBD_REP_INFO);
	assert_int_equal(be16_get(r.data), NBD_INFO_EXPORT);
	assert_true(be16_get(r.data + 10) & NBD_FLAG_SEND_DF);
	do
		c_rep(f->cfd, &r);
	while (r.type == NBD_REP_INFO);
	assert_int_equal(r.type, NBD_REP_ACK);
	c_req(f->cfd, 0, NBD_CMD_DISC, 1, 0, 0, NULL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
}

static void test_read_only_flags(void **state)
{
	struct fixture *f = *state;
	struct session s;

	f->x.read_only = true;
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	assert_true(s.tflags & NBD_FLAG_READ_ONLY);
	assert_false(s.tflags & (NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES));
	assert_false(s.tflags & NBD_FLAG_SEND_DF);
	assert_int_equal(finish(f), 0);
}

static void test_unknown_and_malformed_options(void **state)
{
	struct fixture *f = *state;
	const char *q[] = { "base:allocation" };
	uint8_t buf[256], big[300];
	uint32_t len;

	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	/* unknown options, STARTTLS and extended headers: unsupported, negotiation goes on */
	c_opt_expect(f->cfd, 4, NULL, 0, NBD_REP_ERR_UNSUP);
	c_opt_expect(f->cfd, NBD_OPT_STARTTLS, NULL, 0, NBD_REP_ERR_UNSUP);
	c_opt_expect(f->cfd, 11, NULL, 0, NBD_REP_ERR_UNSUP);
	c_opt_expect(f->cfd, 0xdeadbeef, "junk", 4, NBD_REP_ERR_UNSUP);
	/* INFO: too short, a name longer than the data, a request list of the wrong size */
	c_opt_expect(f->cfd, NBD_OPT_INFO, "\0\0\0\0\0", 5, NBD_REP_ERR_INVALID);
	be32_put(buf, 100);
	be16_put(buf + 4, 0);
	c_opt_expect(f->cfd, NBD_OPT_GO, buf, 6, NBD_REP_ERR_INVALID);
	be32_put(big, 0xffffffff);
	c_opt_expect(f->cfd, NBD_OPT_GO, big, sizeof(big), NBD_REP_ERR_INVALID);
	len = info_data(buf, "", NULL, 0);
	be16_put(buf + 4, 3); /* three requests announced, none sent */
	c_opt_expect(f->cfd, NBD_OPT_GO, buf, len, NBD_REP_ERR_INVALID);
	c_opt_expect(f->cfd, NBD_OPT_GO, buf, len + 1, NBD_REP_ERR_INVALID);
	/* structured replies take no data; meta contexts need them first */
	c_opt_expect(f->cfd, NBD_OPT_STRUCTURED_REPLY, "x", 1, NBD_REP_ERR_INVALID);
	len = meta_data(buf, "", q, 1);
	c_opt_expect(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len, NBD_REP_ERR_INVALID);
	c_opt_expect(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len, NBD_REP_ERR_INVALID);
	c_opt_expect(f->cfd, NBD_OPT_STRUCTURED_REPLY, NULL, 0, NBD_REP_ACK);
	/* meta: short, name too long, a query running past the end, trailing bytes */
	c_opt_expect(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, 7, NBD_REP_ERR_INVALID);
	be32_put(big, 299);
	c_opt_expect(f->cfd, NBD_OPT_SET_META_CONTEXT, big, sizeof(big), NBD_REP_ERR_INVALID);
	c_opt_expect(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len - 1, NBD_REP_ERR_INVALID);
	buf[len] = 'x';
	c_opt_expect(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len + 1, NBD_REP_ERR_INVALID);
	be32_put(buf + 4, 1000); /* a thousand queries announced */
	c_opt_expect(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len, NBD_REP_ERR_INVALID);
	/* after all that, a normal GO still works */
	len = info_data(buf, "", NULL, 0);
	c_opt(f->cfd, NBD_OPT_GO, buf, len);
	{
		struct rep r;

		do
			c_rep(f->cfd, &r);
		while (r.type == NBD_REP_INFO);
		assert_int_equal(r.type, NBD_REP_ACK);
	}
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 9, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 9, NULL, 0), 0);
	assert_int_equal(finish(f), 0);
}

static void test_option_hostile(void **state)
{
	struct fixture *f = *state;
	uint8_t h[16];

	/* more option data than the server takes: disconnect */
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	be64_put(h, NBD_OPTS_MAGIC);
	be32_put(h + 8, NBD_OPT_GO);
	be32_put(h + 12, 0xfffffff0u);
	c_send(f->cfd, h, sizeof(h));
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), -EPROTO);

	/* a bad option magic: disconnect */
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	memcpy(h, "GARBAGE!GARBAGE!", 16);
	c_send(f->cfd, h, sizeof(h));
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), -EPROTO);

	/* a truncated option: the client goes away part way */
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	be64_put(h, NBD_OPTS_MAGIC);
	be32_put(h + 8, NBD_OPT_GO);
	be32_put(h + 12, 100);
	c_send(f->cfd, h, sizeof(h));
	c_send(f->cfd, "abc", 3);
	shutdown(f->cfd, SHUT_WR);
	assert_int_equal(finish(f), -ECONNRESET);

	/* a truncated option header */
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE);
	c_send(f->cfd, h, 9);
	assert_int_equal(finish(f), -ECONNRESET);

	/* truncated client flags */
	start(f);
	c_recv(f->cfd, h, 16);
	c_send(f->cfd, h, 2);
	assert_int_equal(finish(f), -ECONNRESET);
}

static void test_meta_contexts(void **state)
{
	struct fixture *f = *state;
	char names[4][64];
	uint32_t ids[4], len;
	unsigned n;
	uint8_t buf[512];

	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	c_opt_expect(f->cfd, NBD_OPT_STRUCTURED_REPLY, NULL, 0, NBD_REP_ACK);

	/* list everything */
	len = meta_data(buf, "", NULL, 0);
	c_opt(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len);
	assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_LIST_META_CONTEXT, names, ids, &n),
			 NBD_REP_ACK);
	assert_int_equal(n, 2);
	assert_string_equal(names[0], "base:allocation");
	assert_string_equal(names[1], "lazyblk:dirty");
	assert_int_equal(ids[0], 0);
	{
		const char *q[] = { "base:" };

		len = meta_data(buf, "", q, 1);
		c_opt(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len);
		c_meta_replies(f->cfd, NBD_OPT_LIST_META_CONTEXT, names, ids, &n);
		assert_int_equal(n, 1);
		assert_string_equal(names[0], "base:allocation");
	}
	{
		const char *q[] = { "lazyblk:", "lazyblk:dirty", "x-other:thing", "nocolon" };

		len = meta_data(buf, "", q, 4);
		c_opt(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len);
		c_meta_replies(f->cfd, NBD_OPT_LIST_META_CONTEXT, names, ids, &n);
		assert_int_equal(n, 1); /* each context once */
		assert_string_equal(names[0], "lazyblk:dirty");
	}
	{
		/* selecting: wildcards and unknown names select nothing */
		const char *q[] = { "base:", "lazyblk:", "lazyblk:nothing", "qemu:dirty-bitmap:x" };

		len = meta_data(buf, "", q, 4);
		c_opt(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len);
		assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_SET_META_CONTEXT, names, ids, &n),
				 NBD_REP_ACK);
		assert_int_equal(n, 0);
	}
	{
		const char *q[] = { "lazyblk:dirty", "base:allocation" };

		len = meta_data(buf, "", q, 2);
		c_opt(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len);
		assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_SET_META_CONTEXT, names, ids, &n),
				 NBD_REP_ACK);
		assert_int_equal(n, 2);
		assert_true(ids[0] && ids[1] && ids[0] != ids[1]);

		/* another export's name: an error, and the selection is gone */
		f->x.name = "disk";
		len = meta_data(buf, "other", q, 2);
		c_opt(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len);
		assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_SET_META_CONTEXT, names, ids, &n),
				 NBD_REP_ERR_UNKNOWN);
		assert_int_equal(n, 0);
	}
	len = info_data(buf, "disk", NULL, 0);
	c_opt(f->cfd, NBD_OPT_GO, buf, len);
	{
		struct rep r;

		do
			c_rep(f->cfd, &r);
		while (r.type == NBD_REP_INFO);
		assert_int_equal(r.type, NBD_REP_ACK);
	}
	/* no context selected: block status is refused */
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 5, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 5), NBD_EINVAL);
	assert_int_equal(finish(f), 0);
}

/* ---- transmission */

static void test_commands_simple(void **state)
{
	struct fixture *f = *state;
	uint8_t *w = malloc(65536), *r = malloc(65536);
	struct session s;

	assert_non_null(w);
	assert_non_null(r);
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	assert_false(s.tflags & NBD_FLAG_SEND_DF);

	fill(w, 65536, 3);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 10, 8192, 65536, w);
	assert_int_equal(c_simple(f->cfd, 10, NULL, 0), 0);
	c_req(f->cfd, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 11, 1024, 512, w);
	assert_int_equal(c_simple(f->cfd, 11, NULL, 0), 0);
	assert_int_equal(f->t.fua_writes, 1);
	c_req(f->cfd, 0, NBD_CMD_READ, 12, 8192, 65536, NULL);
	assert_int_equal(c_simple(f->cfd, 12, r, 65536), 0);
	assert_memory_equal(r, w, 65536);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 13, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 13, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 14, 8192, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 14, NULL, 0), 0);
	c_req(f->cfd, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA, NBD_CMD_WRITE_ZEROES, 15, 12288,
	      8192, NULL);
	assert_int_equal(c_simple(f->cfd, 15, NULL, 0), 0);
	assert_int_equal(f->t.discards, 1);
	assert_int_equal(f->t.zeroes, 1);
	assert_int_equal(f->t.flushes, 2); /* FLUSH, and FUA on WRITE_ZEROES */
	c_req(f->cfd, 0, NBD_CMD_READ, 16, 8192, 16384, NULL);
	assert_int_equal(c_simple(f->cfd, 16, r, 16384), 0);
	for (int i = 0; i < 12288; i++)
		assert_int_equal(r[i], 0);
	assert_memory_equal(r + 12288, w + 12288, 4096);
	/* a zero-length read has no data */
	c_req(f->cfd, 0, NBD_CMD_READ, 17, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 17, NULL, 0), 0);
	/* engine errors map to NBD errors; a failed read sends no data */
	c_req(f->cfd, 0, NBD_CMD_READ, 18, FAIL_READ_BLOCK * BLK, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 18, r, 4096), NBD_EIO);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 19, FAIL_WRITE_BLOCK * BLK, 4096, w);
	assert_int_equal(c_simple(f->cfd, 19, NULL, 0), NBD_ENOSPC);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 20, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 20, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_DISC, 21, 0, 0, NULL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
	free(w);
	free(r);
}

static void test_commands_structured(void **state)
{
	struct fixture *f = *state;
	uint8_t *w = malloc(NBD_MAX_PAYLOAD), *r = malloc(NBD_MAX_PAYLOAD);
	struct session s;
	struct chunk c;

	assert_non_null(w);
	assert_non_null(r);
	start(f);
	c_connect(f->cfd, true, false, false, &s);
	assert_true(s.tflags & NBD_FLAG_SEND_DF);

	/* large payloads both ways (the fake disk is smaller than the 32 MiB limit) */
	fill(w, 1 << 20, 9);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 1, 0, 1 << 20, w);
	assert_int_equal(c_simple(f->cfd, 1, NULL, 0), 0);
	memset(r, 0xee, 1 << 20);
	c_req(f->cfd, NBD_CMD_FLAG_DF, NBD_CMD_READ, 2, 0, 1 << 20, NULL);
	assert_int_equal(c_sread(f->cfd, 2, 0, r, 1 << 20), 0);
	assert_memory_equal(r, w, 1 << 20);
	/*
	 * FAIL_READ_BLOCK in a read of several chunks: the chunks before it (data to 1 MiB,
	 * the hole after), then ERROR_OFFSET at the failing data chunk, DONE
	 */
	c_req(f->cfd, 0, NBD_CMD_READ, 22, 0, (uint32_t)DISK, NULL);
	c_chunk(f->cfd, &c);
	assert_int_equal(c.type, NBD_REPLY_TYPE_OFFSET_DATA);
	assert_int_equal(c.flags, 0);
	assert_int_equal(c.len, 8 + (1 << 20));
	assert_true(be64_get(c.p) == 0);
	assert_memory_equal(c.p + 8, w, 1 << 20);
	free(c.p);
	c_chunk(f->cfd, &c);
	assert_int_equal(c.type, NBD_REPLY_TYPE_OFFSET_HOLE);
	assert_int_equal(c.flags, 0);
	assert_int_equal(c.len, 12);
	assert_true(be64_get(c.p) == 1 << 20);
	assert_int_equal(be32_get(c.p + 8), FAIL_READ_BLOCK * BLK - (1 << 20));
	free(c.p);
	c_chunk(f->cfd, &c);
	assert_true(c.handle == 22);
	assert_int_equal(c.type, NBD_REPLY_TYPE_ERROR_OFFSET);
	assert_int_equal(c.flags, NBD_REPLY_FLAG_DONE);
	assert_true(c.len >= 14);
	assert_int_equal(be32_get(c.p), NBD_EIO);
	assert_int_equal(be16_get(c.p + 4), c.len - 14);
	assert_true(be64_get(c.p + c.len - 8) == FAIL_READ_BLOCK * BLK);
	free(c.p);
	/* one data chunk, DONE */
	c_req(f->cfd, 0, NBD_CMD_READ, 3, 4096, 1024, NULL);
	c_chunk(f->cfd, &c);
	assert_int_equal(c.type, NBD_REPLY_TYPE_OFFSET_DATA);
	assert_int_equal(c.flags, NBD_REPLY_FLAG_DONE);
	assert_int_equal(c.len, 8 + 1024);
	assert_true(be64_get(c.p) == 4096);
	assert_memory_equal(c.p + 8, w + 4096, 1024);
	free(c.p);
	/* zero length: a NONE chunk */
	c_req(f->cfd, 0, NBD_CMD_READ, 4, 512, 0, NULL);
	c_chunk(f->cfd, &c);
	assert_int_equal(c.type, NBD_REPLY_TYPE_NONE);
	assert_int_equal(c.flags, NBD_REPLY_FLAG_DONE);
	assert_int_equal(c.len, 0);
	free(c.p);
	/* errors as error chunks with a message */
	c_req(f->cfd, 0, NBD_CMD_READ, 5, FAIL_READ_BLOCK * BLK - 4096, 8192, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 5), NBD_EIO);
	c_req(f->cfd, 0, NBD_CMD_READ, 6, 100, 512, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 6), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_WRITE_ZEROES, 7, 0, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 7, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_DISC, 8, 0, 0, NULL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
	free(w);
	free(r);
}

/* The descriptors of one block-status chunk. */
struct desc {
	uint32_t id, n, len[1024], flags[1024];
};

static void c_status_chunk(int fd, uint64_t handle, struct desc *d, bool *done)
{
	struct chunk c;

	c_chunk(fd, &c);
	assert_true(c.handle == handle);
	assert_int_equal(c.type, NBD_REPLY_TYPE_BLOCK_STATUS);
	assert_true(c.len >= 12 && (c.len - 4) % 8 == 0);
	d->id = be32_get(c.p);
	d->n = (c.len - 4) / 8;
	assert_true(d->n <= 1024);
	for (uint32_t i = 0; i < d->n; i++) {
		d->len[i] = be32_get(c.p + 4 + 8 * i);
		d->flags[i] = be32_get(c.p + 8 + 8 * i);
		assert_true(d->len[i] > 0 && d->len[i] % 512 == 0);
	}
	*done = c.flags & NBD_REPLY_FLAG_DONE;
	free(c.p);
}

static void test_block_status(void **state)
{
	struct fixture *f = *state;
	uint8_t w[8192] = { 1 };
	struct session s;
	struct desc d[2], *alloc, *dirty;
	bool done;

	start(f);
	c_connect(f->cfd, true, true, true, &s);
	/* dirty [1 MiB - 8 KiB, 1 MiB) by a write, zeroed [1 MiB, 1 MiB + 8 KiB) */
	c_req(f->cfd, 0, NBD_CMD_WRITE, 1, (1 << 20) - 8192, sizeof(w), w);
	assert_int_equal(c_simple(f->cfd, 1, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_WRITE_ZEROES, 2, 1 << 20, 8192, NULL);
	assert_int_equal(c_simple(f->cfd, 2, NULL, 0), 0);

	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 3, 0, (uint32_t)DISK, NULL);
	c_status_chunk(f->cfd, 3, &d[0], &done);
	assert_false(done);
	c_status_chunk(f->cfd, 3, &d[1], &done);
	assert_true(done);
	alloc = d[0].id == s.ctx_id[NBD_CTX_ALLOCATION] ? &d[0] : &d[1];
	dirty = alloc == &d[0] ? &d[1] : &d[0];
	assert_int_equal(alloc->id, s.ctx_id[NBD_CTX_ALLOCATION]);
	assert_int_equal(dirty->id, s.ctx_id[NBD_CTX_DIRTY]);
	/* allocation: data to 1 MiB, then holes that read as zeros but FAIL_READ_BLOCK */
	assert_int_equal(alloc->n, 4);
	assert_int_equal(alloc->len[0], 1 << 20);
	assert_int_equal(alloc->flags[0], 0);
	assert_int_equal(alloc->len[1], FAIL_READ_BLOCK * BLK - (1 << 20));
	assert_int_equal(alloc->flags[1], NBD_STATE_HOLE | NBD_STATE_ZERO);
	assert_int_equal(alloc->len[2], BLK);
	assert_int_equal(alloc->flags[2], 0);
	assert_int_equal(alloc->len[3], DISK - (FAIL_READ_BLOCK + 1) * BLK);
	assert_int_equal(alloc->flags[3], NBD_STATE_HOLE | NBD_STATE_ZERO);
	/* dirty: exactly the 16 KiB written or zeroed */
	assert_int_equal(dirty->n, 3);
	assert_int_equal(dirty->len[0], (1 << 20) - 8192);
	assert_int_equal(dirty->flags[0], 0);
	assert_int_equal(dirty->len[1], 16384);
	assert_int_equal(dirty->flags[1], 1);
	assert_int_equal(dirty->len[2], DISK - (1 << 20) - 8192);
	assert_int_equal(dirty->flags[2], 0);

	/* REQ_ONE: one descriptor per context, within the request */
	c_req(f->cfd, NBD_CMD_FLAG_REQ_ONE, NBD_CMD_BLOCK_STATUS, 4, 0, 1 << 21, NULL);
	c_status_chunk(f->cfd, 4, &d[0], &done);
	assert_int_equal(d[0].n, 1);
	c_status_chunk(f->cfd, 4, &d[1], &done);
	assert_int_equal(d[1].n, 1);
	assert_true(done);
	/* many extents: every other block of [1.5 MiB, 1.5 MiB + 400 KiB) written */
	for (int i = 0; i < 100; i += 2) {
		c_req(f->cfd, 0, NBD_CMD_WRITE, 100 + i, (3 << 19) + i * 4096, 4096, w);
		assert_int_equal(c_simple(f->cfd, 100 + i, NULL, 0), 0);
	}
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 8, 3 << 19, 100 * 4096, NULL);
	c_status_chunk(f->cfd, 8, &d[0], &done);
	c_status_chunk(f->cfd, 8, &d[1], &done);
	dirty = d[0].id == s.ctx_id[NBD_CTX_DIRTY] ? &d[0] : &d[1];
	alloc = dirty == &d[0] ? &d[1] : &d[0];
	assert_int_equal(dirty->n, 100);
	assert_int_equal(alloc->n, 100);
	for (uint32_t i = 0; i < 100; i++) {
		assert_int_equal(dirty->len[i], 4096);
		assert_int_equal(dirty->flags[i], i % 2 ? 0 : 1);
		assert_int_equal(alloc->flags[i], i % 2 ? NBD_STATE_HOLE | NBD_STATE_ZERO : 0);
	}
	/* hostile ranges */
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 5, DISK - 4096, 8192, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 5), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 6, 0, 0, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 6), NBD_EINVAL);
	c_req(f->cfd, NBD_CMD_FLAG_DF, NBD_CMD_BLOCK_STATUS, 7, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 7), NBD_EINVAL);
	assert_int_equal(finish(f), 0);
}

/* The content chunks of one structured read, in the order they came. */
struct rchunks {
	uint32_t n;
	uint16_t type[64];
	uint64_t off[64];
	uint32_t len[64];
	bool done;
};

/* Read [off, off+len) with flags: its chunks into ch, its bytes into buf. */
static void c_sread_chunks(int fd, uint16_t flags, uint64_t handle, uint64_t off, uint32_t len,
			   uint8_t *buf, struct rchunks *ch)
{
	struct chunk c;

	memset(ch, 0, sizeof(*ch));
	memset(buf, 0xee, len);
	c_req(fd, flags, NBD_CMD_READ, handle, off, len, NULL);
	do {
		c_chunk(fd, &c);
		assert_true(c.handle == handle);
		assert_true(ch->n < 64);
		ch->type[ch->n] = c.type;
		ch->off[ch->n] = be64_get(c.p);
		if (c.type == NBD_REPLY_TYPE_OFFSET_DATA) {
			assert_true(c.len > 8);
			ch->len[ch->n] = c.len - 8;
			memcpy(buf + (ch->off[ch->n] - off), c.p + 8, c.len - 8);
		} else {
			assert_int_equal(c.type, NBD_REPLY_TYPE_OFFSET_HOLE);
			assert_int_equal(c.len, 12);
			ch->len[ch->n] = be32_get(c.p + 8);
			memset(buf + (ch->off[ch->n] - off), 0, ch->len[ch->n]);
		}
		assert_true(ch->off[ch->n] >= off && ch->len[ch->n] &&
			    ch->off[ch->n] + ch->len[ch->n] <= off + len);
		ch->n++;
		free(c.p);
	} while (!(c.flags & NBD_REPLY_FLAG_DONE));
}

static void expect_chunk(const struct rchunks *ch, uint32_t i, uint16_t type, uint64_t off,
			 uint64_t end)
{
	assert_true(i < ch->n);
	assert_int_equal(ch->type[i], type);
	assert_true(ch->off[i] == off);
	assert_true(ch->len[i] == end - off);
}

#define B(n) ((uint64_t)(n) * BLK)

/*
 * Structured reads send holes as OFFSET_HOLE chunks without reading them: base holes and
 * overlay-zeroed ranges of at least NBD_READ_MIN_HOLE; shorter zero ranges between data
 * go as data. The bytes equal a DF read (one data chunk), and every hole chunk lies in a
 * HOLE|ZERO extent of NBD_CMD_BLOCK_STATUS.
 */
static void test_structured_holes(void **state)
{
	const uint64_t off = 1536, end = B(270); /* an unaligned start */
	const uint32_t len = (uint32_t)(end - off);
	struct fixture *f = *state;
	uint8_t *a = malloc(len), *b = malloc(len), w[4096];
	struct rchunks ch;
	struct session s;
	struct desc d;
	uint64_t data = 0, at;
	bool done;

	assert_non_null(a);
	assert_non_null(b);
	assert_true(NBD_READ_MIN_HOLE == B(4));
	fill(w, sizeof(w), 5);
	start(f);
	c_connect(f->cfd, true, true, false, &s);
	/* base data in blocks [0, 256); zeroed [16, 24) (a hole) and [32, 34) (too short) */
	c_req(f->cfd, 0, NBD_CMD_WRITE_ZEROES, 1, B(16), (uint32_t)B(8), NULL);
	assert_int_equal(c_simple(f->cfd, 1, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 2, B(32), (uint32_t)B(2), NULL);
	assert_int_equal(c_simple(f->cfd, 2, NULL, 0), 0);
	/* written 260, 262, 264 in the base's hole: a 16 KiB hole before, 4 KiB ones between */
	for (int i = 0; i < 3; i++) {
		c_req(f->cfd, 0, NBD_CMD_WRITE, 3 + i, B(260 + 2 * i), sizeof(w), w);
		assert_int_equal(c_simple(f->cfd, 3 + i, NULL, 0), 0);
	}

	f->t.read_bytes = 0;
	c_sread_chunks(f->cfd, 0, 10, off, len, a, &ch);
	assert_int_equal(ch.n, 6);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_DATA, off, B(16));
	expect_chunk(&ch, 1, NBD_REPLY_TYPE_OFFSET_HOLE, B(16), B(24));
	expect_chunk(&ch, 2, NBD_REPLY_TYPE_OFFSET_DATA, B(24), B(256));
	expect_chunk(&ch, 3, NBD_REPLY_TYPE_OFFSET_HOLE, B(256), B(260));
	expect_chunk(&ch, 4, NBD_REPLY_TYPE_OFFSET_DATA, B(260), B(265));
	expect_chunk(&ch, 5, NBD_REPLY_TYPE_OFFSET_HOLE, B(265), B(270));
	for (uint32_t i = 0; i < ch.n; i++)
		if (ch.type[i] == NBD_REPLY_TYPE_OFFSET_DATA)
			data += ch.len[i];
	/*
	 * the holes were not read, not even the short ones sent as data ([32, 34), 261, 263):
	 * the disk reads only its data extents, the reply zeroes the rest (disk_read_sparse)
	 */
	assert_true(f->t.read_bytes == data - B(4));
	assert_memory_equal(a, disk_now(f) + off, len);

	/* DF: one data chunk with the zeros in it, the same bytes */
	c_sread_chunks(f->cfd, NBD_CMD_FLAG_DF, 11, off, len, b, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_DATA, off, end);
	assert_memory_equal(a, b, len);

	/* block status agrees: every hole chunk lies in one HOLE|ZERO extent */
	c_sread_chunks(f->cfd, 0, 12, off, len, a, &ch);
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 13, off, len, NULL);
	c_status_chunk(f->cfd, 13, &d, &done);
	assert_true(done);
	for (uint32_t i = 0; i < ch.n; i++) {
		bool inside = false;

		if (ch.type[i] != NBD_REPLY_TYPE_OFFSET_HOLE)
			continue;
		at = off;
		for (uint32_t k = 0; k < d.n; at += d.len[k++])
			if (at <= ch.off[i] && ch.off[i] + ch.len[i] <= at + d.len[k])
				inside = d.flags[k] == (NBD_STATE_HOLE | NBD_STATE_ZERO);
		assert_true(inside);
	}

	/* all hole: one hole chunk, DF or not, however short; nothing read */
	f->t.read_bytes = 0;
	c_sread_chunks(f->cfd, 0, 14, B(256), (uint32_t)B(4), a, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_HOLE, B(256), B(260));
	c_sread_chunks(f->cfd, NBD_CMD_FLAG_DF, 15, B(16), (uint32_t)B(8), a, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_HOLE, B(16), B(24));
	c_sread_chunks(f->cfd, 0, 16, B(261), 512, a, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_HOLE, B(261), B(261) + 512);
	assert_true(f->t.read_bytes == 0);
	/* a short hole at either end of a read is data */
	c_sread_chunks(f->cfd, 0, 17, B(259), (uint32_t)B(3), a, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_DATA, B(259), B(262));
	assert_memory_equal(a, disk_now(f) + B(259), B(3));

	/* simple replies (no structured replies) are unchanged: every byte as data */
	c_req(f->cfd, 0, NBD_CMD_DISC, 18, 0, 0, NULL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	f->t.read_bytes = 0;
	c_req(f->cfd, 0, NBD_CMD_READ, 19, off, len, NULL);
	assert_int_equal(c_simple(f->cfd, 19, b, len), 0);
	assert_memory_equal(b, disk_now(f) + off, len);
	assert_true(f->t.read_bytes == len);
	assert_int_equal(finish(f), 0);
	free(a);
	free(b);
}

static void test_hostile_requests(void **state)
{
	struct fixture *f = *state;
	uint8_t *w = calloc(1, 1 << 20), r[4096];
	struct session s;

	assert_non_null(w);
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	/* misaligned: EINVAL; a write's payload is consumed, the stream stays in step */
	c_req(f->cfd, 0, NBD_CMD_READ, 1, 1, 512, NULL);
	assert_int_equal(c_simple(f->cfd, 1, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_READ, 2, 0, 100, NULL);
	assert_int_equal(c_simple(f->cfd, 2, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 3, 0, 1000, w);
	assert_int_equal(c_simple(f->cfd, 3, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 4, 512, 100, NULL);
	assert_int_equal(c_simple(f->cfd, 4, NULL, 0), NBD_EINVAL);
	/* out of range: reads EINVAL, writes ENOSPC (the payload consumed), offsets that
	 * overflow when the length is added */
	c_req(f->cfd, 0, NBD_CMD_READ, 5, DISK, 512, NULL);
	assert_int_equal(c_simple(f->cfd, 5, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_READ, 6, UINT64_MAX - 511, 1024, NULL);
	assert_int_equal(c_simple(f->cfd, 6, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 7, DISK - 4096, 1 << 20, w);
	assert_int_equal(c_simple(f->cfd, 7, NULL, 0), NBD_ENOSPC);
	c_req(f->cfd, 0, NBD_CMD_WRITE_ZEROES, 8, DISK, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 8, NULL, 0), NBD_ENOSPC);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 9, 0, (uint32_t)DISK + 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 9, NULL, 0), NBD_EINVAL);
	/* over the payload limit: a read is refused, the connection stays */
	c_req(f->cfd, 0, NBD_CMD_READ, 10, 0, NBD_MAX_PAYLOAD + 512, NULL);
	assert_int_equal(c_simple(f->cfd, 10, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_READ, 11, 0, 0xfffffe00u, NULL);
	assert_int_equal(c_simple(f->cfd, 11, NULL, 0), NBD_EINVAL);
	/* unknown commands and flags; block status without structured replies */
	c_req(f->cfd, 0, NBD_CMD_CACHE, 12, 0, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 12, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, 99, 13, 0, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 13, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 1u << 12, NBD_CMD_READ, 14, 0, 512, NULL);
	assert_int_equal(c_simple(f->cfd, 14, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, NBD_CMD_FLAG_DF, NBD_CMD_READ, 15, 0, 512, NULL); /* not negotiated */
	assert_int_equal(c_simple(f->cfd, 15, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE, 16, 0, 512, w);
	assert_int_equal(c_simple(f->cfd, 16, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 17, 0, 512, NULL);
	assert_int_equal(c_simple(f->cfd, 17, NULL, 0), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 18, 0, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 18, NULL, 0), NBD_EINVAL);
	/* FUA on a read is accepted (clients do send it) */
	c_req(f->cfd, NBD_CMD_FLAG_FUA, NBD_CMD_READ, 19, 0, 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 19, r, 4096), 0);
	assert_memory_equal(r, f->base, 4096);
	/* nothing reached the engine's data */
	assert_int_equal(f->t.writes, 0);
	assert_memory_equal(disk_now(f), f->base, DISK);
	/* a write over the payload limit: refused, then the server hangs up */
	c_req(f->cfd, 0, NBD_CMD_WRITE, 20, 0, NBD_MAX_PAYLOAD + 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 20, NULL, 0), NBD_EINVAL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), -EPROTO);
	free(w);
}

static void test_read_only_refuses_writes(void **state)
{
	struct fixture *f = *state;
	uint8_t w[4096] = { 0 };
	struct session s;

	f->x.read_only = true;
	start(f);
	c_connect(f->cfd, true, false, false, &s);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 1, 0, sizeof(w), w);
	assert_int_equal(c_error_chunk(f->cfd, 1), NBD_EPERM);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 2, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 2), NBD_EPERM);
	c_req(f->cfd, 0, NBD_CMD_WRITE_ZEROES, 3, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 3), NBD_EPERM);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 4, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 4, NULL, 0), 0);
	assert_int_equal(f->t.writes + f->t.discards + f->t.zeroes, 0);
	assert_memory_equal(disk_now(f), f->base, DISK);
	assert_int_equal(finish(f), 0);
}

static void test_bad_stream(void **state)
{
	struct fixture *f = *state;
	struct session s;
	uint8_t w[4096] = { 0 };

	/* a bad request magic: disconnect */
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	c_send(f->cfd, "this is not an NBD request...", 28);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), -EPROTO);

	/* a truncated request header */
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	c_send(f->cfd, "\x25\x60\x95\x13\0\0\0\1", 8);
	assert_int_equal(finish(f), -ECONNRESET);

	/* a write whose payload stops short: nothing is written */
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 1, 0, 8192, NULL);
	c_send(f->cfd, w, sizeof(w));
	assert_int_equal(finish(f), -ECONNRESET);
	assert_int_equal(f->t.writes, 0);

	/* a client closing without DISC is a clean end */
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	assert_int_equal(finish(f), 0);
}

/* Many requests in flight on one connection: every reply once, matched by handle. */
static void test_pipelined(void **state)
{
	enum { N = 200, LEN = 16384 };
	struct fixture *f = *state;
	uint8_t *w = malloc((size_t)N * LEN), *r = malloc(LEN);
	bool seen[N] = { false };
	struct session s;

	assert_non_null(w);
	assert_non_null(r);
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	/* writes to distinct places, all sent before any reply is read */
	for (int i = 0; i < N; i++) {
		fill(w + (size_t)i * LEN, LEN, (uint8_t)i);
		c_req(f->cfd, i % 3 ? 0 : NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 1000 + i,
		      (uint64_t)i * 8192 % ((1 << 20) - LEN), LEN, NULL);
		c_send(f->cfd, w + (size_t)i * LEN, LEN);
		if (i % 8 == 7) { /* keep the socket buffers from filling both ways */
			for (int k = i - 7; k <= i; k++) {
				uint8_t h[NBD_SIMPLE_REPLY_SIZE];
				uint64_t hd;

				c_recv(f->cfd, h, sizeof(h));
				assert_int_equal(be32_get(h + 4), 0);
				hd = be64_get(h + 8);
				assert_true(hd >= 1000 && hd < 1000 + N && !seen[hd - 1000]);
				seen[hd - 1000] = true;
			}
		}
	}
	for (int i = 0; i < N; i++)
		assert_true(seen[i]);
	assert_int_equal(f->t.writes, N);
	/* reads pipelined: the replies carry their data whole */
	for (int i = 0; i < 8; i++)
		c_req(f->cfd, 0, NBD_CMD_READ, 5000 + i, (uint64_t)i * LEN, LEN, NULL);
	for (int i = 0; i < 8; i++) {
		uint8_t h[NBD_SIMPLE_REPLY_SIZE];
		uint64_t hd;

		c_recv(f->cfd, h, sizeof(h));
		hd = be64_get(h + 8);
		assert_true(hd >= 5000 && hd < 5008);
		c_recv(f->cfd, r, LEN);
		assert_memory_equal(r, disk_now(f) + (hd - 5000) * LEN, LEN);
	}
	/* requests then DISC: every request is answered before the server hangs up */
	for (int i = 0; i < 16; i++)
		c_req(f->cfd, 0, NBD_CMD_FLUSH, 7000 + i, 0, 0, NULL);
	c_req(f->cfd, 0, NBD_CMD_DISC, 8000, 0, 0, NULL);
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 16; i++) {
		uint8_t h[NBD_SIMPLE_REPLY_SIZE];
		uint64_t hd;

		c_recv(f->cfd, h, sizeof(h));
		assert_int_equal(be32_get(h + 4), 0);
		hd = be64_get(h + 8);
		assert_true(hd >= 7000 && hd < 7016 && !seen[hd - 7000]);
		seen[hd - 7000] = true;
	}
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
	free(w);
	free(r);
}

/* Reads in flight and the client gone: the server's threads end, no crash. */
static void test_client_vanishes(void **state)
{
	struct fixture *f = *state;
	struct session s;

	start(f);
	c_connect(f->cfd, true, false, false, &s);
	for (int i = 0; i < 64; i++)
		c_req(f->cfd, 0, NBD_CMD_READ, (uint64_t)i, 0, 1 << 20, NULL);
	finish(f); /* returns once every worker is done */
}

/*
 * The raw disk alone (no test disk in front): only base:allocation is offered, the file's
 * holes are its map, writes land in the file; opened read-only, the export is read-only.
 */
static void test_raw_disk_alone(void **state)
{
	struct fixture *f = *state;
	char names[4][64];
	uint32_t ids[4], len;
	uint8_t buf[512], w[8192], *r = malloc(DISK);
	struct session s;
	struct desc d;
	unsigned n;
	bool done;

	assert_non_null(r);
	f->x.d = &f->t.raw;
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	c_opt_expect(f->cfd, NBD_OPT_STRUCTURED_REPLY, NULL, 0, NBD_REP_ACK);
	len = meta_data(buf, "", NULL, 0);
	c_opt(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len);
	assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_LIST_META_CONTEXT, names, ids, &n),
			 NBD_REP_ACK);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "base:allocation");
	{
		const char *q[] = { "lazyblk:", "lazyblk:dirty" };

		len = meta_data(buf, "", q, 2);
		c_opt(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len);
		c_meta_replies(f->cfd, NBD_OPT_LIST_META_CONTEXT, names, ids, &n);
		assert_int_equal(n, 0);
		len = meta_data(buf, "", q + 1, 1);
		c_opt(f->cfd, NBD_OPT_SET_META_CONTEXT, buf, len);
		assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_SET_META_CONTEXT, names, ids, &n),
				 NBD_REP_ACK);
		assert_int_equal(n, 0);
	}
	finish(f);

	start(f);
	c_connect(f->cfd, true, true, false, &s);
	assert_int_equal(s.tflags, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
				   NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_TRIM |
				   NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_DF);
	/* the allocation map is the file's: data, a hole, FAIL_READ_BLOCK's data, a hole */
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 1, 0, (uint32_t)DISK, NULL);
	c_status_chunk(f->cfd, 1, &d, &done);
	assert_true(done);
	assert_int_equal(d.n, 4);
	assert_int_equal(d.len[0], BASE_BLOCKS * BLK);
	assert_int_equal(d.flags[0], 0);
	assert_int_equal(d.len[1], (FAIL_READ_BLOCK - BASE_BLOCKS) * BLK);
	assert_int_equal(d.flags[1], NBD_STATE_HOLE | NBD_STATE_ZERO);
	assert_int_equal(d.len[2], BLK);
	assert_int_equal(d.flags[2], 0);
	assert_int_equal(d.flags[3], NBD_STATE_HOLE | NBD_STATE_ZERO);
	/* a write, a trim and write-zeroes land in the file; a whole read equals it */
	fill(w, sizeof(w), 77);
	c_req(f->cfd, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 2, B(400), sizeof(w), w);
	assert_int_equal(c_simple(f->cfd, 2, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 3, B(8), (uint32_t)B(4), NULL);
	assert_int_equal(c_simple(f->cfd, 3, NULL, 0), 0);
	c_req(f->cfd, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE_ZEROES, 4, B(20), 1024, NULL);
	assert_int_equal(c_simple(f->cfd, 4, NULL, 0), 0);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 5, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 5, NULL, 0), 0);
	memcpy(f->base + B(400), w, sizeof(w));
	memset(f->base + B(8), 0, B(4));
	memset(f->base + B(20), 0, 1024);
	assert_memory_equal(disk_now(f), f->base, DISK);
	c_req(f->cfd, 0, NBD_CMD_READ, 6, 0, (uint32_t)DISK, NULL);
	assert_int_equal(c_sread(f->cfd, 6, 0, r, (uint32_t)DISK), 0);
	assert_memory_equal(r, f->base, DISK);
	assert_int_equal(finish(f), 0);

	/* the file opened read-only: a read-only export */
	disk_close(&f->t.raw);
	assert_int_equal(disk_raw_open(f->path, true, &f->t.raw), 0);
	assert_true(f->t.raw.read_only);
	f->x.read_only = f->t.raw.read_only; /* as nbd_serve() makes it */
	start(f);
	c_connect(f->cfd, false, false, false, &s);
	assert_true(s.tflags & NBD_FLAG_READ_ONLY);
	assert_false(s.tflags & (NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES));
	c_req(f->cfd, 0, NBD_CMD_WRITE, 7, 0, 4096, w);
	assert_int_equal(c_simple(f->cfd, 7, NULL, 0), NBD_EPERM);
	c_req(f->cfd, 0, NBD_CMD_READ, 8, B(400), 4096, NULL);
	assert_int_equal(c_simple(f->cfd, 8, r, 4096), 0);
	assert_memory_equal(r, w, 4096);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 9, 0, 0, NULL);
	assert_int_equal(c_simple(f->cfd, 9, NULL, 0), 0);
	assert_int_equal(finish(f), 0);
	assert_memory_equal(disk_now(f), f->base, DISK);
	free(r);
}

/* A disk that can do less: no trim, no write-zeroes, no block status, no flush. */
static void test_disk_capabilities(void **state)
{
	struct fixture *f = *state;
	struct disk less = f->t.d;
	char names[4][64];
	uint32_t ids[4], len;
	uint8_t buf[512], *r = malloc(B(64));
	struct session s;
	struct rchunks ch;
	unsigned n;

	assert_non_null(r);
	less.can_discard = less.can_write_zeroes = less.can_flush = false;
	less.can_multi_conn = false;
	less.status = 0;
	f->x.d = &less;
	start(f);
	c_hello(f->cfd, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	c_opt_expect(f->cfd, NBD_OPT_STRUCTURED_REPLY, NULL, 0, NBD_REP_ACK);
	len = meta_data(buf, "", NULL, 0);
	c_opt(f->cfd, NBD_OPT_LIST_META_CONTEXT, buf, len);
	assert_int_equal(c_meta_replies(f->cfd, NBD_OPT_LIST_META_CONTEXT, names, ids, &n),
			 NBD_REP_ACK);
	assert_int_equal(n, 0);
	finish(f);

	start(f);
	c_connect(f->cfd, true, false, false, &s);
	/* FUA still: the disk's writes are durable when they return */
	assert_int_equal(s.tflags, NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_DF);
	c_req(f->cfd, 0, NBD_CMD_TRIM, 1, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 1), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_WRITE_ZEROES, 2, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 2), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 3, 0, 4096, NULL);
	assert_int_equal(c_error_chunk(f->cfd, 3), NBD_EINVAL);
	c_req(f->cfd, 0, NBD_CMD_FLUSH, 4, 0, 0, NULL); /* not offered; harmless */
	assert_int_equal(c_simple(f->cfd, 4, NULL, 0), 0);
	assert_int_equal(f->t.flushes + f->t.discards + f->t.zeroes, 0);
	/* no allocation map: a structured read of holes is one data chunk */
	c_sread_chunks(f->cfd, 0, 5, B(256), (uint32_t)B(40), r, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_DATA, B(256), B(296));
	assert_memory_equal(r, f->base + B(256), B(40));
	assert_int_equal(finish(f), 0);
	assert_memory_equal(disk_now(f), f->base, DISK);
	free(r);
}

static void test_errno_map(void **state)
{
	(void)state;
	assert_int_equal(nbd_errno(-EIO), NBD_EIO);
	assert_int_equal(nbd_errno(-EINVAL), NBD_EINVAL);
	assert_int_equal(nbd_errno(-ENOSPC), NBD_ENOSPC);
	assert_int_equal(nbd_errno(-EDQUOT), NBD_ENOSPC);
	assert_int_equal(nbd_errno(-EFBIG), NBD_ENOSPC);
	assert_int_equal(nbd_errno(-EPERM), NBD_EPERM);
	assert_int_equal(nbd_errno(-EROFS), NBD_EPERM);
	assert_int_equal(nbd_errno(-ENOMEM), NBD_ENOMEM);
	assert_int_equal(nbd_errno(-ENOENT), NBD_EIO);
	assert_int_equal(nbd_errno(-EBADMSG), NBD_EIO);
}

/* ---- nbd_serve over a unix socket */

struct served {
	const struct disk *d;
	struct nbd_server_opts o;
	volatile sig_atomic_t stop;
	pthread_t th;
	int ret;
};

static void *serve_main(void *arg)
{
	struct served *sv = arg;

	sv->ret = nbd_serve(sv->d, &sv->o, &sv->stop);
	return NULL;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct timeval tv = { 60, 0 }; /* a bound on an answer, not a timing check */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	strcpy(a.sun_path, path);
	for (int i = 0; i < 6000; i++) { /* 60 s: a state, waited for generously */
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			return fd;
		}
		usleep(10000);
	}
	fail_msg("cannot connect to %s", path);
	return -1;
}

/* on_listen: called once, when a connection to the socket already succeeds. */
struct listen_probe {
	const char *path;
	int calls, connected;
	volatile sig_atomic_t *stop;
};

static void probe_on_listen(void *arg)
{
	struct listen_probe *p = arg;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	p->calls++;
	strcpy(a.sun_path, p->path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
		p->connected++;
	if (fd >= 0)
		close(fd);
	*p->stop = 1;
}

static void test_serve_on_listen(void **state)
{
	struct fixture *f = *state;
	char dir[PATH_MAX], path[PATH_MAX];
	struct served sv = { .d = &f->t.d };
	struct listen_probe probe = { .path = path, .stop = &sv.stop };

	tmpdir_make(dir);
	path_fmt(path, "%s/nbd.sock", dir);
	sv.o.unix_path = path;
	sv.o.on_listen = probe_on_listen;
	sv.o.on_listen_arg = &probe;
	assert_int_equal(nbd_serve(&f->t.d, &sv.o, &sv.stop), 0);
	assert_int_equal(probe.calls, 1);
	assert_int_equal(probe.connected, 1);
	/* no callback when it cannot listen, nor for a disk that is not one */
	assert_int_equal(nbd_serve(NULL, &sv.o, &sv.stop), -EINVAL);
	assert_int_equal(probe.calls, 1);
	write_file(path, "stale", 5);
	probe.calls = 0;
	sv.stop = 0;
	assert_int_equal(nbd_serve(&f->t.d, &sv.o, &sv.stop), -EADDRINUSE);
	assert_int_equal(probe.calls, 0);
	rm_rf(dir);
}

static void test_serve_unix(void **state)
{
	struct fixture *f = *state;
	char dir[PATH_MAX], path[PATH_MAX];
	struct served sv = { .d = &f->t.d };
	struct session s;
	int fd[3];
	uint8_t w[4096], r[4096];

	tmpdir_make(dir);
	path_fmt(path, "%s/nbd.sock", dir);
	write_file(path, "stale", 5); /* not a socket: refused */
	sv.o.unix_path = path;
	assert_int_equal(nbd_serve(&f->t.d, &sv.o, &sv.stop), -EADDRINUSE);
	unlink(path);

	sv.o.max_conns = 3;
	assert_int_equal(pthread_create(&sv.th, NULL, serve_main, &sv), 0);
	/* three clients at once, each writes its block; the others see it after a flush */
	for (int i = 0; i < 3; i++) {
		fd[i] = unix_connect(path);
		c_connect(fd[i], i == 1, i == 1, i == 1, &s);
		assert_true(s.tflags & NBD_FLAG_CAN_MULTI_CONN);
	}
	{
		/* a fourth is refused while three are connected */
		int extra = unix_connect(path);

		c_expect_eof(extra);
		close(extra);
	}
	for (int i = 0; i < 3; i++) {
		memset(w, 'a' + i, sizeof(w));
		c_req(fd[i], 0, NBD_CMD_WRITE, 1, (uint64_t)i * 4096, 4096, w);
		assert_int_equal(c_simple(fd[i], 1, NULL, 0), 0);
	}
	c_req(fd[0], 0, NBD_CMD_FLUSH, 2, 0, 0, NULL);
	assert_int_equal(c_simple(fd[0], 2, NULL, 0), 0);
	for (int i = 0; i < 3; i++) {
		c_req(fd[2], 0, NBD_CMD_READ, 3, (uint64_t)i * 4096, 4096, NULL);
		assert_int_equal(c_simple(fd[2], 3, r, 4096), 0);
		memset(w, 'a' + i, sizeof(w));
		assert_memory_equal(r, w, 4096);
	}
	/* one client leaves; its place is free again */
	c_req(fd[0], 0, NBD_CMD_DISC, 4, 0, 0, NULL);
	c_expect_eof(fd[0]);
	close(fd[0]);
	fd[0] = -1;
	for (int tries = 0; fd[0] < 0 && tries < 3000; tries++) { /* up to 60 s */
		uint8_t h[18];
		int t = unix_connect(path);

		if (recv(t, h, sizeof(h), MSG_WAITALL) == (ssize_t)sizeof(h)) {
			be32_put(h, NBD_FLAG_C_FIXED_NEWSTYLE);
			c_send(t, h, 4);
			fd[0] = t;
		} else {
			close(t); /* refused: the old thread was not reaped yet */
			usleep(20000);
		}
	}
	assert_true(fd[0] >= 0);
	/* stop with clients connected, one of them mid-handshake */
	__atomic_store_n(&sv.stop, 1, __ATOMIC_RELAXED);
	pthread_join(sv.th, NULL);
	assert_int_equal(sv.ret, 0);
	for (int i = 0; i < 3; i++) {
		c_expect_eof(fd[i]);
		close(fd[i]);
	}
	assert_false(path_exists(path));
	rm_rf(dir);
}

/*
 * ---- the lazy image over NBD: how often one request walks the overlay and the layout.
 * The Makefile links this test with --wrap for the engine's lookups: the overlay's
 * (overlay_run, overlay_state) and the layout's searches (layout_*_run_at).
 */
static unsigned walk_ov, walk_layout;

uint64_t __real_overlay_run(struct overlay *ov, uint64_t block, enum ov_state *state);
enum ov_state __real_overlay_state(struct overlay *ov, uint64_t block);
size_t __real_layout_data_run_at(const struct layout *l, uint64_t pos);
size_t __real_layout_meta_run_at(const struct layout *l, uint64_t lba);

uint64_t __wrap_overlay_run(struct overlay *ov, uint64_t block, enum ov_state *state)
{
	__atomic_add_fetch(&walk_ov, 1, __ATOMIC_RELAXED);
	return __real_overlay_run(ov, block, state);
}

enum ov_state __wrap_overlay_state(struct overlay *ov, uint64_t block)
{
	__atomic_add_fetch(&walk_ov, 1, __ATOMIC_RELAXED);
	return __real_overlay_state(ov, block);
}

size_t __wrap_layout_data_run_at(const struct layout *l, uint64_t pos)
{
	__atomic_add_fetch(&walk_layout, 1, __ATOMIC_RELAXED);
	return __real_layout_data_run_at(l, pos);
}

size_t __wrap_layout_meta_run_at(const struct layout *l, uint64_t lba)
{
	__atomic_add_fetch(&walk_layout, 1, __ATOMIC_RELAXED);
	return __real_layout_meta_run_at(l, lba);
}

static void walks_reset(void)
{
	__atomic_store_n(&walk_ov, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&walk_layout, 0, __ATOMIC_RELAXED);
}

#define IMG_BLOCKS ((uint32_t)NBLK) /* the size c_connect expects */
#define CHUNK_LEN (3 * BLK + 1000)

/*
 * An image of IMG_BLOCKS blocks: metadata in block 0, data in blocks [8, 12) from one chunk
 * (two runs: 3 blocks and 1000 bytes of it at block 8, its first 1000 bytes again at byte
 * 2000 of block 11), zeros elsewhere; its store under dir. want gets its bytes.
 */
static void image_make(const char *dir, char layout[PATH_MAX], char store[PATH_MAX],
		       uint8_t *want)
{
	struct chunk_codec *codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	uint8_t digest[SHA256_LEN], *raw = malloc(CHUNK_LEN), *frame;
	size_t cap = chunk_compress_bound(CHUNK_LEN), n;
	struct layout_writer *w;
	uint64_t seed = 3;
	struct store *st;

	assert_non_null(codec);
	assert_non_null(raw);
	frame = malloc(cap);
	assert_non_null(frame);
	path_fmt(layout, "%s/img.layout", dir);
	path_fmt(store, "%s/store", dir);
	memset(want, 0, B(IMG_BLOCKS));
	prng_fill(&seed, want, BLK);
	content_make(raw, CHUNK_LEN, 4, false, digest);
	memcpy(want + B(8), raw, CHUNK_LEN);
	memcpy(want + B(11) + 2000, raw, 1000);
	assert_int_equal(store_open(store, true, &st), 0);
	assert_int_equal(chunk_compress(codec, raw, CHUNK_LEN, frame, cap, &n), 0);
	assert_int_equal(store_put(st, digest, frame, n), 0);
	assert_int_equal(store_commit(st), 0);
	store_close(st);
	assert_int_equal(layout_writer_new(layout, IMG_BLOCKS, &w), 0);
	assert_int_equal(layout_add_meta(w, 0, want, 1), 0);
	assert_int_equal(layout_add_data(w, B(8), CHUNK_LEN, digest, 0), 0);
	assert_int_equal(layout_add_data(w, B(11) + 2000, 1000, digest, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, CHUNK_LEN, NULL), 0);
	layout_writer_free(w);
	chunk_codec_free(codec);
	free(frame);
	free(raw);
}

/*
 * A structured read of the lazy image walks the overlay once (one lookup per run of equal
 * state) and searches the layout once per table; so does a block-status request. The
 * reply's chunks and bytes, and the statistics counted from that one walk.
 */
static void test_engine_one_walk(void **state)
{
	struct fixture *f = *state;
	char layout[PATH_MAX], store[PATH_MAX], ov[PATH_MAX];
	uint8_t *want = malloc(B(IMG_BLOCKS)), *got = malloc(B(IMG_BLOCKS)), w[BLK];
	struct blkd_engine_opts o = { .layout_path = layout, .store_dir = store,
				      .overlay_path = ov, .readahead = -1 };
	struct blkd_engine_stats st;
	struct blkd_engine *e;
	struct rchunks ch;
	struct session s;
	struct disk d;
	struct desc ds;
	bool done;

	assert_non_null(want);
	assert_non_null(got);
	image_make(f->dir, layout, store, want);
	path_fmt(ov, "%s/img.overlay", f->dir);
	assert_int_equal(blkd_engine_open(&o, &e, NULL, 0), 0);
	disk_engine(e, &d);
	f->x = (struct nbd_offer){ .d = &d, .name = "", .size = d.size };
	start(f);
	c_connect(f->cfd, true, true, false, &s);
	fill(w, sizeof(w), 6); /* block 40 written: the overlay has three runs */
	memcpy(want + B(40), w, BLK);
	c_req(f->cfd, 0, NBD_CMD_WRITE, 1, B(40), BLK, w);
	assert_int_equal(c_simple(f->cfd, 1, NULL, 0), 0);
	blkd_engine_get_stats(e, &st);
	assert_true(st.reads == 0);

	walks_reset();
	c_sread_chunks(f->cfd, 0, 2, 0, (uint32_t)B(IMG_BLOCKS), got, &ch);
	assert_int_equal(ch.n, 6);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_DATA, 0, B(1));
	expect_chunk(&ch, 1, NBD_REPLY_TYPE_OFFSET_HOLE, B(1), B(8));
	expect_chunk(&ch, 2, NBD_REPLY_TYPE_OFFSET_DATA, B(8), B(12));
	expect_chunk(&ch, 3, NBD_REPLY_TYPE_OFFSET_HOLE, B(12), B(40));
	expect_chunk(&ch, 4, NBD_REPLY_TYPE_OFFSET_DATA, B(40), B(41));
	expect_chunk(&ch, 5, NBD_REPLY_TYPE_OFFSET_HOLE, B(41), B(IMG_BLOCKS));
	assert_memory_equal(got, want, B(IMG_BLOCKS));
	/* one walk: the overlay's three runs asked once each, each layout table searched once */
	assert_int_equal(walk_ov, 3);
	assert_int_equal(walk_layout, 2);
	/* counted once, from that walk: one read of the whole range, every block once */
	blkd_engine_get_stats(e, &st);
	assert_true(st.reads == 1 && st.read_bytes == B(IMG_BLOCKS));
	assert_true(st.meta_hits == 1 && st.chunk_hits == 4 && st.overlay_hits == 1);
	assert_true(st.zero_hits == IMG_BLOCKS - 6);

	/* DF and an unaligned part of the range: the same walk, one chunk */
	walks_reset();
	c_sread_chunks(f->cfd, NBD_CMD_FLAG_DF, 3, 512, (uint32_t)B(12) - 1024, got, &ch);
	assert_int_equal(ch.n, 1);
	expect_chunk(&ch, 0, NBD_REPLY_TYPE_OFFSET_DATA, 512, B(12) - 512);
	assert_memory_equal(got, want + 512, B(12) - 1024);
	assert_int_equal(walk_ov, 1);
	assert_int_equal(walk_layout, 2);

	/* block status: the same walk, the same allocation */
	walks_reset();
	c_req(f->cfd, 0, NBD_CMD_BLOCK_STATUS, 4, 0, (uint32_t)B(IMG_BLOCKS), NULL);
	c_status_chunk(f->cfd, 4, &ds, &done);
	assert_true(done);
	assert_int_equal(ds.n, 6);
	assert_int_equal(ds.len[1], B(7));
	assert_int_equal(ds.flags[1], NBD_STATE_HOLE | NBD_STATE_ZERO);
	assert_int_equal(ds.len[2], B(4));
	assert_int_equal(ds.flags[2], 0);
	assert_int_equal(walk_ov, 3);
	assert_int_equal(walk_layout, 2);

	c_req(f->cfd, 0, NBD_CMD_DISC, 5, 0, 0, NULL);
	c_expect_eof(f->cfd);
	assert_int_equal(finish(f), 0);
	disk_close(&d);
	free(want);
	free(got);
}


/*
 * The watchdog: a handshake that stops half-way is cut at the deadline, a client idle in
 * the transmission phase at the idle limit; one with requests going is not.
 */
static void test_serve_deadlines(void **state)
{
	struct fixture *f = *state;
	char dir[PATH_MAX], path[PATH_MAX];
	struct served sv = { .d = &f->t.d };
	struct session s;
	uint8_t h[18], r[4096];
	int half, idle, busy;

	tmpdir_make(dir);
	path_fmt(path, "%s/nbd.sock", dir);
	sv.o.unix_path = path;
	/* 5 s, not 1 and 2: the clients below must finish their handshake and send their reads
	 * well within them on a loaded machine (a sanitizer build beside other jobs) */
	sv.o.handshake_s = 5;
	sv.o.idle_s = 5;
	assert_int_equal(pthread_create(&sv.th, NULL, serve_main, &sv), 0);
	half = unix_connect(path);
	assert_int_equal(recv(half, h, sizeof(h), MSG_WAITALL), (ssize_t)sizeof(h));
	/*
	 * half the client flags, then nothing; on a loaded machine (a sanitizer build beside
	 * other jobs) the deadline may have cut it already: that is what is tested, so a
	 * refused send is fine too
	 */
	(void)!send(half, "\0\0", 2, MSG_NOSIGNAL);
	idle = unix_connect(path);
	c_connect(idle, false, false, false, &s);
	busy = unix_connect(path);
	c_connect(busy, false, false, false, &s);
	/* a read every 100 ms for 6 s: never idle for 5 s, even with a stall of 4 s */
	for (uint64_t i = 0; i < 60; i++) {
		c_req(busy, 0, NBD_CMD_READ, i, 0, 4096, NULL);
		assert_int_equal(c_simple(busy, i, r, 4096), 0);
		usleep(100000);
	}
	c_expect_eof(half); /* cut at the deadline (SO_RCVTIMEO 60 s: not a hang) */
	c_expect_eof(idle);
	c_req(busy, 0, NBD_CMD_READ, 99, 0, 4096, NULL);
	assert_int_equal(c_simple(busy, 99, r, 4096), 0);
	__atomic_store_n(&sv.stop, 1, __ATOMIC_RELAXED);
	pthread_join(sv.th, NULL);
	assert_int_equal(sv.ret, 0);
	c_expect_eof(busy);
	close(half);
	close(idle);
	close(busy);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hello_and_bad_client_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_probe_and_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_name_old_style, setup, teardown),
		cmocka_unit_test_setup_teardown(test_info_go_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_and_malformed_options, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_option_hostile, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_contexts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commands_simple, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commands_structured, setup, teardown),
		cmocka_unit_test_setup_teardown(test_block_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_structured_holes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only_refuses_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pipelined, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_vanishes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_raw_disk_alone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_disk_capabilities, setup, teardown),
		cmocka_unit_test(test_errno_map),
		cmocka_unit_test_setup_teardown(test_serve_unix, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_on_listen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_serve_deadlines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_engine_one_walk, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	log_set_level(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
