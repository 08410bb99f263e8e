/* SPDX-License-Identifier: MIT */
/*
 * The chunk tiers: the places a chunk's verified bytes can be had from, stacked in one list,
 * the fastest on top:
 *
 *   memory  (cas/tier/memory.c)  decompressed chunks and open plain copies, an LRU
 *   plain   (cas/tier/plain.c)   STORE/plain: verified bytes kept uncompressed (cas/plain.h)
 *   store   (cas/tier/store.c)   STORE/chunks: zstd frames, verified at every load; bounded
 *                                as a cache of the remote when --cache-size is given
 *   remote  (cas/tier/remote.c)  an HTTP store or an OCI registry (cas/remote/)
 *
 * Each tier implements struct tier_ops. A get walks the list down from the asker's level
 * until a tier has the chunk, then offers it to every tier it passed, upwards (put): the
 * store keeps a fetched frame, the plain tier writes its copy, the memory tier keeps it.
 * The chain's head (cas/tier/chain.c) is the one single-flight point: concurrent asks of one
 * chunk that miss the top tier wait for one walk.
 *
 * The chain is built in one place, source_chain_build in cas/source.c, which cas_source_open
 * calls for every user (serve, run, export, warm, commit, repack, ...). Adding a tier (a
 * mirror, a proxy, a peer) means one new file under cas/tier/ implementing tier_ops, its
 * constructor declared below, and one line in source_chain_build.
 *
 * Contract of the ops (t is the tier, q the request, c the chunk in hand):
 *   get   0: c filled from this tier (a block with q->head bytes free in front, or a plain
 *         copy's fd; the memory tier lends an entry: c->ref). -ENOENT: not here (or here but
 *         bad and removed: counted and logged by the tier), ask the tier below. Any other
 *         -errno ends the walk (the tier said why). A tier never returns bytes that failed
 *         their check.
 *   put   offered a chunk got from a tier below (c->from says which): keep it or not; may
 *         take c->block (then sets it NULL) or change its form (a block into a plain fd).
 *         Never fails the get.
 *   has   1 here, 0 not, -errno; cheap: no bytes read.
 *   drop  forget chunk d here (a copy found bad by a reader).
 *   stats add this tier's counters into st.
 * Optional: release (give back what get/put lent: c->ref; bad: the copy failed when read,
 * forget it; true when this call forgot it), kick (a waiting ask was raised to demand
 * priority), close. A tier leaves out what it cannot do (a remote puts and drops nothing).
 */
#ifndef LZ_CAS_TIER_H
#define LZ_CAS_TIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/why.h"
#include "cache.h"
#include "remote/remote.h"
#include "source.h"
#include "store.h"
#include "../common/test_hook.h"

/* Levels, top first: where an ask starts. A mirror or a proxy is a TIER_REMOTE. */
enum tier_level { TIER_MEMORY, TIER_PLAIN, TIER_STORE, TIER_REMOTE };

/* What the asker wants (the chain's single flight treats joins by it). */
enum tier_ask {
	TIER_ASK_HOLD,   /* a reference into the memory tier (cas_source_hold) */
	TIER_ASK_LOAD,   /* an owned block or a plain fd (cas_source_load) */
	TIER_ASK_GET,    /* an owned block (cas_source_get) */
	TIER_ASK_FETCH,  /* only that the store has it (cas_source_fetch): no bytes wanted */
};

struct tier_req {
	const uint8_t *d;
	size_t max;              /* the chunk size: larger is corrupt */
	size_t head;             /* bytes free in front of a block (set by the chain) */
	enum tier_ask ask;
	enum tier_level top;     /* first level asked */
	bool ahead;              /* a read-ahead (memory: marks what it brought) */
	bool peek;               /* the top tier only: no load below */
	int prio0;               /* REMOTE_PRIO_* asked */
	const int *prio;         /* the flight's priority now (a demand join raises it) */
	bool mark;               /* put: keep the read-ahead mark (no demand ask waited) */
	bool fetched;            /* this ask waited for a walk that went below the store */
};

