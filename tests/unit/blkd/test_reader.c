/* SPDX-License-Identifier: MIT */
/* Unit tests for blkd/engine/reader: the read path over a hand-built layout and a real store. */
#include "../helpers.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../blkd/engine/reader.h"
#include "../../../cas/chunk.h"
#include "../../../cas/plain.h"
#include "../../../cas/store.h"
#include "../../../common/sha256.h"
#include "../../../layout/layout.h"

#define BLK DISK_BLOCK
#define NBLOCKS 32
#define DISK ((size_t)NBLOCKS * BLK)

/* A chunk: raw content and its name. */
struct chunk {
	uint8_t *raw;
	size_t len;
	uint8_t digest[SHA256_LEN];
};

enum { A, B, C, MISSING, WRONG, GARBAGE, SHORT, N_CHUNKS };

struct fixture {
	char dir[PATH_MAX];
	char store[PATH_MAX];
	char layout[PATH_MAX];
	struct store *s;
	struct cas_source *src;         /* the reader's tier over the same store */
	struct chunk_codec *codec;
	struct chunk c[N_CHUNKS];
	uint8_t meta[3][BLK];
	uint8_t *want;                /* the disk the sample layout describes */
	struct layout *l;
	struct blkd_reader *r;
	bool plain;                   /* the source uses the plain tier (off: the memory tier) */
};

static void chunk_put(struct fixture *f, const struct chunk *c, const void *raw, size_t len)
{
	size_t cap = chunk_compress_bound(len), n;
	uint8_t *frame = malloc(cap);

	assert_non_null(frame);
	assert_int_equal(chunk_compress(f->codec, raw, len, frame, cap, &n), 0);
	assert_int_equal(store_put(f->s, c->digest, frame, n), 0);
	free(frame);
}

