/* SPDX-License-Identifier: MIT */
/*
 * ext4 on-disk structures (little-endian; jbd2 is big-endian), written from the kernel's
 * Documentation/filesystems/ext4/ descriptions. Only what ext4gen writes.
 */
#ifndef LZ_EXT4GEN_EXT4_FS_H
#define LZ_EXT4GEN_EXT4_FS_H

#include <stdint.h>

#include "../common/block.h"

#define EXT4_BLOCK_BITS 12            /* the filesystem's block: DISK_BLOCK */
_Static_assert((1u << EXT4_BLOCK_BITS) == DISK_BLOCK, "ext4's block is the disk's");
#define EXT4_INODE_SIZE 256u
#define EXT4_GOOD_OLD_INODE_SIZE 128u
#define EXT4_EXTRA_ISIZE 32u          /* i_extra_isize: up to and including i_projid */
#define EXT4_DESC_SIZE 64u
#define EXT4_BLOCKS_PER_GROUP 32768u   /* 8 * block size: one bitmap block */
#define EXT4_SUPER_MAGIC 0xEF53
#define EXT4_FIRST_INO 11
#define EXT4_ROOT_INO 2
#define EXT4_JOURNAL_INO 8
#define EXT4_NAME_LEN 255
#define EXT4_N_BLOCKS 15

/* s_feature_compat */
#define EXT4_FEATURE_COMPAT_HAS_JOURNAL 0x0004
#define EXT4_FEATURE_COMPAT_EXT_ATTR 0x0008
#define EXT4_FEATURE_COMPAT_DIR_INDEX 0x0020
/* s_feature_ro_compat */
#define EXT4_FEATURE_RO_COMPAT_SPARSE_SUPER 0x0001
#define EXT4_FEATURE_RO_COMPAT_LARGE_FILE 0x0002
#define EXT4_FEATURE_RO_COMPAT_HUGE_FILE 0x0008
#define EXT4_FEATURE_RO_COMPAT_DIR_NLINK 0x0020
#define EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE 0x0040
#define EXT4_FEATURE_RO_COMPAT_METADATA_CSUM 0x0400
/* s_feature_incompat */
#define EXT4_FEATURE_INCOMPAT_FILETYPE 0x0002
#define EXT4_FEATURE_INCOMPAT_EXTENTS 0x0040
#define EXT4_FEATURE_INCOMPAT_64BIT 0x0080
#define EXT4_FEATURE_INCOMPAT_FLEX_BG 0x0200

/* s_flags */
#define EXT2_FLAGS_SIGNED_HASH 0x0001
#define EXT2_FLAGS_UNSIGNED_HASH 0x0002

/* s_def_hash_version / dx_root hash_version */
#define EXT4_HASH_LEGACY 0
#define EXT4_HASH_HALF_MD4 1
#define EXT4_HASH_TEA 2
#define EXT4_HASH_LEGACY_UNSIGNED 3
#define EXT4_HASH_HALF_MD4_UNSIGNED 4
#define EXT4_HASH_TEA_UNSIGNED 5

/* bg_flags */
#define EXT4_BG_INODE_UNINIT 0x0001
#define EXT4_BG_BLOCK_UNINIT 0x0002
#define EXT4_BG_INODE_ZEROED 0x0004

/* i_flags */
#define EXT4_INDEX_FL 0x00001000      /* hashed (htree) directory */
#define EXT4_HUGE_FILE_FL 0x00040000
#define EXT4_EXTENTS_FL 0x00080000

/* directory entry file types */
#define EXT4_FT_UNKNOWN 0
#define EXT4_FT_REG_FILE 1
#define EXT4_FT_DIR 2
#define EXT4_FT_CHRDEV 3
#define EXT4_FT_BLKDEV 4
#define EXT4_FT_FIFO 5
#define EXT4_FT_SOCK 6
#define EXT4_FT_SYMLINK 7
#define EXT4_FT_DIR_CSUM 0xDE

