/* SPDX-License-Identifier: MIT */
/*
 * The engine's read path, first version: the bytes of the disk a layout describes.
 * Metadata blocks come from the layout file, data from chunks of a store (read,
 * decompressed, verified against their sha256 before any byte is used, kept in a small
 * LRU cache of decompressed chunks), everything else is zeros.
 * Thread-safe: readers of different chunks load them in parallel; readers of one chunk
 * that is not cached wait for a single load (single flight).
 */
#ifndef LZ_BLKD_READER_H
#define LZ_BLKD_READER_H

#include <stddef.h>
#include <stdint.h>

#include "../cas/store.h"
#include "../ext4gen/layout.h"

#define BLKD_SECTOR 512u
#define BLKD_READER_CACHE_DEFAULT ((size_t)64 << 20)

struct blkd_reader;

struct blkd_reader_stats {
	uint64_t chunk_loads;      /* chunks read from the store, decompressed and verified */
	uint64_t cache_hits;       /* chunk lookups served from the cache */
	uint64_t evictions;
	uint64_t cached_bytes;     /* decompressed bytes held now */
	uint64_t loaded_bytes;     /* decompressed bytes of the chunks loaded */
	uint64_t store_bytes;      /* compressed bytes read from the store for them */
};

/*
 * The reader borrows l and s (both must outlive it). cache_bytes bounds the decompressed
 * chunks kept (0: BLKD_READER_CACHE_DEFAULT); the chunk in use is kept even if larger.
 */
int blkd_reader_new(const struct layout *l, struct store *s, size_t cache_bytes,
		    struct blkd_reader **out);
void blkd_reader_free(struct blkd_reader *r);
/* Disk size in bytes. */
uint64_t blkd_reader_size(const struct blkd_reader *r);
/*
 * Read disk bytes [off, off + len); off and len multiples of BLKD_SECTOR, within the disk
 * (-EINVAL otherwise). On failure buf holds no partial data worth using and one
 * log_error line has said why: -ENOENT a chunk is missing from the store, -EIO a chunk is
 * corrupt (never served) or unreadable, or the layout file could not be read.
 */
int blkd_reader_read(struct blkd_reader *r, uint64_t off, void *buf, size_t len);
void blkd_reader_stats(struct blkd_reader *r, struct blkd_reader_stats *st);

#endif
