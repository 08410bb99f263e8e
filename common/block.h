/* SPDX-License-Identifier: MIT */
/* The block: the unit every layer of a lazyblk disk works in. */
#ifndef LZ_COMMON_BLOCK_H
#define LZ_COMMON_BLOCK_H

/*
 * 4 KiB: the block of the ext4 filesystem mkfs synthesizes, of the layout (metadata blocks,
 * runs), of the overlay (a block's state, the read-modify-write of a partial write), of the
 * engine's reads and writes, virtio-blk's physical block and NBD's preferred block size.
 * (A disk's offsets and lengths are in 512-byte sectors: blkd/sector.h.)
 */
#define DISK_BLOCK 4096u

#endif
