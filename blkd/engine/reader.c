/* SPDX-License-Identifier: MIT */
/* The read path over a layout and a chunk store, with an LRU cache of verified chunks. */
#include "reader.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <stddef.h>

#include "../../common/fsutil.h"
#include "../../common/log.h"
#include "../../common/uring.h"

/*
 * A chunk whose sha256 matched its name: its decompressed bytes in data[], or, when fd >= 0,
 * a checked plain copy (cas/plain.h) holding them at offset 0, read with pread: then the
 * bytes live in the page cache, shared with every process reading the store, and the entry
 * costs a descriptor, not memory.
 */
struct cache_entry {
	struct cache_entry *prev, *next;  /* LRU list, most recently used first */
	uint32_t chunk;                   /* index into the layout's chunk table */
	uint32_t refs;                    /* readers copying from it: not evicted meanwhile */
	bool ra_mark;                     /* read ahead and not used yet: a hit reads further */
	bool dead;                        /* its plain copy went bad: freed by the last reader */
	int fd;                           /* a plain copy, or -1: the bytes are in data[] */
	size_t len;
	size_t frame_len;                 /* its compressed size in the store (0: plain copy) */
	uint8_t data[];
};

/* A chunk being loaded: other readers of it wait for this one load (single flight). */
struct inflight {
	struct inflight *next;
	uint32_t chunk;
	bool done;
	int ret;
	uint32_t waiters;
	pthread_cond_t cond;  /* done, and then waiters back to 0: only this chunk's readers wake */
};

/* Read-ahead: chunks queued for the prefetch threads. */
#define RA_QUEUE 256

