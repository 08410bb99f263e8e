/* SPDX-License-Identifier: MIT */
/* The sector: the unit of every disk offset and length lazyblk's block devices take. */
#ifndef LZ_BLKD_SECTOR_H
#define LZ_BLKD_SECTOR_H

/*
 * 512 bytes: virtio-blk's sector (the capacity, a request's sector, blk_size), NBD's
 * minimum block size, and the alignment the engine, the reader and a raw disk check.
 */
#define BLKD_SECTOR 512u

#endif
