/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ext4gen/super: super_build (field placement, features, checksum),
 * gdt_csum, bitmap_csums and journal_super_build, with byte-exact vectors from mke2fs
 * (see ext4_test.h for how the reference image was made).
 */
#include "../helpers.h"
#include "../ext4_test.h"

#include "../../../ext4gen/super.h"

/* ------------------------------------------------------------------ e2fsprogs vectors */

/* the primary superblock of the reference image (image bytes 1024..2047) */
static const uint8_t real_sb[1024] = {
	[0x001] = 0xa0, 0x00, 0x00, 0x00, 0xa0, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0xe7,
	[0x00d] = 0x85, 0x00, 0x00, 0xf3, 0x9f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
	[0x01c] = 0x02, 0x00, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x80,
	[0x029] = 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x36, 0x18, 0x0d, 0x6b,
	[0x036] = 0xff, 0xff, 0x53, 0xef, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0xf1,
	[0x042] = 0x53, 0x65, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	[0x054] = 0x0b, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x2c,
	[0x060] = 0xc2, 0x02, 0x00, 0x00, 0x6b, 0x04, 0x00, 0x00, 0x0f, 0x1e, 0x2d, 0x3c,
	[0x06c] = 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0,
	[0x0e0] = 0x08,
	[0x0ec] = 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc,
	[0x0f8] = 0xdd, 0xee, 0xff, 0x00, 0x01, 0x01, 0x40, 0x00, 0x0c,
	[0x109] = 0xf1, 0x53, 0x65, 0x0a, 0xf3, 0x01, 0x00, 0x04,
	[0x11d] = 0x10, 0x00, 0x00, 0x0b, 0x0a,
	[0x14f] = 0x01,
	[0x15c] = 0x20, 0x00, 0x20, 0x00, 0x01,
	[0x174] = 0x04, 0x01, 0x00, 0x00, 0x7d,
	[0x248] = 0x08, 0x1a,
	[0x3fc] = 0x6d, 0xb8, 0x8f, 0xa1,
};

/* group descriptors 0 and 1 (block 1) */
static const uint8_t real_gd0[64] = {
	[0x000] = 0x02, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x06,
	[0x00c] = 0xe9, 0x65, 0xf3, 0x4f, 0x02,
	[0x018] = 0x5e, 0x05, 0x18, 0x43, 0xf3, 0x4f, 0x01, 0x84,
	[0x038] = 0x17, 0xed, 0x9e, 0x19,
};

static const uint8_t real_gd1[64] = {
	[0x000] = 0x03, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00, 0x06, 0x05,
	[0x00c] = 0xfe, 0x1f, 0x00, 0x50, 0x00, 0x00, 0x01,
	[0x018] = 0x48, 0x6d, 0x00, 0x00, 0x00, 0x50, 0x4e, 0xc5,
	[0x038] = 0x50, 0x73,
};

/* block 2571: journal block 0, the jbd2 superblock mke2fs wrote (4096 blocks) */
static const uint8_t real_jsb[4096] = {
	[0x000] = 0xc0, 0x3b, 0x39, 0x98, 0x00, 0x00, 0x00, 0x04,
	[0x00e] = 0x10, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x01,
	[0x01b] = 0x01,
	[0x030] = 0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4,
	[0x03c] = 0xc3, 0xd2, 0xe1, 0xf0, 0x00, 0x00, 0x00, 0x01,
};

/* i_block of the journal inode (inode 8): one extent, 4096 blocks at 2571 */
static const uint8_t real_ino8_iblock[60] = {
	0x0a, 0xf3, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x0b, 0x0a, 0x00, 0x00,
};

