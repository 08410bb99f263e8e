/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for layouts with parents (layout/chain.c, flatten.c): the merged view of a chain
 * compared block for block with a model painted from the same descriptions, finding the
 * parent, refusing bad chains and bad layer files, and flattening.
 */
#include "../helpers.h"

#include "../../../common/crc32c.h"
#include "../../../common/fsutil.h"
#include "../../../common/sha256.h"
#include "../../../layout/layout.h"

#define BLK DISK_BLOCK
#define NBLOCKS 64
#define NCHUNKS 4

enum { META, DATA, ZERO };

/* One run of a layout: metadata blocks, a data run (pos: disk byte) or a zero run. */
struct op {
	int kind;
	uint64_t pos;          /* META, ZERO: block; DATA: disk byte */
	uint32_t len;          /* META, ZERO: blocks; DATA: bytes */
	int chunk;
	uint32_t chunk_off;
};

struct fixture {
	char dir[PATH_MAX];
	uint8_t cd[NCHUNKS][SHA256_LEN];   /* the chunks' digests (their bytes: chunk_byte) */
	uint8_t want[NBLOCKS][BLK];        /* the model of the disk */
};

static uint8_t chunk_byte(int c, uint32_t off)
{
	return (uint8_t)(c * 61 + off * 7 + off / 4099 + 1);
}

static void meta_fill(uint8_t *b, int layer, uint64_t lba)
{
	uint64_t seed = (uint64_t)layer * 1000 + lba + 1;

	prng_fill(&seed, b, BLK);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char name[16];

	if (!f)
		return -1;
	tmpdir_make(f->dir);
	for (int c = 0; c < NCHUNKS; c++) {
		snprintf(name, sizeof(name), "chunk %d", c);
		sha256_buf(name, strlen(name), f->cd[c]);
	}
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

/* Write ops (sorted) as layer `layer` at DIR/name, over parent (NULL: none). */
static void layer_write(struct fixture *f, const char *name, int layer, const struct op *ops,
			size_t n, uint64_t blocks, const uint8_t *parent, const char *hint,
			uint8_t digest[SHA256_LEN])
{
	struct layout_writer *w;
	char path[PATH_MAX];
	uint8_t b[BLK];

	path_fmt(path, "%s/%s", f->dir, name);
	assert_int_equal(layout_writer_new(path, blocks, &w), 0);
	if (parent)
		assert_int_equal(layout_writer_set_parent(w, parent, hint), 0);
	for (size_t i = 0; i < n; i++) {
		const struct op *o = &ops[i];

		if (o->kind == META) {
			for (uint32_t k = 0; k < o->len; k++) {
				meta_fill(b, layer, o->pos + k);
				assert_int_equal(layout_add_meta(w, o->pos + k, b, 1), 0);
			}
		} else if (o->kind == ZERO) {
			assert_int_equal(layout_add_zero(w, o->pos, o->len), 0);
		} else {
			assert_int_equal(layout_add_data(w, o->pos, o->len, f->cd[o->chunk],
							 o->chunk_off), 0);
		}
	}
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, digest), 0);
	layout_writer_free(w);
}

/* Paint ops over the model: a child's blocks are wholly its own. */
static void paint(struct fixture *f, int layer, const struct op *ops, size_t n, bool child)
{
	for (size_t i = 0; i < n; i++) {
		const struct op *o = &ops[i];
		uint64_t first = o->kind == DATA ? o->pos / BLK : o->pos;
		uint64_t count = o->kind == DATA ? (o->pos % BLK + o->len + BLK - 1) / BLK : o->len;

		for (uint64_t k = 0; child && k < count; k++)
			memset(f->want[first + k], 0, BLK);
		for (uint64_t k = 0; o->kind == META && k < count; k++)
			meta_fill(f->want[first + k], layer, first + k);
		for (uint32_t k = 0; o->kind == DATA && k < o->len; k++)
			f->want[(o->pos + k) / BLK][(o->pos + k) % BLK] =
				chunk_byte(o->chunk, o->chunk_off + k);
	}
}

