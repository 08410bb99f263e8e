/* SPDX-License-Identifier: MIT */
#include "super.h"

#include <string.h>

#include "csum.h"

#define EXT4_DEFM_XATTR_USER 0x0004
#define EXT4_DEFM_ACL 0x0008

void super_build(const struct fs_info *fs, uint32_t group, struct ext4_super_block *sb)
{
	const struct geom *g = fs->g;
	uint32_t c;

	memset(sb, 0, sizeof(*sb));
	sb->s_inodes_count = (uint32_t)g->inodes;
	sb->s_blocks_count_lo = (uint32_t)g->blocks;
	sb->s_blocks_count_hi = (uint32_t)(g->blocks >> 32);
	sb->s_free_blocks_count_lo = (uint32_t)fs->free_blocks;
	sb->s_free_blocks_count_hi = (uint32_t)(fs->free_blocks >> 32);
	sb->s_free_inodes_count = (uint32_t)fs->free_inodes;
	sb->s_first_data_block = 0;
	sb->s_log_block_size = EXT4_BLOCK_BITS - 10;
	sb->s_log_cluster_size = EXT4_BLOCK_BITS - 10;
	sb->s_blocks_per_group = EXT4_BLOCKS_PER_GROUP;
	sb->s_clusters_per_group = EXT4_BLOCKS_PER_GROUP;
	sb->s_inodes_per_group = g->inodes_per_group;
	sb->s_wtime = fs->timestamp;
	sb->s_max_mnt_count = -1;
	sb->s_magic = EXT4_SUPER_MAGIC;
	sb->s_state = 1;                      /* cleanly unmounted */
	sb->s_errors = 1;                     /* continue */
	sb->s_lastcheck = fs->timestamp;
	sb->s_creator_os = 0;                 /* Linux */
	sb->s_rev_level = 1;
	sb->s_first_ino = EXT4_FIRST_INO;
	sb->s_inode_size = EXT4_INODE_SIZE;
	sb->s_block_group_nr = (uint16_t)group;
	sb->s_feature_compat = EXT4_FEATURE_COMPAT_HAS_JOURNAL | EXT4_FEATURE_COMPAT_EXT_ATTR |
			       EXT4_FEATURE_COMPAT_DIR_INDEX;
	sb->s_feature_incompat = EXT4_FEATURE_INCOMPAT_FILETYPE | EXT4_FEATURE_INCOMPAT_EXTENTS |
				 EXT4_FEATURE_INCOMPAT_64BIT | EXT4_FEATURE_INCOMPAT_FLEX_BG;
	sb->s_feature_ro_compat = EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER |
				  EXT4_FEATURE_RO_COMPAT_LARGE_FILE |
				  EXT4_FEATURE_RO_COMPAT_HUGE_FILE | EXT4_FEATURE_RO_COMPAT_DIR_NLINK |
				  EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE |
				  EXT4_FEATURE_RO_COMPAT_METADATA_CSUM;
	memcpy(sb->s_uuid, fs->uuid, 16);
	memcpy(sb->s_volume_name, fs->label, 16);
	sb->s_journal_inum = EXT4_JOURNAL_INO;
	memcpy(sb->s_hash_seed, fs->hash_seed, sizeof(sb->s_hash_seed));
	sb->s_def_hash_version = EXT4_HASH_HALF_MD4;
	sb->s_jnl_backup_type = 1;            /* EXT3_JNL_BACKUP_BLOCKS */
	memcpy(sb->s_jnl_blocks, fs->jnl_blocks, sizeof(sb->s_jnl_blocks));
	sb->s_desc_size = EXT4_DESC_SIZE;
	sb->s_default_mount_opts = EXT4_DEFM_XATTR_USER | EXT4_DEFM_ACL;
	sb->s_mkfs_time = fs->timestamp;
	sb->s_min_extra_isize = EXT4_EXTRA_ISIZE;
	sb->s_want_extra_isize = EXT4_EXTRA_ISIZE;
	sb->s_flags = EXT2_FLAGS_SIGNED_HASH;
	sb->s_log_groups_per_flex = 4;
	sb->s_checksum_type = 1;              /* crc32c */
	c = crc32c(~0u, sb, offsetof(struct ext4_super_block, s_checksum));
	sb->s_checksum = c;
}

void gdt_csum(struct ext4_group_desc *d, uint32_t group, uint32_t csum_seed)
{
	uint32_t c;

	d->bg_checksum = 0;
	c = crc32c(csum_seed, &group, 4);
	c = crc32c(c, d, sizeof(*d));
	d->bg_checksum = (uint16_t)c;
}

void bitmap_csums(struct ext4_group_desc *d, const uint8_t *block_bitmap,
		  const uint8_t *inode_bitmap, uint32_t inodes_per_group, uint32_t csum_seed)
{
	uint32_t b = crc32c(csum_seed, block_bitmap, EXT4_BLOCKS_PER_GROUP / 8);
	uint32_t i = crc32c(csum_seed, inode_bitmap, inodes_per_group / 8);

	d->bg_block_bitmap_csum_lo = (uint16_t)b;
	d->bg_block_bitmap_csum_hi = (uint16_t)(b >> 16);
	d->bg_inode_bitmap_csum_lo = (uint16_t)i;
	d->bg_inode_bitmap_csum_hi = (uint16_t)(i >> 16);
}

void journal_super_build(const struct fs_info *fs, uint32_t blocks, uint8_t out[4096])
{
	struct jbd2_superblock *j = (struct jbd2_superblock *)out;

	memset(out, 0, 4096);
	j->h_magic = __builtin_bswap32(JBD2_MAGIC_NUMBER);
	j->h_blocktype = __builtin_bswap32(JBD2_SUPERBLOCK_V2);
	j->s_blocksize = __builtin_bswap32(DISK_BLOCK);
	j->s_maxlen = __builtin_bswap32(blocks);
	j->s_first = __builtin_bswap32(1);
	j->s_sequence = __builtin_bswap32(1);
	j->s_nr_users = __builtin_bswap32(1);
	memcpy(j->s_uuid, fs->uuid, 16);
}
