/* SPDX-License-Identifier: MIT */
/*
 * Replaying a trace on an image: the chunks its file reads need, in the order it first read
 * them. The trace names files by path, so it applies to any layout of the manifest it was
 * recorded on, and to newer versions of that image as far as their paths still exist.
 */
#ifndef LZ_BLKD_TRACE_PLAN_H
#define LZ_BLKD_TRACE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../cas/manifest.h"
#include "../../cas/trace.h"
#include "../../layout/layout.h"
#include "../../common/test_hook.h"

struct trace_plan {
	uint32_t *chunks;        /* indexes into the layout's chunk table, each once */
	size_t n;                /* all of them */
	size_t n_trace;          /* the first n_trace are the trace's, in its order */
	uint64_t files;          /* distinct files the trace read */
	uint64_t files_found;    /* of them, regular files of this manifest */
	bool same_image;         /* recorded on this very manifest */
};

/*
 * t (may be NULL: no trace) against manifest m (needed with t) and layout l (made from m);
 * all: then every other chunk of l, in disk order. -ENOMEM.
 */
TEST_HOOK
int trace_plan_new(const struct trace *t, const struct manifest *m, const struct layout *l,
		   bool all, struct trace_plan **out);
void trace_plan_free(struct trace_plan *p);
/* Recorded on another image: another manifest, of which fewer than half the files exist here. */
TEST_HOOK
bool trace_plan_foreign(const struct trace_plan *p);

/*
 * For the engine (serve, run) and warm: 0, or -errno with one line in why (why_len bytes, may
 * be 0); nothing printed. trace_plan_manifest loads the manifest at path, which must be the
 * one layout l (at layout_path) was made from. trace_plan_load plans the trace at trace_path
 * (NULL: none, then m may be NULL) against m and l as trace_plan_new, and refuses a trace of
 * another image (-EINVAL).
 */
int trace_plan_manifest(const char *path, const struct layout *l, const char *layout_path,
			struct manifest **out, char *why, size_t why_len);
int trace_plan_load(const char *trace_path, const struct manifest *m, const struct layout *l,
		    bool all, struct trace_plan **out, char *why, size_t why_len);

#endif