/* Block lba of the view, read through the layout functions; chunks by their digest. */
static void view_block(struct fixture *f, const struct layout *l, uint64_t lba, uint8_t *b)
{
	uint64_t s = lba * BLK;
	int c;

	memset(b, 0, BLK);
	if (layout_read_meta(l, lba, b) == 1)
		return;
	for (size_t i = layout_data_run_at(l, s); i < l->hdr.data_run_count; i++) {
		const struct layout_data_run *d = &l->data_runs[i];
		uint64_t p = layout_data_run_pos(d);

		if (p >= s + BLK)
			break;
		for (c = 0; c < NCHUNKS; c++)
			if (!memcmp(l->chunks[d->chunk], f->cd[c], SHA256_LEN))
				break;
		assert_true(c < NCHUNKS);
		for (uint32_t k = 0; k < d->len; k++)
			if (p + k >= s && p + k < s + BLK)
				b[p + k - s] = chunk_byte(c, d->chunk_off + k);
	}
}

/* view_check with layout_open_flags. */
static void view_check_flags(struct fixture *f, const char *name, unsigned flags,
			     unsigned layers)
{
	char why[WHY_MAX] = "";
	struct layout *l;
	char path[PATH_MAX];
	uint8_t b[BLK];

	path_fmt(path, "%s/%s", f->dir, name);
	if (layout_open_flags(path, flags, &l, why, sizeof(why)))
		fail_msg("layout_open %s: %s", name, why[0] ? why : "?");
	assert_int_equal(l->n_layers, layers);
	for (uint64_t lba = 0; lba < NBLOCKS; lba++) {
		view_block(f, l, lba, b);
		if (memcmp(b, f->want[lba], BLK))
			fail_msg("%s: block %llu differs from the model", name,
				 (unsigned long long)lba);
	}
	/* the view is sorted and disjoint, and names each chunk once */
	for (uint64_t i = 1; i < l->hdr.data_run_count; i++)
		assert_true(layout_data_run_pos(&l->data_runs[i]) >=
			    layout_data_run_pos(&l->data_runs[i - 1]) + l->data_runs[i - 1].len);
	for (uint64_t i = 0; i < l->hdr.chunk_count; i++)
		for (uint64_t k = 0; k < i; k++)
			assert_memory_not_equal(l->chunks[i], l->chunks[k], SHA256_LEN);
	layout_close(l);
}

static void view_check(struct fixture *f, const char *name, unsigned layers)
{
	view_check_flags(f, name, 0, layers);
}

/* base: metadata 0-1 and 10-12, a data run over 3-6, packed tails in 8, data at 20-21 */
static const struct op base_ops[] = {
	{ META, 0, 2, 0, 0 },
	{ DATA, 3 * BLK, 4 * BLK, 0, 100 },
	{ DATA, 8 * BLK, 100, 1, 0 },
	{ DATA, 8 * BLK + 512, 200, 2, 3 },
	{ META, 10, 3, 0, 0 },
	{ DATA, 20 * BLK, 2 * BLK, 2, 4096 },
};
/* child: rewrites 4 (inside the data run) with metadata, 8 (the tails), 11 (metadata),
 * zeroes 20-21 (data) */
static const struct op child_ops[] = {
	{ META, 4, 1, 0, 0 },
	{ DATA, 8 * BLK, BLK, 3, 0 },
	{ META, 11, 1, 0, 0 },
	{ ZERO, 20, 2, 0, 0 },
};
/* grandchild: zeroes 0 (the base's metadata), data over 4 (the child's metadata) and 6
 * (the base's data run), metadata at 30 (a hole before) */
static const struct op grand_ops[] = {
	{ ZERO, 0, 1, 0, 0 },
	{ DATA, 4 * BLK, BLK, 1, 8192 },
	{ DATA, 6 * BLK, BLK, 0, 0 },
	{ META, 30, 1, 0, 0 },
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* base.layout, child.layout (over base), grand.layout (over child); the model of grand. */
static void chain_make(struct fixture *f, uint8_t d[3][SHA256_LEN])
{
	layer_write(f, "base.layout", 0, base_ops, N(base_ops), NBLOCKS, NULL, NULL, d[0]);
	layer_write(f, "child.layout", 1, child_ops, N(child_ops), NBLOCKS, d[0], "base.layout",
		    d[1]);
	layer_write(f, "grand.layout", 2, grand_ops, N(grand_ops), NBLOCKS, d[1],
		    "child.layout", d[2]);
}

static void test_chain_views(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN];

	chain_make(f, d);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	view_check(f, "base.layout", 1);
	paint(f, 1, child_ops, N(child_ops), true);
	view_check(f, "child.layout", 2);
	paint(f, 2, grand_ops, N(grand_ops), true);
	view_check(f, "grand.layout", 3);
}

