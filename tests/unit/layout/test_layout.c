/* SPDX-License-Identifier: MIT */
/* Unit tests for layout/ (write.c, read.c): writer, reader, validation. */
#include "../helpers.h"

#include "../../../cas/chunk.h"
#include "../../../common/crc32c.h"
#include "../../../common/fsutil.h"
#include "../../../common/sha256.h"
#include "../../../layout/layout.h"

#define BLK DISK_BLOCK
#define NBLOCKS 64

struct fixture {
	char dir[PATH_MAX];
	char path[PATH_MAX];  /* DIR/img.layout */
	char tmp[PATH_MAX];   /* DIR/img.layout.tmp.* (the writer's temporary, a glob) */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	tmpdir_make(f->dir);
	path_fmt(f->path, "%s/img.layout", f->dir);
	path_fmt(f->tmp, "%s/img.layout.tmp.*", f->dir);
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

/* ------------------------------------------------------------------ a sample layout */

static const uint8_t uuid1[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

struct sample {
	uint8_t meta[7][BLK];           /* the metadata blocks in the order they are added */
	uint8_t digest[3][SHA256_LEN];  /* chunks A, B, C */
	uint8_t mdigest[SHA256_LEN];    /* "manifest" digest */
};

static void sample_init(struct sample *s, uint64_t seed)
{
	prng_fill(&seed, s->meta, sizeof(s->meta));
	prng_fill(&seed, s->digest, sizeof(s->digest));
	prng_fill(&seed, s->mdigest, sizeof(s->mdigest));
}

/*
 * Metadata at blocks 0-1 and 2 (merged into one run), 10-12 and 40; data runs at block 3
 * (2 blocks of A), inside block 5 (50 bytes of B, 3000 bytes of A) and from block 20
 * (10000 bytes of C).
 */
static void sample_write(const char *path, const struct sample *s, const uint8_t uuid[16],
			 uint8_t digest[SHA256_LEN])
{
	struct layout_writer *w = NULL;

	assert_int_equal(layout_writer_new(path, NBLOCKS, &w), 0);
	assert_int_equal(layout_add_meta(w, 0, s->meta[0], 2), 0);
	assert_int_equal(layout_add_data(w, 3 * BLK, 2 * BLK, s->digest[0], 0), 0);
	assert_int_equal(layout_add_meta(w, 2, s->meta[2], 1), 0);
	assert_int_equal(layout_add_data(w, 5 * BLK + 100, 50, s->digest[1], 10), 0);
	assert_int_equal(layout_add_data(w, 5 * BLK + 200, 3000, s->digest[0], 8192), 0);
	assert_int_equal(layout_add_meta(w, 10, s->meta[3], 3), 0);
	assert_int_equal(layout_add_data(w, 20 * BLK, 10000, s->digest[2], 0), 0);
	assert_int_equal(layout_add_meta(w, 40, s->meta[6], 1), 0);
	assert_int_equal(layout_writer_finish(w, s->mdigest, uuid, 65536, digest), 0);
	layout_writer_free(w);
}

static size_t sample_size(void)
{
	return BLK + 7 * BLK + 3 * sizeof(struct layout_meta_run) +
	       4 * sizeof(struct layout_data_run) + 3 * SHA256_LEN;
}

static void expect_bad(const char *path, const char *why_want)
{
	struct layout *l = (struct layout *)0x1;
	char why[WHY_MAX] = "";

	assert_int_equal(layout_open(path, &l, why, sizeof(why)), -EBADMSG);
	assert_ptr_equal(l, (struct layout *)0x1);
	assert_true(why[0]);
	if (why_want && !strstr(why, why_want))
		fail_msg("why: got '%s', want '%s'", why, why_want);
}

/* ------------------------------------------------------------------ round trip */

static void test_roundtrip(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN], want[SHA256_LEN], buf[BLK], *file;
	struct sample s;
	struct layout *l;
	char why[WHY_MAX] = "";
	size_t len;

	sample_init(&s, 1);
	sample_write(f->path, &s, uuid1, digest);
	assert_false(path_glob_exists(f->tmp));
	assert_int_equal(fs_read_file(f->path, &file, &len), 0);
	assert_int_equal(len, sample_size());
	assert_int_equal(sha256_buf(file, BLK, want), 0);
	assert_memory_equal(digest, want, SHA256_LEN);
	free(file);

	assert_int_equal(layout_open(f->path, &l, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_memory_equal(l->digest, digest, SHA256_LEN);
	assert_memory_equal(l->hdr.magic, LAYOUT_MAGIC, 8);
	assert_int_equal(l->hdr.version, LAYOUT_VERSION);
	assert_int_equal(l->hdr.block_size, BLK);
	assert_int_equal(l->hdr.block_count, NBLOCKS);
	assert_int_equal(l->hdr.meta_blocks, 7);
	assert_int_equal(l->hdr.meta_run_count, 3);
	assert_int_equal(l->hdr.data_run_count, 4);
	assert_int_equal(l->hdr.chunk_count, 3);
	assert_int_equal(l->hdr.chunk_size, 65536);
	assert_int_equal(l->hdr.flags, 0);
	assert_memory_equal(l->hdr.manifest_digest, s.mdigest, SHA256_LEN);
	assert_memory_equal(l->hdr.fs_uuid, uuid1, 16);
	assert_int_equal(l->meta_offset, BLK);

	/* merged meta runs */
	assert_int_equal(l->meta_runs[0].lba, 0);
	assert_int_equal(l->meta_runs[0].first, 0);
	assert_int_equal(l->meta_runs[0].count, 3);
	assert_int_equal(l->meta_runs[1].lba, 10);
	assert_int_equal(l->meta_runs[1].first, 3);
	assert_int_equal(l->meta_runs[1].count, 3);
	assert_int_equal(l->meta_runs[2].lba, 40);
	assert_int_equal(l->meta_runs[2].first, 6);
	assert_int_equal(l->meta_runs[2].count, 1);

	/* data runs, never merged; digests interned in order of first use */
	const struct layout_data_run want_runs[4] = {
		{ .lba = 3, .len = 2 * BLK, .chunk = 0, .chunk_off = 0, .blk_off = 0 },
		{ .lba = 5, .len = 50, .chunk = 1, .chunk_off = 10, .blk_off = 100 },
		{ .lba = 5, .len = 3000, .chunk = 0, .chunk_off = 8192, .blk_off = 200 },
		{ .lba = 20, .len = 10000, .chunk = 2, .chunk_off = 0, .blk_off = 0 },
	};
	assert_memory_equal(l->data_runs, want_runs, sizeof(want_runs));
	assert_memory_equal(l->chunks, s.digest, sizeof(s.digest));

	/* every block: metadata or not */
	for (uint64_t lba = 0; lba < NBLOCKS; lba++) {
		int idx = lba < 3 ? (int)lba : lba >= 10 && lba < 13 ? (int)lba - 7 :
			  lba == 40 ? 6 : -1;
		int ret = layout_read_meta(l, lba, buf);

		assert_int_equal(ret, idx >= 0 ? 1 : 0);
		if (idx >= 0)
			assert_memory_equal(buf, s.meta[idx], BLK);
	}
	assert_int_equal(layout_read_meta(l, NBLOCKS + 5, buf), 0);

	/* first data run that ends after a byte */
	assert_int_equal(layout_data_run_at(l, 0), 0);
	assert_int_equal(layout_data_run_at(l, 3 * BLK), 0);
	assert_int_equal(layout_data_run_at(l, 5 * BLK - 1), 0);
	assert_int_equal(layout_data_run_at(l, 5 * BLK), 1);
	assert_int_equal(layout_data_run_at(l, 5 * BLK + 149), 1);
	assert_int_equal(layout_data_run_at(l, 5 * BLK + 150), 2);
	assert_int_equal(layout_data_run_at(l, 5 * BLK + 3199), 2);
	assert_int_equal(layout_data_run_at(l, 5 * BLK + 3200), 3);
	assert_int_equal(layout_data_run_at(l, 20 * BLK + 9999), 3);
	assert_int_equal(layout_data_run_at(l, 20 * BLK + 10000), 4);
	assert_int_equal(layout_data_run_at(l, UINT64_MAX), 4);

	/* first meta run that ends after a block */
	assert_int_equal(layout_meta_run_at(l, 0), 0);
	assert_int_equal(layout_meta_run_at(l, 2), 0);
	assert_int_equal(layout_meta_run_at(l, 3), 1);
	assert_int_equal(layout_meta_run_at(l, 12), 1);
	assert_int_equal(layout_meta_run_at(l, 13), 2);
	assert_int_equal(layout_meta_run_at(l, 41), 3);
	layout_close(l);
	layout_close(NULL);
}

/*
 * The writer's temporary file is a fresh name (O_EXCL): a link planted at a name it could
 * guess (the old fixed IMG.layout.tmp) is neither followed nor truncated, and stays.
 */
static void test_writer_tmp_fresh(void **state)
{
	struct fixture *f = *state;
	char victim[PATH_MAX], planted[PATH_MAX], got[8];
	uint8_t digest[SHA256_LEN];
	struct sample s;
	ssize_t n;
	int fd;

	path_fmt(victim, "%s/victim", f->dir);
	path_fmt(planted, "%s/img.layout.tmp", f->dir);
	write_file(victim, "keep", 4);
	assert_int_equal(symlink(victim, planted), 0);
	sample_init(&s, 1);
	sample_write(f->path, &s, uuid1, digest);
	fd = open(victim, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	n = read(fd, got, sizeof(got));
	close(fd);
	assert_int_equal(n, 4);
	assert_memory_equal(got, "keep", 4);
	assert_true(path_exists(planted));
	assert_false(path_glob_exists(f->tmp));
}

static void test_empty(void **state)
{
	struct fixture *f = *state;
	struct layout_writer *w;
	uint8_t digest[SHA256_LEN], buf[BLK];
	struct layout *l;

	assert_int_equal(layout_writer_new(f->path, 1, &w), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 0, digest), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(f->path, &l, NULL, 0), 0);
	assert_int_equal(l->hdr.block_count, 1);
	assert_int_equal(l->hdr.meta_blocks + l->hdr.meta_run_count + l->hdr.data_run_count +
				 l->hdr.chunk_count, 0);
	assert_int_equal(layout_read_meta(l, 0, buf), 0);
	assert_int_equal(layout_data_run_at(l, 0), 0);
	assert_int_equal(layout_meta_run_at(l, 0), 0);
	layout_close(l);
}

/*
 * Metadata bytes rewritten in place after layout_open verified the file are never
 * returned: the block that changed reads as -EIO, the others as they were verified.
 */
static void test_meta_changed_after_open(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN], buf[BLK], junk[16];
	uint64_t bad = 0;
	struct sample s;
	struct layout *l;
	int fd;

	sample_init(&s, 5);
	sample_write(f->path, &s, uuid1, digest);
	assert_int_equal(layout_open(f->path, &l, NULL, 0), 0);
	/* disk block 10 is the 4th metadata block of the area: rewrite 16 of its bytes */
	memset(junk, 0xEE, sizeof(junk));
	fd = open(f->path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), BLK + 3 * BLK + 100), sizeof(junk));
	close(fd);
	assert_int_equal(layout_read_meta(l, 10, buf), -EIO);
	assert_int_equal(layout_read_meta(l, 11, buf), 1);
	assert_memory_equal(buf, s.meta[4], BLK);
	assert_int_equal(layout_meta_verify(l, 4, 1, s.meta[4], &bad), 0);
	assert_int_equal(layout_meta_verify(l, 3, 2, s.meta[4], &bad), -EIO);
	assert_int_equal(bad, 3);
	layout_close(l);
}