struct blkd_reader {
	const struct layout *l;
	struct cas_source *src;
	size_t budget;                    /* bytes of decompressed chunks kept at most */
	unsigned fd_max;                  /* plain copies kept open at most */
	bool plain_bytes_budget;          /* and their bytes count in budget (a bounded store) */
	unsigned n_fds;
	pthread_mutex_t lock;             /* the cache, the in-flight list and the stats */
	struct cache_entry **by_chunk;    /* chunk index -> cached entry or NULL */
	struct cache_entry *head, *tail;
	struct inflight *loading;
	struct blkd_reader_stats st;
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

/* Half the descriptors this process may open, within [16, 65536]. */
static unsigned fd_budget(void)
{
	struct rlimit rl;
	rlim_t n = 1024;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		n = rl.rlim_cur;
	else if (rl.rlim_cur == RLIM_INFINITY)
		n = 1u << 17;
	n /= 2;
	return n < 16 ? 16 : n > 65536 ? 65536 : (unsigned)n;
}

static void entry_free(struct cache_entry *e)
{
	if (e->fd >= 0)
		close(e->fd);
	free(e);
}

int blkd_reader_new(const struct layout *l, struct cas_source *src, size_t cache_bytes,
		    struct blkd_reader **out)
{
	struct blkd_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->l = l;
	r->src = src;
	r->budget = cache_bytes ? cache_bytes : BLKD_READER_CACHE_DEFAULT;
	r->fd_max = fd_budget();
	/*
	 * A store bounded as a cache evicts plain copies with their chunks; one held open here
	 * would keep its disk space until closed, so there they count against budget too.
	 */
	r->plain_bytes_budget = cas_source_bounded(src);
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->ra_cond, NULL);
	r->by_chunk = calloc(l->hdr.chunk_count ? l->hdr.chunk_count : 1, sizeof(*r->by_chunk));
	if (!r->by_chunk) {
		blkd_reader_free(r);
		return -ENOMEM;
	}
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
	for (struct cache_entry *e = r->head, *next; e; e = next) {
		next = e->next;
		entry_free(e);
	}
	free(r->by_chunk);
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
	pthread_mutex_lock(&r->lock);
	*st = r->st;
	pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------------ the chunk cache */

static void lru_unlink(struct blkd_reader *r, struct cache_entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		r->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		r->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push_front(struct blkd_reader *r, struct cache_entry *e)
{
	e->prev = NULL;
	e->next = r->head;
	if (r->head)
		r->head->prev = e;
	r->head = e;
	if (!r->tail)
		r->tail = e;
}

/* Take e out of the cache (its readers, if any, keep it). Under r->lock. */
static void cache_remove(struct blkd_reader *r, struct cache_entry *e)
{
	lru_unlink(r, e);
	r->by_chunk[e->chunk] = NULL;
	if (e->fd >= 0) {
		r->n_fds--;
		r->st.cached_plain--;
	}
	if (e->fd < 0 || r->plain_bytes_budget)
		r->st.cached_bytes -= e->len;
}

/*
 * Evict least recently used chunks no reader is copying from, to make room for one more
 * entry like n: its bytes, or its descriptor. Under r->lock.
 */
static void cache_make_room(struct blkd_reader *r, const struct cache_entry *n)
{
	bool plain = n->fd >= 0 && !r->plain_bytes_budget;
	struct cache_entry *e = r->tail;

	while (e && (plain ? r->n_fds + 1 > r->fd_max
			   : r->st.cached_bytes + n->len > r->budget ||
			     (n->fd >= 0 && r->n_fds + 1 > r->fd_max))) {
		struct cache_entry *prev = e->prev;

		if (e->refs || (plain && e->fd < 0) ||
		    (!plain && e->fd >= 0 && !r->plain_bytes_budget)) {
			e = prev;
			continue;
		}
		cache_remove(r, e);
		r->st.evictions++;
		entry_free(e);
		e = prev;
	}
}

/*
 * Fetch chunk idx through the tiers below (store, remote), decompressed and verified: never
 * returns bytes that fail the check. Runs without r->lock, so loads of different chunks
 * proceed in parallel.
 */
static int chunk_load(struct blkd_reader *r, uint32_t idx, struct cache_entry **out)
{
	struct cache_entry *e;
	struct cas_chunk c;
	int ret;

	ret = cas_source_load(r->src, r->l->chunks[idx], r->l->hdr.chunk_size,
			      offsetof(struct cache_entry, data), &c);
	if (ret)
		return ret; /* it said why */
	if (c.fd >= 0) {
		e = malloc(sizeof(*e));
		if (!e) {
			close(c.fd);
			return -ENOMEM;
		}
	} else {
		e = c.block;
	}
	e->fd = c.fd;
	e->chunk = idx;
	e->len = c.len;
	e->refs = 0;
	e->dead = false;
	e->frame_len = c.frame_len;
	e->prev = e->next = NULL;
	*out = e;
	return 0;
}

/* Under r->lock. */
static struct inflight *inflight_find(struct blkd_reader *r, uint32_t idx)
{
	for (struct inflight *f = r->loading; f; f = f->next)
		if (f->chunk == idx)
			return f;
	return NULL;
}

/*
 * The cached chunk idx, referenced (release with chunk_put). Concurrent readers of a chunk
 * that is not cached wait for a single load; its error is theirs too. *ahead (may be NULL)
 * is set when the chunk was brought in by read-ahead and this is its first use.
 */
static int chunk_get(struct blkd_reader *r, uint32_t idx, struct cache_entry **out, bool *ahead)
{
	struct inflight self = { .chunk = idx };
	struct cache_entry *e;
	int ret;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct inflight *f;

		e = r->by_chunk[idx];
		if (e) {
			if (ahead && e->ra_mark) {
				*ahead = true;
				e->ra_mark = false;
			}
			r->st.cache_hits++;
			lru_unlink(r, e);
			lru_push_front(r, e);
			e->refs++;
			pthread_mutex_unlock(&r->lock);
			*out = e;
			return 0;
		}
		f = inflight_find(r, idx);
		if (!f)
			break;
		f->waiters++;
		while (!f->done)
			pthread_cond_wait(&f->cond, &r->lock);
		ret = f->ret;
		if (--f->waiters == 0)
			pthread_cond_signal(&f->cond); /* the loader may free it now */
		if (ret) {
			pthread_mutex_unlock(&r->lock);
			return ret;
		}
		/* loaded: loop to take it from the cache (or load again if evicted already) */
	}
	pthread_cond_init(&self.cond, NULL);
	self.next = r->loading;
	r->loading = &self;
	pthread_mutex_unlock(&r->lock);

	ret = chunk_load(r, idx, &e);

	pthread_mutex_lock(&r->lock);
	if (!ret) {
		r->st.chunk_loads++;
		if (r->marks && __atomic_load_n(&r->marks[idx], __ATOMIC_RELAXED) == 1) {
			__atomic_store_n(&r->marks[idx], 2, __ATOMIC_RELAXED);
			r->st.marked_hits++;
		}
		e->ra_mark = false;
		r->st.loaded_bytes += e->len;
		r->st.store_bytes += e->frame_len;
		cache_make_room(r, e);
		lru_push_front(r, e);
		r->by_chunk[idx] = e;
		if (e->fd >= 0) {
			r->n_fds++;
			r->st.cached_plain++;
		}
		if (e->fd < 0 || r->plain_bytes_budget)
			r->st.cached_bytes += e->len;
		e->refs++;
	}
	self.ret = ret;
	self.done = true;
	if (self.waiters)
		pthread_cond_broadcast(&self.cond);
	while (self.waiters)
		pthread_cond_wait(&self.cond, &r->lock);
	for (struct inflight **pp = &r->loading; *pp; pp = &(*pp)->next) {
		if (*pp == &self) {
			*pp = self.next;
			break;
		}
	}
	pthread_mutex_unlock(&r->lock);
	pthread_cond_destroy(&self.cond);
	if (!ret)
		*out = e;
	return ret;
}

/*
 * Drop a reference to e. Under r->lock. True when e was taken out of the cache (dead) and
 * this was its last reader: the caller frees it, outside the lock.
 */
static bool entry_unref(struct cache_entry *e)
{
	return --e->refs == 0 && e->dead;
}

static void chunk_put(struct blkd_reader *r, struct cache_entry *e)
{
	bool gone;

	pthread_mutex_lock(&r->lock);
	gone = entry_unref(e);
	pthread_mutex_unlock(&r->lock);
	if (gone)
		entry_free(e);
}

/*
 * A plain copy failed when read (truncated or unreadable since it was checked): take the
 * entry out of the cache (freed by its last reader) and have the source remove the copy,
 * so the next load takes the verified path.
 */
static void chunk_plain_failed(struct blkd_reader *r, struct cache_entry *e, int err)
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(r->l->chunks[e->chunk], hex);
	log_warn("plain copy of chunk %s: %s: dropped, using the chunk", hex, strerror(-err));
	pthread_mutex_lock(&r->lock);
	if (!e->dead) {
		e->dead = true;
		cache_remove(r, e);
		cas_source_plain_bad(r->src, r->l->chunks[e->chunk]);
	}
	pthread_mutex_unlock(&r->lock);
	chunk_put(r, e);
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
		if (r->by_chunk[c] || r->ra_queued[c] || inflight_find(r, c))
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
		struct cache_entry *e;
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

