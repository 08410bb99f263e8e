/* SPDX-License-Identifier: MIT */
/* The chain of chunk tiers: the walk down, the puts back up, the one single-flight point. */
#include "../tier.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ADD(f, v) __atomic_add_fetch(&(f), (v), __ATOMIC_RELAXED)
#define GET(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)

/* A walk for one chunk under way: later askers of the chunk wait for it (single flight). */
struct flight {
	struct flight *next;
	const uint8_t *d;
	enum tier_ask ask;       /* the owner's */
	int prio;                /* REMOTE_PRIO_*: a demand ask raises a background one */
	bool raised;             /* a demand ask waited for it */
	struct tier *at;         /* the tier asked now (kicked when raised) */
	bool done;
	int ret;
	unsigned waiters;
	pthread_cond_t cond;     /* done, and then waiters back to 0 */
};

struct tier_chain {
	struct tier *top, *bottom;
	pthread_mutex_t lock;    /* the flights */
	struct flight *flights;
	uint64_t joins, bg_joins;
};

int tier_chain_new(struct tier_chain **out)
{
	struct tier_chain *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	pthread_mutex_init(&ch->lock, NULL);
	*out = ch;
	return 0;
}

void tier_chain_add(struct tier_chain *ch, struct tier *t)
{
	t->next = NULL;
	if (ch->bottom)
		ch->bottom->next = t;
	else
		ch->top = t;
	ch->bottom = t;
}

void tier_chain_free(struct tier_chain *ch)
{
	if (!ch)
		return;
	for (struct tier *t = ch->top, *next; t; t = next) {
		next = t->next;
		if (t->ops->close)
			t->ops->close(t);
	}
	pthread_mutex_destroy(&ch->lock);
	free(ch);
}

/* The first tier at level lvl or below it, or NULL. */
static struct tier *tier_chain_at(struct tier_chain *ch, enum tier_level lvl)
{
	struct tier *t = ch->top;

	while (t && t->level < lvl)
		t = t->next;
	return t;
}

/* Under ch->lock. */
static struct flight *flight_find(struct tier_chain *ch, const uint8_t d[SHA256_LEN])
{
	for (struct flight *f = ch->flights; f; f = f->next)
		if (!memcmp(f->d, d, SHA256_LEN))
			return f;
	return NULL;
}

/*
 * Wait for the walk f, raising it to q's priority first. Its result. Under ch->lock.
 * Counted as a join (fetch_joins) when a store fetch is one side of it: readers of one chunk
 * waiting for each other's load are the memory tier's business and never were counted.
 */
static int flight_join(struct tier_chain *ch, struct flight *f, struct tier_req *q)
{
	bool counted = f->ask == TIER_ASK_FETCH || q->ask == TIER_ASK_FETCH;
	int ret;

	if (counted)
		ADD(ch->joins, 1);
	if (!q->ahead && q->prio0 == REMOTE_PRIO_NOW)
		f->raised = true;
	if (q->prio0 == REMOTE_PRIO_NOW && f->prio != REMOTE_PRIO_NOW) {
		if (counted)
			ADD(ch->bg_joins, 1);
		__atomic_store_n(&f->prio, REMOTE_PRIO_NOW, __ATOMIC_RELAXED);
		if (f->at && f->at->ops->kick)
			f->at->ops->kick(f->at);
	}
	f->waiters++;
	while (!f->done)
		pthread_cond_wait(&f->cond, &ch->lock);
	ret = f->ret;
	if (f->at && f->at->level > TIER_STORE)
		q->fetched = true;
	if (--f->waiters == 0)
		pthread_cond_signal(&f->cond);
	return ret;
}

/* Register a walk for q->d, or wait for the one under way: 0 registered, 1 joined (*ret). */
static int flight_start(struct tier_chain *ch, struct flight *self, struct tier_req *q,
			int *ret)
{
	struct flight *f;

	pthread_mutex_lock(&ch->lock);
	f = flight_find(ch, q->d);
	if (f) {
		*ret = flight_join(ch, f, q);
		pthread_mutex_unlock(&ch->lock);
		return 1;
	}
	*self = (struct flight){ .d = q->d, .ask = q->ask, .prio = q->prio0 };
	pthread_cond_init(&self->cond, NULL);
	self->next = ch->flights;
	ch->flights = self;
	pthread_mutex_unlock(&ch->lock);
	return 0;
}

