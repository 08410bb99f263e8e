/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ext4gen/extent: extent_build (merging, splitting at 32768 blocks and at
 * superblock copies), extent_tree_blocks, and extent_render, whose trees are parsed back
 * and checked node by node; plus byte-exact vectors from e2fsprogs (see ext4_test.h).
 */
#include "../helpers.h"
#include "../ext4_test.h"

#include "../../../ext4gen/extent.h"
#include "../../../ext4gen/geom.h"

#define BPG 32768ull
#define PER_BLOCK 340u

/* ------------------------------------------------------------------ helpers */

static uint64_t ext_start(const struct ext4_extent *e)
{
	return (uint64_t)e->ee_start_hi << 32 | e->ee_start_lo;
}

static void assert_extent(const struct ext_list *l, size_t i, uint32_t lblk, uint32_t len,
			  uint64_t phys)
{
	assert_true(i < l->n);
	if (l->e[i].ee_block != lblk || l->e[i].ee_len != len || ext_start(&l->e[i]) != phys)
		fail_msg("extent %zu is (%u, %u, %llu), expected (%u, %u, %llu)", i,
			 l->e[i].ee_block, l->e[i].ee_len, (unsigned long long)ext_start(&l->e[i]),
			 lblk, len, (unsigned long long)phys);
}

/* Is block b in a superblock + descriptor copy (model, independent of geom.c)? */
static bool is_copy(const struct geom *g, uint64_t b)
{
	uint64_t grp = b / BPG;
	bool has = grp <= 1;

	if (b % BPG >= 1 + (uint64_t)g->gdt_blocks)
		return false;

	for (uint64_t base = 3; base <= 7 && !has; base += 2) {
		uint64_t p = base;

		while (p < grp)
			p *= base;
		has = p == grp;
	}
	return has && b % BPG < 1 + (uint64_t)g->gdt_blocks;
}

/*
 * Check l against the model: the k-th block of the concatenated ranges lives at the k-th
 * non-copy block from phys; extents are sorted, 1..32768 long, never cover a copy, and
 * neighbours that could be one extent are one (maximal merging).
 */
static void check_build(const struct geom *g, uint64_t phys, const struct lrange *r, size_t nr,
			const struct ext_list *l)
{
	uint64_t total = 0, k = 0, b = phys;
	size_t ri = 0;
	uint64_t rdone = 0;

	for (size_t i = 0; i < nr; i++)
		total += r[i].len;
	for (size_t i = 0; i < l->n; i++) {
		const struct ext4_extent *e = &l->e[i];

		assert_true(e->ee_len >= 1 && e->ee_len <= 32768);
		if (i) {
			const struct ext4_extent *p = &l->e[i - 1];

			assert_true((uint64_t)p->ee_block + p->ee_len <= e->ee_block);
			if ((uint64_t)p->ee_block + p->ee_len == e->ee_block &&
			    ext_start(p) + p->ee_len == ext_start(e) &&
			    (uint64_t)p->ee_len + e->ee_len <= 32768)
				fail_msg("extents %zu and %zu could be one", i - 1, i);
		}
		for (uint32_t j = 0; j < e->ee_len; j++, k++) {
			while (ri < nr && rdone == r[ri].len) {
				ri++;
				rdone = 0;
			}
			assert_true(ri < nr);
			while (is_copy(g, b))
				b++;
			if ((uint64_t)e->ee_block + j != r[ri].start + rdone || ext_start(e) + j != b)
				fail_msg("block %llu of the file: extent %zu maps logical %llu -> %llu, "
					 "expected %llu -> %llu", (unsigned long long)k, i,
					 (unsigned long long)e->ee_block + j,
					 (unsigned long long)ext_start(e) + j,
					 (unsigned long long)(r[ri].start + rdone), (unsigned long long)b);
			rdone++;
			b++;
		}
	}
	assert_int_equal(k, total);
}

/* ------------------------------------------------------------------ extent_build */

