/* SPDX-License-Identifier: MIT */
/*
 * disk_open, the one way to a disk (blkd/disk/disk.h): an image spec (a layout and store
 * made by import_run and mkfs_run) reads the files' bytes and names its layout; with an
 * overlay, writes land and read back after a reopen; a read-only spec refuses writes; a raw
 * file reads and writes as it is and has none of the image's operations; bad specs are
 * refused with one line in why and nothing opened.
 */
#include "../pipeline.h"
#include "../../../blkd/disk/disk.h"

#define SIZE (256ull << 20)
#define PIECE (4u << 20)
#define NOISE (100u << 10)   /* tree_make's sub/b.bin */
#define BLK 4096u

struct fixture {
	char dir[PATH_MAX], layout[PATH_MAX], store[PATH_MAX], ov[PATH_MAX];
	struct mkfs_result res;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	tmpdir_make(f->dir);
	image_make(f->dir, SIZE, &f->res);
	path_fmt(f->layout, "%s/img.layout", f->dir);
	path_fmt(f->store, "%s/store", f->dir);
	path_fmt(f->ov, "%s/ov", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rm_rf(f->dir);
	free(f);
	return 0;
}

static struct disk_spec image_spec(const struct fixture *f)
{
	return (struct disk_spec){ .layout_path = f->layout, .tiers = { .store_dir = f->store },
				   .readahead = -1 };
}

/* One line of reason, and nothing opened. */
static void expect_refused(const struct disk_spec *s, int err, const char *has)
{
	struct disk d;
	char why[512] = "untouched";

	memset(&d, 0x5a, sizeof(d));
	assert_int_equal(disk_open(s, &d, why, sizeof(why)), err);
	assert_non_null(strstr(why, has));
	assert_null(strchr(why, '\n'));
	assert_null(d.ops);
	disk_close(&d); /* a no-op */
	/* no room for the reason: the same error */
	assert_int_equal(disk_open(s, &d, NULL, 0), err);
}

/* The image's bytes: an ext4 superblock, and b.bin's 100 KiB of noise somewhere whole. */
static void test_image_reads(void **state)
{
	struct fixture *f = *state;
	struct disk_spec s = image_spec(f);
	struct disk_image_stats st;
	struct disk d;
	uint8_t digest[32], noise[NOISE], *buf = malloc(PIECE + NOISE);
	uint64_t seed = 26, records = 0;
	char twhy[WHY_MAX] = "";
	char why[512];
	bool found = false;

	assert_non_null(buf);
	prng_fill(&seed, noise, sizeof(noise));
	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(disk_check(&d), 0);
	assert_int_equal(d.size, SIZE);
	assert_true(d.read_only);   /* no overlay */
	/* the image's own one-walk sparse read, not the generic one over block status and read */
	assert_non_null(d.ops->read_sparse);
	for (uint64_t off = 0; off < SIZE && !found; off += PIECE) {
		uint32_t n = (uint32_t)(SIZE - off < PIECE + NOISE ? SIZE - off : PIECE + NOISE);

		assert_int_equal(disk_read(&d, off, n, buf), 0);
		if (!off) {
			assert_int_equal(buf[1024 + 56], 0x53);   /* s_magic 0xEF53 */
			assert_int_equal(buf[1024 + 57], 0xef);
		}
		for (uint32_t i = 0; i < PIECE && i + NOISE <= n && !found; i += BLK)
			found = !memcmp(buf + i, noise, NOISE);
	}
	assert_true(found);
	assert_int_equal(disk_write(&d, 0, BLK, buf, false), -EPERM);
	/* what only the image has */
	assert_int_equal(disk_layout_digest(&d, digest), 0);
	assert_memory_equal(digest, f->res.digest, 32);
	assert_non_null(disk_layout(&d));
	assert_int_equal(disk_image_stats(&d, &st), 0);
	assert_true(st.chunk_loads > 0 && st.cas.disk_hits > 0);
	assert_null(disk_trace_path(&d));
	assert_int_equal(disk_trace_finish(&d, NULL, &records, twhy, sizeof(twhy)), -ENOENT);
	assert_string_equal(twhy, "");
	disk_close(&d);   /* the engine goes with it */
	assert_null(d.ops);
	free(buf);
}

/* With an overlay: writes (whole and partial blocks) land, and are there after a reopen. */
static void test_image_overlay(void **state)
{
	struct fixture *f = *state;
	struct disk_spec s = image_spec(f);
	uint8_t blk[BLK], got[BLK], sb[BLK];
	uint64_t seed = 3;
	struct disk d;
	char why[512];

	prng_fill(&seed, blk, sizeof(blk));
	s.overlay_path = f->ov;
	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	assert_false(d.read_only);
	assert_int_equal(disk_read(&d, 0, BLK, sb), 0);
	assert_int_equal(disk_write(&d, 9000 * (uint64_t)BLK, BLK, blk, false), 0);
	assert_int_equal(disk_write(&d, 512, 512, blk, true), 0);   /* in the superblock's block */
	assert_int_equal(disk_flush(&d), 0);
	assert_int_equal(disk_read(&d, 9000 * (uint64_t)BLK, BLK, got), 0);
	assert_memory_equal(got, blk, BLK);
	disk_close(&d);

	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	assert_int_equal(disk_read(&d, 9000 * (uint64_t)BLK, BLK, got), 0);
	assert_memory_equal(got, blk, BLK);
	assert_int_equal(disk_read(&d, 0, BLK, got), 0);
	assert_memory_equal(got + 512, blk, 512);        /* the write */
	assert_memory_equal(got, sb, 512);               /* around it, the image's bytes */
	assert_memory_equal(got + 1024, sb + 1024, BLK - 1024);
	disk_close(&d);

	/* read-only: the overlay is read, writes refused */
	s.read_only = true;
	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	assert_true(d.read_only);
	assert_int_equal(disk_read(&d, 9000 * (uint64_t)BLK, BLK, got), 0);
	assert_memory_equal(got, blk, BLK);
	assert_int_equal(disk_write(&d, 0, BLK, blk, false), -EPERM);
	disk_close(&d);
}

/* An overlay belongs to its layout: another layout's is refused, with the overlay's name. */
static void test_image_other_overlay(void **state)
{
	struct fixture *f = *state;
	struct disk_spec s = image_spec(f), o;
	struct mkfs_result res2;
	char dir2[PATH_MAX], lay2[PATH_MAX], store2[PATH_MAX];
	struct disk d;
	char why[512];

	s.overlay_path = f->ov;
	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	disk_close(&d);
	tmpdir_make(dir2);
	image_make(dir2, SIZE * 2, &res2);
	assert_memory_not_equal(res2.digest, f->res.digest, 32);
	path_fmt(lay2, "%s/img.layout", dir2);
	path_fmt(store2, "%s/store", dir2);
	o = (struct disk_spec){ .layout_path = lay2, .tiers = { .store_dir = store2 },
				.overlay_path = f->ov };
	expect_refused(&o, -EBADMSG, f->ov);
	rm_rf(dir2);
}

/* A raw file: its bytes, writes, read-only; none of the image's operations. */
static void test_raw(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX], why[512];
	uint8_t img[64 << 10], got[BLK], digest[32];
	struct disk_spec s = { 0 };
	struct disk_image_stats st;
	uint64_t n;
	struct disk d;

