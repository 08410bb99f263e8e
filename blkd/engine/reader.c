/* SPDX-License-Identifier: MIT */
/* The read path over a layout: disk offsets to chunks, read-ahead and marks; the tiers load. */
#include "reader.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "../../common/uring.h"

/* Read-ahead: chunks queued for the prefetch threads. */
#define RA_QUEUE 256

struct blkd_reader {
	const struct layout *l;
	struct cas_source *src;           /* the tiers, memory on top (cas/tier.h) */
	pthread_mutex_t lock;             /* read-ahead */
	uint64_t readahead, marked_hits;  /* atomic */
	/* read-ahead (off unless blkd_reader_readahead was called) */
	unsigned ra_max;                  /* chunks ahead at most */
	unsigned ra_window;               /* current window, chunks */
	size_t ra_last_run;               /* the data run of the last miss */
	uint32_t ra_q[RA_QUEUE];          /* chunk indexes, a ring */
	unsigned ra_head, ra_len;
	bool ra_stop;
	pthread_cond_t ra_cond;
	pthread_t ra_threads[BLKD_READER_RA_THREADS_MAX];
	unsigned ra_nthreads;
	uint8_t *ra_queued;               /* chunk index -> queued or loading by read-ahead */
	uint8_t *marks;                   /* see blkd_reader_set_marks */
};

int blkd_reader_new(const struct layout *l, struct cas_source *src, size_t cache_bytes,
		    struct blkd_reader **out)
{
	struct blkd_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->l = l;
	r->src = src;
	cas_source_memory(src, cache_bytes ? cache_bytes : BLKD_READER_CACHE_DEFAULT);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->ra_cond, NULL);
	*out = r;
	return 0;
}

static void ra_stop(struct blkd_reader *r);

