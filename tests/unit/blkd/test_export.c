/* SPDX-License-Identifier: MIT */
/*
 * blkd/export/file_export: a layout over a real store exported into a raw disk — the bytes,
 * the sparse file, the statistics and progress, with one thread and with several — and the
 * failures (a missing chunk, a missing layout, an output that cannot be written): a reason
 * for each, and nothing left behind.
 */
#include "../helpers.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/stat.h>

#include "../../../blkd/export/file_export.h"
#include "../../../cas/chunk.h"
#include "../../../common/fsutil.h"
#include "../../../layout/layout.h"

#define BLK DISK_BLOCK
#define NBLOCKS 4096u
#define DISK ((size_t)NBLOCKS * BLK)

enum { A, B, C, MISSING, N_CHUNKS };

struct chunk {
	uint8_t *raw;
	size_t len;
	uint8_t digest[SHA256_LEN];
};

struct fixture {
	char dir[PATH_MAX], store[PATH_MAX], layout[PATH_MAX], out[PATH_MAX];
	struct chunk c[N_CHUNKS];
	uint8_t meta[2][BLK];
	uint8_t *want;
	uint64_t mapped;            /* bytes of the ranges the runs cover */
};

static void chunk_add(struct store *s, struct chunk_codec *codec, struct chunk *c, uint64_t seed,
		      size_t len, size_t zero_head, bool put)
{
	size_t cap = chunk_compress_bound(len), n;
	uint8_t *frame = malloc(cap);

	c->raw = malloc(len);
	assert_true(frame && c->raw);
	c->len = len;
	prng_fill(&seed, c->raw, len);
	memset(c->raw, 0, zero_head); /* blocks of zeros inside a data run: not written */
	assert_int_equal(sha256_buf(c->raw, len, c->digest), 0);
	assert_int_equal(chunk_compress(codec, c->raw, len, frame, cap, &n), 0);
	if (put)
		assert_int_equal(store_put(s, c->digest, frame, n), 0);
	free(frame);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct chunk_codec *codec = chunk_codec_new(1);
	uint64_t seed = 7;
	struct store *s;

	assert_true(f && codec);
	assert_int_equal(store_tmp_open(f->dir, f->store, &s), 0);
	path_fmt(f->layout, "%s/img.layout", f->dir);
	path_fmt(f->out, "%s/disk.raw", f->dir);
	chunk_add(s, codec, &f->c[A], 1, 384 * BLK, 0, true);
	chunk_add(s, codec, &f->c[B], 2, 16 * BLK, 8 * BLK, true);
	chunk_add(s, codec, &f->c[C], 3, 1536 * BLK, 0, true);        /* 6 MiB: two pieces */
	chunk_add(s, codec, &f->c[MISSING], 4, 2 * BLK, 0, false);
	assert_int_equal(store_commit(s), 0);
	store_close(s);
	chunk_codec_free(codec);
	prng_fill(&seed, f->meta, sizeof(f->meta));
	f->want = calloc(1, DISK);
	assert_non_null(f->want);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < N_CHUNKS; i++)
		free(f->c[i].raw);
	free(f->want);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static void add_data(struct fixture *f, struct layout_writer *w, uint64_t pos, uint32_t len,
		     int chunk, uint32_t off)
{
	assert_int_equal(layout_add_data(w, pos, len, f->c[chunk].digest, off), 0);
	memcpy(f->want + pos, f->c[chunk].raw + off, len);
}

static void add_meta(struct fixture *f, struct layout_writer *w, uint64_t lba, int idx)
{
	assert_int_equal(layout_add_meta(w, lba, f->meta[idx], 1), 0);
	memcpy(f->want + lba * BLK, f->meta[idx], BLK);
}

/*
 * Metadata at blocks 0, 1, 10 and 2600; all of A at 100; all of C at 1000 (two pieces);
 * B (half zeros) at 3000; the end of A in the disk's last 700 bytes; with_missing: a run of a
 * chunk the store does not have at 3500.
 */
static void layout_make(struct fixture *f, bool with_missing)
{
	struct layout_writer *w;

	assert_int_equal(layout_writer_new(f->layout, NBLOCKS, &w), 0);
	add_meta(f, w, 0, 0);
	add_meta(f, w, 1, 1);
	add_meta(f, w, 10, 1);
	add_data(f, w, 100 * BLK, 384 * BLK, A, 0);
	add_data(f, w, 1000 * BLK, 1536 * BLK, C, 0);
	add_meta(f, w, 2600, 0);
	add_data(f, w, 3000 * BLK, 16 * BLK, B, 0);
	if (with_missing)
		add_data(f, w, 3500 * BLK, 2 * BLK, MISSING, 0);
	add_data(f, w, DISK - 700, 700, A, 1000);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 8u << 20, NULL), 0);
	layout_writer_free(w);
	f->mapped = (2 + 1 + 384 + 1536 + 1 + 16 + 1 + (with_missing ? 2 : 0)) * (uint64_t)BLK;
}

static uint64_t nonzero_bytes(const uint8_t *disk)
{
	static const uint8_t zero[BLK];
	uint64_t n = 0;

	for (size_t b = 0; b < NBLOCKS; b++)
		if (memcmp(disk + b * BLK, zero, BLK))
			n += BLK;
	return n;
}

