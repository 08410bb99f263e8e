/* SPDX-License-Identifier: MIT */
/* lazyblk push (push.h): verify-and-upload workers on a workq. */
#include "push.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/clock.h"
#include "../../common/grow.h"
#include "../../common/workq.h"
#include "../../common/why.h"
#include "../chunk.h"
#include "../store.h"
#include "lease.h"

#define PUSH_THREADS_MAX 64

struct push_item {
	struct workq_item item;             /* first: the item is the chunk */
	const uint8_t *d;
};

struct push_ctx {
	const struct cas_push_opts *o;
	struct store *s;
	struct remote *r;
	struct lease *lease;                /* http stores: ours, while we push (lease.h) */
	uint8_t (*all)[SHA256_LEN];         /* every chunk of the store (no set given) */
	size_t n_all, cap_all;
	uint64_t total;
	uint64_t uploaded, present, bytes, done; /* atomic */
	pthread_mutex_t lock;               /* err and why */
	int err;                            /* the first failure (read atomically) */
	char *why;
	size_t why_len;
};

/*
 * Keep the first failure and its reason (fmt NULL: none, strerror is printed): the workers
 * fail at once, the first one to get here is said.
 */
static void push_fail(struct push_ctx *x, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void push_fail(struct push_ctx *x, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&x->lock);
	if (!x->err) {
		__atomic_store_n(&x->err, err, __ATOMIC_RELAXED);
		if (fmt && x->why_len) {
			va_start(ap, fmt);
			vsnprintf(x->why, x->why_len, fmt, ap);
			va_end(ap);
		}
	}
	pthread_mutex_unlock(&x->lock);
}

static int collect_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct push_ctx *x = arg;

	(void)path;
	if (!grow_from((void **)&x->all, &x->cap_all, x->n_all + 1, sizeof(*x->all), 1024))
		return -ENOMEM;
	memcpy(x->all[x->n_all++], d, SHA256_LEN);
	return 0;
}

/* One uploader thread's decompression state, reused from chunk to chunk. */
struct push_scratch {
	struct chunk_codec *codec;
	uint8_t *buf;
	size_t cap;
};

static void *scratch_new(void *ctx)
{
	struct push_scratch *w = calloc(1, sizeof(*w));

	(void)ctx;
	if (w && !(w->codec = chunk_codec_new(0))) {
		free(w);
		w = NULL;
	}
	return w;
}

static void scratch_free(void *state, void *ctx)
{
	struct push_scratch *w = state;

	(void)ctx;
	if (!w)
		return;
	chunk_codec_free(w->codec);
	free(w->buf);
	free(w);
}

/* Verify the frame in memory: 0, or -errno with why (or why left empty). */
static int push_verify(struct push_scratch *w, const uint8_t d[SHA256_LEN], const uint8_t *frame,
		       size_t len, char *why, size_t why_len)
{
	uint64_t want;
	size_t n;

	if (chunk_content_size(frame, len, &want) || want > CHUNK_SIZE_MAX)
		return why_set(why, why_len, -EBADMSG, "not a valid zstd chunk");
	if (want > w->cap) {
		uint8_t *nb = realloc(w->buf, want);

		if (!nb)
			return -ENOMEM;
		w->buf = nb;
		w->cap = want;
	}
	return chunk_verify(w->codec, d, frame, len, w->buf, w->cap, &n, why, why_len);
}