static void chunk_make(struct chunk *c, uint64_t seed, size_t len, bool compressible)
{
	c->raw = malloc(len);
	assert_non_null(c->raw);
	c->len = len;
	content_make(c->raw, len, seed, compressible, c->digest);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	uint64_t seed = 42;

	if (!f)
		return -1;
	assert_int_equal(store_tmp_open(f->dir, f->store, &f->s), 0);
	path_fmt(f->layout, "%s/img.layout", f->dir);
	f->codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	assert_non_null(f->codec);

	chunk_make(&f->c[A], 1, 20000, false);
	chunk_make(&f->c[B], 2, 8192, true);
	chunk_make(&f->c[C], 3, 3 * BLK, false);
	chunk_make(&f->c[MISSING], 4, 5000, false);
	chunk_make(&f->c[WRONG], 5, 5000, false);
	chunk_make(&f->c[GARBAGE], 6, 5000, false);
	chunk_make(&f->c[SHORT], 7, 100, false);
	chunk_put(f, &f->c[A], f->c[A].raw, f->c[A].len);
	chunk_put(f, &f->c[B], f->c[B].raw, f->c[B].len);
	chunk_put(f, &f->c[C], f->c[C].raw, f->c[C].len);
	chunk_put(f, &f->c[SHORT], f->c[SHORT].raw, f->c[SHORT].len);
	/* a valid zstd frame whose content is not what its name says (one byte differs) */
	f->c[B].raw[0] ^= 1;
	chunk_put(f, &f->c[WRONG], f->c[B].raw, f->c[B].len);
	f->c[B].raw[0] ^= 1;
	/* not zstd at all */
	assert_int_equal(store_put(f->s, f->c[GARBAGE].digest, "garbage!", 8), 0);
	assert_int_equal(store_commit(f->s), 0);

	prng_fill(&seed, f->meta, sizeof(f->meta));
	f->want = calloc(1, DISK);
	assert_non_null(f->want);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	blkd_reader_free(f->r);
	cas_source_close(f->src);
	layout_close(f->l);
	store_close(f->s);
	chunk_codec_free(f->codec);
	for (int i = 0; i < N_CHUNKS; i++)
		free(f->c[i].raw);
	free(f->want);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/* Add a data run to the layout and to the expected disk. */
static void add_data(struct fixture *f, struct layout_writer *w, uint64_t pos, uint32_t len,
		     int chunk, uint32_t chunk_off)
{
	assert_int_equal(layout_add_data(w, pos, len, f->c[chunk].digest, chunk_off), 0);
	if (chunk_off + len <= f->c[chunk].len)
		memcpy(f->want + pos, f->c[chunk].raw + chunk_off, len);
}

static void add_meta(struct fixture *f, struct layout_writer *w, uint64_t lba, int idx,
		     uint32_t count)
{
	assert_int_equal(layout_add_meta(w, lba, f->meta[idx], count), 0);
	memcpy(f->want + lba * BLK, f->meta[idx], (size_t)count * BLK);
}

/*
 * blocks 0-1 metadata; 2 a whole block of A; 3-4 two blocks of A; 5 three partial runs
 * (B, C, A) with zeros between; 6 metadata; 8-10 all of C; 11-19 zeros; 20 512 bytes in
 * the middle of a block; 21-22 metadata; zeros to the end but for a run ending the disk.
 */
/* The chunk source the reader takes its chunks from: the fixture's store, no remote. */
static struct cas_source *reader_src(struct fixture *f)
{
	struct cas_source_opts o = { .store_dir = f->store, .no_plain = !f->plain };

	if (!f->src)
		assert_int_equal(cas_source_open(&o, &f->src, NULL, 0), 0);
	return f->src;
}

static void sample_open(struct fixture *f, size_t cache_bytes)
{
	struct layout_writer *w;
	char why[WHY_MAX] = "";

	assert_int_equal(layout_writer_new(f->layout, NBLOCKS, &w), 0);
	add_meta(f, w, 0, 0, 2);
	add_data(f, w, 2 * BLK, BLK, A, 0);
	add_data(f, w, 3 * BLK, 2 * BLK, A, BLK);
	add_data(f, w, 5 * BLK + 100, 50, B, 10);
	add_data(f, w, 5 * BLK + 1000, 3000, C, 5);
	add_data(f, w, 5 * BLK + 4000, 96, A, 19904);
	add_meta(f, w, 6, 2, 1);
	add_data(f, w, 8 * BLK, 3 * BLK, C, 0);
	add_data(f, w, 20 * BLK + 1024, 512, B, 7000);
	add_meta(f, w, 21, 1, 1);
	add_meta(f, w, 22, 2, 1);
	add_data(f, w, DISK - 700, 700, A, 300);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(f->layout, &f->l, why, sizeof(why)), 0);
	assert_int_equal(blkd_reader_new(f->l, reader_src(f), cache_bytes, &f->r), 0);
	assert_int_equal(blkd_reader_size(f->r), DISK);
}

static void test_full_read(void **state)
{
	struct fixture *f = *state;
	struct blkd_reader_stats st;
	uint8_t *buf = malloc(DISK);

	assert_non_null(buf);
	sample_open(f, 0);
	memset(buf, 0xaa, DISK);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, DISK), 0);
	assert_memory_equal(buf, f->want, DISK);
	/* each chunk decompressed once */
	blkd_reader_stats(f->r, &st);
	assert_int_equal(st.chunk_loads, 3);
	assert_int_equal(st.evictions, 0);
	assert_int_equal(st.cached_bytes, f->c[A].len + f->c[B].len + f->c[C].len);
	/* again, from the cache */
	assert_int_equal(blkd_reader_read(f->r, 0, buf, DISK), 0);
	assert_memory_equal(buf, f->want, DISK);
	blkd_reader_stats(f->r, &st);
	assert_int_equal(st.chunk_loads, 3);
	assert_true(st.cache_hits >= 8);
	free(buf);
}

struct racer {
	struct fixture *f;
	int rounds;
	int failed;
};

