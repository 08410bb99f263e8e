/* SPDX-License-Identifier: MIT */
/* Unit tests for cas/gc: chunks, tmp/, STORE/layouts/ and plain copies swept, the cache's count kept. */
#include "../store_fixture.h"

#include "../../../cas/gc.h"

static void test_gc(void **state)
{
	struct fixture *f = *state;
	char layout[PATH_MAX], manifest[PATH_MAX];
	const char *paths[2];
	struct chunk_refs keep, keep_m;
	struct cas_gc_result res;
	struct blob b[GC_N];
	uint64_t before;

	gc_store(f, b, layout, manifest);
	paths[0] = layout;
	paths[1] = manifest;
	refs_of(&keep, paths, 2);
	refs_of(&keep_m, paths + 1, 1);
	assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
	before = cache_used(f->c);

	/* a dry run counts and removes nothing */
	assert_int_equal(cas_gc(f->s, KEEP(keep), 3600, true, NULL, &res), 0);
	assert_int_equal(res.referenced, 5);
	assert_int_equal(res.kept, 4);
	assert_int_equal(res.kept_bytes, 1000 + 1001 + 1002 + 1003);
	assert_int_equal(res.missing, 1);
	assert_int_equal(res.removed, 2);
	assert_int_equal(res.removed_bytes, 1004 + 1005);
	assert_int_equal(res.young, 2);
	assert_int_equal(res.young_bytes, 1006 + 1007);
	for (int i = 0; i < 8; i++)
		assert_int_equal(store_has(f->s, b[i].digest), 1);
	assert_int_equal(cache_used(f->c), before);

	/* for real */
	assert_int_equal(cas_gc(f->s, KEEP(keep), 3600, false, NULL, &res), 0);
	assert_int_equal(res.removed, 2);
	assert_int_equal(res.kept, 4);
	assert_int_equal(res.young, 2);
	for (int i = 0; i < 8; i++)
		assert_int_equal(store_has(f->s, b[i].digest), i < 4 || i >= 6);
	/* the cache's counter follows */
	assert_int_equal(cache_used(f->c), before - 1004 - 1005);
	assert_int_equal(cache_used(f->c), real_usage(f->s, NULL));

	/* grace 0: the new unreferenced ones go too; the referenced ones never */
	assert_int_equal(cas_gc(f->s, KEEP(keep_m), 0, false, NULL, &res), 0);
	assert_int_equal(res.removed, 4);
	assert_int_equal(res.kept, 2);
	for (int i = 0; i < 8; i++)
		assert_int_equal(store_has(f->s, b[i].digest), i == 2 || i == 3);
	assert_int_equal(cache_used(f->c), real_usage(f->s, NULL));
	chunk_refs_free(&keep);
	chunk_refs_free(&keep_m);
	for (int i = 0; i < GC_N; i++)
		blob_free(&b[i]);
}

