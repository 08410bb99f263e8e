/* SPDX-License-Identifier: MIT */
/*
 * blkd/disk: the one disk interface. The raw disk (disk_raw.c) on sparse temporary files:
 * reads, writes, flush, discard, write-zeroes, block status from the file's holes,
 * read-only refusals, ranges out of bounds, open errors, statistics; the lazy image as a
 * disk (disk_engine.c) over a small layout; disk_check() and the dispatch helpers.
 */
#include "../helpers.h"

#include <sys/stat.h>

#include "../../../blkd/disk/disk_int.h"
#include "../../../blkd/engine/engine.h"
#include "../../../cas/store.h"
#include "../../../layout/layout.h"

#define BLK 4096u
#define NBLK 64u
#define SIZE ((uint64_t)NBLK * BLK)
#define HOLE_ZERO (DISK_STATUS_HOLE | DISK_STATUS_ZERO)

struct fx {
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t img[SIZE];         /* what the file should hold */
	struct disk d;
};

/* A sparse file of SIZE: random data in blocks [4, 8) and 20, holes elsewhere. */
static void fx_file(struct fx *f)
{
	uint64_t seed = 11;
	int fd;

	memset(f->img, 0, sizeof(f->img));
	prng_fill(&seed, f->img + 4 * BLK, 4 * BLK);
	prng_fill(&seed, f->img + 20 * BLK, BLK);
	tmpdir_make(f->dir);
	path_fmt(f->path, "%s/disk.raw", f->dir);
	fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)SIZE), 0);
	assert_int_equal(pwrite(fd, f->img + 4 * BLK, 4 * BLK, 4 * BLK), 4 * BLK);
	assert_int_equal(pwrite(fd, f->img + 20 * BLK, BLK, 20 * BLK), BLK);
	assert_int_equal(fsync(fd), 0);
	close(fd);
}

static struct fx *fx_open(bool ro)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	fx_file(f);
	assert_int_equal(disk_raw_open(f->path, ro, &f->d), 0);
	return f;
}

static void fx_close(struct fx *f)
{
	disk_close(&f->d);
	rm_rf(f->dir);
	free(f);
}

static void check_file(struct fx *f)
{
	uint8_t *buf = malloc(SIZE);
	int fd = open(f->path, O_RDONLY | O_CLOEXEC);

	assert_non_null(buf);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, SIZE, 0), (ssize_t)SIZE);
	close(fd);
	assert_memory_equal(buf, f->img, SIZE);
	free(buf);
}

struct span {
	uint64_t off, len;
	uint32_t flags;
};

struct spans {
	struct span s[64];
	int n, stop_after;         /* stop_after > 0: return 1 after that many */
	int fail;                  /* < 0: return it from the first extent */
};

static int collect(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct spans *sp = arg;

	if (sp->fail)
		return sp->fail;
	assert_true(sp->n < 64);
	if (sp->n && sp->s[sp->n - 1].flags == flags &&
	    sp->s[sp->n - 1].off + sp->s[sp->n - 1].len == off) /* merge, as a client would */
		sp->s[sp->n - 1].len += len;
	else
		sp->s[sp->n++] = (struct span){ off, len, flags };
	return sp->stop_after && sp->n >= sp->stop_after ? 1 : 0;
}

static void expect_span(const struct spans *sp, int i, uint64_t from, uint64_t to,
			uint32_t flags)
{
	assert_true(i < sp->n);
	assert_int_equal(sp->s[i].off, from);
	assert_int_equal(sp->s[i].off + sp->s[i].len, to);
	assert_int_equal(sp->s[i].flags, flags);
}

