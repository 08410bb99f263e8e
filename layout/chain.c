/* SPDX-License-Identifier: MIT */
/*
 * Layouts with parents (docs/formats.md): finding each parent, merging the
 * chain into one view, and reading the view's metadata blocks from the layer holding them.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../common/grow.h"
#include "../common/hash.h"
#include "layout_int.h"

/* The reason of a failed layout_open that names files: the calling thread's. */
/* ------------------------------------------------------------------ finding parents */

/* Open path as the parent digest d: 0, -ENOENT, -EBADMSG for another layout, -errno. */
static int parent_try(const char *path, int oflags, const uint8_t d[SHA256_LEN],
		      struct layout **out, char *why, size_t why_len)
{
	int ret = layout_load_file(path, oflags, out, why, why_len);

	if (ret)
		return ret;
	if (!memcmp((*out)->digest, d, SHA256_LEN))
		return 0;
	layout_close(*out);
	*out = NULL;
	if (why_len)
		why[0] = '\0';
	return -EBADMSG;
}

/* Why a try of the parent at path failed: another layout, or not a good one. */
static int parent_why(char *why, size_t why_len, int err, const char *path, const char *lwhy,
		      const char *hex)
{
	if (err == -EBADMSG && !lwhy[0])
		return why_set(why, why_len, err, "base layout %s is not sha256:%s", path, hex);
	return why_set(why, why_len, err, "base layout %s: %s", path,
		       lwhy[0] ? lwhy : strerror(-err));
}

/*
 * The parent of a fetched layer: DIR/HEX.layout beside it, lazyblk's own name (a link there
 * is not followed). Its hint is never opened: the remote wrote it.
 */
static int parent_by_digest(const struct layout_layer *c, const char *alt, const char *hex,
			    struct layout **out, char *why, size_t why_len)
{
	char w[WHY_MAX] = "";
	int ret;

	if (c->hint[0] == '/')
		return why_set(why, why_len, -EBADMSG, "base layout sha256:%s: the parent hint is an "
			       "absolute path (refused in an image fetched by reference)", hex);
	ret = parent_try(alt, O_NOFOLLOW, c->parent.digest, out, w, sizeof(w));
	if (ret == -ENOENT)
		return why_set(why, why_len, ret, "base layout sha256:%s not found (looked for %s)",
			       hex, alt);
	return ret ? parent_why(why, why_len, ret, alt, w, hex) : 0;
}

/*
 * The parent of child: at its hint, else DIR/HEX.layout beside it (also when the file at
 * the hint is another layout or no layout at all). flags LAYOUT_OPEN_FETCHED: only
 * DIR/HEX.layout (parent_by_digest).
 */
