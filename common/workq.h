/* SPDX-License-Identifier: MIT */
/*
 * A work queue: a FIFO of caller-owned items and a fixed set of threads that run one
 * function on each, the one thread pool of the project. Items are intrusive (struct
 * workq_item inside the caller's struct: no allocation per item); a queue may be bounded,
 * and then workq_push waits for room, which is how producers are held back.
 */
#ifndef LZ_COMMON_WORKQ_H
#define LZ_COMMON_WORKQ_H

#include <stdbool.h>
#include <stddef.h>

#include "test_hook.h"

struct workq;

/* Embed in the caller's item; recover the item with container_of-style arithmetic. */
struct workq_item {
	struct workq_item *next;
};

/*
 * Runs item on a worker thread, with the queue's ctx. It owns the item from then on (frees
 * it or hands it back to its producer); it may push more items to the same queue.
 */
typedef void (*workq_fn)(struct workq_item *item, void *ctx);

/*
 * A queue and `threads` (>= 1) workers running fn. max_queued: items waiting (not yet taken
 * by a worker) at most before workq_push waits; 0: unbounded. 0, or -errno: -EINVAL (no
 * thread or no fn), -ENOMEM, -EAGAIN (not one thread could be started; if some could, the
 * queue runs with those).
 */
int workq_new(unsigned threads, size_t max_queued, workq_fn fn, void *ctx, struct workq **out);

/*
 * Work that needs scratch space of each worker's own (a read buffer, a decompression
 * context): init(ctx) runs on each worker as it starts and makes its state; fn gets that
 * state with every item the worker runs (NULL when init could not make one: fn then fails
 * the item, typically with -ENOMEM); fini(state, ctx) runs as the worker ends.
 */
struct workq_local {
	void *(*init)(void *ctx);
	void (*fini)(void *state, void *ctx);
	void (*fn)(struct workq_item *item, void *ctx, void *state);
};
int workq_new_local(unsigned threads, size_t max_queued, const struct workq_local *l, void *ctx,
		    struct workq **out);

/*
 * Append item (waits for room in a bounded queue; a worker pushing to its own full queue
 * would wait for itself: push from workers only to unbounded queues). -ESHUTDOWN once
 * workq_close has started (the item stays the caller's).
 */
int workq_push(struct workq *q, struct workq_item *item);

/* Items waiting or running now. */
TEST_HOOK
size_t workq_pending(struct workq *q);

/*
 * No more items: the workers run what is queued, then end; joined here. Call it from the
 * queue's owner (not from a worker); calling it again does nothing. workq_free calls it.
 */
void workq_close(struct workq *q);
void workq_free(struct workq *q);

/* Number of workers that started (<= the threads asked for). */
TEST_HOOK
unsigned workq_threads(const struct workq *q);

#endif
