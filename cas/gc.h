/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection of a local store: remove every chunk that is not in a set of chunks to
 * keep (the CLI collects it from layouts and manifests), unless it is younger than a grace
 * period (by mtime), so chunks that
 * a running import has written but not yet named in a manifest stay. The plain copies
 * (STORE/plain) of the chunks removed go too, and those older than the grace period whose
 * chunk is not in the store. cas_gc_tmp removes the staging files in STORE/tmp that killed
 * or crashed writers left (store_tmp_sweep), with a grace period of its own.
 *
 * Runs under STORE/cache.lock (cache_store_lock), so no cache on the same store evicts
 * meanwhile, and subtracts what it removed from the cache's usage counter.
 */
#ifndef LZ_CAS_GC_H
#define LZ_CAS_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"
#include "walk_progress.h"

struct cas_gc_result {
	uint64_t referenced;            /* distinct digests to keep */
	uint64_t kept, kept_bytes;      /* referenced chunks present in the store */
	uint64_t missing;               /* referenced chunks absent from the store */
	uint64_t young, young_bytes;    /* unreferenced but within the grace period: left */
	uint64_t removed, removed_bytes;/* unreferenced and old: removed (dry run: would be) */
	uint64_t tmp_removed, tmp_bytes;/* cas_gc_tmp: stale staging files removed (dry run:
					   would be) */
	uint64_t tmp_young, tmp_young_bytes; /* cas_gc_tmp: staging files within its grace */
	uint64_t plain_removed;         /* plain copies removed with their chunk */
	uint64_t plain_orphans;         /* plain copies without a chunk, older than the grace */
	uint64_t plain_removed_bytes;   /* of both */
	/* cas_gc_layouts: files of STORE/layouts/ (fetched layouts and their manifests) */
	uint64_t layouts_kept;          /* of a kept image's chain */
	uint64_t layouts_young;         /* of no kept image, within the grace period: left */
	uint64_t layouts_removed, layouts_removed_bytes; /* removed (dry run: would be) */
};

/*
 * keep: sorted, distinct digests (may be empty only if the caller means it: then every old
 * chunk goes). Bytes are st_size. dry_run: count, remove nothing. progress (may be NULL):
 * the chunks and plain copies looked at. 0 or -errno (res then holds what was done so far).
 */
int cas_gc(struct store *s, const uint8_t (*keep)[SHA256_LEN], size_t n_keep,
	   uint64_t grace_secs, bool dry_run, struct cas_walk_progress *progress,
	   struct cas_gc_result *res);
/*
 * STORE/layouts/, where images fetched by reference land: remove each <hex>.layout whose
 * layout digest is not in keep_layouts (sorted, distinct: the layout files of the kept
 * images' chains) and each <hex>.manifest (an image's manifest, named by its top layout)
 * whose hex is not either, unless modified less than grace_secs ago (a fetch, or the reuse
 * of a file already there, sets its mtime). Other names are left alone. Sets only the
 * layouts_* fields of res. 0 or -errno.
 */
int cas_gc_layouts(struct store *s, const uint8_t (*keep_layouts)[SHA256_LEN], size_t n_keep,
		   uint64_t grace_secs, bool dry_run, struct cas_gc_result *res);
/*
 * Remove the staging files in STORE/tmp, and the temporary files of fetches in
 * STORE/layouts/ (<hex>.layout.tmp.XXXXXX, <hex>.manifest.tmp.XXXXXX), older than grace_secs
 * (dry_run: count them); sets only the tmp_* fields of res. Needs no keep set and no lock.
 * 0 or -errno.
 */
int cas_gc_tmp(struct store *s, uint64_t grace_secs, bool dry_run, struct cas_gc_result *res);

#endif
