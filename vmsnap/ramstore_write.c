/* SPDX-License-Identifier: MIT */
/*
 * Guest RAM into the store (ramstore_write, ramstore.h), on a common/workq in two passes:
 *
 *   1. each window of RAMSTORE_WINDOW pages: its changed pages read, zero ones found, the
 *      others hashed (XXH3-128) and kept at the parent's place when their hash is the
 *      parent's; the rest gathered in address order and named (sha256): the window's chunk.
 *   2. (this thread) the windows' chunks appended to the map after the parent's, in window
 *      order; of the windows with one name, the first one's chunk is the one to store.
 *   3. each chunk to store: put in the store unless it is there (compressed, per-thread
 *      codec), then committed.
 *
 * Every window writes its own pages of the map and its own fields, and the chunks are added
 * in window order, so the map's bytes do not depend on the threads or their timing;
 * rammap_finish then makes the map canonical.
 */
#include "ramstore.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "../cas/chunk.h"
#include "../cas/store.h"
#include "../common/workq.h"
#include "ramstore_int.h"

#define THREADS_MAX 8u
#define WIN_BYTES (RAMSTORE_WINDOW * RAMMAP_PAGE)

_Static_assert(RAMSTORE_WINDOW == 64, "a window's stored pages are one u64 mask");

struct win {
	struct workq_item item;
	uint64_t mask;                /* pages of the window in its chunk (bit i: page i) */
	uint8_t digest[SHA256_LEN];   /* the chunk's name (npages > 0) */
	uint32_t npages;              /* pages in the chunk */
	uint32_t ref;                 /* the chunk's ref in the new map (0: none) */
	uint32_t read, kept;          /* pages read, pages kept at the parent's place */
	uint32_t written;             /* pass 3: compressed bytes put in the store */
	bool put, present;            /* pass 3: to store; was in the store already */
};

struct wctx {
	const struct ramstore_opts *o;
	const uint8_t *ram;
	struct rammap *m;             /* the new map: each window fills its pages */
	struct win *wins;
	uint64_t nwin;
	int pass;                     /* 1 or 3 */
	uint8_t zero_hash[RAMSTORE_HASH];
	pthread_mutex_t lock;
	pthread_cond_t done;
	uint64_t pending;             /* items of the pass not finished */
	int err;                      /* the first failure */
	char why[WHY_MAX];
};

/* A worker's own buffers. */
struct wlocal {
	struct chunk_codec *codec;
	uint8_t *gather, *zbuf;
	size_t zcap;
};

static bool page_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)(const void *)p;

	for (unsigned i = 0; i < RAMMAP_PAGE / 8; i++)
		if (q[i])
			return false;
	return true;
}

static void xxh128(const void *p, size_t len, uint8_t out[RAMSTORE_HASH])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(p, len));
	memcpy(out, c.digest, RAMSTORE_HASH);
}

static bool hash_known(const uint8_t h[RAMSTORE_HASH])
{
	for (unsigned i = 0; i < RAMSTORE_HASH; i++)
		if (h[i])
			return true;
	return false;
}

static void fail(struct wctx *c, int err, const char *why)
{
	pthread_mutex_lock(&c->lock);
	if (!c->err) {
		c->err = err;
		snprintf(c->why, sizeof(c->why), "%s", why);
	}
	pthread_mutex_unlock(&c->lock);
}

static bool failed(struct wctx *c)
{
	return __atomic_load_n(&c->err, __ATOMIC_RELAXED) != 0;
}

/* The window's pages of the chunk, in order, into buf. */
static void gather(const struct wctx *c, const struct win *w, uint8_t *buf)
{
	const uint8_t *base = c->ram + (uint64_t)(w - c->wins) * WIN_BYTES;
	size_t k = 0;

	for (unsigned i = 0; i < RAMSTORE_WINDOW; i++)
		if (w->mask & (1ull << i))
			memcpy(buf + RAMMAP_PAGE * k++, base + (size_t)i * RAMMAP_PAGE, RAMMAP_PAGE);
}

/* Pass 1 for page p of window w: its place in the new map. */
static void page_place(struct wctx *c, struct win *w, uint64_t p, unsigned i)
{
	const struct ramstore_opts *o = c->o;
	const struct rammap_page *pp = o->parent ? &o->parent->pages[p] : NULL;
	struct rammap_page *np = &c->m->pages[p];
	const uint8_t *data = c->ram + p * RAMMAP_PAGE;
	uint8_t h[RAMSTORE_HASH];

	if (o->changed && !(o->changed[p / 64] & (1ull << (p % 64)))) {
		/* not changed: the parent's (its ref is the same in the new map), or zero */
		if (pp && pp->chunk) {
			*np = *pp;
			w->kept++;
		}
		return;
	}
	w->read++;
	if (page_zero(data)) {
		if (o->hashes)
			memcpy(o->hashes[p], c->zero_hash, RAMSTORE_HASH);
		return;
	}
	xxh128(data, RAMMAP_PAGE, h);
	if (o->hashes && pp && pp->chunk && hash_known(o->hashes[p]) &&
	    !memcmp(o->hashes[p], h, RAMSTORE_HASH)) {
		*np = *pp;
		w->kept++;
		return;
	}
	if (o->hashes)
		memcpy(o->hashes[p], h, RAMSTORE_HASH);
	w->mask |= 1ull << i;
	np->slot = w->npages++; /* its chunk ref: pass 2 */
}