/* Interning: many runs of few chunks; a big table grows its hash table correctly. */
static void test_intern(void **state)
{
	struct fixture *f = *state;
	struct layout_writer *w;
	struct layout *l;
	uint8_t d[SHA256_LEN];
	const uint32_t n = 5000;

	assert_int_equal(layout_writer_new(f->path, 4 * n, &w), 0);
	for (uint32_t i = 0; i < 2 * n; i++) {
		memset(d, 0, sizeof(d));
		memcpy(d, &(uint32_t){ i % n }, 4);
		assert_int_equal(layout_add_data(w, (uint64_t)i * BLK + 7, 100, d, i % 50), 0);
	}
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 4096, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(f->path, &l, NULL, 0), 0);
	assert_int_equal(l->hdr.chunk_count, n);
	assert_int_equal(l->hdr.data_run_count, 2 * n);
	for (uint32_t i = 0; i < 2 * n; i++) {
		uint32_t v;

		assert_int_equal(l->data_runs[i].chunk, i % n);
		memcpy(&v, l->chunks[l->data_runs[i].chunk], 4);
		assert_int_equal(v, i % n);
	}
	layout_close(l);
}

/* Merging stops at a gap and never lets a run's count overflow. */
static void test_meta_merge(void **state)
{
	struct fixture *f = *state;
	struct layout_writer *w;
	struct layout *l;
	uint8_t blocks[4 * BLK] = { 0 };

	assert_int_equal(layout_writer_new(f->path, 100, &w), 0);
	for (uint64_t lba = 0; lba < 8; lba++)
		assert_int_equal(layout_add_meta(w, lba, blocks, 1), 0);
	assert_int_equal(layout_add_meta(w, 9, blocks, 4), 0);
	assert_int_equal(layout_add_meta(w, 13, blocks, 2), 0);
	assert_int_equal(layout_add_meta(w, 99, blocks, 1), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 0, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(f->path, &l, NULL, 0), 0);
	assert_int_equal(l->hdr.meta_run_count, 3);
	assert_int_equal(l->hdr.meta_blocks, 15);
	assert_int_equal(l->meta_runs[0].count, 8);
	assert_int_equal(l->meta_runs[1].lba, 9);
	assert_int_equal(l->meta_runs[1].first, 8);
	assert_int_equal(l->meta_runs[1].count, 6);
	assert_int_equal(l->meta_runs[2].lba, 99);
	assert_int_equal(l->meta_runs[2].first, 14);
	layout_close(l);
}

