/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for blkd/overlay/overlay: states, data, persistence (close, kill -9), refusals,
 * deltas (offline, copy-before-write, a concurrent writer stamping sequence numbers)
 * and applying them.
 */
#include "../helpers.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "../../../blkd/overlay/delta.h"
#include "../../../blkd/overlay/overlay.h"
#include "../../../blkd/overlay/overlay_int.h"
#include "../../../common/fsutil.h"

#define BLK DISK_BLOCK

struct fx {
	char dir[PATH_MAX];
	char ov[PATH_MAX];     /* DIR/ov */
	char state[PATH_MAX];  /* DIR/ov.state */
	uint8_t digest[SHA256_LEN];
	uint8_t other[SHA256_LEN];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	tmpdir_make(f->dir);
	path_fmt(f->ov, "%s/ov", f->dir);
	path_fmt(f->state, "%s/ov.state", f->dir);
	assert_int_equal(sha256_buf("layout A", 8, f->digest), 0);
	assert_int_equal(sha256_buf("layout B", 8, f->other), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	rm_rf(f->dir);
	free(f);
	return 0;
}

static struct overlay *ov_new(struct fx *f, const char *path, uint64_t blocks)
{
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";

	assert_int_equal(overlay_open(path, blocks * BLK, f->digest, true, &ov, why, sizeof(why)), 0);
	assert_non_null(ov);
	return ov;
}

/* A block whose every 64-bit word is v. */
static void fill(uint8_t *b, uint64_t v)
{
	for (size_t i = 0; i < BLK; i += 8)
		memcpy(b + i, &v, 8);
}

/* The value a block was filled with, or ~0 when its words disagree (torn). */
static uint64_t stamp_of(const uint8_t *b)
{
	uint64_t v, w;

	memcpy(&v, b, 8);
	for (size_t i = 8; i < BLK; i += 8) {
		memcpy(&w, b + i, 8);
		if (w != v)
			return ~0ULL;
	}
	return v;
}

static void write_stamp(struct overlay *ov, uint64_t block, uint64_t v)
{
	uint8_t b[BLK];

	fill(b, v);
	assert_int_equal(overlay_write(ov, block, 1, b), 0);
}

static uint64_t read_stamp(struct overlay *ov, uint64_t block)
{
	uint8_t b[BLK];

	assert_int_equal(overlay_read(ov, block, 1, b), 0);
	return stamp_of(b);
}

/* ------------------------------------------------------------------ basics */

static void test_write_read_zero(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_new(f, f->ov, 100);
	struct overlay_stats st;
	uint8_t buf[4 * BLK];
	enum ov_state s;
	struct stat sb;

	assert_int_equal(overlay_blocks(ov), 100);
	assert_int_equal(stat(f->ov, &sb), 0);
	assert_int_equal(sb.st_size, 100 * BLK);
	assert_int_equal(overlay_run(ov, 0, &s), 100);
	assert_int_equal(s, OV_CLEAN);

	for (int i = 0; i < 4; i++)
		fill(buf + i * BLK, 1000 + (uint64_t)i);
	assert_int_equal(overlay_write(ov, 10, 4, buf), 0);
	assert_int_equal(overlay_state(ov, 9), OV_CLEAN);
	assert_int_equal(overlay_state(ov, 10), OV_DIRTY);
	assert_int_equal(overlay_state(ov, 13), OV_DIRTY);
	assert_int_equal(overlay_state(ov, 14), OV_CLEAN);
	assert_int_equal(read_stamp(ov, 12), 1002);
	assert_int_equal(overlay_run(ov, 0, &s), 10);
	assert_int_equal(s, OV_CLEAN);
	assert_int_equal(overlay_run(ov, 11, &s), 3);
	assert_int_equal(s, OV_DIRTY);
	assert_int_equal(overlay_run(ov, 14, &s), 86);

	assert_int_equal(overlay_zero(ov, 12, 5), 0);
	assert_int_equal(overlay_state(ov, 11), OV_DIRTY);
	assert_int_equal(overlay_run(ov, 12, &s), 5);
	assert_int_equal(s, OV_ZERO);
	assert_int_equal(read_stamp(ov, 12), 0); /* punched */
	assert_int_equal(read_stamp(ov, 11), 1001);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.dirty_blocks, 2);
	assert_int_equal(st.zero_blocks, 5);
	assert_int_equal(st.writes, 2);

