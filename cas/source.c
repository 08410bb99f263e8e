/* SPDX-License-Identifier: MIT */
/* The chunk source: opens the store and the remote, builds the chain of tiers over them. */
#include "source.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/why.h"
#include "cache.h"
#include "tier.h"

struct cas_source {
	struct store *store;
	struct remote *remote;   /* NULL: the store is the only tier below memory */
	struct cache *cache;     /* NULL: the store is not bounded */
	bool plain;              /* use and write plain copies */
	struct tier_codecs *codecs;
	struct tier_chain *chain;
	struct tier *memory;     /* the chain's top */
};

static int chain_add(struct cas_source *s, struct tier *t)
{
	if (!t)
		return -ENOMEM;
	tier_chain_add(s->chain, t);
	return 0;
}

/*
 * THE place the tiers are stacked, top first, for every user of a cas_source. A new tier (a
 * mirror, a proxy, a peer: cas/tier/NAME.c) is one line here, at its level.
 */
static int source_chain_build(struct cas_source *s)
{
	int ret = tier_codecs_new(&s->codecs);

	if (!ret)
		ret = tier_chain_new(&s->chain);
	if (!ret)
		ret = chain_add(s, s->memory = tier_memory_new(s->cache));
	if (!ret && s->plain)
		ret = chain_add(s, tier_plain_new(s->store, s->cache));
	if (!ret)
		ret = chain_add(s, tier_store_new(s->store, s->cache, s->codecs));
	if (!ret && s->remote)
		ret = chain_add(s, tier_remote_new(s->remote, s->codecs));
	return ret;
}

int cas_source_open(const struct cas_source_opts *o, struct cas_source **out, char *why,
			size_t why_len)
{
	struct cas_source *s;
	char rwhy[WHY_MAX] = "";
	struct stat st;
	int ret;

	if (why_len)
		why[0] = '\0';
	if (o->cache_size && !o->remote_url)
		return why_set(why, why_len, -EINVAL,
			       "--cache-size needs --remote (the store is a cache of a remote)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	s->plain = !o->no_plain;
	/* with a remote, a store that does not exist yet is an empty cache */
	if (o->remote_url && stat(o->store_dir, &st) < 0)
		ret = store_create_cache(o->store_dir, &s->store);
	else
		ret = store_open(o->store_dir, false, &s->store);
	if (ret == -ENOENT && o->remote_url)
		ret = store_create_cache(o->store_dir, &s->store);
	if (ret && store_open_why(ret, o->store_dir, false, why, why_len))
		goto fail;
	if (ret) {
		why_set(why, why_len, ret, "%s: %s", o->store_dir,
			ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
				       : strerror(-ret));
		goto fail;
	}
	if (o->remote_url || s->plain) {
		struct store_tmp_count swept;

		/* a source writes to tmp/ (fetched chunks, plain copies): sweep what dead ones left */
		store_tmp_sweep(s->store, STORE_TMP_GRACE_SECS, STORE_SWEEP_SKIP_LIVE, &swept);
	}
	if (o->remote_url) {
		struct remote_opts ro = {
			.url = o->remote_url,
			.concurrency = o->concurrency,
			.timeout_ms = o->timeout_ms,
			.retries = o->retries,
		};

		ret = remote_open(&ro, &s->remote, rwhy, sizeof(rwhy));
		if (ret) {
			why_set(why, why_len, ret, "%s: %s", o->remote_url,
				rwhy[0] ? rwhy : strerror(-ret));
			goto fail;
		}
	}
	if (o->cache_size) {
		ret = cache_open(s->store, o->cache_size, &s->cache);
		if (ret) {
			why_set(why, why_len, ret, "%s: cannot use it as a cache: %s", o->store_dir,
				strerror(-ret));
			goto fail;
		}
	}
	ret = source_chain_build(s);
	if (ret) {
		why_set(why, why_len, ret, "out of memory");
		goto fail;
	}
	*out = s;
	return 0;
fail:
	cas_source_close(s);
	return ret;
}

void cas_source_close(struct cas_source *s)
{
	if (!s)
		return;
	tier_chain_free(s->chain);
	tier_codecs_free(s->codecs);
	cache_close(s->cache);
	remote_close(s->remote);
	store_close(s->store);
	free(s);
}

int cas_source_check(struct cas_source *s, const uint8_t (*d)[SHA256_LEN], size_t n, char *why,
		     size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1];

	if (why_len)
		why[0] = '\0';
	if (s->remote)
		return remote_probe(s->remote, n ? d[0] : NULL, why, why_len);
	for (size_t i = 0; i < n; i++) {
		int ret = store_has(s->store, d[i]);

		if (ret == 1 || (ret == 0 && s->plain && store_plain_size(s->store, d[i])))
			continue;
		sha256_to_hex(d[i], hex);
		if (ret < 0)
			return why_set(why, why_len, ret, "store %s: chunk sha256:%s: %s",
				       store_dir(s->store), hex, strerror(-ret));
		return why_set(why, why_len, -ENOENT, "store %s does not hold the image's chunks "
			       "(sha256:%s missing); wrong --store?", store_dir(s->store), hex);
	}
	return 0;
}

