/* SPDX-License-Identifier: MIT */
/*
 * The engine's read path: the bytes of the disk a layout describes. Metadata blocks come
 * from the layout file, data from chunks held from a cas_source's chain of tiers
 * (cas/tier.h: memory on top, then plain copies, the store, a remote; decompressed and
 * verified there, before any byte is used); everything else is zeros. The reader maps disk
 * offsets to chunks, schedules read-ahead and counts marks; the memory tier keeps the chunks.
 * Thread-safe: readers of different chunks load them in parallel; readers of one chunk
 * that is not in memory wait for a single load (the chain's single flight).
 */
#ifndef LZ_BLKD_READER_H
#define LZ_BLKD_READER_H

#include <stddef.h>
#include <stdint.h>

#include "../../cas/source.h"
#include "../../common/test_hook.h"
#include "../../layout/layout.h"
#include "../sector.h"

#define BLKD_READER_CACHE_DEFAULT ((size_t)64 << 20)

struct blkd_reader;

struct blkd_reader_stats {
	uint64_t chunk_loads;      /* chunks taken from the tiers below, verified */
	uint64_t cache_hits;       /* chunk lookups served from the cache */
	uint64_t evictions;
	uint64_t cached_bytes;     /* decompressed bytes held now */
	uint64_t cached_plain;     /* chunks held now as open plain copies (cas/plain.h) */
	uint64_t loaded_bytes;     /* decompressed bytes of the chunks loaded */
	uint64_t store_bytes;      /* their compressed bytes (store or remote) */
	uint64_t readahead;        /* chunks loaded ahead of the reads that use them */
	uint64_t marked_hits;      /* chunks loaded whose mark was 1 (see blkd_reader_set_marks) */
};

/*
 * The reader borrows l and src (both must outlive it; one reader per src at a time: it sets
 * src's memory tier, cas_source_memory, and empties it when freed). cache_bytes bounds the
 * decompressed chunks kept (0: BLKD_READER_CACHE_DEFAULT); the chunk in use is kept even
 * if larger.
 * Chunks with a plain copy in the store are kept as its open descriptor instead (their bytes
 * in the shared page cache): at most half of RLIMIT_NOFILE of those, in [16, 65536].
 */
int blkd_reader_new(const struct layout *l, struct cas_source *src, size_t cache_bytes,
		    struct blkd_reader **out);
void blkd_reader_free(struct blkd_reader *r);
/* Disk size in bytes. */
TEST_HOOK
uint64_t blkd_reader_size(const struct blkd_reader *r);
/*
 * Read disk bytes [off, off + len); off and len multiples of BLKD_SECTOR, within the disk
 * (-EINVAL otherwise). On failure buf holds no partial data worth using and one
 * log_error line has said why: -ENOENT a chunk is missing from the store (and the remote),
 * -EIO a chunk is corrupt (never served) or unreadable, or the layout file could not be read.
 */
TEST_HOOK
int blkd_reader_read(struct blkd_reader *r, uint64_t off, void *buf, size_t len);
void blkd_reader_stats(struct blkd_reader *r, struct blkd_reader_stats *st);

/*
 * The pieces of a read the engine planned in its one walk of the layout (engine.c), with
 * no search of the layout here: disk bytes [off, end) into buf (buf[0] is off). _meta: of
 * metadata run `run` (the range lies in it); _data: of the data runs from index `run` on
 * (the runs that end before off skipped), the bytes around and between them zeros. No range check
 * (the engine's walk made the range); failures as blkd_reader_read.
 */
int blkd_reader_read_meta(struct blkd_reader *r, size_t run, uint64_t off, uint64_t end,
			  void *buf);
int blkd_reader_read_data(struct blkd_reader *r, size_t run, uint64_t off, uint64_t end,
			  void *buf);

/*
 * marks (borrowed; one byte per layout chunk, set to 1 by someone else, e.g. a prefetch): a
 * chunk loaded while its mark is 1 is counted in marked_hits and its mark set to 2.
 */
void blkd_reader_set_marks(struct blkd_reader *r, uint8_t *marks);

/*
 * Read ahead up to max_chunks chunks (in disk order) when reads go through the data runs
 * sequentially, with min(max_chunks, BLKD_READER_RA_THREADS_MAX) threads loading them.
 * The window starts small and doubles while the pattern holds; a read elsewhere ends it.
 * Chunks read ahead live in the same bounded cache. Call once, before reading.
 */
#define BLKD_READER_RA_THREADS_MAX 16
int blkd_reader_readahead(struct blkd_reader *r, unsigned max_chunks);

#endif
