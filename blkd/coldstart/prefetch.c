/* SPDX-License-Identifier: MIT */
/* Prefetch (prefetch.h): the plan's chunks as the items of a common/workq, walked in order. */
#include "prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../cas/chunk.h"
#include "../../common/workq.h"

#define THREADS_MAX 64

/* One entry of the plan: a chunk of the layout to fetch. */
struct prefetch_item {
	struct workq_item item;  /* first: the item is the entry */
	uint32_t chunk;
};

struct blkd_prefetch {
	struct cas_source *src;
	const struct layout *l;
	struct trace_plan *plan;
	struct blkd_prefetch_opts o;
	struct prefetch_item *items;  /* plan->n, in the plan's order */
	struct workq *q;
	pthread_mutex_t lock;    /* reserved, stop, the stats */
	uint64_t reserved;       /* cache room claimed by the fetches under way */
	uint64_t worst;          /* the largest frame one chunk can have */
	uint64_t walked;         /* entries taken: fetched, present, failed, or skipped */
	bool stop;
	struct blkd_prefetch_stats st;
};

/* An entry taken: the last one ends the walk. Caller holds the lock. */
static void entry_taken(struct blkd_prefetch *p)
{
	if (++p->walked == p->st.planned)
		p->st.finished = true;
}

static void prefetch_one(struct workq_item *it, void *ctx)
{
	struct blkd_prefetch *p = ctx;
	uint32_t c = ((struct prefetch_item *)it)->chunk;
	size_t flen = 0;
	int ret;

	pthread_mutex_lock(&p->lock);
	/*
	 * Room for the worst case of this chunk and of every fetch under way: a prefetch that
	 * could make the cache evict stops instead (the entries left are skipped).
	 */
	if (!p->stop && !p->st.cache_full && !cas_source_has_room(p->src, p->reserved + p->worst))
		p->st.cache_full = true;
	if (p->stop || p->st.cache_full) {
		entry_taken(p);
		pthread_mutex_unlock(&p->lock);
		return;
	}
	p->reserved += p->worst;
	pthread_mutex_unlock(&p->lock);
	ret = cas_source_fetch(p->src, p->l->chunks[c], p->l->hdr.chunk_size, p->o.background,
			       &flen);
	if (ret > 0 && p->o.marks)
		__atomic_store_n(&p->o.marks[c], 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&p->lock);
	p->reserved -= p->worst; /* the cache's counter has the real size now */
	p->st.done++;
	if (ret > 0) {
		p->st.fetched++;
		p->st.fetched_bytes += flen;
	} else if (ret == 0) {
		p->st.present++;
	} else {
		p->st.failed++;  /* logged; a demand read will try again */
	}
	entry_taken(p);
	pthread_mutex_unlock(&p->lock);
}

int blkd_prefetch_start(struct cas_source *src, const struct layout *l, struct trace_plan *plan,
			const struct blkd_prefetch_opts *o, struct blkd_prefetch **out)
{
	struct blkd_prefetch *p = calloc(1, sizeof(*p));
	unsigned n = o->threads ? o->threads : 1;
	int ret;

	if (!p) {
		trace_plan_free(plan);
		return -ENOMEM;
	}
	if (n > THREADS_MAX)
		n = THREADS_MAX;
	p->src = src;
	p->l = l;
	p->plan = plan;
	p->o = *o;
	p->st.planned = plan->n;
	p->st.finished = !plan->n;
	p->worst = chunk_compress_bound(l->hdr.chunk_size);
	pthread_mutex_init(&p->lock, NULL);
	p->items = calloc(plan->n ? plan->n : 1, sizeof(*p->items));
	if (!p->items) {
		blkd_prefetch_free(p);
		return -ENOMEM;
	}
	ret = workq_new(n, 0, prefetch_one, p, &p->q);
	if (ret) {
		blkd_prefetch_free(p);
		return ret;
	}
	for (size_t i = 0; i < plan->n; i++) {
		p->items[i].chunk = plan->chunks[i];
		workq_push(p->q, &p->items[i].item); /* open and unbounded: cannot fail */
	}
	*out = p;
	return 0;
}

void blkd_prefetch_stop(struct blkd_prefetch *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_mutex_unlock(&p->lock);
	if (p->q)
		workq_close(p->q); /* the entries left are skipped; the fetches under way end */
}

void blkd_prefetch_get_stats(struct blkd_prefetch *p, struct blkd_prefetch_stats *st)
{
	pthread_mutex_lock(&p->lock);
	*st = p->st;
	pthread_mutex_unlock(&p->lock);
}

void blkd_prefetch_free(struct blkd_prefetch *p)
{
	if (!p)
		return;
	blkd_prefetch_stop(p);
	workq_free(p->q);
	pthread_mutex_destroy(&p->lock);
	free(p->items);
	trace_plan_free(p->plan);
	free(p);
}
