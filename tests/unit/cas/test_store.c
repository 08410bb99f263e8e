/* SPDX-License-Identifier: MIT */
/* Unit tests for cas/store, cas/chunk and cas/verify. */
#include "../helpers.h"

#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>

#include <zstd.h>

#include "../../../cas/chunk.h"
#include "../../../cas/plain.h"
#include "../../../cas/store.h"
#include "../../../cas/verify.h"
#include "../../../common/fsutil.h"
#include "../../../common/sha256.h"

struct fixture {
	char dir[PATH_MAX];   /* temporary parent */
	char store[PATH_MAX]; /* DIR/store */
	struct store *s;
	struct chunk_codec *codec;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	tmpdir_make(f->dir);
	path_fmt(f->store, "%s/store", f->dir);
	f->codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	*state = f;
	return f->codec ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	store_close(f->s);
	chunk_codec_free(f->codec);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/* A chunk: raw content, its digest and its zstd frame. */
struct chunk {
	uint8_t *raw;
	size_t raw_len;
	uint8_t digest[SHA256_LEN];
	uint8_t *frame;
	size_t frame_len;
};

static void chunk_make(struct fixture *f, struct chunk *c, uint64_t seed, size_t len,
		       bool compressible)
{
	size_t cap = chunk_compress_bound(len);

	c->raw = malloc(len ? len : 1);
	c->frame = malloc(cap);
	assert_non_null(c->raw);
	assert_non_null(c->frame);
	c->raw_len = len;
	content_make(c->raw, len, seed, compressible, c->digest);
	assert_int_equal(chunk_compress(f->codec, c->raw, len, c->frame, cap, &c->frame_len), 0);
}

static void chunk_release(struct chunk *c)
{
	free(c->raw);
	free(c->frame);
	memset(c, 0, sizeof(*c));
}

static void open_new(struct fixture *f)
{
	assert_int_equal(store_open(f->store, true, &f->s), 0);
	assert_non_null(f->s);
}

/* ------------------------------------------------------------------ open */

static void test_open_missing(void **state)
{
	struct fixture *f = *state;
	struct store *s = (struct store *)0x1;
	char p[PATH_MAX];

	assert_int_equal(store_open(f->store, false, &s), -ENOENT);
	assert_false(path_exists(f->store)); /* without create nothing is made */
	/* a directory that is not a store */
	assert_int_equal(mkdir(f->store, 0755), 0);
	assert_int_equal(store_open(f->store, false, &s), -ENOENT);
	/* a file in the way */
	path_fmt(p, "%s/file", f->dir);
	write_file(p, "x", 1);
	assert_int_equal(store_open(p, false, &s), -ENOTDIR);
	assert_int_equal(store_open(p, true, &s), -ENOTDIR);
	assert_ptr_equal(s, (struct store *)0x1);
}

static void test_open_create(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct stat st;
	struct store *ro;

	path_fmt(f->store, "%s/deep/er/store", f->dir);
	open_new(f);
	assert_string_equal(store_dir(f->s), f->store);
	for (int i = 0; i < 256; i++) {
		path_fmt(p, "%s/chunks/%02x", f->store, i);
		assert_int_equal(stat(p, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
	}
	path_fmt(p, "%s/tmp", f->store);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	/* opening again, with and without create, works */
	store_close(f->s);
	f->s = NULL;
	open_new(f);
	assert_int_equal(store_open(f->store, false, &ro), 0);
	/* read-only (no create): puts are refused */
	{
		struct chunk c;

		chunk_make(f, &c, 1, 100, false);
		assert_int_equal(store_put(ro, c.digest, c.frame, c.frame_len), -EROFS);
		assert_int_equal(store_has(ro, c.digest), 0);
		chunk_release(&c);
	}
	store_close(ro);
	store_close(NULL);
}

/* ------------------------------------------------------------------ put / commit / read */

static void test_put_commit_read(void **state)
{
	struct fixture *f = *state;
	char path[PATH_MAX], want[PATH_MAX], hex[SHA256_HEX_LEN + 1], tmp[PATH_MAX];
	uint8_t *got, *file;
	size_t got_len, file_len;
	struct chunk c;
	DIR *d;
	struct dirent *de;
	int n_tmp = 0;

	open_new(f);
	chunk_make(f, &c, 2, 70000, true);
	sha256_to_hex(c.digest, hex);
	store_chunk_path(f->s, c.digest, path, sizeof(path));
	path_fmt(want, "%s/chunks/%.2s/%s", f->store, hex, hex);
	assert_string_equal(path, want);

	assert_int_equal(store_has(f->s, c.digest), 0);
	assert_int_equal(store_read(f->s, c.digest, &got, &got_len), -ENOENT);
	assert_int_equal(store_put(f->s, c.digest, c.frame, c.frame_len), 0);
	/* staged: not visible yet, but present in tmp/ */
	assert_int_equal(store_has(f->s, c.digest), 0);
	assert_false(path_exists(path));
	path_fmt(tmp, "%s/tmp", f->store);
	d = opendir(tmp);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n_tmp++;
	closedir(d);
	assert_int_equal(n_tmp, 1);

	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(store_has(f->s, c.digest), 1);
	assert_true(path_exists(path));
	assert_int_equal(fs_read_file(path, &file, &file_len), 0);
	assert_int_equal(file_len, c.frame_len);
	assert_memory_equal(file, c.frame, c.frame_len);
	free(file);
	/* tmp/ is empty again */
	n_tmp = 0;
	d = opendir(tmp);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n_tmp++;
	closedir(d);
	assert_int_equal(n_tmp, 0);

	assert_int_equal(store_read(f->s, c.digest, &got, &got_len), 0);
	assert_int_equal(got_len, c.frame_len);
	assert_memory_equal(got, c.frame, c.frame_len);
	{
		uint8_t *raw = malloc(c.raw_len);
		size_t n = 0;

		assert_int_equal(chunk_decompress(f->codec, got, got_len, raw, c.raw_len, &n), 0);
		assert_int_equal(n, c.raw_len);
		assert_memory_equal(raw, c.raw, c.raw_len);
		free(raw);
	}
	free(got);
	/* an empty commit is fine */
	assert_int_equal(store_commit(f->s), 0);
	/* a directory under a chunk's name is not a chunk */
	{
		struct chunk c2;

		chunk_make(f, &c2, 3, 10, false);
		store_chunk_path(f->s, c2.digest, path, sizeof(path));
		assert_int_equal(mkdir(path, 0755), 0);
		assert_int_equal(store_has(f->s, c2.digest), 0);
		chunk_release(&c2);
	}
	chunk_release(&c);
}

static void test_dedup(void **state)
{
	struct fixture *f = *state;
	struct store_stats st;
	struct chunk c;

	open_new(f);
	chunk_make(f, &c, 4, 5000, true);
	/* the same digest twice in one batch, then again in a later batch */
	assert_int_equal(store_put(f->s, c.digest, c.frame, c.frame_len), 0);
	assert_int_equal(store_put(f->s, c.digest, c.frame, c.frame_len), 0);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(store_has(f->s, c.digest), 1);
	assert_int_equal(store_put(f->s, c.digest, c.frame, c.frame_len), 0);
	assert_int_equal(store_commit(f->s), 0);
	assert_int_equal(store_stats(f->s, &st), 0);
	assert_int_equal(st.chunks, 1);
	assert_int_equal(st.raw_bytes, 5000);
	assert_int_equal(st.stored_bytes, c.frame_len);
	{
		char tmp[PATH_MAX];
		DIR *d;
		struct dirent *de;

		path_fmt(tmp, "%s/tmp", f->store);
		d = opendir(tmp);
		while ((de = readdir(d)))
			assert_true(de->d_name[0] == '.');
		closedir(d);
	}
	chunk_release(&c);
}

static void test_close_commits(void **state)
{
	struct fixture *f = *state;
	struct chunk c;

	open_new(f);
	chunk_make(f, &c, 5, 1000, false);
	assert_int_equal(store_put(f->s, c.digest, c.frame, c.frame_len), 0);
	store_close(f->s);
	f->s = NULL;
	assert_int_equal(store_open(f->store, false, &f->s), 0);
	assert_int_equal(store_has(f->s, c.digest), 1);
	chunk_release(&c);
}

/* A batch commits by itself once it holds 4096 chunks (docs/formats.md). */
static void test_auto_commit(void **state)
{
	struct fixture *f = *state;
	uint8_t first[SHA256_LEN], last[SHA256_LEN];
	struct store_stats st;

	open_new(f);
	for (uint32_t i = 0; i < 4096; i++) {
		uint8_t raw[8], frame[64], d[SHA256_LEN];
		size_t n;

		memcpy(raw, &i, 4);
		memcpy(raw + 4, "auto", 4);
		assert_int_equal(sha256_buf(raw, sizeof(raw), d), 0);
		assert_int_equal(chunk_compress(f->codec, raw, sizeof(raw), frame, sizeof(frame),
						&n), 0);
		assert_int_equal(store_put(f->s, d, frame, n), 0);
		if (i == 0)
			memcpy(first, d, SHA256_LEN);
		memcpy(last, d, SHA256_LEN);
	}
	assert_int_equal(store_has(f->s, first), 1);
	assert_int_equal(store_has(f->s, last), 1);
	assert_int_equal(store_stats(f->s, &st), 0);
	assert_int_equal(st.chunks, 4096);
	assert_int_equal(st.raw_bytes, 4096 * 8);
	assert_int_equal(st.bad_headers, 0);
}

/* ------------------------------------------------------------------ stats / foreach */

struct seen {
	uint8_t d[16][SHA256_LEN];
	char paths[16][PATH_MAX];
	int n;
	int stop_after;
};

static int collect(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct seen *s = arg;

	if (s->n < 16) {
		memcpy(s->d[s->n], d, SHA256_LEN);
		snprintf(s->paths[s->n], PATH_MAX, "%s", path);
	}
	s->n++;
	return s->stop_after && s->n >= s->stop_after ? 1234 : 0;
}

static int seen_has(const struct seen *s, const uint8_t d[SHA256_LEN])
{
	int n = 0;

	for (int i = 0; i < s->n && i < 16; i++)
		if (!memcmp(s->d[i], d, SHA256_LEN))
			n++;
	return n;
}

static void test_stats_and_foreach(void **state)
{
	struct fixture *f = *state;
	struct chunk c[3];
	struct store_stats st;
	struct seen seen;
	uint64_t raw = 0, stored = 0;
	char p[PATH_MAX], hex[SHA256_HEX_LEN + 1], hex2[SHA256_HEX_LEN + 1];

	open_new(f);
	assert_int_equal(store_stats(f->s, &st), 0);
	assert_int_equal(st.chunks, 0);
	assert_int_equal(st.raw_bytes, 0);
	assert_int_equal(st.stored_bytes, 0);
	for (int i = 0; i < 3; i++) {
		chunk_make(f, &c[i], 10 + (uint64_t)i, 1000u * (i + 1) + 7, i != 1);
		assert_int_equal(store_put(f->s, c[i].digest, c[i].frame, c[i].frame_len), 0);
		raw += c[i].raw_len;
		stored += c[i].frame_len;
	}
	assert_int_equal(store_commit(f->s), 0);

	/* names that are not chunks, everywhere they could be */
	sha256_to_hex(c[0].digest, hex);
	sha256_to_hex(c[1].digest, hex2);
	path_fmt(p, "%s/chunks/README", f->store);
	write_file(p, "x", 1);
	path_fmt(p, "%s/chunks/zz", f->store);
	assert_int_equal(mkdir(p, 0755), 0);
	path_fmt(p, "%s/chunks/zz/%s", f->store, hex);
	write_file(p, c[0].frame, c[0].frame_len);
	path_fmt(p, "%s/chunks/%.2s/%s.tmp", f->store, hex, hex);  /* suffix */
	write_file(p, c[0].frame, c[0].frame_len);
	path_fmt(p, "%s/chunks/%.2s/%.63s", f->store, hex, hex);   /* 63 digits */
	write_file(p, c[0].frame, c[0].frame_len);
	path_fmt(p, "%s/chunks/%.2s/.%s", f->store, hex, hex);     /* hidden */
	write_file(p, c[0].frame, c[0].frame_len);
	path_fmt(p, "%s/chunks/%.2s/notachunk", f->store, hex);
	write_file(p, "junk", 4);
	/* a valid chunk name in the wrong fan-out directory */
	path_fmt(p, "%s/chunks/%.2s/%s", f->store, hex, hex2);
	if (memcmp(hex, hex2, 2))
		write_file(p, c[1].frame, c[1].frame_len);
	/* 'g' instead of a digit */
	{
		char g[SHA256_HEX_LEN + 1];

		memcpy(g, hex, sizeof(g));
		g[10] = 'g';
		path_fmt(p, "%s/chunks/%.2s/%s", f->store, hex, g);
		write_file(p, c[0].frame, c[0].frame_len);
	}
	path_fmt(p, "%s/tmp/%s", f->store, hex);                   /* tmp is not scanned */
	write_file(p, "junk", 4);

	memset(&seen, 0, sizeof(seen));
	assert_int_equal(store_foreach(f->s, collect, &seen), 0);
	assert_int_equal(seen.n, 3);
	for (int i = 0; i < 3; i++) {
		char want[PATH_MAX];

		assert_int_equal(seen_has(&seen, c[i].digest), 1);
		store_chunk_path(f->s, c[i].digest, want, sizeof(want));
		for (int k = 0; k < 3; k++)
			if (!memcmp(seen.d[k], c[i].digest, SHA256_LEN))
				assert_string_equal(seen.paths[k], want);
	}
	assert_int_equal(store_stats(f->s, &st), 0);
	assert_int_equal(st.chunks, 3);
	assert_int_equal(st.raw_bytes, raw);
	assert_int_equal(st.stored_bytes, stored);
	assert_int_equal(st.bad_headers, 0);

	/* a non-zero callback result stops the walk and is returned */
	memset(&seen, 0, sizeof(seen));
	seen.stop_after = 2;
	assert_int_equal(store_foreach(f->s, collect, &seen), 1234);
	assert_int_equal(seen.n, 2);

	/* a chunk-named file that is not zstd counts as a chunk with a bad header */
	{
		uint8_t d[SHA256_LEN];

		memset(d, 0xab, sizeof(d));
		sha256_to_hex(d, hex);
		path_fmt(p, "%s/chunks/ab/%s", f->store, hex);
		write_file(p, "not zstd at all", 15);
		assert_int_equal(store_stats(f->s, &st), 0);
		assert_int_equal(st.chunks, 4);
		assert_int_equal(st.bad_headers, 1);
		assert_int_equal(st.raw_bytes, raw);
		assert_int_equal(st.stored_bytes, stored + 15);
	}
	for (int i = 0; i < 3; i++)
		chunk_release(&c[i]);
}

/* ------------------------------------------------------------------ verify */

struct reports {
	char hex[8][SHA256_HEX_LEN + 1];
	char why[8][128];
	int n;
};

static void on_report(void *arg, const char *hex, const char *why, bool plain)
{
	struct reports *r = arg;

	if (r->n < 8) {
		snprintf(r->hex[r->n], sizeof(r->hex[0]), "%s", hex);
		snprintf(r->why[r->n], sizeof(r->why[0]), "%s%s", plain ? "plain copy: " : "",
			 why[0] ? why : "(null)");
	}
	r->n++;
}

static const char *reported(const struct reports *r, const uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	for (int i = 0; i < r->n && i < 8; i++)
		if (!strcmp(r->hex[i], hex))
			return r->why[i];
	return NULL;
}

static void test_verify(void **state)
{
	enum { GOOD, FLIP, RENAMED, TRUNC, NOTZSTD, EMPTY, N };
	struct fixture *f = *state;
	struct chunk c[N];
	struct verify_result res;
	struct reports rep;
	char p[PATH_MAX], q[PATH_MAX];
	uint8_t wrong[SHA256_LEN];
	char why[WHY_MAX] = "";

	open_new(f);
	for (int i = 0; i < N; i++) {
		chunk_make(f, &c[i], 100 + (uint64_t)i, 3000, false);
		assert_int_equal(store_put(f->s, c[i].digest, c[i].frame, c[i].frame_len), 0);
	}
	assert_int_equal(store_commit(f->s), 0);
	memset(&rep, 0, sizeof(rep));
	assert_int_equal(store_verify(f->s, on_report, &rep, NULL, &res), 0);
	assert_int_equal(res.checked, N);
	assert_int_equal(res.ok, N);
	assert_int_equal(res.corrupt, 0);
	assert_int_equal(rep.n, 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(store_verify_one(f->s, c[i].digest, why, sizeof(why)), 0);

	/* one flipped byte in the (incompressible, so stored raw) content */
	store_chunk_path(f->s, c[FLIP].digest, p, sizeof(p));
	c[FLIP].frame[c[FLIP].frame_len / 2] ^= 0x01;
	write_file(p, c[FLIP].frame, c[FLIP].frame_len);
	/* a valid chunk stored under another chunk's name */
	store_chunk_path(f->s, c[RENAMED].digest, p, sizeof(p));
	memcpy(wrong, c[RENAMED].digest, SHA256_LEN);
	wrong[SHA256_LEN - 1] ^= 0xff;
	store_chunk_path(f->s, wrong, q, sizeof(q));
	assert_int_equal(rename(p, q), 0);
	/* truncated */
	store_chunk_path(f->s, c[TRUNC].digest, p, sizeof(p));
	assert_int_equal(truncate(p, (off_t)c[TRUNC].frame_len - 10), 0);
	/* not zstd */
	store_chunk_path(f->s, c[NOTZSTD].digest, p, sizeof(p));
	write_file(p, c[NOTZSTD].raw, c[NOTZSTD].raw_len);
	/* empty file */
	store_chunk_path(f->s, c[EMPTY].digest, p, sizeof(p));
	write_file(p, "", 0);

	memset(&rep, 0, sizeof(rep));
	assert_int_equal(store_verify(f->s, on_report, &rep, NULL, &res), 0);
	assert_int_equal(res.checked, N);
	assert_int_equal(res.ok, 1);
	assert_int_equal(res.corrupt, N - 1);
	assert_int_equal(rep.n, N - 1);
	assert_null(reported(&rep, c[GOOD].digest));
	assert_non_null(reported(&rep, c[FLIP].digest));
	assert_non_null(reported(&rep, wrong));
	assert_non_null(strstr(reported(&rep, wrong), "sha256"));
	assert_non_null(reported(&rep, c[TRUNC].digest));
	assert_non_null(strstr(reported(&rep, c[TRUNC].digest), "zstd"));
	assert_non_null(reported(&rep, c[NOTZSTD].digest));
	assert_non_null(strstr(reported(&rep, c[NOTZSTD].digest), "zstd"));
	assert_non_null(reported(&rep, c[EMPTY].digest));

	assert_int_equal(store_verify_one(f->s, c[GOOD].digest, why, sizeof(why)), 0);
	why[0] = '\0';
	assert_int_equal(store_verify_one(f->s, c[FLIP].digest, why, sizeof(why)), -EBADMSG);
	assert_true(why[0]);
	why[0] = '\0';
	assert_int_equal(store_verify_one(f->s, wrong, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "sha256"));
	why[0] = '\0';
	assert_int_equal(store_verify_one(f->s, c[TRUNC].digest, why, sizeof(why)), -EBADMSG);
	assert_true(why[0]);
	why[0] = '\0';
	assert_int_equal(store_verify_one(f->s, c[NOTZSTD].digest, why, sizeof(why)), -EBADMSG);
	assert_true(why[0]);
	why[0] = '\0';
	assert_int_equal(store_verify_one(f->s, c[EMPTY].digest, why, sizeof(why)), -EBADMSG);
	assert_true(why[0]);
	assert_int_equal(store_verify_one(f->s, c[RENAMED].digest, why, sizeof(why)), -ENOENT);
	for (int i = 0; i < N; i++)
		chunk_release(&c[i]);
}

/*
 * A chunk file or a plain copy that is not a regular file (a FIFO, whose open would block
 * for a writer; a directory; a link) is a corrupt chunk, never opened: store_read says
 * -EBADMSG, verify names it "not a regular file", stats counts it unreadable, the plain
 * tier refuses it. An alarm turns a hang into a failure: on 7515cfa store_read, store_stats
 * and plain_verify_file of a FIFO blocked forever.
 */
static void test_not_regular(void **state)
{
	enum { GOOD, FIFO, DIR, LINK, N };
	struct fixture *f = *state;
	struct chunk c[N];
	struct verify_result res;
	struct store_stats st;
	struct reports rep;
	char p[PATH_MAX], q[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	char why[WHY_MAX] = "";
	uint8_t *frame;
	size_t len;
	int fd;

	open_new(f);
	for (int i = 0; i < N; i++) {
		chunk_make(f, &c[i], 300 + (uint64_t)i, 5000, true);
		assert_int_equal(store_put(f->s, c[i].digest, c[i].frame, c[i].frame_len), 0);
	}
	assert_int_equal(store_commit(f->s), 0);
	store_chunk_path(f->s, c[FIFO].digest, p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkfifo(p, 0644), 0);
	store_chunk_path(f->s, c[DIR].digest, p, sizeof(p));
	assert_int_equal(unlink(p), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	store_chunk_path(f->s, c[LINK].digest, p, sizeof(p)); /* a link to a good frame */
	path_fmt(q, "%s/elsewhere", f->dir);
	assert_int_equal(rename(p, q), 0);
	assert_int_equal(symlink(q, p), 0);
	alarm(20);

	assert_int_equal(store_read(f->s, c[GOOD].digest, &frame, &len), 0);
	free(frame);
	for (int i = FIFO; i < N; i++) {
		assert_int_equal(store_read(f->s, c[i].digest, &frame, &len), -EBADMSG);
		why[0] = '\0';
		assert_int_equal(store_verify_one(f->s, c[i].digest, why, sizeof(why)), -EBADMSG);
		assert_string_equal(why, "not a regular file");
	}
	memset(&rep, 0, sizeof(rep));
	assert_int_equal(store_verify(f->s, on_report, &rep, NULL, &res), 0);
	assert_int_equal(res.ok, 1);
	assert_int_equal(res.corrupt, N - 1);
	for (int i = FIFO; i < N; i++)
		assert_string_equal(reported(&rep, c[i].digest), "not a regular file");
	assert_int_equal(store_stats(f->s, &st), 0);
	assert_int_equal(st.chunks, N);
	assert_int_equal(st.bad_headers, N - 1);
	assert_int_equal(st.stored_bytes, c[GOOD].frame_len);

	/* a plain copy that is a FIFO: a bad copy, not opened */
	sha256_to_hex(c[GOOD].digest, hex);
	path_fmt(p, "%s/plain/%.2s", f->store, hex);
	assert_int_equal(fs_mkdir_p(p, 0755), 0);
	path_fmt(p, "%s/plain/%.2s/%s", f->store, hex, hex);
	assert_int_equal(mkfifo(p, 0644), 0);
	why[0] = '\0';
	assert_int_equal(plain_open(f->s, c[GOOD].digest, 1 << 20, &fd, &len, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "not a regular file");
	why[0] = '\0';
	assert_int_equal(plain_verify_file(p, c[GOOD].digest, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "not a regular file");
	memset(&rep, 0, sizeof(rep));
	assert_int_equal(store_verify(f->s, on_report, &rep, NULL, &res), 0);
	assert_int_equal(res.plain_bad, 1);
	assert_false(path_exists(p)); /* removed, as a bad copy is */
	alarm(0);
	for (int i = 0; i < N; i++)
		chunk_release(&c[i]);
}

/* ------------------------------------------------------------------ chunk format */

static void test_chunk_round_trip(void **state)
{
	struct fixture *f = *state;
	static const size_t sizes[] = { 1, 2, 100, 4096, 65536, 1 << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct chunk c;
		uint8_t *out = malloc(sizes[i]);
		uint64_t declared = 0;
		size_t n = 0;

		chunk_make(f, &c, 200 + i, sizes[i], i % 2);
		assert_int_equal(chunk_content_size(c.frame, c.frame_len, &declared), 0);
		assert_int_equal(declared, sizes[i]);
		/* exactly enough room */
		assert_int_equal(chunk_decompress(f->codec, c.frame, c.frame_len, out, sizes[i],
						  &n), 0);
		assert_int_equal(n, sizes[i]);
		assert_memory_equal(out, c.raw, sizes[i]);
		/* one byte too little room */
		assert_int_equal(chunk_decompress(f->codec, c.frame, c.frame_len, out,
						  sizes[i] - 1, &n), -EBADMSG);
		free(out);
		chunk_release(&c);
	}
	/* compress into too small a buffer fails cleanly */
	{
		uint8_t src[1000], dst[10];
		uint64_t seed = 3;
		size_t n;

		prng_fill(&seed, src, sizeof(src));
		assert_true(chunk_compress(f->codec, src, sizeof(src), dst, sizeof(dst), &n) < 0);
	}
}

static void test_chunk_decompress_rejects(void **state)
{
	struct fixture *f = *state;
	struct chunk a, b;
	uint8_t *two, *out = malloc(1 << 20);
	uint64_t size;
	size_t n = 12345;

	chunk_make(f, &a, 300, 5000, true);
	chunk_make(f, &b, 301, 6000, true);

	/* two concatenated frames, even though both together fit */
	two = malloc(a.frame_len + b.frame_len);
	memcpy(two, a.frame, a.frame_len);
	memcpy(two + a.frame_len, b.frame, b.frame_len);
	assert_int_equal(chunk_decompress(f->codec, two, a.frame_len + b.frame_len, out,
					  1 << 20, &n), -EBADMSG);
	/* a frame followed by a second, empty frame or by a skippable frame */
	{
		uint8_t empty[64], both[8192];
		uint8_t skip[8 + 4] = { 0x5f, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4 };
		size_t elen;

		assert_int_equal(chunk_compress(f->codec, "", 0, empty, sizeof(empty), &elen), 0);
		assert_true(a.frame_len + elen <= sizeof(both));
		memcpy(both, a.frame, a.frame_len);
		memcpy(both + a.frame_len, empty, elen);
		assert_int_equal(chunk_decompress(f->codec, both, a.frame_len + elen, out,
						  1 << 20, &n), -EBADMSG);
		memcpy(both + a.frame_len, skip, sizeof(skip));
		assert_int_equal(chunk_decompress(f->codec, both, a.frame_len + sizeof(skip), out,
						  1 << 20, &n), -EBADMSG);
	}
	/* a frame followed by one stray byte */
	two[a.frame_len] = 0;
	assert_int_equal(chunk_decompress(f->codec, two, a.frame_len + 1, out, 1 << 20, &n),
			 -EBADMSG);
	free(two);

	/* truncated frames, at every length */
	for (size_t len = 0; len < a.frame_len; len++)
		if (chunk_decompress(f->codec, a.frame, len, out, 1 << 20, &n) != -EBADMSG)
			fail_msg("frame truncated to %zu bytes accepted", len);

	/* declared content size above the cap */
	assert_int_equal(chunk_decompress(f->codec, a.frame, a.frame_len, out, 4999, &n),
			 -EBADMSG);
	assert_int_equal(chunk_decompress(f->codec, a.frame, a.frame_len, out, 0, &n), -EBADMSG);
	assert_int_equal(n, 12345); /* untouched on failure */

	/* a streamed frame without a content size */
	{
		ZSTD_CCtx *z = ZSTD_createCCtx();
		size_t cap = ZSTD_compressBound(a.raw_len) + 64, r;
		uint8_t *frame = malloc(cap);
		ZSTD_inBuffer in = { a.raw, a.raw_len, 0 };
		ZSTD_outBuffer o = { frame, cap, 0 };

		assert_non_null(z);
		assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_contentSizeFlag, 1)));
		do {
			r = ZSTD_compressStream2(z, &o, &in, ZSTD_e_continue);
			assert_false(ZSTD_isError(r));
		} while (in.pos < in.size);
		do {
			r = ZSTD_compressStream2(z, &o, &in, ZSTD_e_end);
			assert_false(ZSTD_isError(r));
		} while (r);
		assert_int_equal(ZSTD_getFrameContentSize(frame, o.pos), ZSTD_CONTENTSIZE_UNKNOWN);
		/* zstd itself can decode it; lazyblk must not */
		assert_int_equal(ZSTD_decompress(out, 1 << 20, frame, o.pos), a.raw_len);
		assert_int_equal(chunk_content_size(frame, o.pos, &size), -EBADMSG);
		assert_int_equal(chunk_decompress(f->codec, frame, o.pos, out, 1 << 20, &n),
				 -EBADMSG);
		ZSTD_freeCCtx(z);
		free(frame);
	}

	/* garbage, and nothing */
	{
		uint8_t junk[256];
		uint64_t seed = 5;

		prng_fill(&seed, junk, sizeof(junk));
		assert_int_equal(chunk_decompress(f->codec, junk, sizeof(junk), out, 1 << 20, &n),
				 -EBADMSG);
		assert_int_equal(chunk_content_size(junk, sizeof(junk), &size), -EBADMSG);
		/* right magic, junk after it */
		junk[0] = 0x28;
		junk[1] = 0xb5;
		junk[2] = 0x2f;
		junk[3] = 0xfd;
		assert_int_equal(chunk_decompress(f->codec, junk, sizeof(junk), out, 1 << 20, &n),
				 -EBADMSG);
		assert_int_equal(chunk_decompress(f->codec, junk, 0, out, 1 << 20, &n), -EBADMSG);
		assert_int_equal(chunk_content_size(junk, 0, &size), -EBADMSG);
		assert_int_equal(chunk_content_size(junk, 3, &size), -EBADMSG);
	}

	/* a frame header that lies about the content size, by one byte either way */
	for (int delta = -1; delta <= 1; delta += 2) {
		uint8_t *bad = malloc(a.frame_len);
		uint8_t fhd = a.frame[4];
		size_t pos = 5 + ((fhd & 0x20) ? 0 : 1); /* after the window descriptor */
		uint16_t fcs;

		/* 5000 bytes, no dictionary: a 2-byte frame content size field (value - 256) */
		assert_int_equal(fhd >> 6, 1);
		assert_int_equal(fhd & 3, 0);
		memcpy(bad, a.frame, a.frame_len);
		memcpy(&fcs, bad + pos, 2);
		assert_int_equal(fcs + 256, 5000);
		fcs = (uint16_t)(fcs + delta);
		memcpy(bad + pos, &fcs, 2);
		assert_int_equal(chunk_content_size(bad, a.frame_len, &size), 0);
		assert_int_equal(size, 5000 + delta);
		n = 777;
		assert_int_equal(chunk_decompress(f->codec, bad, a.frame_len, out, 1 << 20, &n),
				 -EBADMSG);
		assert_int_equal(n, 777);
		free(bad);
	}
	free(out);
	chunk_release(&a);
	chunk_release(&b);
}

/* docs/formats.md: a chunk is exactly one zstd frame carrying its content size. */
static void test_chunk_rejects_skippable_frame(void **state)
{
	struct fixture *f = *state;
	uint8_t out[64], skip[8 + 16] = { 0x50, 0x2a, 0x4d, 0x18, 16, 0, 0, 0 };
	uint64_t size = 99;
	size_t n = 99;
	int r1, r2;

	r1 = chunk_content_size(skip, sizeof(skip), &size);
	r2 = chunk_decompress(f->codec, skip, sizeof(skip), out, sizeof(out), &n);
	if (r1 != -EBADMSG || r2 != -EBADMSG)
		fail_msg("skippable frame: chunk_content_size %d (size %llu), "
			 "chunk_decompress %d (n %zu); want -EBADMSG for both",
			 r1, (unsigned long long)size, r2, n);
}

/* docs/formats.md: a chunk is named by 64 *lowercase* hex digits; nothing else is one. */
static void test_foreach_ignores_uppercase_names(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	struct store_stats st;
	struct chunk c;

	open_new(f);
	chunk_make(f, &c, 400, 100, false);
	sha256_to_hex(c.digest, hex);
	for (int i = 0; i < SHA256_HEX_LEN; i++)
		hex[i] = (char)toupper((unsigned char)hex[i]);
	path_fmt(p, "%s/chunks/%c%c/%s", f->store, tolower(hex[0]), tolower(hex[1]), hex);
	write_file(p, c.frame, c.frame_len);
	assert_int_equal(store_has(f->s, c.digest), 0);
	assert_int_equal(store_stats(f->s, &st), 0);
	chunk_release(&c);
	if (st.chunks != 0)
		fail_msg("store_foreach reported %s (upper case) as a chunk", hex);
}

/* ------------------------------------------------------------------ put_cached / remove / touch */

static int count_dir(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static void test_put_cached(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t *got;
	size_t got_len;
	struct chunk c, c2;
	struct stat st;

	/* a store with only chunks/: no tmp/, no fan-out directories (made by hand) */
	path_fmt(p, "%s/chunks", f->store);
	assert_int_equal(mkdir(f->store, 0755), 0);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(store_open(f->store, false, &f->s), 0);
	chunk_make(f, &c, 500, 20000, true);
	chunk_make(f, &c2, 501, 3000, false);
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 1);
	assert_int_equal(store_has(f->s, c.digest), 1);
	assert_int_equal(store_read(f->s, c.digest, &got, &got_len), 0);
	assert_int_equal(got_len, c.frame_len);
	assert_memory_equal(got, c.frame, c.frame_len);
	free(got);
	path_fmt(p, "%s/tmp", f->store);
	assert_int_equal(stat(p, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(count_dir(p), 0);
	/* again: already there, nothing left behind */
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 0);
	assert_int_equal(count_dir(p), 0);
	/* the store opened without create still refuses store_put */
	assert_int_equal(store_put(f->s, c2.digest, c2.frame, c2.frame_len), -EROFS);
	assert_int_equal(store_put_cached(f->s, c2.digest, c2.frame, c2.frame_len), 1);
	assert_int_equal(store_has(f->s, c2.digest), 1);

	/* a directory in the chunk's place: not added, not counted */
	store_close(f->s);
	f->s = NULL;
	rm_rf(f->store);
	open_new(f);
	store_chunk_path(f->s, c.digest, p, sizeof(p));
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 0);
	path_fmt(p, "%s/tmp", f->store);
	assert_int_equal(count_dir(p), 0);
	/* a staging file left by a dead writer is not in the way */
	sha256_to_hex(c2.digest, hex);
	for (int seq = 0; seq < 4; seq++) {
		path_fmt(p, "%s/tmp/%s.%d.%d", f->store, hex, (int)getpid(), seq);
		write_file(p, "stale", 5);
	}
	assert_int_equal(store_put_cached(f->s, c2.digest, c2.frame, c2.frame_len), 1);
	assert_int_equal(store_read(f->s, c2.digest, &got, &got_len), 0);
	assert_int_equal(got_len, c2.frame_len);
	assert_memory_equal(got, c2.frame, c2.frame_len);
	free(got);
	chunk_release(&c);
	chunk_release(&c2);
}

#define RACE_THREADS 6
#define RACE_ROUNDS 40

struct racer {
	struct store *s;
	const struct chunk *c;
	pthread_barrier_t *start;
	int ret;
};

static void *race_thread(void *arg)
{
	struct racer *r = arg;

	pthread_barrier_wait(r->start);
	r->ret = store_put_cached(r->s, r->c->digest, r->c->frame, r->c->frame_len);
	return NULL;
}

/*
 * Threads of this process and two forked processes (one with its own struct store, one
 * using the inherited one) add the same chunk at the same moment: exactly one gets 1.
 */
static void test_put_cached_race(void **state)
{
	struct fixture *f = *state;
	struct chunk c[RACE_ROUNDS];
	int go[2][2], res[2][2];
	pid_t kids[2];

	open_new(f);
	store_close(f->s);
	f->s = NULL;
	assert_int_equal(store_open(f->store, false, &f->s), 0);
	for (int r = 0; r < RACE_ROUNDS; r++)
		chunk_make(f, &c[r], 600 + (uint64_t)r, 30000, r % 2);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(pipe(go[k]), 0);
		assert_int_equal(pipe(res[k]), 0);
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			struct store *s = f->s;
			char byte;

			close(res[k][0]);
			close(go[k][1]);
			if (k == 0 && store_open(f->store, false, &s))
				_exit(3);
			for (int r = 0; r < RACE_ROUNDS; r++) {
				int8_t out;

				if (read(go[k][0], &byte, 1) != 1)
					_exit(4);
				out = (int8_t)store_put_cached(s, c[r].digest, c[r].frame,
							       c[r].frame_len);
				if (write(res[k][1], &out, 1) != 1)
					_exit(5);
			}
			_exit(0);
		}
		close(res[k][1]);
		close(go[k][0]);
	}
	for (int r = 0; r < RACE_ROUNDS; r++) {
		pthread_barrier_t start;
		pthread_t t[RACE_THREADS];
		struct racer rc[RACE_THREADS];
		int added = 0;

		pthread_barrier_init(&start, NULL, RACE_THREADS);
		for (int i = 0; i < RACE_THREADS; i++) {
			rc[i] = (struct racer){ .s = f->s, .c = &c[r], .start = &start };
			assert_int_equal(pthread_create(&t[i], NULL, race_thread, &rc[i]), 0);
		}
		/* release both children as the threads start */
		for (int k = 0; k < 2; k++)
			assert_int_equal(write(go[k][1], "g", 1), 1);
		for (int i = 0; i < RACE_THREADS; i++) {
			pthread_join(t[i], NULL);
			assert_true(rc[i].ret == 0 || rc[i].ret == 1);
			added += rc[i].ret;
		}
		pthread_barrier_destroy(&start);
		for (int k = 0; k < 2; k++) {
			int8_t out;

			assert_int_equal(read(res[k][0], &out, 1), 1);
			assert_true(out == 0 || out == 1);
			added += out;
		}
		if (added != 1)
			fail_msg("round %d: %d writers added the chunk", r, added);
		assert_int_equal(store_has(f->s, c[r].digest), 1);
	}
	for (int k = 0; k < 2; k++) {
		int st;

		close(go[k][1]);
		assert_int_equal(waitpid(kids[k], &st, 0), kids[k]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(res[k][0]);
	}
	{
		struct store_stats st;
		char p[PATH_MAX];
		uint64_t stored = 0;

		for (int r = 0; r < RACE_ROUNDS; r++)
			stored += c[r].frame_len;
		assert_int_equal(store_stats(f->s, &st), 0);
		assert_int_equal(st.chunks, RACE_ROUNDS);
		assert_int_equal(st.stored_bytes, stored);
		path_fmt(p, "%s/tmp", f->store);
		assert_int_equal(count_dir(p), 0);
	}
	for (int r = 0; r < RACE_ROUNDS; r++)
		chunk_release(&c[r]);
}

static void test_remove(void **state)
{
	struct fixture *f = *state;
	struct chunk c;

	open_new(f);
	chunk_make(f, &c, 700, 1000, true);
	assert_int_equal(store_remove(f->s, c.digest), -ENOENT);
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 1);
	assert_int_equal(store_remove(f->s, c.digest), 0);
	assert_int_equal(store_has(f->s, c.digest), 0);
	assert_int_equal(store_remove(f->s, c.digest), -ENOENT);
	/* added again after removal */
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 1);
	chunk_release(&c);
}

static void set_mtime(const char *path, time_t t)
{
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };

	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static time_t mtime_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_mtim.tv_sec;
}

static void test_touch(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct chunk c, absent;
	time_t now = time(NULL);

	open_new(f);
	chunk_make(f, &c, 800, 1000, true);
	chunk_make(f, &absent, 801, 1000, true);
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 1);
	store_chunk_path(f->s, c.digest, p, sizeof(p));
	/* old: refreshed to now */
	set_mtime(p, now - 3600);
	store_touch(f->s, c.digest);
	assert_true(mtime_of(p) >= now);
	/* recent (within STORE_TOUCH_SECS): left alone */
	set_mtime(p, now - STORE_TOUCH_SECS / 2);
	store_touch(f->s, c.digest);
	assert_int_equal(mtime_of(p), now - STORE_TOUCH_SECS / 2);
	set_mtime(p, now - STORE_TOUCH_SECS - 5);
	store_touch(f->s, c.digest);
	assert_true(mtime_of(p) >= now);
	/* absent, or a directory: nothing happens */
	store_touch(f->s, absent.digest);
	assert_int_equal(store_has(f->s, absent.digest), 0);
	store_chunk_path(f->s, absent.digest, p, sizeof(p));
	assert_int_equal(mkdir(p, 0755), 0);
	set_mtime(p, now - 3600);
	store_touch(f->s, absent.digest);
	assert_int_equal(mtime_of(p), now - 3600);
	chunk_release(&c);
	chunk_release(&absent);
}