/* Set bits [a, b) of a bitmap. */
static void bits(uint8_t *bm, uint32_t a, uint32_t b)
{
	for (uint32_t i = a; i < b; i++)
		bm[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* The reference image's filesystem, described as ext4gen's inputs. */
static void real_fs(struct fs_info *fs, const struct geom *g)
{
	static const uint8_t hash_seed[16] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
					       0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00 };

	memset(fs, 0, sizeof(*fs));
	fs->g = g;
	real_uuid(fs->uuid);
	memcpy(fs->hash_seed, hash_seed, 16);
	fs->csum_seed = real_csum_seed();
	fs->timestamp = 1700000000;
	fs->free_blocks = 34279;
	fs->free_inodes = 40947;
	fs->journal_blocks = 4096;
	memcpy(fs->jnl_blocks, real_ino8_iblock, 60);
	fs->jnl_blocks[15] = 0;           /* i_size_high */
	fs->jnl_blocks[16] = 16u << 20;   /* i_size */
}

/* ------------------------------------------------------------------ superblock */

static void test_struct_offsets(void **state)
{
	(void)state;
	assert_int_equal(offsetof(struct ext4_super_block, s_magic), 0x38);
	assert_int_equal(offsetof(struct ext4_super_block, s_block_group_nr), 0x5A);
	assert_int_equal(offsetof(struct ext4_super_block, s_uuid), 0x68);
	assert_int_equal(offsetof(struct ext4_super_block, s_reserved_gdt_blocks), 0xCE);
	assert_int_equal(offsetof(struct ext4_super_block, s_journal_inum), 0xE0);
	assert_int_equal(offsetof(struct ext4_super_block, s_hash_seed), 0xEC);
	assert_int_equal(offsetof(struct ext4_super_block, s_desc_size), 0xFE);
	assert_int_equal(offsetof(struct ext4_super_block, s_jnl_blocks), 0x10C);
	assert_int_equal(offsetof(struct ext4_super_block, s_blocks_count_hi), 0x150);
	assert_int_equal(offsetof(struct ext4_super_block, s_free_blocks_count_hi), 0x158);
	assert_int_equal(offsetof(struct ext4_super_block, s_flags), 0x160);
	assert_int_equal(offsetof(struct ext4_super_block, s_log_groups_per_flex), 0x174);
	assert_int_equal(offsetof(struct ext4_super_block, s_checksum_type), 0x175);
	assert_int_equal(offsetof(struct ext4_super_block, s_kbytes_written), 0x178);
	assert_int_equal(offsetof(struct ext4_super_block, s_overhead_clusters), 0x248);
	assert_int_equal(offsetof(struct ext4_super_block, s_checksum_seed), 0x270);
	assert_int_equal(offsetof(struct ext4_super_block, s_checksum), 0x3FC);
	assert_int_equal(offsetof(struct ext4_group_desc, bg_checksum), 0x1E);
	assert_int_equal(offsetof(struct ext4_group_desc, bg_block_bitmap_csum_hi), 0x38);
	assert_int_equal(offsetof(struct jbd2_superblock, s_uuid), 0x30);
	assert_int_equal(offsetof(struct jbd2_superblock, s_nr_users), 0x40);
}

/*
 * super_build() for the reference image's geometry and inputs equals mke2fs's superblock
 * except for fields ext4gen leaves zero or that debugfs touched later (reserved blocks,
 * write time, lifetime writes, overhead), and the checksum follows.
 */
static void test_super_matches_mke2fs(void **state)
{
	struct geom g;
	struct fs_info fs;
	struct ext4_super_block sb;
	uint8_t *p = (uint8_t *)&sb;

	(void)state;
	/* the checksum algorithm: crc32c(~0, bytes 0..0x3FB), no uuid seed */
	assert_int_equal(le32_get(real_sb + 0x3FC), ref_crc32c(~0u, real_sb, 0x3FC));

	geom_make(&g, 40960, 40960);
	real_fs(&fs, &g);
	super_build(&fs, 0, &sb);
	assert_int_equal(le32_get(p + 0x3FC), ref_crc32c(~0u, p, 0x3FC));

	/* only these differ */
	assert_int_equal(le32_get(p + 0x08), 0);           /* s_r_blocks_count_lo */
	memcpy(p + 0x08, real_sb + 0x08, 4);
	assert_int_equal(le32_get(p + 0x30), 1700000000);  /* s_wtime (debugfs rewrote it) */
	memcpy(p + 0x30, real_sb + 0x30, 4);
	memcpy(p + 0x178, real_sb + 0x178, 8);            /* s_kbytes_written */
	memcpy(p + 0x248, real_sb + 0x248, 4);            /* s_overhead_clusters */
	memcpy(p + 0x3FC, real_sb + 0x3FC, 4);
	for (size_t o = 0; o < 1024; o++)
		if (p[o] != real_sb[o])
			fail_msg("superblock byte 0x%03zx: 0x%02x, mke2fs wrote 0x%02x", o, p[o],
				 real_sb[o]);
	geom_free(&g);
}

static void test_super_fields(void **state)
{
	struct geom g;
	struct fs_info fs;
	struct ext4_super_block sb, sb5;
	const uint8_t *p = (const uint8_t *)&sb, *p5 = (const uint8_t *)&sb5;

	(void)state;
	geom_make(&g, (1ull << 32) + 5 * 32768 + 100, 3000000);   /* > 2^32 blocks */
	memset(&fs, 0, sizeof(fs));
	fs.g = &g;
	for (int i = 0; i < 16; i++)
		fs.uuid[i] = (uint8_t)(0xA0 + i);
	memcpy(fs.label, "lazyblk-test", 12);
	fs.hash_seed[0] = 0x01020304;
	fs.hash_seed[3] = 0xF1F2F3F4;
	fs.csum_seed = 0x77777777;
	fs.timestamp = 0x65000000;
	fs.free_blocks = 0x123456789ull;
	fs.free_inodes = 2999000;
	fs.journal_blocks = 8192;
	for (int i = 0; i < 17; i++)
		fs.jnl_blocks[i] = 0x1000u * (uint32_t)(i + 1) + (uint32_t)i;

	memset(&sb, 0xCC, sizeof(sb));
	super_build(&fs, 0, &sb);
	assert_int_equal(le32_get(p + 0x00), g.inodes);
	assert_int_equal(le32_get(p + 0x04), (uint32_t)g.blocks);          /* s_blocks_count_lo */
	assert_int_equal(le32_get(p + 0x150), 1);                          /* s_blocks_count_hi */
	assert_int_equal(le32_get(p + 0x0C), 0x23456789);                  /* free blocks lo */
	assert_int_equal(le32_get(p + 0x158), 1);                          /* free blocks hi */
	assert_int_equal(le32_get(p + 0x10), 2999000);
	assert_int_equal(le32_get(p + 0x14), 0);                           /* first data block */
	assert_int_equal(le32_get(p + 0x18), 2);                           /* 4096 = 1024 << 2 */
	assert_int_equal(le32_get(p + 0x1C), 2);
	assert_int_equal(le32_get(p + 0x20), 32768);
	assert_int_equal(le32_get(p + 0x24), 32768);
	assert_int_equal(le32_get(p + 0x28), g.inodes_per_group);
	assert_int_equal((uint64_t)le32_get(p + 0x28) * g.groups, le32_get(p + 0x00));
	assert_int_equal(le32_get(p + 0x30), 0x65000000);                  /* s_wtime */
	assert_int_equal(le16_get(p + 0x38), 0xEF53);
	assert_int_equal(le16_get(p + 0x3A), 1);                           /* clean */
	assert_int_equal(le32_get(p + 0x4C), 1);                           /* dynamic rev */
	assert_int_equal(le32_get(p + 0x54), 11);                          /* s_first_ino */
	assert_int_equal(le16_get(p + 0x58), 256);                         /* s_inode_size */
	assert_int_equal(le16_get(p + 0x5A), 0);
	/* compat: has_journal, ext_attr, dir_index (no resize_inode: no reserved GDT) */
	assert_int_equal(le32_get(p + 0x5C), 0x0004 | 0x0008 | 0x0020);
	/* incompat: filetype, extents, 64bit, flex_bg; no recover, no csum_seed */
	assert_int_equal(le32_get(p + 0x60), 0x0002 | 0x0040 | 0x0080 | 0x0200);
	/* ro_compat: sparse_super, large_file, huge_file, dir_nlink, extra_isize, metadata_csum */
	assert_int_equal(le32_get(p + 0x64), 0x0001 | 0x0002 | 0x0008 | 0x0020 | 0x0040 | 0x0400);
	assert_int_equal(le32_get(p + 0x64) & 0x0010, 0);                  /* never gdt_csum */
	assert_memory_equal(p + 0x68, fs.uuid, 16);
	assert_memory_equal(p + 0x78, "lazyblk-test\0\0\0\0", 16);
	assert_int_equal(le16_get(p + 0xCE), 0);                           /* reserved GDT */
	assert_int_equal(le32_get(p + 0xE0), 8);                           /* journal inode */
	assert_int_equal(le32_get(p + 0xEC), 0x01020304);
	assert_int_equal(le32_get(p + 0xF8), 0xF1F2F3F4);
	assert_int_equal(p[0xFC], 1);                                     /* half_md4 */
	assert_int_equal(p[0xFD], 1);                                     /* jnl backup */
	assert_int_equal(le16_get(p + 0xFE), 64);                          /* s_desc_size */
	for (int i = 0; i < 17; i++)
		assert_int_equal(le32_get(p + 0x10C + 4 * (size_t)i), fs.jnl_blocks[i]);
	assert_int_equal(le32_get(p + 0x108), 0x65000000);                 /* s_mkfs_time */
	assert_int_equal(le16_get(p + 0x15C), 32);                         /* min extra isize */
	assert_int_equal(le16_get(p + 0x15E), 32);                         /* want extra isize */
	assert_int_equal(le32_get(p + 0x160) & 3, 1);                      /* signed hash */
	assert_int_equal(p[0x174], 4);                                    /* flex_bg: 16 */
	assert_int_equal(p[0x175], 1);                                    /* crc32c */
	assert_int_equal(le32_get(p + 0x270), 0);                          /* no csum_seed */
	assert_int_equal(le32_get(p + 0x3FC), ref_crc32c(~0u, p, 0x3FC));
	/* everything past the fields ext4gen sets is zero (no 0xCC left over) */
	for (size_t o = 0x17C; o < 0x3FC; o++)
		assert_int_equal(p[o], 0);

	/* a backup in group 5: only s_block_group_nr and the checksum differ */
	super_build(&fs, 5, &sb5);
	assert_int_equal(le16_get(p5 + 0x5A), 5);
	assert_int_equal(le32_get(p5 + 0x3FC), ref_crc32c(~0u, p5, 0x3FC));
	assert_true(le32_get(p5 + 0x3FC) != le32_get(p + 0x3FC));
	for (size_t o = 0; o < 1024; o++)
		if (o != 0x5A && (o < 0x3FC))
			assert_int_equal(p5[o], p[o]);
	geom_free(&g);
}

/* ------------------------------------------------------------------ descriptors */

static void test_gdt_csum_real(void **state)
{
	uint32_t seed = real_csum_seed();
	struct ext4_group_desc d;

	(void)state;
	/* the algorithm: crc32c(seed, le32 group, descriptor with bg_checksum 0) & 0xffff */
	memcpy(&d, real_gd0, 64);
	d.bg_checksum = 0;
	assert_int_equal(le16_get(real_gd0 + 0x1E),
			 ref_crc32c(ref_crc32c_le32(seed, 0), &d, 64) & 0xffff);

	memcpy(&d, real_gd0, 64);
	d.bg_checksum = 0xFFFF;                 /* a stale checksum is ignored */
	gdt_csum(&d, 0, seed);
	assert_memory_equal(&d, real_gd0, 64);
	assert_int_equal(d.bg_checksum, 0x8401);

	memcpy(&d, real_gd1, 64);
	d.bg_checksum = 0x1234;
	gdt_csum(&d, 1, seed);
	assert_memory_equal(&d, real_gd1, 64);
	assert_int_equal(d.bg_checksum, 0xc54e);
}

static void test_gdt_csum_random(void **state)
{
	uint64_t s = 3;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		struct ext4_group_desc d, before;
		uint32_t seed = (uint32_t)prng_next(&s);
		uint32_t group = (uint32_t)prng_next(&s) % 1000000;
		uint8_t tmp[64];
		uint32_t c;

		prng_fill(&s, &d, sizeof(d));
		before = d;
		gdt_csum(&d, group, seed);
		memcpy(tmp, &before, 64);
		tmp[0x1E] = tmp[0x1F] = 0;
		c = ref_crc32c(ref_crc32c_le32(seed, group), tmp, 64);
		assert_int_equal(d.bg_checksum, c & 0xffff);
		/* nothing else changes */
		before.bg_checksum = d.bg_checksum;
		assert_memory_equal(&d, &before, 64);
		/* the group number is part of it */
		before = d;
		gdt_csum(&before, group + 1, seed);
		memcpy(tmp, &d, 64);
		tmp[0x1E] = tmp[0x1F] = 0;
		assert_int_equal(before.bg_checksum,
				 ref_crc32c(ref_crc32c_le32(seed, group + 1), tmp, 64) & 0xffff);
	}
}