static void test_raw_open(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct disk d;
	uint8_t junk[BLK + 100] = { 1 };

	(void)state;
	tmpdir_make(dir);
	path_fmt(path, "%s/missing", dir);
	assert_int_equal(disk_raw_open(path, false, &d), -ENOENT);
	assert_int_equal(disk_raw_open(dir, true, &d), -EISDIR);
	path_fmt(path, "%s/empty", dir);
	write_file(path, "", 0);
	assert_int_equal(disk_raw_open(path, true, &d), -EINVAL);
	write_file(path, junk, 300); /* under one sector */
	assert_int_equal(disk_raw_open(path, false, &d), -EINVAL);
	assert_int_equal(disk_raw_open("/dev/null", true, &d), -EINVAL);
	/* the size is rounded down to whole sectors; the tail is never touched */
	write_file(path, junk, sizeof(junk));
	assert_int_equal(disk_raw_open(path, false, &d), 0);
	assert_int_equal(d.size, BLK);
	assert_int_equal(disk_check(&d), 0);
	assert_false(d.read_only);
	assert_true(d.can_flush && d.can_fua && d.can_discard && d.can_write_zeroes &&
		    d.can_multi_conn);
	assert_false(d.can_snapshot);
	assert_true(disk_has_status(&d, DISK_CTX_ALLOCATION));
	assert_false(disk_has_status(&d, DISK_CTX_DIRTY));
	assert_int_equal(disk_read(&d, BLK, 512, junk), -EINVAL);
	disk_close(&d);
	assert_null(d.ops);
	disk_close(&d); /* a closed disk again: nothing */
	/* read-write needs write permission; read-only does not */
	chmod(path, 0444);
	if (geteuid() != 0)
		assert_int_equal(disk_raw_open(path, false, &d), -EACCES);
	assert_int_equal(disk_raw_open(path, true, &d), 0);
	assert_true(d.read_only);
	disk_close(&d);
	rm_rf(dir);
}

static void test_raw_read_write(void **state)
{
	struct fx *f = fx_open(false);
	uint8_t buf[3 * BLK], w[2 * BLK];

	(void)state;
	assert_int_equal(f->d.size, SIZE);
	assert_int_equal(disk_read(&f->d, 3 * BLK, 3 * BLK, buf), 0);
	assert_memory_equal(buf, f->img + 3 * BLK, 3 * BLK);
	assert_int_equal(disk_read(&f->d, 0, 0, buf), 0);
	/* sector-sized writes anywhere, with and without FUA */
	memset(w, 0x5a, sizeof(w));
	assert_int_equal(disk_write(&f->d, 512, 1024, w, false), 0);
	memcpy(f->img + 512, w, 1024);
	assert_int_equal(disk_write(&f->d, 30 * BLK + 512, (uint32_t)sizeof(w), w, true), 0);
	memcpy(f->img + 30 * BLK + 512, w, sizeof(w));
	assert_int_equal(disk_flush(&f->d), 0);
	check_file(f);
	/* out of range, misaligned, overflowing: -EINVAL and nothing moves */
	assert_int_equal(disk_read(&f->d, 100, 512, buf), -EINVAL);
	assert_int_equal(disk_read(&f->d, 0, 100, buf), -EINVAL);
	assert_int_equal(disk_read(&f->d, SIZE, 512, buf), -EINVAL);
	assert_int_equal(disk_read(&f->d, SIZE - 512, 1024, buf), -EINVAL);
	assert_int_equal(disk_read(&f->d, UINT64_MAX - 511, 1024, buf), -EINVAL);
	assert_int_equal(disk_write(&f->d, SIZE, 512, w, false), -EINVAL);
	assert_int_equal(disk_write(&f->d, 512, 700, w, false), -EINVAL);
	assert_int_equal(disk_discard(&f->d, SIZE - BLK, 2 * BLK), -EINVAL);
	assert_int_equal(disk_write_zeroes(&f->d, 1, 512, true), -EINVAL);
	check_file(f);
	fx_close(f);
}