static void test_chain_layers(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN];
	struct layout *l;
	char path[PATH_MAX];

	chain_make(f, d);
	path_fmt(path, "%s/grand.layout", f->dir);
	assert_int_equal(layout_open(path, &l, NULL, 0), 0);
	assert_int_equal(l->n_layers, 3);
	assert_memory_equal(l->digest, d[2], SHA256_LEN);
	for (int k = 0; k < 3; k++)
		assert_memory_equal(l->layers[k].digest, d[2 - k], SHA256_LEN);
	assert_int_equal(l->layers[0].hdr.version, LAYOUT_VERSION);
	assert_int_equal(l->layers[0].hdr.flags, LAYOUT_F_PARENT);
	assert_memory_equal(l->layers[0].parent.digest, d[1], SHA256_LEN);
	assert_string_equal(l->layers[0].hint, "child.layout");
	assert_int_equal(l->layers[2].hdr.version, LAYOUT_VERSION);
	assert_null(l->layers[2].hint);
	assert_non_null(strstr(l->layers[1].path, "child.layout"));
	/* zero runs are left out of the view; the chunks are the ones still used */
	for (uint64_t i = 0; i < l->hdr.data_run_count; i++)
		assert_int_equal(l->data_runs[i].flags, 0);
	assert_int_equal(l->hdr.chunk_count, 3); /* chunk 2 only had blocks the child zeroed */
	/* each layer's own chunk table stays (gc and push keep every layer's chunks) */
	assert_int_equal(l->layers[2].hdr.chunk_count, 3);
	assert_memory_equal(l->layers[2].chunks[2], f->cd[2], SHA256_LEN);
	assert_int_equal(l->layers[1].hdr.chunk_count, 1);
	assert_memory_equal(l->layers[1].chunks[0], f->cd[3], SHA256_LEN);
	assert_int_equal(l->layers[0].hdr.chunk_count, 2);
	layout_close(l);
}

static void test_flatten(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN], fd[SHA256_LEN];
	char path[PATH_MAX], flat[PATH_MAX], moved[PATH_MAX];
	struct layout *l;

	chain_make(f, d);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	paint(f, 1, child_ops, N(child_ops), true);
	paint(f, 2, grand_ops, N(grand_ops), true);
	path_fmt(path, "%s/grand.layout", f->dir);
	path_fmt(flat, "%s/flat.layout", f->dir);
	assert_int_equal(layout_open(path, &l, NULL, 0), 0);
	assert_int_equal(layout_flatten(l, flat, fd), 0);
	layout_close(l);
	/* the flat layout has no parent and needs none of the chain's files */
	path_fmt(path, "%s/base.layout", f->dir);
	path_fmt(moved, "%s/away", f->dir);
	assert_int_equal(rename(path, moved), 0);
	path_fmt(path, "%s/child.layout", f->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(layout_open(flat, &l, NULL, 0), 0);
	assert_int_equal(l->hdr.version, LAYOUT_VERSION);
	assert_int_equal(l->n_layers, 1);
	assert_memory_equal(l->digest, fd, SHA256_LEN);
	layout_close(l);
	view_check(f, "flat.layout", 1);
}

static void expect_open_fail_flags(struct fixture *f, const char *name, unsigned flags, int err,
				   const char *want)
{
	struct layout *l = (struct layout *)0x1;
	char why[WHY_MAX] = "";
	char path[PATH_MAX];

	path_fmt(path, "%s/%s", f->dir, name);
	assert_int_equal(layout_open_flags(path, flags, &l, why, sizeof(why)), err);
	assert_ptr_equal(l, (struct layout *)0x1);
	assert_true(why[0]);
	if (!strstr(why, want))
		fail_msg("why: got '%s', want '%s'", why, want);
}

