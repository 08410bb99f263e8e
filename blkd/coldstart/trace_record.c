/* SPDX-License-Identifier: MIT */
/*
 * Recording a trace: first touches of base blocks, kept as raw disk ranges while the guest
 * runs (one atomic bit test per block, a short locked append for new blocks only), resolved
 * to manifest paths and file ranges once, when the trace is written.
 */
#include "trace_record.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/grow.h"
#include "trace_index.h"

/* A first touch before resolution: block-aligned disk bytes. */
struct raw {
	uint64_t t_us;
	uint64_t off, len;
};

struct trace_recorder {
	const struct layout *l;
	const struct manifest *m;
	struct timespec t0;
	uint64_t nblocks;        /* blocks the bitmap covers: up to the last meta or data run */
	uint64_t *seen;          /* one bit per block, set atomically */
	pthread_mutex_t lock;    /* raw, n_raw, cap, done */
	struct raw *raw;
	size_t n_raw, cap;
	bool done, full;
};

static uint64_t now_us(const struct trace_recorder *r)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(t.tv_sec - r->t0.tv_sec) * 1000000u +
	       (uint64_t)((t.tv_nsec - r->t0.tv_nsec) / 1000);
}

/* The first block past every metadata and data run: later blocks read as zeros. */
static uint64_t layout_end_block(const struct layout *l)
{
	uint64_t end = 0;

	if (l->hdr.meta_run_count) {
		const struct layout_meta_run *m = &l->meta_runs[l->hdr.meta_run_count - 1];

		end = m->lba + m->count;
	}
	if (l->hdr.data_run_count) {
		const struct layout_data_run *d = &l->data_runs[l->hdr.data_run_count - 1];
		uint64_t e = (layout_data_run_pos(d) + d->len + DISK_BLOCK - 1) / DISK_BLOCK;

		if (e > end)
			end = e;
	}
	return end;
}

int trace_recorder_new(const struct layout *l, const struct manifest *m,
		       const struct timespec *t0, struct trace_recorder **out, char *why,
		       size_t why_len)
{
	struct trace_recorder *r;

	if (why_len)
		why[0] = '\0';
	if (memcmp(l->hdr.manifest_digest, m->digest, SHA256_LEN))
		return why_set(why, why_len, -EINVAL,
			       "the manifest is not the one the layout was made from");
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->l = l;
	r->m = m;
	r->t0 = *t0;
	r->nblocks = layout_end_block(l);
	r->seen = calloc((r->nblocks + 63) / 64 + 1, sizeof(uint64_t));
	if (!r->seen) {
		free(r);
		return -ENOMEM;
	}
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

void trace_recorder_free(struct trace_recorder *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->lock);
	free(r->raw);
	free(r->seen);
	free(r);
}

/* Append blocks [first, first + n) first touched at t. Under r->lock. */
static void raw_add(struct trace_recorder *r, uint64_t t, uint64_t first, uint64_t n)
{
	struct raw *last = r->n_raw ? &r->raw[r->n_raw - 1] : NULL;

	if (r->done || r->full)
		return;
	if (last && last->off + last->len == first * DISK_BLOCK) {
		last->len += n * DISK_BLOCK;
		return;
	}
	/* 24 MiB of ranges at most while the guest runs; then the trace is a prefix of it */
	if (r->n_raw == TRACE_RAW_MAX ||
	    !grow((void **)&r->raw, &r->cap, r->n_raw + 1, sizeof(*r->raw))) {
		r->full = true;
		return;
	}
	r->raw[r->n_raw++] = (struct raw){ .t_us = t, .off = first * DISK_BLOCK,
					   .len = n * DISK_BLOCK };
}

/* Record the run of n fresh blocks ending before block end; takes the lock on first use. */
static void touch_run(struct trace_recorder *r, uint64_t end, uint64_t n, bool *locked,
		      uint64_t *t)
{
	if (!*locked) {
		pthread_mutex_lock(&r->lock);
		*locked = true;
		*t = now_us(r);
	}
	raw_add(r, *t, end - n, n);
}

void trace_recorder_touch(struct trace_recorder *r, uint64_t off, uint64_t len)
{
	uint64_t first = off / DISK_BLOCK, end, b, run = 0, t = 0;
	bool locked = false;

	if (!len || first >= r->nblocks)
		return;
	end = (off + len + DISK_BLOCK - 1) / DISK_BLOCK;
	if (end > r->nblocks)
		end = r->nblocks;
	for (b = first; b < end; b++) {
		uint64_t bit = 1ull << (b % 64);
		uint64_t *w = &r->seen[b / 64];

		/* a plain load first: blocks seen before (most of them) cost no atomic write */
		if (!(__atomic_load_n(w, __ATOMIC_RELAXED) & bit) &&
		    !(__atomic_fetch_or(w, bit, __ATOMIC_RELAXED) & bit)) {
			run++;
			continue;
		}
		if (run)
			touch_run(r, b, run, &locked, &t);
		run = 0;
	}
	if (run)
		touch_run(r, b, run, &locked, &t);
	if (locked)
		pthread_mutex_unlock(&r->lock);
}

/* ------------------------------------------------------------------ writing */

struct out {
	struct trace_record *rec;
	size_t n, cap;
	char *str;
	size_t str_len, str_cap;
	uint32_t *path_of;        /* manifest entry -> string offset (0: not interned yet) */
	int err;
};