static void *race(void *arg)
{
	struct racer *x = arg;
	uint8_t *buf = malloc(DISK);

	for (int i = 0; buf && i < x->rounds; i++) {
		if (blkd_reader_read(x->f->r, 0, buf, DISK) || memcmp(buf, x->f->want, DISK))
			x->failed = 1;
	}
	free(buf);
	return NULL;
}

static void run_racers(struct fixture *f, int n, int rounds)
{
	pthread_t t[8];
	struct racer x[8];

	for (int i = 0; i < n; i++) {
		x[i] = (struct racer){ f, rounds, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, race, &x[i]), 0);
	}
	for (int i = 0; i < n; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(x[i].failed, 0);
	}
}

/* Threads racing on a cold cache load each chunk once (single flight), and read right. */
static void test_concurrent_single_flight(void **state)
{
	struct fixture *f = *state;
	struct blkd_reader_stats st;

	sample_open(f, 0);
	run_racers(f, 8, 3);
	blkd_reader_stats(f->r, &st);
	assert_int_equal(st.chunk_loads, 3);
	assert_int_equal(st.evictions, 0);
}

/* With a cache smaller than one chunk, racing readers evict under each other safely. */
static void test_concurrent_tiny_cache(void **state)
{
	struct fixture *f = *state;

	sample_open(f, 1);
	run_racers(f, 6, 20);
}

/* Every sector-aligned window, with a cache too small to hold more than one chunk. */
static void check_windows(struct fixture *f)
{
	static const size_t lens[] = { 512, 1024, BLK, BLK + 512, 3 * BLK + 1536, 9 * BLK };
	uint8_t *buf = malloc(DISK);

	assert_non_null(buf);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		for (size_t off = 0; off + lens[k] <= DISK; off += BLKD_SECTOR) {
			memset(buf, 0x55, lens[k]);
			assert_int_equal(blkd_reader_read(f->r, off, buf, lens[k]), 0);
			if (memcmp(buf, f->want + off, lens[k]))
				fail_msg("window %zu+%zu differs", off, lens[k]);
		}
	}
	free(buf);
}

static void test_windows(void **state)
{
	struct fixture *f = *state;

	sample_open(f, 0);
	check_windows(f);
}

static void test_tiny_cache(void **state)
{
	struct fixture *f = *state;
	struct blkd_reader_stats st;

	sample_open(f, 1);
	check_windows(f);
	blkd_reader_stats(f->r, &st);
	assert_true(st.chunk_loads > 3);
	assert_true(st.evictions > 0);
	assert_true(st.cached_bytes <= f->c[A].len); /* only the last chunk used is kept */
}

static void test_meta_zero_only(void **state)
{
	struct fixture *f = *state;
	struct blkd_reader_stats st;
	uint8_t buf[2 * BLK];

	sample_open(f, 0);
	/* metadata and zeros need no chunk */
	assert_int_equal(blkd_reader_read(f->r, 0, buf, 2 * BLK), 0);
	assert_memory_equal(buf, f->meta[0], 2 * BLK);
	assert_int_equal(blkd_reader_read(f->r, 12 * BLK, buf, 2 * BLK), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(blkd_reader_read(f->r, 21 * BLK + 512, buf, BLK), 0);
	assert_memory_equal(buf, f->meta[1] + 512, BLK - 512);
	assert_memory_equal(buf + BLK - 512, f->meta[2], 512);
	blkd_reader_stats(f->r, &st);
	assert_int_equal(st.chunk_loads, 0);
}

static void test_bad_args(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[2 * BLK];

	sample_open(f, 0);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, 0), 0);
	assert_int_equal(blkd_reader_read(f->r, DISK, buf, 0), 0);
	assert_int_equal(blkd_reader_read(f->r, 1, buf, 512), -EINVAL);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, 513), -EINVAL);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, 100), -EINVAL);
	assert_int_equal(blkd_reader_read(f->r, DISK, buf, 512), -EINVAL);
	assert_int_equal(blkd_reader_read(f->r, DISK - 512, buf, 1024), -EINVAL);
	assert_int_equal(blkd_reader_read(f->r, UINT64_MAX - 511, buf, 1024), -EINVAL);
	assert_int_equal(blkd_reader_read(f->r, DISK - 512, buf, 512), 0);
	assert_memory_equal(buf, f->want + DISK - 512, 512);
}

