/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for vmsnap/ramstore*.c: a synthetic 4 MiB RAM (zero windows, identical windows,
 * zero pages among data, pages repeated) written into a temporary store; its map put in the
 * store and loaded back through a cas_source, every page's bytes checked against its chunk's;
 * the same RAM twice stores nothing new, and the map's bytes do not depend on the threads;
 * a second snapshot over a parent with a changed bitmap and page hashes stores exactly the
 * pages that changed, in chunks of the windows that have them; vm.state as a blob; a
 * corrupt chunk file makes the loads fail.
 */
#include "../helpers.h"

#include "../../../cas/source.h"
#include "../../../cas/store.h"
#include "../../../common/log.h"
#include "../../../vmsnap/ramstore.h"

#define RAM_SIZE (4u << 20)
#define NPAGES (RAM_SIZE / RAMMAP_PAGE)
#define WIN_BYTES (RAMSTORE_WINDOW * RAMMAP_PAGE)

struct fx {
	char dir[PATH_MAX], store[PATH_MAX];
	struct store *s;
	uint8_t *ram;
	uint8_t (*hashes)[RAMSTORE_HASH];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || store_tmp_open(f->dir, f->store, &f->s))
		return -1;
	f->ram = calloc(1, RAM_SIZE);
	f->hashes = calloc(NPAGES, RAMSTORE_HASH);
	if (!f->ram || !f->hashes)
		return -1;
	log_set_level(-1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	store_close(f->s);
	rm_rf(f->dir);
	free(f->ram);
	free(f->hashes);
	free(f);
	return 0;
}

static uint8_t *page(struct fx *f, uint64_t p)
{
	return f->ram + p * RAMMAP_PAGE;
}

/*
 * Window 0 zero; windows 1 and 2 the same random pages; window 3 every other page zero;
 * window 4 one page repeated; the rest random but for pages whose index is a multiple of 7.
 * Returns the non-zero pages.
 */
static uint64_t ram_fill(struct fx *f)
{
	uint64_t seed = 42, nz = 0;

	memset(f->ram, 0, RAM_SIZE);
	prng_fill(&seed, f->ram + WIN_BYTES, WIN_BYTES);
	memcpy(f->ram + 2 * WIN_BYTES, f->ram + WIN_BYTES, WIN_BYTES);
	for (uint64_t p = 3 * RAMSTORE_WINDOW; p < 4 * RAMSTORE_WINDOW; p += 2)
		prng_fill(&seed, page(f, p), RAMMAP_PAGE);
	for (uint64_t p = 4 * RAMSTORE_WINDOW; p < 5 * RAMSTORE_WINDOW; p++)
		memset(page(f, p), 0x5a, RAMMAP_PAGE);
	for (uint64_t p = 5 * RAMSTORE_WINDOW; p < NPAGES; p++)
		if (p % 7)
			prng_fill(&seed, page(f, p), RAMMAP_PAGE);
	for (uint64_t p = 0; p < NPAGES; p++) {
		static const uint8_t zero[RAMMAP_PAGE];

		nz += memcmp(page(f, p), zero, RAMMAP_PAGE) != 0;
	}
	return nz;
}

static struct rammap *write_ram(struct fx *f, const struct ramstore_opts *o0, unsigned threads,
				struct ramstore_result *res)
{
	struct ramstore_opts o = *o0;
	struct rammap *m;
	char why[WHY_MAX] = "";

	o.store = f->s;
	o.threads = threads;
	if (ramstore_write(&o, f->ram, RAM_SIZE, &m, res, why, sizeof(why)))
		fail_msg("ramstore_write: %s", why);
	return m;
}

static struct cas_source *source(struct fx *f)
{
	struct cas_source_opts o = { .store_dir = f->store, .no_plain = true };
	struct cas_source *src;

	assert_int_equal(cas_source_open(&o, &src, NULL, 0), 0);
	return src;
}

