/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ext4gen/geom: which groups carry superblock copies, the geometry
 * arithmetic of geom_init(), and the allocator (alloc_peek/alloc_contig/alloc_run and
 * geom_walk_run), checked against an independent model of where the copies are.
 */
#include "../helpers.h"
#include "../ext4_test.h"

#include "../../../ext4gen/ext4_fs.h"
#include "../../../ext4gen/geom.h"

#define BPG 32768ull

/* ------------------------------------------------------------------ the model */

/* 0, 1 and every power of 3, 5 and 7 below 2^32, built by multiplication. */
static uint32_t super_groups[64];
static size_t n_super_groups;

static void model_init(void)
{
	if (n_super_groups)
		return;
	super_groups[n_super_groups++] = 0;
	super_groups[n_super_groups++] = 1;
	for (uint64_t base = 3; base <= 7; base += 2)
		for (uint64_t p = base; p <= UINT32_MAX; p *= base)
			super_groups[n_super_groups++] = (uint32_t)p;
}

static bool ref_has_super(uint64_t grp)
{
	model_init();
	for (size_t i = 0; i < n_super_groups; i++)
		if (super_groups[i] == grp)
			return true;
	return false;
}

struct model {
	uint64_t blocks;
	uint64_t groups;
	uint64_t gdt;      /* descriptor blocks: ceil(groups * 64 / 4096) */
};

static struct model model_of(uint64_t blocks)
{
	struct model m = { .blocks = blocks };

	m.groups = (blocks + BPG - 1) / BPG;
	m.gdt = (m.groups * 64 + 4095) / 4096;
	return m;
}

/* Is block b part of a superblock + descriptor copy? */
static bool ref_is_copy(const struct model *m, uint64_t b)
{
	return b % BPG < 1 + m->gdt && ref_has_super(b / BPG);
}

/* First block of the first copy that starts at or after group grp's start (past the end: ~0). */
static uint64_t ref_next_copy_from_group(uint64_t grp)
{
	uint64_t best = UINT64_MAX;

	model_init();
	for (size_t i = 0; i < n_super_groups; i++)
		if (super_groups[i] >= grp && super_groups[i] * BPG < best)
			best = super_groups[i] * BPG;
	return best;
}

/* The first block at or after b that is not part of a copy. */
static uint64_t ref_skip(const struct model *m, uint64_t b)
{
	while (ref_is_copy(m, b))
		b++;
	return b;
}

/* Smallest b >= from with [b, b + n) free of copies; -1 when that passes the end. */
static int64_t ref_first_fit(const struct model *m, uint64_t from, uint64_t n)
{
	uint64_t b = ref_skip(m, from);

	for (;;) {
		uint64_t copy = ref_next_copy_from_group(b / BPG + 1);

		if (b + n > m->blocks)
			return -1;
		if (b + n <= copy)
			return (int64_t)b;
		b = copy + 1 + m->gdt;
	}
}

struct piece {
	uint64_t phys, len;
};

/* The pieces that n blocks handed out from first (a non-copy block) occupy, in order. */
static size_t ref_pieces(const struct model *m, uint64_t first, uint64_t n, struct piece *out,
			 size_t max)
{
	size_t np = 0;
	uint64_t b = first;

	while (n) {
		uint64_t copy, len;

		b = ref_skip(m, b);
		copy = ref_next_copy_from_group(b / BPG + 1);
		len = copy - b < n ? copy - b : n;
		assert_true(np < max);
		out[np++] = (struct piece){ b, len };
		b += len;
		n -= len;
	}
	return np;
}

/* ------------------------------------------------------------------ which groups */

static void test_has_super_list(void **state)
{
	static const uint32_t yes[] = {
		0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125, 243, 343, 625, 729, 2187, 2401, 3125,
		6561, 16807, 15625, 19683, 59049, 78125, 117649, 177147,
		3486784401u /* 3^20 */, 1220703125u /* 5^13 */, 1977326743u /* 7^11 */,
	};
	static const uint32_t no[] = {
		2, 4, 6, 8, 10, 11, 15, 21, 35, 45, 63, 75, 105, 147, 175, 245, 225, 441,
		26, 28, 50, 80, 82, 124, 126, 242, 244, 342, 344, 2 * 2187, 3 * 2401,
		1162261467u * 2 /* 2 * 3^19 */, 3486784400u, 3486784402u, 1977326742u,
		UINT32_MAX, UINT32_MAX - 1, 1u << 31,
	};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!geom_group_has_super(yes[i]))
			fail_msg("group %u should carry a superblock copy", yes[i]);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (geom_group_has_super(no[i]))
			fail_msg("group %u should not carry a superblock copy", no[i]);
	}
}

