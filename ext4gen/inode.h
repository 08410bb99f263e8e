/* SPDX-License-Identifier: MIT */
/* Encoding one 256-byte ext4 inode, with its metadata_csum checksum. */
#ifndef LZ_EXT4GEN_INODE_H
#define LZ_EXT4GEN_INODE_H

#include <stdbool.h>
#include <stdint.h>

#include "ext4_fs.h"

struct inode_in {
	uint16_t mode;            /* S_IF* | 07777 */
	uint32_t uid, gid;
	uint64_t size;
	uint16_t links;
	int64_t atime, mtime, ctime, crtime;
	uint32_t atime_ns, mtime_ns, ctime_ns, crtime_ns;
	uint32_t flags;           /* EXT4_*_FL */
	uint64_t blocks512;       /* i_blocks in 512-byte units */
	uint64_t file_acl;        /* xattr block or 0 */
	uint32_t i_block[EXT4_N_BLOCKS];
	const uint8_t *ibody;     /* in-inode xattrs (XATTR_IBODY_SIZE bytes) or NULL */
	uint32_t generation;
};

/* Seconds outside ext4's range (1901-12-13 .. 2446-05-10) are clamped; returns true then. */
bool inode_encode(const struct inode_in *in, uint32_t ino, uint32_t csum_seed,
		  uint8_t out[EXT4_INODE_SIZE]);
/* Checksum of an encoded inode (used for all-zero reserved inodes as well). */
void inode_csum(uint8_t raw[EXT4_INODE_SIZE], uint32_t ino, uint32_t generation,
		uint32_t csum_seed);

#endif
