/* SPDX-License-Identifier: MIT */
#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cas/store.h"
#include "../../common/why.h"
#include "../../layout/layout.h"
#include "../overlay/overlay.h"
#include "reader.h"
#include "../coldstart/prefetch.h"
#include "../coldstart/trace_record.h"
#include "../coldstart/trace_plan.h"

#define STRIPES 256
#define STATUS_MAX_BLOCKS (1u << 16)   /* one status reply covers at most 256 MiB */
#define MEM_CACHE_DEFAULT (256ull << 20)
#define READAHEAD_CHUNKS 16  /* sequential reads: chunks loaded ahead, at most */
#define CHECK_CHUNKS 8       /* opts.check: the first data runs' chunks looked for */

struct blkd_engine {
	struct layout *layout;
	struct cas_source *src;        /* store, remote */
	struct overlay *ov;             /* NULL: read-only */
	struct blkd_reader *reader;     /* thread-safe, single-flight chunk loads */
	struct manifest *manifest;      /* NULL unless traces need it */
	struct trace_recorder *trace;   /* NULL: not recording */
	char *trace_path;
	struct timespec t0;             /* opened: traces count time from here */
	struct blkd_prefetch *prefetch; /* NULL: none */
	uint8_t *prefetched;            /* layout chunk -> prefetched (1), then used (2) */
	pthread_mutex_t stripe[STRIPES]; /* read-modify-write of one block at a time */
	uint64_t size;
	bool read_only;
	/* counters (atomic) */
	uint64_t reads, writes, flushes, discards, read_bytes, write_bytes;
	uint64_t read_errors, write_errors;
	uint64_t overlay_hits, meta_hits, chunk_hits, zero_hits, in_flight;
};

#define INC(field, v) __atomic_add_fetch(&(field), (v), __ATOMIC_RELAXED)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* The manifest (checked against the layout) and the recorder, when asked for. */
static int engine_trace_open(struct blkd_engine *e, const struct blkd_engine_opts *o,
			     char *why, size_t why_len)
{
	char twhy[WHY_MAX] = "";
	int ret;

	if (!o->manifest_path)
		return o->trace_record || o->prefetch_trace ?
			why_set(why, why_len, -EINVAL, "a trace needs the image's manifest") : 0;
	ret = trace_plan_manifest(o->manifest_path, e->layout, o->layout_path, &e->manifest, why,
				  why_len);
	if (ret || !o->trace_record)
		return ret;
	e->trace_path = strdup(o->trace_record);
	if (!e->trace_path)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	ret = trace_recorder_new(e->layout, e->manifest, &e->t0, &e->trace, twhy,
				 sizeof(twhy));
	if (ret)
		why_set(why, why_len, ret, "cannot record a trace: %s",
			twhy[0] ? twhy : strerror(-ret));
	return ret;
}

/* --prefetch TRACE / --prefetch-all: the plan, checked, and its threads started. */
static int engine_prefetch_start(struct blkd_engine *e, const struct blkd_engine_opts *o,
				 char *why, size_t why_len)
{
	struct blkd_prefetch_opts po = { .background = true };
	struct trace_plan *plan;
	int ret;

	if (!o->prefetch_trace && !o->prefetch_all)
		return 0;
	ret = trace_plan_load(o->prefetch_trace, e->manifest, e->layout, o->prefetch_all, &plan,
			      why, why_len);
	if (ret)
		return ret;
	if (o->prefetch_trace && !plan->same_image)
		note_emit(&o->notes, NOTE_INFO, "%s: recorded on another version of this image: "
			  "%llu of its %llu files are here", o->prefetch_trace,
			  (unsigned long long)plan->files_found, (unsigned long long)plan->files);
	e->prefetched = calloc(e->layout->hdr.chunk_count ? e->layout->hdr.chunk_count : 1, 1);
	if (!e->prefetched) {
		trace_plan_free(plan);
		return why_set(why, why_len, -ENOMEM, "out of memory");
	}
	blkd_reader_set_marks(e->reader, e->prefetched);
	po.marks = e->prefetched;
	po.threads = (o->fetch_concurrency ? o->fetch_concurrency : REMOTE_CONCURRENCY_DEFAULT) / 2;
	ret = blkd_prefetch_start(e->src, e->layout, plan, &po, &e->prefetch);
	if (ret)
		why_set(why, why_len, ret, "cannot start the prefetch: %s", strerror(-ret));
	return ret;
}