static void out_push(struct out *o, const struct trace_record *rec)
{
	if (o->err)
		return;
	if (o->n) {
		struct trace_record *p = &o->rec[o->n - 1];

		/* the next bytes of the same file (or of the metadata), at the same moment */
		if (p->path == rec->path && p->t_us == rec->t_us &&
		    p->disk_off + p->len == rec->disk_off &&
		    (!rec->path || p->file_off + p->len == rec->file_off) &&
		    (uint64_t)p->len + rec->len <= UINT32_MAX) {
			p->len += rec->len;
			return;
		}
	}
	if (o->n == TRACE_RECORDS_MAX) {
		o->err = -E2BIG;
		return;
	}
	if (!grow((void **)&o->rec, &o->cap, o->n + 1, sizeof(*o->rec))) {
		o->err = -ENOMEM;
		return;
	}
	o->rec[o->n++] = *rec;
}

/* The string offset of entry e's path, interned. 0 on failure (o->err set). */
static uint32_t out_path(struct out *o, const struct manifest *m, uint32_t e)
{
	const struct mf_entry *ent = &m->entries[e];
	size_t need;

	if (o->path_of[e])
		return o->path_of[e];
	need = o->str_len + ent->path_len + 1;
	if (need > TRACE_STRINGS_MAX) {
		o->err = -E2BIG;
		return 0;
	}
	if (!grow((void **)&o->str, &o->str_cap, need, 1)) {
		o->err = -ENOMEM;
		return 0;
	}
	memcpy(o->str + o->str_len, manifest_path(m, ent), ent->path_len + 1);
	o->path_of[e] = (uint32_t)o->str_len;
	o->str_len = need;
	return o->path_of[e];
}

struct resolve_ctx {
	struct out *o;
	const struct manifest *m;
	uint64_t t_us;
};

static void on_file_bytes(void *arg, uint32_t entry, uint64_t disk_off, uint64_t file_off,
			  uint32_t len)
{
	struct resolve_ctx *c = arg;
	struct trace_record rec = { .t_us = c->t_us, .disk_off = disk_off, .file_off = file_off,
				    .len = len };

	rec.path = out_path(c->o, c->m, entry);
	if (rec.path)
		out_push(c->o, &rec);
}

/* Metadata blocks of [a, b) as records. */
static void resolve_meta(struct out *o, const struct layout *l, uint64_t t, uint64_t a,
			 uint64_t b)
{
	for (size_t i = layout_meta_run_at(l, a / DISK_BLOCK); i < l->hdr.meta_run_count; i++) {
		const struct layout_meta_run *mr = &l->meta_runs[i];
		uint64_t s = mr->lba * DISK_BLOCK, e = s + (uint64_t)mr->count * DISK_BLOCK;
		uint64_t x = s > a ? s : a, y = e < b ? e : b;

		if (s >= b)
			break;
		while (x < y) {
			uint64_t n = y - x > UINT32_MAX - DISK_BLOCK + 1 ?
					     UINT32_MAX - DISK_BLOCK + 1 : y - x;
			struct trace_record rec = { .t_us = t, .disk_off = x, .len = (uint32_t)n };

			out_push(o, &rec);
			x += n;
		}
	}
}

static int write_trace(const char *path, const struct out *o, const struct trace_recorder *r,
		       uint64_t duration)
{
	struct trace_header h = { .created = (uint64_t)time(NULL), .duration_us = duration,
				  .flags = r->full ? TRACE_F_TRUNCATED : 0 };

	memcpy(h.manifest_digest, r->m->digest, SHA256_LEN);
	memcpy(h.layout_digest, r->l->digest, SHA256_LEN);
	return trace_write(path, &h, o->rec, o->n, o->str, o->str_len);
}

int trace_recorder_finish(struct trace_recorder *r, const char *path, uint64_t *records,
			  char *why, size_t why_len)
{
	struct out o = { 0 };
	struct trace_index *idx = NULL;
	uint64_t duration;
	int ret;

	if (why_len)
		why[0] = '\0';
	pthread_mutex_lock(&r->lock);
	if (r->done) {
		pthread_mutex_unlock(&r->lock);
		return why_set(why, why_len, -EALREADY, "the trace was written already");
	}
	r->done = true;
	duration = now_us(r);
	pthread_mutex_unlock(&r->lock);
	/* r->raw is ours now: touches see done and append nothing */

	ret = trace_index_new(r->m, r->l, &idx);
	if (ret)
		return ret;
	o.path_of = calloc(r->m->n_entries ? r->m->n_entries : 1, sizeof(*o.path_of));
	if (!o.path_of || !grow((void **)&o.str, &o.str_cap, 1, 1)) {
		ret = -ENOMEM;
		goto out;
	}
	o.str[0] = '\0'; /* string offset 0 is "" */
	o.str_len = 1;
	for (size_t i = 0; i < r->n_raw && !o.err; i++) {
		const struct raw *w = &r->raw[i];
		struct resolve_ctx c = { .o = &o, .m = r->m, .t_us = w->t_us };

		resolve_meta(&o, r->l, w->t_us, w->off, w->off + w->len);
		trace_index_disk_to_files(idx, w->off, w->off + w->len, on_file_bytes, &c);
	}
	ret = o.err;
	if (ret == -E2BIG)
		why_set(why, why_len, ret, "too many records or paths for one trace");
	if (!ret)
		ret = write_trace(path, &o, r, duration);
	if (!ret && records)
		*records = o.n;
out:
	trace_index_free(idx);
	free(o.path_of);
	free(o.str);
	free(o.rec);
	return ret;
}
