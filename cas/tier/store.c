/* SPDX-License-Identifier: MIT */
/*
 * The store tier: STORE/chunks, zstd frames verified at every load. With --cache-size the
 * same tier is bounded (cas/cache.h): the bound covers the directory (chunk files and their
 * plain copies, counted across processes in STORE/cache.state), not a separate place a chunk
 * lives in, so it is this tier's way of adding and removing files rather than a tier of its
 * own.
 */
#include "../tier.h"

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"

#define ADD(f, v) __atomic_add_fetch(&(f), (v), __ATOMIC_RELAXED)
#define GET(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

struct store_tier {
	struct tier t;
	struct store *s;
	struct cache *cache;     /* NULL: not bounded */
	struct tier_codecs *codecs;
	bool put_warned;
	uint64_t hits, bytes, verify_failures;
};

#define ST(t) ((struct store_tier *)(t))

/* Not here, corrupt (removed) or unreadable: ask below when there is a tier below. */
static int store_miss(struct store_tier *st, const uint8_t d[SHA256_LEN], const char *hex,
		      int ret, const char *why, size_t flen)
{
	const char *below = st->t.next ? st->t.next->name : NULL;

	if (why) {
		ADD(st->verify_failures, 1);
		if (!below) {
			log_error("chunk %s is corrupt (%s)", hex, why);
			return -EIO;
		}
		log_warn("chunk %s in %s is corrupt (%s): fetching it from %s", hex,
			 store_dir(st->s), why, below);
		if (st->cache)
			cache_drop(st->cache, d, flen);
		else
			store_remove(st->s, d);
	} else if (ret == -ENOENT) {
		if (!below)
			log_error("chunk %s missing from the store", hex);
	} else {
		if (!below || ret == -ENOMEM) {
			log_error("chunk %s: %s", hex, strerror(-ret));
			return ret == -ENOMEM ? ret : -EIO;
		}
		log_warn("chunk %s: %s: fetching it from %s", hex, strerror(-ret), below);
	}
	return -ENOENT;
}

static int store_tier_get(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct store_tier *st = ST(t);
	char hex[SHA256_HEX_LEN + 1];
	char why[WHY_MAX];
	uint8_t *frame;
	size_t flen = 0;
	int ret;

	why[0] = '\0'; /* one byte: written only on a failure */
	if (q->ask == TIER_ASK_FETCH) {
		if (store_has(st->s, q->d) > 0)
			return 0;
		ret = -ENOENT;
	} else {
		ret = store_read(st->s, q->d, &frame, &flen);
		if (ret == -EBADMSG) {
			/* not a regular file (a FIFO, a device: never opened): a corrupt chunk */
			why_set(why, sizeof(why), ret, "not a regular file");
			flen = 0;
		} else if (!ret) {
			ret = tier_decode(st->codecs, q->d, frame, flen, q->max, q->head, &c->block,
					  &c->len, why, sizeof(why));
			free(frame);
			if (!ret) {
				ADD(st->hits, 1);
				ADD(st->bytes, flen);
				c->frame_len = flen;
				if (st->cache)
					store_touch(st->s, q->d);
				return 0;
			}
			if (ret != -ENOMEM && !why[0])
				why_set(why, sizeof(why), ret, "corrupt");
		}
	}
	sha256_to_hex(q->d, hex);
	if (ret == -ENOMEM) {
		log_error("chunk %s: out of memory", hex);
		return ret;
	}
	return store_miss(st, q->d, hex, ret, why[0] ? why : NULL, flen);
}

/* Keep a frame fetched from below. */
static void store_tier_put(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct store_tier *st = ST(t);
	int ret;

	if (!c->frame)
		return;
	ret = st->cache ? cache_put(st->cache, q->d, c->frame, c->frame_len)
			: store_put_cached(st->s, q->d, c->frame, c->frame_len);
	if (ret < 0 && !__atomic_exchange_n(&st->put_warned, true, __ATOMIC_RELAXED))
		log_warn("cannot keep fetched chunks in %s: %s (serving goes on)",
			 store_dir(st->s), strerror(-ret));
}

static int store_tier_has(struct tier *t, const uint8_t d[SHA256_LEN])
{
	return store_has(ST(t)->s, d);
}

static void store_tier_drop(struct tier *t, const uint8_t d[SHA256_LEN])
{
	struct store_tier *st = ST(t);
	char path[PATH_MAX];
	struct stat sb;

	store_chunk_path(st->s, d, path, sizeof(path));
	if (st->cache)
		cache_drop(st->cache, d, stat(path, &sb) ? 0 : (uint64_t)sb.st_size);
	else
		store_remove(st->s, d);
}

static void store_tier_stats(struct tier *t, struct cas_source_stats *s)
{
	struct store_tier *st = ST(t);

	s->disk_hits += GET(st->hits);
	s->disk_bytes += GET(st->bytes);
	s->verify_failures += GET(st->verify_failures);
	if (st->cache) {
		struct cache_stats cs;

		cache_get_stats(st->cache, &cs);
		s->has_cache = 1;
		s->cache_limit = cs.limit;
		s->cache_used = cs.used;
		s->cache_evictions = cs.evictions;
		s->cache_evicted_bytes = cs.evicted_bytes;
	}
}

static void store_tier_close(struct tier *t)
{
	free(t);
}

static const struct tier_ops store_tier_ops = {
	.get = store_tier_get,
	.put = store_tier_put,
	.has = store_tier_has,
	.drop = store_tier_drop,
	.stats = store_tier_stats,
	.close = store_tier_close,
};

struct tier *tier_store_new(struct store *s, struct cache *cache, struct tier_codecs *p)
{
	struct store_tier *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->t = (struct tier){ .ops = &store_tier_ops, .level = TIER_STORE,
			       .name = store_dir(s) };
	st->s = s;
	st->cache = cache;
	st->codecs = p;
	return &st->t;
}