/* Every page of m read back through src: the RAM's bytes. */
static void check_pages(struct fx *f, struct cas_source *src, const struct rammap *m)
{
	static const uint8_t zero[RAMMAP_PAGE];

	for (uint64_t p = 0; p < NPAGES; p++)
		if (!m->pages[p].chunk)
			assert_memory_equal(page(f, p), zero, RAMMAP_PAGE);
	for (uint32_t c = 0; c < m->nchunks; c++) {
		void *block;
		size_t len, flen;

		assert_int_equal(cas_source_get(src, m->chunks[c].digest, rammap_chunk_bytes(m, c),
						0, &block, &len, &flen), 0);
		assert_int_equal(len, rammap_chunk_bytes(m, c));
		assert_true(m->user_off[c + 1] > m->user_off[c]);
		for (uint32_t u = m->user_off[c]; u < m->user_off[c + 1]; u++) {
			uint32_t p = m->users[u];

			assert_int_equal(m->pages[p].chunk, c + 1);
			assert_memory_equal((uint8_t *)block + (size_t)m->pages[p].slot * RAMMAP_PAGE,
					    page(f, p), RAMMAP_PAGE);
		}
		free(block);
	}
}

static void doc_for(struct fx *f, const struct rammap *m, struct snapdoc *d)
{
	static const char state[] = "vm.state bytes";
	char why[WHY_MAX] = "";

	memset(d, 0, sizeof(*d));
	d->mem_size = RAM_SIZE;
	assert_int_equal(ramstore_put_map(f->s, m, d, why, sizeof(why)), 0);
	assert_int_equal(ramstore_put_blob(f->s, state, sizeof(state), &d->state, why,
					   sizeof(why)), 0);
	assert_int_equal(d->state.size, sizeof(state));
}

static void assert_same_map(const struct rammap *a, const struct rammap *b)
{
	uint8_t *ba, *bb;
	size_t la, lb;

	assert_int_equal(rammap_encode(a, &ba, &la), 0);
	assert_int_equal(rammap_encode(b, &bb, &lb), 0);
	assert_int_equal(la, lb);
	assert_memory_equal(ba, bb, la);
	free(ba);
	free(bb);
}