static int parent_find(const struct layout *child, unsigned flags, struct layout **out,
		       char *why, size_t why_len)
{
	const struct layout_layer *c = &child->layers[0];
	char dir[PATH_MAX], at[PATH_MAX], alt[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	char w1[WHY_MAX] = "", w2[WHY_MAX] = "";
	int ret, r2;

	fs_dirname(c->path, dir, sizeof(dir));
	sha256_to_hex(c->parent.digest, hex);
	if (snprintf(alt, sizeof(alt), "%s/%s.layout", dir, hex) >= (int)sizeof(alt))
		return -ENAMETOOLONG;
	if (flags & LAYOUT_OPEN_FETCHED)
		return parent_by_digest(c, alt, hex, out, why, why_len);
	if (c->hint[0] == '/')
		snprintf(at, sizeof(at), "%s", c->hint);
	else if (snprintf(at, sizeof(at), "%s/%s", dir, c->hint) >= (int)sizeof(at))
		return -ENAMETOOLONG;
	ret = parent_try(at, 0, c->parent.digest, out, w1, sizeof(w1));
	if (!ret)
		return 0;
	r2 = strcmp(at, alt) ? parent_try(alt, 0, c->parent.digest, out, w2, sizeof(w2))
			     : -ENOENT;
	if (!r2)
		return 0;
	if (ret == -ENOENT && r2 == -ENOENT)
		return why_set(why, why_len, -ENOENT,
			       "base layout sha256:%s not found (looked for %s and %s)", hex,
			       at, alt);
	if (ret != -ENOENT)
		return parent_why(why, why_len, ret, at, w1, hex);
	return parent_why(why, why_len, r2, alt, w2, hex);
}

/* ------------------------------------------------------------------ merging */

struct runs {
	struct layout_meta_run *meta;
	size_t n_meta, cap_meta;
	struct layout_data_run *data;
	size_t n_data, cap_data;
};

/* Blocks [s, e) a child covers. */
struct span {
	uint64_t s, e;
};

static int span_add(struct span **v, size_t *n, size_t *cap, uint64_t s, uint64_t e)
{
	if (*n && (*v)[*n - 1].e == s) {
		(*v)[*n - 1].e = e;
		return 0;
	}
	if (!grow((void **)v, cap, *n + 1, sizeof(**v)))
		return -ENOMEM;
	(*v)[(*n)++] = (struct span){ s, e };
	return 0;
}

/* The blocks a child's runs cover (its metadata, data and zero runs), sorted, merged. */
static int child_spans(const struct layout *c, struct span **out, size_t *n)
{
	const struct layout_header *h = &c->hdr;
	size_t i = 0, k = 0, cap = 0;
	int ret = 0;

	*out = NULL;
	*n = 0;
	while (!ret && (i < h->meta_run_count || k < h->data_run_count)) {
		const struct layout_meta_run *m = i < h->meta_run_count ? &c->meta_runs[i] : NULL;
		const struct layout_data_run *d = k < h->data_run_count ? &c->data_runs[k] : NULL;

		if (m && (!d || m->lba < d->lba)) {
			ret = span_add(out, n, &cap, m->lba, m->lba + m->count);
			i++;
		} else {
			ret = span_add(out, n, &cap, d->lba, d->lba + d->len / DISK_BLOCK);
			k++;
		}
	}
	return ret;
}

static int meta_put(struct runs *r, const struct layout_meta_run *m)
{
	if (!grow((void **)&r->meta, &r->cap_meta, r->n_meta + 1, sizeof(*r->meta)))
		return -ENOMEM;
	r->meta[r->n_meta++] = *m;
	return 0;
}

static int data_put(struct runs *r, const struct layout_data_run *d)
{
	if (!grow((void **)&r->data, &r->cap_data, r->n_data + 1, sizeof(*r->data)))
		return -ENOMEM;
	r->data[r->n_data++] = *d;
	return 0;
}

/* The parts of metadata run m outside the spans into r (*j: the first span that may meet it). */
static int cut_meta(struct runs *r, const struct layout_meta_run *m, const struct span *sp,
		    size_t n, size_t *j)
{
	uint64_t a = m->lba, end = m->lba + m->count;
	int ret = 0;

	while (*j < n && sp[*j].e <= a)
		(*j)++;
	for (size_t k = *j; !ret && a < end; k++) {
		uint64_t b = k < n && sp[k].s < end ? sp[k].s : end;
		struct layout_meta_run p = *m;

		if (b > a) {
			p.lba = a;
			p.first = m->first + (a - m->lba);
			p.count = (uint32_t)(b - a);
			ret = meta_put(r, &p);
		}
		a = k < n && sp[k].s < end ? sp[k].e : end;
	}
	return ret;
}

/* The bytes of data run d outside the spans into r. */
static int cut_data(struct runs *r, const struct layout_data_run *d, const struct span *sp,
		    size_t n, size_t *j)
{
	uint64_t ps = layout_data_run_pos(d), a = ps, end = ps + d->len;
	int ret = 0;

	while (*j < n && sp[*j].e * DISK_BLOCK <= a)
		(*j)++;
	for (size_t k = *j; !ret && a < end; k++) {
		bool meets = k < n && sp[k].s * DISK_BLOCK < end;
		uint64_t b = meets ? sp[k].s * DISK_BLOCK : end;
		struct layout_data_run p = *d;

		if (b > a) {
			p.lba = a / DISK_BLOCK;
			p.blk_off = (uint16_t)(a % DISK_BLOCK);
			p.len = (uint32_t)(b - a);
			p.chunk_off = d->chunk_off + (uint32_t)(a - ps);
			ret = data_put(r, &p);
		}
		a = meets ? sp[k].e * DISK_BLOCK : end;
	}
	return ret;
}

/*
 * Layer k (file c) over the view so far (cur, whose data runs name chunks by their index
 * in the chain's table of every layer's chunks; base: where c's start in it): cur's runs
 * cut around c's blocks, then merged with c's in disk order.
 */
static int merge_layer(struct runs *cur, const struct layout *c, unsigned k, uint32_t base)
{
	const struct layout_header *h = &c->hdr;
	struct runs kept = { 0 }, out = { 0 };
	struct span *sp;
	size_t nsp, i, p, j;
	int ret = child_spans(c, &sp, &nsp);

	for (p = 0, j = 0; !ret && p < cur->n_meta; p++)
		ret = cut_meta(&kept, &cur->meta[p], sp, nsp, &j);
	for (p = 0, j = 0; !ret && p < cur->n_data; p++)
		ret = cut_data(&kept, &cur->data[p], sp, nsp, &j);
	for (i = 0, p = 0; !ret && (i < h->meta_run_count || p < kept.n_meta);) {
		if (i < h->meta_run_count &&
		    (p == kept.n_meta || c->meta_runs[i].lba < kept.meta[p].lba)) {
			struct layout_meta_run m = c->meta_runs[i++];

			m.layer += k; /* counted from layer k, now from the top */
			ret = meta_put(&out, &m);
		} else {
			ret = meta_put(&out, &kept.meta[p++]);
		}
	}
	for (i = 0, p = 0; !ret && (i < h->data_run_count || p < kept.n_data);) {
		if (i < h->data_run_count &&
		    (p == kept.n_data || layout_data_run_pos(&c->data_runs[i]) <
					 layout_data_run_pos(&kept.data[p]))) {
			struct layout_data_run d = c->data_runs[i++];

			d.chunk += base;
			if (!(d.flags & LAYOUT_RUN_ZERO))
				ret = data_put(&out, &d);
		} else {
			ret = data_put(&out, &kept.data[p++]);
		}
	}
	free(sp);
	free(kept.meta);
	free(kept.data);
	free(cur->meta);
	free(cur->data);
	*cur = out;
	return ret;
}

/* Chunk index of the chain's table → index in the view's, each digest once. */
static int chunks_intern(struct layout *top, struct runs *r, uint8_t (*all)[SHA256_LEN],
			 size_t n_all)
{
	size_t n_slots = 16, n = 0;
	uint32_t *map, *slots;
	int ret = 0;

	while (n_slots < 2 * n_all)
		n_slots *= 2;
	map = malloc((n_all ? n_all : 1) * sizeof(*map));
	slots = calloc(n_slots, sizeof(*slots));
	top->chunks = malloc((n_all ? n_all : 1) * SHA256_LEN);
	if (!map || !slots || !top->chunks)
		ret = -ENOMEM;
	for (size_t i = 0; !ret && i < n_all; i++)
		map[i] = UINT32_MAX;
	for (size_t i = 0; !ret && i < r->n_data; i++) {
		uint32_t g = r->data[i].chunk;
		size_t s;

		if (map[g] == UINT32_MAX) {
			s = hash_bytes(all[g], SHA256_LEN, 0) & (n_slots - 1);
			while (slots[s] && memcmp(top->chunks[slots[s] - 1], all[g], SHA256_LEN))
				s = (s + 1) & (n_slots - 1);
			if (!slots[s]) {
				memcpy(top->chunks[n], all[g], SHA256_LEN);
				slots[s] = (uint32_t)++n;
			}
			map[g] = slots[s] - 1;
		}
		r->data[i].chunk = map[g];
	}
	top->hdr.chunk_count = n;
	free(map);
	free(slots);
	return ret;
}

/* The view of files[0..n) (files[0] the top) into files[0]; takes every file's layer. */
static int chain_merge(struct layout **files, unsigned n)
{
	struct layout *top = files[0];
	struct layout_layer *layers = calloc(n, sizeof(*layers));
	uint8_t (*all)[SHA256_LEN] = NULL;
	uint64_t n_all = 0, meta = 0;
	struct runs cur = { 0 };
	int ret = layers ? 0 : -ENOMEM;

	for (unsigned k = 0; k < n; k++)
		n_all += files[k]->hdr.chunk_count;
	if (!ret && n_all >= UINT32_MAX)
		ret = -EOVERFLOW;
	if (!ret && !(all = malloc((n_all ? n_all : 1) * SHA256_LEN)))
		ret = -ENOMEM;
	n_all = 0;
	for (unsigned k = n; !ret && k-- > 0;) {
		const struct layout *f = files[k];

		memcpy(all + n_all, f->chunks, f->hdr.chunk_count * SHA256_LEN);
		ret = merge_layer(&cur, f, k, (uint32_t)n_all);
		n_all += f->hdr.chunk_count;
		if (top->hdr.chunk_size < f->hdr.chunk_size)
			top->hdr.chunk_size = f->hdr.chunk_size;
	}
	top->chunks = NULL; /* still layers[0].chunks */
	if (!ret)
		ret = chunks_intern(top, &cur, all, n_all);
	free(all);
	if (ret) {
		free(cur.meta);
		free(cur.data);
		free(layers);
		return ret;
	}
	for (size_t i = 0; i < cur.n_meta; i++)
		meta += cur.meta[i].count;
	for (unsigned k = 0; k < n; k++) {
		layers[k] = files[k]->layers[0];
		files[k]->layers[0].fd = -1;
		files[k]->layers[0].path = NULL;
		files[k]->layers[0].meta_sha = NULL;
		files[k]->layers[0].hint = NULL;
		files[k]->layers[0].chunks = NULL;
		if (k)
			files[k]->chunks = NULL;
	}
	free(top->layers);
	free(top->meta_runs);
	free(top->data_runs);
	top->layers = layers;
	top->n_layers = n;
	top->meta_runs = cur.meta;
	top->data_runs = cur.data;
	top->hdr.meta_blocks = meta;
	top->hdr.meta_run_count = cur.n_meta;
	top->hdr.data_run_count = cur.n_data;
	return 0;
}

/* files[0] is open; find and open its parents into files[1..], *n in all. */
static int chain_collect(struct layout **files, unsigned *n, unsigned flags, char *why,
			 size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1];
	int ret;

	while (files[*n - 1]->hdr.flags & LAYOUT_F_PARENT) {
		const struct layout *c = files[*n - 1];
		struct layout *p;

		if (*n == LAYOUT_CHAIN_MAX)
			return why_set(why, why_len, -ELOOP, "layout chain longer than %u layers",
				       LAYOUT_CHAIN_MAX);
		ret = parent_find(c, flags, &p, why, why_len);
		if (ret)
			return ret;
		files[(*n)++] = p;
		for (unsigned k = 0; k + 1 < *n; k++) {
			if (memcmp(files[k]->digest, p->digest, SHA256_LEN))
				continue;
			sha256_to_hex(p->digest, hex);
			return why_set(why, why_len, -ELOOP, "layout chain loops (sha256:%s twice)", hex);
		}
		if (p->hdr.block_count != c->hdr.block_count)
			return why_set(why, why_len, -EBADMSG,
				       "base layout %s has another disk size than %s",
				       p->layers[0].path, c->layers[0].path);
	}
	return 0;
}