	/* Rewrite a zeroed block: dirty again. */
	write_stamp(ov, 16, 7);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.dirty_blocks, 3);
	assert_int_equal(st.zero_blocks, 4);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.flushes, 1);

	/* Out of range. */
	assert_int_equal(overlay_write(ov, 99, 2, buf), -EINVAL);
	assert_int_equal(overlay_write(ov, 100, 1, buf), -EINVAL);
	assert_int_equal(overlay_zero(ov, 50, 0), -EINVAL);
	assert_int_equal(overlay_zero(ov, 0, 101), -EINVAL);
	assert_int_equal(overlay_read(ov, 100, 1, buf), -EINVAL);
	overlay_close(ov);
}

/* overlay_run against a plain array, across word boundaries and the padded end. */
static void test_run(void **state)
{
	struct fx *f = *state;
	const uint64_t n = 1000;
	struct overlay *ov = ov_new(f, f->ov, n);
	uint8_t ref[1000] = { 0 }, b[BLK];
	uint64_t seed = 42;

	fill(b, 1);
	for (int k = 0; k < 300; k++) {
		uint64_t s = prng_next(&seed) % n;
		uint64_t len = 1 + prng_next(&seed) % (k % 10 == 0 ? 200 : 5);

		if (len > n - s)
			len = n - s;
		if (prng_next(&seed) % 3 == 0) {
			assert_int_equal(overlay_zero(ov, s, len), 0);
			memset(ref + s, OV_ZERO, len);
		} else {
			for (uint64_t i = 0; i < len; i++)
				assert_int_equal(overlay_write(ov, s + i, 1, b), 0);
			memset(ref + s, OV_DIRTY, len);
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		enum ov_state s;
		uint64_t len = overlay_run(ov, i, &s), want = 1;

		while (i + want < n && ref[i + want] == ref[i])
			want++;
		assert_int_equal(s, ref[i]);
		assert_int_equal(overlay_state(ov, i), ref[i]);
		assert_int_equal(len, want);
	}
	overlay_close(ov);
}

/* What we wrote in one process is there in the next, after close or after kill -9. */
static void check_pattern(struct overlay *ov, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		enum ov_state want = i % 7 == 3 ? OV_ZERO : i % 3 == 0 ? OV_DIRTY : OV_CLEAN;

		assert_int_equal(overlay_state(ov, i), want);
		if (want == OV_DIRTY)
			assert_int_equal(read_stamp(ov, i), 5000 + i);
	}
}

static void write_pattern(struct overlay *ov, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		if (i % 3 == 0)
			write_stamp(ov, i, 5000 + i);
		if (i % 7 == 3)
			assert_int_equal(overlay_zero(ov, i, 1), 0);
	}
}

static void test_reopen(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_new(f, f->ov, 777);
	struct overlay_stats st;
	char why[WHY_MAX] = "";

	write_pattern(ov, 777);
	overlay_close(ov);
	assert_int_equal(overlay_open(f->ov, 777 * BLK, f->digest, false, &ov, why, sizeof(why)), 0);
	check_pattern(ov, 777);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.dirty_blocks, 259 - 37); /* i % 3 == 0, less those zeroed */
	assert_int_equal(st.zero_blocks, 111);
	overlay_close(ov);
	/* Read-only, without knowing the layout. */
	assert_int_equal(overlay_open_existing(f->ov, true, &ov, why, sizeof(why)), 0);
	assert_memory_equal(overlay_layout_digest(ov), f->digest, SHA256_LEN);
	assert_int_equal(overlay_disk_bytes(ov), 777 * BLK);
	check_pattern(ov, 777);
	overlay_close(ov);
}

static void test_read_only(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_new(f, f->ov, 8), *ro = NULL, *ro2 = NULL;
	char why[WHY_MAX] = "";
	uint8_t b[BLK] = { 0 };

	overlay_close(ov);
	assert_int_equal(overlay_open_existing(f->ov, true, &ro, why, sizeof(why)), 0);
	assert_int_equal(overlay_open_existing(f->ov, true, &ro2, why, sizeof(why)), 0); /* shared */
	assert_int_equal(overlay_write(ro, 0, 1, b), -EROFS);
	assert_int_equal(overlay_zero(ro, 0, 1), -EROFS);
	assert_int_equal(overlay_flush(ro), 0);
	/* A writer cannot open it while readers have it, nor readers while a writer has. */
	assert_int_equal(overlay_open(f->ov, 8 * BLK, f->digest, false, &ov, why, sizeof(why)), -EBUSY);
	assert_string_equal(why, "overlay is in use by another process");
	overlay_close(ro);
	overlay_close(ro2);
	ov = ov_new(f, f->ov, 8);
	assert_int_equal(overlay_open_existing(f->ov, true, &ro, why, sizeof(why)), -EBUSY);
	assert_int_equal(overlay_open(f->ov, 8 * BLK, f->digest, false, &ro, why, sizeof(why)), -EBUSY);
	overlay_close(ov);
}