static void expect_open_fail(struct fixture *f, const char *name, int err, const char *want)
{
	expect_open_fail_flags(f, name, 0, err, want);
}

static void test_parent_lookup(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN], other[SHA256_LEN];
	char base[PATH_MAX], alt[PATH_MAX], hex[SHA256_HEX_LEN + 1], want[PATH_MAX + 128];
	char moved[PATH_MAX];

	chain_make(f, d);
	path_fmt(base, "%s/base.layout", f->dir);
	sha256_to_hex(d[0], hex);
	path_fmt(alt, "%s/%s.layout", f->dir, hex);
	/* missing: one line naming the digest and both places looked at */
	assert_int_equal(rename(base, alt), 0);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	paint(f, 1, child_ops, N(child_ops), true);
	view_check(f, "child.layout", 2); /* found as DIR/HEX.layout */
	assert_int_equal(unlink(alt), 0);
	snprintf(want, sizeof(want), "base layout sha256:%s not found (looked for ", hex);
	expect_open_fail(f, "child.layout", -ENOENT, want);
	expect_open_fail(f, "grand.layout", -ENOENT, ".layout and ");
	/* another layout at the hint: refused, naming it */
	layer_write(f, "base.layout", 5, child_ops, 1, NBLOCKS, NULL, NULL, other);
	snprintf(want, sizeof(want), "base layout %s is not sha256:%s", base, hex);
	expect_open_fail(f, "child.layout", -EBADMSG, want);
	/* a corrupt file at the hint */
	write_file(base, "LZBKLAYTxx", 10);
	snprintf(want, sizeof(want), "base layout %s: truncated", base);
	expect_open_fail(f, "child.layout", -EBADMSG, want);
	/* another layout at DIR/HEX.layout, nothing at the hint */
	assert_int_equal(unlink(base), 0);
	layer_write(f, "x.layout", 5, child_ops, 1, NBLOCKS, NULL, NULL, other);
	path_fmt(base, "%s/x.layout", f->dir);
	assert_int_equal(rename(base, alt), 0);
	snprintf(want, sizeof(want), "base layout %s is not sha256:%s", alt, hex);
	expect_open_fail(f, "child.layout", -EBADMSG, want);
	/* the base at DIR/HEX.layout is used whatever is at the hint */
	path_fmt(base, "%s/base.layout", f->dir);
	write_file(base, "junk", 4);
	layer_write(f, "b2.layout", 0, base_ops, N(base_ops), NBLOCKS, NULL, NULL, other);
	path_fmt(moved, "%s/b2.layout", f->dir);
	assert_int_equal(rename(moved, alt), 0);
	view_check(f, "child.layout", 2);
}

static void test_bad_chains(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN], x[SHA256_LEN];

	chain_make(f, d);
	/* a child of another disk size */
	layer_write(f, "small.layout", 1, child_ops, 1, NBLOCKS / 2, d[0], "base.layout", x);
	expect_open_fail(f, "small.layout", -EBADMSG, "has another disk size than");
	/* a layer naming itself (no file can carry its own digest, so that is a mismatch) */
	layer_write(f, "self.layout", 1, child_ops, 1, NBLOCKS, d[0], "self.layout", x);
	expect_open_fail(f, "self.layout", -EBADMSG, "is not sha256:");
	/* a parent hint that leaves the directory, absolute */
	{
		char abs[PATH_MAX];

		path_fmt(abs, "%s/base.layout", f->dir);
		layer_write(f, "abs.layout", 1, child_ops, N(child_ops), NBLOCKS, d[0], abs, x);
		memset(f->want, 0, sizeof(f->want));
		paint(f, 0, base_ops, N(base_ops), false);
		paint(f, 1, child_ops, N(child_ops), true);
		view_check(f, "abs.layout", 2);
	}
}