/* A layout with one good run (A at block 0) and one run of chunk `bad` at block 2. */
static void bad_open(struct fixture *f, int bad, uint32_t len)
{
	struct layout_writer *w;

	assert_int_equal(layout_writer_new(f->layout, 4, &w), 0);
	add_data(f, w, 0, BLK, A, 0);
	assert_int_equal(layout_add_data(w, 2 * BLK + 512, len, f->c[bad].digest, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(f->layout, &f->l, NULL, 0), 0);
	assert_int_equal(blkd_reader_new(f->l, reader_src(f), 0, &f->r), 0);
}

static void expect_read_fails(struct fixture *f, int err)
{
	uint8_t buf[4 * BLK];

	assert_int_equal(blkd_reader_read(f->r, 2 * BLK, buf, BLK), err);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, 4 * BLK), err);
	/* again: failures are not cached as successes */
	assert_int_equal(blkd_reader_read(f->r, 2 * BLK, buf, BLK), err);
	/* the rest of the disk still reads */
	assert_int_equal(blkd_reader_read(f->r, 0, buf, 2 * BLK), 0);
	assert_memory_equal(buf, f->c[A].raw, BLK);
	assert_int_equal(blkd_reader_read(f->r, 3 * BLK, buf, BLK), 0);
}

static void test_corrupt_chunk(void **state)
{
	struct fixture *f = *state;

	bad_open(f, WRONG, 100);
	expect_read_fails(f, -EIO);
}

static void test_garbage_chunk(void **state)
{
	struct fixture *f = *state;

	bad_open(f, GARBAGE, 100);
	expect_read_fails(f, -EIO);
}

static void test_missing_chunk(void **state)
{
	struct fixture *f = *state;

	bad_open(f, MISSING, 100);
	expect_read_fails(f, -ENOENT);
}

/* A verified chunk that is shorter than the layout says: the layout is wrong. */
static void test_short_chunk(void **state)
{
	struct fixture *f = *state;

	bad_open(f, SHORT, 101);
	expect_read_fails(f, -EIO);
}

/* A chunk bigger than the layout's chunk size is refused before it is decompressed. */
static void test_oversized_chunk(void **state)
{
	struct fixture *f = *state;
	struct layout_writer *w;
	uint8_t buf[BLK];

	assert_int_equal(layout_writer_new(f->layout, 4, &w), 0);
	assert_int_equal(layout_add_data(w, 0, 100, f->c[A].digest, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 4096, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(f->layout, &f->l, NULL, 0), 0);
	assert_int_equal(blkd_reader_new(f->l, reader_src(f), 0, &f->r), 0);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, BLK), -EIO);
}

/* The first miss (chunk A) queued the next chunks for read-ahead: wait until its thread has loaded
 * one, so that the reads after it meet chunks read ahead however late the thread runs (a
 * loaded machine, sanitizers) rather than when the timing happens to fit. */
static void wait_readahead(struct blkd_reader *r)
{
	struct blkd_reader_stats st;

	for (int ms = 0; ms < 60000; ms++) {
		blkd_reader_stats(r, &st);
		if (st.readahead >= 1)
			return;
		usleep(1000);
	}
	fail_msg("read-ahead loaded nothing in 60 s");
}

/* Sequential reads block by block with read-ahead: the later chunks are loaded ahead of
 * their reads (each once), and every byte is still right, with a roomy or a tiny cache. */
