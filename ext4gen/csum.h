/* SPDX-License-Identifier: MIT */
/* ext4 metadata_csum helpers (crc32c). */
#ifndef LZ_EXT4GEN_CSUM_H
#define LZ_EXT4GEN_CSUM_H

#include <stdint.h>

#include "../common/crc32c.h"

/* The filesystem seed: crc32c(~0, uuid). */
static inline uint32_t ext4_csum_seed(const uint8_t uuid[16])
{
	return crc32c(~0u, uuid, 16);
}

/* The per-inode seed: crc32c(crc32c(fs seed, le32 ino), le32 generation). */
static inline uint32_t ext4_inode_csum_seed(uint32_t fs_seed, uint32_t ino, uint32_t gen)
{
	uint32_t c = crc32c(fs_seed, &ino, 4);

	return crc32c(c, &gen, 4);
}

#endif
