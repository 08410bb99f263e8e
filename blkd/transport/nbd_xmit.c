/* SPDX-License-Identifier: MIT */
/*
 * The NBD transmission phase of one connection. The connection's thread receives
 * requests, checks each one completely before anything touches the disk (the magic,
 * the command, its flags, alignment to 512 bytes, the range, the payload limit,
 * read-only, what the disk offers), reads a write's payload, and queues the request for
 * a few workers that call the disk (blkd/disk/disk.h) and send the reply. Replies may go
 * out in any order (the client matches them by handle); each reply is sent whole under
 * the connection's send lock. A request with an error decided on arrival is still queued,
 * so its reply is ordered like any other.
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

#include "../../common/log.h"
#include "../../common/workq.h"
#include "nbd_conn.h"
#include "nbd_proto.h"

struct xreq {
	struct workq_item link;    /* first: the queue's item is the request */
	uint16_t flags, type;
	uint64_t handle, off;
	uint32_t len;
	uint32_t err;              /* NBD error decided on arrival (0: run it) */
	const char *why;           /* its message */
	uint8_t *buf;              /* a write's payload */
	size_t cost;               /* payload bytes charged to the in-flight budget */
	bool busy;                 /* counted in flight for the watchdog (nbd_watch.busy) */
};

/* A write's payload is taken in pieces this large; each counts as activity. */
#define PAYLOAD_PIECE (64u << 10)

struct xmit {
	struct nbd_session *s;
	pthread_mutex_t lock;      /* the budget */
	pthread_cond_t room;
	unsigned inflight;         /* queued or being handled */
	size_t inflight_bytes;
	pthread_mutex_t send_lock;
	bool dead;                 /* a send failed: the connection is going down */
	struct workq *workers;     /* NULL: none could start, requests run in the receiver */
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
	be32_put(h, NBD_SIMPLE_REPLY_MAGIC);
	be32_put(h + 4, err);
	be64_put(h + 8, handle);
}

static void put_chunk(uint8_t h[NBD_CHUNK_HDR_SIZE], uint16_t flags, uint16_t type,
		      uint64_t handle, uint32_t len)
{
	be32_put(h, NBD_STRUCTURED_REPLY_MAGIC);
	be16_put(h + 4, flags);
	be16_put(h + 6, type);
	be64_put(h + 8, handle);
	be32_put(h + 16, len);
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
		be32_put(h + NBD_CHUNK_HDR_SIZE, err);
		be16_put(h + NBD_CHUNK_HDR_SIZE + 4, (uint16_t)mlen);
		iov[0].iov_len = sizeof(h);
		iov[1].iov_base = (void *)why;
		iov[1].iov_len = mlen;
	}
	pthread_mutex_lock(&x->send_lock);
	send_locked(x, iov, 2);
	pthread_mutex_unlock(&x->send_lock);
}

/* ---- commands */

/* ---- reads */

static void read_simple(struct xmit *x, const struct xreq *r)
{
	uint8_t h[NBD_SIMPLE_REPLY_SIZE];
	struct iovec iov[2] = { { h, sizeof(h) }, { NULL, r->len } };
	uint8_t *buf = malloc(r->len ? r->len : 1);
	int ret = buf ? disk_read(x->s->x->d, r->off, r->len, buf) : -ENOMEM;

	if (ret) {
		free(buf);
		reply_status(x, r, nbd_errno(ret), strerror(-ret));
		return;
	}
	put_simple(h, 0, r->handle);
	iov[1].iov_base = buf;
	pthread_mutex_lock(&x->send_lock);
	send_locked(x, iov, 2);
	pthread_mutex_unlock(&x->send_lock);
	free(buf);
}

/*
 * A structured read is planned while the disk reads it, from the allocation its one walk
 * reports (disk_read_sparse): consecutive segments, each a hole (sent as OFFSET_HOLE, its
 * bytes never read nor written) or data (sent as OFFSET_DATA from where it lies in the
 * read's buffer).
 */
struct rseg {
	uint64_t off;
	uint32_t len;
	bool hole;
};

struct rplan {
	uint64_t start, pos, end;  /* the request is [start, end); planned up to pos */
	uint8_t *buf;              /* the request's bytes, buf[0] at start */
	uint32_t n;
	struct rseg seg[NBD_READ_MAX_CHUNKS];
};

/* Segment g becomes data: the disk left its zeros unwritten, so they are written here. */
static void seg_to_data(struct rplan *p, struct rseg *g)
{
	if (g->hole)
		memset(p->buf + (g->off - p->start), 0, g->len);
	g->hole = false;
}

