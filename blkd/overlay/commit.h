/* SPDX-License-Identifier: MIT */
/*
 * lazyblk commit: the blocks a sandbox wrote (an overlay, or a delta of one) as a new
 * layout over the layout they were written on. Dirty blocks are packed in disk order into
 * chunks of the base's chunk size (cas/chunker.h: in parallel, zstd, deduplicated),
 * zeroed blocks (and written blocks of zeros) become zero runs. The new layout is a
 * version 2 layer whose parent is the base (docs/formats.md), or with flatten a version 1
 * layout of the whole disk that no longer needs the base's file (its chunks still).
 */
#ifndef LZ_BLKD_COMMIT_H
#define LZ_BLKD_COMMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"

struct blkd_commit_opts {
	const char *src_path;        /* OVERLAY (with OVERLAY.state) or a DELTA */
	const char *base_path;       /* the layout the overlay belongs to */
	const char *store_dir;       /* the new chunks go there */
	const char *out_path;        /* the new layout (written atomically) */
	bool flatten;                /* a layout of the merged disk, no parent */
	int level;                   /* zstd level */
	/* Blocks done of the dirty and zeroed ones; may be NULL. */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/* Non-zero (read atomically): stop, remove what was written, -ECANCELED. May be NULL. */
	const int *cancel;
};

struct blkd_commit_result {
	uint64_t blocks;             /* the overlay's dirty blocks (those of zeros: zero runs) */
	uint64_t zero_blocks;        /* its zeroed blocks */
	uint64_t chunks;             /* chunks the new blocks were packed into (repeats too) */
	uint64_t new_chunks;         /* of them, stored (not in the store, not seen before) */
	uint64_t new_bytes;          /* their compressed bytes */
	uint8_t digest[SHA256_LEN];  /* the new layout's digest */
	char hint[4096];             /* the parent hint written (empty with flatten) */
};

/*
 * 0, or -errno with one line in why (why_len bytes), e.g. "OVERLAY belongs to layout
 * sha256:…, not BASE.layout (sha256:…)"; nothing is left at out_path. Prints nothing.
 */
int blkd_commit(const struct blkd_commit_opts *o, struct blkd_commit_result *res, char *why,
		size_t why_len);

#endif