static void test_raw_discard_zeroes_status(void **state)
{
	struct fx *f = fx_open(false);
	struct spans sp = { .n = 0 };
	uint8_t buf[BLK];

	(void)state;
	/* the file's map: holes, data [4, 8), a hole, data 20, a hole to the end */
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 0, SIZE, collect, &sp), 0);
	assert_int_equal(sp.n, 5);
	expect_span(&sp, 0, 0, 4 * BLK, HOLE_ZERO);
	expect_span(&sp, 1, 4 * BLK, 8 * BLK, 0);
	expect_span(&sp, 2, 8 * BLK, 20 * BLK, HOLE_ZERO);
	expect_span(&sp, 3, 20 * BLK, 21 * BLK, 0);
	expect_span(&sp, 4, 21 * BLK, SIZE, HOLE_ZERO);
	/* a range inside: extents clipped to it */
	sp.n = 0;
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 6 * BLK + 512, 3 * BLK,
					   collect, &sp), 0);
	assert_int_equal(sp.n, 2);
	expect_span(&sp, 0, 6 * BLK + 512, 8 * BLK, 0);
	expect_span(&sp, 1, 8 * BLK, 9 * BLK + 512, HOLE_ZERO);
	/* the callback stops the walk (> 0: success) or fails it (< 0: returned) */
	sp = (struct spans){ .stop_after = 1 };
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 0, SIZE, collect, &sp), 0);
	assert_int_equal(sp.n, 1);
	sp = (struct spans){ .fail = -ENOMEM };
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 0, SIZE, collect, &sp),
			 -ENOMEM);
	/* no dirty context; bad ranges */
	sp = (struct spans){ .n = 0 };
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_DIRTY, 0, SIZE, collect, &sp),
			 -EOPNOTSUPP);
	assert_int_equal(f->d.ops->block_status(f->d.ctx, DISK_CTX_DIRTY, 0, SIZE, collect, &sp),
			 -EOPNOTSUPP);
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 0, 0, collect, &sp),
			 -EINVAL);
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, SIZE - 512, 1024, collect,
					   &sp), -EINVAL);

	/* discard: a hole that reads as zeros */
	assert_int_equal(disk_discard(&f->d, 5 * BLK, BLK), 0);
	memset(f->img + 5 * BLK, 0, BLK);
	/* write-zeroes that may unmap: a hole; without: zeros (allocated or not, as the file
	 * system keeps them) */
	assert_int_equal(disk_write_zeroes(&f->d, 7 * BLK, BLK, true), 0);
	memset(f->img + 7 * BLK, 0, BLK);
	assert_int_equal(disk_write_zeroes(&f->d, 20 * BLK + 1024, 1024, false), 0);
	memset(f->img + 20 * BLK + 1024, 0, 1024);
	assert_int_equal(disk_discard(&f->d, 0, 0), 0);
	assert_int_equal(disk_write_zeroes(&f->d, 0, 0, true), 0);
	check_file(f);
	assert_int_equal(disk_read(&f->d, 5 * BLK, BLK, buf), 0);
	assert_memory_equal(buf, f->img + 5 * BLK, BLK);
	sp.n = 0;
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 4 * BLK, 4 * BLK, collect,
					   &sp), 0);
	assert_int_equal(sp.n, 4);
	expect_span(&sp, 0, 4 * BLK, 5 * BLK, 0);
	expect_span(&sp, 1, 5 * BLK, 6 * BLK, HOLE_ZERO);
	expect_span(&sp, 2, 6 * BLK, 7 * BLK, 0);
	expect_span(&sp, 3, 7 * BLK, 8 * BLK, HOLE_ZERO);
	/* writing into a hole makes it data */
	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(disk_write(&f->d, 40 * BLK, BLK, buf, false), 0);
	sp.n = 0;
	assert_int_equal(disk_block_status(&f->d, DISK_CTX_ALLOCATION, 39 * BLK, 3 * BLK, collect,
					   &sp), 0);
	assert_int_equal(sp.n, 3);
	expect_span(&sp, 1, 40 * BLK, 41 * BLK, 0);
	fx_close(f);
}

/* A file whose size is not a whole number of sectors, ending in data: its map ends there. */
static void test_raw_status_tail(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t junk[700];
	struct spans sp = { .n = 0 };
	struct disk d;
	int fd;

	(void)state;
	memset(junk, 3, sizeof(junk));
	tmpdir_make(dir);
	path_fmt(path, "%s/d", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, junk, sizeof(junk), 3 * BLK), (ssize_t)sizeof(junk));
	close(fd);
	assert_int_equal(disk_raw_open(path, true, &d), 0);
	assert_int_equal(d.size, 3 * BLK + 512);
	assert_int_equal(disk_block_status(&d, DISK_CTX_ALLOCATION, 0, d.size, collect, &sp), 0);
	assert_int_equal(sp.n, 2);
	expect_span(&sp, 0, 0, 3 * BLK, HOLE_ZERO);
	expect_span(&sp, 1, 3 * BLK, 3 * BLK + 512, 0);
	disk_close(&d);
	rm_rf(dir);
}