static void test_digest_stable(void **state)
{
	struct fixture *f = *state;
	uint8_t d1[SHA256_LEN], d2[SHA256_LEN], d3[SHA256_LEN], *b1, *b2;
	char p2[PATH_MAX];
	struct sample s;
	size_t n1, n2;
	uint8_t uuid2[16];

	sample_init(&s, 7);
	path_fmt(p2, "%s/other.layout", f->dir);
	sample_write(f->path, &s, uuid1, d1);
	sample_write(p2, &s, uuid1, d2);
	assert_memory_equal(d1, d2, SHA256_LEN);
	assert_int_equal(fs_read_file(f->path, &b1, &n1), 0);
	assert_int_equal(fs_read_file(p2, &b2, &n2), 0);
	assert_int_equal(n1, n2);
	assert_memory_equal(b1, b2, n1);
	free(b1);
	free(b2);
	/* rewriting in place gives the same digest */
	sample_write(f->path, &s, uuid1, d2);
	assert_memory_equal(d1, d2, SHA256_LEN);
	/* any input change changes it */
	memcpy(uuid2, uuid1, 16);
	uuid2[15] ^= 1;
	sample_write(p2, &s, uuid2, d3);
	assert_memory_not_equal(d1, d3, SHA256_LEN);
	s.meta[6][4095] ^= 1;
	sample_write(p2, &s, uuid1, d3);
	assert_memory_not_equal(d1, d3, SHA256_LEN);
}

