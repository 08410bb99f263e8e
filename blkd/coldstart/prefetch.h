/* SPDX-License-Identifier: MIT */
/*
 * Fetching a plan's chunks into the store ahead of use: in the background while a guest
 * runs (serve/run --prefetch: background priority, so demand reads go first), or in the
 * foreground (lazyblk warm). A few threads walk the plan in order; each chunk is fetched and
 * verified once (a demand read of it meanwhile joins that fetch). Under a bounded cache the
 * prefetch stops where the next chunk could make the cache evict: it never pushes out what
 * the guest or the prefetch itself brought in.
 */
#ifndef LZ_BLKD_PREFETCH_H
#define LZ_BLKD_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "../../cas/source.h"
#include "../../layout/layout.h"
#include "trace_plan.h"

struct blkd_prefetch;

struct blkd_prefetch_opts {
	unsigned threads;        /* fetches at once (0: 1) */
	bool background;         /* REMOTE_PRIO_BG */
	uint8_t *marks;          /* may be NULL: layout chunk -> 1 once prefetched (fetched now) */
};

struct blkd_prefetch_stats {
	uint64_t planned;        /* chunks in the plan */
	uint64_t done;           /* walked: fetched, present already, or failed */
	uint64_t fetched, fetched_bytes;   /* taken from the remote now (frame bytes) */
	uint64_t present;        /* in the store already */
	uint64_t failed;
	bool cache_full;         /* stopped: the next chunk could make the cache evict */
	bool finished;           /* the walk has ended (plan walked, stopped, or full) */
};

/* Takes plan; borrows src and l until stopped. Prints nothing. -errno. */
int blkd_prefetch_start(struct cas_source *src, const struct layout *l, struct trace_plan *plan,
			const struct blkd_prefetch_opts *o, struct blkd_prefetch **out);
/* Ask the threads to end after the chunk each is fetching (a consistent store), and wait. */
void blkd_prefetch_stop(struct blkd_prefetch *p);
void blkd_prefetch_get_stats(struct blkd_prefetch *p, struct blkd_prefetch_stats *st);
/* Stop (if running) and free. NULL is a no-op. */
void blkd_prefetch_free(struct blkd_prefetch *p);

#endif
