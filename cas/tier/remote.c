/* SPDX-License-Identifier: MIT */
/*
 * The remote tier: an HTTP store or an OCI registry (cas/remote/). Every frame is verified
 * (its blob digest there, decompressed against its name here); a corrupt one is fetched once
 * more, then not served. The frame goes up with the bytes for the store tier to keep.
 */
#include "../tier.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"

#define REMOTE_TRIES 2  /* a corrupt fetch is discarded and fetched once more */

#define ADD(f, v) __atomic_add_fetch(&(f), (v), __ATOMIC_RELAXED)
#define GET(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

struct remote_tier {
	struct tier t;
	struct remote *r;
	struct tier_codecs *codecs;
	uint64_t fetches, bg_fetches, bg_bytes, verify_failures;
};

#define RT(t) ((struct remote_tier *)(t))

/* One verified fetch: 0 (c filled, c->frame kept), 1 corrupt (try again), -errno. */
static int fetch_once(struct remote_tier *rt, const struct tier_req *q, struct tier_chunk *c,
		      const char *hex, bool last)
{
	char why[WHY_MAX];
	uint8_t *frame;
	size_t flen;
	int ret;

	ret = remote_get_prio(rt->r, q->d, q->prio, &frame, &flen);
	if (ret == -EBADMSG) {
		ADD(rt->verify_failures, 1);
		return 1; /* the blob did not match its digest (logged) */
	}
	if (ret)
		return ret == -ENOENT || ret == -ENOMEM ? ret : -EIO; /* logged */
	why[0] = '\0'; /* one byte: written only on a failure */
	ret = tier_decode(rt->codecs, q->d, frame, flen, q->max, q->head, &c->block, &c->len,
			  why, sizeof(why));
	if (ret == -EBADMSG) {
		ADD(rt->verify_failures, 1);
		log_warn("chunk %s from %s is corrupt (%s)%s", hex, remote_url(rt->r), why,
			 last ? "" : ": fetching it again");
		free(frame);
		return 1;
	}
	if (ret) {
		free(frame);
		log_error("chunk %s: %s", hex, strerror(-ret));
		return ret;
	}
	ADD(rt->fetches, 1);
	if (q->prio0 == REMOTE_PRIO_BG) {
		ADD(rt->bg_fetches, 1);
		ADD(rt->bg_bytes, flen);
	}
	c->frame = frame;
	c->frame_len = flen;
	return 0;
}

static int remote_tier_get(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct remote_tier *rt = RT(t);
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(q->d, hex);
	for (int i = 0; i < REMOTE_TRIES; i++) {
		int ret = fetch_once(rt, q, c, hex, i + 1 == REMOTE_TRIES);

		if (ret != 1)
			return ret;
	}
	log_error("chunk %s from %s is corrupt every time it is fetched: not served", hex,
		  remote_url(rt->r));
	return -EIO;
}

static int remote_tier_has(struct tier *t, const uint8_t d[SHA256_LEN])
{
	char why[8];

	return remote_probe(RT(t)->r, d, why, sizeof(why)) ? 0 : 1;
}

static void remote_tier_stats(struct tier *t, struct cas_source_stats *s)
{
	struct remote_tier *rt = RT(t);

	s->remote_fetches += GET(rt->fetches);
	s->bg_fetches += GET(rt->bg_fetches);
	s->bg_bytes += GET(rt->bg_bytes);
	s->verify_failures += GET(rt->verify_failures);
	s->has_remote = 1;
	remote_get_stats(rt->r, &s->remote);
}

static void remote_tier_kick(struct tier *t)
{
	remote_kick(RT(t)->r);
}

static void remote_tier_close(struct tier *t)
{
	free(t);
}

/* Nothing is put into or dropped from a remote by a reader. */
static const struct tier_ops remote_tier_ops = {
	.get = remote_tier_get,
	.has = remote_tier_has,
	.stats = remote_tier_stats,
	.kick = remote_tier_kick,
	.close = remote_tier_close,
};

struct tier *tier_remote_new(struct remote *r, struct tier_codecs *p)
{
	struct remote_tier *rt = calloc(1, sizeof(*rt));

	if (!rt)
		return NULL;
	rt->t = (struct tier){ .ops = &remote_tier_ops, .level = TIER_REMOTE,
			       .name = remote_url(r) };
	rt->r = r;
	rt->codecs = p;
	return &rt->t;
}
