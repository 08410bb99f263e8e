/* SPDX-License-Identifier: MIT */
#include "gc.h"

#include <dirent.h>
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

/* A staging name: 64 hex digits and a '.' (then the writer's pid and sequence number). */
static bool is_staging_name(const char *name)
{
	for (int i = 0; i < SHA256_HEX_LEN; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return name[SHA256_HEX_LEN] == '.';
}

static int tmp_clean(struct walk *w)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dir;
	int fd, ret = 0;

	if (snprintf(path, sizeof(path), "%s/tmp", store_dir(w->s)) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? 0 : -errno;
	fd = dirfd(dir);
	while ((de = readdir(dir)) != NULL) {
		struct stat st;

		if (!is_staging_name(de->d_name))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if ((int64_t)st.st_mtim.tv_sec > w->cutoff)
			continue; /* a writer may still be at work */
		if (!w->dry_run && unlinkat(fd, de->d_name, 0) < 0) {
			if (errno == ENOENT)
				continue;
			ret = -errno;
			break;
		}
		w->res->tmp_removed++;
		w->res->tmp_bytes += (uint64_t)st.st_size;
	}
	closedir(dir);
	return ret;
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
	if (!ret)
		ret = tmp_clean(&w);
	/* orphans were never counted: a rescan counts a plain copy with its chunk only */
	if (!dry_run)
		cache_store_unlock(s, lock_fd, res->removed_bytes + res->plain_removed_bytes -
						       w.orphan_bytes);
	res->missing = res->referenced - res->kept;
	return ret;
}