/* ------------------------------------------------------------------ writer validation */

static void test_writer_invalid(void **state)
{
	struct fixture *f = *state;
	static uint8_t blocks[4 * BLK];
	uint8_t d[SHA256_LEN] = { 1 };
	struct layout_writer *w = (struct layout_writer *)0x1;
	struct layout *l;
	char longp[PATH_MAX + 10];

	assert_int_equal(layout_writer_new(f->path, 0, &w), -EINVAL);
	assert_int_equal(layout_writer_new(f->path, LAYOUT_MAX_BLOCKS + 1, &w), -EINVAL);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(layout_writer_new(longp, 1, &w), -ENAMETOOLONG);
	path_fmt(longp, "%s/no/such/dir/x.layout", f->dir);
	assert_int_equal(layout_writer_new(longp, 1, &w), -ENOENT);
	assert_ptr_equal(w, (struct layout_writer *)0x1);

	assert_int_equal(layout_writer_new(f->path, 16, &w), 0);
	assert_true(path_glob_exists(f->tmp));
	assert_false(path_exists(f->path));
	/* meta: zero count, beyond the disk, overflowing lba */
	assert_int_equal(layout_add_meta(w, 0, blocks, 0), -EINVAL);
	assert_int_equal(layout_add_meta(w, 16, blocks, 1), -EINVAL);
	assert_int_equal(layout_add_meta(w, 14, blocks, 3), -EINVAL);
	assert_int_equal(layout_add_meta(w, UINT64_MAX, blocks, 2), -EINVAL);
	assert_int_equal(layout_add_meta(w, 4, blocks, 2), 0);
	/* out of order, overlapping */
	assert_int_equal(layout_add_meta(w, 3, blocks, 1), -EINVAL);
	assert_int_equal(layout_add_meta(w, 5, blocks, 1), -EINVAL);
	assert_int_equal(layout_add_meta(w, 0, blocks, 1), -EINVAL);
	assert_int_equal(layout_add_meta(w, 15, blocks, 1), 0);
	/* data: zero length, beyond the disk, overflow */
	assert_int_equal(layout_add_data(w, 0, 0, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, 16 * BLK, 1, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, 16 * BLK - 10, 11, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, UINT64_MAX - 5, 10, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, 0, 100, d, UINT32_MAX - 50), -EINVAL);
	assert_int_equal(layout_add_data(w, 1000, 100, d, 0), 0);
	/* out of order, overlapping; adjacent is fine */
	assert_int_equal(layout_add_data(w, 999, 1, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, 1099, 10, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, 500, 10, d, 0), -EINVAL);
	assert_int_equal(layout_add_data(w, 1100, 10, d, 200), 0);
	/* the largest chunk_off + len is 210: a smaller chunk size is refused */
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 209, NULL), -EINVAL);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, CHUNK_SIZE_MAX + 1, NULL), -EINVAL);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 210, NULL), 0);
	/* finished: nothing more */
	assert_int_equal(layout_add_meta(w, 15, blocks, 1), -EINVAL);
	assert_int_equal(layout_add_data(w, 2000, 1, d, 0), -EINVAL);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 210, NULL), -EINVAL);
	layout_writer_free(w); /* keeps the file */
	assert_true(path_exists(f->path));
	assert_false(path_glob_exists(f->tmp));
	assert_int_equal(layout_open(f->path, &l, NULL, 0), 0);
	assert_int_equal(l->hdr.meta_run_count, 2);
	assert_int_equal(l->hdr.data_run_count, 2);
	assert_int_equal(l->hdr.chunk_count, 1);
	layout_close(l);
	layout_writer_free(NULL);
}