/* The last segment, a hole too short to stand alone, becomes data (merged left). */
static void plan_fold(struct rplan *p)
{
	struct rseg *last = &p->seg[p->n - 1];

	seg_to_data(p, last);
	if (p->n > 1 && !last[-1].hole) {
		last[-1].len += last->len;
		p->n--;
	}
}

static bool plan_short_hole(const struct rplan *p)
{
	return p->n && p->seg[p->n - 1].hole && p->seg[p->n - 1].len < NBD_READ_MIN_HOLE;
}

/* Append [p->pos, p->pos + len) (the caller checked there is a slot or a merge). */
static void plan_push(struct rplan *p, uint64_t len, bool hole)
{
	if (!hole && plan_short_hole(p))
		plan_fold(p);
	if (p->n && p->seg[p->n - 1].hole == hole)
		p->seg[p->n - 1].len += (uint32_t)len;
	else
		p->seg[p->n++] = (struct rseg){ p->pos, (uint32_t)len, hole };
	p->pos += len;
}

/* disk_extent_fn over the request's range, as the disk reads it. */
static int plan_add(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	const uint32_t zero = DISK_STATUS_HOLE | DISK_STATUS_ZERO;
	struct rplan *p = arg;
	bool hole = (flags & zero) == zero;

	if (off != p->pos)
		return 1; /* not consecutive: the rest is read as data */
	if (len > p->end - off)
		len = p->end - off;
	if (!len)
		return 0;
	if (p->n == NBD_READ_MAX_CHUNKS - 1 && p->seg[p->n - 1].hole != hole &&
	    !(!hole && plan_short_hole(p)))
		return 1; /* one chunk left: the rest is data */
	plan_push(p, len, hole);
	return p->pos == p->end;
}

/*
 * Read r into p->buf and plan its chunks; *nok: the segments before the first failure.
 * A read that fails stops at the segment holding where it failed: the data extent after
 * the last one the disk told, so pushed as data here.
 */
static int plan_read(const struct disk *d, const struct xreq *r, struct rplan *p, uint32_t *nok)
{
	bool df = r->flags & NBD_CMD_FLAG_DF;
	int ret;

	p->start = p->pos = r->off;
	p->end = r->off + r->len;
	p->n = 0;
	ret = disk_read_sparse(d, r->off, r->len, p->buf, plan_add, p);
	if (p->pos < p->end)
		plan_push(p, p->end - p->pos, false); /* read whole by the disk, or failed */
	else if (!ret && p->n > 1 && plan_short_hole(p))
		plan_fold(p);
	if (df && p->n > 1) { /* one content chunk: zeros included as data */
		for (uint32_t i = 0; i < p->n; i++)
			seg_to_data(p, &p->seg[i]);
		p->seg[0] = (struct rseg){ r->off, r->len, false };
		p->n = 1;
	}
	*nok = ret ? p->n - 1 : p->n;
	return ret;
}

/* The chunks of a structured read. */
struct rreply {
	struct rplan plan;
	uint8_t hdr[NBD_READ_MAX_CHUNKS][NBD_CHUNK_HDR_SIZE + 12];
	uint8_t err[NBD_CHUNK_HDR_SIZE + 6], err_off[8];
	struct iovec iov[2 * NBD_READ_MAX_CHUNKS + 3];
};

/* Segments [0, nok) as content chunks, then (ret != 0) an ERROR_OFFSET chunk; one send. */
static void send_segments(struct xmit *x, const struct xreq *r, struct rreply *rr,
			  uint32_t nok, int ret)
{
	const struct rplan *p = &rr->plan;
	const char *why = ret ? strerror(-ret) : NULL;
	int n = 0;

	for (uint32_t i = 0; i < nok; i++) {
		const struct rseg *g = &p->seg[i];
		uint16_t flags = !ret && i + 1 == nok ? NBD_REPLY_FLAG_DONE : 0;
		uint8_t *h = rr->hdr[i];

		be64_put(h + NBD_CHUNK_HDR_SIZE, g->off);
		if (g->hole) {
			put_chunk(h, flags, NBD_REPLY_TYPE_OFFSET_HOLE, r->handle, 12);
			be32_put(h + NBD_CHUNK_HDR_SIZE + 8, g->len);
			rr->iov[n++] = (struct iovec){ h, NBD_CHUNK_HDR_SIZE + 12 };
			continue;
		}
		put_chunk(h, flags, NBD_REPLY_TYPE_OFFSET_DATA, r->handle, 8 + g->len);
		rr->iov[n++] = (struct iovec){ h, NBD_CHUNK_HDR_SIZE + 8 };
		rr->iov[n++] = (struct iovec){ p->buf + (g->off - p->start), g->len };
	}
	if (ret) {
		/* the failed segment and the rest get no content chunk: not valid */
		size_t mlen = strlen(why);

		put_chunk(rr->err, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR_OFFSET, r->handle,
			  (uint32_t)(6 + mlen + 8));
		be32_put(rr->err + NBD_CHUNK_HDR_SIZE, nbd_errno(ret));
		be16_put(rr->err + NBD_CHUNK_HDR_SIZE + 4, (uint16_t)mlen);
		be64_put(rr->err_off, p->seg[nok].off);
		rr->iov[n++] = (struct iovec){ rr->err, sizeof(rr->err) };
		rr->iov[n++] = (struct iovec){ (void *)why, mlen };
		rr->iov[n++] = (struct iovec){ rr->err_off, sizeof(rr->err_off) };
	}
	pthread_mutex_lock(&x->send_lock);
	send_locked(x, rr->iov, n);
	pthread_mutex_unlock(&x->send_lock);
}

