/* SPDX-License-Identifier: MIT */
#include "walk_progress.h"

#include <stddef.h>

static int count_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	(void)d;
	(void)path;
	(*(uint64_t *)arg)++;
	return 0;
}

int cas_walk_progress_start(struct cas_walk_progress *p, struct store *s)
{
	uint64_t n = 0;
	int ret;

	if (!p || !p->fn)
		return 0;
	p->done = 0;
	ret = store_foreach(s, count_one, &n);
	if (!ret)
		ret = store_foreach_plain(s, count_one, &n);
	p->total = n;
	return ret;
}

void cas_walk_progress_step(struct cas_walk_progress *p)
{
	if (!p || !p->fn)
		return;
	p->done++;
	p->fn(p->arg, p->done, p->done > p->total ? p->done : p->total);
}
