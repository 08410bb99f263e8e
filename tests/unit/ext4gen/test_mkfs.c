/* SPDX-License-Identifier: MIT */
/*
 * mkfs_run, the library's entry point of `lazyblk mkfs`: a manifest becomes a layout of the
 * size asked whose first block holds an ext4 superblock, the result agreeing with the
 * layout; a size too small for the image fails with one reason and leaves no layout.
 */
#include "../pipeline.h"
#include "../../../common/le.h"
#include "../../../layout/layout.h"

#define SIZE (256ull << 20)

static void test_mkfs_run(void **state)
{
	char dir[PATH_MAX], lay[PATH_MAX];
	uint8_t block[DISK_BLOCK];
	struct mkfs_result r;
	struct layout *l;
	char why[WHY_MAX] = "";

	(void)state;
	tmpdir_make(dir);
	image_make(dir, SIZE, &r);
	assert_int_equal(r.blocks, SIZE / DISK_BLOCK);
	assert_true(r.inodes >= 6);
	assert_true(r.meta_blocks > 0 && r.data_runs >= 1);
	path_fmt(lay, "%s/img.layout", dir);
	assert_int_equal(layout_open(lay, &l, why, sizeof(why)), 0);
	assert_int_equal(l->hdr.block_count, r.blocks);
	assert_memory_equal(l->digest, r.digest, SHA256_LEN);
	assert_memory_equal(l->hdr.fs_uuid, r.uuid, 16);
	/* block 0: the superblock at byte 1024, its magic 0xEF53 at 56, its block count at 4 */
	assert_int_equal(layout_read_meta(l, 0, block), 1);
	assert_int_equal(le16_get(block + 1024 + 56), 0xEF53);
	assert_int_equal(le32_get(block + 1024 + 4), r.blocks);
	layout_close(l);
	rm_rf(dir);
}

static void test_mkfs_too_small(void **state)
{
	char dir[PATH_MAX], lay[PATH_MAX], why[512] = "";
	struct mkfs_opts mo = { .size = 256 << 10 };   /* 256 KiB: not even the journal */
	struct mkfs_result r;
	struct manifest *m;

	(void)state;
	tmpdir_make(dir);
	m = manifest_make(dir);
	path_fmt(lay, "%s/img.layout", dir);
	assert_true(mkfs_run(m, &mo, lay, &r, why, sizeof(why)) < 0);
	assert_true(why[0] != '\0');
	assert_false(path_exists(lay));
	manifest_free(m);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mkfs_run),
		cmocka_unit_test(test_mkfs_too_small),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
