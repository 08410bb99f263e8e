/* SPDX-License-Identifier: MIT */
#include "inode.h"

#include <stddef.h>
#include <string.h>

#include "csum.h"

#define EXT4_TIME_MIN (-((int64_t)1 << 31))
#define EXT4_TIME_MAX (((int64_t)1 << 34) - ((int64_t)1 << 31) - 1)

/* Low 32 bits in i_*time, epoch bits (2) and nanoseconds (30) in i_*time_extra. */
static bool encode_time(int64_t sec, uint32_t ns, uint32_t *lo, uint32_t *extra)
{
	bool clamped = false;

	if (sec < EXT4_TIME_MIN) {
		sec = EXT4_TIME_MIN;
		ns = 0;
		clamped = true;
	} else if (sec > EXT4_TIME_MAX) {
		sec = EXT4_TIME_MAX;
		ns = 999999999;
		clamped = true;
	}
	*lo = (uint32_t)sec;
	*extra = (uint32_t)(((sec - (int64_t)(int32_t)(uint32_t)sec) >> 32) & 3) | ns << 2;
	return clamped;
}

void inode_csum(uint8_t raw[EXT4_INODE_SIZE], uint32_t ino, uint32_t generation,
		uint32_t csum_seed)
{
	struct ext4_inode *in = (struct ext4_inode *)raw;
	uint32_t c;

	/* the high half exists only when i_extra_isize covers it */
	bool hi = in->i_extra_isize >= 4;

	in->i_checksum_lo = 0;
	if (hi)
		in->i_checksum_hi = 0;
	c = crc32c(ext4_inode_csum_seed(csum_seed, ino, generation), raw, EXT4_INODE_SIZE);
	in->i_checksum_lo = (uint16_t)c;
	if (hi)
		in->i_checksum_hi = (uint16_t)(c >> 16);
}

bool inode_encode(const struct inode_in *in, uint32_t ino, uint32_t csum_seed,
		  uint8_t out[EXT4_INODE_SIZE])
{
	struct ext4_inode *r = (struct ext4_inode *)out;
	bool clamped = false;

	memset(out, 0, EXT4_INODE_SIZE);
	r->i_mode = in->mode;
	r->i_uid = (uint16_t)in->uid;
	r->i_uid_high = (uint16_t)(in->uid >> 16);
	r->i_gid = (uint16_t)in->gid;
	r->i_gid_high = (uint16_t)(in->gid >> 16);
	r->i_size_lo = (uint32_t)in->size;
	r->i_size_high = (uint32_t)(in->size >> 32);
	r->i_links_count = in->links;
	r->i_flags = in->flags;
	if (in->blocks512 >> 48) {
		/* huge_file: count in filesystem blocks */
		uint64_t fsb = in->blocks512 >> (EXT4_BLOCK_BITS - 9);

		r->i_flags |= EXT4_HUGE_FILE_FL;
		r->i_blocks_lo = (uint32_t)fsb;
		r->i_blocks_high = (uint16_t)(fsb >> 32);
	} else {
		r->i_blocks_lo = (uint32_t)in->blocks512;
		r->i_blocks_high = (uint16_t)(in->blocks512 >> 32);
	}
	r->i_file_acl_lo = (uint32_t)in->file_acl;
	r->i_file_acl_high = (uint16_t)(in->file_acl >> 32);
	memcpy(r->i_block, in->i_block, sizeof(r->i_block));
	r->i_generation = in->generation;
	r->i_extra_isize = EXT4_EXTRA_ISIZE;
	clamped |= encode_time(in->atime, in->atime_ns, &r->i_atime, &r->i_atime_extra);
	clamped |= encode_time(in->mtime, in->mtime_ns, &r->i_mtime, &r->i_mtime_extra);
	clamped |= encode_time(in->ctime, in->ctime_ns, &r->i_ctime, &r->i_ctime_extra);
	clamped |= encode_time(in->crtime, in->crtime_ns, &r->i_crtime, &r->i_crtime_extra);
	if (in->ibody)
		memcpy(out + EXT4_GOOD_OLD_INODE_SIZE + EXT4_EXTRA_ISIZE, in->ibody,
		       EXT4_INODE_SIZE - EXT4_GOOD_OLD_INODE_SIZE - EXT4_EXTRA_ISIZE);
	inode_csum(out, ino, in->generation, csum_seed);
	return clamped;
}
