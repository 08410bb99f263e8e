/* SPDX-License-Identifier: MIT */
/*
 * mkfs's insides, shared by its files: mkfs_run.c (the driver), mkfs_plan.c (planning:
 * inode numbers, sizes, geometry; placement: one allocation pass in placement order),
 * mkfs_emit.c (emission: metadata blocks and data runs, in disk order, into the layout)
 * and mkfs_entry.c (what both ask of a manifest entry). Not for use outside
 * ext4gen/mkfs*.c.
 */
#ifndef LZ_EXT4GEN_MKFS_INT_H
#define LZ_EXT4GEN_MKFS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cas/manifest.h"
#include "dir.h"
#include "extent.h"
#include "geom.h"
#include "../layout/layout.h"
#include "mkfs.h"
#include "super.h"
#include "xattr.h"

#define NONE UINT32_MAX
#define LPF_INO 11
#define FIRST_FILE_INO 12
#define SLACK_BYTES (1ull << 30)
#define DEFAULT_JOURNAL (64ull << 20)
/*
 * ext4's largest link count (the kernel's EXT4_LINK_MAX): a directory with more
 * subdirectories gets 1, "many" (dir_nlink); any other inode with more hard links is refused.
 */
#define DIR_NLINK_MAX 65000
/*
 * ext4's largest regular file (the kernel's s_maxbytes for extent-mapped files): logical
 * block numbers are 32-bit and the last one stays unused, so a file ends by block
 * 2^32 - 2: 16 TiB - 4 KiB with 4 KiB blocks. Larger files, sparse or not, are refused.
 */
#define FILE_SIZE_MAX (((1ull << 32) - 1) * DISK_BLOCK)

/* Per manifest entry; the whole plan for a file lives here (about 56 bytes). */
struct ent {
	uint64_t phys;          /* first block of its data / directory / symlink blocks */
	uint64_t tree;          /* first extent tree block */
	uint64_t xblk;          /* xattr block, 0 if none */
	uint32_t nblocks;       /* blocks of data / directory / symlink */
	uint32_t tree_blocks;
	uint32_t ino;
	uint32_t parent;        /* entry index */
	uint32_t first_child;   /* directories: entry index of the first child */
	uint32_t next_sib;
	uint32_t links;
	uint8_t htree;
	uint8_t placed;
};

struct mkfs {
	const struct manifest *m;
	const struct mkfs_opts *o;
	struct ent *e;
	size_t n;
	uint32_t lpf;           /* entry index of /lost+found, or NONE when we add our own */
	uint32_t last_ino;
	struct geom g;
	struct fs_info fs;
	struct alloc a;
	uint64_t lpf_block;     /* our lost+found's block */
	uint64_t journal_first;
	uint64_t *used;         /* allocated ranges: start, len pairs (merged) */
	size_t n_used, cap_used;
	struct layout_writer *lw;
	uint64_t meta_blocks, data_runs;
	uint32_t next_backup;   /* next group whose superblock copy is still to be emitted */
	uint64_t *bbitmap_at, *ibitmap_at, *itable_at; /* per group */
	struct ext_list ext;
	struct lrange *ranges;
	size_t cap_ranges;
	uint8_t *buf;           /* scratch, grown as needed */
	size_t cap_buf;
	struct dir_entry_in *dents;
	size_t cap_dents;
	struct mf_xattr_in *xin;
	size_t cap_xin;
	struct xattr_layout *xl;
	uint32_t *order;        /* entry indexes in placement order */
	size_t n_order;
	char *why;              /* the caller's reason buffer (why_len bytes) */
	size_t why_len;
};

/* mkfs_entry.c */
/* The last component of e's path (not NUL-terminated), its length in *len. */
const char *mkfs_name_of(const struct manifest *m, const struct mf_entry *e, uint32_t *len);
/* The entry a hardlink points at (validated by the manifest loader). */
size_t mkfs_link_target(const struct mkfs *k, const struct mf_entry *e);
/* A manifest entry type as a directory entry's file type, and as an inode's mode bits. */
uint8_t mkfs_file_type(uint8_t t);
uint16_t mkfs_mode_bits(uint8_t t);
/* The reason of a failure, into the caller's buffer (common/why.h); returns err. */
#define mkfs_fail(k, err, ...) why_set((k)->why, (k)->why_len, (err), __VA_ARGS__)
/* A warning, to the caller's notes (mkfs_opts.notes). */
#define mkfs_warn(k, ...) note_emit(&(k)->o->notes, NOTE_WARN, __VA_ARGS__)

/* mkfs_plan.c: planning, in this order; every one says why on failure (mkfs_fail) */
int mkfs_plan_tree(struct mkfs *k);
int mkfs_plan_sizes(struct mkfs *k, uint64_t *need);
int mkfs_plan_geometry(struct mkfs *k, uint64_t need, uint32_t *journal_blocks);
/* Placement (-ENOSPC: the image does not fit; the caller says so). */
int mkfs_place_all(struct mkfs *k, uint32_t journal_blocks);
/* Directory entries of entry i (plus lost+found for the root), into k->dents. */
int mkfs_dir_entries(struct mkfs *k, size_t i, size_t *n);
void mkfs_dir_params(const struct mkfs *k, size_t i, struct dir_params *p);
/* Lay out entry i's xattrs into k->xl; says why on failure (mkfs_fail). */
int mkfs_xattrs_of(struct mkfs *k, size_t i, bool warn);
/* The extents of entry i's blocks, into k->ext. */
int mkfs_entry_extents(struct mkfs *k, size_t i);

/* mkfs_emit.c: every metadata block and data run, in disk order, into k->lw */
int mkfs_emit_all(struct mkfs *k);

#endif
