/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the chain of chunk tiers (cas/tier.h): fake tiers and real ones (memory
 * over a store). A miss is filled from below and put into the tiers above; one load per
 * chunk however many ask at once; a corrupt chunk is never served; drop; stats.
 */
#include "../helpers.h"

#include "../../../cas/chunk.h"
#include "../../../cas/source.h"
#include "../../../cas/tier.h"

#define LEN 5000

/* A tier holding chunks in memory: counts its calls; get may wait at a gate. */
struct fake {
	struct tier t;
	uint8_t d[4][SHA256_LEN];
	uint8_t *bytes[4];
	size_t len[4];
	int n;
	int gets, hits, puts, drops;   /* atomic */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool gated, open;
};

#define FK(t) ((struct fake *)(t))

static int fake_find(struct fake *f, const uint8_t d[SHA256_LEN])
{
	for (int i = 0; i < f->n; i++)
		if (f->bytes[i] && !memcmp(f->d[i], d, SHA256_LEN))
			return i;
	return -1;
}

static int fake_get(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct fake *f = FK(t);
	int i;

	__atomic_add_fetch(&f->gets, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&f->lock);
	while (f->gated && !f->open)
		pthread_cond_wait(&f->cond, &f->lock);
	i = fake_find(f, q->d);
	pthread_mutex_unlock(&f->lock);
	if (i < 0)
		return -ENOENT;
	__atomic_add_fetch(&f->hits, 1, __ATOMIC_SEQ_CST);
	c->block = malloc(q->head + f->len[i]);
	assert_non_null(c->block);
	memcpy((uint8_t *)c->block + q->head, f->bytes[i], f->len[i]);
	c->len = f->len[i];
	c->frame_len = f->len[i];
	return 0;
}

static void fake_add(struct fake *f, const uint8_t d[SHA256_LEN], const void *b, size_t len)
{
	assert_true(f->n < 4);
	memcpy(f->d[f->n], d, SHA256_LEN);
	f->bytes[f->n] = malloc(len);
	memcpy(f->bytes[f->n], b, len);
	f->len[f->n++] = len;
}

static void fake_put(struct tier *t, const struct tier_req *q, struct tier_chunk *c)
{
	struct fake *f = FK(t);

	__atomic_add_fetch(&f->puts, 1, __ATOMIC_SEQ_CST);
	if (c->block && fake_find(f, q->d) < 0)
		fake_add(f, q->d, (uint8_t *)c->block + q->head, c->len);
}

static int fake_has(struct tier *t, const uint8_t d[SHA256_LEN])
{
	return fake_find(FK(t), d) >= 0;
}

static void fake_drop(struct tier *t, const uint8_t d[SHA256_LEN])
{
	struct fake *f = FK(t);
	int i = fake_find(f, d);

	f->drops++;
	if (i >= 0) {
		free(f->bytes[i]);
		f->bytes[i] = NULL;
	}
}

static void fake_stats(struct tier *t, struct cas_source_stats *st)
{
	st->disk_hits += (uint64_t)FK(t)->hits;
}