static void test_raw_read_only(void **state)
{
	struct fx *f = fx_open(true);
	uint8_t buf[BLK] = { 9 };

	(void)state;
	assert_true(f->d.read_only);
	assert_int_equal(disk_write(&f->d, 0, BLK, buf, false), -EROFS);
	assert_int_equal(disk_write(&f->d, 0, BLK, buf, true), -EROFS);
	assert_int_equal(disk_discard(&f->d, 4 * BLK, BLK), -EROFS);
	assert_int_equal(disk_write_zeroes(&f->d, 4 * BLK, BLK, true), -EROFS);
	assert_int_equal(disk_write_zeroes(&f->d, 4 * BLK, BLK, false), -EROFS);
	assert_int_equal(disk_flush(&f->d), 0);
	assert_int_equal(disk_read(&f->d, 4 * BLK, BLK, buf), 0);
	assert_memory_equal(buf, f->img + 4 * BLK, BLK);
	check_file(f);
	fx_close(f);
}

static void test_raw_stats(void **state)
{
	struct fx *f = fx_open(false);
	uint8_t buf[BLK];
	char *out = NULL;
	size_t len = 0;
	FILE *m;

	(void)state;
	assert_int_equal(disk_read(&f->d, 0, BLK, buf), 0);
	assert_int_equal(disk_write(&f->d, 0, 512, buf, false), 0);
	assert_int_equal(disk_flush(&f->d), 0);
	assert_int_equal(disk_discard(&f->d, 0, BLK), 0);
	m = open_memstream(&out, &len);
	assert_non_null(m);
	disk_stats(&f->d, m, true);
	disk_stats(&f->d, m, false);
	fclose(m);
	assert_non_null(strstr(out, "{\"reads\":1,\"writes\":1,\"flushes\":1,\"discards\":1,"));
	assert_non_null(strstr(out, "\"read_bytes\":4096,\"write_bytes\":512,"));
	assert_non_null(strstr(out, "}\nrequests   1 reads (4096 bytes), 1 writes (512 bytes), "));
	free(out);
	fx_close(f);
}

/* ---- disk_check() and the helpers */

static int ops_fail(void *ctx)
{
	(void)ctx;
	return -EIO;
}

static void test_check_and_helpers(void **state)
{
	static const struct disk_ops bare = { .read = (void *)1, .write = (void *)1,
					      .flush = ops_fail };
	struct disk d = { .ops = &bare, .size = BLK };
	struct spans sp = { .n = 0 };
	uint64_t dirty, zero;
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(disk_check(&d), 0);
	assert_int_equal(disk_check(NULL), -EINVAL);
	/* what the disk does not offer: -EOPNOTSUPP, and a flush of nothing succeeds */
	assert_int_equal(disk_flush(&d), 0);
	assert_int_equal(disk_discard(&d, 0, BLK), -EOPNOTSUPP);
	assert_int_equal(disk_write_zeroes(&d, 0, BLK, false), -EOPNOTSUPP);
	assert_int_equal(disk_block_status(&d, DISK_CTX_ALLOCATION, 0, BLK, collect, &sp),
			 -EOPNOTSUPP);
	assert_int_equal(disk_snapshot(&d, "/x", &dirty, &zero, why, sizeof(why)), -EOPNOTSUPP);
	assert_string_equal(why, "");
	d.can_flush = true;
	assert_int_equal(disk_flush(&d), -EIO);
	/* claims without operations, a partial sector, contexts it cannot know */
	d.can_discard = true;
	assert_int_equal(disk_check(&d), -EINVAL);
	d.can_discard = false;
	d.can_snapshot = true;
	assert_int_equal(disk_check(&d), -EINVAL);
	d.can_snapshot = false;
	d.status = DISK_CTX_BIT(DISK_CTX_DIRTY);
	assert_int_equal(disk_check(&d), -EINVAL);
	d.status = 0;
	d.size = BLK + 1;
	assert_int_equal(disk_check(&d), -EINVAL);
}

/* ---- the lazy image as a disk */

