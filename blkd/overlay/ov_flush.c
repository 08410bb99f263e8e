/* SPDX-License-Identifier: MIT */
/*
 * A writer's flushes (overlay_flush; docs/reliability.md): the data made durable, then the
 * words of the state bitmap changed since (as they were before the data's sync began)
 * written into OVERLAY.state, then OVERLAY.state made durable. A state reaches that file
 * only once the data it points at is on the disk, so a host crash never leaves a block
 * marked dirty without its data (ov_live.c says why, and what OVERLAY.live holds).
 *
 * Flushes run at once, as fdatasync calls may. Each takes the touched words (their numbers
 * and values, under lock) and a number in order, syncs the data, writes the words it took
 * into OVERLAY.state after the flushes before it wrote theirs (a word there never goes back
 * to an older value), syncs that, and completes after the ones before it (their words may
 * hold its writes' states); one before it that failed after it took its words (their words
 * are touched again) makes it flush again.
 *
 * Bounded: a flush takes at most FLUSH_MAX_WORDS words at a time, into a buffer it borrows
 * from the overlay (kept for the next flushes, grown once to what they need, at most 1 MiB);
 * more words (a discard of the whole disk, many writes between flushes) are taken in turns,
 * in the order of the bitmap, each turn a flush of its own (a data sync, its words, a sync
 * of the state). The touched words are found through a summary bit per 64 of them, so a
 * take costs what it takes, not the size of the disk.
 *
 * A failed sync of the data is for good (until the overlay is opened again): Linux reports
 * a write-back error once and marks the pages it could not write clean, so a retried
 * fdatasync returns 0 for data that is not on the disk; the states of writes whose data
 * may be lost must not reach OVERLAY.state. Every later flush fails with the same error and
 * puts nothing there. And the error may be reported to another flush's sync of the same
 * file under way at the same time: so a flush writes its words only after every data sync
 * that was under way when its own returned has returned too. (A failed sync of
 * OVERLAY.state is not for good: the next flush writes the words again, which dirties their
 * pages again, and syncs them.)
 */
#include <errno.h>
#include <stdlib.h>

#include "../../common/fsutil.h"
#include "overlay_int.h"

#define FLUSH_MAX_WORDS 65536u  /* taken at a time: 2 Mi blocks (8 GiB of disk), 1 MiB */

/* Numbers and values of the words a flush took; the overlay keeps them for the next. */
struct ov_flush_buf {
	struct ov_flush_buf *next;      /* free ones, under lock */
	size_t cap;
	size_t *idx;
	uint64_t *val;
};

/* One turn of a flush: what it took, and its place in the order. */
struct ov_flush {
	uint64_t seq, done;   /* its number; the newest complete when its flush began */
	size_t n;             /* words taken: buf->idx[0..n) (ascending), their values then */
	struct ov_flush_buf *buf;
	struct ov_flush *prev, *next;   /* in ov->syncing while its data sync is under way */
};

/* The words idx[0..n) (ascending) of words to their places, a run at a time. */
static int put_list(int fd, const uint64_t *words, const size_t *idx, size_t n)
{
	int ret = 0;

	for (size_t i = 0, j; i < n && !ret; i = j) {
		for (j = i + 1; j < n && idx[j] - idx[j - 1] <= OV_RUN_GAP; j++)
			;
		ret = ov_put_words(fd, words, idx[i], idx[j - 1] + 1);
	}
	return ret;
}

/* Under lock: a buffer of the overlay's (a new, empty one when all are lent). */
static struct ov_flush_buf *buf_get(struct overlay *ov)
{
	struct ov_flush_buf *b = ov->flush_bufs;

	if (!b)
		return calloc(1, sizeof(*b));
	ov->flush_bufs = b->next;
	return b;
}

/* Under lock: room for want words in b, else as many as it had (0: -ENOMEM). */
static size_t buf_room(struct ov_flush_buf *b, size_t want)
{
	size_t *idx;
	uint64_t *val;

	if (b->cap >= want)
		return want;
	idx = realloc(b->idx, want * sizeof(*idx));
	if (idx)
		b->idx = idx;
	val = idx ? realloc(b->val, want * sizeof(*val)) : NULL;
	if (val) {
		b->val = val;
		b->cap = want;
	}
	return b->cap;
}

void ov_flush_free(struct overlay *ov)
{
	for (struct ov_flush_buf *b = ov->flush_bufs, *next; b; b = next) {
		next = b->next;
		free(b->idx);
		free(b->val);
		free(b);
	}
	ov->flush_bufs = NULL;
}

/* Under lock: the first touched word at or after w; nw when none is. */
static size_t touched_next(const struct overlay *ov, size_t w)
{
	size_t nw = ov_words(ov->blocks), nt = ov_bitwords(nw), i = w / 64, j;
	uint64_t m, s;

	if (w >= nw)
		return nw;
	m = ov->touched[i] & (~0ULL << (w % 64));
	if (m)
		return i * 64 + (size_t)__builtin_ctzll(m);
	/* the next word of touched that is not 0: its summary bit is set */
	for (j = i + 1; j < nt; j = (j / 64 + 1) * 64) {
		s = ov->touched_sum[j / 64] & (~0ULL << (j % 64));
		if (s) {
			i = j / 64 * 64 + (size_t)__builtin_ctzll(s);
			return i * 64 + (size_t)__builtin_ctzll(ov->touched[i]);
		}
	}
	return nw;
}