/*
 * Structured replies: holes as OFFSET_HOLE chunks (not read), data as OFFSET_DATA chunks,
 * in order of offset, all sent at once after the read is done. A read that fails before
 * any chunk is ready is one ERROR chunk; one that fails later sends the chunks before the
 * failing data segment, then ERROR_OFFSET at its first byte.
 */
static void read_structured(struct xmit *x, const struct xreq *r)
{
	struct rreply *rr;
	uint32_t nok;
	int ret;

	if (!r->len) { /* nothing to read: a content chunk must describe at least one byte */
		uint8_t h[NBD_CHUNK_HDR_SIZE];
		struct iovec iov = { h, sizeof(h) };

		put_chunk(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_NONE, r->handle, 0);
		pthread_mutex_lock(&x->send_lock);
		send_locked(x, &iov, 1);
		pthread_mutex_unlock(&x->send_lock);
		return;
	}
	rr = malloc(sizeof(*rr));
	if (rr)
		rr->plan.buf = malloc(r->len);
	if (!rr || !rr->plan.buf) {
		free(rr);
		reply_status(x, r, NBD_ENOMEM, strerror(ENOMEM));
		return;
	}
	ret = plan_read(x->s->x->d, r, &rr->plan, &nok);
	if (ret && !nok)
		reply_status(x, r, nbd_errno(ret), strerror(-ret));
	else
		send_segments(x, r, rr, nok, ret);
	free(rr->plan.buf);
	free(rr);
}

static void do_read(struct xmit *x, const struct xreq *r)
{
	if (x->s->structured)
		read_structured(x, r);
	else
		read_simple(x, r);
}

/* One context's block-status chunk payload: context id, then (length, flags) pairs. */
struct extents {
	uint8_t *p;                /* 4 + 8 * max bytes */
	uint32_t n, max;
	enum nbd_ctx ctx;
};

static int extent_add(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	const uint64_t most = UINT32_MAX - (DISK_BLOCK - 1); /* a u32 on the wire, aligned */
	struct extents *ex = arg;
	bool cut = len > most;
	uint32_t f = 0;
	uint8_t *d;

	(void)off;
	if (ex->ctx == NBD_CTX_ALLOCATION)
		f = (flags & DISK_STATUS_HOLE ? NBD_STATE_HOLE : 0) |
		    (flags & DISK_STATUS_ZERO ? NBD_STATE_ZERO : 0);
	else
		f = flags & DISK_STATUS_DIRTY ? 1u : 0;
	if (!len)
		return 0;
	if (cut)
		len = most; /* and stop there: descriptors must stay consecutive */
	if (ex->n) { /* the same flags as the last one: extend it */
		d = ex->p + 4 + 8 * (size_t)(ex->n - 1);
		if (be32_get(d + 4) == f && be32_get(d) + len <= most) {
			be32_put(d, be32_get(d) + (uint32_t)len);
			return cut ? 1 : 0;
		}
	}
	if (ex->n == ex->max)
		return 1; /* enough: the client asks again from where this ends */
	d = ex->p + 4 + 8 * (size_t)ex->n++;
	be32_put(d, (uint32_t)len);
	be32_put(d + 4, f);
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
		be32_put(ex[c].p, (uint32_t)c + 1);
		ret = disk_block_status(x->s->x->d, (enum disk_ctx)c, r->off, r->len, extent_add,
					&ex[c]);
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
	const struct disk *d = x->s->x->d;
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
		ret = disk_write(d, r->off, r->len, r->buf, fua);
		break;
	case NBD_CMD_FLUSH:
		ret = disk_flush(d);
		break;
	case NBD_CMD_TRIM:
		ret = disk_discard(d, r->off, r->len);
		if (!ret && fua)
			ret = disk_flush(d);
		break;
	case NBD_CMD_WRITE_ZEROES:
		/* NO_HOLE: the disk keeps the range allocated where it can */
		ret = disk_write_zeroes(d, r->off, r->len, !(r->flags & NBD_CMD_FLAG_NO_HOLE));
		if (!ret && fua)
			ret = disk_flush(d);
		break;
	}
	reply_status(x, r, ret ? nbd_errno(ret) : 0, ret ? strerror(-ret) : NULL);
}

