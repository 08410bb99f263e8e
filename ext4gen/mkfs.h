/* SPDX-License-Identifier: MIT */
/*
 * mkfs: a manifest → a layout holding a complete ext4 filesystem's metadata (features of
 * a current `mke2fs -t ext4`: has_journal, extents, 64bit, flex_bg, sparse_super,
 * large_file, huge_file, dir_nlink, extra_isize, filetype, ext_attr, dir_index,
 * metadata_csum) and the map from data blocks to chunks.
 */
#ifndef LZ_EXT4GEN_MKFS_H
#define LZ_EXT4GEN_MKFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cas/manifest.h"
#include "../common/why.h"

struct mkfs_opts {
	uint64_t size;            /* bytes; 0: used space + 1 GiB, rounded up */
	uint64_t journal_size;    /* bytes; 0: 64 MiB (less on tiny filesystems) */
	uint64_t inodes;          /* 0: one per 16 KiB, at least entries + 25% */
	const char *label;        /* up to 16 bytes */
	const uint8_t *uuid;      /* NULL: derived from the manifest digest */
	const char *order_file;   /* paths placed first, one per line (may be NULL) */
	uint32_t timestamp;       /* superblock and special inode times (default 0) */
	/*
	 * Warnings (NOTE_WARN), one line each: a timestamp clamped, an xattr dropped, --order
	 * paths not in the image.
	 */
	struct note_sink notes;
};

struct mkfs_result {
	uint64_t blocks;          /* filesystem size in 4 KiB blocks */
	uint64_t inodes;
	uint64_t used_blocks;
	uint64_t meta_blocks;     /* stored in the layout */
	uint64_t data_runs;
	uint32_t groups;
	uint8_t uuid[16];
	uint8_t digest[SHA256_LEN]; /* the layout's */
};

/*
 * 0, or -errno with one line in why (why_len bytes, may be 0): "--size 16777216 is too small:
 * ...", "/a/b: name longer than 255 bytes", "OUT: writing the layout: ...". Prints nothing.
 */
int mkfs_run(const struct manifest *m, const struct mkfs_opts *o, const char *out_path,
	     struct mkfs_result *res, char *why, size_t why_len);

#endif
