/* SPDX-License-Identifier: MIT */
/*
 * The size-bounded disk cache (cache.h).
 *
 * Sizes are st_size of the chunk files (the bytes a chunk occupies as far as the store and a
 * remote are concerned) plus st_size of their plain copies (STORE/plain, cas/plain.h), not
 * st_blocks: the counter, the rescans and gc all use st_size, so
 * they agree with `lazyblk cas stats` (stored bytes) whatever the file system's allocation.
 *
 * How the shared counter stays exact. Every change to the set of chunk files is one of:
 *   - an addition: cache_put() renames the file in (store_put_cached) and adds its size;
 *     cache_put_plain() adds a plain copy of a chunk that is present, and its size;
 *   - a removal by a caller (a corrupt chunk): cache_drop() unlinks and subtracts;
 *   - an eviction or a gc: unlink, then subtract what was really unlinked.
 * Additions and caller removals hold STORE/cache.lock *shared* (flock LOCK_SH, on an open
 * file description of their own, taken by the first such thread of the process and dropped
 * by the last) around the file operation and its counter update; evictions, rescans and gc
 * hold it *exclusive*. Inside one process a rwlock does the same between threads (flock
 * cannot: locks belong to open file descriptions, not threads). So a rescan never overlaps an
 * addition or a removal: what it counts is exactly what the counter should say, and it sets
 * the counter to that (as an atomic correction, S - U0). The only remaining error is a
 * process that dies between a rename and its add, which leaves the counter low by that chunk
 * until the next rescan. cache_added()/cache_removed() are the bare counter updates, for
 * callers that hold no lock and accept that error.
 */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/grow.h"
#include "../common/log.h"
#include "plain.h"

#define CACHE_STATE_MAGIC "LZBKCACH"
#define CACHE_STATE_VERSION 1
#define CACHE_STATE_SIZE 4096

/* STORE/cache.state, mapped shared. */
struct cache_state {
	char magic[8];     /* written last, once used is right */
	uint32_t version;
	uint32_t reserved;
	uint64_t used;     /* bytes of chunk files; __atomic operations only */
};

_Static_assert(sizeof(struct cache_state) <= CACHE_STATE_SIZE, "cache state");

struct cache {
	struct store *s;
	uint64_t limit;
	int lock_fd;                /* STORE/cache.lock: one open file description per cache */
	int sh_fd;                  /* another one, for the shared lock of additions/removals */
	pthread_rwlock_t rw;        /* this process: additions/removals read, eviction write */
	pthread_mutex_t sh_lock;    /* sh_count, and taking/dropping the shared flock */
	unsigned sh_count;          /* threads inside an addition or removal */
	struct cache_state *state;  /* the mapping */
	pthread_mutex_t evict_lock; /* the threads of this process: one evicts, the rest wait */
	/* this process's statistics, __atomic */
	uint64_t evictions, evicted_bytes, scans;
	bool warned;
};

static int store_file_open(struct store *s, const char *name, int flags)
{
	char path[PATH_MAX];
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", store_dir(s), name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	/* lazyblk's own names: a link there is not followed, a terminal never made ours */
	fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
	return fd < 0 ? -errno : fd;
}

