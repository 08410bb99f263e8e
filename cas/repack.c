/* SPDX-License-Identifier: MIT */
#include "repack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "../common/why.h"
#include "chunk.h"
#include "manifest.h"
#include "trace.h"

#define READ_CACHE 8   /* decompressed source chunks kept while copying the boot set */

/* A traced range of one file's data (holes removed), in the order the trace read it. */
struct span {
	uint32_t entry;
	uint64_t d0, len;
};

/* A piece of the boot stream: data [d0, d0 + len) of entry, in new chunk slot `slot`. */
struct bpiece {
	uint32_t entry;
	uint32_t len;
	uint64_t d0;
	size_t slot;
};

struct rcache {
	uint8_t d[SHA256_LEN];
	void *block;
	size_t len;
	uint64_t used;
};

struct repack {
	const struct repack_opts *o;
	struct manifest *m;
	struct trace *t;
	struct cas_source *src;
	struct chunker *ck;
	struct store *out;           /* the same store, writable: the boot chunks go there */
	uint32_t chunk_size;
	struct span *spans;
	size_t n_spans, cap_spans;
	struct bpiece *bp;
	size_t n_bp;                 /* bp and slots: sized once, by stream_alloc */
	struct mf_chunk *slots;      /* the boot pieces' chunk references (digests set later) */
	size_t n_slots;
	struct rcache rc[READ_CACHE];
	uint64_t tick;
	struct repack_result *res;
	char *why;                   /* the first failure's reason (why_first) */
	size_t why_len;
};

static int span_add(struct repack *rp, uint32_t entry, uint64_t d0, uint64_t len)
{
	if (!grow((void **)&rp->spans, &rp->cap_spans, rp->n_spans + 1, sizeof(*rp->spans)))
		return -ENOMEM;
	rp->spans[rp->n_spans++] = (struct span){ .entry = entry, .d0 = d0, .len = len };
	return 0;
}