static int count_chunk(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	(void)d;
	(void)path;
	(*(int *)arg)++;
	return 0;
}

/* store_create_cache: chunks/ and tmp/ only; fan-out directories appear with their chunks. */
static void test_create_cache(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct chunk c;
	int n = 0;

	assert_int_equal(store_create_cache(f->store, &f->s), 0);
	path_fmt(p, "%s/chunks", f->store);
	assert_int_equal(count_dir(p), 0);
	path_fmt(p, "%s/tmp", f->store);
	assert_true(path_exists(p));
	chunk_make(f, &c, 600, 9000, true);
	assert_int_equal(store_put_cached(f->s, c.digest, c.frame, c.frame_len), 1);
	assert_int_equal(store_has(f->s, c.digest), 1);
	path_fmt(p, "%s/chunks", f->store);
	assert_int_equal(count_dir(p), 1);
	assert_int_equal(store_foreach(f->s, count_chunk, &n), 0);
	assert_int_equal(n, 1);
	store_close(f->s);
	/* reopened as a cache, or as a store: the same chunk */
	assert_int_equal(store_create_cache(f->store, &f->s), 0);
	assert_int_equal(store_has(f->s, c.digest), 1);
	store_close(f->s);
	assert_int_equal(store_open(f->store, false, &f->s), 0);
	assert_int_equal(store_has(f->s, c.digest), 1);
	free(c.raw);
	free(c.frame);
}

