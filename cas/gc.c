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

/* ------------------------------------------------------------------ STORE/layouts */

enum layouts_name { LN_OTHER, LN_FILE, LN_TMP };

/*
 * What a name of STORE/layouts/ is: a fetched file <hex>.layout or <hex>.manifest (d: its
 * hex), the temporary file of a fetch (<that>.tmp.XXXXXX), or another name.
 */
static enum layouts_name layouts_name(const char *name, uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1], canon[SHA256_HEX_LEN + 1];
	const char *rest = name + SHA256_HEX_LEN;
	size_t n;

	if (strlen(name) <= SHA256_HEX_LEN)
		return LN_OTHER;
	memcpy(hex, name, SHA256_HEX_LEN);
	hex[SHA256_HEX_LEN] = '\0';
	if (sha256_from_hex(hex, d))
		return LN_OTHER;
	sha256_to_hex(d, canon);
	if (strcmp(canon, hex))
		return LN_OTHER; /* names are lowercase: anything else is not ours */
	n = !strncmp(rest, ".layout", 7) ? 7 : !strncmp(rest, ".manifest", 9) ? 9 : 0;
	if (!n)
		return LN_OTHER;
	if (!rest[n])
		return LN_FILE;
	return !strncmp(rest + n, ".tmp.", 5) && strlen(rest + n + 5) == 6 ? LN_TMP : LN_OTHER;
}

/* Each name of STORE/layouts/ of kind want, with its lstat: cb(arg, dfd, name, d, st). */
static int layouts_walk(struct store *s, enum layouts_name want,
			int (*cb)(void *arg, int dfd, const char *name, const uint8_t *d,
				  const struct stat *st),
			void *arg)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *dir;
	int dfd, ret = 0;

	if (snprintf(path, sizeof(path), "%s/layouts", store_dir(s)) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	dir = fdopendir(dfd);
	if (!dir) {
		close(dfd);
		return -errno;
	}
	while (!ret && (de = readdir(dir))) {
		uint8_t d[SHA256_LEN];
		struct stat st;

		if (layouts_name(de->d_name, d) != want ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* not ours, or gone meanwhile */
		ret = cb(arg, dfd, de->d_name, d, &st);
	}
	closedir(dir);
	return ret;
}

struct layouts_gc {
	const uint8_t (*keep)[SHA256_LEN];
	size_t n_keep;
	int64_t cutoff;
	bool dry_run;
	struct cas_gc_result *res;
};

static int layouts_one(void *arg, int dfd, const char *name, const uint8_t *d,
		       const struct stat *st)
{
	struct layouts_gc *g = arg;

	if (g->n_keep && bsearch(d, g->keep, g->n_keep, SHA256_LEN, digest_cmp)) {
		g->res->layouts_kept++;
		return 0;
	}
	if ((int64_t)st->st_mtim.tv_sec > g->cutoff) {
		g->res->layouts_young++;
		return 0;
	}
	if (!g->dry_run && unlinkat(dfd, name, 0) < 0)
		return errno == ENOENT || errno == EISDIR ? 0 : -errno;
	g->res->layouts_removed++;
	g->res->layouts_removed_bytes += S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0;
	return 0;
}

static int64_t cutoff_of(uint64_t grace_secs)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return grace_secs > (uint64_t)now.tv_sec ? INT64_MIN
						 : (int64_t)now.tv_sec - (int64_t)grace_secs;
}

int cas_gc_layouts(struct store *s, const uint8_t (*keep_layouts)[SHA256_LEN], size_t n_keep,
		   uint64_t grace_secs, bool dry_run, struct cas_gc_result *res)
{
	struct layouts_gc g = { keep_layouts, n_keep, cutoff_of(grace_secs), dry_run, res };

	res->layouts_kept = res->layouts_young = 0;
	res->layouts_removed = res->layouts_removed_bytes = 0;
	return layouts_walk(s, LN_FILE, layouts_one, &g);
}

static int layouts_tmp_one(void *arg, int dfd, const char *name, const uint8_t *d,
			   const struct stat *st)
{
	struct layouts_gc *g = arg;

	(void)d;
	if ((int64_t)st->st_mtim.tv_sec > g->cutoff) {
		g->res->tmp_young++;
		g->res->tmp_young_bytes += (uint64_t)st->st_size;
		return 0;
	}
	if (!g->dry_run && unlinkat(dfd, name, 0) < 0)
		return errno == ENOENT || errno == EISDIR ? 0 : -errno;
	g->res->tmp_removed++;
	g->res->tmp_bytes += (uint64_t)st->st_size;
	return 0;
}

int cas_gc_tmp(struct store *s, uint64_t grace_secs, bool dry_run, struct cas_gc_result *res)
{
	struct layouts_gc g = { NULL, 0, cutoff_of(grace_secs), dry_run, res };
	struct store_tmp_count c;
	int ret = store_tmp_sweep(s, grace_secs, dry_run ? STORE_SWEEP_DRY_RUN : 0, &c);

	res->tmp_removed = c.stale;
	res->tmp_bytes = c.stale_bytes;
	res->tmp_young = c.young;
	res->tmp_young_bytes = c.young_bytes;
	return ret ? ret : layouts_walk(s, LN_TMP, layouts_tmp_one, &g);
}
