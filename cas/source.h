/* SPDX-License-Identifier: MIT */
/*
 * Where a chunk's verified bytes come from: a chain of tiers (cas/tier.h), built by
 * cas_source_open in one place for every user:
 *
 *   memory  decompressed chunks and open plain copies a reader uses (cas_source_hold)
 *   plain   STORE/plain: verified bytes kept uncompressed (cas/plain.h), unless no_plain
 *   store   STORE/chunks, bounded as a cache of the remote when cache_size is given
 *   remote  when remote_url is given
 *
 * Every chunk is decompressed and verified against its sha256 name before a byte is
 * returned:
 *
 *   local store -> verified? yes: done
 *                  corrupt:  counted, removed from the store (when a remote exists), and
 *                            fetched from the remote instead; without a remote: -EIO
 *   remote      -> verified? yes: written to the store atomically, done
 *                  corrupt:  counted, fetched once more; still corrupt: -EIO
 *
 * A plain copy is written right after a verified load from the store (a chunk just fetched
 * gets its copy at its next load) and checked (size, trailer, crc32c) when opened; a plain
 * copy that fails the check is removed and the chunk taken through the verified path above.
 * A plain copy that cannot be written (a read-only store, a full disk) is counted and
 * skipped: the load still succeeds.
 *
 * Thread-safe. Concurrent asks of one chunk that miss the memory tier wait for one load
 * (the chain's single flight).
 */
#ifndef LZ_CAS_SOURCE_H
#define LZ_CAS_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "remote/remote.h"
#include "store.h"
#include "../common/test_hook.h"

struct cas_source;

struct cas_source_opts {
	const char *store_dir;
	const char *remote_url;    /* NULL: the store is the only tier */
	uint64_t cache_size;       /* > 0: bound the store as a cache (needs a remote) */
	unsigned concurrency;      /* remote requests at once (0: default) */
	unsigned timeout_ms;       /* per request attempt (0: default) */
	int retries;               /* 0: default, < 0: none */
	bool no_plain;             /* cas_source_load: neither use nor write plain copies */
};

/* The memory tier (cas_source_hold's chunks). */
struct cas_memory_stats {
	uint64_t loads;            /* chunks taken from the tiers below, verified */
	uint64_t hits;             /* holds served from memory */
	uint64_t evictions;
	uint64_t bytes;            /* decompressed bytes held now */
	uint64_t plain;            /* chunks held now as open plain copies */
	uint64_t loaded_bytes;     /* decompressed bytes of the chunks loaded */
	uint64_t frame_bytes;      /* their compressed bytes (store or remote) */
};

struct cas_source_stats {
	uint64_t disk_hits, disk_bytes;        /* chunks read from the store, frame bytes */
	uint64_t verify_failures;              /* corrupt copies seen (store or remote) */
	uint64_t remote_fetches;               /* chunks taken from the remote, verified */
	uint64_t bg_fetches, bg_bytes;         /* of them, background (prefetch): frame bytes */
	uint64_t joins;                        /* asks that waited for a fetch under way */
	uint64_t bg_joins;                     /* demand reads that joined a prefetch */
	struct remote_stats remote;            /* all zero without a remote */
	uint64_t cache_limit, cache_used, cache_evictions, cache_evicted_bytes;
	uint64_t plain_hits, plain_bytes;      /* chunks opened from plain copies, their bytes */
	uint64_t plain_writes;                 /* plain copies written */
	uint64_t plain_write_failures;         /* plain copies that could not be written */
	uint64_t plain_bad;                    /* plain copies that failed the check: removed */
	int has_remote, has_cache, has_plain;
	struct cas_memory_stats mem;
};

/*
 * A store directory that does not exist is created when a remote is given (an empty cache);
 * otherwise it must be a store. 0, or -errno with one line in why (why_len bytes, may be 0):
 * "DIR: not a lazyblk store (no chunks/ directory)", "URL: ...". Prints nothing.
 */
int cas_source_open(const struct cas_source_opts *o, struct cas_source **out, char *why,
			size_t why_len);
void cas_source_close(struct cas_source *s);
/*
 * Whether the chunks d[0..n) can be had, cheaply (a server's start): without a remote, each
 * is in the store (a chunk file or a plain copy: looked up, not read); with one, the remote
 * answers for d[0] (remote_probe; n 0: whether an oci tag exists). 0, or -errno with one
 * line in why: "store DIR does not hold the image's chunks (sha256:HEX missing); wrong
 * --store?", "remote URL: Connection refused", ... Prints nothing.
 */