static void test_has_super_exhaustive(void **state)
{
	(void)state;
	for (uint32_t g = 0; g < 2000000; g++) {
		if (geom_group_has_super(g) != ref_has_super(g))
			fail_msg("group %u: has_super %d, expected %d", g, geom_group_has_super(g),
				 ref_has_super(g));
	}
	/* every power below 2^32 and its neighbours */
	model_init();
	for (size_t i = 2; i < n_super_groups; i++) {
		uint32_t p = super_groups[i];

		assert_true(geom_group_has_super(p));
		assert_int_equal(geom_group_has_super(p + 1), ref_has_super((uint64_t)p + 1));
		assert_int_equal(geom_group_has_super(p - 1), ref_has_super((uint64_t)p - 1));
	}
}

/* ------------------------------------------------------------------ geom_init */

struct init_case {
	uint64_t blocks, inodes;
	uint32_t groups, gdt, ipg, itable;
};

static void test_init_table(void **state)
{
	static const struct init_case cases[] = {
		/* smallest filesystem; inodes rounded up to 16 (one inode table block) */
		{ 1024, 0, 1, 1, 16, 1 },
		{ 1024, 1, 1, 1, 16, 1 },
		{ 1024, 16, 1, 1, 16, 1 },
		{ 1024, 17, 1, 1, 32, 2 },
		{ 32768, 1000, 1, 1, 1008, 63 },
		{ 32768, 32768, 1, 1, 32768, 2048 },   /* one full inode bitmap */
		{ 32769, 100, 2, 1, 64, 4 },           /* ceil(100 / 2) = 50 -> 64 */
		{ 3 * 32768, 100, 3, 1, 48, 3 },       /* ceil(100 / 3) = 34 -> 48 */
		{ 40960, 40960, 2, 1, 20480, 1280 },   /* the mke2fs reference image */
		{ 64 * 32768, 64, 64, 1, 16, 1 },      /* 64 descriptors fill one block */
		{ 64 * 32768 + 1, 65, 65, 2, 16, 1 },  /* the 65th needs a second block */
		{ 128 * 32768, 1 << 20, 128, 2, 8192, 512 },
		{ 129 * 32768 - 5, 129 * 16 + 1, 129, 3, 32, 2 },
		{ 1ull << 32, 0, 131072, 2048, 16, 1 },  /* 16 TiB */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct init_case *c = &cases[i];
		struct geom g;

		memset(&g, 0, sizeof(g));
		if (geom_init(&g, c->blocks, c->inodes) != 0)
			fail_msg("case %zu: geom_init(%llu, %llu) failed", i,
				 (unsigned long long)c->blocks, (unsigned long long)c->inodes);
		assert_int_equal(g.blocks, c->blocks);
		assert_int_equal(g.groups, c->groups);
		assert_int_equal(g.gdt_blocks, c->gdt);
		assert_int_equal(g.inodes_per_group, c->ipg);
		assert_int_equal(g.itable_blocks, c->itable);
		assert_int_equal(g.inodes, (uint64_t)c->ipg * c->groups);
		assert_true(g.inodes >= c->inodes);
		assert_int_equal(g.inodes_per_group % 16, 0);
		assert_int_equal((uint64_t)g.itable_blocks * 4096, (uint64_t)g.inodes_per_group * 256);
		assert_non_null(g.has_super);
		for (uint32_t grp = 0; grp < g.groups; grp++) {
			uint32_t want = ref_has_super(grp) ? 1 + c->gdt : 0;

			if (geom_super_blocks(&g, grp) != want)
				fail_msg("case %zu group %u: super blocks %u, expected %u", i, grp,
					 geom_super_blocks(&g, grp), want);
			assert_int_equal(!!g.has_super[grp], ref_has_super(grp));
		}
		/* groups past the end carry nothing */
		assert_int_equal(geom_super_blocks(&g, g.groups + 1), 0);
		assert_int_equal(geom_super_blocks(&g, UINT32_MAX), 0);
		geom_free(&g);
		assert_null(g.has_super);
		geom_free(&g);   /* twice is harmless */
	}
}

