/* SPDX-License-Identifier: MIT */
/*
 * Filesystem geometry (groups, inode tables, where superblock backups live) and the block
 * allocator: blocks are handed out in increasing order, stepping over the superblock and
 * group descriptor copies of sparse_super groups, so placement is a single pass.
 */
#ifndef LZ_EXT4GEN_GEOM_H
#define LZ_EXT4GEN_GEOM_H

#include <stdbool.h>
#include <stdint.h>
#include "../common/test_hook.h"

struct geom {
	uint64_t blocks;          /* filesystem size in blocks */
	uint32_t groups;
	uint32_t inodes_per_group;
	uint32_t itable_blocks;   /* per group */
	uint32_t gdt_blocks;      /* group descriptor blocks (each superblock copy has them) */
	uint64_t inodes;          /* groups * inodes_per_group */
	uint8_t *has_super;       /* per group (+1): 1 if it carries a superblock copy; owned */
};

/* Groups 0, 1 and powers of 3, 5 and 7 carry a superblock and descriptor copy. */
bool geom_group_has_super(uint32_t group);
/* Blocks at the start of group g taken by the superblock copy + descriptors (0 if none). */
uint32_t geom_super_blocks(const struct geom *g, uint32_t group);
/* Fill groups, gdt_blocks, itable and inode counts for `blocks` and at least `inodes`. */
int geom_init(struct geom *g, uint64_t blocks, uint64_t inodes);
void geom_free(struct geom *g);

struct alloc {
	const struct geom *g;
	uint64_t next;            /* first block not handed out yet */
};

/* Next free block at or after a->next (skipping superblock copies), not yet taken. */
TEST_HOOK
uint64_t alloc_peek(struct alloc *a);
/* n blocks in one piece (no superblock copy inside); returns the first, or -1 if full. */
int64_t alloc_contig(struct alloc *a, uint64_t n);
/* n blocks, possibly in pieces around superblock copies; returns the first, -1 if full. */
int64_t alloc_run(struct alloc *a, uint64_t n);

/*
 * Walk n blocks that alloc_run() handed out from `first`: cb(arg, phys, count) for each
 * contiguous piece, in order. Returns the first non-zero cb result.
 */
/* True when n blocks from first hold no superblock copy (one piece). */
bool geom_run_is_contiguous(const struct geom *g, uint64_t first, uint64_t n);
typedef int (*geom_piece_fn)(void *arg, uint64_t phys, uint64_t count);
int geom_walk_run(const struct geom *g, uint64_t first, uint64_t n, geom_piece_fn cb, void *arg);

#endif