struct tier_chunk {
	void *block;             /* malloc'ed, the bytes at head; or NULL */
	int fd;                  /* a plain copy holding the bytes at offset 0, or -1 */
	size_t len, frame_len;   /* bytes; compressed bytes read (store or remote) */
	uint8_t *frame;          /* a fetched frame, for the store's put (the chain frees it) */
	const uint8_t *data;     /* memory: the bytes lent (NULL: read c->fd) */
	void *ref;               /* memory: the entry lent (give back with release) */
	enum tier_level from;    /* the level the bytes came from */
	bool ahead;              /* memory: first use of a chunk read ahead */
};

struct tier;

struct tier_ops {
	int (*get)(struct tier *t, const struct tier_req *q, struct tier_chunk *c);
	void (*put)(struct tier *t, const struct tier_req *q, struct tier_chunk *c);
	int (*has)(struct tier *t, const uint8_t d[SHA256_LEN]);
	void (*drop)(struct tier *t, const uint8_t d[SHA256_LEN]);
	void (*stats)(struct tier *t, struct cas_source_stats *st);
	bool (*release)(struct tier *t, struct tier_chunk *c, bool bad);
	void (*kick)(struct tier *t);
	void (*close)(struct tier *t);
};

struct tier {
	const struct tier_ops *ops;
	enum tier_level level;
	const char *name;        /* for messages: a directory, a URL */
	size_t head;             /* bytes a block put here needs free in front */
	struct tier *next;       /* the tier below (set by tier_chain_add) */
};

/* ------------------------------------------------------------------ the chain */

struct tier_chain;

int tier_chain_new(struct tier_chain **out);
/* Stack t below the tiers added so far (the chain owns it from now on). */
void tier_chain_add(struct tier_chain *ch, struct tier *t);
void tier_chain_free(struct tier_chain *ch);
/*
 * Chunk q->d from level q->top down, put into the tiers above the one that had it. One walk
 * per chunk at a time: a concurrent ask that misses the top tier waits for the walk under
 * way (raising its priority) and then asks again. 0 with *c, or as tier_ops.get.
 */
int tier_chain_get(struct tier_chain *ch, struct tier_req *q, struct tier_chunk *c);
/* Give back what a get lent; bad: the copy failed when read, dropped down to TIER_PLAIN. */
void tier_chain_release(struct tier_chain *ch, const uint8_t d[SHA256_LEN],
			struct tier_chunk *c, bool bad);
/* Whether d is at level lvl or below (the first answer that is not 0). */
TEST_HOOK
int tier_chain_has(struct tier_chain *ch, enum tier_level lvl, const uint8_t d[SHA256_LEN]);
/* Whether a walk for d is under way. */
bool tier_chain_busy(struct tier_chain *ch, const uint8_t d[SHA256_LEN]);
/* Drop d from the tiers of levels [from, to]. */
void tier_chain_drop(struct tier_chain *ch, enum tier_level from, enum tier_level to,
		     const uint8_t d[SHA256_LEN]);
/* Every tier's counters and the chain's (joins) into st (zeroed first). */
void tier_chain_stats(struct tier_chain *ch, struct cas_source_stats *st);

/* ------------------------------------------------------------------ the tiers */

/* Decoders shared by the tiers that decompress (store, remote). */
struct tier_codecs;
int tier_codecs_new(struct tier_codecs **out);
void tier_codecs_free(struct tier_codecs *p);
/*
 * Decompress and verify a frame into a new block (head bytes free in front). -EBADMSG with
 * why (common/why.h; written only then: the per-chunk path formats nothing on success) when
 * the frame is corrupt (never returns its bytes), -ENOMEM.
 */
int tier_decode(struct tier_codecs *p, const uint8_t d[SHA256_LEN], const uint8_t *frame,
		size_t flen, size_t max, size_t head, void **block, size_t *len, char *why,
		size_t why_len);

/* memory: bounded as tier_memory_set says (default: nothing kept); cache: the store is
 * bounded (plain copies held open count against the bytes too). */
struct tier *tier_memory_new(const struct cache *cache);
/* Empty the memory tier, zero its counters, keep at most bytes of chunks. */
void tier_memory_set(struct tier *t, size_t bytes);
/* cache may be NULL (unbounded). Each borrows what it is given. */
struct tier *tier_plain_new(struct store *s, struct cache *cache);
struct tier *tier_store_new(struct store *s, struct cache *cache, struct tier_codecs *p);
struct tier *tier_remote_new(struct remote *r, struct tier_codecs *p);

#endif