struct store *cas_source_store(struct cas_source *s) { return s->store; }

bool cas_source_bounded(const struct cas_source *s) { return s->cache != NULL; }

bool cas_source_has_room(struct cas_source *s, uint64_t bytes)
{
	struct cache_stats cs;

	if (!s->cache)
		return true;
	cache_get_stats(s->cache, &cs);
	return cs.used + bytes <= cs.limit;
}

/* ------------------------------------------------------------------ asks of the chain */

int cas_source_get(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max, size_t head,
		   void **block, size_t *len, size_t *frame_len)
{
	struct tier_req q = { .d = d, .max = max, .head = head, .ask = TIER_ASK_GET,
			      .top = TIER_STORE, .prio0 = REMOTE_PRIO_NOW };
	struct tier_chunk c;
	int ret = tier_chain_get(s->chain, &q, &c);

	if (ret)
		return ret;
	*block = c.block;
	*len = c.len;
	*frame_len = c.frame_len;
	return 0;
}

int cas_source_fetch(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max, bool bg,
		     size_t *frame_len)
{
	struct tier_req q = { .d = d, .max = max, .ask = TIER_ASK_FETCH, .top = TIER_STORE,
			      .prio0 = bg ? REMOTE_PRIO_BG : REMOTE_PRIO_NOW };
	struct tier_chunk c;
	int ret;

	if (frame_len)
		*frame_len = 0;
	ret = tier_chain_get(s->chain, &q, &c);
	if (ret)
		return ret;
	free(c.block); /* verified, kept in the store: the bytes are not wanted here */
	if (c.from == TIER_STORE)
		return 0; /* there already, or fetched by another asker */
	if (frame_len)
		*frame_len = c.frame_len;
	return 1;
}

int cas_source_load(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max, size_t head,
		    struct cas_chunk *out)
{
	struct tier_req q = { .d = d, .max = max, .head = head, .ask = TIER_ASK_LOAD,
			      .top = TIER_PLAIN, .prio0 = REMOTE_PRIO_NOW };
	struct tier_chunk c;
	int ret = tier_chain_get(s->chain, &q, &c);

	out->block = ret ? NULL : c.block;
	out->fd = ret ? -1 : c.fd;
	out->len = ret ? 0 : c.len;
	out->frame_len = ret ? 0 : c.frame_len;
	return ret;
}

void cas_source_plain_bad(struct cas_source *s, const uint8_t d[SHA256_LEN])
{
	tier_chain_drop(s->chain, TIER_PLAIN, TIER_PLAIN, d);
}

/* ------------------------------------------------------------------ the memory tier */

int cas_source_memory(struct cas_source *s, size_t bytes)
{
	tier_memory_set(s->memory, bytes);
	return 0;
}

int cas_source_hold(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max,
		    unsigned flags, struct cas_held *h)
{
	struct tier_req q = { .d = d, .max = max, .ask = TIER_ASK_HOLD, .top = TIER_MEMORY,
			      .ahead = flags & CAS_HOLD_AHEAD, .peek = flags & CAS_HOLD_PEEK,
			      .prio0 = REMOTE_PRIO_NOW };
	struct tier_chunk c;
	int ret = tier_chain_get(s->chain, &q, &c);

	if (ret)
		return ret;
	if (!c.ref) { /* the memory tier could not take it */
		free(c.block);
		if (c.fd >= 0)
			close(c.fd);
		return -ENOMEM;
	}
	h->data = c.data;
	h->fd = c.fd;
	h->len = c.len;
	h->ref = c.ref;
	h->loaded = c.from != TIER_MEMORY;
	h->ahead = c.ahead;
	return 0;
}

void cas_source_release(struct cas_source *s, const uint8_t d[SHA256_LEN], struct cas_held *h,
			int err)
{
	struct tier_chunk c = { .ref = h->ref, .fd = h->fd, .len = h->len };

	tier_chain_release(s->chain, d, &c, err != 0);
	h->ref = NULL;
}

bool cas_source_busy(struct cas_source *s, const uint8_t d[SHA256_LEN])
{
	return s->memory->ops->has(s->memory, d) == 1 || tier_chain_busy(s->chain, d);
}

void cas_source_memory_stats(struct cas_source *s, struct cas_memory_stats *st)
{
	struct cas_source_stats all;

	memset(&all, 0, sizeof(all));
	s->memory->ops->stats(s->memory, &all);
	*st = all.mem;
}

void cas_source_get_stats(struct cas_source *s, struct cas_source_stats *st)
{
	tier_chain_stats(s->chain, st);
}
