/* SPDX-License-Identifier: MIT */
/*
 * The plain tier: STORE/plain, a chunk's verified bytes kept uncompressed (cas/plain.h),
 * handed out as an open descriptor. A copy is written when a chunk was loaded from the store
 * (put), not when it was just fetched: a cold fetch is the path whose speed the link sets,
 * and writing the copy would add the chunk's whole uncompressed size to it (1 Gbit/s cold
 * read: 1.00 -> 0.84 s); the chunk gets its copy at its next load from the store. A copy
 * that cannot be written (a read-only store, a full disk) is counted and skipped.
 */
#include "../tier.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../plain.h"

#define ADD(f, v) __atomic_add_fetch(&(f), (v), __ATOMIC_RELAXED)
#define GET(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

struct plain_tier {
	struct tier t;
	struct store *s;
	struct cache *cache;     /* NULL: the store is not bounded */
	bool warned;
	bool readonly;           /* copies cannot be written here: stop trying */
	uint64_t hits, bytes, writes, write_failures, bad;
};

#define PT(t) ((struct plain_tier *)(t))

static void plain_tier_drop(struct tier *t, const uint8_t d[SHA256_LEN])
{
	struct plain_tier *pt = PT(t);
	uint64_t bytes;

	ADD(pt->bad, 1);
	if (pt->cache)
		cache_drop_plain(pt->cache, d);
	else
		plain_remove(pt->s, d, &bytes);
}

static int plain_tier_get(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct plain_tier *pt = PT(t);
	char why[WHY_MAX];
	int ret;

	/* a plain copy stands for its chunk: none is served once the chunk is gone */
	if (store_has(pt->s, q->d) != 1)
		return -ENOENT;
	why[0] = '\0'; /* one byte: plain_open writes it only on a failure */
	ret = plain_open(pt->s, q->d, q->max, &c->fd, &c->len, why, sizeof(why));
	if (!ret) {
		ADD(pt->hits, 1);
		ADD(pt->bytes, c->len);
		c->frame_len = 0;
		if (pt->cache)
			store_touch(pt->s, q->d);
		return 0;
	}
	c->fd = -1;
	if (ret == -EBADMSG) {
		char hex[SHA256_HEX_LEN + 1];

		sha256_to_hex(q->d, hex);
		log_warn("plain copy of chunk %s in %s is bad (%s): removed, using the chunk",
			 hex, store_dir(pt->s), why);
		plain_tier_drop(t, q->d);
	}
	return -ENOENT;
}

/* Keep a plain copy of chunk d's verified bytes: a descriptor of it, or -1 (never fails). */
static int plain_keep(struct plain_tier *pt, const uint8_t d[SHA256_LEN], const void *data,
		      size_t len, size_t max)
{
	uint64_t bytes;
	size_t n;
	int fd, ret;

	if (__atomic_load_n(&pt->readonly, __ATOMIC_RELAXED))
		return -1;
	ret = pt->cache ? cache_put_plain(pt->cache, d, data, len, &fd)
			: plain_put(pt->s, d, data, len, &fd, &bytes);
	if (ret == 1) {
		ADD(pt->writes, 1);
		return fd;
	}
	if (ret == 0) {
		/* there already (another process, or a thread): use it if it is good */
		ret = plain_open(pt->s, d, max, &fd, &n, NULL, 0);
		if (!ret && n == len)
			return fd;
		if (!ret)
			close(fd);
		return -1;
	}
	if (ret == -ENOENT && pt->cache)
		return -1; /* the chunk was evicted meanwhile: no copy of what is not there */
	ADD(pt->write_failures, 1);
	if (ret == -EROFS || ret == -EACCES || ret == -EPERM)
		__atomic_store_n(&pt->readonly, true, __ATOMIC_RELAXED);
	if (!__atomic_exchange_n(&pt->warned, true, __ATOMIC_RELAXED))
		log_warn("cannot keep plain copies of chunks in %s/plain: %s (serving goes on)",
			 store_dir(pt->s), strerror(-ret));
	return -1;
}

/* A chunk loaded from the store, as a block: hand it on as its new plain copy instead. */
static void plain_tier_put(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct plain_tier *pt = PT(t);

	if (c->from != TIER_STORE || q->fetched || !c->block || q->ask == TIER_ASK_FETCH)
		return;
	c->fd = plain_keep(pt, q->d, (uint8_t *)c->block + q->head, c->len, q->max);
	if (c->fd >= 0) {
		free(c->block);
		c->block = NULL;
	}
}

static int plain_tier_has(struct tier *t, const uint8_t d[SHA256_LEN])
{
	return store_plain_size(PT(t)->s, d) ? 1 : 0;
}

static void plain_tier_stats(struct tier *t, struct cas_source_stats *s)
{
	struct plain_tier *pt = PT(t);

	s->has_plain = 1;
	s->plain_hits += GET(pt->hits);
	s->plain_bytes += GET(pt->bytes);
	s->plain_writes += GET(pt->writes);
	s->plain_write_failures += GET(pt->write_failures);
	s->plain_bad += GET(pt->bad);
}

static void plain_tier_close(struct tier *t)
{
	free(t);
}

static const struct tier_ops plain_tier_ops = {
	.get = plain_tier_get,
	.put = plain_tier_put,
	.has = plain_tier_has,
	.drop = plain_tier_drop,
	.stats = plain_tier_stats,
	.close = plain_tier_close,
};

struct tier *tier_plain_new(struct store *s, struct cache *cache)
{
	struct plain_tier *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return NULL;
	pt->t = (struct tier){ .ops = &plain_tier_ops, .level = TIER_PLAIN,
			       .name = store_dir(s) };
	pt->s = s;
	pt->cache = cache;
	return &pt->t;
}
