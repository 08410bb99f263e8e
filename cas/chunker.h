/* SPDX-License-Identifier: MIT */
/*
 * Parallel chunking: the importer fills fixed-size buffers with file content and submits
 * them; worker threads (a common/workq, each with its own zstd context) hash (sha256),
 * deduplicate, compress (zstd) and stage each chunk in the store, then write the chunk's reference into the caller's slot. Memory is bounded by
 * the buffer pool: chunker_buf_get() blocks while every buffer is in flight.
 */
#ifndef LZ_CAS_CHUNKER_H
#define LZ_CAS_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

#include "../common/workq.h"
#include "manifest.h"
#include "store.h"

struct chunker_opts {
	unsigned threads;     /* 0: one per online CPU */
	uint32_t chunk_size;  /* bytes per chunk (and per buffer) */
	int level;            /* zstd level */
};

struct chunker_stats {
	uint64_t chunks;      /* submitted */
	uint64_t raw_bytes;   /* submitted bytes */
	uint64_t new_chunks;  /* written to the store by this run */
	uint64_t new_bytes;   /* their compressed size */
	uint64_t dup_chunks;  /* already in the store or seen earlier in this run */
};

struct chunker;

int chunker_new(struct store *s, const struct chunker_opts *o, struct chunker **out);
/* Waits for every job, commits the store, and frees; returns the first error seen. */
int chunker_finish(struct chunker *c);
/*
 * Waits for every job submitted so far, calling tick(arg) (if not NULL; on the caller's
 * thread, no lock held) each time one ends: the progress of the last chunks' compression.
 */
void chunker_wait(struct chunker *c, void (*tick)(void *arg), void *arg);
void chunker_free(struct chunker *c);
uint32_t chunker_chunk_size(const struct chunker *c);

#define CHUNK_PACK_MAX_PIECES 4096

/*
 * A chunk being filled: fill bytes of data, and the file pieces (manifest slots, with len
 * and off already set by the importer) that receive the chunk's digest once it is hashed.
 */
struct chunk_buf {
	struct workq_item item;    /* the chunker's: a submitted buffer is a job of its workq */
	uint8_t *data;             /* chunker_chunk_size() bytes */
	size_t fill;
	struct mf_chunk **slots;   /* CHUNK_PACK_MAX_PIECES entries */
	size_t n_slots;
};

/* Borrow an empty buffer; blocks while every buffer is in flight. */
struct chunk_buf *chunker_buf_get(struct chunker *c);
/* Give an unused buffer back. */
void chunker_buf_put(struct chunker *c, struct chunk_buf *b);
/*
 * Hand over b (fill 1..chunk_size bytes, at least one slot). Each slot must stay valid
 * until chunker_finish(). Returns an earlier worker error, if any.
 */
int chunker_submit(struct chunker *c, struct chunk_buf *b);
void chunker_get_stats(struct chunker *c, struct chunker_stats *st);

#endif