static void test_write_load(void **state)
{
	struct fx *f = *state;
	struct ramstore_opts o = { .hashes = f->hashes };
	struct ramstore_result r1, r2;
	struct rammap *m1, *m2, *back;
	struct cas_source *src;
	struct snapdoc d;
	uint8_t *st;
	size_t stlen, n = 0, cap = 0;
	uint8_t (*refs)[SHA256_LEN] = NULL;
	char why[WHY_MAX] = "";
	uint64_t nz = ram_fill(f);

	m1 = write_ram(f, &o, 1, &r1);
	assert_int_equal(m1->nonzero, nz);
	assert_int_equal(r1.pages_nonzero, nz);
	assert_int_equal(r1.pages_read, NPAGES);
	assert_int_equal(r1.pages_kept, 0);
	/* windows 1..15 have data; 1 and 2 are one chunk */
	assert_int_equal(m1->nchunks, 14);
	assert_int_equal(r1.chunks_new, 14);
	assert_int_equal(r1.chunks_present, 0);
	assert_true(r1.bytes_new > 0);
	/* window 1's pages in 1..64 slots, window 2 the same chunk and slots */
	assert_int_equal(m1->pages[RAMSTORE_WINDOW].chunk, 1);
	assert_int_equal(m1->pages[2 * RAMSTORE_WINDOW + 5].chunk, 1);
	assert_int_equal(m1->pages[2 * RAMSTORE_WINDOW + 5].slot, 5);
	assert_int_equal(m1->chunks[1].npages, RAMSTORE_WINDOW / 2);
	/* a page's hash: XXH3-128 of its bytes */
	assert_true(f->hashes[RAMSTORE_WINDOW][0] || f->hashes[RAMSTORE_WINDOW][1]);
	assert_memory_equal(f->hashes[RAMSTORE_WINDOW], f->hashes[2 * RAMSTORE_WINDOW],
			    RAMSTORE_HASH);

	/* the same RAM again, on 4 threads: the same map, nothing new in the store */
	m2 = write_ram(f, &(struct ramstore_opts){ 0 }, 4, &r2);
	assert_same_map(m1, m2);
	assert_int_equal(r2.chunks_new, 0);
	assert_int_equal(r2.bytes_new, 0);
	assert_int_equal(r2.chunks_present, 14);
	rammap_free(m2);

	doc_for(f, m1, &d);
	assert_int_equal(d.nmap, 1);
	assert_int_equal(d.map[0].size, RAMMAP_HEADER + 14 * RAMMAP_CHUNK_REC + NPAGES * 8);
	assert_int_equal(d.ram_pages, nz);
	assert_int_equal(d.ram_chunks, 14);
	src = source(f);
	assert_int_equal(ramstore_load_map(src, &d, &back, why, sizeof(why)), 0);
	assert_same_map(m1, back);
	check_pages(f, src, back);
	assert_int_equal(ramstore_load_state(src, &d, &st, &stlen, why, sizeof(why)), 0);
	assert_int_equal(stlen, d.state.size);
	assert_string_equal((char *)st, "vm.state bytes");
	free(st);
	/* the document of another machine's RAM: refused */
	d.mem_size *= 2;
	assert_int_equal(ramstore_load_map(src, &d, &m2, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "the snapshot document says"));
	assert_int_equal(ramstore_refs(&d, back, &refs, &n, &cap), 0);
	assert_int_equal(n, 1 + 1 + 14);
	assert_memory_equal(refs[0], d.state.digest, SHA256_LEN);
	assert_memory_equal(refs[1], d.map[0].digest, SHA256_LEN);
	assert_memory_equal(refs[2], back->chunks[0].digest, SHA256_LEN);
	free(refs);
	cas_source_close(src);
	rammap_free(back);
	rammap_free(m1);
}

/* A second snapshot over the first: only the pages that changed are stored. */
static void test_parent(void **state)
{
	struct fx *f = *state;
	struct ramstore_result r1, r2;
	struct rammap *m1, *m2;
	struct cas_source *src;
	uint64_t *changed = calloc(NPAGES / 64, sizeof(uint64_t)), seed = 7, nz;
	/* pages changed: 3 in window 5, 1 in window 9, 2 in window 15 */
	static const uint64_t pages[] = { 5 * 64 + 1, 5 * 64 + 2, 5 * 64 + 40, 9 * 64 + 63,
					  15 * 64, 15 * 64 + 10 };
	const size_t k = sizeof(pages) / sizeof(pages[0]);

	assert_non_null(changed);
	nz = ram_fill(f);
	m1 = write_ram(f, &(struct ramstore_opts){ .hashes = f->hashes }, 2, &r1);
	for (size_t i = 0; i < k; i++) {
		prng_fill(&seed, page(f, pages[i]), RAMMAP_PAGE);
		nz += pages[i] % 7 == 0; /* was a zero page */
		changed[pages[i] / 64] |= 1ull << (pages[i] % 64);
	}
	/* marked but the same: all of window 7, and window 1 */
	changed[7] = changed[1] = ~0ull;
	/* a page that became zero */
	memset(page(f, 11 * 64 + 4), 0, RAMMAP_PAGE);
	changed[11] |= 1ull << 4;
	nz--;
	m2 = write_ram(f, &(struct ramstore_opts){ .parent = m1, .changed = changed,
						   .hashes = f->hashes }, 2, &r2);
	assert_int_equal(r2.pages_new, k);
	assert_int_equal(r2.chunks_new, 3);
	assert_int_equal(r2.chunks_present, 0);
	assert_int_equal(r2.pages_read, k + 64 + 64 + 1);
	assert_int_equal(r2.pages_nonzero, nz);
	assert_int_equal(r2.pages_kept, nz - k);
	assert_int_equal(m2->nonzero, nz);
	/* the parent's 14 chunks still used, and the 3 new ones of 3, 1 and 2 pages */
	assert_int_equal(m2->nchunks, 17);
	assert_int_equal(m2->pages[pages[0]].chunk, m2->pages[pages[2]].chunk);
	assert_int_equal(m2->chunks[m2->pages[pages[0]].chunk - 1].npages, 3);
	assert_int_equal(m2->chunks[m2->pages[pages[3]].chunk - 1].npages, 1);
	assert_int_equal(m2->chunks[m2->pages[pages[5]].chunk - 1].npages, 2);
	assert_int_equal(m2->pages[pages[5]].slot, 1);
	assert_int_equal(m2->pages[11 * 64 + 4].chunk, 0);
	src = source(f);
	check_pages(f, src, m2);
	cas_source_close(src);

	/* without hashes, the marked windows 1 and 7 are stored again: as the same chunks (the
	 * changed windows' chunks are there already too) */
	rammap_free(m2);
	m2 = write_ram(f, &(struct ramstore_opts){ .parent = m1, .changed = changed }, 1, &r2);
	assert_int_equal(r2.pages_new, k + 64 + 64 - 64 / 7 - 1);
	assert_int_equal(r2.chunks_new, 0);
	assert_int_equal(r2.chunks_present, 5);
	assert_int_equal(r2.bytes_new, 0);
	rammap_free(m2);
	rammap_free(m1);
	free(changed);
}