static void test_build_simple(void **state)
{
	struct geom g;
	struct ext_list l = { 0 };
	struct lrange r[100];

	(void)state;
	geom_make(&g, 12 * BPG, 1000);

	r[0] = (struct lrange){ 0, 10 };
	assert_int_equal(extent_build(&g, 100, r, 1, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 0, 10, 100);

	/* logically and physically contiguous ranges merge */
	r[0] = (struct lrange){ 0, 5 };
	r[1] = (struct lrange){ 5, 5 };
	assert_int_equal(extent_build(&g, 100, r, 2, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 0, 10, 100);

	/* a hole: physically contiguous, logically not -> two extents */
	r[0] = (struct lrange){ 0, 5 };
	r[1] = (struct lrange){ 7, 3 };
	assert_int_equal(extent_build(&g, 100, r, 2, &l), 0);
	assert_int_equal(l.n, 2);
	assert_extent(&l, 0, 0, 5, 100);
	assert_extent(&l, 1, 7, 3, 105);

	/* a hundred one-block ranges in a row are one extent */
	for (size_t i = 0; i < 100; i++)
		r[i] = (struct lrange){ 1000 + i, 1 };
	assert_int_equal(extent_build(&g, 5000, r, 100, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 1000, 100, 5000);
	check_build(&g, 5000, r, 100, &l);

	/* every other block: 50 extents of one block, physically consecutive */
	for (size_t i = 0; i < 50; i++)
		r[i] = (struct lrange){ 2 * i, 1 };
	assert_int_equal(extent_build(&g, 5000, r, 50, &l), 0);
	assert_int_equal(l.n, 50);
	for (size_t i = 0; i < 50; i++)
		assert_extent(&l, i, (uint32_t)(2 * i), 1, 5000 + i);

	/* nothing to map: the list is reset */
	assert_int_equal(extent_build(&g, 100, r, 0, &l), 0);
	assert_int_equal(l.n, 0);
	r[0] = (struct lrange){ 7, 0 };
	assert_int_equal(extent_build(&g, 100, r, 1, &l), 0);
	assert_int_equal(l.n, 0);
	free(l.e);
	geom_free(&g);
}

static void test_build_split_max_len(void **state)
{
	struct geom g;
	struct ext_list l = { 0 };
	struct lrange r[2];

	(void)state;
	geom_make(&g, 12 * BPG, 1000);

	r[0] = (struct lrange){ 0, 32768 };
	assert_int_equal(extent_build(&g, 2 * BPG, r, 1, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 0, 32768, 2 * BPG);

	r[0] = (struct lrange){ 0, 32769 };
	assert_int_equal(extent_build(&g, 2 * BPG, r, 1, &l), 0);
	assert_int_equal(l.n, 2);
	assert_extent(&l, 0, 0, 32768, 2 * BPG);
	assert_extent(&l, 1, 32768, 1, 3 * BPG + 2);  /* group 3's copy: 2 blocks */

	/* 70000 blocks from just past group 3's copy: groups 3-4 are one 65534-block piece */
	r[0] = (struct lrange){ 0, 70000 };
	assert_int_equal(extent_build(&g, 3 * BPG + 2, r, 1, &l), 0);
	assert_int_equal(l.n, 3);
	assert_extent(&l, 0, 0, 32768, 3 * BPG + 2);
	assert_extent(&l, 1, 32768, 32766, 3 * BPG + 2 + 32768);
	assert_extent(&l, 2, 65534, 4466, 5 * BPG + 2);
	check_build(&g, 3 * BPG + 2, r, 1, &l);

	/* two contiguous ranges whose sum exceeds 32768 are not merged past the limit */
	r[0] = (struct lrange){ 0, 32760 };
	r[1] = (struct lrange){ 32760, 40 };
	assert_int_equal(extent_build(&g, 2 * BPG - 32760, r, 2, &l), 0);
	check_build(&g, 2 * BPG - 32760, r, 2, &l);
	assert_int_equal(l.n, 2);
	assert_true(l.e[0].ee_len + l.e[1].ee_len == 32800);
	free(l.e);
	geom_free(&g);
}

static void test_build_split_copy(void **state)
{
	struct geom g;
	struct ext_list l = { 0 };
	struct lrange r[2];

	(void)state;
	geom_make(&g, 12 * BPG, 1000);

	r[0] = (struct lrange){ 0, 20 };
	assert_int_equal(extent_build(&g, BPG - 10, r, 1, &l), 0);
	assert_int_equal(l.n, 2);
	assert_extent(&l, 0, 0, 10, BPG - 10);
	assert_extent(&l, 1, 10, 10, BPG + 2);

	/* the split falls between two ranges */
	r[0] = (struct lrange){ 0, 10 };
	r[1] = (struct lrange){ 50, 10 };
	assert_int_equal(extent_build(&g, BPG - 10, r, 2, &l), 0);
	assert_int_equal(l.n, 2);
	assert_extent(&l, 0, 0, 10, BPG - 10);
	assert_extent(&l, 1, 50, 10, BPG + 2);

	/* no copy at group 2: one extent straight across */
	r[0] = (struct lrange){ 0, 20 };
	assert_int_equal(extent_build(&g, 2 * BPG - 10, r, 1, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 0, 20, 2 * BPG - 10);

	/* across copies 3, 5, 7 and 9 (pieces of 65534) */
	r[0] = (struct lrange){ 100, 4 * 65534 + 7 };
	assert_int_equal(extent_build(&g, 3 * BPG - 1, r, 1, &l), 0);
	check_build(&g, 3 * BPG - 1, r, 1, &l);
	assert_extent(&l, 0, 100, 1, 3 * BPG - 1);
	assert_extent(&l, 1, 101, 32768, 3 * BPG + 2);
	for (size_t i = 0; i < l.n; i++) {
		for (uint64_t b = ext_start(&l.e[i]); b < ext_start(&l.e[i]) + l.e[i].ee_len; b++)
			assert_false(is_copy(&g, b));
	}
	free(l.e);
	geom_free(&g);
}

/* Two contiguous ranges that add up to exactly 32768 blocks make one full extent. */
static void test_build_merge_to_max(void **state)
{
	struct geom g;
	struct ext_list l = { 0 };
	struct lrange r[3];

	(void)state;
	geom_make(&g, 12 * BPG, 1000);
	r[0] = (struct lrange){ 0, 20000 };
	r[1] = (struct lrange){ 20000, 12768 };
	assert_int_equal(extent_build(&g, 2 * BPG, r, 2, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 0, 32768, 2 * BPG);

	/* one more block starts a new extent */
	r[2] = (struct lrange){ 32768, 1 };
	assert_int_equal(extent_build(&g, 2 * BPG, r, 3, &l), 0);
	assert_int_equal(l.n, 2);
	assert_extent(&l, 0, 0, 32768, 2 * BPG);
	assert_extent(&l, 1, 32768, 1, 3 * BPG + 2);
	free(l.e);
	geom_free(&g);
}

/* Physical blocks past 2^32: ee_start_hi is set and merging compares all 48 bits. */
static void test_build_above_4g_blocks(void **state)
{
	struct geom g;
	struct ext_list l = { 0 };
	struct lrange r[2];
	uint64_t phys = (1ull << 32) + 2 * BPG + 100;   /* group 131074: no copy */

	(void)state;
	geom_make(&g, (1ull << 32) + 10 * BPG, 0);
	r[0] = (struct lrange){ 0, 5 };
	r[1] = (struct lrange){ 5, 5 };
	assert_int_equal(extent_build(&g, phys, r, 2, &l), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.e[0].ee_start_hi, 1);
	assert_int_equal(l.e[0].ee_start_lo, 2 * BPG + 100);
	assert_extent(&l, 0, 0, 10, phys);

	/* the list is reused: a second build starts from empty */
	r[0] = (struct lrange){ 0, 5 };
	assert_int_equal(extent_build(&g, phys + 50, r, 1, &l), 0);
	assert_int_equal(l.n, 1);
	assert_extent(&l, 0, 0, 5, phys + 50);
	free(l.e);
	geom_free(&g);
}

/* Random files (sizes, holes, start positions) on two geometries, against the model. */
static void test_build_random(void **state)
{
	static const uint64_t sizes[] = { 30 * BPG - 99, 130 * BPG + 4000 };
	uint64_t seed = 0x5eed;
	struct ext_list l = { 0 };
	struct lrange *r = calloc(200, sizeof(*r));
	int built = 0;

	(void)state;
	assert_non_null(r);
	for (size_t s = 0; s < 2; s++) {
		struct geom g;

		geom_make(&g, sizes[s], 1000);
		for (int it = 0; it < 150; it++) {
			size_t nr = 1 + prng_next(&seed) % 200;
			uint64_t lb = prng_next(&seed) % 1000, total = 0;
			struct alloc a = { .g = &g, .next = prng_next(&seed) % (sizes[s] / 2) };
			int64_t phys;

			for (size_t i = 0; i < nr; i++) {
				uint64_t v = prng_next(&seed);

				lb += v % 4 == 0 ? 1 + v % 7 : 0;          /* hole or not */
				r[i].start = lb;
				r[i].len = 1 + (v >> 8) % (v & 16 ? 3000 : 20);
				if ((v >> 32) % 50 == 0)
					r[i].len = 32768 + (v >> 40) % 40000;   /* a long run */
				lb += r[i].len;
				total += r[i].len;
			}
			phys = alloc_run(&a, total);
			if (phys < 0)
				continue;
			assert_int_equal(extent_build(&g, (uint64_t)phys, r, nr, &l), 0);
			check_build(&g, (uint64_t)phys, r, nr, &l);
			built++;
		}
		geom_free(&g);
	}
	assert_true(built >= 200);
	free(l.e);
	free(r);
}

/* ------------------------------------------------------------------ tree sizes */

static uint32_t model_depth(size_t n)
{
	uint64_t cap = 4;
	uint32_t d = 0;

	while (n > cap) {
		cap *= PER_BLOCK;
		d++;
	}
	return d;
}

/* Blocks of a minimal tree: ceil(n / 340) leaves, then ceil(/340) per level up to <= 4. */
static uint64_t model_tree_blocks(size_t n)
{
	uint64_t sum = 0, c = n;

	for (uint32_t d = model_depth(n); d > 0; d--) {
		c = (c + PER_BLOCK - 1) / PER_BLOCK;
		sum += c;
	}
	return sum;
}

static void test_tree_blocks(void **state)
{
	static const struct {
		size_t n;
		uint32_t blocks;
	} t[] = {
		{ 0, 0 }, { 1, 0 }, { 4, 0 },
		{ 5, 1 }, { 100, 1 }, { 340, 1 },
		{ 341, 2 }, { 680, 2 }, { 681, 3 }, { 1360, 4 },
		{ 1361, 5 + 1 },                           /* depth 2 */
		{ 115600, 340 + 1 }, { 115601, 341 + 2 },
		{ 462400, 1360 + 4 },
		{ 462401, 1361 + 5 + 1 },                  /* depth 3 */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (extent_tree_blocks(t[i].n) != t[i].blocks)
			fail_msg("extent_tree_blocks(%zu) = %u, expected %u", t[i].n,
				 extent_tree_blocks(t[i].n), t[i].blocks);
		assert_int_equal(model_tree_blocks(t[i].n), t[i].blocks);
	}
	for (size_t n = 0; n < 5000; n++)
		assert_int_equal(extent_tree_blocks(n), model_tree_blocks(n));
}

/* ------------------------------------------------------------------ extent_render */

static void make_list(struct ext_list *l, size_t n, uint64_t seed)
{
	uint32_t lb = (uint32_t)(prng_next(&seed) % 100);

	l->e = calloc(n ? n : 1, sizeof(*l->e));
	assert_non_null(l->e);
	l->n = l->cap = n;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = prng_next(&seed);
		uint64_t phys = 0x100000000ull + (v >> 20) % 0x7fffffffffull;
		uint16_t len = (uint16_t)(1 + v % 8);

		l->e[i] = (struct ext4_extent){
			.ee_block = lb,
			.ee_len = len,
			.ee_start_hi = (uint16_t)(phys >> 32),
			.ee_start_lo = (uint32_t)phys,
		};
		lb += len + (uint32_t)(v >> 60);
	}
}

struct walk {
	const struct ext_list *want;
	const uint8_t *tree;
	uint64_t tree_first;
	uint32_t nblocks;
	uint32_t seed;
	uint8_t *seen;
	size_t nleaf;         /* extents found so far */
};

static void walk_node(struct walk *w, const uint8_t *node, uint16_t max, uint16_t depth,
		      bool root)
{
	uint16_t entries = le16_get(node + 2);

	assert_int_equal(le16_get(node), 0xF30A);
	assert_int_equal(le16_get(node + 4), max);
	assert_int_equal(le16_get(node + 6), depth);
	assert_int_equal(le32_get(node + 8), 0);          /* eh_generation */
	assert_true(entries >= 1 && entries <= max);
	if (depth == 0) {
		if (w->nleaf + entries > w->want->n)
			fail_msg("the leaves hold more than the %zu extents", w->want->n);
		if (memcmp(node + 12, &w->want->e[w->nleaf], 12 * (size_t)entries) != 0)
			fail_msg("leaf entries at extent %zu differ from the list", w->nleaf);
		w->nleaf += entries;
	} else {
		uint32_t prev = 0;

		for (uint16_t k = 0; k < entries; k++) {
			const uint8_t *ix = node + 12 + 12 * (size_t)k;
			uint32_t ei_block = le32_get(ix);
			uint64_t child = le32_get(ix + 4) | (uint64_t)le16_get(ix + 8) << 32;
			size_t first = w->nleaf;
			const uint8_t *cb;

			assert_int_equal(le16_get(ix + 10), 0);   /* ei_unused */
			if (k)
				assert_true(ei_block > prev);
			prev = ei_block;
			if (child < w->tree_first || child >= w->tree_first + w->nblocks)
				fail_msg("index points at block %llu outside the tree [%llu, +%u)",
					 (unsigned long long)child, (unsigned long long)w->tree_first,
					 w->nblocks);
			assert_false(w->seen[child - w->tree_first]);
			w->seen[child - w->tree_first] = 1;
			cb = w->tree + (child - w->tree_first) * 4096;
			/* tail: crc32c(inode seed, header + eh_max entries) at 12 + 12 * 340 */
			assert_int_equal(le32_get(cb + 4092), ref_crc32c(w->seed, cb, 4092));
			/* nothing between the last entry and the tail */
			for (size_t o = 12 + 12 * (size_t)le16_get(cb + 2); o < 4092; o++)
				if (cb[o])
					fail_msg("block %llu: byte %zu is not zero",
						 (unsigned long long)child, o);
			walk_node(w, cb, PER_BLOCK, (uint16_t)(depth - 1), false);
			if (ei_block != w->want->e[first].ee_block)
				fail_msg("index ei_block %u, but the child's first extent starts at %u",
					 ei_block, w->want->e[first].ee_block);
		}
	}
	(void)root;
}

static void render_and_check(size_t n, uint64_t tree_first, uint32_t seed)
{
	struct ext_list l = { 0 };
	uint32_t nb = extent_tree_blocks(n);
	uint8_t *tree = malloc((size_t)(nb ? nb : 1) * 4096);
	uint32_t i_block[15];
	const uint8_t *ib = (const uint8_t *)i_block;
	struct walk w = { .want = &l, .tree = tree, .tree_first = tree_first, .nblocks = nb,
			  .seed = seed };

	assert_non_null(tree);
	memset(tree, 0xAA, (size_t)(nb ? nb : 1) * 4096);
	memset(i_block, 0xAA, sizeof(i_block));
	make_list(&l, n, n * 7919 + 1);
	extent_render(&l, tree_first, i_block, nb ? tree : NULL, seed);

	assert_int_equal(le16_get(ib + 6), model_depth(n));
	w.seen = calloc(nb + 1, 1);
	assert_non_null(w.seen);
	if (n == 0) {
		assert_int_equal(le16_get(ib), 0xF30A);
		assert_int_equal(le16_get(ib + 2), 0);
		assert_int_equal(le16_get(ib + 4), 4);
	} else {
		walk_node(&w, ib, 4, (uint16_t)model_depth(n), true);
	}
	assert_int_equal(w.nleaf, n);
	for (uint32_t b = 0; b < nb; b++)
		if (!w.seen[b])
			fail_msg("n %zu: tree block %u is not reachable from the root", n, b);
	/* the root's unused slots are zero */
	for (size_t o = 12 + 12 * (size_t)le16_get(ib + 2); o < 60; o++)
		assert_int_equal(ib[o], 0);
	free(w.seen);
	free(tree);
	free(l.e);
}

static void test_render_in_inode(void **state)
{
	(void)state;
	for (size_t n = 0; n <= 4; n++)
		render_and_check(n, 0, 0x12345678);
}

static void test_render_depth1(void **state)
{
	static const size_t ns[] = { 5, 6, 339, 340, 341, 679, 680, 681, 1000, 1359, 1360 };

	(void)state;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		render_and_check(ns[i], 0x123456789aull, 0xdeadbeef);
}

static void test_render_depth2(void **state)
{
	static const size_t ns[] = { 1361, 1700, 3000, 115600, 115601, 462400 };

	(void)state;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++)
		render_and_check(ns[i], 4000000000ull, 0x0badf00d);
}

static void test_render_depth3(void **state)
{
	(void)state;
	render_and_check(462401, 1000, 0xcafe);
	render_and_check(600000, 0xffffffff00ull, 1);
}

static void test_empty_root(void **state)
{
	uint32_t i_block[15];
	const uint8_t *p = (const uint8_t *)i_block;

	(void)state;
	memset(i_block, 0xAA, sizeof(i_block));
	extent_empty_root(i_block);
	assert_int_equal(le16_get(p), 0xF30A);
	assert_int_equal(le16_get(p + 2), 0);
	assert_int_equal(le16_get(p + 4), 4);
	assert_int_equal(le16_get(p + 6), 0);
	for (size_t o = 8; o < 60; o++)
		assert_int_equal(p[o], 0);
}

/* The tail checksum covers exactly bytes [0, 4092) and nothing else. */
static void test_render_checksum_range(void **state)
{
	struct ext_list l = { 0 };
	uint32_t i_block[15];
	uint8_t *t1 = malloc(4096), *t2 = malloc(4096);

	(void)state;
	assert_non_null(t1);
	assert_non_null(t2);
	make_list(&l, 10, 99);
	extent_render(&l, 500, i_block, t1, 0x11111111);
	extent_render(&l, 500, i_block, t2, 0x22222222);
	/* a different seed changes only the tail */
	assert_memory_equal(t1, t2, 4092);
	assert_memory_not_equal(t1 + 4092, t2 + 4092, 4);
	assert_int_equal(le32_get(t1 + 4092), ref_crc32c(0x11111111, t1, 4092));
	assert_int_equal(le32_get(t2 + 4092), ref_crc32c(0x22222222, t2, 4092));
	assert_true(le32_get(t1 + 4092) != ref_crc32c(0x11111111, t1, 12 + 12 * 10));
	free(t1);
	free(t2);
	free(l.e);
}

/* ------------------------------------------------------------------ e2fsprogs vectors */

/* block 6673 of the reference image: the extent leaf block of inode 13 (debugfs write) */
static const uint8_t real_etb13[4096] = {
	[0x000] = 0x0a, 0xf3, 0x0a, 0x00, 0x54, 0x01,
	[0x010] = 0x01, 0x00, 0x00, 0x00, 0x0c, 0x1a, 0x00, 0x00, 0x02,
	[0x01c] = 0x01, 0x00, 0x00, 0x00, 0x0d, 0x1a, 0x00, 0x00, 0x04,
	[0x028] = 0x01, 0x00, 0x00, 0x00, 0x0e, 0x1a, 0x00, 0x00, 0x06,
	[0x034] = 0x01, 0x00, 0x00, 0x00, 0x0f, 0x1a, 0x00, 0x00, 0x08,
	[0x040] = 0x01, 0x00, 0x00, 0x00, 0x10, 0x1a, 0x00, 0x00, 0x0a,
	[0x04c] = 0x01, 0x00, 0x00, 0x00, 0x12, 0x1a, 0x00, 0x00, 0x0c,
	[0x058] = 0x01, 0x00, 0x00, 0x00, 0x13, 0x1a, 0x00, 0x00, 0x0e,
	[0x064] = 0x01, 0x00, 0x00, 0x00, 0x14, 0x1a, 0x00, 0x00, 0x10,
	[0x070] = 0x01, 0x00, 0x00, 0x00, 0x15, 0x1a, 0x00, 0x00, 0x12,
	[0x07c] = 0x01, 0x00, 0x00, 0x00, 0x16, 0x1a,
	[0xffc] = 0xec, 0xea, 0x45, 0xd6,
};

/* i_block of inode 13: the depth-1 root (one index entry -> block 6673) */
static const uint8_t real_ino13_root[24] = {
	0x0a, 0xf3, 0x01, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x11, 0x1a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

/* i_block of inode 8, the journal made by mke2fs: blocks 2571..6666 */
static const uint8_t real_ino8_iblock[60] = {
	0x0a, 0xf3, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x0b, 0x0a, 0x00, 0x00,
};

static uint32_t ref_inode_seed(uint32_t ino, uint32_t gen)
{
	return ref_crc32c_le32(ref_crc32c_le32(real_csum_seed(), ino), gen);
}

static void test_real_leaf_block(void **state)
{
	uint32_t seed = ref_inode_seed(13, 0);
	struct ext_list l = { 0 };
	uint32_t i_block[15];
	uint8_t *tree = malloc(4096);

	(void)state;
	assert_non_null(tree);
	/* the checksum algorithm, as e2fsprogs computed it */
	assert_int_equal(le32_get(real_etb13 + 4092), ref_crc32c(seed, real_etb13, 4092));
	assert_int_equal(le32_get(real_etb13 + 4092), 0xd645eaecu);

	/* the same ten extents rendered by us give the same bytes */
	l.n = l.cap = 10;
	l.e = calloc(10, sizeof(*l.e));
	assert_non_null(l.e);
	memcpy(l.e, real_etb13 + 12, 10 * 12);
	memset(tree, 0x55, 4096);
	extent_render(&l, 6673, i_block, tree, seed);
	assert_memory_equal(tree, real_etb13, 4096);
	assert_memory_equal(i_block, real_ino13_root, 24);
	free(l.e);
	free(tree);
}

static void test_real_journal_root(void **state)
{
	struct geom g;
	struct ext_list l = { 0 };
	struct lrange r = { 0, 4096 };
	uint32_t i_block[15];

	(void)state;
	geom_make(&g, 40960, 40960);
	assert_int_equal(extent_build(&g, 2571, &r, 1, &l), 0);
	assert_int_equal(l.n, 1);
	memset(i_block, 0xAA, sizeof(i_block));
	extent_render(&l, 0, i_block, NULL, 0);
	assert_memory_equal(i_block, real_ino8_iblock, 60);
	free(l.e);
	geom_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_build_simple),
		cmocka_unit_test(test_build_split_max_len),
		cmocka_unit_test(test_build_split_copy),
		cmocka_unit_test(test_build_merge_to_max),
		cmocka_unit_test(test_build_above_4g_blocks),
		cmocka_unit_test(test_build_random),
		cmocka_unit_test(test_tree_blocks),
		cmocka_unit_test(test_render_in_inode),
		cmocka_unit_test(test_render_depth1),
		cmocka_unit_test(test_render_depth2),
		cmocka_unit_test(test_render_depth3),
		cmocka_unit_test(test_empty_root),
		cmocka_unit_test(test_render_checksum_range),
		cmocka_unit_test(test_real_leaf_block),
		cmocka_unit_test(test_real_journal_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
