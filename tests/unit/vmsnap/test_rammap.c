/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for vmsnap/rammap.c: a map built out of order made canonical by rammap_finish
 * (chunks in the order of their first page, one entry per name, unused ones dropped),
 * encoded, parsed back to the same bytes, its user index; the parser against every
 * truncation and against hostile headers, chunk records and page records.
 */
#include "../helpers.h"

#include "../../../common/le.h"
#include "../../../vmsnap/rammap.h"

#define NPAGES 256u
#define OFF_CHUNKS RAMMAP_HEADER
/* the map of sample(): two chunks */
#define OFF_PAGES (RAMMAP_HEADER + 2 * RAMMAP_CHUNK_REC)

static void digest_fill(uint8_t d[SHA256_LEN], int v)
{
	memset(d, v, SHA256_LEN);
}

/*
 * 256 pages; chunks added as C (unused), B, A, D (A's twin): page 1 -> A slot 0, page 2 -> B
 * slot 1, page 5 -> A slot 2, page 7 -> D slot 1, page 9 -> B slot 0.
 */
static struct rammap *sample(void)
{
	struct rammap *m;
	uint8_t a[SHA256_LEN], b[SHA256_LEN], c[SHA256_LEN];
	uint32_t ra, rb, rc, rd;

	digest_fill(a, 0xaa);
	digest_fill(b, 0xbb);
	digest_fill(c, 0xcc);
	assert_int_equal(rammap_new(NPAGES * RAMMAP_PAGE, &m), 0);
	assert_int_equal(rammap_add_chunk(m, c, 4, &rc), 0);
	assert_int_equal(rammap_add_chunk(m, b, 2, &rb), 0);
	assert_int_equal(rammap_add_chunk(m, a, 3, &ra), 0);
	assert_int_equal(rammap_add_chunk(m, a, 3, &rd), 0);
	assert_int_equal(rc, 1);
	assert_int_equal(rd, 4);
	m->pages[1] = (struct rammap_page){ ra, 0 };
	m->pages[2] = (struct rammap_page){ rb, 1 };
	m->pages[5] = (struct rammap_page){ ra, 2 };
	m->pages[7] = (struct rammap_page){ rd, 1 };
	m->pages[9] = (struct rammap_page){ rb, 0 };
	assert_int_equal(rammap_finish(m), 0);
	return m;
}

static void encode_sample(uint8_t **buf, size_t *len)
{
	struct rammap *m = sample();

	assert_int_equal(rammap_encode(m, buf, len), 0);
	rammap_free(m);
}

static void test_finish(void **state)
{
	struct rammap *m = sample();

	(void)state;
	assert_int_equal(m->nchunks, 2);
	assert_int_equal(m->nonzero, 5);
	assert_int_equal(m->npages, NPAGES);
	assert_int_equal(m->chunks[0].digest[0], 0xaa);
	assert_int_equal(m->chunks[0].npages, 3);
	assert_int_equal(m->chunks[1].digest[0], 0xbb);
	assert_int_equal(m->pages[1].chunk, 1);
	assert_int_equal(m->pages[2].chunk, 2);
	assert_int_equal(m->pages[2].slot, 1);
	assert_int_equal(m->pages[7].chunk, 1);
	assert_int_equal(m->pages[7].slot, 1);
	assert_int_equal(m->pages[0].chunk, 0);
	/* the user index (made by finish, made again the same): A's pages 1, 5, 7; B's 2, 9 */
	assert_int_equal(rammap_index(m), 0);
	assert_int_equal(m->user_off[0], 0);
	assert_int_equal(m->user_off[1], 3);
	assert_int_equal(m->user_off[2], 5);
	assert_int_equal(m->users[0], 1);
	assert_int_equal(m->users[1], 5);
	assert_int_equal(m->users[2], 7);
	assert_int_equal(m->users[3], 2);
	assert_int_equal(m->users[4], 9);
	assert_int_equal(rammap_chunk_bytes(m, 0), 3 * RAMMAP_PAGE);
	rammap_free(m);
}

static void test_roundtrip(void **state)
{
	uint8_t *buf, *buf2;
	size_t len, len2;
	struct rammap *m;
	char why[WHY_MAX] = "";

	(void)state;
	encode_sample(&buf, &len);
	assert_int_equal(len, OFF_PAGES + NPAGES * RAMMAP_PAGE_REC);
	assert_memory_equal(buf, RAMMAP_MAGIC, 8);
	assert_int_equal(rammap_parse(buf, len, &m, why, sizeof(why)), 0);
	assert_int_equal(m->nchunks, 2);
	assert_int_equal(m->nonzero, 5);
	assert_int_equal(m->user_off[2], 5);
	assert_int_equal(m->users[3], 2);
	/* finish of a canonical map changes nothing */
	assert_int_equal(rammap_finish(m), 0);
	assert_int_equal(rammap_encode(m, &buf2, &len2), 0);
	assert_int_equal(len2, len);
	assert_memory_equal(buf2, buf, len);
	rammap_free(m);
	free(buf2);
	free(buf);
}

