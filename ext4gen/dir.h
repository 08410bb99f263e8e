/* SPDX-License-Identifier: MIT */
/*
 * Directory blocks: linear directories (one block) and hashed directories (htree) for
 * everything larger, with metadata_csum tails. A directory's blocks depend only on its
 * entries and its own inode, never on where the blocks land on disk, so they can be
 * planned (counted) first and rendered later.
 */
#ifndef LZ_EXT4GEN_DIR_H
#define LZ_EXT4GEN_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dir_entry_in {
	const char *name;        /* any bytes but '/' and NUL, not "." or ".." */
	uint8_t name_len;        /* 1..255 */
	uint8_t file_type;       /* EXT4_FT_* */
	uint32_t ino;
};

struct dir_params {
	uint32_t ino;            /* the directory's own inode */
	uint32_t parent_ino;     /* ".." (the root is its own parent) */
	uint32_t generation;     /* the directory inode's i_generation (checksums use it) */
	uint32_t csum_seed;      /* crc32c(~0, fs uuid): the filesystem's checksum seed */
	uint32_t hash_seed[4];   /* s_hash_seed */
	uint8_t hash_version;    /* EXT4_HASH_HALF_MD4 etc. (s_def_hash_version) */
	bool unsigned_hash;      /* s_flags has EXT2_FLAGS_UNSIGNED_HASH (else signed chars) */
};

/*
 * The ext4 directory name hash (legacy, half_md4 or tea; signed or unsigned char
 * variants), as the kernel's ext4fs_dirhash() computes it: returns the major hash with
 * the low bit cleared; minor (may be NULL) gets the minor hash.
 */
uint32_t dir_name_hash(const char *name, size_t len, uint8_t hash_version, bool unsigned_chars,
		       const uint32_t seed[4], uint32_t *minor);

/*
 * A directory being built. dir_plan() sorts/hashes the entries and decides the block
 * layout; dir_nblocks() then tells how many 4 KiB blocks it takes (always >= 1); a
 * directory that fits one block is linear, larger ones are htrees (EXT4_INDEX_FL).
 * The entries array must stay valid until dir_render().
 */
struct dir_plan;

int dir_plan_new(const struct dir_entry_in *ents, size_t n, const struct dir_params *p,
		 struct dir_plan **out);
uint32_t dir_nblocks(const struct dir_plan *d);
bool dir_is_htree(const struct dir_plan *d);
/* Write dir_nblocks() blocks (logical order, 4096 bytes each) into out. */
int dir_render(const struct dir_plan *d, uint8_t *out);
void dir_plan_free(struct dir_plan *d);

#endif