int blkd_engine_trace_finish(struct blkd_engine *e, const char *path, uint64_t *records,
			     char *why, size_t why_len)
{
	if (why_len)
		why[0] = '\0';
	if (!e->trace)
		return -ENOENT;
	return trace_recorder_finish(e->trace, path ? path : e->trace_path, records, why, why_len);
}

const char *blkd_engine_trace_path(const struct blkd_engine *e)
{
	return e->trace ? e->trace_path : NULL;
}

/* The chunk tiers and the reader (with its read-ahead). */
static int engine_reader_open(struct blkd_engine *e, const struct blkd_engine_opts *o,
			      char *why, size_t why_len)
{
	struct cas_source_opts so = {
		.store_dir = o->store_dir,
		.remote_url = o->remote_url,
		.cache_size = o->cache_size,
		.concurrency = o->fetch_concurrency,
		.timeout_ms = o->fetch_timeout_ms,
		.retries = o->fetch_retries,
		.no_plain = o->no_plain,
	};
	int ret = cas_source_open(&so, &e->src, why, why_len);

	if (ret)
		return ret;
	ret = blkd_reader_new(e->layout, e->src, o->mem_cache ? o->mem_cache : MEM_CACHE_DEFAULT,
			      &e->reader);
	if (!ret && o->readahead >= 0 && (o->readahead > 0 || !o->prefetch_trace))
		ret = blkd_reader_readahead(e->reader, o->readahead > 0 ? (unsigned)o->readahead :
						       o->fetch_concurrency ? o->fetch_concurrency :
						       READAHEAD_CHUNKS);
	if (ret)
		why_set(why, why_len, ret, "cannot start the reader: %s", strerror(-ret));
	return ret;
}

/* opts.check: the first CHECK_CHUNKS distinct chunks of the data runs, in disk order. */
static int engine_check(struct blkd_engine *e, char *why, size_t why_len)
{
	const struct layout *l = e->layout;
	uint8_t d[CHECK_CHUNKS][SHA256_LEN];
	uint32_t idx[CHECK_CHUNKS];
	size_t n = 0, len;
	int ret;

	for (uint64_t i = 0; i < l->hdr.data_run_count && n < CHECK_CHUNKS; i++) {
		uint32_t c = l->data_runs[i].chunk;
		size_t j = 0;

		while (j < n && idx[j] != c)
			j++;
		if (j < n)
			continue;
		idx[n] = c;
		memcpy(d[n++], l->chunks[c], SHA256_LEN);
	}
	ret = cas_source_check(e->src, (const uint8_t (*)[SHA256_LEN])d, n, why, why_len);
	if (ret && why_len && (len = strlen(why)) < why_len)
		snprintf(why + len, why_len - len, " (--no-check to serve anyway)");
	return ret;
}