/* DIR/name moved to DIR/layouts/<hex of d>.layout (as a fetch names it); that name into rel. */
static void as_fetched(struct fixture *f, const char *name, const uint8_t d[SHA256_LEN],
		       char rel[PATH_MAX])
{
	char from[PATH_MAX], to[PATH_MAX], hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	path_fmt(rel, "layouts/%s.layout", hex);
	path_fmt(from, "%s/%s", f->dir, name);
	path_fmt(to, "%s/%s", f->dir, rel);
	assert_int_equal(rename(from, to), 0);
}

/*
 * A FIFO at a parent hint is never opened (on 7515cfa layout_open blocked on it for good):
 * the parent is then the one named by its digest beside the child, and without one the
 * reason says what is at the hint. An alarm turns a hang into a failure.
 */
static void test_hint_fifo(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN];
	char base[PATH_MAX], alt[PATH_MAX], hex[SHA256_HEX_LEN + 1], want[PATH_MAX + 64];

	chain_make(f, d);
	path_fmt(base, "%s/base.layout", f->dir);
	sha256_to_hex(d[0], hex);
	path_fmt(alt, "%s/%s.layout", f->dir, hex);
	assert_int_equal(rename(base, alt), 0);
	assert_int_equal(mkfifo(base, 0644), 0);
	alarm(20);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	paint(f, 1, child_ops, N(child_ops), true);
	view_check(f, "child.layout", 2);
	assert_int_equal(unlink(alt), 0);
	snprintf(want, sizeof(want), "base layout %s: not a regular file", base);
	expect_open_fail(f, "child.layout", -EINVAL, want);
	alarm(0);
}

/*
 * An image fetched by reference (LAYOUT_OPEN_FETCHED): every parent only as
 * DIR/<digest>.layout, whatever the hint names (a FIFO beside it, a FIFO through "..", a
 * good base at the hint); an absolute hint is refused; a link at DIR/<digest>.layout is not
 * followed. On 7515cfa the hints were opened (and a FIFO blocked the open for good).
 */
static void test_fetched(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN], x[SHA256_LEN];
	char p[PATH_MAX], q[PATH_MAX], top[PATH_MAX], mid[PATH_MAX], bot[PATH_MAX];
	char want[2 * PATH_MAX + 128];
	char hex[SHA256_HEX_LEN + 1];

	path_fmt(p, "%s/layouts", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	layer_write(f, "base.layout", 0, base_ops, N(base_ops), NBLOCKS, NULL, NULL, d[0]);
	layer_write(f, "child.layout", 1, child_ops, N(child_ops), NBLOCKS, d[0], "../x", d[1]);
	layer_write(f, "grand.layout", 2, grand_ops, N(grand_ops), NBLOCKS, d[1], "fifo", d[2]);
	path_fmt(p, "%s/x", f->dir);
	assert_int_equal(mkfifo(p, 0644), 0);
	path_fmt(p, "%s/layouts/fifo", f->dir);
	assert_int_equal(mkfifo(p, 0644), 0);
	as_fetched(f, "base.layout", d[0], bot);
	as_fetched(f, "child.layout", d[1], mid);
	as_fetched(f, "grand.layout", d[2], top);
	alarm(20);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	paint(f, 1, child_ops, N(child_ops), true);
	paint(f, 2, grand_ops, N(grand_ops), true);
	view_check_flags(f, top, LAYOUT_OPEN_FETCHED, 3);

	/* a good base at the hint is not used either: only by its digest */
	sha256_to_hex(d[0], hex);
	path_fmt(p, "%s/%s", f->dir, bot);
	path_fmt(q, "%s/layouts/base.layout", f->dir);
	assert_int_equal(rename(p, q), 0);
	layer_write(f, "layouts/c2.layout", 1, child_ops, N(child_ops), NBLOCKS, d[0],
		    "base.layout", x);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	paint(f, 1, child_ops, N(child_ops), true);
	view_check_flags(f, "layouts/c2.layout", 0, 2);
	snprintf(want, sizeof(want), "base layout sha256:%s not found (looked for %s/%s)", hex,
		 f->dir, bot);
	expect_open_fail_flags(f, "layouts/c2.layout", LAYOUT_OPEN_FETCHED, -ENOENT, want);
	/* a link at DIR/<digest>.layout is not followed */
	path_fmt(p, "%s/%s", f->dir, bot);
	assert_int_equal(symlink(q, p), 0);
	expect_open_fail_flags(f, "layouts/c2.layout", LAYOUT_OPEN_FETCHED, -ELOOP, "base layout");
	assert_int_equal(unlink(p), 0);
	assert_int_equal(rename(q, p), 0);
	view_check_flags(f, "layouts/c2.layout", LAYOUT_OPEN_FETCHED, 2);
	/* an absolute hint: refused, whatever it names */
	path_fmt(p, "%s/x", f->dir);
	layer_write(f, "layouts/abs.layout", 1, child_ops, N(child_ops), NBLOCKS, d[0], p, x);
	expect_open_fail_flags(f, "layouts/abs.layout", LAYOUT_OPEN_FETCHED, -EBADMSG,
			       "the parent hint is an absolute path (refused in an image fetched "
			       "by reference)");
	alarm(0);
}