static void test_bitmap_csums_real(void **state)
{
	uint32_t seed = real_csum_seed();
	uint8_t *bb = calloc(1, 4096), *ib = calloc(1, 4096);
	struct ext4_group_desc d, want;

	(void)state;
	assert_non_null(bb);
	assert_non_null(ib);
	/* group 0: blocks 0..6678 in use; inodes 1..13 in use, padding past 20480 set */
	bits(bb, 0, 6679);
	bits(ib, 0, 13);
	bits(ib, 20480, 32768);
	memcpy(&want, real_gd0, 64);
	memcpy(&d, real_gd0, 64);
	d.bg_block_bitmap_csum_lo = d.bg_block_bitmap_csum_hi = 0;
	d.bg_inode_bitmap_csum_lo = d.bg_inode_bitmap_csum_hi = 0;
	bitmap_csums(&d, bb, ib, 20480, seed);
	assert_memory_equal(&d, &want, 64);
	assert_int_equal((uint32_t)d.bg_block_bitmap_csum_hi << 16 | d.bg_block_bitmap_csum_lo,
			 0xed17055e);
	assert_int_equal((uint32_t)d.bg_inode_bitmap_csum_hi << 16 | d.bg_inode_bitmap_csum_lo,
			 0x199e4318);

	/* group 1: blocks 32768..32769 (its backup), padding past 40960 set */
	memset(bb, 0, 4096);
	bits(bb, 0, 2);
	bits(bb, 8192, 32768);
	memcpy(&d, real_gd1, 64);
	d.bg_block_bitmap_csum_lo = d.bg_block_bitmap_csum_hi = 0;
	bitmap_csums(&d, bb, ib, 20480, seed);
	assert_int_equal(d.bg_block_bitmap_csum_lo, 0x6d48);
	assert_int_equal(d.bg_block_bitmap_csum_hi, 0x7350);
	free(bb);
	free(ib);
}

