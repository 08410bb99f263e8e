/* SPDX-License-Identifier: MIT */
#include "prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../cas/chunk.h"

#define THREADS_MAX 64

struct blkd_prefetch {
	struct cas_source *src;
	const struct layout *l;
	struct trace_plan *plan;
	struct blkd_prefetch_opts o;
	pthread_t threads[THREADS_MAX];
	unsigned n_threads, running;
	pthread_mutex_t lock;    /* next, running, stop, the stats */
	size_t next;             /* the next plan entry to take */
	uint64_t reserved;       /* cache room claimed by the fetches under way */
	uint64_t worst;          /* the largest frame one chunk can have */
	bool stop, joined;
	struct blkd_prefetch_stats st;
};

static void *prefetch_main(void *arg)
{
	struct blkd_prefetch *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop && !p->st.cache_full && p->next < p->plan->n) {
		uint32_t c = p->plan->chunks[p->next++];
		size_t flen = 0;
		int ret;

		/*
		 * Room for the worst case of this chunk and of every fetch under way: a
		 * prefetch that could make the cache evict stops instead.
		 */
		if (!cas_source_has_room(p->src, p->reserved + p->worst)) {
			p->st.cache_full = true;
			break;
		}
		p->reserved += p->worst;
		pthread_mutex_unlock(&p->lock);
		ret = cas_source_fetch(p->src, p->l->chunks[c], p->l->hdr.chunk_size,
				       p->o.background, &flen);
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
	}
	if (--p->running == 0)
		p->st.finished = true;
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int blkd_prefetch_start(struct cas_source *src, const struct layout *l, struct trace_plan *plan,
			const struct blkd_prefetch_opts *o, struct blkd_prefetch **out)
{
	struct blkd_prefetch *p = calloc(1, sizeof(*p));
	unsigned n = o->threads ? o->threads : 1;

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
	p->worst = chunk_compress_bound(l->hdr.chunk_size);
	pthread_mutex_init(&p->lock, NULL);
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&p->threads[p->n_threads], NULL, prefetch_main, p))
			break;
		p->n_threads++;
		p->running++;
	}
	if (!p->n_threads)
		p->st.finished = true;
	pthread_mutex_unlock(&p->lock);
	if (!p->n_threads) {
		blkd_prefetch_free(p);
		return -EAGAIN;
	}
	*out = p;
	return 0;
}

static void join_all(struct blkd_prefetch *p)
{
	if (p->joined)
		return;
	for (unsigned i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	p->joined = true;
}

void blkd_prefetch_stop(struct blkd_prefetch *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_mutex_unlock(&p->lock);
	join_all(p);
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
	pthread_mutex_destroy(&p->lock);
	trace_plan_free(p->plan);
	free(p);
}