static void test_kill9(void **state)
{
	struct fx *f = *state;
	struct overlay *ov;
	char why[WHY_MAX] = "";
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (overlay_open(f->ov, 500 * BLK, f->digest, true, &ov, why, sizeof(why)))
			_exit(3);
		write_pattern(ov, 500);
		raise(SIGKILL); /* no flush, no close */
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(overlay_open(f->ov, 500 * BLK, f->digest, false, &ov, why, sizeof(why)), 0);
	check_pattern(ov, 500);
	/* And it resumes: more writes, then kill again. */
	overlay_close(ov);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (overlay_open(f->ov, 500 * BLK, f->digest, false, &ov, why, sizeof(why)))
			_exit(3);
		write_stamp(ov, 1, 77);
		overlay_zero(ov, 0, 1);
		raise(SIGKILL);
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(overlay_open(f->ov, 500 * BLK, f->digest, false, &ov, why, sizeof(why)), 0);
	assert_int_equal(overlay_state(ov, 0), OV_ZERO);
	assert_int_equal(overlay_state(ov, 1), OV_DIRTY);
	assert_int_equal(read_stamp(ov, 1), 77);
	overlay_close(ov);
}

/* ------------------------------------------------------------------ refusals */

static void expect_refused(struct fx *f, uint64_t blocks, const uint8_t *digest, int err,
			   const char *want)
{
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";

	assert_int_equal(overlay_open(f->ov, blocks * BLK, digest, true, &ov, why, sizeof(why)), err);
	assert_null(ov);
	if (want) {
		assert_true(why[0]);
		if (!strstr(why, want))
			fail_msg("why '%s' lacks '%s'", why, want);
	}
}

static void patch(const char *path, off_t off, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, p, len, off), (ssize_t)len);
	close(fd);
}

static void copy_file(const char *from, const char *to)
{
	uint8_t *d;
	size_t len;

	assert_int_equal(fs_read_file(from, &d, &len), 0);
	write_file(to, d, len);
	free(d);
}

static void test_refusals(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_new(f, f->ov, 64);
	char saved[PATH_MAX];
	char why[WHY_MAX] = "";
	uint8_t x = 0xff;

	write_stamp(ov, 5, 5);
	overlay_close(ov);
	path_fmt(saved, "%s/saved.state", f->dir);
	copy_file(f->state, saved);

	expect_refused(f, 64, f->other, -EBADMSG, "another layout");
	expect_refused(f, 65, f->digest, -EBADMSG, "another size");
	assert_int_equal(overlay_open(f->ov, 64 * BLK, f->digest, false, &ov, why, sizeof(why)), 0);
	overlay_close(ov);

	assert_int_equal(truncate(f->state, DISK_BLOCK + 8), 0); /* 64 blocks: 16 bytes */
	expect_refused(f, 64, f->digest, -EBADMSG, "truncated state file");
	assert_int_equal(truncate(f->state, 100), 0);
	expect_refused(f, 64, f->digest, -EBADMSG, "truncated state file");
	assert_int_equal(truncate(f->state, 4), 0);
	expect_refused(f, 64, f->digest, -EBADMSG, "truncated state file");

	copy_file(saved, f->state);
	assert_int_equal(truncate(f->state, DISK_BLOCK + 24), 0);
	expect_refused(f, 64, f->digest, -EBADMSG, "trailing garbage");

	copy_file(saved, f->state);
	patch(f->state, 0, "X", 1);
	expect_refused(f, 64, f->digest, -EBADMSG, "bad magic");

	copy_file(saved, f->state);
	patch(f->state, 16, "\1", 1); /* disk_bytes: crc no longer matches */
	expect_refused(f, 64, f->digest, -EBADMSG, "checksum mismatch");

	copy_file(saved, f->state);
	patch(f->state, DISK_BLOCK + 3, &x, 1); /* state 3 */
	expect_refused(f, 64, f->digest, -EBADMSG, "invalid block state");

	/* The data file: missing, or of another size. */
	copy_file(saved, f->state);
	assert_int_equal(truncate(f->ov, 63 * BLK), 0);
	expect_refused(f, 64, f->digest, -EBADMSG, "wrong size");
	assert_int_equal(unlink(f->ov), 0);
	expect_refused(f, 64, f->digest, -EBADMSG, "data file missing");

	/* A file that is not an overlay is never taken over. */
	assert_int_equal(unlink(f->state), 0);
	write_file(f->ov, "hello", 5);
	expect_refused(f, 64, f->digest, -EBADMSG, "without a state file");
	assert_int_equal(overlay_open(f->ov, 64 * BLK, f->digest, false, &ov, why, sizeof(why)), -EBADMSG);
	assert_int_equal(overlay_open_existing(f->ov, true, &ov, why, sizeof(why)), -EBADMSG);
	/* ... but an empty one left by an interrupted creation is. */
	write_file(f->ov, "", 0);
	ov = ov_new(f, f->ov, 64);
	overlay_close(ov);
	/* Nothing there, not creating: -ENOENT. */
	unlink(f->ov);
	unlink(f->state);
	assert_int_equal(overlay_open(f->ov, 64 * BLK, f->digest, false, &ov, why, sizeof(why)), -ENOENT);
	assert_int_equal(overlay_open_existing(f->ov, true, &ov, why, sizeof(why)), -ENOENT);
	/* A disk size that is not whole blocks. */
	assert_int_equal(overlay_open(f->ov, 1000, f->digest, true, &ov, why, sizeof(why)), -EINVAL);
}