/* Block bitmap: all 4096 bytes; inode bitmap: exactly inodes_per_group / 8 bytes. */
static void test_bitmap_csums_ranges(void **state)
{
	uint64_t s = 11;
	uint8_t *bb = malloc(4096), *ib = malloc(4096);

	(void)state;
	assert_non_null(bb);
	assert_non_null(ib);
	for (uint32_t ipg = 16; ipg <= 32768; ipg = ipg * 2 + 16) {
		struct ext4_group_desc d, e;
		uint32_t seed = (uint32_t)prng_next(&s);
		uint32_t cb, ci;

		prng_fill(&s, bb, 4096);
		prng_fill(&s, ib, 4096);
		prng_fill(&s, &d, sizeof(d));
		e = d;
		bitmap_csums(&d, bb, ib, ipg, seed);
		cb = ref_crc32c(seed, bb, 4096);
		ci = ref_crc32c(seed, ib, ipg / 8);
		assert_int_equal(d.bg_block_bitmap_csum_lo, cb & 0xffff);
		assert_int_equal(d.bg_block_bitmap_csum_hi, cb >> 16);
		assert_int_equal(d.bg_inode_bitmap_csum_lo, ci & 0xffff);
		assert_int_equal(d.bg_inode_bitmap_csum_hi, ci >> 16);
		/* no other field changes, the descriptor checksum included */
		e.bg_block_bitmap_csum_lo = d.bg_block_bitmap_csum_lo;
		e.bg_block_bitmap_csum_hi = d.bg_block_bitmap_csum_hi;
		e.bg_inode_bitmap_csum_lo = d.bg_inode_bitmap_csum_lo;
		e.bg_inode_bitmap_csum_hi = d.bg_inode_bitmap_csum_hi;
		assert_memory_equal(&d, &e, 64);
		/* bytes past ipg / 8 do not count */
		if (ipg < 32768) {
			ib[ipg / 8] ^= 0xFF;
			bitmap_csums(&e, bb, ib, ipg, seed);
			assert_int_equal(e.bg_inode_bitmap_csum_lo, d.bg_inode_bitmap_csum_lo);
			assert_int_equal(e.bg_inode_bitmap_csum_hi, d.bg_inode_bitmap_csum_hi);
		}
		/* the last counted byte does */
		ib[ipg / 8 - 1] ^= 0x01;
		bitmap_csums(&e, bb, ib, ipg, seed);
		assert_true(e.bg_inode_bitmap_csum_lo != d.bg_inode_bitmap_csum_lo ||
			    e.bg_inode_bitmap_csum_hi != d.bg_inode_bitmap_csum_hi);
		bb[4095] ^= 0x80;
		bitmap_csums(&e, bb, ib, ipg, seed);
		assert_true(e.bg_block_bitmap_csum_lo != d.bg_block_bitmap_csum_lo ||
			    e.bg_block_bitmap_csum_hi != d.bg_block_bitmap_csum_hi);
	}
	free(bb);
	free(ib);
}