int blkd_engine_open(const struct blkd_engine_opts *o, struct blkd_engine **out, char *why,
		     size_t why_len)
{
	struct blkd_engine *e = calloc(1, sizeof(*e));
	char owhy[WHY_MAX] = "";
	int ret;

	if (why_len)
		why[0] = '\0';
	if (!e)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	clock_gettime(CLOCK_MONOTONIC, &e->t0);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&e->stripe[i], NULL);
	ret = layout_open_flags(o->layout_path, o->layout_fetched ? LAYOUT_OPEN_FETCHED : 0,
				&e->layout, owhy, sizeof(owhy));
	if (ret) {
		why_set(why, why_len, ret, "%s: %s", o->layout_path, owhy[0] ? owhy : strerror(-ret));
		goto fail;
	}
	e->size = e->layout->hdr.block_count * DISK_BLOCK;
	ret = engine_reader_open(e, o, why, why_len);
	if (!ret && o->check)
		ret = engine_check(e, why, why_len);
	if (!ret)
		ret = engine_trace_open(e, o, why, why_len);
	if (!ret)
		ret = engine_prefetch_start(e, o, why, why_len);
	if (ret)
		goto fail;
	e->read_only = o->read_only || !o->overlay_path;
	if (o->overlay_path) {
		/* a read-only server changes nothing of the overlay (a version 1 file stays) */
		ret = o->read_only ? overlay_open_read_only(o->overlay_path, e->size,
							    e->layout->digest, &e->ov, owhy,
							    sizeof(owhy))
				   : overlay_open(o->overlay_path, e->size, e->layout->digest,
						  true, &e->ov, owhy, sizeof(owhy));
		if (ret) {
			why_set(why, why_len, ret, "%s: %s", o->overlay_path,
				owhy[0] ? owhy : strerror(-ret));
			goto fail;
		}
		overlay_set_notes(e->ov, &o->notes);
	}
	*out = e;
	return 0;
fail:
	blkd_engine_close(e);
	return ret;
}

void blkd_engine_close(struct blkd_engine *e)
{
	if (!e)
		return;
	blkd_prefetch_free(e->prefetch);
	if (e->ov && !e->read_only)
		overlay_flush(e->ov);
	overlay_close(e->ov);
	blkd_reader_free(e->reader);
	trace_recorder_free(e->trace);
	free(e->prefetched);
	free(e->trace_path);
	manifest_free(e->manifest);
	cas_source_close(e->src);
	layout_close(e->layout);
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&e->stripe[i]);
	free(e);
}

void blkd_engine_layout_digest(const struct blkd_engine *e, uint8_t out[32])
{
	memcpy(out, e->layout->digest, 32);
}

uint64_t blkd_engine_size(const struct blkd_engine *e) { return e->size; }
const struct layout *blkd_engine_layout(const struct blkd_engine *e) { return e->layout; }
bool blkd_engine_read_only(const struct blkd_engine *e) { return e->read_only; }

static bool range_ok(const struct blkd_engine *e, uint64_t off, uint64_t len)
{
	return off % BLKD_SECTOR == 0 && len % BLKD_SECTOR == 0 && off <= e->size &&
	       len <= e->size - off;
}

/*
 * The read plan: one walk of a range over the overlay and the layout, made once per
 * request, yields consecutive extents, each one kind of source. The read fills them, the
 * block status and a sparse read's caller take their allocation from them, and the
 * statistics are counted from them: nothing walks the overlay or the layout again for the
 * same request. The overlay is asked once per run of equal state (overlay_run), the
 * layout searched once per table (on the first clean block), then its cursors only move
 * forward. Extents end at block boundaries, but for the range's own ends.
 */
enum plan_kind { PLAN_OVERLAY, PLAN_META, PLAN_DATA, PLAN_ZERO, PLAN_KINDS };

struct plan_ext {
	uint64_t off, len;
	enum plan_kind kind;
	enum ov_state ov;      /* the overlay's state (OV_ZERO: zeroed, kind PLAN_ZERO) */
	size_t run;            /* PLAN_META: its meta run; PLAN_DATA: its first data run */
};

struct plan_walk {
	struct blkd_engine *e;
	uint64_t pos, end;     /* bytes: walked up to pos */
	uint64_t ov_end;       /* block: the overlay run ov_st holds up to here */
	enum ov_state ov_st;
	bool base;             /* the layout is asked (not: clean blocks are PLAN_ZERO) */
	bool seeked;           /* the cursors below are set */
	size_t meta, data;     /* first meta / data run ending after the last block walked */
};

static void walk_start(struct blkd_engine *e, struct plan_walk *w, uint64_t off, uint64_t end,
		       bool base)
{
	*w = (struct plan_walk){ .e = e, .pos = off, .end = end, .base = base };
}