/*
 * Staging files a dead writer left: a store opened for writing sweeps those older than the
 * grace period; a fresh one, a live writer's and other names stay; store_tmp_sweep counts.
 */
static void test_open_sweeps_tmp(void **state)
{
	struct fixture *f = *state;
	const char *hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	struct timespec old[2] = { { .tv_sec = time(NULL) - 2 * STORE_TMP_GRACE_SECS },
				   { .tv_sec = time(NULL) - 2 * STORE_TMP_GRACE_SECS } };
	char dead_old[PATH_MAX], dead_new[PATH_MAX], live_old[PATH_MAX], other[PATH_MAX];
	struct store_tmp_count c;

	open_new(f);
	store_close(f->s);
	f->s = NULL;
	/* pid 2000000000 is above any pid_max: a writer that is gone */
	path_fmt(dead_old, "%s/tmp/%s.2000000000.1", f->store, hex);
	path_fmt(dead_new, "%s/tmp/%s.2000000000.2", f->store, hex);
	path_fmt(live_old, "%s/tmp/%s.%d.3", f->store, hex, (int)getpid());
	path_fmt(other, "%s/tmp/notes.txt", f->store);
	write_file(dead_old, "stale", 5);
	write_file(dead_new, "fresh!", 6);
	write_file(live_old, "live", 4);
	write_file(other, "other", 5);
	assert_int_equal(utimensat(AT_FDCWD, dead_old, old, 0), 0);
	assert_int_equal(utimensat(AT_FDCWD, live_old, old, 0), 0);
	assert_int_equal(utimensat(AT_FDCWD, other, old, 0), 0);
	/* opened to read: nothing swept */
	assert_int_equal(store_open(f->store, false, &f->s), 0);
	assert_true(path_exists(dead_old));
	assert_int_equal(store_tmp_sweep(f->s, STORE_TMP_GRACE_SECS,
					 STORE_SWEEP_DRY_RUN | STORE_SWEEP_SKIP_LIVE, &c), 0);
	assert_int_equal(c.stale, 1);
	assert_int_equal(c.stale_bytes, 5);
	assert_int_equal(c.young, 2);
	assert_int_equal(c.young_bytes, 10);
	assert_true(path_exists(dead_old));
	store_close(f->s);
	/* opened to write: the dead writer's old file goes */
	open_new(f);
	assert_false(path_exists(dead_old));
	assert_true(path_exists(dead_new));
	assert_true(path_exists(live_old));
	assert_true(path_exists(other));
	/* without SKIP_LIVE, grace 0: every staging file, never other names */
	assert_int_equal(store_tmp_sweep(f->s, 0, 0, &c), 0);
	assert_int_equal(c.stale, 2);
	assert_int_equal(c.young, 0);
	assert_false(path_exists(dead_new));
	assert_false(path_exists(live_old));
	assert_true(path_exists(other));
}