struct ext4_super_block {
	uint32_t s_inodes_count;
	uint32_t s_blocks_count_lo;
	uint32_t s_r_blocks_count_lo;
	uint32_t s_free_blocks_count_lo;
	uint32_t s_free_inodes_count;
	uint32_t s_first_data_block;
	uint32_t s_log_block_size;
	uint32_t s_log_cluster_size;
	uint32_t s_blocks_per_group;
	uint32_t s_clusters_per_group;
	uint32_t s_inodes_per_group;
	uint32_t s_mtime;
	uint32_t s_wtime;
	uint16_t s_mnt_count;
	int16_t s_max_mnt_count;
	uint16_t s_magic;
	uint16_t s_state;
	uint16_t s_errors;
	uint16_t s_minor_rev_level;
	uint32_t s_lastcheck;
	uint32_t s_checkinterval;
	uint32_t s_creator_os;
	uint32_t s_rev_level;
	uint16_t s_def_resuid;
	uint16_t s_def_resgid;
	/* EXT4_DYNAMIC_REV */
	uint32_t s_first_ino;
	uint16_t s_inode_size;
	uint16_t s_block_group_nr;
	uint32_t s_feature_compat;
	uint32_t s_feature_incompat;
	uint32_t s_feature_ro_compat;
	uint8_t s_uuid[16];
	char s_volume_name[16];
	char s_last_mounted[64];
	uint32_t s_algorithm_usage_bitmap;
	uint8_t s_prealloc_blocks;
	uint8_t s_prealloc_dir_blocks;
	uint16_t s_reserved_gdt_blocks;
	uint8_t s_journal_uuid[16];
	uint32_t s_journal_inum;
	uint32_t s_journal_dev;
	uint32_t s_last_orphan;
	uint32_t s_hash_seed[4];
	uint8_t s_def_hash_version;
	uint8_t s_jnl_backup_type;
	uint16_t s_desc_size;
	uint32_t s_default_mount_opts;
	uint32_t s_first_meta_bg;
	uint32_t s_mkfs_time;
	uint32_t s_jnl_blocks[17];
	/* 64bit */
	uint32_t s_blocks_count_hi;
	uint32_t s_r_blocks_count_hi;
	uint32_t s_free_blocks_count_hi;
	uint16_t s_min_extra_isize;
	uint16_t s_want_extra_isize;
	uint32_t s_flags;
	uint16_t s_raid_stride;
	uint16_t s_mmp_interval;
	uint64_t s_mmp_block;
	uint32_t s_raid_stripe_width;
	uint8_t s_log_groups_per_flex;
	uint8_t s_checksum_type;
	uint16_t s_reserved_pad;
	uint64_t s_kbytes_written;
	uint32_t s_snapshot_inum;
	uint32_t s_snapshot_id;
	uint64_t s_snapshot_r_blocks_count;
	uint32_t s_snapshot_list;
	uint32_t s_error_count;
	uint32_t s_first_error_time;
	uint32_t s_first_error_ino;
	uint64_t s_first_error_block;
	uint8_t s_first_error_func[32];
	uint32_t s_first_error_line;
	uint32_t s_last_error_time;
	uint32_t s_last_error_ino;
	uint32_t s_last_error_line;
	uint64_t s_last_error_block;
	uint8_t s_last_error_func[32];
	uint8_t s_mount_opts[64];
	uint32_t s_usr_quota_inum;
	uint32_t s_grp_quota_inum;
	uint32_t s_overhead_clusters;
	uint32_t s_backup_bgs[2];
	uint8_t s_encrypt_algos[4];
	uint8_t s_encrypt_pw_salt[16];
	uint32_t s_lpf_ino;
	uint32_t s_prj_quota_inum;
	uint32_t s_checksum_seed;
	uint8_t s_wtime_hi;
	uint8_t s_mtime_hi;
	uint8_t s_mkfs_time_hi;
	uint8_t s_lastcheck_hi;
	uint8_t s_first_error_time_hi;
	uint8_t s_last_error_time_hi;
	uint8_t s_first_error_errcode;
	uint8_t s_last_error_errcode;
	uint16_t s_encoding;
	uint16_t s_encoding_flags;
	uint32_t s_orphan_file_inum;
	uint32_t s_reserved[94];
	uint32_t s_checksum;
} __attribute__((packed));

struct ext4_group_desc {
	uint32_t bg_block_bitmap_lo;
	uint32_t bg_inode_bitmap_lo;
	uint32_t bg_inode_table_lo;
	uint16_t bg_free_blocks_count_lo;
	uint16_t bg_free_inodes_count_lo;
	uint16_t bg_used_dirs_count_lo;
	uint16_t bg_flags;
	uint32_t bg_exclude_bitmap_lo;
	uint16_t bg_block_bitmap_csum_lo;
	uint16_t bg_inode_bitmap_csum_lo;
	uint16_t bg_itable_unused_lo;
	uint16_t bg_checksum;
	uint32_t bg_block_bitmap_hi;
	uint32_t bg_inode_bitmap_hi;
	uint32_t bg_inode_table_hi;
	uint16_t bg_free_blocks_count_hi;
	uint16_t bg_free_inodes_count_hi;
	uint16_t bg_used_dirs_count_hi;
	uint16_t bg_itable_unused_hi;
	uint32_t bg_exclude_bitmap_hi;
	uint16_t bg_block_bitmap_csum_hi;
	uint16_t bg_inode_bitmap_csum_hi;
	uint32_t bg_reserved;
} __attribute__((packed));