static void fake_close(struct tier *t)
{
	struct fake *f = FK(t);

	for (int i = 0; i < f->n; i++)
		free(f->bytes[i]);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

static const struct tier_ops fake_ops = {
	.get = fake_get, .put = fake_put, .has = fake_has, .drop = fake_drop,
	.stats = fake_stats, .close = fake_close,
};

static struct fake *fake_new(enum tier_level lvl)
{
	struct fake *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->t = (struct tier){ .ops = &fake_ops, .level = lvl, .name = "fake" };
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	return f;
}

static void chunk_of(uint8_t *raw, uint64_t seed, uint8_t d[SHA256_LEN])
{
	content_make(raw, LEN, seed, false, d);
}

static struct tier_req req(const uint8_t *d, enum tier_ask ask, enum tier_level top)
{
	return (struct tier_req){ .d = d, .max = 65536, .ask = ask, .top = top,
				  .prio0 = REMOTE_PRIO_NOW };
}

/* A get that misses the top is filled from below and put into every tier above. */
static void test_fill_from_below(void **state)
{
	struct fake *top = fake_new(TIER_PLAIN), *mid = fake_new(TIER_STORE);
	struct fake *bot = fake_new(TIER_REMOTE);
	struct tier_chain *ch;
	struct tier_chunk c;
	struct tier_req q;
	uint8_t raw[LEN], d[SHA256_LEN];
	int g;

	(void)state;
	chunk_of(raw, 1, d);
	fake_add(bot, d, raw, LEN);
	assert_int_equal(tier_chain_new(&ch), 0);
	tier_chain_add(ch, &top->t);
	tier_chain_add(ch, &mid->t);
	tier_chain_add(ch, &bot->t);
	assert_int_equal(tier_chain_has(ch, TIER_PLAIN, d), 1);
	assert_int_equal(tier_chain_has(ch, TIER_MEMORY, raw), 0); /* no such chunk */

	q = req(d, TIER_ASK_GET, TIER_PLAIN);
	q.head = 16;
	assert_int_equal(tier_chain_get(ch, &q, &c), 0);
	assert_int_equal(c.from, TIER_REMOTE);
	assert_int_equal(c.len, LEN);
	assert_memory_equal((uint8_t *)c.block + 16, raw, LEN);
	free(c.block);
	assert_int_equal(mid->puts, 1);
	assert_int_equal(top->puts, 1);
	assert_true(fake_has(&top->t, d) && fake_has(&mid->t, d));

	/* again: the top has it, nothing below is asked */
	q = req(d, TIER_ASK_GET, TIER_PLAIN);
	assert_int_equal(tier_chain_get(ch, &q, &c), 0);
	assert_int_equal(c.from, TIER_PLAIN);
	free(c.block);
	assert_int_equal(bot->gets, 1);
	assert_int_equal(mid->gets, 1);

	/* an ask that starts lower skips the tiers above it */
	g = top->gets;
	q = req(d, TIER_ASK_GET, TIER_STORE);
	assert_int_equal(tier_chain_get(ch, &q, &c), 0);
	assert_int_equal(c.from, TIER_STORE);
	free(c.block);
	assert_int_equal(top->gets, g);

	/* missing everywhere */
	q = req(raw, TIER_ASK_GET, TIER_PLAIN);
	assert_int_equal(tier_chain_get(ch, &q, &c), -ENOENT);
	tier_chain_free(ch);
}

struct asker {
	struct tier_chain *ch;
	const uint8_t *d, *raw;
	int ret;
};

static void *hold_one(void *arg)
{
	struct asker *a = arg;
	struct tier_req q = req(a->d, TIER_ASK_HOLD, TIER_MEMORY);
	struct tier_chunk c;

	a->ret = tier_chain_get(a->ch, &q, &c);
	if (!a->ret) {
		if (!c.data || c.len != LEN || memcmp(c.data, a->raw, LEN))
			a->ret = -EIO;
		tier_chain_release(a->ch, a->d, &c, false);
	}
	return NULL;
}

/* N threads ask one missing chunk at once: one load below, every one gets the bytes. */
static void test_single_flight(void **state)
{
	struct tier *mem = tier_memory_new(NULL);
	struct fake *bot = fake_new(TIER_STORE);
	struct tier_chain *ch;
	struct asker a[8];
	pthread_t t[8];
	uint8_t raw[LEN], d[SHA256_LEN];
	struct cas_source_stats st;

	(void)state;
	chunk_of(raw, 2, d);
	fake_add(bot, d, raw, LEN);
	bot->gated = true;
	assert_int_equal(tier_chain_new(&ch), 0);
	tier_chain_add(ch, mem);
	tier_chain_add(ch, &bot->t);
	tier_memory_set(mem, 1 << 20);
	for (int i = 0; i < 8; i++) {
		a[i] = (struct asker){ ch, d, raw, 1 };
		assert_int_equal(pthread_create(&t[i], NULL, hold_one, &a[i]), 0);
	}
	/* the first asker is in the bottom tier's get, held at the gate: a walk is under way */
	while (!__atomic_load_n(&bot->gets, __ATOMIC_SEQ_CST))
		sched_yield();
	assert_true(tier_chain_busy(ch, d));
	pthread_mutex_lock(&bot->lock);
	bot->open = true;
	pthread_cond_broadcast(&bot->cond);
	pthread_mutex_unlock(&bot->lock);
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].ret, 0);
	}
	assert_int_equal(bot->gets, 1);
	assert_false(tier_chain_busy(ch, d));
	tier_chain_stats(ch, &st);
	assert_int_equal(st.mem.loads, 1);
	assert_int_equal(st.mem.hits, 7);
	assert_int_equal(st.mem.bytes, LEN);
	assert_int_equal(st.disk_hits, 1);   /* the fake's counter, summed by the chain */
	assert_int_equal(st.joins, 0);       /* holders waiting for each other: not fetch joins */

	/* drop: forgotten in memory, loaded from below again */
	tier_chain_drop(ch, TIER_MEMORY, TIER_MEMORY, d);
	assert_int_equal(tier_chain_has(ch, TIER_MEMORY, d), 1); /* the fake below has it */
	hold_one(&a[0]);
	assert_int_equal(a[0].ret, 0);
	assert_int_equal(bot->gets, 2);
	tier_chain_free(ch);
}

/* ------------------------------------------------------------------ real tiers */

struct store_fx {
	char dir[PATH_MAX], store[PATH_MAX];
	struct store *s;
	struct chunk_codec *codec;
	uint8_t raw[2][LEN];
	uint8_t d[2][SHA256_LEN];   /* 0: a good chunk, 1: a corrupt one */
};

