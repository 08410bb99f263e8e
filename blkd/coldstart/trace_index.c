/* SPDX-License-Identifier: MIT */
#include "trace_index.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One piece of a regular file: its chunk bytes and where they are in the file's data. */
struct piece {
	const uint8_t *digest;
	uint32_t off, len;      /* in the chunk */
	uint32_t entry;
	uint64_t data_off;      /* in the file's data (holes removed) */
};

struct trace_index {
	const struct manifest *m;
	const struct layout *l;
	struct piece *pieces;   /* sorted by (digest, off, entry) */
	size_t n;
	uint32_t *chunk_order;  /* layout chunk indexes sorted by digest */
};

static int piece_cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;
	int c = memcmp(x->digest, y->digest, SHA256_LEN);

	if (c)
		return c;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static int chunk_cmp(const void *a, const void *b, void *arg)
{
	const struct layout *l = arg;

	return memcmp(l->chunks[*(const uint32_t *)a], l->chunks[*(const uint32_t *)b],
		      SHA256_LEN);
}

/*
 * The pieces of the regular files: what the table holds. The manifest rule makes it
 * chunk_count at most, but the table is sized by what it is filled with.
 */
static size_t count_pieces(const struct manifest *m)
{
	size_t n = 0;

	for (size_t e = 0; e < m->n_entries; e++)
		if (m->entries[e].type == MF_REG)
			n += m->entries[e].chunk_count;
	return n;
}

int trace_index_new(const struct manifest *m, const struct layout *l, struct trace_index **out)
{
	struct trace_index *x = calloc(1, sizeof(*x));
	size_t n = 0, want = count_pieces(m);

	if (!x)
		return -ENOMEM;
	x->m = m;
	x->l = l;
	x->pieces = calloc(want ? want : 1, sizeof(*x->pieces));
	x->chunk_order = calloc(l->hdr.chunk_count ? l->hdr.chunk_count : 1, sizeof(uint32_t));
	if (!x->pieces || !x->chunk_order) {
		trace_index_free(x);
		return -ENOMEM;
	}
	for (size_t e = 0; e < m->n_entries; e++) {
		const struct mf_entry *ent = &m->entries[e];
		uint64_t d = 0;

		if (ent->type != MF_REG)
			continue;
		for (uint32_t k = 0; k < ent->chunk_count; k++) {
			const struct mf_chunk *c = &m->chunks[ent->chunk_first + k];

			x->pieces[n++] = (struct piece){ .digest = c->digest, .off = c->off,
							 .len = c->len, .entry = (uint32_t)e,
							 .data_off = d };
			d += c->len;
		}
	}
	x->n = n;
	qsort(x->pieces, n, sizeof(*x->pieces), piece_cmp);
	for (uint64_t i = 0; i < l->hdr.chunk_count; i++)
		x->chunk_order[i] = (uint32_t)i;
	qsort_r(x->chunk_order, l->hdr.chunk_count, sizeof(uint32_t), chunk_cmp, (void *)l);
	*out = x;
	return 0;
}

void trace_index_free(struct trace_index *x)
{
	if (!x)
		return;
	free(x->pieces);
	free(x->chunk_order);
	free(x);
}

int64_t trace_index_chunk(const struct trace_index *x, const uint8_t d[SHA256_LEN])
{
	size_t lo = 0, hi = x->l->hdr.chunk_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(x->l->chunks[x->chunk_order[mid]], d, SHA256_LEN);

		if (!c)
			return x->chunk_order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* First piece of digest d that ends after chunk byte u. */
static size_t piece_at(const struct trace_index *x, const uint8_t *d, uint64_t u)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct piece *p = &x->pieces[mid];
		int c = memcmp(p->digest, d, SHA256_LEN);

		if (c < 0 || (!c && (uint64_t)p->off + p->len <= u))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Chunk bytes [u, v) of chunk digest d, which sit at disk byte disk_u: report the files. */
static void chunk_to_files(const struct trace_index *x, const uint8_t *d, uint64_t u, uint64_t v,
			   uint64_t disk_u, trace_file_fn cb, void *arg)
{
	int64_t last_off = -1;

	for (size_t i = piece_at(x, d, u); i < x->n; i++) {
		const struct piece *p = &x->pieces[i];
		const struct mf_entry *e = &x->m->entries[p->entry];
		uint64_t a, b, dd;

		if (memcmp(p->digest, d, SHA256_LEN) || p->off >= v)
			break;
		if ((int64_t)p->off == last_off)
			continue; /* the same bytes in another file: the first one names them */
		last_off = p->off;
		a = p->off > u ? p->off : u;
		b = (uint64_t)p->off + p->len < v ? (uint64_t)p->off + p->len : v;
		dd = p->data_off + (a - p->off);
		while (a < b) {
			uint64_t room, f = manifest_data_to_file(x->m, e, dd, &room);
			uint64_t n = b - a < room ? b - a : room;

			cb(arg, p->entry, disk_u + (a - u), f, (uint32_t)n);
			a += n;
			dd += n;
		}
	}
}

void trace_index_disk_to_files(const struct trace_index *x, uint64_t a, uint64_t b,
			       trace_file_fn cb, void *arg)
{
	const struct layout *l = x->l;

	for (size_t i = layout_data_run_at(l, a); i < l->hdr.data_run_count; i++) {
		const struct layout_data_run *r = &l->data_runs[i];
		uint64_t s = layout_data_run_pos(r), e = s + r->len;
		uint64_t p = s > a ? s : a, q = e < b ? e : b;

		if (s >= b)
			break;
		if (p >= q)
			continue;
		chunk_to_files(x, l->chunks[r->chunk], r->chunk_off + (p - s),
			       r->chunk_off + (q - s), p, cb, arg);
	}
}

struct chunks_ctx {
	const struct trace_index *x;
	trace_chunk_fn cb;
	void *arg;
};

static int piece_chunk(void *arg, const struct mf_chunk *c, uint64_t data_off)
{
	struct chunks_ctx *k = arg;
	int64_t ci = trace_index_chunk(k->x, c->digest);

	(void)data_off;
	return ci >= 0 ? k->cb(k->arg, (uint32_t)ci) : 0;
}

int trace_index_file_chunks(const struct trace_index *x, const struct mf_entry *e, uint64_t off,
			    uint64_t len, trace_chunk_fn cb, void *arg)
{
	struct chunks_ctx k = { .x = x, .cb = cb, .arg = arg };
	uint64_t end = off + len < off ? UINT64_MAX : off + len;

	if (e->type != MF_REG)
		return 0;
	return manifest_pieces_in(x->m, e, manifest_file_to_data(x->m, e, off),
				  manifest_file_to_data(x->m, e, end), piece_chunk, &k);
}
