/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes in ext4's on-disk form: as many as fit in the inode body (after
 * i_extra_isize, behind the 4-byte magic), the rest in one external xattr block.
 * system.posix_acl_access/default are converted from the getxattr(2) (posix_acl_xattr)
 * format to ext4's compact ACL format.
 */
#ifndef LZ_EXT4GEN_XATTR_H
#define LZ_EXT4GEN_XATTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cas/manifest.h"
#include "../common/why.h"

/* Bytes available for in-inode xattrs in a 256-byte inode with i_extra_isize 32. */
#define XATTR_IBODY_SIZE (256u - 128u - 32u)

struct xattr_layout {
	uint8_t ibody[XATTR_IBODY_SIZE]; /* magic + entries + values, or all zero if none */
	bool has_ibody;
	bool has_block;                  /* block[] is valid and the inode needs i_file_acl */
	uint8_t block[4096];             /* h_checksum left 0: see xattr_block_csum() */
};

/*
 * Lay out the xattrs of one inode. Returns 0, or -EINVAL with *why set for attributes
 * ext4 cannot hold (a name or value too large for one block, a malformed ACL value),
 * -E2BIG when they do not fit in the inode plus one block.
 */
int xattr_build(const struct mf_xattr_in *x, uint32_t n, struct xattr_layout *out,
		char *why, size_t why_len);
/* Stamp h_checksum once the block's number is known. */
void xattr_block_csum(uint8_t *block, uint64_t blocknr, uint32_t csum_seed);

#endif
