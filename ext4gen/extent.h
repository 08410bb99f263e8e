/* SPDX-License-Identifier: MIT */
/*
 * Extent trees: the extents of a file placed by alloc_run(), and the tree that holds
 * them — in the inode for up to 4, else index and leaf blocks, as shallow as possible.
 */
#ifndef LZ_EXT4GEN_EXTENT_H
#define LZ_EXT4GEN_EXTENT_H

#include <stddef.h>
#include <stdint.h>

#include "ext4_fs.h"
#include "geom.h"

struct lrange {
	uint64_t start, len;      /* logical blocks */
};

struct ext_list {
	struct ext4_extent *e;
	size_t n, cap;
};

/*
 * Extents for logical ranges (sorted, disjoint) whose blocks were allocated in order as
 * one alloc_run() from phys. Reuses l's memory.
 */
int extent_build(const struct geom *g, uint64_t phys, const struct lrange *r, size_t nr,
		 struct ext_list *l);
/* Tree blocks needed beyond the inode for n extents (0 when n <= 4). */
uint32_t extent_tree_blocks(size_t n);
/*
 * Fill i_block and render the tree blocks (extent_tree_blocks(n) of them, 4096 bytes
 * each, to live at tree_first..) with their checksums (inode_seed: the inode's seed).
 */
void extent_render(const struct ext_list *l, uint64_t tree_first, uint32_t i_block[15],
		   uint8_t *tree_out, uint32_t inode_seed);
/* An empty root (no blocks yet): for empty files and zero-size files. */
void extent_empty_root(uint32_t i_block[15]);

#endif