static void pass1(struct wctx *c, struct win *w, struct wlocal *l)
{
	uint64_t first = (uint64_t)(w - c->wins) * RAMSTORE_WINDOW;
	uint64_t n = c->m->npages - first < RAMSTORE_WINDOW ? c->m->npages - first
							     : RAMSTORE_WINDOW;
	int ret;

	for (unsigned i = 0; i < n; i++)
		page_place(c, w, first + i, i);
	if (!w->npages)
		return;
	gather(c, w, l->gather);
	ret = sha256_buf(l->gather, (size_t)w->npages * RAMMAP_PAGE, w->digest);
	if (ret)
		fail(c, ret, "sha256: out of memory");
}

static void pass3(struct wctx *c, struct win *w, struct wlocal *l)
{
	struct store *s = c->o->store;
	size_t len = (size_t)w->npages * RAMMAP_PAGE, written;
	char why[WHY_MAX];
	int ret;

	gather(c, w, l->gather);
	ret = ramstore_put_chunk(s, l->codec, l->gather, len, w->digest, l->zbuf, l->zcap,
				 &written);
	if (ret) {
		snprintf(why, sizeof(why), "store %s: %s", store_dir(s), strerror(-ret));
		fail(c, ret, why);
		return;
	}
	w->present = !written;
	w->written = (uint32_t)written;
}

static void *wlocal_new(void *ctx)
{
	const struct wctx *c = ctx;
	struct wlocal *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->zcap = chunk_compress_bound(WIN_BYTES);
	l->gather = malloc(WIN_BYTES);
	l->zbuf = malloc(l->zcap);
	l->codec = chunk_codec_new(c->o->level ? c->o->level : CHUNK_LEVEL_DEFAULT);
	if (!l->gather || !l->zbuf || !l->codec) {
		chunk_codec_free(l->codec);
		free(l->gather);
		free(l->zbuf);
		free(l);
		return NULL;
	}
	return l;
}

static void wlocal_free(void *state, void *ctx)
{
	struct wlocal *l = state;

	(void)ctx;
	if (!l)
		return;
	chunk_codec_free(l->codec);
	free(l->gather);
	free(l->zbuf);
	free(l);
}

static void win_run(struct workq_item *it, void *ctx, void *state)
{
	struct wctx *c = ctx;
	struct win *w = (struct win *)it;

	if (!state)
		fail(c, -ENOMEM, "out of memory");
	else if (!failed(c))
		(c->pass == 1 ? pass1 : pass3)(c, w, state);
	pthread_mutex_lock(&c->lock);
	if (!--c->pending)
		pthread_cond_broadcast(&c->done);
	pthread_mutex_unlock(&c->lock);
}

/* The windows of the pass (pass 3: those to put) through q; back when all are done. */
static void run_pass(struct wctx *c, struct workq *q, int pass)
{
	uint64_t n = 0;

	c->pass = pass;
	for (uint64_t i = 0; i < c->nwin; i++)
		n += pass == 1 || c->wins[i].put;
	c->pending = n;
	for (uint64_t i = 0; i < c->nwin; i++) {
		if (pass == 3 && !c->wins[i].put)
			continue;
		if (workq_push(q, &c->wins[i].item)) {
			/* never with an open queue: run it here */
			win_run(&c->wins[i].item, c, NULL);
		}
	}
	pthread_mutex_lock(&c->lock);
	while (c->pending)
		pthread_cond_wait(&c->done, &c->lock);
	pthread_mutex_unlock(&c->lock);
}

static int win_cmp(const void *a, const void *b)
{
	const struct win *x = *(struct win *const *)a, *y = *(struct win *const *)b;
	int r = memcmp(x->digest, y->digest, SHA256_LEN);

	return r ? r : (x > y) - (x < y);
}