/* An empty map: every page zero, no chunk. */
static void test_empty(void **state)
{
	struct rammap *m, *m2;
	uint8_t *buf;
	size_t len;
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(rammap_new(0, &m), -EINVAL);
	assert_int_equal(rammap_new(4097, &m), -EINVAL);
	assert_int_equal(rammap_new(RAMMAP_MEM_MAX + RAMMAP_PAGE, &m), -EINVAL);
	assert_int_equal(rammap_new(RAMMAP_PAGE, &m), 0);
	assert_int_equal(rammap_finish(m), 0);
	assert_int_equal(rammap_encode(m, &buf, &len), 0);
	assert_int_equal(len, RAMMAP_HEADER + RAMMAP_PAGE_REC);
	assert_int_equal(rammap_parse(buf, len, &m2, why, sizeof(why)), 0);
	assert_int_equal(m2->nchunks, 0);
	assert_int_equal(m2->nonzero, 0);
	rammap_free(m2);
	rammap_free(m);
	free(buf);
}

static void test_finish_bad(void **state)
{
	struct rammap *m;
	uint8_t a[SHA256_LEN];
	uint32_t r;

	(void)state;
	digest_fill(a, 1);
	assert_int_equal(rammap_new(NPAGES * RAMMAP_PAGE, &m), 0);
	assert_int_equal(rammap_add_chunk(m, a, 2, &r), 0);
	m->pages[3] = (struct rammap_page){ r, 2 };
	assert_int_equal(rammap_finish(m), -EINVAL);
	m->pages[3] = (struct rammap_page){ r + 1, 0 };
	assert_int_equal(rammap_finish(m), -EINVAL);
	rammap_free(m);
}

static void test_truncated(void **state)
{
	uint8_t *buf, *big;
	size_t len;
	struct rammap *m;
	char why[WHY_MAX];

	(void)state;
	encode_sample(&buf, &len);
	for (size_t n = 0; n < len; n++) {
		why[0] = '\0';
		m = (struct rammap *)1;
		assert_int_equal(rammap_parse(buf, n, &m, why, sizeof(why)), -EBADMSG);
		assert_null(m);
		assert_true(why[0]);
	}
	big = calloc(1, len + 1);
	assert_non_null(big);
	memcpy(big, buf, len);
	assert_int_equal(rammap_parse(big, len + 1, &m, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "its header says"));
	free(big);
	free(buf);
}

/* The sample's bytes with fn applied: refused with err and a reason holding want. */
static void expect_bad(void (*fn)(uint8_t *b), int err, const char *want)
{
	uint8_t *buf;
	size_t len;
	struct rammap *m;
	char why[WHY_MAX] = "";

	encode_sample(&buf, &len);
	fn(buf);
	assert_int_equal(rammap_parse(buf, len, &m, why, sizeof(why)), err);
	assert_null(m);
	if (!strstr(why, want))
		fail_msg("reason \"%s\" lacks \"%s\"", why, want);
	free(buf);
}