static void test_init_errors(void **state)
{
	struct geom g;

	(void)state;
	memset(&g, 0, sizeof(g));
	assert_int_equal(geom_init(&g, 0, 0), -EINVAL);
	assert_int_equal(geom_init(&g, 1, 16), -EINVAL);
	assert_int_equal(geom_init(&g, 1023, 16), -EINVAL);
	assert_null(g.has_super);

	/* more than one inode bitmap block per group */
	assert_int_equal(geom_init(&g, 32768, 32769), -E2BIG);
	assert_int_equal(geom_init(&g, 2 * 32768, 2 * 32768 + 1), -E2BIG);
	assert_int_equal(geom_init(&g, 1024, UINT64_MAX / 2), -E2BIG);
	assert_int_equal(geom_init(&g, 2 * 32768, 2 * 32768), 0);
	geom_free(&g);

	/* s_inodes_count is 32 bits: 131072 groups * 32768 inodes = 2^32 is one too many */
	assert_int_equal(geom_init(&g, 1ull << 32, 1ull << 32), -E2BIG);
	assert_int_equal(geom_init(&g, 1ull << 32, (1ull << 32) - (1ull << 21)), 0);
	assert_int_equal(g.inodes, (1ull << 32) - (1ull << 21));
	assert_int_equal(g.inodes_per_group, 32768 - 16);
	geom_free(&g);
}

/* Re-initializing a geometry releases the previous has_super array (ASan: no leak). */
static void test_init_reinit(void **state)
{
	struct geom g;

	(void)state;
	geom_make(&g, 200 * 32768, 1000);
	assert_int_equal(g.groups, 200);
	assert_int_equal(geom_super_blocks(&g, 125), 1 + 4);
	assert_int_equal(geom_init(&g, 3 * 32768, 1000), 0);
	assert_int_equal(g.groups, 3);
	assert_int_equal(g.gdt_blocks, 1);
	assert_int_equal(geom_super_blocks(&g, 0), 2);
	assert_int_equal(geom_super_blocks(&g, 1), 2);
	assert_int_equal(geom_super_blocks(&g, 2), 0);
	assert_int_equal(geom_super_blocks(&g, 125), 0);   /* past the end now */
	geom_free(&g);
}

/*
 * Without meta_bg the descriptor table follows each superblock copy inside its group, so
 * 1 + gdt_blocks must fit in a group (32768 blocks): beyond 2^21 - 64 groups (~256 TiB)
 * the geometry is impossible and geom_init() must refuse it rather than return a table
 * that overruns the group. At 2^26 + 1 groups the uint32 product groups * 64 also wraps.
 */
static void test_init_gdt_too_large(void **state)
{
	struct geom g;
	uint32_t groups, gdt;
	int ret;

	(void)state;
	memset(&g, 0, sizeof(g));
	ret = geom_init(&g, ((uint64_t)32767 * 64 + 1) * 32768, 0);
	groups = g.groups;
	gdt = g.gdt_blocks;
	geom_free(&g);
	if (ret == 0)
		fail_msg("geom_init accepted %u groups: 1 + %u descriptor blocks do not fit in a "
			 "32768-block group", groups, gdt);

	ret = geom_init(&g, ((1ull << 26) + 1) * 32768, 0);
	groups = g.groups;
	gdt = g.gdt_blocks;
	geom_free(&g);
	if (ret == 0)
		fail_msg("geom_init accepted %u groups with gdt_blocks %u (expected an error; "
			 "ceil(groups * 64 / 4096) = %llu)", groups, gdt,
			 (unsigned long long)((((1ull << 26) + 1) * 64 + 4095) / 4096));
}

/* ------------------------------------------------------------------ the allocator */

