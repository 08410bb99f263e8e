/* SPDX-License-Identifier: MIT */
/* The read path over a layout and a chunk store, with an LRU cache of verified chunks. */
#include "reader.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/chunk.h"
#include "../common/fsutil.h"
#include "../common/log.h"

/* A decompressed chunk whose sha256 matched its name. */
struct cache_entry {
	struct cache_entry *prev, *next;  /* LRU list, most recently used first */
	uint32_t chunk;                   /* index into the layout's chunk table */
	uint32_t refs;                    /* readers copying from it: not evicted meanwhile */
	size_t len;
	size_t frame_len;                 /* its compressed size in the store */
	uint8_t data[];
};

/* A chunk being loaded: other readers of it wait for this one load (single flight). */
struct inflight {
	struct inflight *next;
	uint32_t chunk;
	bool done;
	int ret;
	uint32_t waiters;
};

struct blkd_reader {
	const struct layout *l;
	struct store *s;
	size_t budget;                    /* bytes of decompressed chunks kept at most */
	pthread_mutex_t lock;             /* the cache, the in-flight list and the stats */
	pthread_cond_t loaded;            /* an in-flight load finished */
	struct cache_entry **by_chunk;    /* chunk index -> cached entry or NULL */
	struct cache_entry *head, *tail;
	struct inflight *loading;
	struct blkd_reader_stats st;
};

