/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the layout's versions (layout/read.c, chain.c, write.c): files of the
 * older versions 1 and 2, built byte by byte here from docs/formats.md, still read; the
 * writer writes version 3, where a metadata run's `layer` is a layer index; a non-zero
 * `layer` in an older file, and a version newer than 3, are refused.
 */
#include "../helpers.h"

#include "../../../common/crc32c.h"
#include "../../../common/fsutil.h"
#include "../../../common/sha256.h"
#include "../../../layout/layout.h"

#define BLK DISK_BLOCK
#define NBLOCKS 16
#define V1 1u /* no parent, metadata runs' field reserved (0) */
#define V2 2u /* a layer over a parent (flag 1), the field reserved (0) */
#define V3 3u /* either, by the flag; the field is a layer index */

struct fixture {
	char dir[PATH_MAX];
	char base[PATH_MAX];  /* DIR/base.layout */
	char top[PATH_MAX];   /* DIR/top.layout */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	tmpdir_make(f->dir);
	path_fmt(f->base, "%s/base.layout", f->dir);
	path_fmt(f->top, "%s/top.layout", f->dir);
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

/* ------------------------------------------------------------------ a file, by hand */

struct raw {
	uint32_t version, flags;
	uint8_t parent[SHA256_LEN];     /* with flag 1 */
	const char *hint;               /* with flag 1 */
	unsigned n_meta_blocks, n_meta, n_data, n_chunks;
	uint8_t meta_blocks[2][BLK];
	struct layout_meta_run meta[2];
	struct layout_data_run data[2];
	uint8_t chunks[2][SHA256_LEN];
};

static void raw_meta(struct raw *r, uint64_t lba, uint64_t first, uint32_t count,
		     uint32_t layer)
{
	struct layout_meta_run *m = &r->meta[r->n_meta++];

	m->lba = lba;
	m->first = first;
	m->count = count;
	m->layer = layer;
}

static void raw_data(struct raw *r, uint64_t lba, uint32_t len, uint32_t chunk,
		     uint32_t chunk_off, uint16_t flags)
{
	struct layout_data_run *d = &r->data[r->n_data++];

	memset(d, 0, sizeof(*d));
	d->lba = lba;
	d->len = len;
	d->chunk = chunk;
	d->chunk_off = chunk_off;
	d->flags = flags;
}

/* Writes r to path as docs/formats.md lays it out; its layout digest into digest. */
static void raw_write(const char *path, const struct raw *r, uint8_t digest[SHA256_LEN])
{
	size_t hint_len = r->hint ? strlen(r->hint) : 0;
	size_t len = BLK + (size_t)r->n_meta_blocks * BLK +
		     r->n_meta * sizeof(struct layout_meta_run) +
		     r->n_data * sizeof(struct layout_data_run) + r->n_chunks * SHA256_LEN +
		     hint_len;
	uint8_t *b = calloc(1, len), *p = b + BLK;
	struct layout_header h = { .version = r->version, .flags = r->flags };
	struct layout_parent par = { .hint_len = (uint32_t)hint_len };
	bool has_par = (r->flags & LAYOUT_F_PARENT) && r->version != V1;
	size_t crc_len = sizeof(h) + (has_par ? sizeof(par) : 0);

	assert_non_null(b);
	memcpy(h.magic, LAYOUT_MAGIC, sizeof(h.magic));
	h.block_size = BLK;
	h.block_count = NBLOCKS;
	h.meta_blocks = r->n_meta_blocks;
	h.meta_run_count = r->n_meta;
	h.data_run_count = r->n_data;
	h.chunk_count = r->n_chunks;
	h.chunk_size = 65536;
	memcpy(par.digest, r->parent, SHA256_LEN);
	memcpy(p, r->meta_blocks, (size_t)r->n_meta_blocks * BLK);
	p += (size_t)r->n_meta_blocks * BLK;
	memcpy(p, r->meta, r->n_meta * sizeof(r->meta[0]));
	p += r->n_meta * sizeof(r->meta[0]);
	memcpy(p, r->data, r->n_data * sizeof(r->data[0]));
	p += r->n_data * sizeof(r->data[0]);
	memcpy(p, r->chunks, r->n_chunks * SHA256_LEN);
	p += r->n_chunks * SHA256_LEN;
	if (hint_len)
		memcpy(p, r->hint, hint_len);
	assert_int_equal(sha256_buf(b + BLK, len - BLK, h.body_sha256), 0);
	memcpy(b, &h, sizeof(h));
	if (has_par)
		memcpy(b + sizeof(h), &par, sizeof(par));
	h.header_crc = crc32c(~0u, b, crc_len);
	memcpy(b, &h, sizeof(h));
	assert_int_equal(sha256_buf(b, BLK, digest), 0);
	write_file(path, b, len);
	free(b);
}

/* A base without parent: metadata blocks 'a' 'b' at disk blocks 0-1, 8 KiB of chunk 0 at 4. */
static void raw_base(struct raw *r, uint32_t version)
{
	memset(r, 0, sizeof(*r));
	r->version = version;
	r->n_meta_blocks = 2;
	memset(r->meta_blocks[0], 'a', BLK);
	memset(r->meta_blocks[1], 'b', BLK);
	raw_meta(r, 0, 0, 2, 0);
	raw_data(r, 4, 2 * BLK, 0, 0, 0);
	r->n_chunks = 1;
	memset(r->chunks[0], 0x11, SHA256_LEN);
}

/* A layer over parent: metadata block 'c' at disk block 1, block 4 zeroed. */
static void raw_layer(struct raw *r, uint32_t version, const uint8_t parent[SHA256_LEN])
{
	memset(r, 0, sizeof(*r));
	r->version = version;
	r->flags = LAYOUT_F_PARENT;
	memcpy(r->parent, parent, SHA256_LEN);
	r->hint = "base.layout";
	r->n_meta_blocks = 1;
	memset(r->meta_blocks[0], 'c', BLK);
	raw_meta(r, 1, 0, 1, 0);
	raw_data(r, 4, BLK, 0, 0, LAYOUT_RUN_ZERO);
}

static void expect_block(const struct layout *l, uint64_t lba, int c)
{
	uint8_t buf[BLK], want[BLK];

	memset(want, c, BLK);
	assert_int_equal(layout_read_meta(l, lba, buf), 1);
	assert_memory_equal(buf, want, BLK);
}

static void expect_bad(const char *path, const char *why_want)
{
	struct layout *l = (struct layout *)0x1;
	char why[WHY_MAX] = "";

	assert_int_equal(layout_open(path, &l, why, sizeof(why)), -EBADMSG);
	assert_ptr_equal(l, (struct layout *)0x1);
	assert_true(why[0]);
	if (!strstr(why, why_want))
		fail_msg("why: got '%s', want '%s'", why, why_want);
}

/* ------------------------------------------------------------------ older versions */

static void test_v1_reads(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN];
	struct layout *l;
	char why[WHY_MAX] = "";
	struct raw r;