static void test_peek(void **state)
{
	struct geom g;
	struct alloc a;

	(void)state;
	geom_make(&g, 12 * 32768 - 100, 1000);
	a = (struct alloc){ .g = &g, .next = 0 };
	assert_int_equal(alloc_peek(&a), 2);      /* superblock 0, descriptors 1 */
	assert_int_equal(a.next, 0);              /* peeking takes nothing */
	assert_int_equal(alloc_peek(&a), 2);
	a.next = 1;
	assert_int_equal(alloc_peek(&a), 2);
	a.next = 2;
	assert_int_equal(alloc_peek(&a), 2);
	a.next = 32767;
	assert_int_equal(alloc_peek(&a), 32767);
	a.next = 32768;
	assert_int_equal(alloc_peek(&a), 32770);
	a.next = 32769;
	assert_int_equal(alloc_peek(&a), 32770);
	a.next = 2 * 32768;                         /* group 2: no copy */
	assert_int_equal(alloc_peek(&a), 2 * 32768);
	for (uint64_t grp = 3; grp < 12; grp++) {
		a.next = grp * 32768;
		assert_int_equal(alloc_peek(&a), grp * 32768 + (ref_has_super(grp) ? 2 : 0));
	}
	geom_free(&g);
}

static void test_contig_basic(void **state)
{
	struct geom g;
	struct alloc a;

	(void)state;
	geom_make(&g, 12 * 32768 - 100, 1000);
	a = (struct alloc){ .g = &g, .next = 0 };
	assert_int_equal(alloc_contig(&a, 1), 2);
	assert_int_equal(a.next, 3);
	assert_int_equal(alloc_contig(&a, 10), 3);
	assert_int_equal(a.next, 13);

	/* ends exactly before group 1's copy */
	a.next = 32768 - 5;
	assert_int_equal(alloc_contig(&a, 5), 32768 - 5);
	assert_int_equal(a.next, 32768);
	/* would cross group 1's copy: placed after it, the gap stays free */
	a.next = 32768 - 5;
	assert_int_equal(alloc_contig(&a, 6), 32770);
	assert_int_equal(a.next, 32776);
	/* crossing into group 2 (no copy) is fine */
	a.next = 2 * 32768 - 5;
	assert_int_equal(alloc_contig(&a, 10), 2 * 32768 - 5);
	assert_int_equal(a.next, 2 * 32768 + 5);
	/* a whole group's worth after a copy */
	a.next = 32768;
	assert_int_equal(alloc_contig(&a, 32766), 32770);
	assert_int_equal(a.next, 2 * 32768);
	/* more than a group, spanning group 2 only */
	a.next = 32770;
	assert_int_equal(alloc_contig(&a, 40000), 32770);
	assert_int_equal(a.next, 72770);
	/* zero blocks: nothing taken */
	a.next = 100;
	assert_true(alloc_contig(&a, 0) >= 100);
	geom_free(&g);
}

/*
 * A run that crosses two group boundaries: from group 1 through group 2 into group 3,
 * whose copy sits at 98304..98305. The first fit is past group 9's copy.
 */
static void test_contig_spans_two_boundaries(void **state)
{
	struct geom g;
	struct alloc a;
	struct model m = model_of(12 * 32768 - 100);
	int64_t got, want;

	(void)state;
	geom_make(&g, m.blocks, 1000);
	a = (struct alloc){ .g = &g, .next = 32770 };
	want = ref_first_fit(&m, 32770, 65535);
	assert_int_equal(want, 294914);
	got = alloc_contig(&a, 65535);
	if (got != want) {
		geom_free(&g);
		fail_msg("alloc_contig(next 32770, n 65535) = %lld, expected %lld; [%lld, %lld) "
			 "contains group 3's superblock copy at 98304", (long long)got, (long long)want,
			 (long long)got, (long long)got + 65535);
	}
	assert_int_equal(a.next, 294914 + 65535);

	/* from group 2 (no copy) across group 3's copy */
	a.next = 2 * 32768 + 100;
	got = alloc_contig(&a, 32768);
	assert_int_equal(got, ref_first_fit(&m, 2 * 32768 + 100, 32768));
	assert_int_equal(got, 3 * 32768 + 2);
	geom_free(&g);
}