/* A chain of 65 layers is refused; one of 64 opens. */
static void test_depth(void **state)
{
	struct fixture *f = *state;
	uint8_t d[SHA256_LEN], n[SHA256_LEN];
	const struct op z = { ZERO, 1, 1, 0, 0 };
	char name[32], hint[32];
	struct layout *l;
	char path[PATH_MAX];

	layer_write(f, "l0.layout", 0, base_ops, N(base_ops), NBLOCKS, NULL, NULL, d);
	for (int k = 1; k <= 64; k++) {
		snprintf(name, sizeof(name), "l%d.layout", k);
		snprintf(hint, sizeof(hint), "l%d.layout", k - 1);
		layer_write(f, name, k, &z, 1, NBLOCKS, d, hint, n);
		memcpy(d, n, SHA256_LEN);
	}
	path_fmt(path, "%s/l63.layout", f->dir);
	assert_int_equal(layout_open(path, &l, NULL, 0), 0);
	assert_int_equal(l->n_layers, 64);
	layout_close(l);
	expect_open_fail(f, "l64.layout", -ELOOP, "longer than 64 layers");
}

/* ------------------------------------------------------------------ hostile layers */

struct image {
	uint8_t *buf;
	size_t len;
	struct layout_header *h;
	struct layout_parent *p;
	struct layout_data_run *data;
};

static void image_load(const char *path, struct image *im)
{
	struct layout_meta_run *m;

	assert_int_equal(fs_read_file(path, &im->buf, &im->len), 0);
	im->h = (struct layout_header *)im->buf;
	im->p = (struct layout_parent *)(im->buf + sizeof(*im->h));
	m = (struct layout_meta_run *)(im->buf + BLK + im->h->meta_blocks * BLK);
	im->data = (struct layout_data_run *)(m + im->h->meta_run_count);
}

static void image_seal(const char *path, struct image *im)
{
	uint8_t b[sizeof(*im->h) + sizeof(*im->p)];

	assert_int_equal(sha256_buf(im->buf + BLK, im->len - BLK, im->h->body_sha256), 0);
	im->h->header_crc = 0;
	memcpy(b, im->buf, sizeof(b));
	im->h->header_crc = crc32c(~0u, b, sizeof(b));
	write_file(path, im->buf, im->len);
	free(im->buf);
}