/* ------------------------------------------------------------------ deltas */

/* Two overlays hold the same states and the same data in dirty blocks. */
static void assert_same(struct overlay *a, struct overlay *b)
{
	uint8_t ba[BLK], bb[BLK];

	assert_int_equal(overlay_blocks(a), overlay_blocks(b));
	for (uint64_t i = 0; i < overlay_blocks(a); i++) {
		enum ov_state s = overlay_state(a, i);

		assert_int_equal(overlay_state(b, i), s);
		if (s != OV_DIRTY)
			continue;
		assert_int_equal(overlay_read(a, i, 1, ba), 0);
		assert_int_equal(overlay_read(b, i, 1, bb), 0);
		assert_memory_equal(ba, bb, BLK);
	}
}

static struct overlay *open_ro(const char *path)
{
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";

	assert_int_equal(overlay_open_existing(path, true, &ov, why, sizeof(why)), 0);
	return ov;
}

static void apply_ok(struct fx *f, const char *delta, const char *to, uint64_t blocks)
{
	char why[WHY_MAX] = "";
	int ret = overlay_apply_delta(delta, to, f->digest, blocks * BLK, why, sizeof(why));

	if (ret)
		fail_msg("apply %s: %d %s", delta, ret, why[0] ? why : "");
}

static void test_snapshot_apply(void **state)
{
	struct fx *f = *state;
	const uint64_t n = 3000;
	struct overlay *ov = ov_new(f, f->ov, n), *cp;
	char delta[PATH_MAX], copy[PATH_MAX], empty[PATH_MAX];
	struct delta_header h;
	char why[WHY_MAX] = "";
	uint8_t zeros[BLK] = { 0 };
	struct stat sb;
	int fd;

	write_pattern(ov, n);
	assert_int_equal(overlay_write(ov, 2000, 1, zeros), 0); /* dirty, all zero */
	path_fmt(delta, "%s/d1", f->dir);
	path_fmt(copy, "%s/copy", f->dir);
	path_fmt(empty, "%s/empty", f->dir);
	assert_int_equal(overlay_snapshot(ov, delta, why, sizeof(why)), 0);

	/* The header says what the overlay holds; the size is exactly the sections. */
	fd = open(delta, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, &h, sizeof(h)), sizeof(h));
	assert_int_equal(fstat(fd, &sb), 0);
	close(fd);
	assert_memory_equal(h.magic, DELTA_MAGIC, 8);
	assert_memory_equal(h.layout_digest, f->digest, SHA256_LEN);
	assert_int_equal(h.disk_bytes, n * BLK);
	assert_int_equal(h.dirty_blocks, 1000 + 1 - 143);  /* i%3==0, minus those zeroed */
	assert_int_equal(h.zero_blocks, 429);
	assert_int_equal((uint64_t)sb.st_size, DELTA_HDR + h.dirty_blocks * BLK +
					       h.extent_count * sizeof(struct delta_extent) + 32);

	/* Apply: same states and data; onto an existing overlay too. */
	apply_ok(f, delta, copy, n);
	cp = open_ro(copy);
	assert_same(ov, cp);
	overlay_close(cp);
	assert_int_equal(stat(copy, &sb), 0);
	assert_true((uint64_t)sb.st_blocks * 512 <= (h.dirty_blocks + 16) * BLK); /* sparse */
	apply_ok(f, delta, copy, n);

	/* A delta of the copy is byte-identical (the format is deterministic). */
	{
		char d2[PATH_MAX];
		uint8_t *a, *b;
		size_t la, lb;

		path_fmt(d2, "%s/d2", f->dir);
		cp = open_ro(copy);
		assert_int_equal(overlay_snapshot(cp, d2, why, sizeof(why)), 0);
		overlay_close(cp);
		assert_int_equal(fs_read_file(delta, &a, &la), 0);
		assert_int_equal(fs_read_file(d2, &b, &lb), 0);
		assert_int_equal(la, lb);
		assert_memory_equal(a, b, la);
		free(a);
		free(b);
	}

	/* An empty overlay gives an empty delta, which resets an overlay. */
	overlay_close(ov_new(f, empty, n));
	cp = open_ro(empty);
	assert_int_equal(overlay_snapshot(cp, delta, why, sizeof(why)), 0);
	overlay_close(cp);
	apply_ok(f, delta, copy, n);
	cp = open_ro(copy);
	assert_int_equal(overlay_run(cp, 0, NULL), n);
	assert_int_equal(overlay_state(cp, 0), OV_CLEAN);
	overlay_close(cp);

	/* An overlay in use is not replaced. */
	assert_int_equal(overlay_apply_delta(delta, f->ov, f->digest, n * BLK, why, sizeof(why)), -EBUSY);
	overlay_close(ov);
}

