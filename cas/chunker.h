/* SPDX-License-Identifier: MIT */
/*
 * Parallel chunking: the importer fills fixed-size buffers with file content and submits
 * them; worker threads hash (sha256), deduplicate, compress (zstd) and stage each chunk in
 * the store, then write the chunk's reference into the caller's slot. Memory is bounded by
 * the buffer pool: chunker_buf_get() blocks while every buffer is in flight.
 */
#ifndef LZ_CAS_CHUNKER_H
#define LZ_CAS_CHUNKER_H

#include <stddef.h>
#include <stdint.h>

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
void chunker_free(struct chunker *c);
uint32_t chunker_chunk_size(const struct chunker *c);

/* Borrow an empty buffer of chunker_chunk_size() bytes; blocks while none is free. */
uint8_t *chunker_buf_get(struct chunker *c);
/* Give an unused buffer back. */
void chunker_buf_put(struct chunker *c, uint8_t *buf);
/*
 * Hand over len (1..chunk_size) bytes in buf; slot is filled (digest, len) once hashed and
 * must stay valid until chunker_finish(). Returns an earlier worker error, if any.
 */
int chunker_submit(struct chunker *c, uint8_t *buf, size_t len, struct mf_chunk *slot);
void chunker_get_stats(struct chunker *c, struct chunker_stats *st);

#endif