/* A metadata run's layer counted from its file k: within the chain and that layer's area. */
static int chain_check_layers(struct layout **files, unsigned n, char *why, size_t why_len)
{
	for (unsigned k = 0; k < n; k++) {
		const struct layout *f = files[k];

		for (uint64_t i = 0; i < f->hdr.meta_run_count; i++) {
			const struct layout_meta_run *m = &f->meta_runs[i];
			uint64_t area;

			if (!m->layer)
				continue;
			if (m->layer >= n - k)
				return why_set(why, why_len, -EBADMSG,
					       "%s: metadata run names layer %u of a chain of %u",
					       f->layers[0].path, m->layer, n - k);
			area = files[k + m->layer]->hdr.meta_blocks;
			if (m->first >= area || m->count > area - m->first)
				return why_set(why, why_len, -EBADMSG,
					       "%s: metadata run beyond the metadata area of %s",
					       f->layers[0].path,
					       files[k + m->layer]->layers[0].path);
		}
	}
	return 0;
}

int layout_open(const char *path, struct layout **out, char *why, size_t why_len)
{
	return layout_open_flags(path, 0, out, why, why_len);
}

int layout_open_flags(const char *path, unsigned flags, struct layout **out, char *why,
		      size_t why_len)
{
	struct layout *files[LAYOUT_CHAIN_MAX];
	unsigned n = 1;
	int ret;

	ret = layout_load_file(path, flags & LAYOUT_OPEN_FETCHED ? O_NOFOLLOW : 0, &files[0],
			       why, why_len);
	if (ret || !(files[0]->hdr.flags & LAYOUT_F_PARENT)) {
		if (!ret)
			*out = files[0];
		return ret;
	}
	ret = chain_collect(files, &n, flags, why, why_len);
	if (!ret)
		ret = chain_check_layers(files, n, why, why_len);
	if (!ret)
		ret = chain_merge(files, n);
	for (unsigned k = ret ? 0 : 1; k < n; k++)
		layout_close(files[k]);
	if (!ret) {
		files[0]->fd = files[0]->layers[0].fd;
		files[0]->meta_sha = files[0]->layers[0].meta_sha;
		*out = files[0];
	}
	return ret;
}

