/* SPDX-License-Identifier: MIT */
/* Unit tests for cas/chunker: parallel hashing, dedup, compression and staging. */
#include "../helpers.h"

#include "../../../cas/chunk.h"
#include "../../../cas/chunker.h"
#include "../../../cas/store.h"
#include "../../../cas/verify.h"
#include "../../../common/grow.h"
#include "../../../common/sha256.h"

#define CSIZE (64u << 10)

struct fixture {
	char dir[PATH_MAX];
	char store[PATH_MAX];
	struct store *s;
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

	store_close(f->s);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/*
 * Job i carries the content of "key" k(i): every 3rd job repeats an earlier key, so the
 * run has duplicates both close together (likely in flight at once) and far apart.
 */
static uint32_t job_key(uint32_t i)
{
	if (i % 3 == 2)
		return (i * 7919u) % (i + 1) / 3 * 3; /* an earlier job's key (never a dup) */
	return i;
}

static size_t key_len(uint32_t k)
{
	uint64_t s = 0x1234 + k;

	if (k % 5 == 0)
		return CSIZE;                      /* full chunks */
	if (k % 7 == 0)
		return 1 + k % 3;                  /* tiny ones */
	return 1 + (size_t)(prng_next(&s) % CSIZE);
}

static void key_fill(uint32_t k, uint8_t *buf, size_t len)
{
	uint64_t s = 0xabcdef00ull + k;

	prng_fill(&s, buf, len);
	if (k % 2) /* half of them compressible */
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)('a' + buf[i] % 3);
}

struct run {
	uint32_t n;
	struct mf_chunk (*slots)[3];   /* up to 3 pieces per job */
	uint32_t *n_slots;
	uint32_t *keys;
};

static void run_alloc(struct run *r, uint32_t n)
{
	r->n = n;
	r->slots = calloc(n, sizeof(*r->slots));
	r->n_slots = calloc(n, sizeof(*r->n_slots));
	r->keys = calloc(n, sizeof(*r->keys));
	assert_non_null(r->slots);
	assert_non_null(r->n_slots);
	assert_non_null(r->keys);
}

static void run_free(struct run *r)
{
	free(r->slots);
	free(r->n_slots);
	free(r->keys);
}

/* Submits r->n jobs; returns the chunker's finish result. */
static int run_chunker(struct fixture *f, unsigned threads, struct run *r,
		       uint32_t (*key)(uint32_t), struct chunker_stats *st)
{
	struct chunker_opts o = { .threads = threads, .chunk_size = CSIZE, .level = 1 };
	struct chunker *c;
	int ret;

	assert_int_equal(chunker_new(f->s, &o, &c), 0);
	assert_int_equal(chunker_chunk_size(c), CSIZE);
	for (uint32_t i = 0; i < r->n; i++) {
		struct chunk_buf *b = chunker_buf_get(c);
		uint32_t k = key(i);
		size_t len = key_len(k), off = 0;

		assert_non_null(b);
		assert_int_equal(b->fill, 0);
		assert_int_equal(b->n_slots, 0);
		r->keys[i] = k;
		key_fill(k, b->data, len);
		b->fill = len;
		/* 1..3 pieces covering the buffer, as packing would make them */
		r->n_slots[i] = len >= 3 ? 1 + i % 3 : 1;
		for (uint32_t p = 0; p < r->n_slots[i]; p++) {
			struct mf_chunk *slot = &r->slots[i][p];
			size_t plen = p + 1 == r->n_slots[i] ? len - off : len / r->n_slots[i];

			memset(slot->digest, 0xee, SHA256_LEN);
			slot->off = (uint32_t)off;
			slot->len = (uint32_t)plen;
			b->slots[b->n_slots++] = slot;
			off += plen;
		}
		ret = chunker_submit(c, b);
		assert_int_equal(ret, 0);
	}
	ret = chunker_finish(c);
	chunker_get_stats(c, st);
	chunker_free(c);
	return ret;
}

static int digest_cmp(const void *a, const void *b)
{
	return memcmp(a, b, SHA256_LEN);
}

struct digest_list {
	uint8_t (*d)[SHA256_LEN];
	size_t n, cap;
};

static int collect(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct digest_list *l = arg;

	(void)path;
	assert_non_null(grow((void **)&l->d, &l->cap, l->n + 1, sizeof(*l->d)));
	memcpy(l->d[l->n++], d, SHA256_LEN);
	return 0;
}