/* Files in the fixture's directory other than the store and the layout. */
static int stray_files(const struct fixture *f)
{
	DIR *d = opendir(f->dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    strcmp(e->d_name, "store") && strcmp(e->d_name, "img.layout") &&
		    strcmp(e->d_name, "disk.raw"))
			n++;
	closedir(d);
	return n;
}

static void export_check(struct fixture *f, unsigned threads)
{
	struct test_progress p = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct blkd_export_opts o = {
		.disk = { .layout_path = f->layout, .tiers = { .store_dir = f->store } },
		.out_path = f->out, .threads = threads, .progress = test_progress_cb,
		.progress_arg = &p,
	};
	struct blkd_export_stats st;
	char why[256] = "untouched";
	uint8_t *got;
	size_t len;
	struct stat sb;

	assert_int_equal(blkd_export(&o, &st, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(fs_read_file(f->out, &got, &len), 0);
	assert_int_equal(len, DISK);
	assert_memory_equal(got, f->want, DISK);
	free(got);
	assert_int_equal(st.disk_bytes, DISK);
	assert_int_equal(st.mapped_bytes, f->mapped);
	assert_int_equal(st.written_bytes, nonzero_bytes(f->want));
	assert_true(st.written_bytes < st.mapped_bytes); /* B's zero blocks were skipped */
	assert_int_equal(st.chunks, 3);
	assert_int_equal(st.chunk_loads, 3);
	assert_int_equal(st.cas.disk_hits, 3);
	assert_true(st.seconds >= 0);
	/* one call per piece: 7 ranges, C's cut in two */
	assert_int_equal(p.calls, 8);
	assert_int_equal(p.max_done, f->mapped);
	assert_int_equal(p.total, f->mapped);
	/* sparse, readable by all, no temporary file left */
	assert_int_equal(stat(f->out, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0644);
	assert_true((uint64_t)sb.st_blocks * 512 <= st.written_bytes + BLK);
	assert_int_equal(stray_files(f), 0);
}

static void test_export_one_thread(void **state)
{
	struct fixture *f = *state;

	layout_make(f, false);
	export_check(f, 1);
}

static void test_export_threads(void **state)
{
	struct fixture *f = *state;

	layout_make(f, false);
	export_check(f, 4);
	/* again over the file it made: replaced whole */
	export_check(f, 0);
}

/* A chunk missing from the store: the reader said why (the logger), nothing is left. */
static void test_export_missing_chunk(void **state)
{
	struct fixture *f = *state;
	struct blkd_export_opts o = { .disk = { .layout_path = f->layout,
						.tiers = { .store_dir = f->store } },
				      .out_path = f->out, .threads = 3 };
	struct blkd_export_stats st;
	char why[256];

	layout_make(f, true);
	assert_int_equal(blkd_export(&o, &st, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "");
	assert_false(path_exists(f->out));
	assert_int_equal(stray_files(f), 0);
}

/* Failures of blkd_export's own: one line naming the file. */
static void test_export_bad_paths(void **state)
{
	struct fixture *f = *state;
	char bad[PATH_MAX], why[256], want[PATH_MAX + 64];
	struct blkd_export_opts o = { .disk = { .layout_path = bad,
						.tiers = { .store_dir = f->store } },
				      .out_path = f->out };
	struct blkd_export_stats st;

	layout_make(f, false);
	path_fmt(bad, "%s/nope.layout", f->dir);
	assert_int_equal(blkd_export(&o, &st, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "%s: %s", bad, strerror(ENOENT));
	assert_string_equal(why, want);
	o.disk.layout_path = f->layout;
	path_fmt(bad, "%s/no/such/dir/disk.raw", f->dir);
	o.out_path = bad;
	assert_int_equal(blkd_export(&o, &st, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "%s: %s", bad, strerror(ENOENT));
	assert_string_equal(why, want);
	/* no room for a reason: still the error */
	assert_int_equal(blkd_export(&o, &st, NULL, 0), -ENOENT);
	assert_int_equal(stray_files(f), 0);
}

/*
 * A memory cache smaller than the chunks: A, read at block 100, is let go for C and read again
 * for the disk's last bytes. The chunks reported are still the layout's three (the summary
 * counted loads: one more than the layout has), and the disk is right.
 */
static void test_export_chunks_not_loads(void **state)
{
	struct fixture *f = *state;
	struct blkd_export_opts o = { .disk = { .layout_path = f->layout, .mem_cache = 1u << 20,
						.tiers = { .store_dir = f->store } },
				      .out_path = f->out, .threads = 1 };
	struct blkd_export_stats st;
	char why[256];
	uint8_t *got;
	size_t len;

	layout_make(f, false);
	assert_int_equal(blkd_export(&o, &st, why, sizeof(why)), 0);
	assert_int_equal(fs_read_file(f->out, &got, &len), 0);
	assert_int_equal(len, DISK);
	assert_memory_equal(got, f->want, DISK);
	free(got);
	assert_int_equal(st.chunks, 3);
	assert_int_equal(st.chunk_loads, 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_export_one_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_missing_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_bad_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_export_chunks_not_loads, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
