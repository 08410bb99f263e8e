/* SPDX-License-Identifier: MIT */
/*
 * Block status: what a disk says of a range besides its bytes, in one context at a time
 * (NBD's "base:allocation" and "lazyblk:dirty"), as extents with flags. The disk interface
 * (disk/disk.h) and the engine behind the lazy image both speak it.
 */
#ifndef LZ_BLKD_BLOCK_STATUS_H
#define LZ_BLKD_BLOCK_STATUS_H

#include <stdint.h>

enum disk_ctx {
	DISK_CTX_ALLOCATION,  /* flags DISK_STATUS_HOLE | DISK_STATUS_ZERO, or 0 for data */
	DISK_CTX_DIRTY,       /* flags DISK_STATUS_DIRTY: written since the base (or zeroed) */
	DISK_CTX_COUNT
};
#define DISK_STATUS_HOLE 1u   /* allocation: not allocated */
#define DISK_STATUS_ZERO 2u   /* allocation: reads as zeros */
#define DISK_STATUS_DIRTY 1u  /* dirty: changed since the base */
#define DISK_CTX_BIT(c) (1u << (c))

/* One extent: cb returns 0 to go on, > 0 to stop early, < 0 to fail (returned as is). */
typedef int (*disk_extent_fn)(void *arg, uint64_t off, uint64_t len, uint32_t flags);

#endif
