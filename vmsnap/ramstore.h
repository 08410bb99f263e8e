/* SPDX-License-Identifier: MIT */
/*
 * Guest RAM into the store, and a snapshot's pieces back out of it.
 *
 * Writing (ramstore_write): RAM is cut into aligned windows of RAMSTORE_WINDOW pages; the
 * pages of a window that must be stored (non-zero, and not the same as the parent's) become
 * one chunk holding just them, in address order. So the same RAM at the same addresses
 * gives the same chunks (two VMs booted alike, two snapshots of one VM: stored once), and a
 * second snapshot stores the pages that changed, not their windows. Chunks are compressed
 * (cas/chunk.h), named by sha256 and put in the store; those already there are not written
 * again. The page map (vmsnap/rammap.h) is the result; its bytes are put in the store as
 * chunks too (ramstore_put_map).
 *
 * Which pages may have changed since the parent is the caller's to say (a VMM knows: the
 * pages a lazily restored VM wrote, or every page of a booted one's RAM file extents); of
 * those, a page whose XXH3-128 is the parent's (hashes, kept by the caller between two
 * snapshots of one VM) keeps the parent's chunk and slot.
 *
 * Reading (ramstore_load_*): the document's pieces through a cas_source (memory, store,
 * remote: verified), parsed. Nothing here prints; refusals are one line in why.
 */
#ifndef LZ_VMSNAP_RAMSTORE_H
#define LZ_VMSNAP_RAMSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"
#include "doc.h"
#include "rammap.h"

struct store;
struct cas_source;

#define RAMSTORE_WINDOW 64u      /* pages: 256 KiB of RAM per chunk at most */
#define RAMSTORE_HASH 16u        /* XXH3-128, canonical */

struct ramstore_opts {
	struct store *store;          /* where chunks go */
	int level;                    /* zstd level (0: CHUNK_LEVEL_DEFAULT) */
	unsigned threads;             /* compressing and hashing (0: online CPUs, at most 8) */
	/* The previous snapshot of the same RAM (NULL: none): what unchanged pages refer to. */
	const struct rammap *parent;
	/*
	 * Pages that may differ from parent, a bitmap of npages bits (bit p: word p / 64, bit
	 * p % 64); NULL: every page may. A page whose bit is clear is the parent's (or zero
	 * without a parent) and is not read.
	 */
	const uint64_t *changed;
	/*
	 * In/out, npages entries (NULL: none): the XXH3-128 of each page as the parent holds it
	 * (all zero bytes: unknown); a changed page whose hash equals it keeps the parent's
	 * place (if the parent has one that is not zero). Updated to this snapshot's pages:
	 * every page read gets its hash (a zero page the XXH3-128 of 4096 zero bytes); pages
	 * not read keep theirs.
	 */
	uint8_t (*hashes)[RAMSTORE_HASH];
};

struct ramstore_result {
	uint64_t pages_read;          /* pages looked at (changed) */
	uint64_t pages_nonzero;       /* in the new map */
	uint64_t pages_new;           /* in this write's chunks (windows of one content: each) */
	uint64_t pages_kept;          /* referring to the parent's chunks */
	uint64_t chunks_new;          /* chunks written to the store now */
	uint64_t chunks_present;      /* this write's chunks that were in the store already */
	uint64_t bytes_new;           /* their compressed bytes written */
};

/*
 * RAM (ram: size bytes, a multiple of 4 KiB, readable without faulting the pages that are
 * not changed) into o->store: the new map in *out (finished, indexed), committed to the
 * store. The map's bytes depend on the RAM, parent, changed and hashes only (not on the
 * threads). res may be NULL. 0 or -errno with one line in why (a full disk, a parent of
 * another size: -EINVAL, ...).
 */
TEST_HOOK
int ramstore_write(const struct ramstore_opts *o, const uint8_t *ram, uint64_t size,
		   struct rammap **out, struct ramstore_result *res, char *why, size_t why_len);
/*
 * m's bytes as chunks of at most 1 MiB into the store: their names and sizes in
 * d->map[], d->nmap, and d->ram_pages/ram_chunks/ram_bytes from m. -E2BIG (more than
 * SNAPDOC_MAP_MAX pieces), -errno with why.
 */
TEST_HOOK
int ramstore_put_map(struct store *s, const struct rammap *m, struct snapdoc *d, char *why,
		     size_t why_len);
/* A blob (vm.state: 1..SNAPDOC_STATE_MAX bytes) as one chunk of the store, committed: its
 * name and size into *b. */
TEST_HOOK
int ramstore_put_blob(struct store *s, const void *p, size_t len, struct snapdoc_blob *b,
		      char *why, size_t why_len);
/*
 * d's page map, fetched through src and parsed (its mem_size, nonzero and nchunks must be
 * d's mem_size, ram_pages and ram_chunks: -EBADMSG). A piece that cannot be had (missing,
 * corrupt: the chunk layers logged it, naming the chunk) returns their -errno and no
 * reason; one of another size than d says is -EBADMSG with one.
 */
int ramstore_load_map(struct cas_source *src, const struct snapdoc *d, struct rammap **out,
		      char *why, size_t why_len);
/* d's vm.state bytes (malloc'd, the caller's), fetched through src; errors as above. */
TEST_HOOK
int ramstore_load_state(struct cas_source *src, const struct snapdoc *d, uint8_t **buf,
			size_t *len, char *why, size_t why_len);
/*
 * The chunks a snapshot uses (its state, its map's pieces and every chunk the map names),
 * appended to a growing array of digests (*v, *n, *cap; not sorted, may repeat): what gc
 * keeps and push sends. m NULL: the state and the map's pieces only. -ENOMEM.
 */
int ramstore_refs(const struct snapdoc *d, const struct rammap *m, uint8_t (**v)[SHA256_LEN],
		  size_t *n, size_t *cap);

#endif
