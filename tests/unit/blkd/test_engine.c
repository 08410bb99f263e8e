/* SPDX-License-Identifier: MIT */
/* blkd/engine/engine: read order, read-modify-write, zeroes, status, concurrent requests. */
#include "../helpers.h"

#include <pthread.h>

#include "../../../blkd/engine/engine.h"
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_order_and_rmw, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
