/* SPDX-License-Identifier: MIT */
/*
 * import_run, the library's entry point of `lazyblk import`, on a directory: the manifest
 * names every entry with its size, the result counts them, a second import of the same tree
 * into the same store stores no chunk again; a missing source and a cancelled import fail
 * with one reason and write no manifest.
 */
#include "../pipeline.h"

static void test_import_dir(void **state)
{
	char dir[PATH_MAX], src[PATH_MAX], store[PATH_MAX], mf[PATH_MAX], mf2[PATH_MAX];
	char why[512];
	struct import_result r, r2;
	struct import_opts o;
	struct manifest *m;
	const struct mf_entry *e;
	char mwhy[WHY_MAX] = "";

	(void)state;
	tmpdir_make(dir);
	tree_make(dir);
	path_fmt(src, "%s/src", dir);
	path_fmt(store, "%s/store", dir);
	path_fmt(mf, "%s/a.manifest", dir);
	path_fmt(mf2, "%s/b.manifest", dir);
	o = import_opts_make(src, store, mf);
	assert_int_equal(import_run(&o, &r, why, sizeof(why)), 0);
	assert_int_equal(r.entries, 6);                        /* /, a.txt, empty, link, sub, b.bin */
	assert_int_equal(r.file_bytes, 6 + (100 << 10));
	assert_true(r.image_chunks >= 1);
	assert_int_equal(manifest_load(mf, &m, mwhy, sizeof(mwhy)), 0);
	e = manifest_find(m, "/sub/b.bin");
	assert_non_null(e);
	assert_int_equal(e->type, MF_REG);
	assert_int_equal(e->size, 100 << 10);
	e = manifest_find(m, "/link");
	assert_non_null(e);
	assert_int_equal(e->type, MF_SYMLINK);
	assert_null(manifest_find(m, "/nope"));
	manifest_free(m);
	assert_true(r.chunks.new_chunks >= 1);
	/* the same tree again: its chunks are in the store already */
	o.output = mf2;
	assert_int_equal(import_run(&o, &r2, why, sizeof(why)), 0);
	assert_int_equal(r2.chunks.new_chunks, 0);
	assert_int_equal(r2.chunks.chunks, r.chunks.chunks);
	assert_int_equal(r2.file_bytes, r.file_bytes);
	rm_rf(dir);
}

static void test_import_missing(void **state)
{
	char dir[PATH_MAX], src[PATH_MAX], store[PATH_MAX], mf[PATH_MAX], why[512] = "";
	struct import_result r;
	struct import_opts o;

	(void)state;
	tmpdir_make(dir);
	path_fmt(src, "%s/nothing-here", dir);
	path_fmt(store, "%s/store", dir);
	path_fmt(mf, "%s/a.manifest", dir);
	o = import_opts_make(src, store, mf);
	assert_true(import_run(&o, &r, why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "nothing-here"));
	assert_false(path_exists(mf));
	rm_rf(dir);
}

static void test_import_cancelled(void **state)
{
	char dir[PATH_MAX], src[PATH_MAX], store[PATH_MAX], mf[PATH_MAX], why[512] = "";
	struct import_result r;
	struct import_opts o;
	const int cancel = 1;

	(void)state;
	tmpdir_make(dir);
	tree_make(dir);
	path_fmt(src, "%s/src", dir);
	path_fmt(store, "%s/store", dir);
	path_fmt(mf, "%s/a.manifest", dir);
	o = import_opts_make(src, store, mf);
	o.cancel = &cancel;
	assert_int_equal(import_run(&o, &r, why, sizeof(why)), -ECANCELED);
	assert_string_equal(why, "interrupted");
	assert_false(path_exists(mf));
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_import_dir),
		cmocka_unit_test(test_import_missing),
		cmocka_unit_test(test_import_cancelled),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