static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t blocks_up(uint64_t bytes) { return (bytes + DISK_BLOCK - 1) / DISK_BLOCK; }

/*
 * What the base holds from block b on, up to block lim at most: metadata (of meta run
 * x->run), data (blocks any data run touches, from data run x->run on) or zeros. Blocks
 * must be asked for in increasing order. Returns the blocks.
 */
static uint64_t base_span(struct plan_walk *w, uint64_t b, uint64_t lim, struct plan_ext *x)
{
	const struct layout *l = w->e->layout;
	const struct layout_meta_run *m = l->meta_runs;
	const struct layout_data_run *d = l->data_runs;
	size_t nm = l->hdr.meta_run_count, nd = l->hdr.data_run_count, j;
	uint64_t end;

	if (!w->seeked) {
		w->meta = layout_meta_run_at(l, b);
		w->data = layout_data_run_at(l, b * DISK_BLOCK);
		w->seeked = true;
	}
	while (w->meta < nm && m[w->meta].lba + m[w->meta].count <= b)
		w->meta++;
	if (w->meta < nm && m[w->meta].lba <= b) {
		x->kind = PLAN_META;
		x->run = w->meta;
		return min64(m[w->meta].lba + m[w->meta].count, lim) - b;
	}
	if (w->meta < nm)
		lim = min64(lim, m[w->meta].lba);
	while (w->data < nd && layout_data_run_pos(&d[w->data]) + d[w->data].len <= b * DISK_BLOCK)
		w->data++;
	x->run = w->data;
	if (w->data >= nd || layout_data_run_pos(&d[w->data]) >= (b + 1) * DISK_BLOCK) {
		x->kind = PLAN_ZERO;
		if (w->data < nd)
			lim = min64(lim, layout_data_run_pos(&d[w->data]) / DISK_BLOCK);
		return lim - b;
	}
	/* data: the blocks of this run and of the runs that touch them, block after block */
	x->kind = PLAN_DATA;
	end = blocks_up(layout_data_run_pos(&d[w->data]) + d[w->data].len);
	for (j = w->data + 1; end < lim && j < nd && layout_data_run_pos(&d[j]) / DISK_BLOCK <= end;
	     j++)
		end = blocks_up(layout_data_run_pos(&d[j]) + d[j].len);
	return min64(end, lim) - b;
}

/* The next extent of the walk; false at its end. */
static bool walk_next(struct plan_walk *w, struct plan_ext *x)
{
	struct blkd_engine *e = w->e;
	uint64_t b = w->pos / DISK_BLOCK, lim;

	if (w->pos >= w->end)
		return false;
	if (!e->ov) {
		w->ov_st = OV_CLEAN;
		w->ov_end = UINT64_MAX;
	} else if (b >= w->ov_end) {
		w->ov_end = b + overlay_run(e->ov, b, &w->ov_st);
	}
	lim = w->ov_end >= blocks_up(w->end) ? w->end : w->ov_end * DISK_BLOCK;
	x->off = w->pos;
	x->ov = w->ov_st;
	x->run = 0;
	if (w->ov_st != OV_CLEAN)
		x->kind = w->ov_st == OV_DIRTY ? PLAN_OVERLAY : PLAN_ZERO;
	else if (!w->base)
		x->kind = PLAN_ZERO;
	else
		lim = min64(lim, (b + base_span(w, b, blocks_up(lim), x)) * DISK_BLOCK);
	x->len = lim - w->pos;
	w->pos = lim;
	return true;
}

/* Overlay blocks into buf, for bytes [off, off + len) that may start or end inside one. */
static int fill_overlay(struct blkd_engine *e, uint64_t off, uint64_t len, uint8_t *buf)
{
	uint64_t block = off / DISK_BLOCK, in = off % DISK_BLOCK, n = blocks_up(in + len);
	uint8_t *tmp;
	int ret;

	if (in == 0 && len % DISK_BLOCK == 0)
		return overlay_read(e->ov, block, (uint32_t)n, buf);
	tmp = malloc(n * DISK_BLOCK);
	if (!tmp)
		return -ENOMEM;
	ret = overlay_read(e->ov, block, (uint32_t)n, tmp);
	if (!ret)
		memcpy(buf, tmp + in, len);
	free(tmp);
	return ret;
}

