/* SPDX-License-Identifier: MIT */
/*
 * The progress of a walk over every file of a store (cas gc, cas verify): the chunks and the
 * plain copies looked at, of how many. The caller draws it; the walk prints nothing.
 */
#ifndef LZ_CAS_WALK_PROGRESS_H
#define LZ_CAS_WALK_PROGRESS_H

#include <stdint.h>

#include "store.h"

struct cas_walk_progress {
	/* Called after each file looked at (keep it cheap: rate-limit the drawing). */
	void (*fn)(void *arg, uint64_t done, uint64_t total);
	void *arg;
	uint64_t done, total;  /* the walk's: set by cas_walk_progress_start */
};

/*
 * Counts the chunks and plain copies of s (directory entries only, nothing opened) into
 * p->total, when p (may be NULL) has a fn; 0 or -errno.
 */
int cas_walk_progress_start(struct cas_walk_progress *p, struct store *s);
/* One more file looked at (p may be NULL). */
void cas_walk_progress_step(struct cas_walk_progress *p);

#endif
