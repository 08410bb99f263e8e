/* SPDX-License-Identifier: MIT */
/*
 * The NBD transmission phase of one connection. The connection's thread receives
 * requests, checks each one completely before anything touches the engine (the magic,
 * the command, its flags, alignment to 512 bytes, the range, the payload limit,
 * read-only), reads a write's payload, and queues the request for a few workers that
 * call the engine and send the reply. Replies may go out in any order (the client
 * matches them by handle); each reply is sent whole under the connection's send lock.
 * A request with an error decided on arrival is still queued, so its reply is ordered
 * like any other.
 *
 * Requests in flight are bounded in number and in payload bytes; the receiver waits for
 * room before it reads the next payload. NBD_CMD_DISC, a closed or broken connection,
 * or a protocol violation end the receive loop; the workers then finish what is queued
 * (DISC asks for that) and exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../common/log.h"
#include "nbd_conn.h"
#include "nbd_proto.h"

struct xreq {
	struct xreq *next;
	uint16_t flags, type;
	uint64_t handle, off;
	uint32_t len;
	uint32_t err;              /* NBD error decided on arrival (0: run it) */
	const char *why;           /* its message */
	uint8_t *buf;              /* a write's payload */
	size_t cost;               /* payload bytes charged to the in-flight budget */
};

struct xmit {
	struct nbd_session *s;
	pthread_mutex_t lock;      /* the queue and the budget */
	pthread_cond_t work, room;
	struct xreq *head, *tail;
	unsigned inflight;         /* queued or being handled */
	size_t inflight_bytes;
	bool closing;              /* no more requests come: workers drain and exit */
	pthread_mutex_t send_lock;
	bool dead;                 /* a send failed: the connection is going down */
	pthread_t workers[NBD_CONN_WORKERS];
	unsigned nworkers;
};

uint32_t nbd_errno(int err)
{
	switch (-err) {
	case EPERM:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

/* ---- replies */

static void send_locked(struct xmit *x, struct iovec *iov, int n)
{
	int ret;

	if (x->dead)
		return;
	ret = nbd_sendv(x->s->fd, iov, n);
	if (ret) {
		__atomic_store_n(&x->dead, true, __ATOMIC_RELAXED);
		log_info("nbd: client %u: reply not sent (%s), closing", x->s->id, strerror(-ret));
		shutdown(x->s->fd, SHUT_RDWR); /* wakes the receiver */
	}
}

static void put_simple(uint8_t h[NBD_SIMPLE_REPLY_SIZE], uint32_t err, uint64_t handle)
{
	nbd_put32(h, NBD_SIMPLE_REPLY_MAGIC);
	nbd_put32(h + 4, err);
	nbd_put64(h + 8, handle);
}

static void put_chunk(uint8_t h[NBD_CHUNK_HDR_SIZE], uint16_t flags, uint16_t type,
		      uint64_t handle, uint32_t len)
{
	nbd_put32(h, NBD_STRUCTURED_REPLY_MAGIC);
	nbd_put16(h + 4, flags);
	nbd_put16(h + 6, type);
	nbd_put64(h + 8, handle);
	nbd_put32(h + 16, len);
}

/* Success without data, or an error: a simple reply, or an error chunk with a message. */
static void reply_status(struct xmit *x, const struct xreq *r, uint32_t err, const char *why)
{
	uint8_t h[NBD_CHUNK_HDR_SIZE + 6];
	struct iovec iov[2] = { { h, 0 }, { NULL, 0 } };

	if (!x->s->structured || !err) {
		put_simple(h, err, r->handle);
		iov[0].iov_len = NBD_SIMPLE_REPLY_SIZE;
	} else {
		size_t mlen = why ? strlen(why) : 0;

		put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, r->handle,
			  (uint32_t)(6 + mlen));
		nbd_put32(h + NBD_CHUNK_HDR_SIZE, err);
		nbd_put16(h + NBD_CHUNK_HDR_SIZE + 4, (uint16_t)mlen);
		iov[0].iov_len = sizeof(h);
		iov[1].iov_base = (void *)why;
		iov[1].iov_len = mlen;
	}
	pthread_mutex_lock(&x->send_lock);
	send_locked(x, iov, 2);
	pthread_mutex_unlock(&x->send_lock);
}

/* ---- commands */

static void do_read(struct xmit *x, const struct xreq *r)
{
	uint8_t h[NBD_CHUNK_HDR_SIZE + 8];
	struct iovec iov[2] = { { h, 0 }, { NULL, r->len } };
	uint8_t *buf = malloc(r->len ? r->len : 1);
	int ret = buf ? blkd_engine_read(x->s->x->e, r->off, r->len, buf) : -ENOMEM;

	if (ret) {
		free(buf);
		reply_status(x, r, nbd_errno(ret), strerror(-ret));
		return;
	}
	iov[1].iov_base = buf;
	if (!x->s->structured) {
		put_simple(h, 0, r->handle);
		iov[0].iov_len = NBD_SIMPLE_REPLY_SIZE;
	} else if (r->len) {
		put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_OFFSET_DATA, r->handle,
			  8 + r->len);
		nbd_put64(h + NBD_CHUNK_HDR_SIZE, r->off);
		iov[0].iov_len = sizeof(h);
	} else {
		/* nothing to read: a data chunk must hold at least one byte */
		put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, r->handle, 0);
		iov[0].iov_len = NBD_CHUNK_HDR_SIZE;
	}
	pthread_mutex_lock(&x->send_lock);
	send_locked(x, iov, 2);
	pthread_mutex_unlock(&x->send_lock);
	free(buf);
}