static void test_bad_v2(void **state)
{
	struct fixture *f = *state;
	uint8_t d[3][SHA256_LEN];
	char child[PATH_MAX], p[PATH_MAX];
	struct image im;

	chain_make(f, d);
	path_fmt(child, "%s/child.layout", f->dir);
	path_fmt(p, "%s/edit.layout", f->dir);
#define CASE(want, edit)                              \
	do {                                          \
		image_load(child, &im);               \
		edit;                                 \
		image_seal(p, &im);                   \
		expect_open_fail(f, "edit.layout", -EBADMSG, want); \
	} while (0)

	/* sealing an unedited copy gives a valid layout */
	image_load(child, &im);
	image_seal(p, &im);
	memset(f->want, 0, sizeof(f->want));
	paint(f, 0, base_ops, N(base_ops), false);
	paint(f, 1, child_ops, N(child_ops), true);
	view_check(f, "edit.layout", 2);

	CASE("unsupported layout version", im.h->version = 2; im.h->flags = 0);
	CASE("unsupported layout version", im.h->version = 2; im.h->flags = 3);
	CASE("unsupported flags", im.h->flags = 3);
	CASE("unsupported layout version", im.h->version = 4);
	CASE("bad parent hint length", im.p->hint_len = 0);
	CASE("bad parent hint length", im.p->hint_len = LAYOUT_HINT_MAX + 1);
	CASE("bad parent hint length", im.p->reserved = 1);
	CASE("truncated", im.p->hint_len++);
	CASE("trailing garbage", im.p->hint_len--);
	CASE("a NUL byte in it", im.buf[im.len - 3] = 0);
	CASE("header padding not zero", im.buf[sizeof(*im.h) + sizeof(*im.p)] = 1);
	CASE("bad data run", im.data[0].blk_off = 1);
	CASE("bad data run", im.data[0].len = 100);
	CASE("bad data run", im.data[0].flags = 2);
	CASE("bad data run", im.data[1].chunk = 1); /* a zero run naming a chunk */
	CASE("chunk not in the chunk table", im.data[0].chunk = 1);
#undef CASE
	/* version 1 with the parent record after its header (its crc covering its own
	 * header only): the record is padding that must be zero */
	image_load(child, &im);
	im.h->version = LAYOUT_VERSION_V1;
	im.h->flags = 0;
	assert_int_equal(sha256_buf(im.buf + BLK, im.len - BLK, im.h->body_sha256), 0);
	im.h->header_crc = 0;
	im.h->header_crc = crc32c(~0u, im.buf, sizeof(*im.h));
	write_file(p, im.buf, im.len);
	free(im.buf);
	expect_open_fail(f, "edit.layout", -EBADMSG, "header padding not zero");
}

static void test_writer_v2(void **state)
{
	struct fixture *f = *state;
	struct layout_writer *w;
	char path[PATH_MAX], hint[LAYOUT_HINT_MAX + 2];
	uint8_t b[BLK] = { 0 };

	path_fmt(path, "%s/w.layout", f->dir);
	assert_int_equal(layout_writer_new(path, NBLOCKS, &w), 0);
	assert_int_equal(layout_add_zero(w, 1, 1), -EINVAL); /* no parent (yet) */
	assert_int_equal(layout_writer_set_parent(w, f->cd[0], ""), -EINVAL);
	memset(hint, 'a', sizeof(hint) - 1);
	hint[sizeof(hint) - 1] = 0;
	assert_int_equal(layout_writer_set_parent(w, f->cd[0], hint), -EINVAL);
	assert_int_equal(layout_writer_set_parent(w, f->cd[0], "p.layout"), 0);
	assert_int_equal(layout_add_data(w, 100, BLK, f->cd[1], 0), -EINVAL);
	assert_int_equal(layout_add_data(w, BLK, 100, f->cd[1], 0), -EINVAL);
	assert_int_equal(layout_add_zero(w, 0, 0), -EINVAL);
	assert_int_equal(layout_add_zero(w, NBLOCKS - 1, 2), -EINVAL);
	assert_int_equal(layout_add_zero(w, 2, 2), 0);
	assert_int_equal(layout_add_zero(w, 3, 1), -EINVAL); /* overlapping */
	assert_int_equal(layout_add_data(w, 4 * BLK, BLK, f->cd[1], 0), 0);
	assert_int_equal(layout_add_meta(w, 4, b, 1), 0);  /* a metadata block over data */
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), -EINVAL);
	layout_writer_free(w);
	assert_int_equal(layout_writer_new(path, NBLOCKS, &w), 0);
	assert_int_equal(layout_add_meta(w, 4, b, 1), 0);
	assert_int_equal(layout_writer_set_parent(w, f->cd[0], "p.layout"), -EINVAL);
	layout_writer_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_chain_views, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chain_layers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flatten, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parent_lookup, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_chains, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hint_fifo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fetched, setup, teardown),
		cmocka_unit_test_setup_teardown(test_depth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_v2, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writer_v2, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
