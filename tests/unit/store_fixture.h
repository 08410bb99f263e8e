/* SPDX-License-Identifier: MIT */
/*
 * A store in a temporary directory, its chunks made from seeds, image files that reference
 * them: shared by the unit tests of cas/cache, cas/gc and layout/refs.
 */
#ifndef LZ_TESTS_UNIT_STORE_FIXTURE_H
#define LZ_TESTS_UNIT_STORE_FIXTURE_H

#include "helpers.h"

#include "../../cas/cache.h"
#include "../../cas/manifest.h"
#include "../../cas/plain.h"
#include "../../cas/store.h"
#include "../../common/fsutil.h"
#include "../../common/sha256.h"
#include "../../layout/layout.h"
#include "../../layout/refs.h"

struct fixture {
	char dir[PATH_MAX];
	char store[PATH_MAX];
	struct store *s;
	struct cache *c;
};

static inline int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	if (store_tmp_open(f->dir, f->store, &f->s))
		return -1;
	*state = f;
	return 0;
}

static inline int teardown(void **state)
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

static inline void blob_make(struct blob *b, uint64_t seed, size_t len)
{
	b->data = malloc(len);
	assert_non_null(b->data);
	b->len = len;
	prng_fill(&seed, b->data, len);
	assert_int_equal(sha256_buf(b->data, len, b->digest), 0);
}

static inline void blob_free(struct blob *b)
{
	free(b->data);
	b->data = NULL;
}

static inline void set_mtime_digest(struct store *s, const uint8_t d[SHA256_LEN], time_t t)
{
	struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };
	char p[PATH_MAX];

	store_chunk_path(s, d, p, sizeof(p));
	assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
}

static inline uint64_t real_usage(struct store *s, uint64_t *chunks)
{
	struct store_stats st;

	assert_int_equal(store_stats(s, &st), 0);
	if (chunks)
		*chunks = st.chunks;
	return st.stored_bytes;
}

static inline uint64_t cache_used(struct cache *c)
{
	struct cache_stats st;

	cache_get_stats(c, &st);
	return st.used;
}

static inline uint64_t real_usage_all(struct store *s, uint64_t *chunks, uint64_t *plain_files)
{
	struct store_stats st;

	assert_int_equal(store_stats(s, &st), 0);
	*chunks = st.chunks;
	*plain_files = st.plain_files;
	return st.stored_bytes + st.plain_bytes;
}

static inline void plain_file_path(struct fixture *f, const uint8_t d[SHA256_LEN], char p[PATH_MAX])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	path_fmt(p, "%s/plain/%.2s/%s", f->store, hex, hex);
}

/* ------------------------------------------------------------------ image files */

static inline void make_layout(const char *path, struct blob *b, int n)
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

static inline void make_manifest(const char *path, struct blob *b, int n)
{
	struct manifest_writer *w = manifest_writer_new(1 << 20);
	struct mf_chunk *ch = calloc((size_t)n, sizeof(*ch));
	struct mf_entry_in root = { .path = "/", .path_len = 1, .type = MF_DIR, .mode = 0755 };
	struct mf_entry_in file = { .path = "/f", .path_len = 2, .type = MF_REG, .mode = 0644 };
	char why[WHY_MAX] = "";

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
	if (manifest_writer_write(w, path, NULL, why, sizeof(why)))
		fail_msg("manifest: %s", why[0] ? why : "?");
	manifest_writer_free(w);
	free(ch);
}

/*
 * 8 chunks: 0-1 in a layout, 2-3 in a manifest, 4-5 unreferenced and old, 6-7 unreferenced
 * and new. Plus a referenced chunk (8) that is not in the store.
 */
enum { GC_N = 9 };

static inline void gc_store(struct fixture *f, struct blob *b, char *layout, char *manifest)
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
static inline void refs_of(struct chunk_refs *r, const char *const *paths, int n)
{
	char why[WHY_MAX] = "";

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < n; i++)
		assert_int_equal(chunk_refs_add_file(r, paths[i], why, sizeof(why)), 0);
	chunk_refs_finish(r);
}

#define KEEP(r) ((const uint8_t (*)[SHA256_LEN])(r).d), (r).n

#endif
