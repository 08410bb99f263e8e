/* SPDX-License-Identifier: MIT */
/* Unit tests for layout/refs: the chunks an image file references, bad files refused. */
#include "../store_fixture.h"

static void test_refs_bad_files(void **state)
{
	struct fixture *f = *state;
	char layout[PATH_MAX], manifest[PATH_MAX], junk[PATH_MAX], missing[PATH_MAX];
	char shortf[PATH_MAX], corrupt[PATH_MAX];
	struct blob b[GC_N];
	char why[WHY_MAX] = "";
	uint64_t chunks;

	gc_store(f, b, layout, manifest);
	path_fmt(junk, "%s/junk", f->dir);
	write_file(junk, "this is not a layout at all", 27);
	path_fmt(shortf, "%s/short", f->dir);
	write_file(shortf, "LZB", 3);
	path_fmt(missing, "%s/missing.layout", f->dir);
	path_fmt(corrupt, "%s/corrupt.layout", f->dir);
	{
		uint8_t *buf;
		size_t len;

		assert_int_equal(fs_read_file(layout, &buf, &len), 0);
		buf[len - 1] ^= 1;
		write_file(corrupt, buf, len);
		free(buf);
	}
	{
		struct chunk_refs r = { 0 };

		assert_int_equal(chunk_refs_add_file(&r, layout, why, sizeof(why)), 0);
		assert_int_equal(r.n, 3);
		assert_int_equal(chunk_refs_add_file(&r, junk, why, sizeof(why)), -EBADMSG);
		assert_true(why[0]);
		assert_non_null(strstr(why, "not a lazyblk layout or manifest"));
		assert_int_equal(chunk_refs_add_file(&r, shortf, why, sizeof(why)), -EBADMSG);
		assert_non_null(strstr(why, "too short"));
		assert_int_equal(chunk_refs_add_file(&r, missing, why, sizeof(why)), -ENOENT);
		assert_string_equal(why, "");
		assert_int_equal(chunk_refs_add_file(&r, corrupt, why, sizeof(why)), -EBADMSG);
		assert_true(why[0]);
		assert_true(chunk_refs_add_file(&r, f->dir, why, sizeof(why)) < 0);
		assert_int_equal(r.n, 3);
		chunk_refs_free(&r);
	}
	/* nothing was removed by any of these */
	real_usage(f->s, &chunks);
	assert_int_equal(chunks, 8);
	for (int i = 0; i < GC_N; i++)
		blob_free(&b[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_refs_bad_files, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
