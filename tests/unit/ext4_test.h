/* SPDX-License-Identifier: MIT */
/*
 * Shared pieces of the ext4gen unit tests: geom_make(), an independent bitwise CRC-32C and
 * the identity of the reference image the real e2fsprogs vectors come from. Header-only
 * (static inline) like helpers.h, and included after it (geom_make() asserts with cmocka).
 * Fields are read with common/le.h: le16_get(p + off), be32_get(p + off), ...
 *
 * The reference image (tests/unit/ext4gen/test_super.c, test_inode.c, test_extent.c embed bytes of
 * it) was made with e2fsprogs 1.47.0:
 *
 *   E2FSPROGS_FAKE_TIME=1700000000 mke2fs -q -F -t ext4 -b 4096 -I 256 \
 *       -O metadata_csum,^resize_inode -U 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0 \
 *       -E hash_seed=11223344-5566-7788-99aa-bbccddeeff00 img 160M
 *   printf 'hello lazyblk\n' > src.txt
 *   E2FSPROGS_FAKE_TIME=1700000000 debugfs -w img -f - <<EOF
 *   write src.txt f
 *   sif f uid 0x12345
 *   sif f gid 0x23456
 *   sif f generation 0xdeadbeef
 *   sif f mtime 0x6553f100
 *   sif f mtime_extra 0x00000005
 *   sif f atime 0x80000000
 *   sif f atime_extra 0x00000009
 *   sif f ctime 0xffffffff
 *   sif f ctime_extra 0x00000000
 *   sif f crtime 0x00000000
 *   sif f crtime_extra 0x00000002
 *   sif f links_count 3
 *   sif f mode 0104755
 *   EOF
 *   # sparse.bin: 20 blocks, data only in the even blocks 0, 2, ..., 18
 *   debugfs -w img -R "write sparse.bin sp"      # inode 13, ten extents, depth 1
 *
 * Geometry: 40960 blocks, 2 groups, 20480 inodes per group, 1280 inode table blocks per
 * group, 1 descriptor block; the journal (inode 8) is blocks 2571..6666.
 */
#ifndef LZ_TESTS_UNIT_EXT4_TEST_H
#define LZ_TESTS_UNIT_EXT4_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../common/le.h"
#include "../../ext4gen/geom.h"

/* A geometry for blocks and inodes that geom_init() must accept. */
static inline void geom_make(struct geom *g, uint64_t blocks, uint64_t inodes)
{
	memset(g, 0, sizeof(*g));
	assert_int_equal(geom_init(g, blocks, inodes), 0);
}

/* Bitwise CRC-32C (reflected polynomial 0x82F63B78) without pre/post inversion. */
static inline uint32_t ref_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
	}
	return crc;
}

static inline uint32_t ref_crc32c_le32(uint32_t crc, uint32_t v)
{
	uint8_t b[4];

	le32_put(b, v);
	return ref_crc32c(crc, b, 4);
}

/* The reference image's s_uuid and the metadata_csum seed crc32c(~0, uuid) it implies. */
static inline void real_uuid(uint8_t out[16])
{
	static const uint8_t u[16] = { 0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78,
				       0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0 };

	memcpy(out, u, 16);
}

static inline uint32_t real_csum_seed(void)
{
	uint8_t u[16];

	real_uuid(u);
	return ref_crc32c(~0u, u, 16);
}

#endif
