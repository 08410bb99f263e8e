/* SPDX-License-Identifier: MIT */
/* A fast non-cryptographic hash for in-memory tables (64-bit FNV-1a variant with a final mix). */
#ifndef LZ_COMMON_HASH_H
#define LZ_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
	const uint8_t *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ seed;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

#endif
