/* SPDX-License-Identifier: MIT */
/* Unit tests for cas/cache (the size-bounded disk cache) and cas/gc. */
#include "../helpers.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/wait.h>

#include "../../../cas/cache.h"
#include "../../../cas/gc.h"
#include "../../../cas/plain.h"
#include "../../../layout/refs.h"
#include "../../../cas/manifest.h"
#include "../../../cas/store.h"
#include "../../../common/fsutil.h"
#include "../../../common/sha256.h"
#include "../../../layout/layout.h"

struct fixture {
	char dir[PATH_MAX];
	char store[PATH_MAX];
	struct store *s;
	struct cache *c;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (store_tmp_open(f->dir, f->store, &f->s))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cache_close(f->c);
	store_close(f->s);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/*
 * A "chunk" of len bytes named by the sha256 of its bytes. The cache never looks inside a
 * chunk file, so these need not be zstd frames.
 */
struct blob {
	uint8_t digest[SHA256_LEN];
	uint8_t *data;
	size_t len;
};

static void blob_make(struct blob *b, uint64_t seed, size_t len)
{
	b->data = malloc(len);
	assert_non_null(b->data);
	b->len = len;
	prng_fill(&seed, b->data, len);
	assert_int_equal(sha256_buf(b->data, len, b->digest), 0);
}

static void blob_free(struct blob *b)
{
	free(b->data);
	b->data = NULL;
}

static void set_mtime_digest(struct store *s, const uint8_t d[SHA256_LEN], time_t t)
{
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };
	char p[PATH_MAX];