/* One context's block-status chunk payload: context id, then (length, flags) pairs. */
struct extents {
	uint8_t *p;                /* 4 + 8 * max bytes */
	uint32_t n, max;
	enum nbd_ctx ctx;
};

static int extent_add(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	const uint64_t most = UINT32_MAX - (BLKD_BLOCK - 1); /* a u32 on the wire, aligned */
	struct extents *ex = arg;
	bool cut = len > most;
	uint32_t f = 0;
	uint8_t *d;

	(void)off;
	if (ex->ctx == NBD_CTX_ALLOCATION)
		f = (flags & BLKD_STATUS_HOLE ? NBD_STATE_HOLE : 0) |
		    (flags & BLKD_STATUS_ZERO ? NBD_STATE_ZERO : 0);
	else
		f = flags & BLKD_STATUS_DIRTY ? 1u : 0;
	if (!len)
		return 0;
	if (cut)
		len = most; /* and stop there: descriptors must stay consecutive */
	if (ex->n) { /* the same flags as the last one: extend it */
		d = ex->p + 4 + 8 * (size_t)(ex->n - 1);
		if (nbd_get32(d + 4) == f && nbd_get32(d) + len <= most) {
			nbd_put32(d, nbd_get32(d) + (uint32_t)len);
			return cut ? 1 : 0;
		}
	}
	if (ex->n == ex->max)
		return 1; /* enough: the client asks again from where this ends */
	d = ex->p + 4 + 8 * (size_t)ex->n++;
	nbd_put32(d, (uint32_t)len);
	nbd_put32(d + 4, f);
	return cut || ex->n == ex->max ? 1 : 0;
}

/* One NBD_REPLY_TYPE_BLOCK_STATUS chunk per selected context, the last one DONE. */
static void do_status(struct xmit *x, const struct xreq *r)
{
	struct extents ex[NBD_CTX_COUNT] = { 0 };
	uint8_t h[NBD_CTX_COUNT][NBD_CHUNK_HDR_SIZE];
	struct iovec iov[2 * NBD_CTX_COUNT];
	int n = 0, last = -1, ret = 0;

	for (int c = 0; c < NBD_CTX_COUNT; c++)
		if (x->s->ctx[c])
			last = c;
	for (int c = 0; c < NBD_CTX_COUNT && !ret; c++) {
		if (!x->s->ctx[c])
			continue;
		ex[c].ctx = c;
		ex[c].max = r->flags & NBD_CMD_FLAG_REQ_ONE ? 1 : NBD_MAX_EXTENTS;
		ex[c].p = malloc(4 + 8 * (size_t)ex[c].max);
		if (!ex[c].p) {
			ret = -ENOMEM;
			break;
		}
		nbd_put32(ex[c].p, (uint32_t)c + 1);
		ret = blkd_engine_status(x->s->x->e, c == NBD_CTX_ALLOCATION ? BLKD_CTX_ALLOCATION
										: BLKD_CTX_DIRTY,
					 r->off, r->len, extent_add, &ex[c]);
		if (!ret && !ex[c].n) /* nothing known: one extent with no flags is always true */
			extent_add(&ex[c], r->off, r->len, 0);
		put_chunk(h[c], c == last ? NBD_REPLY_FLAG_DONE : 0, NBD_REPLY_TYPE_BLOCK_STATUS,
			  r->handle, 4 + 8 * ex[c].n);
		iov[n++] = (struct iovec){ h[c], NBD_CHUNK_HDR_SIZE };
		iov[n++] = (struct iovec){ ex[c].p, 4 + 8 * (size_t)ex[c].n };
	}
	if (ret) {
		reply_status(x, r, nbd_errno(ret), strerror(-ret));
	} else {
		pthread_mutex_lock(&x->send_lock);
		send_locked(x, iov, n);
		pthread_mutex_unlock(&x->send_lock);
	}
	for (int c = 0; c < NBD_CTX_COUNT; c++)
		free(ex[c].p);
}