/* Read the chunk once, verify it in memory (a corrupt chunk is never pushed), upload it. */
static int push_one(struct push_ctx *x, struct push_scratch *w, const uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];
	char why[WHY_MAX] = "";
	uint8_t *frame;
	size_t len;
	int ret;

	sha256_to_hex(d, hex);
	ret = store_read(x->s, d, &frame, &len);
	if (ret == -ENOENT) {
		push_fail(x, ret, "chunk %s is not in the store", hex);
		return ret;
	}
	if (ret) {
		push_fail(x, ret, "chunk %s: %s", hex,
			  ret == -EBADMSG ? "not a regular file in the store" : strerror(-ret));
		return ret;
	}
	ret = push_verify(w, d, frame, len, why, sizeof(why));
	if (ret) {
		free(frame);
		push_fail(x, ret, "chunk %s is corrupt in the store (%s): not pushed", hex,
			  why[0] ? why : strerror(-ret));
		return ret;
	}
	ret = remote_put(x->r, d, frame, len, why, sizeof(why));
	free(frame);
	if (ret == 1) {
		__atomic_add_fetch(&x->uploaded, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&x->bytes, len, __ATOMIC_RELAXED);
	} else if (ret == 0) {
		__atomic_add_fetch(&x->present, 1, __ATOMIC_RELAXED);
	} else if (why[0]) {
		push_fail(x, ret, "%s", why);
	} else {
		push_fail(x, ret, NULL);
	}
	return ret < 0 ? ret : 0;
}

static void push_run(struct workq_item *it, void *ctx, void *state)
{
	struct push_ctx *x = ctx;
	const struct push_item *pi = (const struct push_item *)it;
	uint64_t done;

	if (__atomic_load_n(&x->err, __ATOMIC_RELAXED))
		return; /* stopping at the first failure */
	if (x->o->cancel && __atomic_load_n(x->o->cancel, __ATOMIC_RELAXED))
		push_fail(x, -ECANCELED, "interrupted");
	else if (state)
		push_one(x, state, pi->d);
	else
		push_fail(x, -ENOMEM, "out of memory");
	done = __atomic_add_fetch(&x->done, 1, __ATOMIC_RELAXED);
	if (x->o->progress)
		x->o->progress(x->o->progress_arg, done, x->total);
}