/* Checks slots, stats and store contents after a run over a fresh store. */
static void check_run(struct fixture *f, const struct run *r, const struct chunker_stats *st,
		      bool fresh_store)
{
	uint8_t *buf = malloc(CSIZE), (*uniq)[SHA256_LEN] = calloc(r->n, SHA256_LEN);
	struct dl { uint8_t d[SHA256_LEN]; uint64_t len; } *dl = calloc(r->n, sizeof(*dl));
	struct digest_list in_store = { 0 };
	struct store_stats ss;
	uint64_t raw = 0, uniq_raw = 0;
	size_t n_uniq = 0;

	assert_non_null(buf);
	assert_non_null(uniq);
	for (uint32_t i = 0; i < r->n; i++) {
		uint32_t k = r->keys[i];
		size_t len = key_len(k), off = 0;
		uint8_t d[SHA256_LEN];

		key_fill(k, buf, len);
		assert_int_equal(sha256_buf(buf, len, d), 0);
		raw += len;
		for (uint32_t p = 0; p < r->n_slots[i]; p++) {
			const struct mf_chunk *slot = &r->slots[i][p];

			if (memcmp(slot->digest, d, SHA256_LEN))
				fail_msg("job %u piece %u: wrong digest", i, p);
			/* the importer's len and off are left alone */
			assert_int_equal(slot->off, off);
			off += slot->len;
		}
		assert_int_equal(off, len);
		memcpy(dl[i].d, d, SHA256_LEN);
		dl[i].len = len;
	}
	/* unique by content (different keys may well give the same tiny chunk) */
	qsort(dl, r->n, sizeof(*dl), digest_cmp);
	for (uint32_t i = 0; i < r->n; i++) {
		if (i && !memcmp(dl[i].d, uniq[n_uniq - 1], SHA256_LEN))
			continue;
		memcpy(uniq[n_uniq++], dl[i].d, SHA256_LEN);
		uniq_raw += dl[i].len;
	}
	assert_int_equal(st->chunks, r->n);
	assert_int_equal(st->raw_bytes, raw);
	if (fresh_store) {
		assert_int_equal(st->new_chunks, n_uniq);
		assert_int_equal(st->dup_chunks, r->n - n_uniq);
	} else {
		assert_int_equal(st->new_chunks, 0);
		assert_int_equal(st->new_bytes, 0);
		assert_int_equal(st->dup_chunks, r->n);
	}

	/* the store holds exactly the unique chunks, each verifiable */
	assert_int_equal(store_foreach(f->s, collect, &in_store), 0);
	assert_int_equal(in_store.n, n_uniq);
	qsort(in_store.d, in_store.n, SHA256_LEN, digest_cmp);
	assert_memory_equal(in_store.d, uniq, n_uniq * SHA256_LEN);
	assert_int_equal(store_stats(f->s, &ss), 0);
	assert_int_equal(ss.chunks, n_uniq);
	assert_int_equal(ss.raw_bytes, uniq_raw);
	assert_int_equal(ss.bad_headers, 0);
	if (fresh_store)
		assert_int_equal(ss.stored_bytes, st->new_bytes);
	for (size_t i = 0; i < n_uniq; i += 17) {
		char why[WHY_MAX] = "";

		assert_int_equal(store_verify_one(f->s, uniq[i], why, sizeof(why)), 0);
	}
	free(in_store.d);
	free(dl);
	free(uniq);
	free(buf);
}

static void test_threads(struct fixture *f, unsigned threads)
{
	struct chunker_stats st;
	struct run r;

	run_alloc(&r, 300);
	assert_int_equal(run_chunker(f, threads, &r, job_key, &st), 0);
	check_run(f, &r, &st, true);
	/* the same again: everything is already in the store */
	memset(r.slots, 0, r.n * sizeof(*r.slots));
	assert_int_equal(run_chunker(f, threads, &r, job_key, &st), 0);
	check_run(f, &r, &st, false);
	run_free(&r);
}

static void test_1_thread(void **state) { test_threads(*state, 1); }
static void test_2_threads(void **state) { test_threads(*state, 2); }
static void test_3_threads(void **state) { test_threads(*state, 3); }
static void test_4_threads(void **state) { test_threads(*state, 4); }

/* Many small unique chunks (the seen-set grows several times) and every one repeated. */
static uint32_t key_half(uint32_t i) { return i % 2500; }

static void test_many_chunks(void **state)
{
	struct fixture *f = *state;
	struct chunker_stats st;
	struct run r;

	run_alloc(&r, 5000);
	assert_int_equal(run_chunker(f, 3, &r, key_half, &st), 0);
	check_run(f, &r, &st, true);
	assert_true(st.new_chunks <= 2500);
	assert_true(st.new_chunks > 2000);
	assert_int_equal(st.new_chunks + st.dup_chunks, 5000);
	run_free(&r);
}