/* ------------------------------------------------------------------ journal */

static void test_journal_super_matches_mke2fs(void **state)
{
	struct geom g;
	struct fs_info fs;
	uint8_t *out = malloc(4096);

	(void)state;
	assert_non_null(out);
	geom_make(&g, 40960, 40960);
	real_fs(&fs, &g);
	memset(out, 0xCC, 4096);
	journal_super_build(&fs, 4096, out);
	assert_memory_equal(out, real_jsb, 4096);
	free(out);
	geom_free(&g);
}

static void test_journal_super_fields(void **state)
{
	struct geom g;
	struct fs_info fs;
	uint8_t *out = malloc(4096);

	(void)state;
	assert_non_null(out);
	geom_make(&g, 1 << 20, 65536);
	memset(&fs, 0, sizeof(fs));
	fs.g = &g;
	for (int i = 0; i < 16; i++)
		fs.uuid[i] = (uint8_t)(i * 17 + 3);
	memset(out, 0xCC, 4096);
	journal_super_build(&fs, 262144, out);
	assert_int_equal(be32_get(out + 0x00), 0xC03B3998);   /* h_magic, big-endian */
	assert_int_equal(out[0], 0xC0);
	assert_int_equal(be32_get(out + 0x04), 4);            /* superblock v2 */
	assert_int_equal(be32_get(out + 0x08), 0);            /* h_sequence */
	assert_int_equal(be32_get(out + 0x0C), 4096);         /* s_blocksize */
	assert_int_equal(be32_get(out + 0x10), 262144);       /* s_maxlen */
	assert_int_equal(be32_get(out + 0x14), 1);            /* s_first */
	assert_int_equal(be32_get(out + 0x18), 1);            /* s_sequence */
	assert_int_equal(be32_get(out + 0x1C), 0);            /* s_start: clean */
	assert_int_equal(be32_get(out + 0x20), 0);            /* s_errno */
	assert_int_equal(be32_get(out + 0x24), 0);            /* compat */
	assert_int_equal(be32_get(out + 0x28), 0);            /* incompat: no RECOVER */
	assert_int_equal(be32_get(out + 0x2C), 0);            /* ro compat */
	assert_memory_equal(out + 0x30, fs.uuid, 16);
	assert_int_equal(be32_get(out + 0x40), 1);            /* s_nr_users */
	for (size_t o = 0x44; o < 4096; o++)
		assert_int_equal(out[o], 0);
	free(out);
	geom_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_struct_offsets),
		cmocka_unit_test(test_super_matches_mke2fs),
		cmocka_unit_test(test_super_fields),
		cmocka_unit_test(test_gdt_csum_real),
		cmocka_unit_test(test_gdt_csum_random),
		cmocka_unit_test(test_bitmap_csums_real),
		cmocka_unit_test(test_bitmap_csums_ranges),
		cmocka_unit_test(test_journal_super_matches_mke2fs),
		cmocka_unit_test(test_journal_super_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