/* Every chunk of the set on a workq of the remote's concurrency. */
static int push_all(struct push_ctx *x, const uint8_t (*chunks)[SHA256_LEN], size_t n)
{
	static const struct workq_local wl = { scratch_new, scratch_free, push_run };
	const struct remote_opts *ro = &x->o->remote;
	unsigned threads = ro->concurrency ? ro->concurrency : REMOTE_CONCURRENCY_DEFAULT;
	struct push_item *items;
	struct workq *q;
	int ret = 0;

	if (!n)
		return 0;
	if (threads > PUSH_THREADS_MAX)
		threads = PUSH_THREADS_MAX;
	items = calloc(n, sizeof(*items));
	if (!items) {
		push_fail(x, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	ret = workq_new_local(threads < n ? threads : (unsigned)n, 0, &wl, x, &q);
	if (ret) {
		free(items);
		push_fail(x, ret, "cannot start the uploads: %s", strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < n && !ret; i++) {
		items[i].d = chunks[i];
		ret = workq_push(q, &items[i].item);
	}
	workq_free(q); /* runs what is queued (or skips it after a failure) */
	free(items);
	if (ret)
		push_fail(x, ret, "%s", strerror(-ret));
	return x->err;
}

int cas_push_held(struct lease *lease, const char *url, char *why, size_t why_len)
{
	char lw[768];
	int ret = lease_check(lease, lw, sizeof(lw));

	if (ret)
		snprintf(why, why_len, "%s: the push lost its lease on the store (%s): a gc may have "
			 "deleted chunks it found there; nothing published: push again", url, lw);
	return ret;
}

static bool push_cancelled(const struct push_ctx *x)
{
	return x->o->cancel && __atomic_load_n(x->o->cancel, __ATOMIC_RELAXED);
}

/*
 * With our lease written, wait while a gc of the store runs (lease.h): it may be deleting
 * chunks that a HEAD would find there now. Polled every second (our lease's own thread keeps
 * it written).
 */
static int push_wait_gc(struct push_ctx *x)
{
	struct lease_seen seen;
	char lw[1024];
	bool said = false;
	int ret;

	for (;;) {
		ret = lease_others(x->lease, LEASE_GC, false, &seen, lw, sizeof(lw));
		if (ret) {
			push_fail(x, ret, "%s", lw);
			return ret;
		}
		if (!seen.live)
			return 0;
		if (!said)
			note_emit(&x->o->notes, NOTE_NOTICE, "%s: waiting for a gc of the store to "
				  "finish (leases/%s, written %llds ago)", x->o->remote.url, seen.name,
				  (long long)seen.age);
		said = true;
		for (int i = 0; i < 10 && !push_cancelled(x); i++)
			nanosleep(&(struct timespec){ .tv_nsec = 100000000L }, NULL);
		if (push_cancelled(x)) {
			push_fail(x, -ECANCELED, "interrupted");
			return -ECANCELED;
		}
		ret = cas_push_held(x->lease, x->o->remote.url, lw, sizeof(lw));
		if (ret) {
			push_fail(x, ret, "%s", lw);
			return ret;
		}
	}
}

static int push_open(struct push_ctx *x)
{
	const struct cas_push_opts *o = x->o;
	struct remote_opts ro = o->remote;
	char sw[8192];
	char why[WHY_MAX] = "";
	int ret;

	ret = store_open(o->store_dir, false, &x->s);
	if (ret && store_open_why(ret, o->store_dir, false, sw, sizeof(sw))) {
		push_fail(x, ret, "%s", sw);
		return ret;
	}
	if (ret) {
		push_fail(x, ret, "%s: %s", o->store_dir,
			  ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
					 : strerror(-ret));
		return ret;
	}
	if (!o->chunks) {
		ret = store_foreach(x->s, collect_one, x);
		if (ret) {
			push_fail(x, ret, "%s: %s", o->store_dir, strerror(-ret));
			return ret;
		}
	}
	ro.push = true;
	ret = remote_open(&ro, &x->r, why, sizeof(why));
	if (ret) {
		push_fail(x, ret, "%s: %s", ro.url, why[0] ? why : strerror(-ret));
		return ret;
	}
	/* a chunk index never replaces an image (or anything else) under the tag */
	if (!o->publish && (ret = remote_publish_check(x->r, sw, sizeof(sw)))) {
		push_fail(x, ret, "%s", sw);
		return ret;
	}
	ret = lease_take(&ro, LEASE_PUSH, &x->lease, sw, sizeof(sw));
	if (ret)
		push_fail(x, ret, "%s", sw);
	else if (x->lease)
		ret = push_wait_gc(x);
	return ret;
}

int cas_push(const struct cas_push_opts *o, struct cas_push_stats *st, char *why,
	     size_t why_len)
{
	struct push_ctx x = { .o = o, .why = why, .why_len = why_len };
	const uint8_t (*chunks)[SHA256_LEN];
	char lw[1024];
	struct timespec t0;
	size_t n;
	int ret;

	memset(st, 0, sizeof(*st));
	if (why_len)
		why[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_mutex_init(&x.lock, NULL);
	ret = push_open(&x);
	if (!ret) {
		chunks = o->chunks ? o->chunks : (const uint8_t (*)[SHA256_LEN])x.all;
		n = o->chunks ? o->n_chunks : x.n_all;
		x.total = n;
		ret = push_all(&x, chunks, n);
	}
	if (!ret && (ret = cas_push_held(x.lease, o->remote.url, lw, sizeof(lw))))
		push_fail(&x, ret, "%s", lw);
	if (!ret) {
		lw[0] = '\0';
		ret = o->publish ? o->publish(o->publish_arg, x.r, x.lease, lw, sizeof(lw))
				 : remote_publish(x.r, lw, sizeof(lw));
		if (ret && lw[0])
			push_fail(&x, ret, "%s", lw);
		else if (ret == -ENOMEM)
			push_fail(&x, ret, "%s: publishing: out of memory", o->remote.url);
		else if (ret)
			push_fail(&x, ret, NULL);
	}
	if (!ret) {
		st->chunks = x.total;
		st->uploaded = x.uploaded;
		st->uploaded_bytes = x.bytes;
		st->present = x.present;
		st->seconds = clock_ms_since(&t0) / 1e3;
	}
	lease_drop(x.lease);
	remote_close(x.r);
	store_close(x.s);
	free(x.all);
	pthread_mutex_destroy(&x.lock);
	return ret;
}
