/* SPDX-License-Identifier: MIT */
/*
 * Replaying a recorded working set (issue 27, item 4): one thread takes the RAM records of
 * the trace in order and, for each chunk not filled yet, fetches it at background priority
 * (cas_source_fetch), fills the cache file, and maps the chunk's pages into this process
 * ahead of the guest (UFFDIO_CONTINUE; pages mapped or written meanwhile are skipped).
 *
 * Demand faults first: one chunk at a time, so a handler never waits behind more than the
 * fetch of the chunk it needs itself, and a demand ask of the chunk under way joins its
 * flight at the chain's head and raises it to demand priority (cas/tier/chain.c). A chunk
 * that cannot be had is skipped here: the page's own fault, if it comes, says why.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

/* Map the filled pages of chunk c not mapped here, a run of consecutive pages at a time. */
static void map_chunk(struct lazyram *lr, uint32_t c)
{
	const struct rammap *m = lr->m;
	const uint32_t *u = m->users + m->user_off[c];
	size_t n = m->user_off[c + 1] - m->user_off[c];

	for (size_t i = 0; i < n;) {
		size_t run = 1;
		int ret;

		if (lr_bit(lr->mapped, u[i]) || !lr_bit(lr->c.filled, u[i])) {
			i++;
			continue;
		}
		while (i + run < n && u[i + run] == u[i] + run && !lr_bit(lr->mapped, u[i + run]) &&
		       lr_bit(lr->c.filled, u[i + run]))
			run++;
		ret = lr_map_range(lr, false, u[i], run);
		if (ret >= 0 && (size_t)ret < run)
			atomic_fetch_add(&lr->st.pf_pages, run - (size_t)ret);
		i += run;
	}
}

static void prefetch_page(struct lazyram *lr, uint8_t *done, uint64_t p)
{
	uint32_t c = lr->m->pages[p].chunk;
	char why[WHY_MAX];

	if (!c || done[c - 1])
		return;
	done[c - 1] = 1;
	why[0] = '\0';
	if (!lr_bit(lr->c.filled, p) && lr_fill_chunk(lr, c - 1, true, why, sizeof(why)))
		return;
	atomic_fetch_add(&lr->st.pf_chunks, 1);
	map_chunk(lr, c - 1);
}

static void *prefetch_main(void *arg)
{
	struct lazyram *lr = arg;
	const struct trace *t = lr->o.prefetch;
	uint8_t *done = calloc(lr->m->nchunks ? lr->m->nchunks : 1, 1);

	for (size_t i = 0; done && i < t->n_records; i++) {
		const struct trace_record *r = &t->records[i];
		uint64_t first = r->disk_off / LAZYRAM_PAGE, end = first + r->len / LAZYRAM_PAGE;

		if (!trace_record_is_ram(r))
			continue;
		for (uint64_t p = first; p < end && p < lr->m->npages; p++) {
			if (atomic_load(&lr->pf_stop))
				goto out;
			prefetch_page(lr, done, p);
		}
	}
out:
	atomic_store(&lr->st.pf_done, !atomic_load(&lr->pf_stop));
	free(done);
	return NULL;
}

int lr_prefetch_start(struct lazyram *lr)
{
	int ret = pthread_create(&lr->pf, NULL, prefetch_main, lr);

	if (ret)
		return -ret;
	lr->pf_running = true;
	return 0;
}