/* File range [off, off + len) of e as a span: one data range (the holes in it are no data). */
static int file_range_span(struct repack *rp, const struct mf_entry *e, uint64_t off,
			   uint64_t len)
{
	uint64_t d0 = manifest_file_to_data(rp->m, e, off);
	uint64_t d1 = manifest_file_to_data(rp->m, e, off + len < off ? UINT64_MAX : off + len);

	return d1 > d0 ? span_add(rp, (uint32_t)(e - rp->m->entries), d0, d1 - d0) : 0;
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = *(const struct span *const *)a, *y = *(const struct span *const *)b;

	if (x->entry != y->entry)
		return x->entry < y->entry ? -1 : 1;
	if (x->d0 != y->d0)
		return x->d0 < y->d0 ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Spans overlapping an earlier-read span of the same file are dropped (len 0). */
static int spans_disjoint(struct repack *rp)
{
	struct span **v = malloc((rp->n_spans ? rp->n_spans : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < rp->n_spans; i++)
		v[i] = &rp->spans[i];
	qsort(v, rp->n_spans, sizeof(*v), span_cmp);
	for (size_t i = 1; i < rp->n_spans; i++) {
		struct span *a = v[i - 1], *b = v[i];

		if (a->entry == b->entry && a->len && b->d0 < a->d0 + a->len) {
			if (b < a) {          /* b was read first: keep it */
				a->len = 0;
			} else {
				b->len = 0;
				v[i] = a;     /* compare the next one with the survivor */
			}
		}
	}
	free(v);
	return 0;
}

static int span_of_record(void *arg, const struct mf_entry *e, uint64_t file_off, uint32_t len)
{
	return file_range_span(arg, e, file_off, len);
}

static int trace_spans(struct repack *rp)
{
	uint64_t files;
	int ret = trace_for_each_file(rp->t, rp->m, span_of_record, rp, &files, &rp->res->files);

	rp->res->files_missing = files - rp->res->files;
	return ret ? ret : spans_disjoint(rp);
}

/* The verified bytes of chunk d, from a small cache of decompressed chunks. */
static int chunk_bytes(struct repack *rp, const uint8_t d[SHA256_LEN], const uint8_t **data,
		       size_t *len)
{
	struct rcache *victim = &rp->rc[0];
	size_t flen;
	int ret;

	for (int i = 0; i < READ_CACHE; i++) {
		struct rcache *c = &rp->rc[i];

		if (c->block && !memcmp(c->d, d, SHA256_LEN)) {
			c->used = ++rp->tick;
			*data = c->block;
			*len = c->len;
			return 0;
		}
		if (c->used < victim->used)
			victim = c;
	}
	free(victim->block);
	victim->block = NULL;
	ret = cas_source_get(rp->src, d, CHUNK_SIZE_MAX, 0, &victim->block, &victim->len, &flen);
	if (ret)
		return ret; /* it said why */
	memcpy(victim->d, d, SHA256_LEN);
	victim->used = ++rp->tick;
	*data = victim->block;
	*len = victim->len;
	return 0;
}

struct copy_ctx {
	struct repack *rp;
	uint64_t d0, end;   /* the data bytes wanted */
	uint8_t *dst;       /* where d0 goes */
};

static int copy_piece(void *arg, const struct mf_chunk *c, uint64_t pos)
{
	struct copy_ctx *k = arg;
	uint64_t a = k->d0 > pos ? k->d0 : pos, b = k->end < pos + c->len ? k->end : pos + c->len;
	const uint8_t *data;
	size_t len;
	int ret = chunk_bytes(k->rp, c->digest, &data, &len);

	if (ret)
		return ret;
	if (c->off + (b - pos) > len)
		return why_first(k->rp->why, k->rp->why_len, -EIO,
				 "a chunk is shorter than the manifest says");
	memcpy(k->dst + (a - k->d0), data + c->off + (a - pos), b - a);
	return 0;
}

/* Copy data bytes [d0, d0 + n) of entry e (from its pieces) to dst. */
static int copy_data(struct repack *rp, const struct mf_entry *e, uint64_t d0, size_t n,
		     uint8_t *dst)
{
	struct copy_ctx k = { .rp = rp, .d0 = d0, .end = d0 + n, .dst = dst };

	return manifest_pieces_in(rp->m, e, d0, d0 + n, copy_piece, &k);
}

/* Room for every boot piece: a span splits at most once per chunk it crosses. */
static int stream_alloc(struct repack *rp)
{
	size_t n = 1;

	for (size_t i = 0; i < rp->n_spans; i++)
		if (rp->spans[i].len)
			n += rp->spans[i].len / rp->chunk_size + 2;
	rp->bp = malloc(n * sizeof(*rp->bp));
	rp->slots = calloc(n, sizeof(*rp->slots));   /* stable: the chunker writes digests */
	return rp->bp && rp->slots ? 0 : -ENOMEM;
}

/* The boot stream: every span's bytes, in trace order, into new chunks. */
static int stream(struct repack *rp)
{
	struct chunk_buf *b;
	int ret = stream_alloc(rp);

	if (ret)
		return ret;
	b = chunker_buf_get(rp->ck);
	for (size_t i = 0; i < rp->n_spans && !ret; i++) {
		const struct span *s = &rp->spans[i];
		const struct mf_entry *e = &rp->m->entries[s->entry];
		uint64_t d = s->d0, left = s->len;

		while (left && !ret) {
			size_t room = rp->chunk_size - b->fill;
			size_t n = left < room ? (size_t)left : room;
			struct mf_chunk *sl = &rp->slots[rp->n_slots];

			ret = copy_data(rp, e, d, n, b->data + b->fill);
			if (ret)
				break;
			sl->len = (uint32_t)n;
			sl->off = (uint32_t)b->fill;
			rp->bp[rp->n_bp++] = (struct bpiece){ .entry = s->entry, .len = (uint32_t)n,
							      .d0 = d, .slot = rp->n_slots++ };
			b->fill += n;
			b->slots[b->n_slots++] = sl;
			rp->res->boot_bytes += n;
			d += n;
			left -= n;
			if (b->fill == rp->chunk_size || b->n_slots == CHUNK_PACK_MAX_PIECES) {
				ret = chunker_submit(rp->ck, b);
				b = NULL;
				if (!ret)
					b = chunker_buf_get(rp->ck);
			}
		}
	}
	if (b && !ret && b->fill)
		return chunker_submit(rp->ck, b);
	if (b)
		chunker_buf_put(rp->ck, b);
	return ret;
}

static int bp_cmp(const void *a, const void *b)
{
	const struct bpiece *x = a, *y = b;

	if (x->entry != y->entry)
		return x->entry < y->entry ? -1 : 1;
	return x->d0 < y->d0 ? -1 : x->d0 > y->d0;
}

struct pieces {
	struct mf_chunk *v;
	size_t n, cap;
};

static int piece_push(struct pieces *p, const uint8_t *digest, uint32_t off, uint32_t len)
{
	struct mf_chunk *v;

	if (!len)
		return 0;
	if (p->n) {
		struct mf_chunk *l = &p->v[p->n - 1];

		/* the next bytes of the same chunk: one piece */
		if (!memcmp(l->digest, digest, SHA256_LEN) && l->off + l->len == off) {
			l->len += len;
			return 0;
		}
	}
	v = grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v[p->n].digest, digest, SHA256_LEN);
	v[p->n].off = off;
	v[p->n].len = len;
	p->n++;
	return 0;
}

struct old_ctx {
	uint64_t a, b;
	struct pieces *out;
};

static int old_piece(void *arg, const struct mf_chunk *c, uint64_t pos)
{
	struct old_ctx *k = arg;
	uint64_t x = k->a > pos ? k->a : pos, y = k->b < pos + c->len ? k->b : pos + c->len;

	return piece_push(k->out, c->digest, c->off + (uint32_t)(x - pos), (uint32_t)(y - x));
}

/* Data [a, b) of e as pieces of its old chunks. */
static int old_pieces(const struct manifest *m, const struct mf_entry *e, uint64_t a, uint64_t b,
		      struct pieces *out)
{
	struct old_ctx k = { .a = a, .b = b, .out = out };

	return a < b ? manifest_pieces_in(m, e, a, b, old_piece, &k) : 0;
}

/* The new piece list of a traced file: its boot pieces, its old pieces in between. */
static int new_pieces(struct repack *rp, const struct mf_entry *e, const struct bpiece *bp,
		      size_t n, struct pieces *out)
{
	uint64_t pos = 0;
	int ret = 0;

	out->n = 0;
	for (size_t i = 0; i < n && !ret; i++) {
		const struct mf_chunk *sl = &rp->slots[bp[i].slot];

		ret = old_pieces(rp->m, e, pos, bp[i].d0, out);
		if (!ret)
			ret = piece_push(out, sl->digest, sl->off, sl->len);
		pos = bp[i].d0 + bp[i].len;
	}
	return ret ? ret : old_pieces(rp->m, e, pos, UINT64_MAX, out);
}

/* Everything about entry e but its pieces, as the writer takes it. */
static int entry_in(const struct manifest *m, const struct mf_entry *e, struct mf_entry_in *in,
		    struct mf_xattr_in **xbuf, size_t *xcap)
{
	memset(in, 0, sizeof(*in));
	in->path = manifest_path(m, e);
	in->path_len = e->path_len;
	in->type = e->type;
	in->mode = e->mode;
	in->uid = e->uid;
	in->gid = e->gid;
	in->rdev_major = e->rdev_major;
	in->rdev_minor = e->rdev_minor;
	in->atime = e->atime;
	in->mtime = e->mtime;
	in->ctime = e->ctime;
	in->atime_ns = e->atime_ns;
	in->mtime_ns = e->mtime_ns;
	in->ctime_ns = e->ctime_ns;
	in->size = e->size;
	if (e->type == MF_SYMLINK || e->type == MF_HARDLINK) {
		in->link = manifest_str(m, e->link_off);
		in->link_len = e->link_len;
	}
	in->chunks = &m->chunks[e->chunk_first];
	in->chunk_count = e->chunk_count;
	in->holes = &m->holes[e->hole_first];
	in->hole_count = e->hole_count;
	if (e->xattr_count) {
		struct mf_xattr_in *x = grow((void **)xbuf, xcap, e->xattr_count, sizeof(*x));

		if (!x)
			return -ENOMEM;
		for (uint32_t i = 0; i < e->xattr_count; i++) {
			const struct mf_xattr *mx = &m->xattrs[e->xattr_first + i];

			x[i] = (struct mf_xattr_in){ .name = manifest_str(m, mx->name_off),
						     .value = manifest_str(m, mx->value_off),
						     .name_len = mx->name_len,
						     .value_len = mx->value_len };
		}
		in->xattrs = x;
		in->xattr_count = e->xattr_count;
	}
	return 0;
}

static int write_manifest(struct repack *rp)
{
	const struct manifest *m = rp->m;
	struct manifest_writer *w = manifest_writer_new(m->hdr->chunk_size > rp->chunk_size ?
							m->hdr->chunk_size : rp->chunk_size);
	struct mf_xattr_in *xbuf = NULL;
	struct pieces pc = { 0 };
	size_t xcap = 0, bi = 0;
	char why[WHY_MAX] = "";
	int ret = 0;

	if (!w)
		return -ENOMEM;
	qsort(rp->bp, rp->n_bp, sizeof(*rp->bp), bp_cmp);
	if (m->hdr->config_len)
		ret = manifest_writer_set_config(w, manifest_str(m, m->hdr->config_off),
						 m->hdr->config_len);
	for (size_t i = 0; i < m->n_entries && !ret; i++) {
		const struct mf_entry *e = &m->entries[i];
		struct mf_entry_in in;
		size_t n = 0;

		ret = entry_in(m, e, &in, &xbuf, &xcap);
		if (ret)
			break;
		while (bi + n < rp->n_bp && rp->bp[bi + n].entry == i)
			n++;
		if (n) {
			ret = new_pieces(rp, e, &rp->bp[bi], n, &pc);
			if (ret)
				break;
			in.chunks = pc.v;
			in.chunk_count = (uint32_t)pc.n;
			bi += n;
		}
		ret = manifest_writer_add(w, &in);
	}
	if (!ret) {
		ret = manifest_writer_write(w, rp->o->out_path, rp->res->digest, why,
					    sizeof(why));
		if (ret)
			why_first(rp->why, rp->why_len, ret, "%s: %s", rp->o->out_path,
				  why[0] ? why : strerror(-ret));
	} else {
		why_first(rp->why, rp->why_len, ret, "cannot build the new manifest: %s",
			  strerror(-ret));
	}
	manifest_writer_free(w);
	free(pc.v);
	free(xbuf);
	return ret;
}

static int repack_open(struct repack *rp)
{
	const struct repack_opts *o = rp->o;
	struct chunker_opts co = { .chunk_size = rp->chunk_size, .level = o->level };
	char why[WHY_MAX] = "";
	char twhy[WHY_MAX] = "";
	int ret;

	ret = manifest_load(o->manifest_path, &rp->m, why, sizeof(why));
	if (ret)
		return why_first(rp->why, rp->why_len, ret, "%s: %s", o->manifest_path,
				 why[0] ? why : strerror(-ret));
	ret = trace_load(o->trace_path, &rp->t, twhy, sizeof(twhy));
	if (ret)
		return why_first(rp->why, rp->why_len, ret, "%s: %s", o->trace_path,
				 twhy[0] ? twhy : strerror(-ret));
	if (!rp->chunk_size)
		rp->chunk_size = co.chunk_size = rp->m->hdr->chunk_size;
	ret = cas_source_open(&o->src, &rp->src, rp->why, rp->why_len);
	if (ret)
		return ret; /* why says why */
	ret = store_open(o->src.store_dir, true, &rp->out);
	if (ret && !store_open_why(ret, o->src.store_dir, false, rp->why, rp->why_len))
		return why_first(rp->why, rp->why_len, ret, "%s: %s", o->src.store_dir,
				 strerror(-ret));
	if (ret)
		return ret;
	ret = chunker_new(rp->out, &co, &rp->ck);
	if (ret)
		why_first(rp->why, rp->why_len, ret, "cannot start the chunker: %s",
			  strerror(-ret));
	return ret;
}

int repack_run(const struct repack_opts *o, struct repack_result *res, char *why,
	       size_t why_len)
{
	struct repack rp = { .o = o, .res = res, .chunk_size = o->chunk_size, .why = why,
			     .why_len = why_len };
	int ret, fin;

	memset(res, 0, sizeof(*res));
	if (why_len)
		why[0] = '\0';
	ret = repack_open(&rp);
	if (!ret)
		ret = trace_spans(&rp);
	if (!ret && !res->files)
		ret = why_first(rp.why, rp.why_len, -EINVAL,
				"%s: none of the %llu files it read is a regular "
				"file of %s (a trace of another image?)", o->trace_path,
				(unsigned long long)res->files_missing, o->manifest_path);
	if (!ret)
		ret = stream(&rp);
	if (rp.ck) {
		fin = chunker_finish(rp.ck); /* staged chunks land: they are valid either way */
		chunker_get_stats(rp.ck, &res->chunks);
		chunker_free(rp.ck);
		if (!ret && fin)
			ret = why_first(rp.why, rp.why_len, fin, "store %s: %s", o->src.store_dir,
					strerror(-fin));
	}
	if (!ret)
		ret = write_manifest(&rp);
	for (int i = 0; i < READ_CACHE; i++)
		free(rp.rc[i].block);
	cas_source_close(rp.src);
	store_close(rp.out);
	trace_free(rp.t);
	manifest_free(rp.m);
	free(rp.spans);
	free(rp.bp);
	free(rp.slots);
	if (ret == -ENOMEM)
		why_first(rp.why, rp.why_len, ret,
			  "out of memory"); /* unless a reason is there already */
	return ret;
}
