/* SPDX-License-Identifier: MIT */
/*
 * The chunk format: one zstd frame (with its content size in the frame header) of at most
 * the chunk size of file content, named by the sha256 of the uncompressed bytes.
 */
#ifndef LZ_CAS_CHUNK_H
#define LZ_CAS_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define CHUNK_SIZE_DEFAULT (1u << 20)
#define CHUNK_SIZE_MIN 4096u
#define CHUNK_SIZE_MAX (64u << 20)
#define CHUNK_LEVEL_DEFAULT 3

struct chunk_codec; /* per-thread zstd contexts; not shared between threads */

struct chunk_codec *chunk_codec_new(int level);
void chunk_codec_free(struct chunk_codec *c);

size_t chunk_compress_bound(size_t len);
/* Returns 0 and the frame length in *out_len, or -errno. */
int chunk_compress(struct chunk_codec *c, const void *src, size_t len, void *dst, size_t cap,
		   size_t *out_len);
/*
 * Decompress a stored chunk. Rejects anything but exactly one frame whose declared
 * content size is known and <= cap (-EBADMSG), so a hostile chunk cannot overrun dst.
 */
TEST_HOOK
int chunk_decompress(struct chunk_codec *c, const void *src, size_t len, void *dst, size_t cap,
		     size_t *out_len);
/*
 * Decompress a stored chunk into dst (cap bytes) and check that it is the chunk named d (the
 * sha256 of the bytes). 0 with *out_len; -EBADMSG with why (common/why.h: "not a valid zstd
 * chunk", "content does not match its sha256 name") for a corrupt chunk, whose bytes must not be used;
 * -ENOMEM. The one check every reader of chunks (store, remote, push, cas verify) makes.
 */
int chunk_verify(struct chunk_codec *c, const uint8_t d[SHA256_LEN], const void *frame,
		 size_t len, void *dst, size_t cap, size_t *out_len,
		 char *why, size_t why_len);
/* Declared uncompressed size from the frame header, or -EBADMSG. */
int chunk_content_size(const void *src, size_t len, uint64_t *size);

#endif
