/* SPDX-License-Identifier: MIT */
/* blkd/engine/engine: read order, read-modify-write, zeroes, status, concurrent requests. */
#include "../helpers.h"

#include <pthread.h>

#include "../../../blkd/engine/engine.h"
#include "../../../cas/chunk.h"
#include "../../../cas/store.h"
#include "../../../common/workq.h"
#include "../../../layout/layout.h"

#define BLK 4096u
#define NBLOCKS 64u
#define DISK ((uint64_t)NBLOCKS * BLK)

struct fixture {
	char dir[PATH_MAX];
	char layout[PATH_MAX];
	char store[PATH_MAX];
	char overlay[PATH_MAX];
	uint8_t meta[2][BLK];
	struct blkd_engine *e;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct layout_writer *w;
	struct store *s;

	if (!f)
		return -1;
	tmpdir_make(f->dir);
	path_fmt(f->layout, "%s/l", f->dir);
	path_fmt(f->store, "%s/store", f->dir);
	path_fmt(f->overlay, "%s/ov", f->dir);
	for (unsigned i = 0; i < BLK; i++) {
		f->meta[0][i] = (uint8_t)(i * 3 + 1);
		f->meta[1][i] = (uint8_t)(i * 5 + 2);
	}
	/* metadata at blocks 0 and 10; the rest reads as zeros */
	if (layout_writer_new(f->layout, NBLOCKS, &w) || layout_add_meta(w, 0, f->meta[0], 1) ||
	    layout_add_meta(w, 10, f->meta[1], 1) ||
	    layout_writer_finish(w, NULL, NULL, 65536, NULL))
		return -1;
	layout_writer_free(w);
	if (store_open(f->store, true, &s))
		return -1;
	store_close(s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	blkd_engine_close(f->e);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static void engine_open(struct fixture *f, bool with_overlay)
{
	struct blkd_engine_opts o = { .layout_path = f->layout, .store_dir = f->store,
				      .overlay_path = with_overlay ? f->overlay : NULL };

	blkd_engine_close(f->e);
	f->e = NULL;
	assert_int_equal(blkd_engine_open(&o, &f->e, NULL, 0), 0);
	assert_int_equal(blkd_engine_size(f->e), DISK);
}

static void test_read_order_and_rmw(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[3 * BLK], want[BLK];

	engine_open(f, true);
	assert_int_equal(blkd_engine_read(f->e, 0, BLK, buf), 0);
	assert_memory_equal(buf, f->meta[0], BLK);
	assert_int_equal(blkd_engine_read(f->e, 5 * BLK, BLK, buf), 0);
	for (unsigned i = 0; i < BLK; i++)
		assert_int_equal(buf[i], 0);
	/* a 512-byte write into a metadata block keeps the rest of it */
	memset(buf, 0xee, 512);
	assert_int_equal(blkd_engine_write(f->e, 10 * BLK + 1024, 512, buf, false), 0);
	memcpy(want, f->meta[1], BLK);
	memset(want + 1024, 0xee, 512);
	assert_int_equal(blkd_engine_read(f->e, 10 * BLK, BLK, buf), 0);
	assert_memory_equal(buf, want, BLK);
	/* a write straddling blocks 1..3 with partial ends */
	memset(buf, 0x11, sizeof(buf));
	assert_int_equal(blkd_engine_write(f->e, BLK + 512, 2 * BLK, buf, true), 0);
	assert_int_equal(blkd_engine_read(f->e, BLK, 3 * BLK, buf), 0);
	for (unsigned i = 0; i < 3 * BLK; i++)
		assert_int_equal(buf[i], i >= 512 && i < 512 + 2 * BLK ? 0x11 : 0);
	/* zeroes over part of the metadata block, discard of a dirty block */
	assert_int_equal(blkd_engine_write_zeroes(f->e, 10 * BLK, 1024 + 512), 0);
	assert_int_equal(blkd_engine_read(f->e, 10 * BLK, BLK, buf), 0);
	memset(want, 0, 1024 + 512);
	assert_memory_equal(buf, want, BLK);
	assert_int_equal(blkd_engine_discard(f->e, 2 * BLK, BLK), 0);
	assert_int_equal(blkd_engine_read(f->e, 2 * BLK, BLK, buf), 0);
	for (unsigned i = 0; i < BLK; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(blkd_engine_flush(f->e), 0);
	/* bad ranges */
	assert_int_equal(blkd_engine_read(f->e, 100, 512, buf), -EINVAL);
	assert_int_equal(blkd_engine_read(f->e, DISK - 512, 1024, buf), -EINVAL);
	assert_int_equal(blkd_engine_write(f->e, DISK, 512, buf, false), -EINVAL);
	/* everything survives a reopen */
	engine_open(f, true);
	assert_int_equal(blkd_engine_read(f->e, BLK, BLK, buf), 0);
	for (unsigned i = 0; i < BLK; i++)
		assert_int_equal(buf[i], i >= 512 ? 0x11 : 0);
}

struct span {
	uint64_t off, len;
	uint32_t flags;
};

struct spans {
	struct span s[64];
	int n;
};

static int collect(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct spans *sp = arg;

	if (sp->n == 64)
		return 1;
	sp->s[sp->n++] = (struct span){ off, len, flags };
	return 0;
}

static void test_status(void **state)
{
	struct fixture *f = *state;
	struct spans sp = { .n = 0 };
	uint8_t buf[BLK];

	engine_open(f, true);
	memset(buf, 1, sizeof(buf));
	assert_int_equal(blkd_engine_write(f->e, 20 * BLK, BLK, buf, false), 0);
	assert_int_equal(blkd_engine_write_zeroes(f->e, 30 * BLK, 2 * BLK), 0);
	assert_int_equal(blkd_engine_status(f->e, DISK_CTX_DIRTY, 0, DISK, collect, &sp), 0);
	assert_int_equal(sp.n, 5);
	assert_true(sp.s[1].off == 20 * BLK && sp.s[1].len == BLK && sp.s[1].flags == 1);
	assert_true(sp.s[3].off == 30 * BLK && sp.s[3].len == 2 * BLK && sp.s[3].flags == 1);
	sp.n = 0;
	assert_int_equal(blkd_engine_status(f->e, DISK_CTX_ALLOCATION, 0, 12 * BLK, collect, &sp),
			 0);
	/* block 0 data, 1..9 hole+zero, 10 data, 11 hole+zero */
	assert_int_equal(sp.n, 4);
	assert_true(sp.s[0].len == BLK && sp.s[0].flags == 0);
	assert_true(sp.s[1].flags == (DISK_STATUS_HOLE | DISK_STATUS_ZERO));
	assert_true(sp.s[2].off == 10 * BLK && sp.s[2].flags == 0);
}

static void test_read_only(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[BLK] = { 0 };

	engine_open(f, false);
	assert_true(blkd_engine_read_only(f->e));
	assert_int_equal(blkd_engine_write(f->e, 0, BLK, buf, false), -EPERM);
	assert_int_equal(blkd_engine_write_zeroes(f->e, 0, BLK), -EPERM);
	assert_int_equal(blkd_engine_discard(f->e, 0, BLK), -EPERM);
	assert_int_equal(blkd_engine_read(f->e, 10 * BLK, BLK, buf), 0);
	assert_memory_equal(buf, f->meta[1], BLK);
}

/*
 * Requests from many threads at once: the engine's calls are synchronous and thread-safe,
 * and an export that serves requests in parallel runs them on a common/workq (as NBD,
 * export and push do). Whole- and half-block writes of neighbouring blocks run
 * concurrently (half blocks are a read-modify-write of the block), then a flush, then reads.
 */
enum req_op { REQ_READ, REQ_WRITE, REQ_FLUSH };

struct req {
	struct workq_item item;   /* first: the item is the request */
	enum req_op op;
	uint64_t off;
	uint32_t len;
	uint8_t *buf;
};

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, errors;
	struct blkd_engine *e;
};

static void req_run(struct workq_item *it, void *ctx)
{
	struct req *r = (struct req *)it;
	struct waiter *w = ctx;
	int ret;

	if (r->op == REQ_READ)
		ret = blkd_engine_read(w->e, r->off, r->len, r->buf);
	else if (r->op == REQ_WRITE)
		ret = blkd_engine_write(w->e, r->off, r->len, r->buf, false);
	else
		ret = blkd_engine_flush(w->e);
	pthread_mutex_lock(&w->lock);
	if (ret)
		w->errors++;
	w->done++;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void wait_for(struct waiter *w, int n)
{
	pthread_mutex_lock(&w->lock);
	while (w->done < n)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void test_concurrent(void **state)
{
	struct fixture *f = *state;
	static struct req reqs[128];
	static uint8_t bufs[128][BLK];
	struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL };
	struct req flush = { .op = REQ_FLUSH };
	struct workq *q;

	engine_open(f, true);
	w.e = f->e;
	assert_int_equal(workq_new(4, 0, req_run, &w, &q), 0);
	/* misaligned requests are refused whichever thread sends them */
	assert_int_equal(blkd_engine_write(f->e, 100, BLK, bufs[0], false), -EINVAL);
	assert_int_equal(blkd_engine_read(f->e, 0, 100, bufs[0]), -EINVAL);
	/* 48 writes of whole blocks and 16 of half blocks, all in flight at once */
	for (int i = 0; i < 64; i++) {
		memset(bufs[i], 0x40 + i, BLK);
		reqs[i] = (struct req){ .op = REQ_WRITE,
					.off = (uint64_t)i * BLK + (i < 48 ? 0 : 2048),
					.len = i < 48 ? BLK : 2048, .buf = bufs[i] };
		assert_int_equal(workq_push(q, &reqs[i].item), 0);
	}
	wait_for(&w, 64);
	assert_int_equal(w.errors, 0);
	assert_int_equal(workq_push(q, &flush.item), 0);
	wait_for(&w, 65);
	for (int i = 0; i < 64; i++) {
		reqs[64 + i] = (struct req){ .op = REQ_READ, .off = (uint64_t)i * BLK, .len = BLK,
					     .buf = bufs[64 + i] };
		assert_int_equal(workq_push(q, &reqs[64 + i].item), 0);
	}
	wait_for(&w, 129);
	assert_int_equal(w.errors, 0);
	for (int i = 0; i < 64; i++) {
		for (unsigned b = 0; b < BLK; b++) {
			uint8_t want = i < 48 || b >= 2048 ? (uint8_t)(0x40 + i) : 0;

			if (bufs[64 + i][b] != want)
				fail_msg("request %d byte %u: %02x != %02x", i, b, bufs[64 + i][b], want);
		}
	}
	/* closing the queue drains it; a request after that is refused */
	workq_close(q);
	assert_int_equal(workq_push(q, &flush.item), -ESHUTDOWN);
	workq_free(q);
	assert_int_equal(w.done, 129);
}

/*
 * The read plan against a model: a layout of metadata and data runs at unaligned bytes
 * (several in one block, one block touched by a single byte), an overlay of random writes
 * and zeroes; for random ranges, blkd_engine_read's bytes, blkd_engine_read_sparse's bytes
 * and extents (holes left untouched), blkd_engine_status's allocation, and the blocks the
 * statistics count per source, all as the model says.
 */
#define PNB NBLOCKS
enum { M_ZERO, M_META, M_DATA, M_DIRTY, M_ZEROED };

struct pmodel {
	uint8_t want[PNB * BLK];
	uint8_t kind[PNB];         /* M_*: the source of each block */
};

struct pext {
	uint64_t off[PNB * 2], len[PNB * 2];
	uint32_t flags[PNB * 2];
	int n;
	bool gaps;                 /* not consecutive */
};

static int pcollect(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct pext *p = arg;

	if (p->n && p->off[p->n - 1] + p->len[p->n - 1] != off)
		p->gaps = true;
	if (p->n && p->flags[p->n - 1] == flags) {
		p->len[p->n - 1] += len;
		return 0;
	}
	assert_true(p->n < (int)PNB * 2);
	p->off[p->n] = off;
	p->len[p->n] = len;
	p->flags[p->n++] = flags;
	return 0;
}

static void plan_image(struct fixture *f, struct pmodel *m, char layout[PATH_MAX])
{
	static const struct { uint64_t pos; uint32_t len, coff; } runs[] = {
		{ 2 * BLK + 100, 5000, 0 }, { 3 * BLK + 3000, 3000, 7000 },
		{ 6 * BLK, 2 * BLK + 7, 100 }, { 20 * BLK + 4095, 1, 5 }, { 40 * BLK, 10 * BLK, 20000 },
	};
	uint8_t *chunk = malloc(65536), digest[SHA256_LEN], *frame;
	struct chunk_codec *codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	size_t cap = chunk_compress_bound(65536), n;
	struct layout_writer *w;
	struct store *s;

	frame = malloc(cap);
	assert_true(chunk && frame && codec);
	content_make(chunk, 65536, 8, false, digest);
	assert_int_equal(chunk_compress(codec, chunk, 65536, frame, cap, &n), 0);
	assert_int_equal(store_open(f->store, true, &s), 0);
	assert_int_equal(store_put(s, digest, frame, n), 0);
	assert_int_equal(store_commit(s), 0);
	store_close(s);
	memset(m, 0, sizeof(*m));
	path_fmt(layout, "%s/plan.layout", f->dir);
	assert_int_equal(layout_writer_new(layout, PNB, &w), 0);
	assert_int_equal(layout_add_meta(w, 0, f->meta[0], 1), 0);
	assert_int_equal(layout_add_meta(w, 1, f->meta[1], 1), 0);
	assert_int_equal(layout_add_meta(w, 30, f->meta[0], 1), 0);
	memcpy(m->want, f->meta[0], BLK);
	memcpy(m->want + BLK, f->meta[1], BLK);
	memcpy(m->want + 30 * BLK, f->meta[0], BLK);
	m->kind[0] = m->kind[1] = m->kind[30] = M_META;
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		assert_int_equal(layout_add_data(w, runs[i].pos, runs[i].len, digest, runs[i].coff),
				 0);
		memcpy(m->want + runs[i].pos, chunk + runs[i].coff, runs[i].len);
		for (uint64_t b = runs[i].pos / BLK; b * BLK < runs[i].pos + runs[i].len; b++)
			m->kind[b] = M_DATA;
	}
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	chunk_codec_free(codec);
	free(frame);
	free(chunk);
}

static void plan_check(struct fixture *f, const struct pmodel *m, uint64_t off, uint32_t len)
{
	static uint8_t buf[PNB * BLK];
	uint64_t want_hits[5] = { 0 }, got[5];
	struct blkd_engine_stats a, b;
	struct pext sp = { .n = 0 }, st = { .n = 0 }, ex = { .n = 0 };

	for (uint64_t blk = off / BLK; blk * BLK < off + len; blk++) {
		uint64_t s = blk * BLK > off ? blk * BLK : off;
		uint64_t e = (blk + 1) * BLK < off + len ? (blk + 1) * BLK : off + len;
		bool zero = m->kind[blk] == M_ZERO || m->kind[blk] == M_ZEROED;

		want_hits[m->kind[blk]]++;
		pcollect(&ex, s, e - s, zero ? DISK_STATUS_HOLE | DISK_STATUS_ZERO : 0);
	}
	assert_int_equal(blkd_engine_read(f->e, off, len, buf), 0);
	assert_memory_equal(buf, m->want + off, len);
	blkd_engine_get_stats(f->e, &a);
	memset(buf, 0xee, len);
	assert_int_equal(blkd_engine_read_sparse(f->e, off, len, buf, pcollect, &sp), 0);
	blkd_engine_get_stats(f->e, &b);
	assert_int_equal(blkd_engine_status(f->e, DISK_CTX_ALLOCATION, off, len, pcollect, &st), 0);
	assert_false(sp.gaps || st.gaps);
	assert_int_equal(sp.n, ex.n);
	assert_int_equal(st.n, ex.n);
	for (int i = 0; i < ex.n; i++) {
		assert_true(sp.off[i] == ex.off[i] && sp.len[i] == ex.len[i]);
		assert_true(st.off[i] == ex.off[i] && st.len[i] == ex.len[i]);
		assert_int_equal(sp.flags[i], ex.flags[i]);
		assert_int_equal(st.flags[i], ex.flags[i]);
		for (uint64_t k = ex.off[i]; k < ex.off[i] + ex.len[i]; k++)
			if (buf[k - off] != (ex.flags[i] ? 0xee : m->want[k]))
				fail_msg("read_sparse byte %llu", (unsigned long long)k);
	}
	got[M_ZERO] = b.zero_hits - a.zero_hits;
	got[M_META] = b.meta_hits - a.meta_hits;
	got[M_DATA] = b.chunk_hits - a.chunk_hits;
	got[M_DIRTY] = b.overlay_hits - a.overlay_hits;
	assert_true(got[M_ZERO] == want_hits[M_ZERO] + want_hits[M_ZEROED]);
	assert_true(got[M_META] == want_hits[M_META] && got[M_DATA] == want_hits[M_DATA]);
	assert_true(got[M_DIRTY] == want_hits[M_DIRTY]);
	assert_true(b.reads == a.reads + 1 && b.read_bytes == a.read_bytes + len);
}

static void test_read_plan(void **state)
{
	struct fixture *f = *state;
	struct pmodel *m = malloc(sizeof(*m));
	struct blkd_engine_opts o = { .store_dir = f->store, .overlay_path = f->overlay,
				      .readahead = -1 };
	char layout[PATH_MAX];
	uint8_t w[3 * BLK];
	uint64_t seed = 99;

	assert_non_null(m);
	plan_image(f, m, layout);
	o.layout_path = layout;
	assert_int_equal(blkd_engine_open(&o, &f->e, NULL, 0), 0);
	plan_check(f, m, 0, PNB * BLK); /* a clean overlay */
	for (int i = 0; i < 40; i++) {
		uint64_t r = prng_next(&seed), blk = r % PNB, len = 512 * (1 + (r >> 8) % 16);
		uint64_t off = blk * BLK + 512 * ((r >> 16) % 8);

		if (off + len > PNB * BLK)
			len = PNB * BLK - off;
		if ((r >> 24) % 3) {
			prng_fill(&seed, w, len);
			assert_int_equal(blkd_engine_write(f->e, off, (uint32_t)len, w, false), 0);
			memcpy(m->want + off, w, len);
		} else {
			assert_int_equal(blkd_engine_write_zeroes(f->e, off, len), 0);
			memset(m->want + off, 0, len);
		}
		for (uint64_t b = off / BLK; b * BLK < off + len; b++) {
			bool whole = off <= b * BLK && (b + 1) * BLK <= off + len;

			m->kind[b] = (r >> 24) % 3 || !whole ? M_DIRTY : M_ZEROED;
		}
	}
	for (int i = 0; i < 300; i++) {
		uint64_t r = prng_next(&seed), off = 512 * (r % (PNB * 8));
		uint64_t len = 512 * (1 + (r >> 16) % (PNB * 8));

		if (off + len > PNB * BLK)
			len = PNB * BLK - off;
		plan_check(f, m, off, (uint32_t)len);
	}
	plan_check(f, m, 0, PNB * BLK);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_order_and_rmw, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_plan, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