static void test_engine_disk(void **state)
{
	char dir[PATH_MAX], layout[PATH_MAX], store[PATH_MAX], ov[PATH_MAX], delta[PATH_MAX];
	struct blkd_engine_opts o = { .layout_path = layout, .store_dir = store };
	struct layout_writer *w;
	struct blkd_engine *e;
	struct spans sp = { .n = 0 };
	uint8_t meta[BLK], buf[BLK];
	uint64_t dirty = 0, zero = 0;
	char why[WHY_MAX] = "";
	struct store *s;
	struct disk d;

	(void)state;
	tmpdir_make(dir);
	path_fmt(layout, "%s/l", dir);
	path_fmt(store, "%s/store", dir);
	path_fmt(ov, "%s/ov", dir);
	path_fmt(delta, "%s/delta", dir);
	memset(meta, 0x42, sizeof(meta));
	assert_int_equal(layout_writer_new(layout, NBLK, &w), 0);
	assert_int_equal(layout_add_meta(w, 2, meta, 1), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(store_open(store, true, &s), 0);
	store_close(s);

	/* without an overlay: read-only, no snapshot (-ENOENT from the engine) */
	assert_int_equal(blkd_engine_open(&o, &e, NULL, 0), 0);
	disk_engine(e, &d);
	assert_int_equal(disk_check(&d), 0);
	assert_int_equal(d.size, SIZE);
	assert_true(d.read_only && d.can_snapshot && d.can_discard && d.can_write_zeroes);
	assert_true(disk_has_status(&d, DISK_CTX_ALLOCATION) && disk_has_status(&d, DISK_CTX_DIRTY));
	assert_int_equal(disk_read(&d, 2 * BLK, BLK, buf), 0);
	assert_memory_equal(buf, meta, BLK);
	assert_int_equal(disk_write(&d, 0, BLK, buf, false), -EPERM);
	assert_int_equal(disk_snapshot(&d, delta, &dirty, &zero, why, sizeof(why)), -ENOENT);
	disk_close(&d); /* and its engine */

	/* with one: writes, zeroes, both contexts, a snapshot of what changed */
	o.overlay_path = ov;
	assert_int_equal(blkd_engine_open(&o, &e, NULL, 0), 0);
	disk_engine(e, &d);
	assert_false(d.read_only);
	memset(buf, 0x99, sizeof(buf));
	assert_int_equal(disk_write(&d, 5 * BLK, BLK, buf, true), 0);
	assert_int_equal(disk_write_zeroes(&d, 2 * BLK, BLK, false), 0);
	assert_int_equal(disk_discard(&d, 9 * BLK, BLK), 0);
	assert_int_equal(disk_flush(&d), 0);
	assert_int_equal(disk_read(&d, 2 * BLK, BLK, buf), 0);
	for (unsigned i = 0; i < BLK; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(disk_block_status(&d, DISK_CTX_DIRTY, 0, 10 * BLK, collect, &sp), 0);
	assert_int_equal(sp.n, 6);
	expect_span(&sp, 1, 2 * BLK, 3 * BLK, DISK_STATUS_DIRTY);
	expect_span(&sp, 3, 5 * BLK, 6 * BLK, DISK_STATUS_DIRTY);
	expect_span(&sp, 5, 9 * BLK, 10 * BLK, DISK_STATUS_DIRTY);
	sp.n = 0;
	assert_int_equal(disk_block_status(&d, DISK_CTX_ALLOCATION, 0, 6 * BLK, collect, &sp), 0);
	expect_span(&sp, 0, 0, 5 * BLK, HOLE_ZERO); /* block 2's metadata zeroed */
	expect_span(&sp, 1, 5 * BLK, 6 * BLK, 0);
	assert_int_equal(disk_snapshot(&d, delta, &dirty, &zero, why, sizeof(why)), 0);
	assert_int_equal(dirty, 1);
	assert_int_equal(zero, 2);
	assert_true(path_exists(delta));
	disk_close(&d);
	rm_rf(dir);
}

/*
 * disk_read_sparse(): the generic way (a raw disk has no read_sparse: its block status,
 * each data extent read as it comes) and the lazy image's own (one walk of the engine).
 * Holes are told and left as they were in buf; cb > 0 has the rest read whole; cb < 0
 * fails the read; a read that fails stops after the extents before it.
 */
static void sparse_check(const struct disk *d, const uint8_t *img)
{
	uint8_t *buf = malloc(SIZE);
	struct spans sp = { .n = 0 };

	assert_non_null(buf);
	memset(buf, 0xee, SIZE);
	assert_int_equal(disk_read_sparse(d, 0, (uint32_t)SIZE, buf, collect, &sp), 0);
	assert_int_equal(sp.n, 5);
	expect_span(&sp, 0, 0, 4 * BLK, HOLE_ZERO);
	expect_span(&sp, 1, 4 * BLK, 8 * BLK, 0);
	expect_span(&sp, 2, 8 * BLK, 20 * BLK, HOLE_ZERO);
	expect_span(&sp, 3, 20 * BLK, 21 * BLK, 0);
	expect_span(&sp, 4, 21 * BLK, SIZE, HOLE_ZERO);
	for (int i = 0; i < sp.n; i++)
		for (uint64_t b = sp.s[i].off; b < sp.s[i].off + sp.s[i].len; b++)
			assert_int_equal(buf[b], sp.s[i].flags ? 0xee : img[b]);
	/* told to stop after the first data extent: the rest read whole, zeros written */
	memset(buf, 0xee, SIZE);
	sp = (struct spans){ .stop_after = 2 };
	assert_int_equal(disk_read_sparse(d, 512, (uint32_t)SIZE - 1024, buf, collect, &sp), 0);
	assert_int_equal(sp.n, 2);
	expect_span(&sp, 1, 4 * BLK, 8 * BLK, 0);
	assert_memory_equal(buf + 8 * BLK - 512, img + 8 * BLK, SIZE - 8 * BLK - 512);
	sp = (struct spans){ .fail = -EBADMSG };
	assert_int_equal(disk_read_sparse(d, 0, (uint32_t)SIZE, buf, collect, &sp), -EBADMSG);
	free(buf);
}

/* A layout of f's disk: its data as metadata blocks; lost: a data run of a missing chunk. */
static void image_layout(char layout[PATH_MAX], struct fx *f, bool lost)
{
	uint8_t missing[SHA256_LEN];
	struct layout_writer *w;

	memset(missing, 0x5a, sizeof(missing));
	path_fmt(layout, "%s/l%d", f->dir, lost);
	assert_int_equal(layout_writer_new(layout, NBLK, &w), 0);
	assert_int_equal(layout_add_meta(w, 4, f->img + 4 * BLK, 4), 0);
	assert_int_equal(layout_add_meta(w, 20, f->img + 20 * BLK, 1), 0);
	if (lost)
		assert_int_equal(layout_add_data(w, 30 * BLK, BLK, missing, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
}

static void test_read_sparse(void **state)
{
	char layout[PATH_MAX], store[PATH_MAX];
	struct blkd_engine_opts o = { .layout_path = layout, .store_dir = store };
	struct fx *f = fx_open(true);
	uint8_t buf[3 * BLK];
	struct blkd_engine_stats st;
	struct disk d = f->d, *r = &f->d;
	struct spans sp = { .n = 0 };
	struct blkd_engine *e;
	struct store *s;

	(void)state;
	assert_null(r->ops->read_sparse); /* the generic way */
	sparse_check(r, f->img);
	/* a disk with no allocation context: all of it data, read whole */
	d.status = 0;
	assert_int_equal(disk_read_sparse(&d, BLK, 2 * BLK, buf, collect, &sp), 0);
	assert_int_equal(sp.n, 1);
	expect_span(&sp, 0, BLK, 3 * BLK, 0);

	/* the lazy image: the same disk as metadata blocks */
	path_fmt(store, "%s/store", f->dir);
	assert_int_equal(store_open(store, true, &s), 0);
	store_close(s);
	image_layout(layout, f, false);
	assert_int_equal(blkd_engine_open(&o, &e, NULL, 0), 0);
	disk_engine(e, &d);
	assert_non_null(d.ops->read_sparse);
	sparse_check(&d, f->img);
	blkd_engine_get_stats(e, &st);
	assert_true(st.reads == 3 && st.read_errors == 1 && st.meta_hits == 5 + 5);
	disk_close(&d);
	/* and a data run at block 30 of a chunk the store lost: the extents before it told */
	image_layout(layout, f, true);
	assert_int_equal(blkd_engine_open(&o, &e, NULL, 0), 0);
	disk_engine(e, &d);
	sp = (struct spans){ .n = 0 };
	assert_int_not_equal(disk_read_sparse(&d, 0, 32 * BLK, f->img, collect, &sp), 0);
	assert_int_equal(sp.n, 5);
	expect_span(&sp, 4, 21 * BLK, 30 * BLK, HOLE_ZERO);
	disk_close(&d);
	fx_close(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_open),
		cmocka_unit_test(test_raw_read_write),
		cmocka_unit_test(test_raw_discard_zeroes_status),
		cmocka_unit_test(test_raw_status_tail),
		cmocka_unit_test(test_raw_read_only),
		cmocka_unit_test(test_raw_stats),
		cmocka_unit_test(test_check_and_helpers),
		cmocka_unit_test(test_engine_disk),
		cmocka_unit_test(test_read_sparse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