static void test_readahead(void **state)
{
	struct fixture *f = *state;
	struct blkd_reader_stats st;
	uint8_t buf[BLK];

	for (int pass = 0; pass < 2; pass++) {
		sample_open(f, pass ? 1 : 0);
		assert_int_equal(blkd_reader_readahead(f->r, 8), 0);
		assert_int_equal(blkd_reader_readahead(f->r, 8), 0);  /* again: same setting */
		assert_int_equal(blkd_reader_readahead(f->r, 4), -EINVAL);
		for (uint64_t off = 0; off < DISK; off += BLK) {
			assert_int_equal(blkd_reader_read(f->r, off, buf, BLK), 0);
			assert_memory_equal(buf, f->want + off, BLK);
			if (off == 2 * BLK) /* the first data run: chunk A */
				wait_readahead(f->r);
		}
		blkd_reader_stats(f->r, &st);
		assert_true(st.readahead >= 1);
		if (!pass)
			assert_int_equal(st.chunk_loads, 3); /* ahead or not, each chunk once */
		blkd_reader_free(f->r);
		f->r = NULL;
		layout_close(f->l);
		f->l = NULL;
	}
}


/* ------------------------------------------------------------------ the plain tier */

static void plain_path(struct fixture *f, int chunk, char path[PATH_MAX])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(f->c[chunk].digest, hex);
	path_fmt(path, "%s/plain/%.2s/%s", f->store, hex, hex);
}

/* A new source and reader on the same store (another server, as far as the store knows). */
static void reopen(struct fixture *f)
{
	blkd_reader_free(f->r);
	f->r = NULL;
	cas_source_close(f->src);
	f->src = NULL;
	assert_int_equal(blkd_reader_new(f->l, reader_src(f), 0, &f->r), 0);
}

static void read_all_ok(struct fixture *f)
{
	uint8_t *buf = malloc(DISK);

	assert_non_null(buf);
	memset(buf, 0xaa, DISK);
	assert_int_equal(blkd_reader_read(f->r, 0, buf, DISK), 0);
	assert_memory_equal(buf, f->want, DISK);
	free(buf);
}

/* A verified load fills the plain tier; the next reader uses it (no decompression). */
static void test_plain_filled_then_used(void **state)
{
	struct fixture *f = *state;
	struct cas_source_stats cs;
	struct blkd_reader_stats st;
	char path[PATH_MAX];

	f->plain = true;
	sample_open(f, 0);
	read_all_ok(f);
	cas_source_get_stats(f->src, &cs);
	assert_int_equal(cs.disk_hits, 3);
	assert_int_equal(cs.plain_writes, 3);
	assert_int_equal(cs.plain_hits, 0);
	blkd_reader_stats(f->r, &st);
	assert_int_equal(st.cached_plain, 3);  /* held as plain copies, not in memory */
	assert_int_equal(st.cached_bytes, 0);
	for (int c = A; c <= C; c++) {
		struct stat sb;

		plain_path(f, c, path);
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_size, f->c[c].len + PLAIN_TRAILER);
	}
	read_all_ok(f); /* from the descriptors */
	reopen(f);
	read_all_ok(f);
	cas_source_get_stats(f->src, &cs);
	assert_int_equal(cs.plain_hits, 3);
	assert_int_equal(cs.plain_bytes, f->c[A].len + f->c[B].len + f->c[C].len);
	assert_int_equal(cs.disk_hits, 0);
	assert_int_equal(cs.plain_writes, 0);
}

/* A chunk that fails verification never gets a plain copy. */
static void test_plain_never_of_corrupt(void **state)
{
	struct fixture *f = *state;
	char path[PATH_MAX];

	f->plain = true;
	bad_open(f, WRONG, 100);
	expect_read_fails(f, -EIO);
	plain_path(f, WRONG, path);
	assert_false(path_exists(path));
	blkd_reader_free(f->r);
	f->r = NULL;
	layout_close(f->l);
	f->l = NULL;
	bad_open(f, GARBAGE, 100);
	expect_read_fails(f, -EIO);
	plain_path(f, GARBAGE, path);
	assert_false(path_exists(path));
	plain_path(f, A, path);
	assert_true(path_exists(path)); /* the good chunk has one */
}