int cas_source_check(struct cas_source *s, const uint8_t (*d)[SHA256_LEN], size_t n, char *why,
		     size_t why_len);
TEST_HOOK
struct store *cas_source_store(struct cas_source *s);

/*
 * The verified, decompressed bytes of chunk d (at most max bytes, else corrupt), in a
 * malloc'ed block of head + len bytes with the data at offset head (so a caller can put its
 * own header in front without a copy). *frame_len gets the compressed size read.
 * -ENOENT missing everywhere, -EIO corrupt or unreadable (one log_error line), -ENOMEM.
 */
int cas_source_get(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max, size_t head,
		   void **block, size_t *len, size_t *frame_len);

/*
 * Make sure chunk d is in the store (prefetch, warm): if missing, fetch it from the remote,
 * verify it (decompressed, as cas_source_get) and keep it. bg: at background priority (see
 * remote_get_prio); a cas_source_get of the same chunk meanwhile joins this fetch and raises
 * it. 1: fetched now (*frame_len its bytes), 0: there already, or fetched by another asker;
 * -errno as cas_source_get (one log line).
 */
int cas_source_fetch(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max, bool bg,
		     size_t *frame_len);
/* The store can take bytes more without evicting anything (always, unless a bounded cache). */
bool cas_source_has_room(struct cas_source *s, uint64_t bytes);

/*
 * A chunk's verified bytes, from its plain copy when there is a good one, else as
 * cas_source_get (and then, unless the chunk came from the remote, a plain copy is written).
 * Exactly one of:
 *   fd >= 0:  a plain copy holding the len bytes at offset 0 (the caller closes it), block
 *             NULL, frame_len 0;
 *   block:    as cas_source_get (head bytes free in front), fd -1: no plain copy could be
 *             made or opened.
 * Errors as cas_source_get.
 */
struct cas_chunk {
	void *block;
	int fd;
	size_t len, frame_len;
};
TEST_HOOK
int cas_source_load(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max, size_t head,
		    struct cas_chunk *c);
/* A plain copy that cas_source_load gave turned out bad when read (e.g. truncated since):
 * counted and removed, so the next load of d takes the verified path. */
TEST_HOOK
void cas_source_plain_bad(struct cas_source *s, const uint8_t d[SHA256_LEN]);

/*
 * The memory tier, for a reader (one at a time per source). cas_source_memory empties it,
 * zeroes its counters and bounds it to bytes of decompressed chunks (the chunk in use is
 * kept even if larger; plain copies are kept as open descriptors, see cas/tier/memory.c).
 *
 * cas_source_hold lends chunk d from memory, loading it through the tiers below if missing
 * (one load per chunk at a time: concurrent holders wait for it). h->data holds h->len
 * bytes, or is NULL: read them with pread from h->fd (a plain copy, not to be closed).
 * flags: CAS_HOLD_PEEK only look in memory (-ENOENT: not there, nothing loaded);
 * CAS_HOLD_AHEAD a read-ahead (what it loads keeps a mark until first held without it).
 * h->loaded: this call loaded it; h->ahead: first hold of a chunk read ahead.
 * Errors as cas_source_get. cas_source_release gives it back; err != 0: its plain copy
 * failed when read (e.g. truncated since): dropped from memory and from the plain tier
 * (counted in plain_bad), so the next hold takes the verified path.
 * cas_source_busy: d is in memory or being loaded.
 */
int cas_source_memory(struct cas_source *s, size_t bytes);
#define CAS_HOLD_PEEK 1u
#define CAS_HOLD_AHEAD 2u
struct cas_held {
	const uint8_t *data;
	int fd;
	size_t len;
	bool loaded, ahead;
	void *ref;
};
int cas_source_hold(struct cas_source *s, const uint8_t d[SHA256_LEN], size_t max,
		    unsigned flags, struct cas_held *h);
void cas_source_release(struct cas_source *s, const uint8_t d[SHA256_LEN], struct cas_held *h,
			int err);
bool cas_source_busy(struct cas_source *s, const uint8_t d[SHA256_LEN]);
void cas_source_memory_stats(struct cas_source *s, struct cas_memory_stats *st);

void cas_source_get_stats(struct cas_source *s, struct cas_source_stats *st);
/* The store is a size-bounded cache (--cache-size): its plain copies may be evicted. */
TEST_HOOK
bool cas_source_bounded(const struct cas_source *s);

#endif