/* ------------------------------------------------------------------ the marker */

static void expect_marker(const char *store, const char *want)
{
	char p[PATH_MAX], buf[64] = { 0 };
	FILE *fp;

	path_fmt(p, "%s/" STORE_MARKER, store);
	fp = fopen(p, "r");
	assert_non_null(fp);
	assert_true(fread(buf, 1, sizeof(buf) - 1, fp) > 0);
	fclose(fp);
	assert_string_equal(buf, want);
}

static void test_marker(void **state)
{
	struct fixture *f = *state;
	struct store *s = (struct store *)0x1;
	char p[PATH_MAX], why[1024];

	/* a new store, a new cache: the marker */
	open_new(f);
	expect_marker(f->store, "lazyblk-store 1\n");
	store_close(f->s);
	f->s = NULL;
	path_fmt(p, "%s/cache", f->dir);
	assert_int_equal(store_create_cache(p, &s), 0);
	store_close(s);
	expect_marker(p, "lazyblk-store 1\n");
	/* an empty directory is adopted */
	path_fmt(p, "%s/empty", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(store_open(p, true, &s), 0);
	store_close(s);
	expect_marker(p, "lazyblk-store 1\n");
	/* an older lazyblk's store (no marker) is adopted by create, left alone without */
	path_fmt(p, "%s/" STORE_MARKER, f->store);
	assert_int_equal(unlink(p), 0);
	path_fmt(p, "%s/plain/ab", f->store);
	assert_int_equal(fs_mkdir_p(p, 0755), 0);
	assert_int_equal(store_open(f->store, false, &s), 0);
	store_close(s);
	path_fmt(p, "%s/" STORE_MARKER, f->store);
	assert_false(path_exists(p));
	assert_int_equal(store_open(f->store, true, &s), 0);
	store_close(s);
	expect_marker(f->store, "lazyblk-store 1\n");
	/* a directory of one's own: refused, and left as it was */
	path_fmt(p, "%s/mine", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	path_fmt(p, "%s/mine/notes.txt", f->dir);
	write_file(p, "x", 1);
	path_fmt(p, "%s/mine", f->dir);
	s = (struct store *)0x1;
	assert_int_equal(store_open(p, true, &s), -ENOTEMPTY);
	assert_int_equal(store_create_cache(p, &s), -ENOTEMPTY);
	assert_ptr_equal(s, (struct store *)0x1);
	assert_int_equal(count_dir(p), 1);
	assert_true(store_open_why(-ENOTEMPTY, p, true, why, sizeof(why)));
	assert_non_null(strstr(why, "not a lazyblk store (not empty and no "));
	assert_non_null(strstr(why, "/mine/lazyblk-store); use an empty directory, or --init"));
	assert_false(store_open_why(-ENOENT, p, true, why, sizeof(why)));
	/* a chunks/ with something foreign in it is not a store either */
	path_fmt(p, "%s/odd/chunks/zz", f->dir);
	assert_int_equal(fs_mkdir_p(p, 0755), 0);
	path_fmt(p, "%s/odd", f->dir);
	assert_int_equal(store_open(p, true, &s), -ENOTEMPTY);
	/* another process writing the marker of a store it is making at the same time */
	path_fmt(p, "%s/racing/chunks", f->dir);
	assert_int_equal(fs_mkdir_p(p, 0755), 0);
	path_fmt(p, "%s/racing/" STORE_MARKER ".tmp.a1B2c3", f->dir);
	write_file(p, "lazyblk-store 1\n", 16);
	path_fmt(p, "%s/racing", f->dir);
	assert_int_equal(store_open(p, true, &s), 0);
	store_close(s);
	/* store_init adopts it all the same */
	path_fmt(p, "%s/mine", f->dir);
	assert_int_equal(store_init(p), 0);
	expect_marker(p, "lazyblk-store 1\n");
	assert_int_equal(store_open(p, true, &s), 0);
	store_close(s);
	/* a newer format: refused, with or without create, by store_init too */
	path_fmt(p, "%s/" STORE_MARKER, f->store);
	write_file(p, "lazyblk-store 2\n", 16);
	s = (struct store *)0x1;
	assert_int_equal(store_open(f->store, false, &s), -EPROTONOSUPPORT);
	assert_int_equal(store_open(f->store, true, &s), -EPROTONOSUPPORT);
	assert_int_equal(store_init(f->store), -EPROTONOSUPPORT);
	assert_ptr_equal(s, (struct store *)0x1);
	assert_true(store_open_why(-EPROTONOSUPPORT, f->store, false, why, sizeof(why)));
	assert_non_null(strstr(why, "says 'lazyblk-store 2'; this lazyblk reads 'lazyblk-store 1'"));
	write_file(p, "garbage", 7);
	assert_int_equal(store_open(f->store, false, &s), -EPROTONOSUPPORT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_open_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_marker, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_commit_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dedup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_close_commits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auto_commit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats_and_foreach, setup, teardown),
		cmocka_unit_test_setup_teardown(test_verify, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_regular, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_decompress_rejects, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_rejects_skippable_frame, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_foreach_ignores_uppercase_names, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_put_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_cached_race, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove, setup, teardown),
		cmocka_unit_test_setup_teardown(test_touch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_sweeps_tmp, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
