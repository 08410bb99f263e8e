/* SPDX-License-Identifier: MIT */
/*
 * lazyblk warm: fill a store (a cache of a remote) with an image's chunks before it boots —
 * a trace's chunks in its order, then, if asked, every other chunk — through the same
 * prefetch threads as serve --prefetch, but in the foreground and at full priority. Chunks
 * are written atomically one by one, so a warm stopped at any point leaves a consistent
 * cache, and a second one fetches only what is missing.
 */
#ifndef LZ_BLKD_WARM_H
#define LZ_BLKD_WARM_H

#include <stdbool.h>
#include <stddef.h>

#include "../../cas/source.h"
#include "prefetch.h"

struct blkd_warm_opts {
	const char *layout_path;
	bool layout_fetched;         /* an image fetched by reference (layout_open_flags) */
	const char *manifest_path;   /* needed with trace_path */
	const char *trace_path;      /* NULL: no trace */
	bool all;
	struct cas_source_opts src;
};

struct blkd_warm;

/*
 * Open everything and start fetching. 0, or -errno with one line in why (why_len bytes, may
 * be 0): a trace of another image, a manifest that is not the layout's, a store or remote
 * that cannot be used. Prints nothing (the fetching threads log a chunk that fails).
 */
int blkd_warm_start(const struct blkd_warm_opts *o, struct blkd_warm **out, char *why,
		    size_t why_len);
struct blkd_prefetch *blkd_warm_prefetch(struct blkd_warm *w);
/* Files the trace read, and those found in this image (0, 0 without a trace). */
void blkd_warm_files(const struct blkd_warm *w, uint64_t *files, uint64_t *found);
void blkd_warm_free(struct blkd_warm *w);

#endif