static void store_fx_make(struct store_fx *x)
{
	size_t cap = chunk_compress_bound(LEN), n;
	uint8_t *frame = malloc(cap);

	assert_non_null(frame);
	assert_int_equal(store_tmp_open(x->dir, x->store, &x->s), 0);
	x->codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	chunk_of(x->raw[0], 3, x->d[0]);
	chunk_of(x->raw[1], 4, x->d[1]);
	assert_int_equal(chunk_compress(x->codec, x->raw[0], LEN, frame, cap, &n), 0);
	assert_int_equal(store_put(x->s, x->d[0], frame, n), 0);
	/* chunk 1's name over chunk 0's bytes: a valid frame that fails verification */
	assert_int_equal(store_put(x->s, x->d[1], frame, n), 0);
	assert_int_equal(store_commit(x->s), 0);
	free(frame);
}

static void store_fx_free(struct store_fx *x)
{
	store_close(x->s);
	chunk_codec_free(x->codec);
	rm_rf(x->dir);
}

/* Memory over a real store: hits, loads, a corrupt chunk never served nor kept. */
static void test_memory_over_store(void **state)
{
	struct cas_source_opts o = { .no_plain = true };
	struct store_fx x;
	struct cas_source *src;
	struct cas_source_stats st;
	struct cas_held h;

	(void)state;
	store_fx_make(&x);
	o.store_dir = x.store;
	assert_int_equal(cas_source_open(&o, &src, NULL, 0), 0);
	assert_int_equal(cas_source_memory(src, 1 << 20), 0);
	assert_false(cas_source_bounded(src));

	assert_int_equal(cas_source_hold(src, x.d[0], 65536, CAS_HOLD_PEEK, &h), -ENOENT);
	assert_int_equal(cas_source_hold(src, x.d[0], 65536, 0, &h), 0);
	assert_true(h.loaded);
	assert_int_equal(h.len, LEN);
	assert_memory_equal(h.data, x.raw[0], LEN);
	cas_source_release(src, x.d[0], &h, 0);
	assert_int_equal(cas_source_hold(src, x.d[0], 65536, CAS_HOLD_PEEK, &h), 0);
	assert_false(h.loaded);
	cas_source_release(src, x.d[0], &h, 0);
	assert_true(cas_source_busy(src, x.d[0]));

	for (int i = 0; i < 2; i++) {
		assert_int_equal(cas_source_hold(src, x.d[1], 65536, 0, &h), -EIO);
		assert_false(cas_source_busy(src, x.d[1]));
	}
	cas_source_get_stats(src, &st);
	assert_int_equal(st.mem.loads, 1);
	assert_int_equal(st.mem.hits, 1);
	assert_int_equal(st.disk_hits, 1);
	assert_int_equal(st.verify_failures, 2);
	assert_int_equal(st.has_plain, 0);
	cas_source_close(src);
	store_fx_free(&x);
}

/* The plain tier between memory and the store: written after a store load, then used. */
static void test_plain_tier(void **state)
{
	struct cas_source_opts o = { 0 };
	struct store_fx x;
	struct cas_source *src;
	struct cas_source_stats st;
	struct cas_chunk c;

	(void)state;
	store_fx_make(&x);
	o.store_dir = x.store;
	assert_int_equal(cas_source_open(&o, &src, NULL, 0), 0);
	/* first load: from the store, handed on as the plain copy just written */
	assert_int_equal(cas_source_load(src, x.d[0], 65536, 0, &c), 0);
	assert_true(c.fd >= 0);
	assert_null(c.block);
	close(c.fd);
	/* second: from the plain tier */
	assert_int_equal(cas_source_load(src, x.d[0], 65536, 0, &c), 0);
	assert_true(c.fd >= 0);
	close(c.fd);
	cas_source_get_stats(src, &st);
	assert_int_equal(st.plain_writes, 1);
	assert_int_equal(st.plain_hits, 1);
	assert_int_equal(st.disk_hits, 1);
	/* dropped as bad: counted, removed, the next load takes the store again */
	cas_source_plain_bad(src, x.d[0]);
	assert_int_equal(cas_source_load(src, x.d[0], 65536, 0, &c), 0);
	close(c.fd);
	free(c.block);
	cas_source_get_stats(src, &st);
	assert_int_equal(st.plain_bad, 1);
	assert_int_equal(st.disk_hits, 2);
	/* a corrupt chunk gets no plain copy */
	assert_int_equal(cas_source_load(src, x.d[1], 65536, 0, &c), -EIO);
	cas_source_get_stats(src, &st);
	assert_int_equal(st.plain_writes, 2);
	cas_source_close(src);
	store_fx_free(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fill_from_below),
		cmocka_unit_test(test_single_flight),
		cmocka_unit_test(test_memory_over_store),
		cmocka_unit_test(test_plain_tier),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
