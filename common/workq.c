// SPDX-License-Identifier: MIT
/* The work queue (workq.h): one lock, two condition variables, a list. */
#include "workq.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct workq {
	pthread_mutex_t lock;
	pthread_cond_t work;           /* an item queued, or closing */
	pthread_cond_t room;           /* an item taken from a bounded queue, or closing */
	struct workq_item *head, *tail;
	size_t queued;                 /* waiting, not taken yet */
	size_t running;
	size_t max_queued;             /* 0: unbounded */
	bool closing;
	bool joined;
	workq_fn fn;
	struct workq_local local;      /* fn NULL: the queue runs fn above */
	void *ctx;
	unsigned n_threads;
	pthread_t *threads;
};

static void *workq_main(void *arg)
{
	struct workq *q = arg;
	void *state = q->local.init ? q->local.init(q->ctx) : NULL;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct workq_item *it;

		while (!q->head && !q->closing)
			pthread_cond_wait(&q->work, &q->lock);
		it = q->head;
		if (!it)
			break; /* closing and drained */
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
		q->queued--;
		q->running++;
		if (q->max_queued)
			pthread_cond_signal(&q->room);
		pthread_mutex_unlock(&q->lock);

		it->next = NULL;
		if (q->local.fn)
			q->local.fn(it, q->ctx, state);
		else
			q->fn(it, q->ctx);

		pthread_mutex_lock(&q->lock);
		q->running--;
	}
	pthread_mutex_unlock(&q->lock);
	if (q->local.fini)
		q->local.fini(state, q->ctx);
	return NULL;
}

static int workq_start(unsigned threads, size_t max_queued, workq_fn fn,
		       const struct workq_local *l, void *ctx, struct workq **out)
{
	struct workq *q;

	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->threads = calloc(threads, sizeof(*q->threads));
	if (!q->threads) {
		free(q);
		return -ENOMEM;
	}
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->room, NULL);
	q->max_queued = max_queued;
	q->fn = fn;
	if (l)
		q->local = *l;
	q->ctx = ctx;
	while (q->n_threads < threads &&
	       !pthread_create(&q->threads[q->n_threads], NULL, workq_main, q))
		q->n_threads++;
	if (!q->n_threads) {
		workq_free(q);
		return -EAGAIN;
	}
	*out = q;
	return 0;
}

int workq_new(unsigned threads, size_t max_queued, workq_fn fn, void *ctx, struct workq **out)
{
	if (!threads || !fn)
		return -EINVAL;
	return workq_start(threads, max_queued, fn, NULL, ctx, out);
}

int workq_new_local(unsigned threads, size_t max_queued, const struct workq_local *l, void *ctx,
		    struct workq **out)
{
	if (!threads || !l || !l->fn)
		return -EINVAL;
	return workq_start(threads, max_queued, NULL, l, ctx, out);
}

int workq_push(struct workq *q, struct workq_item *item)
{
	pthread_mutex_lock(&q->lock);
	while (q->max_queued && q->queued >= q->max_queued && !q->closing)
		pthread_cond_wait(&q->room, &q->lock);
	if (q->closing) {
		pthread_mutex_unlock(&q->lock);
		return -ESHUTDOWN;
	}
	item->next = NULL;
	if (q->tail)
		q->tail->next = item;
	else
		q->head = item;
	q->tail = item;
	q->queued++;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

size_t workq_pending(struct workq *q)
{
	size_t n;

	pthread_mutex_lock(&q->lock);
	n = q->queued + q->running;
	pthread_mutex_unlock(&q->lock);
	return n;
}

void workq_close(struct workq *q)
{
	bool join;

	pthread_mutex_lock(&q->lock);
	q->closing = true;
	join = !q->joined;
	q->joined = true;
	pthread_cond_broadcast(&q->work);
	pthread_cond_broadcast(&q->room);
	pthread_mutex_unlock(&q->lock);
	if (!join)
		return;
	for (unsigned i = 0; i < q->n_threads; i++)
		pthread_join(q->threads[i], NULL);
}

void workq_free(struct workq *q)
{
	if (!q)
		return;
	workq_close(q);
	pthread_cond_destroy(&q->room);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	free(q->threads);
	free(q);
}

unsigned workq_threads(const struct workq *q)
{
	return q->n_threads;
}
