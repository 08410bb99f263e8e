/* SPDX-License-Identifier: MIT */
/*
 * The pipeline's first steps for unit tests of the steps after them: a small directory tree,
 * imported into a store (import_run) and made a layout (mkfs_run). Header-only, as helpers.h.
 */
#ifndef LZ_TESTS_UNIT_PIPELINE_H
#define LZ_TESTS_UNIT_PIPELINE_H

#include "helpers.h"
#include "../../cas/chunk.h"
#include "../../cas/import/import.h"
#include "../../cas/manifest.h"
#include "../../ext4gen/mkfs.h"

/*
 * DIR/src: a file of text, one of 100 KiB of noise in a subdirectory, an empty file and a
 * symlink (6 entries with the root).
 */
static inline void tree_make(const char *dir)
{
	char p[PATH_MAX];
	static uint8_t noise[100 << 10];
	uint64_t seed = 26;

	path_fmt(p, "%s/src", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	path_fmt(p, "%s/src/sub", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	path_fmt(p, "%s/src/a.txt", dir);
	write_file(p, "hello\n", 6);
	prng_fill(&seed, noise, sizeof(noise));
	path_fmt(p, "%s/src/sub/b.bin", dir);
	write_file(p, noise, sizeof(noise));
	path_fmt(p, "%s/src/empty", dir);
	write_file(p, "", 0);
	path_fmt(p, "%s/src/link", dir);
	assert_int_equal(symlink("a.txt", p), 0);
}

/* The options of an import of src into DIR/store, the manifest at out (one thread). */
static inline struct import_opts import_opts_make(const char *src, const char *store,
						  const char *out)
{
	return (struct import_opts){ .src = src, .store_dir = store, .init = true,
				     .output = out, .chunk_size = CHUNK_SIZE_DEFAULT,
				     .level = CHUNK_LEVEL_DEFAULT, .threads = 1 };
}

/* DIR/src (tree_make) imported into DIR/store: the manifest DIR/img.manifest, loaded. */
static inline struct manifest *manifest_make(const char *dir)
{
	char src[PATH_MAX], store[PATH_MAX], mf[PATH_MAX], why[512];
	struct import_result ir;
	struct import_opts io;
	struct manifest *m;
	char mwhy[WHY_MAX] = "";

	tree_make(dir);
	path_fmt(src, "%s/src", dir);
	path_fmt(store, "%s/store", dir);
	path_fmt(mf, "%s/img.manifest", dir);
	io = import_opts_make(src, store, mf);
	assert_int_equal(import_run(&io, &ir, why, sizeof(why)), 0);
	assert_int_equal(manifest_load(mf, &m, mwhy, sizeof(mwhy)), 0);
	return m;
}

/* manifest_make, then DIR/img.layout of size bytes. */
static inline void image_make(const char *dir, uint64_t size, struct mkfs_result *res)
{
	char lay[PATH_MAX], why[512];
	struct mkfs_opts mo = { .size = size };
	struct manifest *m = manifest_make(dir);

	path_fmt(lay, "%s/img.layout", dir);
	assert_int_equal(mkfs_run(m, &mo, lay, res, why, sizeof(why)), 0);
	manifest_free(m);
}

#endif
