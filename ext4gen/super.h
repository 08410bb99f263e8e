/* SPDX-License-Identifier: MIT */
/* Superblock, group descriptors, bitmaps and the jbd2 journal superblock. */
#ifndef LZ_EXT4GEN_SUPER_H
#define LZ_EXT4GEN_SUPER_H

#include <stdint.h>

#include "ext4_fs.h"
#include "geom.h"

struct fs_info {
	const struct geom *g;
	uint8_t uuid[16];
	char label[16];
	uint32_t hash_seed[4];
	uint32_t csum_seed;
	uint32_t timestamp;
	uint64_t free_blocks;
	uint64_t free_inodes;
	uint32_t journal_blocks;
	uint32_t jnl_blocks[17];   /* s_jnl_blocks: journal inode i_block + size */
};

/* The primary superblock (s_block_group_nr = group for copies), checksummed. */
void super_build(const struct fs_info *fs, uint32_t group, struct ext4_super_block *sb);
/* Checksum one group descriptor (bg_checksum) in place. */
void gdt_csum(struct ext4_group_desc *d, uint32_t group, uint32_t csum_seed);
/* crc32c bitmap checksums into the descriptor (lo and hi halves). */
void bitmap_csums(struct ext4_group_desc *d, const uint8_t *block_bitmap,
		  const uint8_t *inode_bitmap, uint32_t inodes_per_group, uint32_t csum_seed);
/* A clean, empty jbd2 v2 superblock for an internal journal of `blocks` blocks. */
void journal_super_build(const struct fs_info *fs, uint32_t blocks, uint8_t out[4096]);

#endif