/* Staging files in tmp/ older than the grace period go; new ones and other names stay. */
static void test_gc_tmp(void **state)
{
	struct fixture *f = *state;
	char layout[PATH_MAX], manifest[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	char stale[PATH_MAX], fresh[PATH_MAX], other[PATH_MAX];
	struct timespec ts[2] = { { .tv_sec = time(NULL) - 7200 }, { .tv_sec = time(NULL) - 7200 } };
	const char *paths[1];
	struct chunk_refs keep;
	struct cas_gc_result res;
	struct blob b[GC_N];

	gc_store(f, b, layout, manifest);
	paths[0] = layout;
	refs_of(&keep, paths, 1);
	sha256_to_hex(b[0].digest, hex);
	path_fmt(stale, "%s/tmp/%s.123.4", f->store, hex);
	path_fmt(fresh, "%s/tmp/%s.123.5", f->store, hex);
	path_fmt(other, "%s/tmp/notes.txt", f->store);
	write_file(stale, "stale", 5);
	write_file(fresh, "fresh", 5);
	write_file(other, "other", 5);
	assert_int_equal(utimensat(AT_FDCWD, stale, ts, 0), 0);
	assert_int_equal(utimensat(AT_FDCWD, other, ts, 0), 0);
	/* cas_gc leaves tmp/ alone; cas_gc_tmp sweeps it */
	assert_int_equal(cas_gc(f->s, KEEP(keep), 3600, true, NULL, &res), 0);
	assert_int_equal(res.tmp_removed, 0);
	assert_int_equal(cas_gc_tmp(f->s, 3600, true, &res), 0);
	assert_int_equal(res.tmp_removed, 1);
	assert_int_equal(res.tmp_bytes, 5);
	assert_int_equal(res.tmp_young, 1);
	assert_int_equal(res.tmp_young_bytes, 5);
	assert_true(path_exists(stale));
	assert_int_equal(cas_gc(f->s, KEEP(keep), 3600, false, NULL, &res), 0);
	assert_true(path_exists(stale));
	assert_int_equal(cas_gc_tmp(f->s, 3600, false, &res), 0);
	assert_int_equal(res.tmp_removed, 1);
	assert_false(path_exists(stale));
	assert_true(path_exists(fresh));
	assert_true(path_exists(other));
	/* grace 0: the fresh one goes too, other names never */
	assert_int_equal(cas_gc_tmp(f->s, 0, false, &res), 0);
	assert_int_equal(res.tmp_removed, 1);
	assert_false(path_exists(fresh));
	assert_true(path_exists(other));
	/* (cas_gc_tmp sets the tmp_* fields only) layout kept 0, 1; manifest not given: 2..5 old and removed */
	assert_int_equal(res.removed, 4);
	assert_int_equal(res.kept, 2);
	chunk_refs_free(&keep);
	for (int i = 0; i < GC_N; i++)
		blob_free(&b[i]);
}

/*
 * A layout made in STORE/layouts/ under its digest's name (as a fetch names it); the path
 * into out and its digest into d; mtime set to t.
 */
static void fetched_layout(struct fixture *f, struct blob *b, int n, time_t t,
			   uint8_t d[SHA256_LEN], char out[PATH_MAX])
{
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };
	char tmp[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t head[DISK_BLOCK];
	int fd;

	path_fmt(tmp, "%s/layouts/new.layout", f->store);
	make_layout(tmp, b, n);
	fd = open(tmp, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fs_read_full(fd, head, sizeof(head)), 0);
	close(fd);
	assert_int_equal(sha256_buf(head, sizeof(head), d), 0);
	sha256_to_hex(d, hex);
	path_fmt(out, "%s/layouts/%s.layout", f->store, hex);
	assert_int_equal(rename(tmp, out), 0);
	assert_int_equal(utimensat(AT_FDCWD, out, ts, 0), 0);
}

/* A file at path, its mtime t (a FIFO when data is NULL). */
static void file_at(const char *path, const char *data, time_t t)
{
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };

	if (data)
		write_file(path, data, strlen(data));
	else
		assert_int_equal(mkfifo(path, 0644), 0);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

/*
 * STORE/layouts/ (images fetched by reference; on 7515cfa nothing ever removed them): the
 * files of kept chains stay, so do files younger than the grace period and names lazyblk
 * does not write; the rest go, a FIFO with a layout's name too (never opened). Stale
 * temporary files of fetches go with cas_gc_tmp.
 */
static void test_gc_layouts(void **state)
{
	struct fixture *f = *state;
	time_t old = time(NULL) - 7200;
	char p1[PATH_MAX], p2[PATH_MAX], p3[PATH_MAX], m1[PATH_MAX], m2[PATH_MAX];
	char fifo[PATH_MAX], other[PATH_MAX], t_old[PATH_MAX], t_new[PATH_MAX];
	char hex[SHA256_HEX_LEN + 1];
	uint8_t d1[SHA256_LEN], d2[SHA256_LEN], d3[SHA256_LEN], dx[SHA256_LEN];
	struct chunk_refs keep = { 0 };
	struct cas_gc_result res = { 0 };
	struct blob b[3];
	char why[WHY_MAX] = "";

	for (int i = 0; i < 3; i++)
		blob_make(&b[i], 900 + (uint64_t)i, 100 + (size_t)i);
	path_fmt(p1, "%s/layouts", f->store);
	assert_int_equal(mkdir(p1, 0755), 0);
	fetched_layout(f, &b[0], 1, old, d1, p1);
	fetched_layout(f, &b[1], 1, old, d2, p2);
	fetched_layout(f, &b[2], 1, time(NULL), d3, p3);
	sha256_to_hex(d1, hex);
	path_fmt(m1, "%s/layouts/%s.manifest", f->store, hex);
	file_at(m1, "manifest of 1", old);
	sha256_to_hex(d2, hex);
	path_fmt(m2, "%s/layouts/%s.manifest", f->store, hex);
	file_at(m2, "manifest of 2", old);
	memset(dx, 0x5a, sizeof(dx));
	sha256_to_hex(dx, hex);
	path_fmt(fifo, "%s/layouts/%s.layout", f->store, hex);
	file_at(fifo, NULL, old);
	path_fmt(other, "%s/layouts/README", f->store);
	file_at(other, "not ours", old);
	sha256_to_hex(d1, hex);
	path_fmt(t_old, "%s/layouts/%s.layout.tmp.AbC123", f->store, hex);
	file_at(t_old, "stale", old);
	path_fmt(t_new, "%s/layouts/%s.manifest.tmp.xYz789", f->store, hex);
	file_at(t_new, "fresh", time(NULL));

	alarm(20);
	assert_int_equal(chunk_refs_add_fetched(&keep, p1, why, sizeof(why)), 0);
	chunk_refs_finish(&keep);
	assert_int_equal(keep.n_layouts, 1);
	assert_memory_equal(keep.layouts[0], d1, SHA256_LEN);
	/* a dry run counts */
	assert_int_equal(cas_gc_layouts(f->s, (const uint8_t (*)[SHA256_LEN])keep.layouts,
					keep.n_layouts, 3600, true, &res), 0);
	assert_int_equal(res.layouts_kept, 2);
	assert_int_equal(res.layouts_young, 1);
	assert_int_equal(res.layouts_removed, 3);
	assert_true(path_exists(p2) && path_exists(m2) && path_exists(fifo));
	/* for real */
	assert_int_equal(cas_gc_layouts(f->s, (const uint8_t (*)[SHA256_LEN])keep.layouts,
					keep.n_layouts, 3600, false, &res), 0);
	assert_int_equal(res.layouts_removed, 3);
	assert_true(path_exists(p1) && path_exists(m1) && path_exists(p3) && path_exists(other));
	assert_false(path_exists(p2) || path_exists(m2) || path_exists(fifo));
	/* grace 0: the young one goes too, the kept ones never */
	assert_int_equal(cas_gc_layouts(f->s, (const uint8_t (*)[SHA256_LEN])keep.layouts,
					keep.n_layouts, 0, false, &res), 0);
	assert_int_equal(res.layouts_removed, 1);
	assert_false(path_exists(p3));
	assert_true(path_exists(p1) && path_exists(m1) && path_exists(other));
	/* the temporary files of fetches: the stale one goes */
	assert_int_equal(cas_gc_tmp(f->s, 600, false, &res), 0);
	assert_int_equal(res.tmp_removed, 1);
	assert_int_equal(res.tmp_young, 1);
	assert_false(path_exists(t_old));
	assert_true(path_exists(t_new) && path_exists(other));
	alarm(0);
	chunk_refs_free(&keep);
	for (int i = 0; i < 3; i++)
		blob_free(&b[i]);
}

/* ------------------------------------------------------------------ plain copies */

/* gc removes the plain copies of the chunks it removes, and old copies without a chunk. */
static void test_gc_plain(void **state)
{
	struct fixture *f = *state;
	char layout[PATH_MAX], manifest[PATH_MAX], p[PATH_MAX];
	const char *paths[2] = { layout, manifest };
	struct timespec old[2] = { { .tv_sec = time(NULL) - 7200 }, { .tv_sec = time(NULL) - 7200 } };
	struct chunk_refs keep;
	struct cas_gc_result res;
	struct blob b[GC_N], orphan, young;
	uint64_t bytes, chunks, plain_files;

	gc_store(f, b, layout, manifest);
	refs_of(&keep, paths, 2);
	for (int i = 0; i < 8; i++)
		assert_int_equal(plain_put(f->s, b[i].digest, b[i].data, b[i].len, NULL, &bytes), 1);
	blob_make(&orphan, 777, 500);
	blob_make(&young, 778, 500);
	assert_int_equal(plain_put(f->s, orphan.digest, orphan.data, orphan.len, NULL, &bytes), 1);
	assert_int_equal(plain_put(f->s, young.digest, young.data, young.len, NULL, &bytes), 1);
	plain_file_path(f, orphan.digest, p);
	assert_int_equal(utimensat(AT_FDCWD, p, old, 0), 0);
	assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
	assert_int_equal(cache_used(f->c), real_usage_all(f->s, &chunks, &plain_files) -
					   2 * (500 + PLAIN_TRAILER)); /* orphans are not counted */

	assert_int_equal(cas_gc(f->s, KEEP(keep), 3600, false, NULL, &res), 0);
	assert_int_equal(res.removed, 2);               /* chunks 4 and 5 */
	assert_int_equal(res.plain_removed, 2);
	assert_int_equal(res.plain_orphans, 1);
	assert_int_equal(res.plain_removed_bytes, 1004 + 1005 + 500 + 3 * PLAIN_TRAILER);
	for (int i = 0; i < 8; i++) {
		plain_file_path(f, b[i].digest, p);
		assert_int_equal(path_exists(p), i < 4 || i >= 6);
	}
	plain_file_path(f, orphan.digest, p);
	assert_false(path_exists(p));
	plain_file_path(f, young.digest, p);
	assert_true(path_exists(p)); /* within the grace period */
	assert_int_equal(cache_used(f->c), real_usage_all(f->s, &chunks, &plain_files) -
					   (500 + PLAIN_TRAILER));
	chunk_refs_free(&keep);
	for (int i = 0; i < GC_N; i++)
		blob_free(&b[i]);
	blob_free(&orphan);
	blob_free(&young);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_layouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_plain, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