struct ext4_inode {
	uint16_t i_mode;
	uint16_t i_uid;
	uint32_t i_size_lo;
	uint32_t i_atime;
	uint32_t i_ctime;
	uint32_t i_mtime;
	uint32_t i_dtime;
	uint16_t i_gid;
	uint16_t i_links_count;
	uint32_t i_blocks_lo;
	uint32_t i_flags;
	uint32_t i_version_lo;          /* osd1 */
	uint32_t i_block[EXT4_N_BLOCKS];
	uint32_t i_generation;
	uint32_t i_file_acl_lo;
	uint32_t i_size_high;
	uint32_t i_obso_faddr;
	/* osd2 (linux) */
	uint16_t i_blocks_high;
	uint16_t i_file_acl_high;
	uint16_t i_uid_high;
	uint16_t i_gid_high;
	uint16_t i_checksum_lo;
	uint16_t i_reserved;
	/* large inode */
	uint16_t i_extra_isize;
	uint16_t i_checksum_hi;
	uint32_t i_ctime_extra;
	uint32_t i_mtime_extra;
	uint32_t i_atime_extra;
	uint32_t i_crtime;
	uint32_t i_crtime_extra;
	uint32_t i_version_hi;
	uint32_t i_projid;
};

/* extents */
#define EXT4_EXT_MAGIC 0xF30A
#define EXT4_EXT_MAX_LEN 32768u        /* initialized extent */

struct ext4_extent_header {
	uint16_t eh_magic;
	uint16_t eh_entries;
	uint16_t eh_max;
	uint16_t eh_depth;
	uint32_t eh_generation;
} __attribute__((packed));

struct ext4_extent {
	uint32_t ee_block;
	uint16_t ee_len;
	uint16_t ee_start_hi;
	uint32_t ee_start_lo;
} __attribute__((packed));

struct ext4_extent_idx {
	uint32_t ei_block;
	uint32_t ei_leaf_lo;
	uint16_t ei_leaf_hi;
	uint16_t ei_unused;
} __attribute__((packed));

struct ext4_extent_tail {
	uint32_t et_checksum;
} __attribute__((packed));

/* directories */
struct ext4_dir_entry_2 {
	uint32_t inode;
	uint16_t rec_len;
	uint8_t name_len;
	uint8_t file_type;
	char name[];
} __attribute__((packed));

struct ext4_dir_entry_tail {
	uint32_t det_reserved_zero1;
	uint16_t det_rec_len;          /* 12 */
	uint8_t det_reserved_zero2;
	uint8_t det_reserved_ft;       /* 0xDE */
	uint32_t det_checksum;
} __attribute__((packed));

struct dx_root_info {
	uint32_t reserved_zero;
	uint8_t hash_version;
	uint8_t info_length;           /* 8 */
	uint8_t indirect_levels;
	uint8_t unused_flags;
} __attribute__((packed));

struct dx_countlimit {
	uint16_t limit;
	uint16_t count;
} __attribute__((packed));

struct dx_entry {
	uint32_t hash;
	uint32_t block;
} __attribute__((packed));

struct dx_tail {
	uint32_t dt_reserved;
	uint32_t dt_checksum;
} __attribute__((packed));

/* extended attributes */
#define EXT4_XATTR_MAGIC 0xEA020000u

struct ext4_xattr_header {            /* at the start of an xattr block */
	uint32_t h_magic;
	uint32_t h_refcount;
	uint32_t h_blocks;             /* 1 */
	uint32_t h_hash;
	uint32_t h_checksum;
	uint32_t h_reserved[3];
} __attribute__((packed));

struct ext4_xattr_ibody_header {      /* after i_extra_isize in a large inode */
	uint32_t h_magic;
} __attribute__((packed));

struct ext4_xattr_entry {
	uint8_t e_name_len;
	uint8_t e_name_index;
	uint16_t e_value_offs;
	uint32_t e_value_inum;
	uint32_t e_value_size;
	uint32_t e_hash;
	char e_name[];
} __attribute__((packed));

/* jbd2 (big-endian) */
#define JBD2_MAGIC_NUMBER 0xC03B3998u
#define JBD2_SUPERBLOCK_V2 4

struct jbd2_superblock {
	uint32_t h_magic;
	uint32_t h_blocktype;
	uint32_t h_sequence;
	uint32_t s_blocksize;
	uint32_t s_maxlen;
	uint32_t s_first;
	uint32_t s_sequence;
	uint32_t s_start;
	uint32_t s_errno;
	uint32_t s_feature_compat;
	uint32_t s_feature_incompat;
	uint32_t s_feature_ro_compat;
	uint8_t s_uuid[16];
	uint32_t s_nr_users;
	uint32_t s_dynsuper;
	uint32_t s_max_transaction;
	uint32_t s_max_trans_data;
	uint8_t s_checksum_type;
	uint8_t s_padding2[3];
	uint32_t s_num_fc_blks;
	uint32_t s_head;
	uint32_t s_padding[40];
	uint32_t s_checksum;
	uint8_t s_users[16 * 48];
} __attribute__((packed));

_Static_assert(sizeof(struct ext4_super_block) == 1024, "superblock");
_Static_assert(sizeof(struct ext4_group_desc) == 64, "group descriptor");
_Static_assert(sizeof(struct ext4_inode) == 160, "inode (128 + 32 extra)");
_Static_assert(sizeof(struct jbd2_superblock) == 1024, "jbd2 superblock");

#endif