static void test_writer_meta_data_overlap(void **state)
{
	struct fixture *f = *state;
	static uint8_t blocks[BLK];
	uint8_t d[SHA256_LEN] = { 2 };
	struct layout_writer *w;

	/* a data run ending in a metadata block */
	assert_int_equal(layout_writer_new(f->path, 16, &w), 0);
	assert_int_equal(layout_add_data(w, 2 * BLK, BLK + 1, d, 0), 0);
	assert_int_equal(layout_add_meta(w, 3, blocks, 1), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), -EINVAL);
	layout_writer_free(w); /* drops the temporary file */
	assert_false(path_glob_exists(f->tmp));
	assert_false(path_exists(f->path));

	/* a partial data run inside a metadata block */
	assert_int_equal(layout_writer_new(f->path, 16, &w), 0);
	assert_int_equal(layout_add_meta(w, 3, blocks, 1), 0);
	assert_int_equal(layout_add_data(w, 3 * BLK + 4000, 10, d, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), -EINVAL);
	layout_writer_free(w);

	/* touching but not sharing a block is fine */
	assert_int_equal(layout_writer_new(f->path, 16, &w), 0);
	assert_int_equal(layout_add_data(w, 2 * BLK, BLK, d, 0), 0);
	assert_int_equal(layout_add_meta(w, 3, blocks, 1), 0);
	assert_int_equal(layout_add_data(w, 4 * BLK, 1, d, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	assert_true(path_exists(f->path));
}

/* ------------------------------------------------------------------ reader validation */

static void test_open_errors(void **state)
{
	struct fixture *f = *state;
	struct layout *l;
	char why[WHY_MAX] = "";
	char p[PATH_MAX];

	path_fmt(p, "%s/missing", f->dir);
	assert_int_equal(layout_open(p, &l, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "");
	assert_int_equal(layout_open(f->dir, &l, why, sizeof(why)), -EISDIR);
	write_file(p, "LZBKMANI and more", 17);
	expect_bad(p, "bad magic (not a lazyblk layout)");
	write_file(p, "LZB", 3);
	expect_bad(p, "file too short");
}

static void test_truncated(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN], *file;
	char p[PATH_MAX];
	struct sample s;
	size_t len;

	sample_init(&s, 3);
	sample_write(f->path, &s, uuid1, digest);
	assert_int_equal(fs_read_file(f->path, &file, &len), 0);
	path_fmt(p, "%s/cut.layout", f->dir);
	for (size_t n = 0; n < len; n += n < 64 || n > len - 300 ? 1 : 97) {
		write_file(p, file, n);
		expect_bad(p, n < 8     ? "file too short"
			      : n < BLK ? "truncated (shorter than the header)"
					: "truncated");
	}
	/* one byte more is as bad */
	uint8_t *more = malloc(len + 1);

	assert_non_null(more);
	memcpy(more, file, len);
	more[len] = 0;
	write_file(p, more, len + 1);
	expect_bad(p, "trailing garbage after the layout");
	free(more);
	free(file);
}

static void flip_byte(const char *path, size_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
	b ^= 0x20;
	assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static void test_flipped(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN];
	struct layout *l;
	struct sample s;
	size_t len = sample_size();

	sample_init(&s, 4);
	sample_write(f->path, &s, uuid1, digest);
	/* every byte of the header block */
	for (size_t off = 0; off < BLK; off++) {
		flip_byte(f->path, off);
		expect_bad(f->path, off < 8 ? "bad magic" : NULL);
		flip_byte(f->path, off);
	}
	/* the metadata area (sampled) and every byte of the tables */
	for (size_t off = BLK; off < len; off += off >= 8 * BLK ? 1 : 13) {
		flip_byte(f->path, off);
		expect_bad(f->path, "checksum mismatch (file corrupt)");
		flip_byte(f->path, off);
	}
	/* restored: fine again */
	assert_int_equal(layout_open(f->path, &l, NULL, 0), 0);
	layout_close(l);
}

/*
 * Hand-edit a valid layout and re-seal it (body sha256 and header crc), so that the
 * structural checks behind the checksums are reached.
 */
struct image {
	uint8_t *buf;
	size_t len;
	struct layout_header *h;
	struct layout_meta_run *meta;
	struct layout_data_run *data;
};

static void image_load(const char *path, struct image *im)
{
	assert_int_equal(fs_read_file(path, &im->buf, &im->len), 0);
	im->h = (struct layout_header *)im->buf;
	im->meta = (struct layout_meta_run *)(im->buf + BLK + im->h->meta_blocks * BLK);
	im->data = (struct layout_data_run *)(im->meta + im->h->meta_run_count);
}

static void image_seal(const char *path, struct image *im)
{
	struct layout_header h;

	assert_int_equal(sha256_buf(im->buf + BLK, im->len - BLK, im->h->body_sha256), 0);
	h = *im->h;
	h.header_crc = 0;
	im->h->header_crc = crc32c(~0u, &h, sizeof(h));
	write_file(path, im->buf, im->len);
	free(im->buf);
}

static void test_bad_structure(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN];
	char p[PATH_MAX];
	struct image im;
	struct sample s;
	struct layout *l;

	sample_init(&s, 5);
	sample_write(f->path, &s, uuid1, digest);
	path_fmt(p, "%s/edit.layout", f->dir);

#define CASE(why, edit)                       \
	do {                                  \
		image_load(f->path, &im);     \
		edit;                         \
		image_seal(p, &im);           \
		expect_bad(p, why);           \
	} while (0)

	/* sealing an unedited image gives a valid layout */
	image_load(f->path, &im);
	image_seal(p, &im);
	assert_int_equal(layout_open(p, &l, NULL, 0), 0);
	layout_close(l);
	/* header fields */
	CASE("unsupported layout version", im.h->version = 2);
	CASE("unsupported block size", im.h->block_size = 512);
	CASE("unsupported flags", im.h->flags = 2);
	CASE("unsupported flags", im.h->version = 1; im.h->flags = 1);
	CASE("bad block count", im.h->block_count = 0);
	CASE("bad block count", im.h->block_count = LAYOUT_MAX_BLOCKS + 1);
	CASE("bad chunk size", im.h->chunk_size = CHUNK_SIZE_MAX + 1);
	CASE("truncated (counts exceed", im.h->chunk_count = UINT64_MAX / 4);
	CASE("truncated (counts exceed", im.h->meta_blocks = UINT64_MAX / 2);
	CASE("truncated", im.h->chunk_count++);
	CASE("trailing garbage", im.h->chunk_count--);
	CASE("header padding not zero", im.buf[BLK - 1] = 1);
	/* metadata runs */
	CASE("metadata run beyond the end of the disk", im.meta[2].lba = NBLOCKS);
	CASE("metadata run beyond the end of the disk", im.meta[2].lba = UINT64_MAX);
	CASE("metadata run beyond the end of the disk", im.meta[2].lba = NBLOCKS - 1;
	     im.meta[2].count = 2);
	CASE("metadata run beyond the metadata area", im.meta[2].first = 7);
	CASE("metadata run beyond the metadata area", im.meta[2].first = 6; im.meta[2].count = 2);
	CASE("metadata run beyond the metadata area", im.meta[2].first = UINT64_MAX);
	CASE("bad metadata run", im.meta[1].count = 0);
	CASE("bad metadata run", im.meta[1].layer = 1);
	CASE("metadata runs not sorted or overlapping", im.meta[1].lba = 2);
	CASE("metadata runs not sorted or overlapping", im.meta[2].lba = 5);
	/* data runs */
	CASE("bad data run", im.data[1].len = 0);
	CASE("bad data run", im.data[1].blk_off = BLK);
	CASE("bad data run", im.data[1].flags = 1);
	CASE("data run beyond the end of the disk", im.data[3].lba = NBLOCKS);
	CASE("data run beyond the end of the disk", im.data[3].lba = NBLOCKS - 1);
	CASE("data run beyond the end of the disk", im.data[3].lba = UINT64_MAX / BLK + 1);
	CASE("chunk not in the chunk table", im.data[3].chunk = 3);
	CASE("data run beyond the chunk size", im.data[3].chunk_off = 65536 - 9999);
	CASE("data run beyond the chunk size", im.data[3].chunk_off = UINT32_MAX);
	CASE("data runs not sorted or overlapping", im.data[2].blk_off = 149);
	CASE("data runs not sorted or overlapping", im.data[1].lba = 4);
	CASE("data runs not sorted or overlapping", im.data[3].lba = 3);
	CASE("data run overlaps a metadata block", im.data[3].lba = 40);
	CASE("data run overlaps a metadata block", im.data[3].lba = 8);
	CASE("data run overlaps a metadata block", im.data[0].lba = 2; im.data[0].len = BLK);
#undef CASE
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_tmp_fresh, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_changed_after_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_intern, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_digest_stable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_invalid, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_meta_data_overlap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_structure, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
