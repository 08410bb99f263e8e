/* SPDX-License-Identifier: MIT */
#include "gc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "plain.h"

static int digest_cmp(const void *a, const void *b)
{
	return memcmp(a, b, SHA256_LEN);
}

struct walk {
	struct store *s;
	const uint8_t (*keep)[SHA256_LEN];
	size_t n_keep;
	struct cas_gc_result *res;
	struct cas_walk_progress *progress;
	int64_t cutoff;        /* remove what is not newer than this (seconds) */
	uint64_t orphan_bytes; /* plain copies removed without their chunk: never counted */
	bool dry_run;
};

static int walk_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct walk *w = arg;
	struct cas_gc_result *res = w->res;
	struct stat st;
	uint64_t plain;
	int ret;

	cas_walk_progress_step(w->progress);
	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return 0; /* gone meanwhile, or not a chunk file */
	if (w->n_keep && bsearch(d, w->keep, w->n_keep, SHA256_LEN, digest_cmp)) {
		res->kept++;
		res->kept_bytes += (uint64_t)st.st_size;
		return 0;
	}
	if ((int64_t)st.st_mtim.tv_sec > w->cutoff) {
		res->young++;
		res->young_bytes += (uint64_t)st.st_size;
		return 0;
	}
	if (!w->dry_run) {
		ret = store_remove_sized(w->s, d, &plain);
		if (plain) {
			res->plain_removed++;
			res->plain_removed_bytes += plain;
		}
		if (ret == -ENOENT)
			return 0; /* evicted or removed meanwhile */
		if (ret)
			return ret;
	} else if ((plain = store_plain_size(w->s, d))) {
		res->plain_removed++;
		res->plain_removed_bytes += plain;
	}
	res->removed++;
	res->removed_bytes += (uint64_t)st.st_size;
	return 0;
}

/* A plain copy whose chunk is gone (a crash between the two removals, or a copy made by hand). */
static int orphan_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct walk *w = arg;
	struct stat st;
	uint64_t bytes;
	int ret;

	cas_walk_progress_step(w->progress);
	if (lstat(path, &st) < 0)
		return 0;
	ret = store_has(w->s, d);
	if (ret)
		return ret < 0 ? ret : 0;
	if ((int64_t)st.st_mtim.tv_sec > w->cutoff)
		return 0; /* its chunk may be on its way (a writer at work) */
	if (!w->dry_run) {
		ret = plain_remove(w->s, d, &bytes);
		if (ret == -ENOENT)
			return 0;
		if (ret)
			return ret;
	}
	w->res->plain_orphans++;
	w->res->plain_removed_bytes += (uint64_t)st.st_size;
	w->orphan_bytes += (uint64_t)st.st_size;
	return 0;
}

int cas_gc(struct store *s, const uint8_t (*keep)[SHA256_LEN], size_t n_keep,
	   uint64_t grace_secs, bool dry_run, struct cas_walk_progress *progress,
	   struct cas_gc_result *res)
{
	struct walk w = { .s = s, .keep = keep, .n_keep = n_keep, .res = res, .dry_run = dry_run,
			  .progress = progress };
	struct timespec now;
	int lock_fd = -1, ret;

	memset(res, 0, sizeof(*res));
	res->referenced = n_keep;
	clock_gettime(CLOCK_REALTIME, &now);
	w.cutoff = grace_secs > (uint64_t)now.tv_sec ? INT64_MIN
						      : (int64_t)now.tv_sec - (int64_t)grace_secs;
	if (!dry_run) {
		lock_fd = cache_store_lock(s);
		if (lock_fd < 0)
			return lock_fd;
	}
	ret = cas_walk_progress_start(progress, s);
	if (!ret)
		ret = store_foreach(s, walk_one, &w);
	if (!ret)
		ret = store_foreach_plain(s, orphan_one, &w);
	/* orphans were never counted: a rescan counts a plain copy with its chunk only */
	if (!dry_run)
		cache_store_unlock(s, lock_fd, res->removed_bytes + res->plain_removed_bytes -
						       w.orphan_bytes);
	res->missing = res->referenced - res->kept;
	return ret;
}

int cas_gc_tmp(struct store *s, uint64_t grace_secs, bool dry_run, struct cas_gc_result *res)
{
	struct store_tmp_count c;
	int ret = store_tmp_sweep(s, grace_secs, dry_run ? STORE_SWEEP_DRY_RUN : 0, &c);

	res->tmp_removed = c.stale;
	res->tmp_bytes = c.stale_bytes;
	res->tmp_young = c.young;
	res->tmp_young_bytes = c.young_bytes;
	return ret;
}