static void test_default_threads_and_size(void **state)
{
	struct fixture *f = *state;
	struct chunker_opts o = { 0 };
	struct chunker_stats st;
	struct chunker *c;
	struct chunk_buf *b;
	struct mf_chunk slot = { .len = 5 };
	uint8_t d[SHA256_LEN];

	assert_int_equal(chunker_new(f->s, &o, &c), 0);
	assert_int_equal(chunker_chunk_size(c), CHUNK_SIZE_DEFAULT);
	b = chunker_buf_get(c);
	memcpy(b->data, "hello", 5);
	b->fill = 5;
	b->slots[b->n_slots++] = &slot;
	assert_int_equal(chunker_submit(c, b), 0);
	assert_int_equal(chunker_finish(c), 0);
	chunker_get_stats(c, &st);
	assert_int_equal(st.chunks, 1);
	assert_int_equal(st.new_chunks, 1);
	assert_int_equal(st.raw_bytes, 5);
	chunker_free(c);
	assert_int_equal(sha256_buf("hello", 5, d), 0);
	assert_memory_equal(slot.digest, d, SHA256_LEN);
	assert_int_equal(store_has(f->s, d), 1);
	chunker_free(NULL);
}

static void count_tick(void *arg)
{
	(*(int *)arg)++;
}

/*
 * chunker_wait returns once every chunk submitted is done, ticking (on the caller's thread)
 * as they finish; with nothing in flight it returns at once without a tick.
 */
static void test_wait_ticks(void **state)
{
	struct fixture *f = *state;
	struct chunker_opts o = { .threads = 1, .chunk_size = 4096, .level = 19 };
	struct mf_chunk slots[6] = { 0 };
	struct chunker_stats st;
	struct chunker *c;
	int ticks = 0;

	assert_int_equal(chunker_new(f->s, &o, &c), 0);
	chunker_wait(c, count_tick, &ticks);
	assert_int_equal(ticks, 0);
	for (int i = 0; i < 6; i++) {
		struct chunk_buf *b = chunker_buf_get(c);

		for (size_t k = 0; k < 4096; k++)
			b->data[k] = (uint8_t)(k * 7 + (size_t)i * 131 + (k >> 5));
		b->fill = 4096;
		slots[i].len = 4096;
		b->slots[b->n_slots++] = &slots[i];
		assert_int_equal(chunker_submit(c, b), 0);
	}
	chunker_wait(c, count_tick, &ticks);
	chunker_get_stats(c, &st);
	assert_int_equal(st.new_chunks + st.dup_chunks, 6);
	assert_int_equal(chunker_finish(c), 0);
	chunker_free(c);
}

/* Every buffer can be borrowed at once and given back unused, reset. */
static void test_buf_get_put(void **state)
{
	struct fixture *f = *state;
	struct chunker_opts o = { .threads = 2, .chunk_size = 4096 };
	struct chunk_buf *bufs[64];
	struct chunker_stats st;
	struct chunker *c;
	int n = 0;

	assert_int_equal(chunker_new(f->s, &o, &c), 0);
	/* the pool holds at least one buffer per thread */
	for (n = 0; n < 2; n++) {
		bufs[n] = chunker_buf_get(c);
		assert_non_null(bufs[n]);
		assert_non_null(bufs[n]->data);
		assert_non_null(bufs[n]->slots);
		bufs[n]->fill = 100;
		bufs[n]->n_slots = 3;
		if (n)
			assert_ptr_not_equal(bufs[n], bufs[n - 1]);
	}
	while (n > 0)
		chunker_buf_put(c, bufs[--n]);
	bufs[0] = chunker_buf_get(c);
	assert_int_equal(bufs[0]->fill, 0);
	assert_int_equal(bufs[0]->n_slots, 0);
	chunker_buf_put(c, bufs[0]);
	assert_int_equal(chunker_finish(c), 0);
	chunker_get_stats(c, &st);
	assert_int_equal(st.chunks, 0);
	assert_int_equal(st.new_chunks, 0);
	chunker_free(c);
}

/* A worker's store error is returned by chunker_finish (and by later submits). */
static void test_worker_error(void **state)
{
	struct fixture *f = *state;
	struct chunker_opts o = { .threads = 1, .chunk_size = 4096 };
	struct mf_chunk slots[40];
	struct chunker *c;
	char tmp[PATH_MAX];
	int last = 0;

	path_fmt(tmp, "%s/tmp", f->store);
	assert_int_equal(rmdir(tmp), 0); /* staging files can no longer be created */
	assert_int_equal(chunker_new(f->s, &o, &c), 0);
	for (int i = 0; i < 40; i++) {
		struct chunk_buf *b = chunker_buf_get(c);

		snprintf((char *)b->data, 4096, "chunk %d", i);
		b->fill = strlen((char *)b->data);
		slots[i].len = (uint32_t)b->fill;
		slots[i].off = 0;
		b->slots[b->n_slots++] = &slots[i];
		last = chunker_submit(c, b);
		assert_true(last == 0 || last == -ENOENT);
	}
	/* 40 jobs through a pool of a few buffers: the error was seen before the end */
	assert_int_equal(last, -ENOENT);
	assert_int_equal(chunker_finish(c), -ENOENT);
	chunker_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_1_thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_2_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_3_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_4_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_many_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_default_threads_and_size, setup, teardown),
		cmocka_unit_test_setup_teardown(test_buf_get_put, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_ticks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_worker_error, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