	store_chunk_path(s, d, p, sizeof(p));
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static uint64_t real_usage(struct store *s, uint64_t *chunks)
{
	struct store_stats st;

	assert_int_equal(store_stats(s, &st), 0);
	if (chunks)
		*chunks = st.chunks;
	return st.stored_bytes;
}

static uint64_t cache_used(struct cache *c)
{
	struct cache_stats st;

	cache_get_stats(c, &st);
	return st.used;
}

/* ------------------------------------------------------------------ cache */

static void test_cache_open(void **state)
{
	struct fixture *f = *state;
	struct cache_stats st;
	struct blob b[5];
	struct cache *c2;
	uint64_t total = 0;
	char p[PATH_MAX];

	assert_int_equal(cache_open(f->s, 0, &f->c), -EINVAL);
	assert_null(f->c);
	/* chunks already in the store are counted by the first open */
	for (int i = 0; i < 5; i++) {
		blob_make(&b[i], 10 + (uint64_t)i, 1000 + (size_t)i * 100);
		assert_int_equal(store_put_cached(f->s, b[i].digest, b[i].data, b[i].len), 1);
		total += b[i].len;
	}
	assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
	cache_get_stats(f->c, &st);
	assert_int_equal(st.limit, 1 << 20);
	assert_int_equal(st.used, total);
	assert_int_equal(st.scans, 1);
	assert_int_equal(st.evictions, 0);
	path_fmt(p, "%s/cache.state", f->store);
	assert_true(path_exists(p));
	path_fmt(p, "%s/cache.lock", f->store);
	assert_true(path_exists(p));
	/* a second open finds a valid state: no rescan, same count, shared */
	assert_int_equal(cache_open(f->s, 1 << 20, &c2), 0);
	cache_get_stats(c2, &st);
	assert_int_equal(st.used, total);
	assert_int_equal(st.scans, 0);
	{
		struct blob x;

		blob_make(&x, 99, 777);
		assert_int_equal(store_put_cached(f->s, x.digest, x.data, x.len), 1);
		cache_added(c2, x.len);
		assert_int_equal(cache_used(f->c), total + 777);
		assert_int_equal(store_remove(f->s, x.digest), 0);
		cache_removed(f->c, x.len);
		assert_int_equal(cache_used(c2), total);
		blob_free(&x);
	}
	/* a removal that was never counted does not wrap the counter */
	cache_removed(c2, total + 12345);
	assert_int_equal(cache_used(f->c), 0);
	cache_close(c2);
	cache_close(NULL);
	for (int i = 0; i < 5; i++)
		blob_free(&b[i]);
}

/*
 * Limit 10 chunks: usage never exceeds it after an add, evictions go down to 90%, and the
 * chunks that go are the least recently used ones (a touched old chunk stays).
 */
static void test_cache_bound_lru(void **state)
{
	enum { N = 60, LEN = 1000, LIMIT = 10 * LEN };
	struct fixture *f = *state;
	struct blob b[N];
	struct cache_stats st;
	time_t base = time(NULL) - 100000;
	uint64_t chunks;

	assert_int_equal(cache_open(f->s, LIMIT, &f->c), 0);
	for (int i = 0; i < N; i++) {
		blob_make(&b[i], 100 + (uint64_t)i, LEN);
		assert_int_equal(store_put_cached(f->s, b[i].digest, b[i].data, b[i].len), 1);
		/* distinct ages, oldest first; chunk 0 is used all the time */
		set_mtime_digest(f->s, b[i].digest, base + i * 100);
		if (i > 0) {
			store_touch(f->s, b[0].digest);
			set_mtime_digest(f->s, b[0].digest, base + i * 100 + 50);
		}
		cache_added(f->c, b[i].len);
		assert_true(cache_used(f->c) <= LIMIT);
		assert_int_equal(cache_used(f->c), real_usage(f->s, &chunks));
		assert_true(chunks <= LIMIT / LEN);
	}
	/* what remains: chunk 0 (always in use) and the newest others */
	assert_true(chunks >= 9);
	assert_int_equal(store_has(f->s, b[0].digest), 1);
	for (int i = 1; i < N; i++)
		assert_int_equal(store_has(f->s, b[i].digest), i >= N - (int)(chunks - 1));
	cache_get_stats(f->c, &st);
	assert_int_equal(st.evictions, N - chunks);
	assert_int_equal(st.evicted_bytes, (uint64_t)(N - chunks) * LEN);
	assert_true(st.scans >= 2);
	/* eviction touched nothing but committed chunks */
	{
		char p[PATH_MAX];

		path_fmt(p, "%s/cache.state", f->store);
		assert_true(path_exists(p));
	}
	for (int i = 0; i < N; i++)
		blob_free(&b[i]);
}

/* Eviction removes only committed chunks: tmp/ and odd names stay, and are not counted. */
static void test_cache_evicts_only_chunks(void **state)
{
	struct fixture *f = *state;
	char tmpf[PATH_MAX], odd[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	struct blob b[4];

	for (int i = 0; i < 4; i++)
		blob_make(&b[i], 200 + (uint64_t)i, 4000);
	sha256_to_hex(b[0].digest, hex);
	path_fmt(tmpf, "%s/tmp/%s.1.1", f->store, hex);
	write_file(tmpf, b[0].data, b[0].len);
	path_fmt(odd, "%s/chunks/%.2s/%s.old", f->store, hex, hex);
	write_file(odd, b[0].data, b[0].len);
	assert_int_equal(cache_open(f->s, 10000, &f->c), 0);
	assert_int_equal(cache_used(f->c), 0);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(store_put_cached(f->s, b[i].digest, b[i].data, b[i].len), 1);
		cache_added(f->c, b[i].len);
	}
	assert_true(cache_used(f->c) <= 9000);
	assert_true(path_exists(tmpf));
	assert_true(path_exists(odd));
	for (int i = 0; i < 4; i++)
		blob_free(&b[i]);
}

/* A state file that is garbage, short, or of another version is recounted. */
static void test_cache_corrupt_state(void **state)
{
	struct fixture *f = *state;
	char p[PATH_MAX];
	struct blob b[3];
	uint64_t total = 0;
	uint8_t junk[4096];
	uint64_t seed = 5;

	for (int i = 0; i < 3; i++) {
		blob_make(&b[i], 300 + (uint64_t)i, 5000);
		assert_int_equal(store_put_cached(f->s, b[i].digest, b[i].data, b[i].len), 1);
		total += b[i].len;
	}
	path_fmt(p, "%s/cache.state", f->store);
	/* random bytes */
	prng_fill(&seed, junk, sizeof(junk));
	write_file(p, junk, sizeof(junk));
	assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
	assert_int_equal(cache_used(f->c), total);
	cache_close(f->c);
	f->c = NULL;
	/* a short file */
	write_file(p, "LZBK", 4);
	assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
	assert_int_equal(cache_used(f->c), total);
	cache_close(f->c);
	f->c = NULL;
	/* the right magic, another version */
	{
		uint8_t *buf;
		size_t len;
		uint32_t v = 99;

		assert_int_equal(fs_read_file(p, &buf, &len), 0);
		assert_memory_equal(buf, "LZBKCACH", 8);
		memcpy(buf + 8, &v, 4);
		memset(buf + 16, 0xff, 8);
		write_file(p, buf, len);
		free(buf);
	}
	assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
	assert_int_equal(cache_used(f->c), total);
	cache_close(f->c);
	f->c = NULL;
	/* a counter far too high: the next add rescans instead of emptying the cache */
	{
		uint8_t *buf;
		size_t len;
		uint64_t bogus = 1ull << 40;
		struct blob x;
		struct cache_stats st;

		assert_int_equal(fs_read_file(p, &buf, &len), 0);
		memcpy(buf + 16, &bogus, 8);
		write_file(p, buf, len);
		free(buf);
		assert_int_equal(cache_open(f->s, 1 << 20, &f->c), 0);
		assert_int_equal(cache_used(f->c), bogus);
		blob_make(&x, 399, 100);
		assert_int_equal(store_put_cached(f->s, x.digest, x.data, x.len), 1);
		cache_added(f->c, x.len);
		cache_get_stats(f->c, &st);
		assert_int_equal(st.used, total + 100);
		assert_int_equal(st.evictions, 0);
		assert_int_equal(st.scans, 1);
		blob_free(&x);
	}
	for (int i = 0; i < 3; i++)
		blob_free(&b[i]);
}

/*
 * Two processes, each with its own struct cache on one store, add chunks at the same time,
 * half of them the same chunks: the shared counter counts every file exactly once.
 */
static void run_adder(struct cache *c, uint64_t seed0, int n, int shared,
		      size_t len)
{
	for (int i = 0; i < n; i++) {
		struct blob b;
		int ret;

		/* the first `shared` chunks are the same in both processes */
		blob_make(&b, i < shared ? 1000 + (uint64_t)i : seed0 + (uint64_t)i, len);
		ret = cache_put(c, b.digest, b.data, b.len);
		if (ret < 0)
			_exit(10);
		blob_free(&b);
	}
}

static void two_processes(struct fixture *f, uint64_t limit, int n, int shared, size_t len)
{
	int go[2];
	pid_t kid;
	char byte;
	int st;

	assert_int_equal(pipe(go), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		struct store *s;
		struct cache *c;

		close(go[1]);
		if (store_open(f->store, false, &s) || cache_open(s, limit, &c))
			_exit(3);
		if (read(go[0], &byte, 1) != 1)
			_exit(4);
		/*
		 * No check of the bound here: the other process may be between adding a chunk
		 * and its own eviction (seen on a loaded machine). The bound holds once both
		 * are done, which the caller checks.
		 */
		run_adder(c, 50000, n, shared, len);
		cache_close(c);
		store_close(s);
		_exit(0);
	}
	close(go[0]);
	assert_int_equal(cache_open(f->s, limit, &f->c), 0);
	assert_int_equal(write(go[1], "g", 1), 1);
	run_adder(f->c, 90000, n, shared, len);
	assert_int_equal(waitpid(kid, &st, 0), kid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(go[1]);
}

static void test_cache_two_processes(void **state)
{
	struct fixture *f = *state;
	uint64_t chunks;

	two_processes(f, 1ull << 30, 300, 150, 700);
	assert_int_equal(cache_used(f->c), real_usage(f->s, &chunks));
	assert_int_equal(chunks, 450);
	assert_int_equal(cache_used(f->c), 450 * 700);
}

/*
 * The same with evictions in both, running while the other process adds: once both are
 * done the bound holds and the counter is exact (additions never overlap a rescan).
 */
static void test_cache_two_processes_evicting(void **state)
{
	struct fixture *f = *state;
	uint64_t real;

	two_processes(f, 40 * 700, 400, 100, 700);
	real = real_usage(f->s, NULL);
	assert_true(cache_used(f->c) <= 40 * 700);
	assert_int_equal(real, cache_used(f->c));
	/* and the next eviction makes it exact again */
	{
		struct blob x;

		cache_added(f->c, 40 * 700); /* force one (nothing added: the rescan recounts) */
		blob_make(&x, 7, 700);
		assert_int_equal(store_put_cached(f->s, x.digest, x.data, x.len), 1);
		cache_added(f->c, x.len);
		assert_int_equal(cache_used(f->c), real_usage(f->s, NULL));
		blob_free(&x);
	}
}

/* Threads of one process evicting at once: one rescans, the others find nothing to do. */
struct tadder {
	struct store *s;
	struct cache *c;
	uint64_t seed;
};

static void *thread_adder(void *arg)
{
	struct tadder *t = arg;

	for (int i = 0; i < 100; i++) {
		struct blob b;

		blob_make(&b, t->seed + (uint64_t)i, 500);
		if (cache_put(t->c, b.digest, b.data, b.len) < 0)
			abort();
		blob_free(&b);
	}
	return NULL;
}

static void test_cache_threads(void **state)
{
	struct fixture *f = *state;
	pthread_t t[4];
	struct tadder a[4];
	uint64_t real;

	assert_int_equal(cache_open(f->s, 50 * 500, &f->c), 0);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct tadder){ .s = f->s, .c = f->c, .seed = 10000 * (uint64_t)(i + 1) };
		assert_int_equal(pthread_create(&t[i], NULL, thread_adder, &a[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	real = real_usage(f->s, NULL);
	assert_true(cache_used(f->c) <= 50 * 500);
	assert_int_equal(real, cache_used(f->c)); /* exact: evictions never overlap an add */
}

/* ------------------------------------------------------------------ gc */

static void make_layout(const char *path, struct blob *b, int n)
{
	struct layout_writer *w;
	uint32_t max = 0;

	for (int i = 0; i < n; i++)
		if (b[i].len > max)
			max = (uint32_t)b[i].len;
	assert_int_equal(layout_writer_new(path, 1024, &w), 0);
	for (int i = 0; i < n; i++)
		assert_int_equal(layout_add_data(w, (uint64_t)i * 8 * DISK_BLOCK,
						 (uint32_t)b[i].len, b[i].digest, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, max, NULL), 0);
	layout_writer_free(w);
}

static void make_manifest(const char *path, struct blob *b, int n)
{
	struct manifest_writer *w = manifest_writer_new(1 << 20);
	struct mf_chunk *ch = calloc((size_t)n, sizeof(*ch));
	struct mf_entry_in root = { .path = "/", .path_len = 1, .type = MF_DIR, .mode = 0755 };
	struct mf_entry_in file = { .path = "/f", .path_len = 2, .type = MF_REG, .mode = 0644 };

	assert_non_null(w);
	for (int i = 0; i < n; i++) {
		memcpy(ch[i].digest, b[i].digest, SHA256_LEN);
		ch[i].len = (uint32_t)b[i].len;
		file.size += b[i].len;
	}
	file.chunks = ch;
	file.chunk_count = (uint32_t)n;
	assert_int_equal(manifest_writer_add(w, &root), 0);
	assert_int_equal(manifest_writer_add(w, &file), 0);
	char wwhy[WHY_MAX] = "";

	if (manifest_writer_write(w, path, NULL, wwhy, sizeof(wwhy)))
		fail_msg("manifest: %s", wwhy[0] ? wwhy : "?");
	manifest_writer_free(w);
	free(ch);
}

/*
 * 8 chunks: 0-1 in a layout, 2-3 in a manifest, 4-5 unreferenced and old, 6-7 unreferenced
 * and new. Plus a referenced chunk (8) that is not in the store.
 */
enum { GC_N = 9 };

static void gc_store(struct fixture *f, struct blob *b, char *layout, char *manifest)
{
	time_t old = time(NULL) - 7200;

	for (int i = 0; i < GC_N; i++) {
		blob_make(&b[i], 500 + (uint64_t)i, 1000 + (size_t)i);
		if (i == 8)
			continue;
		assert_int_equal(store_put_cached(f->s, b[i].digest, b[i].data, b[i].len), 1);
		if (i < 6)
			set_mtime_digest(f->s, b[i].digest, old);
	}
	path_fmt(layout, "%s/img.layout", f->dir);
	path_fmt(manifest, "%s/img.manifest", f->dir);
	{
		struct blob lb[3] = { b[0], b[1], b[8] };

		make_layout(layout, lb, 3);
	}
	make_manifest(manifest, b + 2, 2);
}

/* The sorted chunk set of some image files. */
static void refs_of(struct chunk_refs *r, const char *const *paths, int n)
{
	const char *why;

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < n; i++)
		assert_int_equal(chunk_refs_add_file(r, paths[i], &why), 0);
	chunk_refs_finish(r);
}

#define KEEP(r) ((const uint8_t (*)[SHA256_LEN])(r).d), (r).n

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

static void test_gc_bad_keep(void **state)
{
	struct fixture *f = *state;
	char layout[PATH_MAX], manifest[PATH_MAX], junk[PATH_MAX], missing[PATH_MAX];
	char shortf[PATH_MAX], corrupt[PATH_MAX];
	struct blob b[GC_N];
	const char *why;
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

		assert_int_equal(chunk_refs_add_file(&r, layout, &why), 0);
		assert_int_equal(r.n, 3);
		assert_int_equal(chunk_refs_add_file(&r, junk, &why), -EBADMSG);
		assert_non_null(why);
		assert_non_null(strstr(why, "not a lazyblk layout or manifest"));
		assert_int_equal(chunk_refs_add_file(&r, shortf, &why), -EBADMSG);
		assert_non_null(strstr(why, "too short"));
		assert_int_equal(chunk_refs_add_file(&r, missing, &why), -ENOENT);
		assert_null(why);
		assert_int_equal(chunk_refs_add_file(&r, corrupt, &why), -EBADMSG);
		assert_non_null(why);
		assert_true(chunk_refs_add_file(&r, f->dir, &why) < 0);
		assert_int_equal(r.n, 3);
		chunk_refs_free(&r);
	}
	/* nothing was removed by any of these */
	real_usage(f->s, &chunks);
	assert_int_equal(chunks, 8);
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
	const char *why;

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
	assert_int_equal(chunk_refs_add_fetched(&keep, p1, &why), 0);
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

static uint64_t real_usage_all(struct store *s, uint64_t *chunks, uint64_t *plain_files)
{
	struct store_stats st;

	assert_int_equal(store_stats(s, &st), 0);
	*chunks = st.chunks;
	*plain_files = st.plain_files;
	return st.stored_bytes + st.plain_bytes;
}

static void plain_file_path(struct fixture *f, const uint8_t d[SHA256_LEN], char p[PATH_MAX])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	path_fmt(p, "%s/plain/%.2s/%s", f->store, hex, hex);
}

/* Plain copies count against the bound and leave with their chunk. */
static void test_cache_plain(void **state)
{
	enum { N = 40, LEN = 1000, LIMIT = 10 * (2 * LEN + PLAIN_TRAILER) };
	struct fixture *f = *state;
	time_t base = time(NULL) - 100000;
	uint64_t chunks, plain_files;
	struct blob b[N], stray;
	char p[PATH_MAX];
	int fd;

	assert_int_equal(cache_open(f->s, LIMIT, &f->c), 0);
	/* no plain copy of a chunk that is not in the store */
	blob_make(&stray, 9999, LEN);
	assert_int_equal(cache_put_plain(f->c, stray.digest, stray.data, stray.len, &fd), -ENOENT);
	assert_int_equal(fd, -1);
	plain_file_path(f, stray.digest, p);
	assert_false(path_exists(p));
	for (int i = 0; i < N; i++) {
		blob_make(&b[i], 300 + (uint64_t)i, LEN);
		assert_int_equal(cache_put(f->c, b[i].digest, b[i].data, b[i].len), 1);
		set_mtime_digest(f->s, b[i].digest, base + i * 100);
		assert_int_equal(cache_put_plain(f->c, b[i].digest, b[i].data, b[i].len, &fd), 1);
		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(cache_put_plain(f->c, b[i].digest, b[i].data, b[i].len, &fd), 0);
		assert_true(cache_used(f->c) <= LIMIT);
		assert_int_equal(cache_used(f->c), real_usage_all(f->s, &chunks, &plain_files));
		assert_int_equal(plain_files, chunks); /* an evicted chunk took its copy along */
	}
	assert_true(chunks < N);
	for (int i = 0; i < N; i++) {
		plain_file_path(f, b[i].digest, p);
		assert_int_equal(path_exists(p), store_has(f->s, b[i].digest) == 1);
	}
	/* dropping a corrupt chunk drops its plain copy and both are uncounted */
	assert_int_equal(cache_drop(f->c, b[N - 1].digest, LEN), 0);
	plain_file_path(f, b[N - 1].digest, p);
	assert_false(path_exists(p));
	assert_int_equal(cache_used(f->c), real_usage_all(f->s, &chunks, &plain_files));
	/* a bad plain copy alone */
	assert_int_equal(cache_drop_plain(f->c, b[N - 2].digest), 0);
	assert_int_equal(store_has(f->s, b[N - 2].digest), 1);
	assert_int_equal(cache_used(f->c), real_usage_all(f->s, &chunks, &plain_files));
	assert_int_equal(plain_files, chunks - 1);
	for (int i = 0; i < N; i++)
		blob_free(&b[i]);
	blob_free(&stray);
}

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
		cmocka_unit_test_setup_teardown(test_cache_open, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_bound_lru, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_evicts_only_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_corrupt_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_two_processes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_two_processes_evicting, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cache_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_bad_keep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_layouts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_plain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_plain, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