static void test_contig_end(void **state)
{
	struct geom g;
	struct alloc a;

	(void)state;
	/* groups 0 and 1, both with copies: two runs of 32766 free blocks */
	geom_make(&g, 2 * 32768, 100);
	a = (struct alloc){ .g = &g, .next = 0 };
	assert_int_equal(alloc_contig(&a, 32767), -1);
	assert_int_equal(a.next, 0);                       /* a failure takes nothing */
	assert_int_equal(alloc_contig(&a, 32766), 2);
	assert_int_equal(alloc_contig(&a, 32766), 32770);
	assert_int_equal(a.next, 2 * 32768);
	assert_int_equal(alloc_contig(&a, 1), -1);
	assert_int_equal(a.next, 2 * 32768);
	assert_true(alloc_peek(&a) >= g.blocks);
	geom_free(&g);

	/* a partial last group */
	geom_make(&g, 2 * 32768 + 10, 100);
	a = (struct alloc){ .g = &g, .next = 2 * 32768 };
	assert_int_equal(alloc_contig(&a, 11), -1);
	assert_int_equal(alloc_contig(&a, 10), 2 * 32768);
	assert_int_equal(alloc_contig(&a, 1), -1);
	geom_free(&g);

	/* the last group carries a copy and has only a block or two: nothing fits there */
	geom_make(&g, 3 * 32768 + 2, 100);
	a = (struct alloc){ .g = &g, .next = 3 * 32768 - 3 };
	assert_int_equal(alloc_contig(&a, 4), -1);
	assert_int_equal(alloc_contig(&a, 3), 3 * 32768 - 3);
	assert_int_equal(alloc_contig(&a, 1), -1);
	assert_int_equal(alloc_run(&a, 1), -1);
	assert_true(alloc_peek(&a) >= g.blocks);
	geom_free(&g);
}

struct walk_rec {
	struct piece p[256];
	size_t n;
	size_t stop_at;   /* return 7 from the stop_at-th call (1-based), 0: never */
};

static int rec_piece(void *arg, uint64_t phys, uint64_t count)
{
	struct walk_rec *r = arg;

	assert_true(r->n < 256);
	r->p[r->n++] = (struct piece){ phys, count };
	return r->stop_at && r->n == r->stop_at ? 7 : 0;
}

static void check_pieces(const struct model *m, uint64_t first, uint64_t n,
			 const struct walk_rec *r)
{
	struct piece want[256];
	size_t nw = ref_pieces(m, first, n, want, 256);
	uint64_t sum = 0;

	for (size_t i = 0; i < r->n; i++) {
		assert_true(r->p[i].len > 0);
		sum += r->p[i].len;
	}
	assert_int_equal(sum, n);
	if (r->n != nw)
		fail_msg("walk from %llu for %llu: %zu pieces, expected %zu",
			 (unsigned long long)first, (unsigned long long)n, r->n, nw);
	for (size_t i = 0; i < nw; i++) {
		if (r->p[i].phys != want[i].phys || r->p[i].len != want[i].len)
			fail_msg("walk from %llu for %llu: piece %zu is %llu+%llu, expected %llu+%llu",
				 (unsigned long long)first, (unsigned long long)n, i,
				 (unsigned long long)r->p[i].phys, (unsigned long long)r->p[i].len,
				 (unsigned long long)want[i].phys, (unsigned long long)want[i].len);
	}
}