static void bad_magic(uint8_t *b) { b[0] = 'X'; }
static void bad_version(uint8_t *b) { le32_put(b + 8, 2); }
static void bad_hsize(uint8_t *b) { le32_put(b + 12, 72); }
static void bad_page(uint8_t *b) { le32_put(b + 24, 8192); }
static void bad_flags(uint8_t *b) { le32_put(b + 40, 1); }
static void bad_reserved(uint8_t *b) { b[63] = 1; }
static void mem_odd(uint8_t *b) { le64_put(b + 16, NPAGES * RAMMAP_PAGE + 512); }
static void mem_zero(uint8_t *b) { le64_put(b + 16, 0); }
static void mem_big(uint8_t *b) { le64_put(b + 16, RAMMAP_MEM_MAX + RAMMAP_PAGE); }
static void mem_more(uint8_t *b) { le64_put(b + 16, (NPAGES + 1) * RAMMAP_PAGE); }
static void nonzero_less(uint8_t *b) { le64_put(b + 32, 4); }
static void nonzero_more(uint8_t *b) { le64_put(b + 32, 6); }
static void nonzero_huge(uint8_t *b) { le64_put(b + 32, NPAGES + 1); }
static void chunk_npages0(uint8_t *b) { le32_put(b + OFF_CHUNKS + 32, 0); }
static void chunk_npages_big(uint8_t *b)
{
	le32_put(b + OFF_CHUNKS + 32, RAMMAP_CHUNK_PAGES_MAX + 1);
}
static void chunk_reserved(uint8_t *b) { le32_put(b + OFF_CHUNKS + RAMMAP_CHUNK_REC + 36, 9); }
/* B named as A, with A's size */
static void chunk_twice(uint8_t *b)
{
	memcpy(b + OFF_CHUNKS + RAMMAP_CHUNK_REC, b + OFF_CHUNKS, RAMMAP_CHUNK_REC);
}
static void ref_range(uint8_t *b) { le32_put(b + OFF_PAGES + 9 * 8, 3); }
/* page 5 -> A slot 3: A has 3 pages */
static void slot_beyond(uint8_t *b) { le32_put(b + OFF_PAGES + 5 * 8 + 4, 3); }
static void zero_slot(uint8_t *b) { le32_put(b + OFF_PAGES + 4, 1); }
/* page 1 -> B: B's first page comes before A's */
static void out_of_order(uint8_t *b) { le32_put(b + OFF_PAGES + 1 * 8, 2); }
/* pages 2 and 9 -> A: B used by no page */
static void unused_chunk(uint8_t *b)
{
	le32_put(b + OFF_PAGES + 2 * 8, 1);
	le32_put(b + OFF_PAGES + 9 * 8, 1);
}

static void test_hostile(void **state)
{
	(void)state;
	expect_bad(bad_magic, -EBADMSG, "bad magic");
	expect_bad(bad_version, -EPROTONOSUPPORT, "version 2 (this lazyblk reads version 1)");
	expect_bad(bad_hsize, -EBADMSG, "header size 72");
	expect_bad(bad_page, -EBADMSG, "page size 8192");
	expect_bad(bad_flags, -EBADMSG, "flags not 0");
	expect_bad(bad_reserved, -EBADMSG, "reserved header field not 0");
	expect_bad(mem_odd, -EBADMSG, "not a positive multiple of 4096");
	expect_bad(mem_zero, -EBADMSG, "memory size 0");
	expect_bad(mem_big, -EFBIG, "beyond");
	expect_bad(mem_more, -EBADMSG, "(truncated)");
	expect_bad(nonzero_less, -EBADMSG, "5 non-zero pages, its header says 4");
	expect_bad(nonzero_more, -EBADMSG, "5 non-zero pages, its header says 6");
	expect_bad(nonzero_huge, -EBADMSG, "257 non-zero pages");
	expect_bad(chunk_npages0, -EBADMSG, "chunk 0: 0 pages");
	expect_bad(chunk_npages_big, -EBADMSG, "chunk 0: 1025 pages");
	expect_bad(chunk_reserved, -EBADMSG, "chunk 1: 2 pages (1 to 1024) or a reserved field");
	expect_bad(chunk_twice, -EBADMSG, "chunk 1: the same as chunk 0");
	expect_bad(ref_range, -EBADMSG, "page 9: chunk 2 beyond the table");
	expect_bad(slot_beyond, -EBADMSG, "page 5: slot 3 beyond its chunk's 3 pages");
	expect_bad(zero_slot, -EBADMSG, "page 0: a zero page with slot 1");
	expect_bad(out_of_order, -EBADMSG, "page 1: chunk 1 before its turn");
	expect_bad(unused_chunk, -EBADMSG, "chunk 1 is used by no page");
}

/* More chunks in the header than non-zero pages: refused before the length. */
static void test_counts(void **state)
{
	uint8_t hdr[RAMMAP_HEADER] = { 0 };
	struct rammap *m;
	char why[WHY_MAX] = "";

	(void)state;
	memcpy(hdr, RAMMAP_MAGIC, 8);
	le32_put(hdr + 8, 1);
	le32_put(hdr + 12, RAMMAP_HEADER);
	le64_put(hdr + 16, RAMMAP_MEM_MAX);
	le32_put(hdr + 24, RAMMAP_PAGE);
	le32_put(hdr + 28, 0xffffffffu);
	le64_put(hdr + 32, 1);
	assert_int_equal(rammap_parse(hdr, sizeof(hdr), &m, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "4294967295 chunks"));
	/* the largest map claimed in 64 bytes: refused by its length, nothing allocated */
	le32_put(hdr + 28, 1);
	assert_int_equal(rammap_parse(hdr, sizeof(hdr), &m, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "(truncated)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_finish),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_finish_bad),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_counts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