static void handle(struct xmit *x, const struct xreq *r)
{
	struct blkd_engine *e = x->s->x->e;
	bool fua = r->flags & NBD_CMD_FLAG_FUA;
	int ret = 0;

	if (r->err) {
		reply_status(x, r, r->err, r->why);
		return;
	}
	switch (r->type) {
	case NBD_CMD_READ:
		do_read(x, r);
		return;
	case NBD_CMD_BLOCK_STATUS:
		do_status(x, r);
		return;
	case NBD_CMD_WRITE:
		ret = blkd_engine_write(e, r->off, r->len, r->buf, fua);
		break;
	case NBD_CMD_FLUSH:
		ret = blkd_engine_flush(e);
		break;
	case NBD_CMD_TRIM:
		ret = blkd_engine_discard(e, r->off, r->len);
		if (!ret && fua)
			ret = blkd_engine_flush(e);
		break;
	case NBD_CMD_WRITE_ZEROES:
		/* zeroed blocks are recorded as such (NO_HOLE asks nothing more of us) */
		ret = blkd_engine_write_zeroes(e, r->off, r->len);
		if (!ret && fua)
			ret = blkd_engine_flush(e);
		break;
	}
	reply_status(x, r, ret ? nbd_errno(ret) : 0, ret ? strerror(-ret) : NULL);
}

/* ---- checks on arrival */

/* Record why r fails (its reply says so without the engine being asked). */
static int reject(struct xreq *r, uint32_t err, const char *why)
{
	r->err = err;
	r->why = why;
	return -EINVAL;
}

static int check(const struct nbd_session *s, struct xreq *r)
{
	uint16_t allowed = NBD_CMD_FLAG_FUA; /* valid on every command once advertised */
	bool writes = false;

	switch (r->type) {
	case NBD_CMD_READ:
		if (s->structured)
			allowed |= NBD_CMD_FLAG_DF;
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		writes = true;
		break;
	case NBD_CMD_WRITE_ZEROES:
		writes = true;
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		break;
	case NBD_CMD_FLUSH:
		break;
	case NBD_CMD_BLOCK_STATUS:
		allowed |= NBD_CMD_FLAG_REQ_ONE;
		if (!s->structured || !(s->ctx[NBD_CTX_ALLOCATION] || s->ctx[NBD_CTX_DIRTY]))
			return reject(r, NBD_EINVAL, "no metadata context was selected");
		if (!r->len)
			return reject(r, NBD_EINVAL, "zero length");
		break;
	default:
		return reject(r, NBD_EINVAL, "unknown command");
	}
	if (r->flags & ~allowed)
		return reject(r, NBD_EINVAL, "flags not valid for this command");
	if (writes && s->x->read_only)
		return reject(r, NBD_EPERM, "the export is read-only");
	if (r->type == NBD_CMD_FLUSH)
		return 0; /* offset and length are reserved */
	if ((r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE) && r->len > NBD_MAX_PAYLOAD)
		return reject(r, NBD_EINVAL, "length over the 32 MiB maximum payload");
	if (r->off % NBD_MIN_BLOCK || r->len % NBD_MIN_BLOCK)
		return reject(r, NBD_EINVAL, "offset or length not a multiple of 512");
	if (r->off > s->x->size || r->len > s->x->size - r->off)
		return reject(r, writes && r->type != NBD_CMD_TRIM ? NBD_ENOSPC : NBD_EINVAL,
			      "beyond the end of the disk");
	return 0;
}

/* ---- the queue */

static void done(struct xmit *x, struct xreq *r)
{
	pthread_mutex_lock(&x->lock);
	x->inflight--;
	x->inflight_bytes -= r->cost;
	pthread_cond_signal(&x->room);
	pthread_mutex_unlock(&x->lock);
	free(r->buf);
	free(r);
}

static void *worker(void *arg)
{
	struct xmit *x = arg;

	for (;;) {
		struct xreq *r;

		pthread_mutex_lock(&x->lock);
		while (!x->head && !x->closing)
			pthread_cond_wait(&x->work, &x->lock);
		r = x->head;
		if (r) {
			x->head = r->next;
			if (!x->head)
				x->tail = NULL;
		}
		pthread_mutex_unlock(&x->lock);
		if (!r)
			return NULL;
		handle(x, r);
		done(x, r);
	}
}