/* ------------------------------------------------------------------ reading metadata */

static int meta_verify(const struct layout_layer *y, uint64_t first, uint64_t n,
		       const void *blocks, uint64_t *bad)
{
	uint8_t got[SHA256_LEN];
	int ret;

	for (uint64_t i = 0; i < n; i++) {
		ret = sha256_buf((const uint8_t *)blocks + i * DISK_BLOCK, DISK_BLOCK, got);
		if (!ret && memcmp(got, y->meta_sha[first + i], SHA256_LEN))
			ret = -EIO;
		if (ret) {
			if (bad)
				*bad = first + i;
			return ret;
		}
	}
	return 0;
}

int layout_meta_verify(const struct layout *l, uint64_t first, uint64_t n, const void *blocks,
		       uint64_t *bad)
{
	return meta_verify(&l->layers[0], first, n, blocks, bad);
}

int layout_read_meta_blocks(const struct layout *l, const struct layout_meta_run *m,
			    uint64_t first, uint64_t n, void *out, uint64_t *bad)
{
	const struct layout_layer *y;
	int ret;

	if (m->layer >= l->n_layers)
		return -EINVAL;
	y = &l->layers[m->layer];
	if (first > y->hdr.meta_blocks || n > y->hdr.meta_blocks - first)
		return -EINVAL;
	ret = fs_pread_full(y->fd, out, n * DISK_BLOCK,
			    (off_t)(y->meta_offset + first * DISK_BLOCK));
	return ret ? ret : meta_verify(y, first, n, out, bad);
}

int layout_read_meta(const struct layout *l, uint64_t lba, void *buf)
{
	size_t i = layout_meta_run_at(l, lba);
	const struct layout_meta_run *m;
	int ret;

	/* no pointer into meta_runs before i is known to be inside it (it may be NULL) */
	if (i == l->hdr.meta_run_count)
		return 0;
	m = &l->meta_runs[i];
	if (m->lba > lba)
		return 0;
	ret = layout_read_meta_blocks(l, m, m->first + lba - m->lba, 1, buf, NULL);
	return ret ? ret : 1;
}