		ret = chunk_get(r, c, &e, NULL);

		pthread_mutex_lock(&r->lock);
		r->ra_queued[c] = 0;
		if (!ret) {
			if (e->refs == 1)
				e->ra_mark = true; /* nobody waited for it: not used yet */
			r->st.readahead++;
			if (entry_unref(e)) {
				pthread_mutex_unlock(&r->lock);
				entry_free(e);
				pthread_mutex_lock(&r->lock);
			}
		}
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
		struct cache_entry *c;
		bool ahead = false;
		int tries = 0, ret;

		if (s >= end)
			break;
		if (e <= off)
			continue; /* `first` may end in the block before off */
		if (gaps && a > at)
			memset(buf + (at - off), 0, a - at);
		at = b;
again:
		if (r->ra_max) {
			pthread_mutex_lock(&r->lock);
			if (!r->by_chunk[d->chunk])
				ra_trigger(r, i, true);
			pthread_mutex_unlock(&r->lock);
		}
		ret = chunk_get(r, d->chunk, &c, r->ra_max ? &ahead : NULL);
		if (ret)
			return ret;
		if (ahead) {
			pthread_mutex_lock(&r->lock);
			ra_trigger(r, i, false);
			pthread_mutex_unlock(&r->lock);
			ahead = false;
		}
		if ((uint64_t)d->chunk_off + d->len > c->len) {
			char hex[SHA256_HEX_LEN + 1];

			sha256_to_hex(l->chunks[d->chunk], hex);
			log_error("chunk %s is shorter than the layout expects (%zu < %llu bytes)",
				  hex, c->len, (unsigned long long)d->chunk_off + d->len);
			chunk_put(r, c);
			return -EIO;
		}
		if (c->fd < 0) {
			memcpy(buf + (a - off), c->data + d->chunk_off + (a - s), b - a);
		} else {
			ret = uring_pread_full(c->fd, buf + (a - off), b - a,
					       (off_t)(d->chunk_off + (a - s)));
			if (ret) {
				chunk_plain_failed(r, c, ret);
				if (tries++)
					return -EIO;
				goto again; /* its plain copy is gone: loaded again, verified */
			}
		}
		chunk_put(r, c);
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
