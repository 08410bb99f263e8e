/* SPDX-License-Identifier: MIT */
/*
 * The local chunk store: STORE/chunks/<2 hex>/<64 hex>, one zstd frame per file.
 * A plain HTTP server can serve the directory as-is. Writes are staged in STORE/tmp and
 * made visible in batches: the batch is made durable with syncfs(2), then each chunk is
 * renamed into place and the touched chunk directories are fsynced, so a chunk that is
 * visible under its name is always complete.
 */
#ifndef LZ_CAS_STORE_H
#define LZ_CAS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"

struct store;

struct store_stats {
	uint64_t chunks;
	uint64_t raw_bytes;     /* uncompressed, from the frame headers */
	uint64_t stored_bytes;  /* file sizes */
	uint64_t bad_headers;   /* files whose frame header cannot be read */
};

/* create: make STORE/{chunks,tmp} if missing; otherwise the store must exist. */
int store_open(const char *dir, bool create, struct store **out);
void store_close(struct store *s);
const char *store_dir(const struct store *s);

/* Full path of a chunk file (buf of at least PATH_MAX). */
void store_chunk_path(const struct store *s, const uint8_t d[SHA256_LEN], char *buf, size_t len);
/* 1 if present (committed), 0 if not, -errno. */
int store_has(struct store *s, const uint8_t d[SHA256_LEN]);
/*
 * Stage a compressed chunk. Thread-safe. Becomes visible at the next store_commit()
 * (called automatically when the staged batch grows large).
 */
int store_put(struct store *s, const uint8_t d[SHA256_LEN], const void *frame, size_t len);
/* Make every staged chunk durable and visible. Thread-safe. */
int store_commit(struct store *s);
/* Read a chunk's compressed bytes into a malloc'ed buffer. -ENOENT if absent. */
int store_read(struct store *s, const uint8_t d[SHA256_LEN], uint8_t **frame, size_t *len);

/* Iterate over committed chunks; cb returns non-zero to stop (returned as is). */
typedef int (*store_iter_fn)(void *arg, const uint8_t d[SHA256_LEN], const char *path);
int store_foreach(struct store *s, store_iter_fn cb, void *arg);
int store_stats(struct store *s, struct store_stats *st);

#endif