static void test_run_pieces(void **state)
{
	struct model m = model_of(12 * 32768 - 100);
	struct geom g;
	struct alloc a;
	struct walk_rec r;

	(void)state;
	geom_make(&g, m.blocks, 1000);

	/* around group 1's copy: two pieces */
	a = (struct alloc){ .g = &g, .next = 32760 };
	assert_int_equal(alloc_run(&a, 20), 32760);
	assert_int_equal(a.next, 32770 + 12);
	memset(&r, 0, sizeof(r));
	assert_int_equal(geom_walk_run(&g, 32760, 20, rec_piece, &r), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.p[0].phys, 32760);
	assert_int_equal(r.p[0].len, 8);
	assert_int_equal(r.p[1].phys, 32770);
	assert_int_equal(r.p[1].len, 12);

	/* starting inside a copy: the run starts past it */
	a.next = 32768;
	assert_int_equal(alloc_run(&a, 5), 32770);
	assert_int_equal(a.next, 32775);

	/* through groups 1..9: one piece per stretch between copies, none split at group 2 */
	a.next = 2;
	assert_int_equal(alloc_run(&a, 5 * 32768), 2);
	memset(&r, 0, sizeof(r));
	assert_int_equal(geom_walk_run(&g, 2, 5 * 32768, rec_piece, &r), 0);
	check_pieces(&m, 2, 5 * 32768, &r);
	assert_int_equal(r.n, 4);
	assert_int_equal(r.p[0].phys, 2);
	assert_int_equal(r.p[0].len, 32766);
	assert_int_equal(r.p[1].phys, 32770);
	assert_int_equal(r.p[1].len, 65534);           /* groups 1-2, up to group 3 */
	assert_int_equal(r.p[2].phys, 98306);
	assert_int_equal(r.p[2].len, 65534);           /* groups 3-4 */
	assert_int_equal(a.next, r.p[3].phys + r.p[3].len);

	/* n == 0: nothing taken */
	a.next = 32768;
	assert_int_equal(alloc_run(&a, 0), 32770);
	assert_int_equal(a.next, 32768);

	/* the callback's first non-zero result ends the walk */
	memset(&r, 0, sizeof(r));
	r.stop_at = 2;
	assert_int_equal(geom_walk_run(&g, 2, 5 * 32768, rec_piece, &r), 7);
	assert_int_equal(r.n, 2);
	memset(&r, 0, sizeof(r));
	assert_int_equal(geom_walk_run(&g, 2, 0, rec_piece, &r), 0);
	assert_int_equal(r.n, 0);
	geom_free(&g);
}

static void test_run_end(void **state)
{
	struct geom g;
	struct alloc a;

	(void)state;
	/* 65536 blocks, 4 in copies: exactly 65532 can be handed out */
	geom_make(&g, 2 * 32768, 100);
	a = (struct alloc){ .g = &g, .next = 0 };
	assert_int_equal(alloc_run(&a, 65533), -1);
	assert_int_equal(a.next, 0);
	assert_int_equal(alloc_run(&a, 65532), 2);
	assert_int_equal(a.next, 65536);
	assert_int_equal(alloc_run(&a, 1), -1);
	assert_int_equal(alloc_contig(&a, 1), -1);
	assert_int_equal(a.next, 65536);
	geom_free(&g);

	/* a partial last group without a copy */
	geom_make(&g, 2 * 32768 + 500, 100);
	a = (struct alloc){ .g = &g, .next = 2 * 32768 - 10 };
	assert_int_equal(alloc_run(&a, 511), -1);
	assert_int_equal(alloc_run(&a, 510), 2 * 32768 - 10);
	assert_int_equal(a.next, 2 * 32768 + 500);
	assert_int_equal(alloc_run(&a, 1), -1);
	geom_free(&g);
}

struct mark_ctx {
	const struct model *m;
	uint8_t *taken;
	uint64_t end;      /* end of the previous piece */
};

static void mark(struct mark_ctx *c, uint64_t phys, uint64_t len)
{
	for (uint64_t b = phys; b < phys + len; b++) {
		if (b >= c->m->blocks)
			fail_msg("block %llu is past the end (%llu)", (unsigned long long)b,
				 (unsigned long long)c->m->blocks);
		if (ref_is_copy(c->m, b))
			fail_msg("block %llu of a superblock copy was handed out", (unsigned long long)b);
		if (c->taken[b / 8] & (1u << (b % 8)))
			fail_msg("block %llu handed out twice", (unsigned long long)b);
		c->taken[b / 8] |= (uint8_t)(1u << (b % 8));
	}
}

static int mark_piece(void *arg, uint64_t phys, uint64_t count)
{
	struct mark_ctx *c = arg;

	assert_true(phys >= c->end);
	mark(c, phys, count);
	c->end = phys + count;
	return 0;
}

