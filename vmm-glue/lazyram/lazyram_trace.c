/* SPDX-License-Identifier: MIT */
/*
 * The working set of a restore (issue 27, item 4): the first touch of each page by this
 * process's faults, in order, written as the RAM records of a trace (cas/trace.h, version
 * 2); and the check of a trace given to replay.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* Touches kept at most (16 MiB of them): past it, the trace is marked truncated. */
#define TOUCH_MAX (1u << 20)

void lr_touch_note(struct lazyram *lr, uint64_t page, uint64_t t_us)
{
	pthread_mutex_lock(&lr->lock);
	if (lr->ntouch == lr->cap_touch) {
		size_t cap = lr->cap_touch ? 2 * lr->cap_touch : 1024;
		void *p = cap <= TOUCH_MAX ? realloc(lr->touch, cap * sizeof(*lr->touch)) : NULL;

		if (!p) {
			lr->touch_truncated = true;
			pthread_mutex_unlock(&lr->lock);
			return;
		}
		lr->touch = p;
		lr->cap_touch = cap;
	}
	/* two handler threads may take their times in one order and get here in the other */
	if (lr->ntouch && t_us < lr->touch[lr->ntouch - 1].t_us)
		t_us = lr->touch[lr->ntouch - 1].t_us;
	lr->touch[lr->ntouch++] = (struct lr_touch){ .page = page, .t_us = t_us };
	pthread_mutex_unlock(&lr->lock);
}

int lr_trace_check(const struct lazyram_opts *o, char *why, size_t why_len)
{
	const struct trace *t = o->prefetch;

	if (!t)
		return 0;
	if (memcmp(t->hdr->snapshot_id, o->id, LAZYRAM_ID_LEN))
		return why_set(why, why_len, -EINVAL, "--prefetch: the trace was recorded on "
			       "another snapshot (or holds no RAM records)");
	return 0;
}

/* The touches as records: a page right after the record before joins it. */
static size_t to_records(struct lazyram *lr, struct trace_record *rec)
{
	size_t n = 0;

	for (size_t i = 0; i < lr->ntouch; i++) {
		const struct lr_touch *x = &lr->touch[i];
		struct trace_record *r = n ? &rec[n - 1] : NULL;

		if (r && r->disk_off + r->len == x->page * LAZYRAM_PAGE &&
		    r->len <= UINT32_MAX - LAZYRAM_PAGE) {
			r->len += LAZYRAM_PAGE;
			continue;
		}
		rec[n++] = (struct trace_record){ .t_us = x->t_us, .path = TRACE_PATH_RAM,
						  .disk_off = x->page * LAZYRAM_PAGE,
						  .len = LAZYRAM_PAGE };
	}
	return n;
}

int lazyram_trace_write(struct lazyram *lr, const char *path, char *why, size_t why_len)
{
	struct trace_header h = { .created = (uint64_t)time(NULL) };
	struct trace_record *rec;
	size_t n;
	int ret;

	if (!lr->o.record)
		return why_set(why, why_len, -EINVAL, "the restore did not record its touches");
	pthread_mutex_lock(&lr->lock);
	rec = malloc((lr->ntouch ? lr->ntouch : 1) * sizeof(*rec));
	if (!rec) {
		pthread_mutex_unlock(&lr->lock);
		return -ENOMEM;
	}
	n = to_records(lr, rec);
	h.duration_us = lr->base ? lr_now_us(lr) : 0;
	if (lr->touch_truncated)
		h.flags |= TRACE_F_TRUNCATED;
	pthread_mutex_unlock(&lr->lock);
	memcpy(h.snapshot_id, lr->o.id, LAZYRAM_ID_LEN);
	ret = trace_write(path, &h, rec, n, "", 1);
	free(rec);
	return ret ? why_set(why, why_len, ret, "%s: %s", path, strerror(-ret)) : 0;
}