/* A delta that is damaged anywhere, or for another disk, is refused before anything. */
static void test_delta_refusals(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_new(f, f->ov, 200), *cp;
	char delta[PATH_MAX], bad[PATH_MAX], copy[PATH_MAX];
	char why[WHY_MAX] = "";
	struct stat sb;
	uint8_t b = 0x5a;
	struct {
		off_t off;       /* < 0: from the end */
		long trunc;      /* != 0: truncate to this size (< 0: from the end) */
		const char *want;
	} cases[] = {
		{ 0, 0, "bad magic" },
		{ 20, 0, "checksum mismatch" },                     /* header field */
		{ 200, 0, "padding not zero" },
		{ DELTA_HDR + 10, 0, "checksum mismatch (file corrupt)" }, /* data */
		{ -40, 0, "bad extent" },                           /* extents */
		{ -1, 0, "checksum mismatch (file corrupt)" },     /* trailer */
		{ 0, -1, "truncated delta" },
		{ 0, 100, "truncated delta" },
		{ 0, 4, "truncated delta" },
		{ 0, 1, "trailing garbage" }, /* grown by one below */
	};

	write_pattern(ov, 200);
	path_fmt(delta, "%s/delta", f->dir);
	path_fmt(bad, "%s/bad", f->dir);
	path_fmt(copy, "%s/copy", f->dir);
	assert_int_equal(overlay_snapshot(ov, delta, why, sizeof(why)), 0);
	overlay_close(ov);
	assert_int_equal(stat(delta, &sb), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		copy_file(delta, bad);
		if (!strcmp(cases[i].want, "trailing garbage"))
			assert_int_equal(truncate(bad, sb.st_size + 1), 0);
		else if (cases[i].trunc)
			assert_int_equal(truncate(bad, cases[i].trunc < 0 ? sb.st_size + cases[i].trunc
									  : cases[i].trunc), 0);
		else
			patch(bad, cases[i].off < 0 ? sb.st_size + cases[i].off : cases[i].off, &b, 1);
		why[0] = '\0';
		assert_int_equal(overlay_apply_delta(bad, copy, f->digest, 200 * BLK, why, sizeof(why)), -EBADMSG);
		assert_true(why[0]);
		if (!strstr(why, cases[i].want))
			fail_msg("case %zu: why '%s' lacks '%s'", i, why, cases[i].want);
		assert_false(path_exists(copy));
	}
	why[0] = '\0';
	assert_int_equal(overlay_apply_delta(delta, copy, f->other, 200 * BLK, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "delta belongs to another layout");
	assert_int_equal(overlay_apply_delta(delta, copy, f->digest, 201 * BLK, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "delta is for a disk of another size");
	assert_false(path_exists(copy));
	/* No stray temporary files. */
	{
		char cmd[PATH_MAX + 64];

		snprintf(cmd, sizeof(cmd), "ls %s | grep -q tmp", f->dir);
		assert_int_not_equal(system(cmd), 0);
	}
	apply_ok(f, delta, copy, 200);
	cp = open_ro(copy);
	check_pattern(cp, 200);
	overlay_close(cp);
}

/*
 * Copy-before-write, deterministically: begin, then overwrite and zero blocks that were
 * dirty, write clean ones, then end. The delta is the overlay as of begin.
 */
static void test_snapshot_cow(void **state)
{
	struct fx *f = *state;
	const uint64_t n = 1000;
	struct overlay *ov = ov_new(f, f->ov, n), *cp, *before;
	char delta[PATH_MAX], copy[PATH_MAX], ref[PATH_MAX], refd[PATH_MAX];
	struct overlay_snapshot *s, *s2;
	struct overlay_stats st;
	char why[WHY_MAX] = "";

	write_pattern(ov, n);
	path_fmt(delta, "%s/delta", f->dir);
	path_fmt(copy, "%s/copy", f->dir);
	path_fmt(ref, "%s/ref", f->dir);
	path_fmt(refd, "%s/refd", f->dir);
	/* The reference: the same overlay snapshotted with nothing running. */
	assert_int_equal(overlay_snapshot(ov, refd, why, sizeof(why)), 0);
	apply_ok(f, refd, ref, n);

	assert_int_equal(overlay_snapshot_begin(ov, delta, &s, why, sizeof(why)), 0);
	assert_int_equal(overlay_snapshot_begin(ov, refd, &s2, why, sizeof(why)), -EBUSY);
	for (uint64_t i = 0; i < n; i += 2)
		write_stamp(ov, i, 9000000 + i);            /* dirty, clean and zeroed ones */
	assert_int_equal(overlay_zero(ov, 1, 300), 0);      /* a long range over all kinds */
	for (uint64_t i = 0; i < n; i += 5)
		write_stamp(ov, i, 8000000 + i);            /* twice in the same snapshot */
	assert_int_equal(overlay_snapshot_end(s, why, sizeof(why)), 0);
	overlay_get_stats(ov, &st);
	assert_true(st.snapshot_copies > 0);

	apply_ok(f, delta, copy, n);
	cp = open_ro(copy);
	before = open_ro(ref);
	assert_same(before, cp);
	check_pattern(cp, n);
	overlay_close(cp);
	overlay_close(before);
	/* The overlay itself has the new writes. */
	assert_int_equal(read_stamp(ov, 995), 8000995);
	assert_int_equal(overlay_state(ov, 3), OV_ZERO);
	overlay_close(ov);
}

/*
 * Writer threads each apply a fixed sequence of operations to their own range of blocks
 * (op i of thread t: write blocks stamped (t, i), or zero them; 1 to 8 blocks) while
 * snapshots are taken. For each thread, the delta must be its range after exactly m of
 * its operations for some m with done <= m <= begun, where done is the last operation
 * it had completed when overlay_snapshot was called and begun the last one it had
 * started when it returned: every write completed before, none started after.
 */
#define SEQ_BLOCKS 8192u
#define SEQ_MAX_OPS (1u << 20)
#define SEQ_MAX_THREADS 4

struct seq_op {
	uint32_t block;
	uint8_t len;
	bool zero;
};

struct seq {
	struct overlay *ov;
	uint64_t t, first, count;   /* thread t owns blocks [first, first + count) */
	struct seq_op *ops;         /* ops[1 .. SEQ_MAX_OPS - 1] */
	_Atomic uint64_t begun, done;
	atomic_bool *stop;
};

#define SEQ_NONE 0
#define SEQ_ZERO UINT64_MAX

static uint64_t seq_stamp(const struct seq *q, uint64_t i)
{
	return q->t << 48 | i;
}

static void *seq_writer(void *arg)
{
	struct seq *q = arg;
	uint8_t b[8 * BLK];

	for (uint64_t i = 1; i < SEQ_MAX_OPS && !atomic_load(q->stop); i++) {
		const struct seq_op *op = &q->ops[i];
		int ret;

		atomic_store(&q->begun, i);
		if (op->zero) {
			ret = overlay_zero(q->ov, op->block, op->len);
		} else {
			for (int k = 0; k < op->len; k++)
				fill(b + k * BLK, seq_stamp(q, i));
			ret = overlay_write(q->ov, op->block, op->len, b);
		}
		if (ret) { /* cmocka's asserts belong to the test's thread */
			fprintf(stderr, "writer: op %llu: %s\n", (unsigned long long)i, strerror(-ret));
			abort();
		}
		atomic_store(&q->done, i);
	}
	return NULL;
}

static void seq_plan(struct seq *q, uint64_t seed)
{
	q->ops = calloc(SEQ_MAX_OPS, sizeof(*q->ops));
	assert_non_null(q->ops);
	/* First every block once (so the delta is large), then random runs. */
	for (uint64_t i = 1; i < SEQ_MAX_OPS; i++) {
		struct seq_op *op = &q->ops[i];

		if (i <= q->count) {
			*op = (struct seq_op){ .block = (uint32_t)(q->first + i - 1), .len = 1 };
			continue;
		}
		op->len = (uint8_t)(1 + (prng_next(&seed) % 4 == 0 ? prng_next(&seed) % 8 : 0));
		op->block = (uint32_t)(q->first + prng_next(&seed) % (q->count - op->len + 1));
		op->zero = prng_next(&seed) % 16 == 0;
	}
}

/* The observed code of every block of an applied delta: stamp, SEQ_ZERO or SEQ_NONE. */
static void seq_observe(struct overlay *cp, uint64_t *obs)
{
	for (uint64_t i = 0; i < SEQ_BLOCKS; i++) {
		switch (overlay_state(cp, i)) {
		case OV_CLEAN: obs[i] = SEQ_NONE; break;
		case OV_ZERO: obs[i] = SEQ_ZERO; break;
		default: obs[i] = read_stamp(cp, i); assert_int_not_equal(obs[i], ~0ULL); break;
		}
	}
}

static uint64_t seq_code(const struct seq *q, uint64_t op)
{
	return op == 0 ? SEQ_NONE : q->ops[op].zero ? SEQ_ZERO : seq_stamp(q, op);
}

/* Some m in [lo, hi] after which q's range is obs; -1 if none. */
static int64_t seq_match(const struct seq *q, const uint64_t *obs, uint64_t lo, uint64_t hi)
{
	uint64_t *last = calloc(SEQ_BLOCKS, sizeof(uint64_t)), bad = 0;
	int64_t found = -1;

	assert_non_null(last);
	for (uint64_t i = 1; i <= lo; i++)
		for (uint64_t k = 0; k < q->ops[i].len; k++)
			last[q->ops[i].block + k] = i;
	for (uint64_t b = q->first; b < q->first + q->count; b++)
		bad += seq_code(q, last[b]) != obs[b];
	for (uint64_t m = lo;; m++) {
		const struct seq_op *op = &q->ops[m + 1];

		if (!bad) {
			found = (int64_t)m;
			break;
		}
		if (m == hi)
			break;
		for (uint64_t b = op->block; b < op->block + op->len; b++) {
			bad -= seq_code(q, last[b]) != obs[b];
			last[b] = m + 1;
			bad += seq_code(q, last[b]) != obs[b];
		}
	}
	free(last);
	return found;
}

static void snapshot_concurrent(struct fx *f, unsigned int nthreads)
{
	struct seq q[SEQ_MAX_THREADS] = { 0 };
	pthread_t t[SEQ_MAX_THREADS];
	uint64_t *obs = calloc(SEQ_BLOCKS, sizeof(uint64_t));
	uint64_t lo[SEQ_MAX_THREADS], hi[SEQ_MAX_THREADS];
	struct overlay *ov = ov_new(f, f->ov, SEQ_BLOCKS);
	atomic_bool stop = false;
	struct overlay_stats st;

	assert_non_null(obs);
	for (unsigned int i = 0; i < nthreads; i++) {
		q[i].ov = ov;
		q[i].t = i;
		q[i].count = SEQ_BLOCKS / nthreads;
		q[i].first = i * q[i].count;
		q[i].stop = &stop;
		seq_plan(&q[i], 7 + i);
	}
	for (unsigned int i = 0; i < nthreads; i++)
		assert_int_equal(pthread_create(&t[i], NULL, seq_writer, &q[i]), 0);
	for (int round = 0; round < 4; round++) {
		char delta[PATH_MAX], copy[PATH_MAX];
		char why[WHY_MAX] = "";
		struct overlay *cp;

		for (unsigned int i = 0; i < nthreads; i++)
			while (atomic_load(&q[i].done) < q[i].count + 1000u * (unsigned)(round + 1) &&
			       atomic_load(&q[i].done) < SEQ_MAX_OPS - 1)
				usleep(1000);
		path_fmt(delta, "%s/delta%d", f->dir, round);
		path_fmt(copy, "%s/copy%d", f->dir, round);
		for (unsigned int i = 0; i < nthreads; i++)
			lo[i] = atomic_load(&q[i].done);
		assert_int_equal(overlay_snapshot(ov, delta, why, sizeof(why)), 0);
		for (unsigned int i = 0; i < nthreads; i++)
			hi[i] = atomic_load(&q[i].begun);
		apply_ok(f, delta, copy, SEQ_BLOCKS);
		cp = open_ro(copy);
		seq_observe(cp, obs);
		overlay_close(cp);
		for (unsigned int i = 0; i < nthreads; i++) {
			int64_t m = seq_match(&q[i], obs, lo[i], hi[i]);

			if (m < 0)
				fail_msg("round %d, writer %u: the delta is no state between its op %llu"
					 " and op %llu", round, i, (unsigned long long)lo[i],
					 (unsigned long long)hi[i]);
			if (i == 0)
				print_message("round %d: writer 0 ran ops %llu..%llu during the "
					      "snapshot; the delta is as after op %lld\n", round,
					      (unsigned long long)lo[i], (unsigned long long)hi[i],
					      (long long)m);
		}
		unlink(delta);
		unlink(copy);
	}
	atomic_store(&stop, true);
	for (unsigned int i = 0; i < nthreads; i++) {
		pthread_join(t[i], NULL);
		free(q[i].ops);
	}
	overlay_get_stats(ov, &st);
	print_message("writers copied %llu blocks into running snapshots first\n",
		      (unsigned long long)st.snapshot_copies);
	overlay_close(ov);
	free(obs);
}

static void test_snapshot_concurrent(void **state)
{
	snapshot_concurrent(*state, 1);
}

static void test_snapshot_concurrent4(void **state)
{
	snapshot_concurrent(*state, 4);
}

/*
 * Running out of room, said once an episode: the first ENOSPC/EDQUOT starts one, later
 * failures only count, a success that took new room ends it with the count; rewrites of
 * dirty blocks, zeroes and other errors change nothing.
 */
static void test_room_episodes(void **state)
{
	struct ov_room r = { 0 };
	uint64_t failed = 99;

	(void)state;
	assert_int_equal(ov_room_update(&r, 0, true, &failed), OV_ROOM_SAME);
	assert_int_equal(ov_room_update(&r, -EIO, false, &failed), OV_ROOM_SAME);
	assert_false(r.full);
	assert_int_equal(ov_room_update(&r, -ENOSPC, false, &failed), OV_ROOM_FULL);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(ov_room_update(&r, -ENOSPC, false, &failed), OV_ROOM_SAME);
	assert_int_equal(ov_room_update(&r, -EDQUOT, false, &failed), OV_ROOM_SAME);
	assert_int_equal(ov_room_update(&r, -EIO, false, &failed), OV_ROOM_SAME);
	assert_int_equal(ov_room_update(&r, 0, false, &failed), OV_ROOM_SAME);
	assert_int_equal(failed, 99);
	assert_true(r.full);
	assert_int_equal(ov_room_update(&r, 0, true, &failed), OV_ROOM_BACK);
	assert_int_equal(failed, 1002);
	assert_false(r.full);
	assert_int_equal(ov_room_update(&r, 0, true, &failed), OV_ROOM_SAME);
	/* the next episode counts from zero; EDQUOT starts one as ENOSPC does */
	assert_int_equal(ov_room_update(&r, -EDQUOT, false, &failed), OV_ROOM_FULL);
	assert_int_equal(ov_room_update(&r, 0, true, &failed), OV_ROOM_BACK);
	assert_int_equal(failed, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_read_zero, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill9, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_apply, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delta_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_cow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_concurrent4, setup, teardown),
		cmocka_unit_test(test_room_episodes),
	};

	return cmocka_run_group_tests_name("overlay", tests, NULL, NULL);
}