	raw_base(&r, V1);
	raw_write(f->base, &r, digest);
	assert_int_equal(layout_open(f->base, &l, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(l->hdr.version, V1);
	assert_memory_equal(l->digest, digest, SHA256_LEN);
	assert_int_equal(l->n_layers, 1);
	expect_block(l, 0, 'a');
	expect_block(l, 1, 'b');
	assert_int_equal(l->hdr.data_run_count, 1);
	assert_int_equal(l->data_runs[0].lba, 4);
	assert_int_equal(l->data_runs[0].len, 2 * BLK);
	layout_close(l);
}

static void test_v2_reads(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN];
	struct layout *l;
	char why[WHY_MAX] = "";
	struct raw r;

	raw_base(&r, V1);
	raw_write(f->base, &r, digest);
	raw_layer(&r, V2, digest);
	raw_write(f->top, &r, digest);
	assert_int_equal(layout_open(f->top, &l, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(l->hdr.version, V2);
	assert_int_equal(l->n_layers, 2);
	expect_block(l, 0, 'a');
	expect_block(l, 1, 'c');
	/* block 4 is the layer's zeros: the base's run goes on at block 5 */
	assert_int_equal(l->hdr.data_run_count, 1);
	assert_int_equal(l->data_runs[0].lba, 5);
	assert_int_equal(l->data_runs[0].chunk_off, BLK);
	layout_close(l);
}

/* The field was reserved in versions 1 and 2: anything but 0 is refused, as it was. */
static void test_old_layer_field_refused(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN];
	struct raw r;

	raw_base(&r, V1);
	r.meta[0].layer = 1;
	raw_write(f->base, &r, digest);
	expect_bad(f->base, "bad metadata run");
	raw_base(&r, V1);
	raw_write(f->base, &r, digest);
	raw_layer(&r, V2, digest);
	r.meta[0].layer = 1;
	raw_write(f->top, &r, digest);
	expect_bad(f->top, "bad metadata run");
}

/* ------------------------------------------------------------------ version 3 */

static uint32_t file_u32(const char *path, size_t off)
{
	uint8_t *b;
	uint32_t v;
	size_t len;

	assert_int_equal(fs_read_file(path, &b, &len), 0);
	assert_true(len >= off + sizeof(v));
	memcpy(&v, b + off, sizeof(v));
	free(b);
	return v;
}

static void test_v3_written(void **state)
{
	struct fixture *f = *state;
	uint8_t blocks[2][BLK], digest[SHA256_LEN], chunk[SHA256_LEN] = { 9 };
	struct layout_writer *w;
	struct layout *l;

	memset(blocks[0], 'a', BLK);
	memset(blocks[1], 'c', BLK);
	assert_int_equal(layout_writer_new(f->base, NBLOCKS, &w), 0);
	assert_int_equal(layout_add_meta(w, 0, blocks[0], 1), 0);
	assert_int_equal(layout_add_data(w, 4 * BLK, BLK, chunk, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, digest), 0);
	layout_writer_free(w);
	assert_int_equal(file_u32(f->base, offsetof(struct layout_header, version)), V3);
	assert_int_equal(file_u32(f->base, offsetof(struct layout_header, flags)), 0);

	assert_int_equal(layout_writer_new(f->top, NBLOCKS, &w), 0);
	assert_int_equal(layout_writer_set_parent(w, digest, "base.layout"), 0);
	assert_int_equal(layout_add_meta(w, 1, blocks[1], 1), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(file_u32(f->top, offsetof(struct layout_header, version)), V3);
	assert_int_equal(file_u32(f->top, offsetof(struct layout_header, flags)),
			 LAYOUT_F_PARENT);

	assert_int_equal(layout_open(f->top, &l, NULL, 0), 0);
	assert_int_equal(l->hdr.version, V3);
	assert_int_equal(l->n_layers, 2);
	expect_block(l, 0, 'a');
	expect_block(l, 1, 'c');
	assert_int_equal(l->hdr.meta_run_count, 2);
	assert_int_equal(l->meta_runs[0].layer, 1);
	assert_int_equal(l->meta_runs[1].layer, 0);
	layout_close(l);
}

/* Version 3: a layer's metadata run may name its parent's area (layer 1). */
static void test_v3_layer_index(void **state)
{
	struct fixture *f = *state;
	uint8_t base[SHA256_LEN], digest[SHA256_LEN];
	struct layout *l;
	char why[WHY_MAX] = "";
	struct raw r;

	raw_base(&r, V1);
	raw_write(f->base, &r, base);
	raw_layer(&r, V3, base);
	raw_meta(&r, 3, 1, 1, 1); /* disk block 3: the base's block 'b' */
	raw_write(f->top, &r, digest);
	assert_int_equal(layout_open(f->top, &l, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	expect_block(l, 0, 'a');
	expect_block(l, 1, 'c');
	expect_block(l, 3, 'b');
	assert_int_equal(l->meta_runs[2].lba, 3);
	assert_int_equal(l->meta_runs[2].layer, 1);
	layout_close(l);

	/* a layer beyond the chain, blocks beyond that layer's area */
	r.meta[1].layer = 2;
	raw_write(f->top, &r, digest);
	expect_bad(f->top, "names layer 2 of a chain of 2");
	r.meta[1].layer = 1;
	r.meta[1].first = 2;
	raw_write(f->top, &r, digest);
	expect_bad(f->top, "beyond the metadata area of");
	r.meta[1].lba = 2;
	r.meta[1].first = 1;
	r.meta[1].count = 2;
	raw_write(f->top, &r, digest);
	expect_bad(f->top, "beyond the metadata area of");
	/* a file without parent has one layer */
	raw_base(&r, V3);
	r.meta[0].layer = 1;
	raw_write(f->base, &r, base);
	expect_bad(f->base, "bad metadata run");
}

static void test_unknown_versions(void **state)
{
	struct fixture *f = *state;
	uint8_t digest[SHA256_LEN];
	struct raw r;

	raw_base(&r, 4);
	raw_write(f->base, &r, digest);
	expect_bad(f->base, "unsupported layout version (newer than this lazyblk reads: 1 to 3)");
	raw_base(&r, UINT32_MAX);
	raw_write(f->base, &r, digest);
	expect_bad(f->base, "newer than this lazyblk reads");
	raw_base(&r, 0);
	raw_write(f->base, &r, digest);
	expect_bad(f->base, "unsupported layout version");
	/* version 1 has no flags; version 3 knows only the parent flag */
	raw_base(&r, V1);
	r.flags = LAYOUT_F_PARENT;
	raw_write(f->base, &r, digest);
	expect_bad(f->base, "unsupported flags");
	raw_base(&r, V3);
	r.flags = 2;
	raw_write(f->base, &r, digest);
	expect_bad(f->base, "unsupported flags");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_v1_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v2_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_layer_field_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v3_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_v3_layer_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_versions, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
