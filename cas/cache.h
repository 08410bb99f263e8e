/* SPDX-License-Identifier: MIT */
/*
 * A local store used as a size-bounded cache in front of a remote.
 *
 * The bound covers the bytes of the committed chunk files (STORE/chunks) and of their plain
 * copies (STORE/plain: a chunk's verified uncompressed bytes, cas/plain.h). Usage is shared by
 * every process that opens the same store as a cache: it lives in STORE/cache.state (a small
 * file mapped shared; a counter updated with atomic operations), so two processes never count
 * one chunk twice (store_put_cached adds a chunk only when it was absent) and see each other's
 * additions at once. When an addition takes usage over the bound, the adding process takes
 * STORE/cache.lock (flock, exclusive), rescans the store (which also corrects any drift left
 * by a crashed process), and removes the least recently used chunks (by mtime, which
 * store_touch refreshes on use) until usage is at most 90% of the bound.
 *
 * Removing a chunk file never disturbs a read of it: readers hold an open descriptor or the
 * bytes in memory, and a chunk that is gone is fetched again from the remote.
 */
#ifndef LZ_CAS_CACHE_H
#define LZ_CAS_CACHE_H

#include <stdint.h>

#include "store.h"
#include "../common/test_hook.h"

struct cache;

struct cache_stats {
	uint64_t limit;       /* the bound, bytes */
	uint64_t used;        /* bytes of chunk files now (shared counter) */
	uint64_t evictions;   /* chunks this process removed */
	uint64_t evicted_bytes;
	uint64_t scans;       /* rescans this process made */
};

/* limit > 0. The cache borrows s (which must outlive it). -errno. */
int cache_open(struct store *s, uint64_t limit, struct cache **out);
void cache_close(struct cache *c);
/*
 * Add a fetched chunk (store_put_cached) and count it, excluded from rescans so the counter
 * stays exact; evict if usage went over the bound. Thread-safe, and safe between processes.
 * Returns as store_put_cached: 1 added, 0 already there, -errno. Eviction errors are logged
 * once, not returned: a cache that cannot shrink still serves.
 */
int cache_put(struct cache *c, const uint8_t d[SHA256_LEN], const void *frame, size_t len);
/* Remove a chunk file of len bytes (a corrupt one) and its plain copy, and uncount them.
 * 0, -ENOENT, -errno. */
int cache_drop(struct cache *c, const uint8_t d[SHA256_LEN], uint64_t len);
/*
 * The plain tier under the bound: plain_put (cas/plain.h) of a chunk that is in the store,
 * counted, then evict if over the bound (a chunk's plain copy goes with it). -ENOENT if the
 * chunk is not in the store (evicted meanwhile). Returns as plain_put (*fd likewise).
 * cache_drop_plain removes a bad plain copy and uncounts it.
 */
int cache_put_plain(struct cache *c, const uint8_t d[SHA256_LEN], const void *data, size_t len,
		    int *fd);
int cache_drop_plain(struct cache *c, const uint8_t d[SHA256_LEN]);
/*
 * The bare counter updates, for callers that add or remove files themselves: not excluded
 * from a concurrent rescan, so the counter may err by those files until the next rescan.
 * cache_added evicts if usage went over the bound.
 */
TEST_HOOK
void cache_added(struct cache *c, uint64_t len);
TEST_HOOK
void cache_removed(struct cache *c, uint64_t len);
void cache_get_stats(struct cache *c, struct cache_stats *st);

/*
 * For code that removes chunks without a struct cache (lazyblk cas gc). cache_store_lock
 * takes STORE/cache.lock (made if missing), waiting while a cache evicts, so no cache rescans
 * or evicts while the caller removes; returns the locked descriptor or -errno.
 * cache_store_unlock subtracts removed_bytes (st_size of the chunk files the caller
 * unlinked) from the shared usage counter if the store has a valid STORE/cache.state, then
 * unlocks and closes.
 */
int cache_store_lock(struct store *s);
void cache_store_unlock(struct store *s, int lock_fd, uint64_t removed_bytes);

#endif
