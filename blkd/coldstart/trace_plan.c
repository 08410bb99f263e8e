/* SPDX-License-Identifier: MIT */
#include "trace_plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/why.h"
#include "trace_index.h"

struct plan_ctx {
	struct trace_plan *p;
	uint8_t *seen;           /* layout chunk -> in the plan */
};

static int plan_add(void *arg, uint32_t chunk)
{
	struct plan_ctx *c = arg;

	if (!c->seen[chunk]) {
		c->seen[chunk] = 1;
		c->p->chunks[c->p->n++] = chunk;
	}
	return 0;
}

struct plan_trace_ctx {
	struct plan_ctx *c;
	const struct trace_index *x;
};

static int plan_range(void *arg, const struct mf_entry *e, uint64_t file_off, uint32_t len)
{
	struct plan_trace_ctx *k = arg;

	return trace_index_file_chunks(k->x, e, file_off, len, plan_add, k->c);
}

int trace_plan_new(const struct trace *t, const struct manifest *m, const struct layout *l,
		   bool all, struct trace_plan **out)
{
	struct trace_plan *p = calloc(1, sizeof(*p));
	struct plan_ctx c = { .p = p };
	size_t n = l->hdr.chunk_count;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	p->chunks = malloc((n ? n : 1) * sizeof(*p->chunks));
	c.seen = calloc(n ? n : 1, 1);
	if (!p->chunks || !c.seen) {
		ret = -ENOMEM;
		goto out;
	}
	if (t) {
		struct trace_index *x;

		p->same_image = !memcmp(t->hdr->manifest_digest, m->digest, SHA256_LEN);
		ret = trace_index_new(m, l, &x);
		if (ret)
			goto out;
		ret = trace_for_each_file(t, m, plan_range, &(struct plan_trace_ctx){ &c, x },
					  &p->files, &p->files_found);
		trace_index_free(x);
	}
	p->n_trace = p->n;
	if (all)
		for (uint64_t i = 0; i < l->hdr.data_run_count; i++)
			plan_add(&c, l->data_runs[i].chunk);
out:
	free(c.seen);
	if (ret) {
		trace_plan_free(p);
		return ret;
	}
	*out = p;
	return 0;
}

void trace_plan_free(struct trace_plan *p)
{
	if (!p)
		return;
	free(p->chunks);
	free(p);
}

bool trace_plan_foreign(const struct trace_plan *p)
{
	return !p->same_image && p->files_found * 2 < p->files + (p->files == 0);
}

int trace_plan_manifest(const char *path, const struct layout *l, const char *layout_path,
			struct manifest **out, char *why, size_t why_len)
{
	char mwhy[WHY_MAX] = "";
	int ret = manifest_load(path, out, mwhy, sizeof(mwhy));

	if (ret)
		return why_set(why, why_len, ret, "%s: %s", path, mwhy[0] ? mwhy : strerror(-ret));
	if (memcmp((*out)->digest, l->hdr.manifest_digest, SHA256_LEN)) {
		manifest_free(*out);
		*out = NULL;
		return why_set(why, why_len, -EINVAL, "%s: not the manifest %s was made from", path,
			       layout_path);
	}
	return 0;
}

int trace_plan_load(const char *trace_path, const struct manifest *m, const struct layout *l,
		    bool all, struct trace_plan **out, char *why, size_t why_len)
{
	struct trace *t = NULL;
	char twhy[WHY_MAX] = "";
	int ret;

	if (trace_path) {
		ret = trace_load(trace_path, &t, twhy, sizeof(twhy));
		if (ret)
			return why_set(why, why_len, ret, "%s: %s", trace_path,
				       twhy[0] ? twhy : strerror(-ret));
	}
	ret = trace_plan_new(t, m, l, all, out);
	trace_free(t);
	if (ret)
		return why_set(why, why_len, ret, "cannot plan the fetches: %s", strerror(-ret));
	if (trace_path && trace_plan_foreign(*out)) {
		why_set(why, why_len, -EINVAL, "%s: recorded on another image (%llu of the %llu "
			"files it read exist in this one)", trace_path,
			(unsigned long long)(*out)->files_found, (unsigned long long)(*out)->files);
		trace_plan_free(*out);
		return -EINVAL;
	}
	return 0;
}