	(void)state;
	disk_file_make(dir, path, img, sizeof(img), 11);
	s.raw_path = path;
	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	assert_int_equal(d.size, sizeof(img));
	assert_int_equal(disk_read(&d, BLK, BLK, got), 0);
	assert_memory_equal(got, img + BLK, BLK);
	memset(got, 0x77, sizeof(got));
	assert_int_equal(disk_write(&d, 0, BLK, got, false), 0);
	assert_int_equal(disk_layout_digest(&d, digest), -EOPNOTSUPP);
	assert_null(disk_layout(&d));
	assert_int_equal(disk_trace_finish(&d, NULL, &n, NULL, 0), -EOPNOTSUPP);
	assert_null(disk_trace_path(&d));
	assert_int_equal(disk_image_stats(&d, &st), -EOPNOTSUPP);
	disk_close(&d);
	s.read_only = true;
	assert_int_equal(disk_open(&s, &d, why, sizeof(why)), 0);
	assert_true(d.read_only);
	assert_int_equal(disk_read(&d, 0, BLK, img), 0);
	assert_memory_equal(img, got, BLK);
	assert_int_not_equal(disk_write(&d, 0, BLK, got, false), 0);
	disk_close(&d);
	/* not a disk: a file under one sector */
	path_fmt(path, "%s/tiny", dir);
	write_file(path, "x", 1);
	expect_refused(&s, -EINVAL, "not a disk");
	path_fmt(path, "%s/missing", dir);
	expect_refused(&s, -ENOENT, path);
	rm_rf(dir);
}

/* Specs that name no disk, two, or options the disk does not take: refused, one line each. */
static void test_bad_specs(void **state)
{
	struct fixture *f = *state;
	struct disk_spec s = { 0 };
	char missing[PATH_MAX];

	expect_refused(&s, -EINVAL, "no disk");
	s = image_spec(f);
	s.tiers.store_dir = NULL;
	expect_refused(&s, -EINVAL, "no store");
	s = image_spec(f);
	s.raw_path = f->layout;
	expect_refused(&s, -EINVAL, "both an image layout");
	s = (struct disk_spec){ .raw_path = f->layout, .overlay_path = f->ov };
	expect_refused(&s, -EINVAL, "a raw disk takes no");
	s = (struct disk_spec){ .raw_path = f->layout, .tiers = { .store_dir = f->store } };
	expect_refused(&s, -EINVAL, "a raw disk takes no");
	/* a layout that is not there, a store that is not one */
	path_fmt(missing, "%s/nope.layout", f->dir);
	s = image_spec(f);
	s.layout_path = missing;
	expect_refused(&s, -ENOENT, missing);
	s = image_spec(f);
	s.tiers.store_dir = f->dir;
	s.check = true;
	expect_refused(&s, -ENOENT, f->dir);
	assert_false(path_exists(f->ov));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_image_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_overlay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_other_overlay, setup, teardown),
		cmocka_unit_test(test_raw),
		cmocka_unit_test_setup_teardown(test_bad_specs, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