/*
 * Random mixes of alloc_contig/alloc_run against the model: every result equals the
 * model's, no block is handed out twice or inside a copy or past the end; a failure
 * takes nothing and starts a new round on a clean disk.
 */
static void run_random(uint64_t blocks, uint64_t seed, uint64_t max_n)
{
	struct model m = model_of(blocks);
	struct geom g;
	struct alloc a;
	struct mark_ctx c = { .m = &m };
	int failures = 0, fulls = 0;

	geom_make(&g, blocks, 1000);
	assert_int_equal(g.gdt_blocks, m.gdt);
	c.taken = calloc(blocks / 8 + 1, 1);
	assert_non_null(c.taken);
	a = (struct alloc){ .g = &g, .next = 0 };
	for (int i = 0; i < 4000 && failures < 8; i++) {
		uint64_t r = prng_next(&seed);
		uint64_t n = 1 + r % (r & 1 ? max_n : 64);
		uint64_t before = a.next;
		int64_t got, want;

		if ((r >> 8) % 3 == 0) {
			want = ref_first_fit(&m, before, n);
			got = alloc_contig(&a, n);
			if (got != want) {
				print_error("alloc_contig(next %llu, n %llu) = %lld, expected %lld\n",
					    (unsigned long long)before, (unsigned long long)n,
					    (long long)got, (long long)want);
				failures++;
				a.next = want < 0 ? before : (uint64_t)want + n;
			} else if (got >= 0) {
				assert_int_equal(a.next, (uint64_t)got + n);
			} else {
				assert_int_equal(a.next, before);
			}
			if (want >= 0) {
				c.end = 0;
				mark(&c, (uint64_t)want, n);
			}
		} else {
			struct piece p[256];
			uint64_t first = ref_skip(&m, before);
			size_t np = ref_pieces(&m, first, n, p, 256);
			uint64_t end = p[np - 1].phys + p[np - 1].len;
			struct walk_rec rec;

			want = end > blocks ? -1 : (int64_t)first;
			got = alloc_run(&a, n);
			assert_int_equal(got, want);
			assert_int_equal(a.next, want < 0 ? before : end);
			if (want >= 0) {
				memset(&rec, 0, sizeof(rec));
				assert_int_equal(geom_walk_run(&g, first, n, rec_piece, &rec), 0);
				check_pieces(&m, first, n, &rec);
				c.end = 0;
				assert_int_equal(geom_walk_run(&g, first, n, mark_piece, &c), 0);
			}
		}
		/* peeking agrees with the model and takes nothing */
		before = a.next;
		assert_int_equal(alloc_peek(&a), ref_skip(&m, before));
		assert_int_equal(a.next, before);
		if (want < 0) {
			fulls++;
			memset(c.taken, 0, blocks / 8 + 1);
			a.next = prng_next(&seed) % 64;
		}
	}
	free(c.taken);
	geom_free(&g);
	if (failures)
		fail_msg("%d allocations disagreed with the model (blocks %llu)", failures,
			 (unsigned long long)blocks);
	assert_true(fulls >= 5);   /* the end of the disk was reached several times */
}

static void test_random_small(void **state)
{
	(void)state;
	run_random(30 * 32768 - 777, 0x1234, 80000);     /* copies at 0,1,3,5,7,9,25,27 */
}

static void test_random_large(void **state)
{
	(void)state;
	run_random(130 * 32768 + 4000, 0xfeed, 200000);  /* 3 descriptor blocks, 49, 81, 125 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_has_super_list),
		cmocka_unit_test(test_has_super_exhaustive),
		cmocka_unit_test(test_init_table),
		cmocka_unit_test(test_init_errors),
		cmocka_unit_test(test_init_reinit),
		cmocka_unit_test(test_init_gdt_too_large),
		cmocka_unit_test(test_peek),
		cmocka_unit_test(test_contig_basic),
		cmocka_unit_test(test_contig_spans_two_boundaries),
		cmocka_unit_test(test_contig_end),
		cmocka_unit_test(test_run_pieces),
		cmocka_unit_test(test_run_end),
		cmocka_unit_test(test_random_small),
		cmocka_unit_test(test_random_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