static void flight_end(struct tier_chain *ch, struct flight *self, int ret)
{
	pthread_mutex_lock(&ch->lock);
	self->ret = ret;
	self->done = true;
	if (self->waiters)
		pthread_cond_broadcast(&self->cond);
	while (self->waiters)
		pthread_cond_wait(&self->cond, &ch->lock);
	for (struct flight **pp = &ch->flights; *pp; pp = &(*pp)->next) {
		if (*pp == self) {
			*pp = self->next;
			break;
		}
	}
	pthread_mutex_unlock(&ch->lock);
	pthread_cond_destroy(&self->cond);
}

/* Offer c, got from tier `from`, to the tiers from top down to the one above `from`. */
static void put_up(struct tier *top, struct tier *from, struct tier_req *q,
		   struct tier_chunk *c)
{
	struct tier *above[8];
	unsigned n = 0;

	for (struct tier *t = top; t && t != from && n < 8; t = t->next)
		above[n++] = t;
	while (n--)
		if (above[n]->ops->put)
			above[n]->ops->put(above[n], q, c);
}

/* The walk below top, as the flight's owner. */
static int walk(struct tier_chain *ch, struct flight *self, struct tier *top,
		struct tier_req *q, struct tier_chunk *c)
{
	struct tier *t;
	int ret = -ENOENT;

	q->prio = &self->prio;
	for (t = top->next; t; t = t->next) {
		__atomic_store_n(&self->at, t, __ATOMIC_RELAXED);
		ret = t->ops->get(t, q, c);
		if (ret != -ENOENT)
			break;
	}
	if (ret)
		return ret;
	c->from = t->level;
	pthread_mutex_lock(&ch->lock);
	q->mark = q->ahead && !self->raised;
	pthread_mutex_unlock(&ch->lock);
	put_up(top, t, q, c);
	free(c->frame);
	c->frame = NULL;
	return 0;
}

int tier_chain_get(struct tier_chain *ch, struct tier_req *q, struct tier_chunk *c)
{
	struct tier *top = tier_chain_at(ch, q->top);
	struct flight self;
	int ret;

	if (!top)
		return -ENOENT;
	for (struct tier *t = top; t; t = t->next)
		q->head = t->head > q->head ? t->head : q->head;
	for (;;) {
		*c = (struct tier_chunk){ .fd = -1, .from = top->level };
		ret = top->ops->get(top, q, c);
		if (ret != -ENOENT || q->peek || !top->next)
			return ret;
		if (!flight_start(ch, &self, q, &ret))
			break;
		if (ret)
			return ret;
		/* the walk we waited for is done: ask again from the top */
	}
	/* a walk may have ended between the miss above and the registration */
	*c = (struct tier_chunk){ .fd = -1, .from = top->level };
	ret = top->ops->get(top, q, c);
	if (ret == -ENOENT)
		ret = walk(ch, &self, top, q, c);
	flight_end(ch, &self, ret);
	return ret;
}

void tier_chain_release(struct tier_chain *ch, const uint8_t d[SHA256_LEN],
			struct tier_chunk *c, bool bad)
{
	struct tier *m = ch->top;

	bool gone = true;

	if (c->ref && m && m->ops->release)
		gone = m->ops->release(m, c, bad);
	if (bad && gone)
		tier_chain_drop(ch, TIER_MEMORY + 1, TIER_PLAIN, d);
}

int tier_chain_has(struct tier_chain *ch, enum tier_level lvl, const uint8_t d[SHA256_LEN])
{
	for (struct tier *t = tier_chain_at(ch, lvl); t; t = t->next) {
		int ret = t->ops->has ? t->ops->has(t, d) : 0;

		if (ret)
			return ret;
	}
	return 0;
}

bool tier_chain_busy(struct tier_chain *ch, const uint8_t d[SHA256_LEN])
{
	bool busy;

	pthread_mutex_lock(&ch->lock);
	busy = flight_find(ch, d) != NULL;
	pthread_mutex_unlock(&ch->lock);
	return busy;
}

void tier_chain_drop(struct tier_chain *ch, enum tier_level from, enum tier_level to,
		     const uint8_t d[SHA256_LEN])
{
	for (struct tier *t = tier_chain_at(ch, from); t && t->level <= to; t = t->next)
		if (t->ops->drop)
			t->ops->drop(t, d);
}

void tier_chain_stats(struct tier_chain *ch, struct cas_source_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (struct tier *t = ch->top; t; t = t->next)
		if (t->ops->stats)
			t->ops->stats(t, st);
	st->joins = GET(ch->joins);
	st->bg_joins = GET(ch->bg_joins);
}