/* Extent x's bytes into buf (buf[0] is x->off); zeros only when zeros. */
static int plan_fill(struct blkd_engine *e, const struct plan_ext *x, uint8_t *buf, bool zeros)
{
	if (x->ov == OV_CLEAN && e->trace)
		trace_recorder_touch(e->trace, x->off, x->len);
	switch (x->kind) {
	case PLAN_OVERLAY:
		return fill_overlay(e, x->off, x->len, buf);
	case PLAN_META:
		return blkd_reader_read_meta(e->reader, x->run, x->off, x->off + x->len, buf);
	case PLAN_DATA:
		return blkd_reader_read_data(e->reader, x->run, x->off, x->off + x->len, buf);
	default:
		if (zeros)
			memset(buf, 0, x->len);
		return 0;
	}
}

/*
 * Read [off, off + len) in one walk: each extent filled as it comes, then told to cb
 * (NULL: none; a sparse read's zeros are then left as they are in buf), and counted; the
 * blocks each source served are added to the statistics once, at the end.
 */
static int plan_read(struct blkd_engine *e, uint64_t off, uint64_t len, uint8_t *buf,
		     disk_extent_fn cb, void *arg)
{
	const uint32_t zero = DISK_STATUS_HOLE | DISK_STATUS_ZERO;
	uint64_t hits[PLAN_KINDS] = { 0 };
	struct plan_walk w;
	struct plan_ext x;
	int ret = 0;

	walk_start(e, &w, off, off + len, true);
	while (!ret && walk_next(&w, &x)) {
		ret = plan_fill(e, &x, buf + (x.off - off), !cb);
		if (ret)
			break;
		hits[x.kind] += blocks_up(x.off % DISK_BLOCK + x.len);
		if (cb)
			ret = cb(arg, x.off, x.len, x.kind == PLAN_ZERO ? zero : 0);
		if (ret > 0) { /* no more extents: the rest is read whole */
			cb = NULL;
			ret = 0;
		}
	}
	INC(e->overlay_hits, hits[PLAN_OVERLAY]);
	INC(e->meta_hits, hits[PLAN_META]);
	INC(e->chunk_hits, hits[PLAN_DATA]);
	INC(e->zero_hits, hits[PLAN_ZERO]);
	return ret;
}

int blkd_engine_read_sparse(struct blkd_engine *e, uint64_t off, uint32_t len, void *buf,
			    disk_extent_fn cb, void *arg)
{
	int ret;

	if (!range_ok(e, off, len))
		return -EINVAL;
	INC(e->in_flight, 1);
	ret = plan_read(e, off, len, buf, cb, arg);
	__atomic_sub_fetch(&e->in_flight, 1, __ATOMIC_RELAXED);
	INC(e->reads, 1);
	INC(e->read_bytes, len);
	if (ret)
		INC(e->read_errors, 1);
	return ret;
}

int blkd_engine_read(struct blkd_engine *e, uint64_t off, uint32_t len, void *buf)
{
	return blkd_engine_read_sparse(e, off, len, buf, NULL, NULL);
}

/* Lock the stripes of blocks [first, first+n) in ascending stripe order. */
static void stripes_lock(struct blkd_engine *e, uint64_t first, uint64_t n, bool lock)
{
	uint8_t want[STRIPES] = { 0 };

	if (n >= STRIPES) {
		memset(want, 1, sizeof(want));
	} else {
		for (uint64_t b = first; b < first + n; b++)
			want[b % STRIPES] = 1;
	}
	for (int i = 0; i < STRIPES; i++) {
		if (!want[i])
			continue;
		if (lock)
			pthread_mutex_lock(&e->stripe[i]);
		else
			pthread_mutex_unlock(&e->stripe[i]);
	}
}