/* Pass 2: the windows' chunks into the map, in window order; the first of a name put. */
static int pass2(struct wctx *c)
{
	struct win **v = malloc((c->nwin ? c->nwin : 1) * sizeof(*v));
	uint64_t n = 0;
	int ret = v ? 0 : -ENOMEM;

	for (uint64_t i = 0; !ret && i < c->nwin; i++) {
		struct win *w = &c->wins[i];

		if (!w->npages)
			continue;
		ret = rammap_add_chunk(c->m, w->digest, w->npages, &w->ref);
		for (unsigned b = 0; !ret && b < RAMSTORE_WINDOW; b++)
			if (w->mask & (1ull << b))
				c->m->pages[i * RAMSTORE_WINDOW + b].chunk = w->ref;
		v[n++] = w;
	}
	if (!ret) {
		qsort(v, n, sizeof(*v), win_cmp);
		for (uint64_t i = 0; i < n; i++)
			v[i]->put = !i || memcmp(v[i]->digest, v[i - 1]->digest, SHA256_LEN);
	}
	free(v);
	return ret;
}

static unsigned threads_for(const struct ramstore_opts *o, uint64_t nwin)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned t = o->threads ? o->threads : ncpu > 0 ? (unsigned)ncpu : 1;

	if (t > THREADS_MAX)
		t = THREADS_MAX;
	return nwin < t ? (unsigned)(nwin ? nwin : 1) : t;
}

/* The new map: the parent's chunk table, or none; checked against the RAM's size. */
static int map_start(const struct ramstore_opts *o, uint64_t size, struct rammap **m,
		     char *why, size_t why_len)
{
	int ret;

	if (!size || size % RAMMAP_PAGE || size > RAMMAP_MEM_MAX)
		return why_set(why, why_len, -EINVAL, "RAM of %llu bytes: not a multiple of %u up "
			       "to %llu", (unsigned long long)size, RAMMAP_PAGE, RAMMAP_MEM_MAX);
	if (o->parent && o->parent->mem_size != size)
		return why_set(why, why_len, -EINVAL, "RAM of %llu bytes, its parent's map %llu",
			       (unsigned long long)size,
			       (unsigned long long)o->parent->mem_size);
	ret = rammap_new(size, m);
	for (uint32_t i = 0; !ret && o->parent && i < o->parent->nchunks; i++) {
		uint32_t ref;

		ret = rammap_add_chunk(*m, o->parent->chunks[i].digest,
				       o->parent->chunks[i].npages, &ref);
	}
	if (ret) {
		rammap_free(*m);
		*m = NULL;
		return why_set(why, why_len, ret, "page map: %s", strerror(-ret));
	}
	return 0;
}

static void result_sum(const struct wctx *c, struct ramstore_result *res)
{
	memset(res, 0, sizeof(*res));
	for (uint64_t i = 0; i < c->nwin; i++) {
		const struct win *w = &c->wins[i];

		res->pages_read += w->read;
		res->pages_kept += w->kept;
		res->pages_new += w->npages;
		res->chunks_new += w->put && !w->present;
		res->chunks_present += w->put && w->present;
		res->bytes_new += w->written;
	}
	res->pages_nonzero = c->m->nonzero;
}

static const struct workq_local wq_local = { wlocal_new, wlocal_free, win_run };

int ramstore_write(const struct ramstore_opts *o, const uint8_t *ram, uint64_t size,
		   struct rammap **out, struct ramstore_result *res, char *why, size_t why_len)
{
	struct wctx c = { .o = o, .ram = ram, .lock = PTHREAD_MUTEX_INITIALIZER,
			  .done = PTHREAD_COND_INITIALIZER };
	static const uint8_t zero[RAMMAP_PAGE];
	struct workq *q = NULL;
	int ret;

	*out = NULL;
	ret = map_start(o, size, &c.m, why, why_len);
	if (ret)
		return ret;
	c.nwin = (c.m->npages + RAMSTORE_WINDOW - 1) / RAMSTORE_WINDOW;
	c.wins = calloc(c.nwin, sizeof(*c.wins));
	xxh128(zero, sizeof(zero), c.zero_hash);
	ret = c.wins ? workq_new_local(threads_for(o, c.nwin), 0, &wq_local, &c, &q) : -ENOMEM;
	if (ret) {
		why_set(why, why_len, ret, "%s", strerror(-ret));
		goto out;
	}
	run_pass(&c, q, 1);
	if (!c.err && (ret = pass2(&c)))
		why_set(why, why_len, ret, "page map: %s", strerror(-ret));
	if (!ret && !c.err)
		run_pass(&c, q, 3);
	workq_free(q);
	if (!ret && c.err)
		ret = why_set(why, why_len, c.err, "%s", c.why);
	if (!ret && (ret = store_commit(o->store)))
		why_set(why, why_len, ret, "store %s: %s", store_dir(o->store), strerror(-ret));
	if (!ret && (ret = rammap_finish(c.m)))
		why_set(why, why_len, ret, "page map: %s", strerror(-ret));
	if (!ret && res)
		result_sum(&c, res);
out:
	free(c.wins);
	if (ret) {
		rammap_free(c.m);
		return ret;
	}
	*out = c.m;
	return 0;
}