/*
 * Under lock: take up to FLUSH_MAX_WORDS touched words from *cursor on (their numbers and
 * values), *cursor then past them; a number; first: the turn that begins a flush (done).
 * t joins the flushes whose data sync is under way.
 */
static int flush_take(struct overlay *ov, struct ov_flush *t, size_t *cursor, bool first)
{
	size_t nw = ov_words(ov->blocks), k = 0, want, w;
	struct ov_flush_buf *b = t->buf;

	want = ov->n_touched < FLUSH_MAX_WORDS ? ov->n_touched : FLUSH_MAX_WORDS;
	want = want ? buf_room(b, want) : 0;
	if (ov->n_touched && !want)
		return -ENOMEM; /* nothing taken, no number */
	for (w = touched_next(ov, *cursor); w < nw && k < want; w = touched_next(ov, w + 1)) {
		b->idx[k] = w;
		b->val[k++] = ov->words[w];
		bit_clear(ov->touched, w);
		if (!ov->touched[w / 64])
			bit_clear(ov->touched_sum, w / 64);
	}
	ov->n_touched -= k;
	*cursor = w;
	t->n = k;
	t->seq = ++ov->flush_seq;
	pthread_mutex_lock(&ov->flush_lock);
	if (first)
		t->done = ov->flush_done;
	t->next = NULL;
	t->prev = ov->syncing_last;
	if (t->prev)
		t->prev->next = t;
	else
		ov->syncing = t;
	ov->syncing_last = t;
	pthread_mutex_unlock(&ov->flush_lock);
	return 0;
}

/*
 * t's data sync returned data_ret. Once the flushes before t have written their words, and
 * every data sync under way now has returned (the kernel may have reported a failure to
 * one of them): t's words into OVERLAY.state's cache, unless a data sync failed, ever.
 */
static int flush_put(struct overlay *ov, struct ov_flush *t, int data_ret)
{
	uint64_t horizon;
	int ret = 0;

	pthread_mutex_lock(&ov->flush_lock);
	if (data_ret && !ov->data_err)
		ov->data_err = data_ret;
	if (t->prev)
		t->prev->next = t->next;
	else
		ov->syncing = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		ov->syncing_last = t->prev;
	horizon = ov->syncing_last ? ov->syncing_last->seq : 0;
	pthread_cond_broadcast(&ov->flush_cond);
	while (ov->flush_put != t->seq - 1 || (ov->syncing && ov->syncing->seq <= horizon))
		pthread_cond_wait(&ov->flush_cond, &ov->flush_lock);
	ret = ov->data_err;
	if (!ret && t->n) {
		for (size_t k = 0; k < t->n; k++)
			ov->durable[t->buf->idx[k]] = t->buf->val[k];
		/* what the page cache holds: the words between them written again as they are */
		ret = put_list(ov->state_fd, ov->durable, t->buf->idx, t->n);
	}
	ov->flush_put = t->seq;
	pthread_cond_broadcast(&ov->flush_cond);
	pthread_mutex_unlock(&ov->flush_lock);
	return ret;
}

/* The words taken touched again (their flush failed: the next takes them). */
static void flush_untake(struct overlay *ov, const struct ov_flush *t)
{
	pthread_mutex_lock(&ov->lock);
	for (size_t k = 0; k < t->n; k++)
		ov_touch(ov, t->buf->idx[k]);
	pthread_mutex_unlock(&ov->lock);
}

/* Complete t after those before it; true when one of them failed after t's flush began. */
static bool flush_complete(struct overlay *ov, const struct ov_flush *t, int ret)
{
	bool again;

	pthread_mutex_lock(&ov->flush_lock);
	while (ov->flush_done != t->seq - 1)
		pthread_cond_wait(&ov->flush_cond, &ov->flush_lock);
	ov->flush_done = t->seq;
	again = !ret && ov->flush_failed > t->done;
	if (ret)
		ov->flush_failed = t->seq;
	pthread_cond_broadcast(&ov->flush_cond);
	pthread_mutex_unlock(&ov->flush_lock);
	return again;
}

/* A failed data sync, for good: 0 or its error. */
static int flush_data_err(struct overlay *ov)
{
	int ret;

	pthread_mutex_lock(&ov->flush_lock);
	ret = ov->data_err;
	pthread_mutex_unlock(&ov->flush_lock);
	return ret;
}

int ov_live_flush(struct overlay *ov)
{
	struct ov_flush t = { 0 };
	size_t cursor = 0, nw = ov_words(ov->blocks);
	bool first = true, more, again;
	int ret = flush_data_err(ov);

	if (ret)
		return ret;
	pthread_mutex_lock(&ov->lock);
	t.buf = buf_get(ov);
	pthread_mutex_unlock(&ov->lock);
	if (!t.buf)
		return -ENOMEM;
	do {
		pthread_mutex_lock(&ov->lock);
		ret = flush_take(ov, &t, &cursor, first);
		pthread_mutex_unlock(&ov->lock);
		if (ret)
			break;
		more = cursor < nw;
		/* every state taken is of a write whose data was written before: that first */
		ret = flush_put(ov, &t, ov_sync(ov, OV_DATA));
		if (!ret && t.n)
			ret = ov_sync(ov, OV_STATE);
		if (ret)
			flush_untake(ov, &t);
		again = flush_complete(ov, &t, ret);
		if (again) /* from the start, as a new flush */
			cursor = 0;
		first = again;
	} while (!ret && (more || again));
	pthread_mutex_lock(&ov->lock);
	t.buf->next = ov->flush_bufs;
	ov->flush_bufs = t.buf;
	pthread_mutex_unlock(&ov->lock);
	return ret;
}
