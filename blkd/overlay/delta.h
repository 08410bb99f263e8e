/* SPDX-License-Identifier: MIT */
/*
 * The delta file (a snapshot of an overlay), little-endian, see docs/formats.md:
 *   header block (4096 bytes: the header, then zeros)
 *   data         dirty_blocks × 4096, the dirty blocks in disk order
 *   extents[]    extent_count × 24 bytes, sorted, disjoint: {block, count, state}
 *   sha256       of every byte before it
 * The data comes before the extents so that a block's place in the file depends only
 * on how many dirty blocks precede it: a writer can save a block's old contents there
 * the moment it overwrites it, before the extent list is written.
 */
#ifndef LZ_BLKD_DELTA_H
#define LZ_BLKD_DELTA_H

#include <stdint.h>

#include "../../common/sha256.h"

#define DELTA_MAGIC "LZBKDLTA"
#define DELTA_VERSION 1
#define DELTA_HDR 4096u

struct delta_header {
	char magic[8];                      /* LZBKDLTA */
	uint32_t version;                   /* 1 */
	uint32_t block_size;                /* 4096 */
	uint64_t disk_bytes;
	uint64_t block_count;
	uint8_t layout_digest[SHA256_LEN];
	uint64_t dirty_blocks;              /* blocks of data */
	uint64_t zero_blocks;
	uint64_t extent_count;
	uint32_t flags;                     /* 0 */
	uint32_t header_crc;                /* crc32c(~0, header with this field 0) */
	uint8_t reserved[32];
};
_Static_assert(sizeof(struct delta_header) == 128, "delta header is 128 bytes");

struct delta_extent {
	uint64_t block;
	uint64_t count;                     /* >= 1 */
	uint32_t state;                     /* OV_DIRTY or OV_ZERO */
	uint32_t reserved;
};
_Static_assert(sizeof(struct delta_extent) == 24, "delta extent is 24 bytes");

/* Fills in everything but the counts' consistency; computes the checksum. */
void delta_header_init(struct delta_header *h, uint64_t disk_bytes,
		       const uint8_t digest[SHA256_LEN], uint64_t dirty, uint64_t zero,
		       uint64_t extents);

#endif