int blkd_reader_new(const struct layout *l, struct store *s, size_t cache_bytes,
		    struct blkd_reader **out)
{
	struct blkd_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->l = l;
	r->s = s;
	r->budget = cache_bytes ? cache_bytes : BLKD_READER_CACHE_DEFAULT;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->loaded, NULL);
	r->by_chunk = calloc(l->hdr.chunk_count ? l->hdr.chunk_count : 1, sizeof(*r->by_chunk));
	if (!r->by_chunk) {
		blkd_reader_free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

void blkd_reader_free(struct blkd_reader *r)
{
	if (!r)
		return;
	for (struct cache_entry *e = r->head, *next; e; e = next) {
		next = e->next;
		free(e);
	}
	free(r->by_chunk);
	pthread_cond_destroy(&r->loaded);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

uint64_t blkd_reader_size(const struct blkd_reader *r)
{
	return r->l->hdr.block_count * LAYOUT_BLOCK;
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

/* Evict least recently used chunks no reader is copying from. Under r->lock. */
static void cache_make_room(struct blkd_reader *r, size_t need)
{
	struct cache_entry *e = r->tail;

	while (e && r->st.cached_bytes + need > r->budget) {
		struct cache_entry *prev = e->prev;

		if (e->refs) {
			e = prev;
			continue;
		}
		lru_unlink(r, e);
		r->by_chunk[e->chunk] = NULL;
		r->st.cached_bytes -= e->len;
		r->st.evictions++;
		free(e);
		e = prev;
	}
}

static int chunk_corrupt(const char *hex, const char *why)
{
	log_error("chunk %s is corrupt (%s)", hex, why);
	return -EIO;
}

/*
 * Read, decompress and verify chunk idx; never returns bytes that fail the check.
 * Runs without r->lock, so loads of different chunks proceed in parallel.
 */
static int chunk_load(struct blkd_reader *r, uint32_t idx, struct cache_entry **out)
{
	struct chunk_codec *codec;
	const uint8_t *d = r->l->chunks[idx];
	char hex[SHA256_HEX_LEN + 1];
	uint8_t *frame, sum[SHA256_LEN];
	struct cache_entry *e;
	size_t flen, n;
	uint64_t want;
	int ret;

	sha256_to_hex(d, hex);
	ret = store_read(r->s, d, &frame, &flen);
	if (ret == -ENOENT) {
		log_error("chunk %s missing from the store", hex);
		return ret;
	}
	if (ret) {
		log_error("chunk %s: %s", hex, strerror(-ret));
		return ret == -ENOMEM ? ret : -EIO;
	}
	if (chunk_content_size(frame, flen, &want)) {
		free(frame);
		return chunk_corrupt(hex, "not a valid zstd chunk");
	}
	if (want > r->l->hdr.chunk_size) {
		free(frame);
		return chunk_corrupt(hex, "larger than the layout's chunk size");
	}
	e = malloc(sizeof(*e) + (want ? want : 1));
	if (!e) {
		free(frame);
		log_error("chunk %s: out of memory", hex);
		return -ENOMEM;
	}
	codec = chunk_codec_new(0);
	ret = codec ? chunk_decompress(codec, frame, flen, e->data, want, &n) : -ENOMEM;
	chunk_codec_free(codec);
	free(frame);
	if (!ret)
		ret = sha256_buf(e->data, n, sum);
	if (ret) {
		free(e);
		if (ret == -EBADMSG)
			return chunk_corrupt(hex, "not a valid zstd chunk");
		log_error("chunk %s: %s", hex, strerror(-ret));
		return ret;
	}
	if (memcmp(sum, d, SHA256_LEN)) {
		free(e);
		return chunk_corrupt(hex, "content does not match its sha256 name");
	}
	e->chunk = idx;
	e->len = n;
	e->refs = 0;
	e->frame_len = flen;
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
 * that is not cached wait for a single load; its error is theirs too.
 */
static int chunk_get(struct blkd_reader *r, uint32_t idx, struct cache_entry **out)
{
	struct inflight self = { .chunk = idx };
	struct cache_entry *e;
	int ret;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct inflight *f;

		e = r->by_chunk[idx];
		if (e) {
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
			pthread_cond_wait(&r->loaded, &r->lock);
		ret = f->ret;
		if (--f->waiters == 0 && f->done)
			pthread_cond_broadcast(&r->loaded); /* the loader may free it now */
		if (ret) {
			pthread_mutex_unlock(&r->lock);
			return ret;
		}
		/* loaded: loop to take it from the cache (or load again if evicted already) */
	}
	self.next = r->loading;
	r->loading = &self;
	pthread_mutex_unlock(&r->lock);

	ret = chunk_load(r, idx, &e);

	pthread_mutex_lock(&r->lock);
	if (!ret) {
		r->st.chunk_loads++;
		r->st.loaded_bytes += e->len;
		r->st.store_bytes += e->frame_len;
		cache_make_room(r, e->len);
		lru_push_front(r, e);
		r->by_chunk[idx] = e;
		r->st.cached_bytes += e->len;
		e->refs++;
	}
	self.ret = ret;
	self.done = true;
	pthread_cond_broadcast(&r->loaded);
	while (self.waiters)
		pthread_cond_wait(&r->loaded, &r->lock);
	for (struct inflight **pp = &r->loading; *pp; pp = &(*pp)->next) {
		if (*pp == &self) {
			*pp = self.next;
			break;
		}
	}
	pthread_mutex_unlock(&r->lock);
	if (!ret)
		*out = e;
	return ret;
}

static void chunk_put(struct blkd_reader *r, struct cache_entry *e)
{
	pthread_mutex_lock(&r->lock);
	e->refs--;
	pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------------ reading */

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Copy the metadata blocks that intersect [off, end) into buf. */
static int read_meta(struct blkd_reader *r, uint64_t off, uint64_t end, uint8_t *buf)
{
	const struct layout *l = r->l;

	for (size_t i = layout_meta_run_at(l, off / LAYOUT_BLOCK); i < l->hdr.meta_run_count;
	     i++) {
		const struct layout_meta_run *m = &l->meta_runs[i];
		uint64_t s = m->lba * LAYOUT_BLOCK, e = s + (uint64_t)m->count * LAYOUT_BLOCK;
		uint64_t a = max_u64(s, off), b = min_u64(e, end);
		int ret;

		if (s >= end)
			break;
		ret = fs_pread_full(l->fd, buf + (a - off), b - a,
				    (off_t)(l->meta_offset + m->first * LAYOUT_BLOCK + (a - s)));
		if (ret) {
			log_error("reading the layout's metadata blocks: %s", strerror(-ret));
			return ret;
		}
	}
	return 0;
}

/* Copy the chunk bytes of every data run that intersects [off, end) into buf. */
static int read_data(struct blkd_reader *r, uint64_t off, uint64_t end, uint8_t *buf)
{
	const struct layout *l = r->l;

	for (size_t i = layout_data_run_at(l, off); i < l->hdr.data_run_count; i++) {
		const struct layout_data_run *d = &l->data_runs[i];
		uint64_t s = layout_data_run_pos(d), e = s + d->len;
		uint64_t a = max_u64(s, off), b = min_u64(e, end);
		struct cache_entry *c;
		int ret;

		if (s >= end)
			break;
		ret = chunk_get(r, d->chunk, &c);
		if (ret)
			return ret;
		if ((uint64_t)d->chunk_off + d->len > c->len) {
			char hex[SHA256_HEX_LEN + 1];

			sha256_to_hex(l->chunks[d->chunk], hex);
			log_error("chunk %s is shorter than the layout expects (%zu < %llu bytes)",
				  hex, c->len, (unsigned long long)d->chunk_off + d->len);
			chunk_put(r, c);
			return -EIO;
		}
		memcpy(buf + (a - off), c->data + d->chunk_off + (a - s), b - a);
		chunk_put(r, c);
	}
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
	ret = read_meta(r, off, off + len, buf);
	return ret ? ret : read_data(r, off, off + len, buf);
}
