/* SPDX-License-Identifier: MIT */
#include "warm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/why.h"
#include "trace_plan.h"

struct blkd_warm {
	struct layout *l;
	struct manifest *m;
	struct cas_source *src;
	struct blkd_prefetch *p;
	uint64_t files, found;
};

static int warm_plan(const struct blkd_warm_opts *o, struct blkd_warm *w,
		     struct trace_plan **plan, char *why, size_t why_len)
{
	int ret = o->trace_path ? trace_plan_manifest(o->manifest_path, w->l, o->layout_path,
						       &w->m, why, why_len) : 0;

	if (!ret)
		ret = trace_plan_load(o->trace_path, w->m, w->l, o->all, plan, why, why_len);
	if (ret)
		return ret;
	w->files = (*plan)->files;
	w->found = (*plan)->files_found;
	return 0;
}

int blkd_warm_start(const struct blkd_warm_opts *o, struct blkd_warm **out, char *why,
		    size_t why_len)
{
	struct blkd_warm *w = calloc(1, sizeof(*w));
	struct blkd_prefetch_opts po = { .background = false };
	struct trace_plan *plan;
	char lwhy[WHY_MAX] = "";
	int ret;

	if (why_len)
		why[0] = '\0';
	if (!w)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	ret = layout_open_flags(o->layout_path, o->layout_fetched ? LAYOUT_OPEN_FETCHED : 0, &w->l,
				lwhy, sizeof(lwhy));
	if (ret) {
		why_set(why, why_len, ret, "%s: %s", o->layout_path, lwhy[0] ? lwhy : strerror(-ret));
		goto fail;
	}
	ret = warm_plan(o, w, &plan, why, why_len);
	if (ret)
		goto fail;
	ret = cas_source_open(&o->src, &w->src, why, why_len);
	if (ret) {
		trace_plan_free(plan);
		goto fail;
	}
	po.threads = o->src.concurrency ? o->src.concurrency : REMOTE_CONCURRENCY_DEFAULT;
	ret = blkd_prefetch_start(w->src, w->l, plan, &po, &w->p);
	if (ret) {
		why_set(why, why_len, ret, "cannot start fetching: %s", strerror(-ret));
		goto fail;
	}
	*out = w;
	return 0;
fail:
	blkd_warm_free(w);
	return ret;
}

struct blkd_prefetch *blkd_warm_prefetch(struct blkd_warm *w)
{
	return w->p;
}

void blkd_warm_files(const struct blkd_warm *w, uint64_t *files, uint64_t *found)
{
	*files = w->files;
	*found = w->found;
}

void blkd_warm_free(struct blkd_warm *w)
{
	if (!w)
		return;
	blkd_prefetch_free(w->p);
	cas_source_close(w->src);
	manifest_free(w->m);
	layout_close(w->l);
	free(w);
}