/*
 * Apply [off, off+len) of new content (data, or zeros when data is NULL) to the overlay:
 * whole blocks directly, partial blocks by read-modify-write of that one block.
 */
static int apply(struct blkd_engine *e, uint64_t off, uint64_t len, const uint8_t *data)
{
	uint64_t first = off / DISK_BLOCK, last = (off + len - 1) / DISK_BLOCK;
	uint8_t *blk = NULL;
	int ret = 0;

	stripes_lock(e, first, last - first + 1, true);
	while (len && !ret) {
		uint64_t block = off / DISK_BLOCK, in = off % DISK_BLOCK;

		if (in == 0 && len >= DISK_BLOCK) {
			uint64_t n = len / DISK_BLOCK;

			if (n > UINT32_MAX / DISK_BLOCK)
				n = UINT32_MAX / DISK_BLOCK;
			ret = data ? overlay_write(e->ov, block, (uint32_t)n, data)
				   : overlay_zero(e->ov, block, n);
			off += n * DISK_BLOCK;
			len -= n * DISK_BLOCK;
			if (data)
				data += n * DISK_BLOCK;
			continue;
		}
		/* a partial block: the worst case is this one block copied */
		uint64_t part = DISK_BLOCK - in < len ? DISK_BLOCK - in : len;

		if (!blk && !(blk = malloc(DISK_BLOCK))) {
			ret = -ENOMEM;
			break;
		}
		ret = plan_read(e, block * DISK_BLOCK, DISK_BLOCK, blk, NULL, NULL);
		if (ret)
			break;
		if (data)
			memcpy(blk + in, data, part);
		else
			memset(blk + in, 0, part);
		ret = overlay_write(e->ov, block, 1, blk);
		off += part;
		len -= part;
		if (data)
			data += part;
	}
	stripes_lock(e, first, last - first + 1, false);
	free(blk);
	return ret;
}

/* A request that changes or persists the disk ended with ret: counted if it failed. */
static int wrote(struct blkd_engine *e, int ret)
{
	if (ret)
		INC(e->write_errors, 1);
	return ret;
}

int blkd_engine_write(struct blkd_engine *e, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	int ret;

	if (!range_ok(e, off, len))
		return -EINVAL;
	if (e->read_only)
		return -EPERM;
	if (!len)
		return 0;
	INC(e->in_flight, 1);
	ret = apply(e, off, len, buf);
	if (!ret && fua)
		ret = overlay_flush(e->ov);
	__atomic_sub_fetch(&e->in_flight, 1, __ATOMIC_RELAXED);
	INC(e->writes, 1);
	INC(e->write_bytes, len);
	return wrote(e, ret);
}

int blkd_engine_flush(struct blkd_engine *e)
{
	INC(e->flushes, 1);
	if (e->read_only || !e->ov)
		return 0;
	return wrote(e, overlay_flush(e->ov));
}

int blkd_engine_write_zeroes(struct blkd_engine *e, uint64_t off, uint64_t len)
{
	if (!range_ok(e, off, len))
		return -EINVAL;
	if (e->read_only)
		return -EPERM;
	INC(e->discards, 1);
	return len ? wrote(e, apply(e, off, len, NULL)) : 0;
}

int blkd_engine_discard(struct blkd_engine *e, uint64_t off, uint64_t len)
{
	uint64_t a = (off + DISK_BLOCK - 1) / DISK_BLOCK * DISK_BLOCK;
	uint64_t b = (off + len) / DISK_BLOCK * DISK_BLOCK;

	if (!range_ok(e, off, len))
		return -EINVAL;
	if (e->read_only)
		return -EPERM;
	INC(e->discards, 1);
	/* only whole blocks are dropped; the edges keep their data (allowed for trim) */
	return b > a ? wrote(e, apply(e, a, b - a, NULL)) : 0;
}