void blkd_reader_free(struct blkd_reader *r)
{
	if (!r)
		return;
	ra_stop(r);
	free(r->ra_queued);
	cas_source_memory(r->src, 0); /* the chunks it held go with it */
	pthread_cond_destroy(&r->ra_cond);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

uint64_t blkd_reader_size(const struct blkd_reader *r)
{
	return r->l->hdr.block_count * DISK_BLOCK;
}

void blkd_reader_set_marks(struct blkd_reader *r, uint8_t *marks)
{
	r->marks = marks;
}

void blkd_reader_stats(struct blkd_reader *r, struct blkd_reader_stats *st)
{
	struct cas_memory_stats m;

	cas_source_memory_stats(r->src, &m);
	*st = (struct blkd_reader_stats){
		.chunk_loads = m.loads,
		.cache_hits = m.hits,
		.evictions = m.evictions,
		.cached_bytes = m.bytes,
		.cached_plain = m.plain,
		.loaded_bytes = m.loaded_bytes,
		.store_bytes = m.frame_bytes,
		.readahead = __atomic_load_n(&r->readahead, __ATOMIC_RELAXED),
		.marked_hits = __atomic_load_n(&r->marked_hits, __ATOMIC_RELAXED),
	};
}

/* ------------------------------------------------------------------ the chunks */

/* Chunk idx from the tiers (cas_source_hold), its mark counted when this call loaded it. */
static int chunk_hold(struct blkd_reader *r, uint32_t idx, unsigned flags, struct cas_held *h)
{
	int ret = cas_source_hold(r->src, r->l->chunks[idx], r->l->hdr.chunk_size, flags, h);

	if (!ret && h->loaded && r->marks &&
	    __atomic_load_n(&r->marks[idx], __ATOMIC_RELAXED) == 1) {
		__atomic_store_n(&r->marks[idx], 2, __ATOMIC_RELAXED);
		__atomic_add_fetch(&r->marked_hits, 1, __ATOMIC_RELAXED);
	}
	return ret;
}

static void chunk_release(struct blkd_reader *r, uint32_t idx, struct cas_held *h, int err)
{
	cas_source_release(r->src, r->l->chunks[idx], h, err);
}

/* ------------------------------------------------------------------ read-ahead */

#define RA_START 4        /* chunks, when a sequential pattern is first seen */
#define RA_SCAN 4096      /* data runs looked at, at most, per scheduling */

/*
 * Queue the chunks of the data runs after `run` that are among the next ra_window distinct
 * chunks and are neither cached, loading nor queued. Under r->lock.
 */
static void ra_schedule(struct blkd_reader *r, size_t run)
{
	const struct layout *l = r->l;
	uint32_t last = l->data_runs[run].chunk;
	unsigned seen = 0, queued = 0;

	for (size_t i = run + 1; i < l->hdr.data_run_count && i <= run + RA_SCAN; i++) {
		uint32_t c = l->data_runs[i].chunk;

		if (c == last)
			continue;
		last = c;
		if (++seen > r->ra_window || r->ra_len == RA_QUEUE)
			break;
		if (r->ra_queued[c] || cas_source_busy(r->src, l->chunks[c]))
			continue;
		r->ra_q[(r->ra_head + r->ra_len) % RA_QUEUE] = c;
		r->ra_len++;
		r->ra_queued[c] = 1;
		queued++;
	}
	if (queued)
		pthread_cond_broadcast(&r->ra_cond);
}

/*
 * A read of data run `run` missed the cache (miss) or used a chunk read ahead (!miss).
 * Misses close to the previous one are a sequential pattern: the window starts at RA_START
 * chunks and doubles up to ra_max; a miss elsewhere stops reading ahead. Under r->lock.
 */
static void ra_trigger(struct blkd_reader *r, size_t run, bool miss)
{
	unsigned w = r->ra_window;

	if (miss) {
		bool seq = run >= r->ra_last_run && run <= r->ra_last_run + 2 * (size_t)w + 8;

		r->ra_last_run = run;
		if (!seq) {
			r->ra_window = 0;
			return;
		}
	}
	w = w ? w * 2 : RA_START;
	r->ra_window = w < r->ra_max ? w : r->ra_max;
	ra_schedule(r, run);
}

static void *ra_main(void *arg)
{
	struct blkd_reader *r = arg;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct cas_held h;
		uint32_t c;
		int ret;

		while (!r->ra_len && !r->ra_stop)
			pthread_cond_wait(&r->ra_cond, &r->lock);
		if (r->ra_stop)
			break;
		c = r->ra_q[r->ra_head];
		r->ra_head = (r->ra_head + 1) % RA_QUEUE;
		r->ra_len--;
		pthread_mutex_unlock(&r->lock);

		ret = chunk_hold(r, c, CAS_HOLD_AHEAD, &h);
		if (!ret) {
			__atomic_add_fetch(&r->readahead, 1, __ATOMIC_RELAXED);
			chunk_release(r, c, &h, 0);
		}

		pthread_mutex_lock(&r->lock);
		r->ra_queued[c] = 0;
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

static void ra_stop(struct blkd_reader *r)
{
	pthread_mutex_lock(&r->lock);
	r->ra_stop = true;
	r->ra_len = 0;
	pthread_cond_broadcast(&r->ra_cond);
	pthread_mutex_unlock(&r->lock);
	for (unsigned i = 0; i < r->ra_nthreads; i++)
		pthread_join(r->ra_threads[i], NULL);
	r->ra_nthreads = 0;
}

int blkd_reader_readahead(struct blkd_reader *r, unsigned max_chunks)
{
	unsigned n;

	if (!max_chunks || r->ra_max)
		return r->ra_max == max_chunks ? 0 : -EINVAL;
	r->ra_queued = calloc(r->l->hdr.chunk_count ? r->l->hdr.chunk_count : 1, 1);
	if (!r->ra_queued)
		return -ENOMEM;
	n = max_chunks < BLKD_READER_RA_THREADS_MAX ? max_chunks : BLKD_READER_RA_THREADS_MAX;
	while (r->ra_nthreads < n &&
	       !pthread_create(&r->ra_threads[r->ra_nthreads], NULL, ra_main, r))
		r->ra_nthreads++;
	if (!r->ra_nthreads)
		return -EAGAIN;
	r->ra_max = max_chunks;
	return 0;
}

/* ------------------------------------------------------------------ reading */

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/*
 * Metadata blocks [first, first + n) of run m's layout file into out, checked against the
 * digests layout_open took: bytes changed in the file since are never served (-EIO).
 */
static int meta_get(const struct layout *l, const struct layout_meta_run *m, uint64_t first,
		    uint64_t n, uint8_t *out)
{
	uint64_t bad = 0;
	int ret;

	ret = layout_read_meta_blocks(l, m, first, n, out, &bad);
	if (ret == -EIO)
		log_error("the layout's metadata block %llu changed since the layout was opened "
			  "and verified; not served", (unsigned long long)bad);
	else if (ret)
		log_error("reading the layout's metadata blocks: %s", strerror(-ret));
	return ret;
}

/*
 * Copy the metadata blocks that intersect [off, end) into buf, from meta run `first` on;
 * whole blocks are checked.
 */
static int read_meta(struct blkd_reader *r, size_t first, uint64_t off, uint64_t end,
		     uint8_t *buf)
{
	const struct layout *l = r->l;
	uint8_t one[DISK_BLOCK];

	for (size_t i = first; i < l->hdr.meta_run_count; i++) {
		const struct layout_meta_run *m = &l->meta_runs[i];
		uint64_t s = m->lba * DISK_BLOCK, e = s + (uint64_t)m->count * DISK_BLOCK;
		uint64_t a = max_u64(s, off), b = min_u64(e, end);
		int ret;

		if (s >= end)
			break;
		while (a < b) {
			uint64_t first = m->first + (a - s) / DISK_BLOCK, in = a % DISK_BLOCK;
			uint64_t n = (b - a) / DISK_BLOCK;

			if (in || !n) { /* part of a block: checked whole, then copied */
				n = min_u64(DISK_BLOCK - in, b - a);
				ret = meta_get(l, m, first, 1, one);
				if (!ret)
					memcpy(buf + (a - off), one + in, n);
			} else {
				ret = meta_get(l, m, first, n, buf + (a - off));
				n *= DISK_BLOCK;
			}
			if (ret)
				return ret;
			a += n;
		}
	}
	return 0;
}

/*
 * Copy the chunk bytes of every data run that intersects [off, end) into buf, from data run
 * `first` on (runs before off skipped); gaps: the bytes between them (and around them) are zeroed too.
 */
static int read_data(struct blkd_reader *r, size_t first, uint64_t off, uint64_t end,
		     uint8_t *buf, bool gaps)
{
	const struct layout *l = r->l;
	uint64_t at = off;  /* written up to here */

	for (size_t i = first; i < l->hdr.data_run_count; i++) {
		const struct layout_data_run *d = &l->data_runs[i];
		uint64_t s = layout_data_run_pos(d), e = s + d->len;
		uint64_t a = max_u64(s, off), b = min_u64(e, end);
		struct cas_held c;
		int tries = 0, ret;

		if (s >= end)
			break;
		if (e <= off)
			continue; /* `first` may end in the block before off */
		if (gaps && a > at)
			memset(buf + (at - off), 0, a - at);
		at = b;
again:
		ret = chunk_hold(r, d->chunk, r->ra_max ? CAS_HOLD_PEEK : 0, &c);
		if (ret == -ENOENT && r->ra_max) {
			/* not in memory: a miss, which drives read-ahead, then the load */
			pthread_mutex_lock(&r->lock);
			ra_trigger(r, i, true);
			pthread_mutex_unlock(&r->lock);
			ret = chunk_hold(r, d->chunk, 0, &c);
		}
		if (ret)
			return ret;
		if (c.ahead) {
			pthread_mutex_lock(&r->lock);
			ra_trigger(r, i, false);
			pthread_mutex_unlock(&r->lock);
		}
		if ((uint64_t)d->chunk_off + d->len > c.len) {
			char hex[SHA256_HEX_LEN + 1];

			sha256_to_hex(l->chunks[d->chunk], hex);
			log_error("chunk %s is shorter than the layout expects (%zu < %llu bytes)",
				  hex, c.len, (unsigned long long)d->chunk_off + d->len);
			chunk_release(r, d->chunk, &c, 0);
			return -EIO;
		}
		if (c.data) {
			memcpy(buf + (a - off), c.data + d->chunk_off + (a - s), b - a);
		} else {
			ret = uring_pread_full(c.fd, buf + (a - off), b - a,
					       (off_t)(d->chunk_off + (a - s)));
			if (ret) {
				char hex[SHA256_HEX_LEN + 1];

				/* truncated or unreadable since it was checked: the tiers drop it */
				sha256_to_hex(l->chunks[d->chunk], hex);
				log_warn("plain copy of chunk %s: %s: dropped, using the chunk", hex,
					 strerror(-ret));
				chunk_release(r, d->chunk, &c, ret);
				if (tries++)
					return -EIO;
				goto again; /* its plain copy is gone: loaded again, verified */
			}
		}
		chunk_release(r, d->chunk, &c, 0);
	}
	if (gaps && end > at)
		memset(buf + (at - off), 0, end - at);
	return 0;
}

int blkd_reader_read(struct blkd_reader *r, uint64_t off, void *buf, size_t len)
{
	uint64_t size = blkd_reader_size(r);
	int ret;

	if (off % BLKD_SECTOR || len % BLKD_SECTOR || off > size || len > size - off) {
		log_error("read of %zu bytes at %llu: not sector-aligned or beyond the disk "
			  "(%llu bytes)", len, (unsigned long long)off, (unsigned long long)size);
		return -EINVAL;
	}
	memset(buf, 0, len);
	ret = read_meta(r, layout_meta_run_at(r->l, off / DISK_BLOCK), off, off + len, buf);
	return ret ? ret : read_data(r, layout_data_run_at(r->l, off), off, off + len, buf, false);
}

int blkd_reader_read_meta(struct blkd_reader *r, size_t run, uint64_t off, uint64_t end,
			  void *buf)
{
	return read_meta(r, run, off, end, buf);
}

int blkd_reader_read_data(struct blkd_reader *r, size_t run, uint64_t off, uint64_t end,
			  void *buf)
{
	return read_data(r, run, off, end, buf, true);
}