static void corrupt(struct fx *f, const uint8_t d[SHA256_LEN])
{
	char path[PATH_MAX];
	uint8_t *frame;
	size_t len;

	assert_int_equal(store_read(f->s, d, &frame, &len), 0);
	frame[len - 1] ^= 0x40;
	store_chunk_path(f->s, d, path, sizeof(path));
	write_file(path, frame, len);
	free(frame);
}

static void test_corrupt(void **state)
{
	struct fx *f = *state;
	struct rammap *m, *back = NULL;
	struct cas_source *src;
	struct snapdoc d;
	uint8_t *st = NULL;
	size_t stlen;
	char why[WHY_MAX] = "";
	void *block;
	size_t len, flen;

	ram_fill(f);
	m = write_ram(f, &(struct ramstore_opts){ 0 }, 0, NULL);
	doc_for(f, m, &d);
	corrupt(f, d.map[0].digest);
	corrupt(f, d.state.digest);
	corrupt(f, m->chunks[3].digest);
	src = source(f);
	assert_int_not_equal(ramstore_load_map(src, &d, &back, why, sizeof(why)), 0);
	assert_null(back);
	assert_int_not_equal(ramstore_load_state(src, &d, &st, &stlen, why, sizeof(why)), 0);
	assert_null(st);
	assert_int_not_equal(cas_source_get(src, m->chunks[3].digest, rammap_chunk_bytes(m, 3), 0,
					    &block, &len, &flen), 0);
	cas_source_close(src);
	rammap_free(m);
}

static void test_bad_opts(void **state)
{
	struct fx *f = *state;
	struct ramstore_opts o = { .store = f->s };
	struct rammap *m, *m1;
	char why[WHY_MAX] = "";

	assert_int_equal(ramstore_write(&o, f->ram, RAM_SIZE + 1, &m, NULL, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "not a multiple of 4096"));
	assert_int_equal(rammap_new(RAM_SIZE / 2, &m1), 0);
	o.parent = m1;
	assert_int_equal(ramstore_write(&o, f->ram, RAM_SIZE, &m, NULL, why, sizeof(why)),
			 -EINVAL);
	assert_null(m);
	rammap_free(m1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_opts, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