/* The allocation or dirty extents of the range, from the same walk as a read's. */
int blkd_engine_status(struct blkd_engine *e, enum disk_ctx ctx, uint64_t off,
		       uint64_t len, disk_extent_fn cb, void *arg)
{
	uint32_t cur = UINT32_MAX;
	uint64_t start = off, end;
	struct plan_walk w;
	struct plan_ext x;
	int ret;

	if (!range_ok(e, off, len) || !len)
		return -EINVAL;
	end = off + len;
	if ((end - off) / DISK_BLOCK > STATUS_MAX_BLOCKS)
		end = (off / DISK_BLOCK + STATUS_MAX_BLOCKS) * DISK_BLOCK;
	walk_start(e, &w, off, end, ctx != DISK_CTX_DIRTY);
	while (walk_next(&w, &x)) {
		uint32_t flags;

		if (ctx == DISK_CTX_DIRTY)
			flags = x.ov != OV_CLEAN ? DISK_STATUS_DIRTY : 0;
		else
			flags = x.kind == PLAN_ZERO ? DISK_STATUS_HOLE | DISK_STATUS_ZERO : 0;
		if (cur != UINT32_MAX && flags != cur) {
			ret = cb(arg, start, x.off - start, cur);
			if (ret)
				return ret > 0 ? 0 : ret;
			start = x.off;
		}
		cur = flags;
	}
	ret = cb(arg, start, end - start, cur);
	return ret < 0 ? ret : 0;
}

int blkd_engine_snapshot(struct blkd_engine *e, const char *delta_path, uint64_t *dirty,
			 uint64_t *zero, char *why, size_t why_len)
{
	struct overlay_snapshot *s;
	uint64_t d, z;
	int ret;

	if (why_len)
		why[0] = '\0';
	if (!e->ov)
		return why_set(why, why_len, -ENOENT,
			       "the disk has no overlay (serve it with --overlay)");
	ret = overlay_snapshot_begin(e->ov, delta_path, &s, why, why_len);
	if (ret)
		return ret;
	overlay_snapshot_counts(s, &d, &z);
	ret = overlay_snapshot_end(s, why, why_len);
	if (ret)
		return ret;
	if (dirty)
		*dirty = d;
	if (zero)
		*zero = z;
	return 0;
}

void blkd_engine_get_stats(struct blkd_engine *e, struct blkd_engine_stats *st)
{
	struct blkd_reader_stats rs;

	memset(st, 0, sizeof(*st));
	st->reads = GET(e->reads);
	st->writes = GET(e->writes);
	st->flushes = GET(e->flushes);
	st->discards = GET(e->discards);
	st->read_bytes = GET(e->read_bytes);
	st->write_bytes = GET(e->write_bytes);
	st->read_errors = GET(e->read_errors);
	st->write_errors = GET(e->write_errors);
	st->overlay_hits = GET(e->overlay_hits);
	st->meta_hits = GET(e->meta_hits);
	st->chunk_hits = GET(e->chunk_hits);
	st->zero_hits = GET(e->zero_hits);
	st->in_flight = GET(e->in_flight);
	blkd_reader_stats(e->reader, &rs);
	st->chunk_loads = rs.chunk_loads;
	st->chunk_cache_hits = rs.cache_hits;
	st->chunk_loaded_bytes = rs.loaded_bytes;
	st->store_read_bytes = rs.store_bytes;
	st->chunk_readahead = rs.readahead;
	cas_source_get_stats(e->src, &st->cas);
	st->prefetch_hits = rs.marked_hits;
	if (e->prefetch) {
		st->has_prefetch = true;
		blkd_prefetch_get_stats(e->prefetch, &st->prefetch);
	}
	if (e->ov) {
		struct overlay_stats os;

		overlay_get_stats(e->ov, &os);
		st->dirty_blocks = os.dirty_blocks;
		st->zero_blocks = os.zero_blocks;
		st->snapshot_copies = os.snapshot_copies;
	}
}
