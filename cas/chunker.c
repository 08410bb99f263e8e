/* SPDX-License-Identifier: MIT */
#include "chunker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/hash.h"
#include "../common/workq.h"
#include "chunk.h"

/* Digests already handled by this run (open addressing; empty slot = all-zero key). */
struct digest_set {
	uint8_t (*keys)[SHA256_LEN];
	size_t cap, n;
};

struct chunker {
	struct store *store;
	uint32_t chunk_size;
	int level;
	struct workq *q;           /* the jobs: buffers submitted (bounded by the pool) */

	pthread_mutex_t lock;
	pthread_cond_t cond_buf;   /* a buffer was freed */
	pthread_cond_t cond_idle;  /* a job finished */
	struct chunk_buf *bufs;    /* n_bufs, owned */
	struct chunk_buf **free_bufs;
	size_t n_free, n_bufs;
	size_t in_flight;          /* queued + running */
	int error;
	struct digest_set seen;
	struct chunker_stats stats;
};

static bool zero_digest(const uint8_t d[SHA256_LEN])
{
	for (int i = 0; i < SHA256_LEN; i++)
		if (d[i])
			return false;
	return true;
}

/* Insert; returns 1 if newly added, 0 if present, -ENOMEM. Caller holds the lock. */
static int set_add(struct digest_set *s, const uint8_t d[SHA256_LEN])
{
	if (zero_digest(d))
		return 1; /* never seen in practice; do not dedupe the sentinel */
	if ((s->n + 1) * 4 > s->cap * 3) {
		size_t ncap = s->cap ? s->cap * 2 : 1024;
		uint8_t (*nk)[SHA256_LEN] = calloc(ncap, SHA256_LEN);

		if (!nk)
			return -ENOMEM;
		for (size_t i = 0; i < s->cap; i++) {
			if (zero_digest(s->keys[i]))
				continue;
			size_t h = hash_bytes(s->keys[i], 8, 0) & (ncap - 1);

			while (!zero_digest(nk[h]))
				h = (h + 1) & (ncap - 1);
			memcpy(nk[h], s->keys[i], SHA256_LEN);
		}
		free(s->keys);
		s->keys = nk;
		s->cap = ncap;
	}
	size_t h = hash_bytes(d, 8, 0) & (s->cap - 1);

	while (!zero_digest(s->keys[h])) {
		if (memcmp(s->keys[h], d, SHA256_LEN) == 0)
			return 0;
		h = (h + 1) & (s->cap - 1);
	}
	memcpy(s->keys[h], d, SHA256_LEN);
	s->n++;
	return 1;
}

static int process(struct chunker *c, struct chunk_codec *codec, uint8_t *zbuf, size_t zcap,
		   struct chunk_buf *j)
{
	uint8_t d[SHA256_LEN];
	size_t zlen;
	int ret, fresh;

	ret = sha256_buf(j->data, j->fill, d);
	if (ret)
		return ret;
	for (size_t i = 0; i < j->n_slots; i++)
		memcpy(j->slots[i]->digest, d, SHA256_LEN);