/* Wait until r fits in the budget, then count it in. */
static void admit(struct xmit *x, struct xreq *r)
{
	pthread_mutex_lock(&x->lock);
	while (x->inflight >= NBD_CONN_MAX_INFLIGHT ||
	       (x->inflight_bytes && x->inflight_bytes + r->cost > NBD_CONN_MAX_INFLIGHT_BYTES))
		pthread_cond_wait(&x->room, &x->lock);
	x->inflight++;
	x->inflight_bytes += r->cost;
	pthread_mutex_unlock(&x->lock);
}

static void enqueue(struct xmit *x, struct xreq *r)
{
	if (!x->nworkers) {
		handle(x, r);
		done(x, r);
		return;
	}
	pthread_mutex_lock(&x->lock);
	r->next = NULL;
	if (x->tail)
		x->tail->next = r;
	else
		x->head = r;
	x->tail = r;
	pthread_cond_signal(&x->work);
	pthread_mutex_unlock(&x->lock);
}

/* ---- the receive loop */

/* Read one request; 1 on NBD_CMD_DISC, 0 when queued, -errno to drop the connection. */
static int receive(struct xmit *x)
{
	struct nbd_session *s = x->s;
	uint8_t h[NBD_REQUEST_SIZE];
	struct xreq *r;
	int ret;

	ret = nbd_recv(s->fd, h, sizeof(h));
	if (ret == -ENODATA) {
		log_info("nbd: client %u: closed without NBD_CMD_DISC", s->id);
		return ret;
	}
	if (ret) {
		if (!__atomic_load_n(&x->dead, __ATOMIC_RELAXED))
			log_warn("nbd: client %u: %s, disconnecting", s->id,
				 ret == -ECONNRESET ? "truncated request" : strerror(-ret));
		return ret;
	}
	if (nbd_get32(h) != NBD_REQUEST_MAGIC) {
		log_warn("nbd: client %u: bad request magic 0x%08x, disconnecting", s->id,
			 nbd_get32(h));
		return -EPROTO;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->flags = nbd_get16(h + 4);
	r->type = nbd_get16(h + 6);
	r->handle = nbd_get64(h + 8);
	r->off = nbd_get64(h + 16);
	r->len = nbd_get32(h + 24);
	if (r->type == NBD_CMD_DISC) {
		free(r);
		return 1;
	}
	check(s, r);
	if (r->type == NBD_CMD_WRITE && r->len > NBD_MAX_PAYLOAD) {
		/* too much to swallow: say why, then hang up */
		log_warn("nbd: client %u: write of %u bytes, disconnecting", s->id, r->len);
		reply_status(x, r, r->err, r->why);
		free(r);
		return -EPROTO;
	}
	if (!r->err && (r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE))
		r->cost = r->len;
	admit(x, r);
	if (r->type == NBD_CMD_WRITE && r->len) {
		if (r->err) {
			ret = nbd_skip(s->fd, r->len);
		} else {
			r->buf = malloc(r->len);
			ret = r->buf ? nbd_recv(s->fd, r->buf, r->len) : -ENOMEM;
		}
		if (ret) {
			bool gone = ret == -ENODATA || ret == -ECONNRESET;

			if (!__atomic_load_n(&x->dead, __ATOMIC_RELAXED))
				log_warn("nbd: client %u: %s in a write payload, disconnecting",
					 s->id, gone ? "connection closed" : strerror(-ret));
			done(x, r);
			return ret == -ENODATA ? -ECONNRESET : ret;
		}
	}
	enqueue(x, r);
	return 0;
}

int nbd_transmit(struct nbd_session *s)
{
	struct xmit x = { .s = s };
	int ret;

	pthread_mutex_init(&x.lock, NULL);
	pthread_mutex_init(&x.send_lock, NULL);
	pthread_cond_init(&x.work, NULL);
	pthread_cond_init(&x.room, NULL);
	while (x.nworkers < NBD_CONN_WORKERS &&
	       !pthread_create(&x.workers[x.nworkers], NULL, worker, &x))
		x.nworkers++;
	do
		ret = receive(&x);
	while (!ret);
	pthread_mutex_lock(&x.lock);
	x.closing = true;
	pthread_cond_broadcast(&x.work);
	pthread_mutex_unlock(&x.lock);
	for (unsigned i = 0; i < x.nworkers; i++)
		pthread_join(x.workers[i], NULL);
	pthread_cond_destroy(&x.room);
	pthread_cond_destroy(&x.work);
	pthread_mutex_destroy(&x.send_lock);
	pthread_mutex_destroy(&x.lock);
	return ret == 1 ? 0 : ret;
}