static int lock_ex(int fd)
{
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static void counter_add(struct cache_state *st, uint64_t n)
{
	__atomic_add_fetch(&st->used, n, __ATOMIC_RELAXED);
}

/* Saturating: a counter that erred low never wraps to a huge value. */
static void counter_sub(struct cache_state *st, uint64_t n)
{
	uint64_t old = __atomic_load_n(&st->used, __ATOMIC_RELAXED), nv;

	do {
		nv = old > n ? old - n : 0;
	} while (!__atomic_compare_exchange_n(&st->used, &old, nv, true, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
}

/* Add S - U0 (see the top of the file). */
static void counter_correct(struct cache_state *st, uint64_t u0, uint64_t scanned)
{
	if (scanned >= u0)
		counter_add(st, scanned - u0);
	else
		counter_sub(st, u0 - scanned);
}

static bool state_valid(const struct cache_state *st)
{
	char magic[8];

	for (size_t i = 0; i < sizeof(magic); i++)
		magic[i] = __atomic_load_n(&st->magic[i], __ATOMIC_ACQUIRE);
	return !memcmp(magic, CACHE_STATE_MAGIC, sizeof(magic)) &&
	       st->version == CACHE_STATE_VERSION;
}

/* ------------------------------------------------------------------ scanning */

struct entry {
	int64_t mtime_ns;
	uint64_t size;
	uint8_t digest[SHA256_LEN];
};

struct scan {
	struct store *s;
	struct entry *e;
	size_t n, cap;
	uint64_t total;
	bool keep_entries; /* false: only the total */
};

static int scan_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct scan *sc = arg;
	struct stat st;

	if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return 0; /* gone meanwhile, or not a chunk file */
	sc->total += (uint64_t)st.st_size + store_plain_size(sc->s, d);
	if (!sc->keep_entries)
		return 0;
	if (!grow_from((void **)&sc->e, &sc->cap, sc->n + 1, sizeof(*sc->e), 1024))
		return -ENOMEM;
	sc->e[sc->n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
	sc->e[sc->n].size = (uint64_t)st.st_size;
	memcpy(sc->e[sc->n].digest, d, SHA256_LEN);
	sc->n++;
	return 0;
}

/* Oldest first; equal times by name, so the order is the same in every process. */
static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	if (x->mtime_ns != y->mtime_ns)
		return x->mtime_ns < y->mtime_ns ? -1 : 1;
	return memcmp(x->digest, y->digest, SHA256_LEN);
}

/* ------------------------------------------------------------------ open / close */

/* Called with the lock held: make the state valid with a fresh count. */
static int state_init(struct cache *c)
{
	struct scan sc = { .s = c->s };
	uint64_t u0;
	int ret;

	if (state_valid(c->state))
		return 0; /* another process did it while we waited for the lock */
	/*
	 * Nobody else writes a correct count into an invalid state (they may be adding to
	 * it, if it was corrupted under them), so correct from what it holds now.
	 */
	c->state->version = CACHE_STATE_VERSION;
	c->state->reserved = 0;
	u0 = __atomic_load_n(&c->state->used, __ATOMIC_RELAXED);
	ret = store_foreach(c->s, scan_one, &sc);
	if (ret)
		return ret;
	__atomic_add_fetch(&c->scans, 1, __ATOMIC_RELAXED);
	counter_correct(c->state, u0, sc.total);
	for (size_t i = 0; i < sizeof(c->state->magic); i++)
		__atomic_store_n(&c->state->magic[i], CACHE_STATE_MAGIC[i], __ATOMIC_RELEASE);
	return 0;
}

int cache_open(struct store *s, uint64_t limit, struct cache **out)
{
	struct cache *c;
	struct stat st;
	void *map;
	int fd = -1, ret;

	if (!limit)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	c->limit = limit;
	c->state = MAP_FAILED;
	pthread_mutex_init(&c->evict_lock, NULL);
	pthread_mutex_init(&c->sh_lock, NULL);
	pthread_rwlock_init(&c->rw, NULL);
	c->sh_fd = -1;
	c->lock_fd = store_file_open(s, "cache.lock", O_RDWR | O_CREAT);
	if (c->lock_fd < 0) {
		ret = c->lock_fd;
		goto fail;
	}
	c->sh_fd = store_file_open(s, "cache.lock", O_RDWR);
	if (c->sh_fd < 0) {
		ret = c->sh_fd;
		goto fail;
	}
	fd = store_file_open(s, "cache.state", O_RDWR | O_CREAT);
	if (fd < 0) {
		ret = fd;
		goto fail;
	}
	/* Growing it happens under the lock too, so a half-made state is never trusted. */
	ret = lock_ex(c->lock_fd);
	if (ret)
		goto fail;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto fail_unlock;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto fail_unlock;
	}
	/* ftruncate to the same size would be harmless; a smaller file gets zeros (invalid) */
	if (st.st_size < CACHE_STATE_SIZE && ftruncate(fd, CACHE_STATE_SIZE) < 0) {
		ret = -errno;
		goto fail_unlock;
	}
	map = mmap(NULL, CACHE_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto fail_unlock;
	}
	c->state = map;
	ret = state_init(c);
	if (ret)
		goto fail_unlock;
	flock(c->lock_fd, LOCK_UN);
	close(fd);
	*out = c;
	return 0;
fail_unlock:
	flock(c->lock_fd, LOCK_UN);
fail:
	if (fd >= 0)
		close(fd);
	cache_close(c);
	return ret;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	if (c->state != MAP_FAILED)
		munmap(c->state, CACHE_STATE_SIZE);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	if (c->sh_fd >= 0)
		close(c->sh_fd);
	pthread_rwlock_destroy(&c->rw);
	pthread_mutex_destroy(&c->sh_lock);
	pthread_mutex_destroy(&c->evict_lock);
	free(c);
}

/* ------------------------------------------------------------------ eviction */

static void evict_failed(struct cache *c, int err)
{
	if (!__atomic_exchange_n(&c->warned, true, __ATOMIC_RELAXED))
		log_warn("%s: cannot shrink the cache: %s", store_dir(c->s), strerror(-err));
}

/* Called with evict_lock and the file lock held. */
static int evict_locked(struct cache *c)
{
	uint64_t target = c->limit / 10 * 9 + c->limit % 10 * 9 / 10;
	struct scan sc = { .s = c->s, .keep_entries = true };
	uint64_t u0, plain;
	int ret;

	/* evicted by another thread or process while this one waited */
	if (__atomic_load_n(&c->state->used, __ATOMIC_RELAXED) <= c->limit)
		return 0;
	if (!state_valid(c->state)) {
		/* corrupted while in use: make it valid again, the rescan below counts */
		ret = state_init(c);
		if (ret)
			return ret;
	}
	u0 = __atomic_load_n(&c->state->used, __ATOMIC_RELAXED);
	ret = store_foreach(c->s, scan_one, &sc);
	if (ret) {
		free(sc.e);
		return ret;
	}
	__atomic_add_fetch(&c->scans, 1, __ATOMIC_RELAXED);
	counter_correct(c->state, u0, sc.total);
	if (__atomic_load_n(&c->state->used, __ATOMIC_RELAXED) <= c->limit) {
		free(sc.e); /* the counter had erred high: nothing to remove */
		return 0;
	}
	qsort(sc.e, sc.n, sizeof(*sc.e), entry_cmp);
	for (size_t i = 0; i < sc.n; i++) {
		if (__atomic_load_n(&c->state->used, __ATOMIC_RELAXED) <= target)
			break;
		/* by digest: only ever a committed chunk's name, never tmp/ or anything else */
		ret = store_remove_sized(c->s, sc.e[i].digest, &plain);
		if (ret == -ENOENT)
			continue; /* removed by its owner (a corrupt chunk), who accounts for it */
		if (ret) {
			free(sc.e);
			return ret;
		}
		counter_sub(c->state, sc.e[i].size + plain);
		__atomic_add_fetch(&c->evictions, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->evicted_bytes, sc.e[i].size + plain, __ATOMIC_RELAXED);
	}
	free(sc.e);
	return 0;
}

static void evict(struct cache *c)
{
	int ret;

	pthread_mutex_lock(&c->evict_lock);
	pthread_rwlock_wrlock(&c->rw); /* no addition or removal of this process under way */
	ret = lock_ex(c->lock_fd);     /* nor of any other */
	if (!ret) {
		ret = evict_locked(c);
		flock(c->lock_fd, LOCK_UN);
	}
	pthread_rwlock_unlock(&c->rw);
	pthread_mutex_unlock(&c->evict_lock);
	if (ret)
		evict_failed(c, ret);
}

void cache_added(struct cache *c, uint64_t len)
{
	if (__atomic_add_fetch(&c->state->used, len, __ATOMIC_RELAXED) > c->limit)
		evict(c);
}

void cache_removed(struct cache *c, uint64_t len)
{
	counter_sub(c->state, len);
}

/* Enter/leave an addition or removal: shared against rescans, here and in other processes. */
static int shared_enter(struct cache *c)
{
	int ret = 0;

	pthread_rwlock_rdlock(&c->rw);
	pthread_mutex_lock(&c->sh_lock);
	if (c->sh_count == 0) {
		while (flock(c->sh_fd, LOCK_SH) < 0) {
			if (errno != EINTR) {
				ret = -errno;
				break;
			}
		}
	}
	if (!ret)
		c->sh_count++;
	pthread_mutex_unlock(&c->sh_lock);
	if (ret)
		pthread_rwlock_unlock(&c->rw);
	return ret;
}

static void shared_leave(struct cache *c)
{
	pthread_mutex_lock(&c->sh_lock);
	if (--c->sh_count == 0)
		flock(c->sh_fd, LOCK_UN);
	pthread_mutex_unlock(&c->sh_lock);
	pthread_rwlock_unlock(&c->rw);
}

int cache_put(struct cache *c, const uint8_t d[SHA256_LEN], const void *frame, size_t len)
{
	int ret = shared_enter(c);

	if (ret)
		return ret;
	ret = store_put_cached(c->s, d, frame, len);
	if (ret == 1)
		counter_add(c->state, len);
	shared_leave(c);
	if (ret == 1 && __atomic_load_n(&c->state->used, __ATOMIC_RELAXED) > c->limit)
		evict(c);
	return ret;
}

int cache_drop(struct cache *c, const uint8_t d[SHA256_LEN], uint64_t len)
{
	uint64_t plain;
	int ret = shared_enter(c);

	if (ret)
		return ret;
	ret = store_remove_sized(c->s, d, &plain);
	if (!ret)
		counter_sub(c->state, len + plain);
	else if (plain)
		counter_sub(c->state, plain);
	shared_leave(c);
	return ret;
}

int cache_put_plain(struct cache *c, const uint8_t d[SHA256_LEN], const void *data, size_t len,
		    int *fd)
{
	uint64_t bytes = 0;
	int ret = shared_enter(c);

	*fd = -1;
	if (ret)
		return ret;
	/* no plain copy without its chunk: eviction (exclusive) cannot run meanwhile */
	ret = store_has(c->s, d);
	if (ret == 1) {
		ret = plain_put(c->s, d, data, len, fd, &bytes);
		if (ret == 1)
			counter_add(c->state, bytes);
	} else if (ret == 0) {
		ret = -ENOENT;
	}
	shared_leave(c);
	if (ret == 1 && __atomic_load_n(&c->state->used, __ATOMIC_RELAXED) > c->limit)
		evict(c);
	return ret;
}

int cache_drop_plain(struct cache *c, const uint8_t d[SHA256_LEN])
{
	uint64_t bytes;
	int ret = shared_enter(c);

	if (ret)
		return ret;
	ret = plain_remove(c->s, d, &bytes);
	if (!ret && store_has(c->s, d) == 1)
		counter_sub(c->state, bytes); /* counted only while its chunk is there */
	shared_leave(c);
	return ret;
}

void cache_get_stats(struct cache *c, struct cache_stats *st)
{
	st->limit = c->limit;
	st->used = __atomic_load_n(&c->state->used, __ATOMIC_RELAXED);
	st->evictions = __atomic_load_n(&c->evictions, __ATOMIC_RELAXED);
	st->evicted_bytes = __atomic_load_n(&c->evicted_bytes, __ATOMIC_RELAXED);
	st->scans = __atomic_load_n(&c->scans, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ for gc */

int cache_store_lock(struct store *s)
{
	int fd = store_file_open(s, "cache.lock", O_RDWR | O_CREAT), ret;

	if (fd < 0)
		return fd;
	ret = lock_ex(fd);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

void cache_store_unlock(struct store *s, int lock_fd, uint64_t removed_bytes)
{
	struct cache_state *st;
	int fd;

	if (lock_fd < 0)
		return;
	fd = removed_bytes ? store_file_open(s, "cache.state", O_RDWR) : -ENOENT;
	if (fd >= 0) {
		struct stat sb;

		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= CACHE_STATE_SIZE) {
			st = mmap(NULL, CACHE_STATE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (st != MAP_FAILED) {
				/* an invalid state is recounted by whoever opens it next */
				if (state_valid(st))
					counter_sub(st, removed_bytes);
				munmap(st, CACHE_STATE_SIZE);
			}
		}
		close(fd);
	}
	flock(lock_fd, LOCK_UN);
	close(lock_fd);
}
