/* SPDX-License-Identifier: MIT */
/*
 * blkd_commit, the library's entry point of `lazyblk commit`: an overlay with a written
 * block and a zeroed one becomes a layer over its layout (a data run where the block was
 * written, whose chunk holds its bytes, in the store; the zeroed block reads as zeros), or
 * with flatten a layout of the whole disk; an overlay of another layout is refused with one
 * reason and nothing is written.
 */
#include "../pipeline.h"
#include "../../../blkd/overlay/commit.h"
#include "../../../blkd/overlay/overlay.h"
#include "../../../cas/chunk.h"
#include "../../../layout/layout.h"

#define SIZE (256ull << 20)
#define WRITTEN 5000u   /* a block past the image's data */
#define ZEROED 5001u

/* DIR/ov: an overlay of DIR/img.layout with block WRITTEN of pattern and ZEROED zeroed. */
static void overlay_make(const char *dir, const uint8_t digest[SHA256_LEN], uint8_t *pattern)
{
	char ov_path[PATH_MAX];
	struct overlay *ov;
	char why[WHY_MAX] = "";
	uint64_t seed = 7;

	prng_fill(&seed, pattern, DISK_BLOCK);
	path_fmt(ov_path, "%s/ov", dir);
	assert_int_equal(overlay_open(ov_path, SIZE, digest, true, &ov, why, sizeof(why)), 0);
	assert_int_equal(overlay_write(ov, WRITTEN, 1, pattern), 0);
	assert_int_equal(overlay_zero(ov, ZEROED, 1), 0);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
}

static struct blkd_commit_opts commit_opts(const char *dir, char *ov, char *base, char *store,
					   char *out)
{
	path_fmt(ov, "%s/ov", dir);
	path_fmt(base, "%s/img.layout", dir);
	path_fmt(store, "%s/store", dir);
	path_fmt(out, "%s/new.layout", dir);
	return (struct blkd_commit_opts){ .src_path = ov, .base_path = base, .store_dir = store,
					  .out_path = out, .level = CHUNK_LEVEL_DEFAULT };
}

/* The bytes of the block at lba of l, from its data run's chunk in store. */
static void data_block(const struct layout *l, const char *store_dir, uint64_t lba,
		       uint8_t *out)
{
	const struct layout_data_run *d = &l->data_runs[layout_data_run_at(l, lba * DISK_BLOCK)];
	struct chunk_codec *c = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	char why[WHY_MAX] = "";
	struct store *s;
	uint8_t *frame, *raw = malloc(CHUNK_SIZE_MAX);
	size_t flen, rlen;

	assert_non_null(c);
	assert_non_null(raw);
	assert_int_equal(d->lba, lba);
	assert_int_equal(d->len, DISK_BLOCK);
	assert_int_equal(store_open(store_dir, false, &s), 0);
	assert_int_equal(store_read(s, l->chunks[d->chunk], &frame, &flen), 0);
	/* the chunk is the one its name says */
	assert_int_equal(chunk_verify(c, l->chunks[d->chunk], frame, flen, raw, CHUNK_SIZE_MAX,
				      &rlen, why, sizeof(why)), 0);
	assert_true(d->chunk_off + DISK_BLOCK <= rlen);
	memcpy(out, raw + d->chunk_off, DISK_BLOCK);
	free(raw);
	free(frame);
	chunk_codec_free(c);
	store_close(s);
}

/* An overlay committed as a layer over its layout, or flattened: what the new layout holds. */
static void commit_case(bool flatten)
{
	char dir[PATH_MAX], ov[PATH_MAX], base[PATH_MAX], store[PATH_MAX], out[PATH_MAX];
	char why[512];
	uint8_t pattern[DISK_BLOCK], got[DISK_BLOCK];
	struct blkd_commit_result r;
	struct blkd_commit_opts o;
	struct mkfs_result mr;
	struct layout *l;
	char lwhy[WHY_MAX] = "";
	size_t z;

	tmpdir_make(dir);
	image_make(dir, SIZE, &mr);
	overlay_make(dir, mr.digest, pattern);
	o = commit_opts(dir, ov, base, store, out);
	o.flatten = flatten;
	assert_int_equal(blkd_commit(&o, &r, why, sizeof(why)), 0);
	assert_int_equal(r.blocks, 1);
	assert_int_equal(r.zero_blocks, 1);
	assert_true(r.chunks >= 1);
	assert_int_equal(layout_open(out, &l, lwhy, sizeof(lwhy)), 0);
	assert_memory_equal(l->digest, r.digest, SHA256_LEN);
	if (flatten) {
		assert_string_equal(r.hint, "");
		assert_int_equal(l->n_layers, 1);
		assert_int_equal(l->hdr.version, LAYOUT_VERSION);
	} else {
		assert_string_not_equal(r.hint, "");
		assert_int_equal(l->n_layers, 2);
		assert_memory_equal(l->layers[1].digest, mr.digest, SHA256_LEN);
	}
	data_block(l, store, WRITTEN, got);
	assert_memory_equal(got, pattern, DISK_BLOCK);
	/* the zeroed block is in no run: it reads as zeros */
	z = layout_data_run_at(l, ZEROED * DISK_BLOCK);
	assert_true(z == l->hdr.data_run_count || l->data_runs[z].lba > ZEROED);
	layout_close(l);
	rm_rf(dir);
}

static void test_commit_layer(void **state)
{
	(void)state;
	commit_case(false);
}

static void test_commit_flatten(void **state)
{
	(void)state;
	commit_case(true);
}

static void test_commit_other_layout(void **state)
{
	char dir[PATH_MAX], ov[PATH_MAX], base[PATH_MAX], store[PATH_MAX], out[PATH_MAX];
	char why[512] = "";
	uint8_t pattern[DISK_BLOCK], other[SHA256_LEN];
	struct blkd_commit_result r;
	struct blkd_commit_opts o;
	struct mkfs_result mr;

	(void)state;
	tmpdir_make(dir);
	image_make(dir, SIZE, &mr);
	memcpy(other, mr.digest, SHA256_LEN);
	other[0] ^= 1;                             /* the overlay of another layout */
	overlay_make(dir, other, pattern);
	o = commit_opts(dir, ov, base, store, out);
	assert_true(blkd_commit(&o, &r, why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "layout"));
	assert_false(path_exists(out));
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_layer),
		cmocka_unit_test(test_commit_flatten),
		cmocka_unit_test(test_commit_other_layout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