/* ---- checks on arrival */

/* Record why r fails (its reply says so without the disk being asked). */
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
	if ((r->type == NBD_CMD_TRIM && !s->x->d->can_discard) ||
	    (r->type == NBD_CMD_WRITE_ZEROES && !s->x->d->can_write_zeroes))
		return reject(r, NBD_EINVAL, "not supported by this export");
	if (r->type == NBD_CMD_FLUSH)
		return 0; /* offset and length are reserved */
	if ((r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE) && r->len > NBD_MAX_PAYLOAD)
		return reject(r, NBD_EINVAL, "length over the 32 MiB maximum payload");
	if (r->off % BLKD_SECTOR || r->len % BLKD_SECTOR)
		return reject(r, NBD_EINVAL, "offset or length not a multiple of 512");
	if (r->off > s->x->size || r->len > s->x->size - r->off)
		return reject(r, writes && r->type != NBD_CMD_TRIM ? NBD_ENOSPC : NBD_EINVAL,
			      "beyond the end of the disk");
	return 0;
}

/* ---- the queue */

static void done(struct xmit *x, struct xreq *r)
{
	if (r->busy)
		nbd_watch_touch(x->s, -1);
	pthread_mutex_lock(&x->lock);
	x->inflight--;
	x->inflight_bytes -= r->cost;
	pthread_cond_signal(&x->room);
	pthread_mutex_unlock(&x->lock);
	free(r->buf);
	free(r);
}

static void worker(struct workq_item *it, void *arg)
{
	struct xmit *x = arg;
	struct xreq *r = (struct xreq *)it;

	handle(x, r);
	done(x, r);
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

/*
 * A write's payload into buf (NULL: read and dropped), in pieces: a client sending it
 * keeps the connection from being idle only while whole pieces arrive.
 */
static int payload_in(struct nbd_session *s, uint8_t *buf, uint32_t len)
{
	int ret = 0;

	for (uint32_t at = 0, n; !ret && at < len; at += n) {
		n = len - at < PAYLOAD_PIECE ? len - at : PAYLOAD_PIECE;
		ret = buf ? nbd_recv(s->fd, buf + at, n) : nbd_skip(s->fd, n);
		if (ret == -ENODATA && at)
			ret = -ECONNRESET;
		nbd_watch_touch(s, 0);
	}
	return ret;
}

/* Hand r to a worker; from now on it is in flight for the watchdog. */
static void enqueue(struct xmit *x, struct xreq *r)
{
	r->busy = true;
	nbd_watch_touch(x->s, 1);
	/* unbounded: admit() already held the receiver back */
	if (!x->workers || workq_push(x->workers, &r->link)) {
		handle(x, r);
		done(x, r);
	}
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
	if (ret && nbd_cut(s))
		return ret; /* the watchdog said why */
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
	nbd_watch_touch(s, 0);
	if (be32_get(h) != NBD_REQUEST_MAGIC) {
		log_warn("nbd: client %u: bad request magic 0x%08x, disconnecting", s->id,
			 be32_get(h));
		return -EPROTO;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->flags = be16_get(h + 4);
	r->type = be16_get(h + 6);
	r->handle = be64_get(h + 8);
	r->off = be64_get(h + 16);
	r->len = be32_get(h + 24);
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
			ret = payload_in(s, NULL, r->len);
		} else {
			r->buf = malloc(r->len);
			ret = r->buf ? payload_in(s, r->buf, r->len) : -ENOMEM;
		}
		if (ret && nbd_cut(s)) {
			done(x, r);
			return ret; /* the watchdog said why */
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
	pthread_cond_init(&x.room, NULL);
	if (workq_new(NBD_CONN_WORKERS, 0, worker, &x, &x.workers))
		x.workers = NULL;
	do
		ret = receive(&x);
	while (!ret);
	workq_free(x.workers); /* runs what is queued (DISC asks for that), then joins */
	pthread_cond_destroy(&x.room);
	pthread_mutex_destroy(&x.send_lock);
	pthread_mutex_destroy(&x.lock);
	return ret == 1 ? 0 : ret;
}