static void file_mangle(const char *path, off_t truncate_to, off_t poke)
{
	int fd;

	assert_int_equal(chmod(path, 0644), 0);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	if (truncate_to >= 0)
		assert_int_equal(ftruncate(fd, truncate_to), 0);
	if (poke >= 0)
		assert_int_equal(pwrite(fd, "\x5a", 1, poke), 1);
	close(fd);
}

/* Truncated, flipped or foreign plain copies are detected, not served, and replaced. */
static void test_plain_bad_copies(void **state)
{
	struct fixture *f = *state;
	struct cas_source_stats cs;
	char path[PATH_MAX], other[PATH_MAX];
	uint8_t *junk;

	f->plain = true;
	sample_open(f, 0);
	read_all_ok(f);
	plain_path(f, A, path);
	file_mangle(path, (off_t)f->c[A].len, -1);           /* trailer cut off */
	plain_path(f, B, path);
	file_mangle(path, -1, 17);                          /* one byte of the data */
	plain_path(f, C, path);
	plain_path(f, A, other);
	junk = calloc(1, f->c[C].len + PLAIN_TRAILER);
	assert_non_null(junk);
	assert_int_equal(unlink(path), 0);
	write_file(path, junk, f->c[C].len + PLAIN_TRAILER); /* right size, no trailer */
	free(junk);
	reopen(f);
	read_all_ok(f);
	cas_source_get_stats(f->src, &cs);
	assert_int_equal(cs.plain_bad, 3);
	assert_int_equal(cs.plain_hits, 0);
	assert_int_equal(cs.disk_hits, 3);
	assert_int_equal(cs.plain_writes, 3); /* made again from the verified chunks */
	reopen(f);
	read_all_ok(f);
	cas_source_get_stats(f->src, &cs);
	assert_int_equal(cs.plain_hits, 3);
	assert_int_equal(cs.plain_bad, 0);
}

/* A plain copy truncated after it was checked and opened: the read falls back, verified. */
static void test_plain_truncated_while_open(void **state)
{
	struct fixture *f = *state;
	struct cas_source_stats cs;
	char path[PATH_MAX];

	f->plain = true;
	sample_open(f, 0);
	read_all_ok(f);
	reopen(f);
	read_all_ok(f); /* the reader now holds the three plain copies open */
	plain_path(f, C, path);
	file_mangle(path, 10, -1);
	read_all_ok(f);
	cas_source_get_stats(f->src, &cs);
	assert_int_equal(cs.plain_bad, 1);
	assert_int_equal(cs.disk_hits, 1);
	assert_int_equal(cs.verify_failures, 0);
}

/* A plain tier that cannot be written never fails a read. */
static void test_plain_unwritable(void **state)
{
	struct fixture *f = *state;
	struct cas_source_stats cs;
	struct blkd_reader_stats st;
	char path[PATH_MAX];

	f->plain = true;
	path_fmt(path, "%s/plain", f->store);
	write_file(path, "not a directory", 15);
	sample_open(f, 0);
	read_all_ok(f);
	read_all_ok(f);
	cas_source_get_stats(f->src, &cs);
	assert_int_equal(cs.disk_hits, 3);
	assert_true(cs.plain_write_failures >= 1);
	assert_int_equal(cs.plain_writes, 0);
	blkd_reader_stats(f->r, &st);
	assert_int_equal(st.cached_plain, 0);
	assert_int_equal(st.cached_bytes, f->c[A].len + f->c[B].len + f->c[C].len);
}

/* Racing readers on plain copies, with one copy removed under them now and then. */
static void test_plain_concurrent(void **state)
{
	struct fixture *f = *state;

	f->plain = true;
	sample_open(f, 1);
	run_racers(f, 6, 10);
	reopen(f);
	run_racers(f, 6, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_full_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_readahead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_single_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_tiny_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_windows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tiny_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_zero_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_args, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversized_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_filled_then_used, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_never_of_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_bad_copies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_truncated_while_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_unwritable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_plain_concurrent, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