	pthread_mutex_lock(&c->lock);
	fresh = set_add(&c->seen, d);
	pthread_mutex_unlock(&c->lock);
	if (fresh < 0)
		return fresh;
	if (fresh) {
		ret = store_has(c->store, d);
		if (ret < 0)
			return ret;
		fresh = !ret;
		if (!fresh)
			store_touch(c->store, d); /* in use again: cas gc's grace period counts anew */
	}
	if (!fresh) {
		pthread_mutex_lock(&c->lock);
		c->stats.dup_chunks++;
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	ret = chunk_compress(codec, j->data, j->fill, zbuf, zcap, &zlen);
	if (ret)
		return ret;
	ret = store_put(c->store, d, zbuf, zlen);
	if (ret)
		return ret;
	pthread_mutex_lock(&c->lock);
	c->stats.new_chunks++;
	c->stats.new_bytes += zlen;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* A worker's own compression state. */
struct chunk_worker {
	struct chunk_codec *codec;
	uint8_t *zbuf;
	size_t zcap;
};

static void *worker_new(void *ctx)
{
	struct chunker *c = ctx;
	struct chunk_worker *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->zcap = chunk_compress_bound(c->chunk_size);
	w->zbuf = malloc(w->zcap);
	w->codec = chunk_codec_new(c->level);
	if (!w->zbuf || !w->codec) {
		chunk_codec_free(w->codec);
		free(w->zbuf);
		free(w);
		return NULL;
	}
	return w;
}

static void worker_free(void *state, void *ctx)
{
	struct chunk_worker *w = state;

	(void)ctx;
	if (!w)
		return;
	chunk_codec_free(w->codec);
	free(w->zbuf);
	free(w);
}

static void job_run(struct workq_item *it, void *ctx, void *state)
{
	struct chunker *c = ctx;
	struct chunk_worker *w = state;
	struct chunk_buf *j = (struct chunk_buf *)it;
	int ret = w ? process(c, w->codec, w->zbuf, w->zcap, j) : -ENOMEM;

	pthread_mutex_lock(&c->lock);
	if (ret && !c->error)
		c->error = ret;
	j->fill = 0;
	j->n_slots = 0;
	c->free_bufs[c->n_free++] = j;
	c->in_flight--;
	pthread_cond_signal(&c->cond_buf);
	pthread_cond_broadcast(&c->cond_idle);
	pthread_mutex_unlock(&c->lock);
}

int chunker_new(struct store *s, const struct chunker_opts *o, struct chunker **out)
{
	static const struct workq_local wl = { worker_new, worker_free, job_run };
	struct chunker *c = calloc(1, sizeof(*c));
	unsigned nthreads;
	long ncpu;
	int ret;

	if (!c)
		return -ENOMEM;
	c->store = s;
	c->chunk_size = o->chunk_size ? o->chunk_size : CHUNK_SIZE_DEFAULT;
	c->level = o->level;
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	nthreads = o->threads ? o->threads : (unsigned)(ncpu > 0 ? ncpu : 1);
	c->n_bufs = nthreads * 2 + 2;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond_buf, NULL);
	pthread_cond_init(&c->cond_idle, NULL);
	c->bufs = calloc(c->n_bufs, sizeof(*c->bufs));
	c->free_bufs = calloc(c->n_bufs, sizeof(*c->free_bufs));
	if (!c->bufs || !c->free_bufs)
		goto nomem;
	for (size_t i = 0; i < c->n_bufs; i++) {
		struct chunk_buf *b = &c->bufs[i];

		b->data = malloc(c->chunk_size);
		b->slots = calloc(CHUNK_PACK_MAX_PIECES, sizeof(*b->slots));
		if (!b->data || !b->slots)
			goto nomem;
		c->free_bufs[c->n_free++] = b;
	}
	ret = workq_new_local(nthreads, 0, &wl, c, &c->q);
	if (ret) {
		chunker_free(c);
		return ret;
	}
	*out = c;
	return 0;
nomem:
	chunker_free(c);
	return -ENOMEM;
}

uint32_t chunker_chunk_size(const struct chunker *c) { return c->chunk_size; }

struct chunk_buf *chunker_buf_get(struct chunker *c)
{
	struct chunk_buf *b;

	pthread_mutex_lock(&c->lock);
	while (!c->n_free)
		pthread_cond_wait(&c->cond_buf, &c->lock);
	b = c->free_bufs[--c->n_free];
	pthread_mutex_unlock(&c->lock);
	return b;
}

void chunker_buf_put(struct chunker *c, struct chunk_buf *b)
{
	b->fill = 0;
	b->n_slots = 0;
	pthread_mutex_lock(&c->lock);
	c->free_bufs[c->n_free++] = b;
	pthread_cond_signal(&c->cond_buf);
	pthread_mutex_unlock(&c->lock);
}

int chunker_submit(struct chunker *c, struct chunk_buf *b)
{
	int ret;

	pthread_mutex_lock(&c->lock);
	c->in_flight++;
	c->stats.chunks++;
	c->stats.raw_bytes += b->fill;
	ret = c->error;
	pthread_mutex_unlock(&c->lock);
	if (workq_push(c->q, &b->item)) {
		/* closing (never while the importer submits): the job is dropped, said so */
		pthread_mutex_lock(&c->lock);
		c->in_flight--;
		c->free_bufs[c->n_free++] = b;
		ret = c->error = c->error ? c->error : -ESHUTDOWN;
		pthread_cond_broadcast(&c->cond_idle);
		pthread_mutex_unlock(&c->lock);
	}
	return ret;
}

void chunker_get_stats(struct chunker *c, struct chunker_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->stats;
	pthread_mutex_unlock(&c->lock);
}

void chunker_wait(struct chunker *c, void (*tick)(void *arg), void *arg)
{
	pthread_mutex_lock(&c->lock);
	while (c->in_flight) {
		pthread_cond_wait(&c->cond_idle, &c->lock);
		if (tick) {
			pthread_mutex_unlock(&c->lock);
			tick(arg);
			pthread_mutex_lock(&c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
}

int chunker_finish(struct chunker *c)
{
	int ret, r2;

	chunker_wait(c, NULL, NULL);
	pthread_mutex_lock(&c->lock);
	ret = c->error;
	pthread_mutex_unlock(&c->lock);
	r2 = store_commit(c->store);
	return ret ? ret : r2;
}

void chunker_free(struct chunker *c)
{
	if (!c)
		return;
	workq_free(c->q); /* queued jobs run first */
	if (c->bufs)
		for (size_t i = 0; i < c->n_bufs; i++) {
			free(c->bufs[i].data);
			free(c->bufs[i].slots);
		}
	free(c->bufs);
	free(c->free_bufs);
	free(c->seen.keys);
	pthread_cond_destroy(&c->cond_buf);
	pthread_cond_destroy(&c->cond_idle);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
