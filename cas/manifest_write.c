/* SPDX-License-Identifier: MIT */
/*
 * Writing a manifest (format in docs/formats.md): entries added in any order, sorted, their
 * pieces laid out in that order, serialized with the trailing sha256.
 */
#include "manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../common/grow.h"
#include "../common/why.h"

struct vec {
	void *data;
	size_t len, cap, elem;
};

static void *vec_push(struct vec *v, size_t n)
{
	if (!grow(&v->data, &v->cap, v->len + n, v->elem))
		return NULL;
	void *p = (uint8_t *)v->data + v->len * v->elem;
	v->len += n;
	return p;
}

struct manifest_writer {
	struct vec entries;  /* struct mf_entry */
	struct vec chunks;   /* struct mf_chunk */
	struct vec holes;    /* struct mf_hole */
	struct vec xattrs;   /* struct mf_xattr */
	struct vec strings;  /* char */
	uint64_t config_off;
	uint32_t config_len;
	uint32_t chunk_size;
};

struct manifest_writer *manifest_writer_new(uint32_t chunk_size)
{
	struct manifest_writer *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->entries.elem = sizeof(struct mf_entry);
	w->chunks.elem = sizeof(struct mf_chunk);
	w->holes.elem = sizeof(struct mf_hole);
	w->xattrs.elem = sizeof(struct mf_xattr);
	w->strings.elem = 1;
	w->chunk_size = chunk_size;
	return w;
}

void manifest_writer_free(struct manifest_writer *w)
{
	if (!w)
		return;
	free(w->entries.data);
	free(w->chunks.data);
	free(w->holes.data);
	free(w->xattrs.data);
	free(w->strings.data);
	free(w);
}

static int add_str(struct manifest_writer *w, const void *s, size_t len, uint64_t *off)
{
	char *p = vec_push(&w->strings, len + 1);

	if (!p)
		return -ENOMEM;
	*off = (uint64_t)(p - (char *)w->strings.data);
	if (len)
		memcpy(p, s, len);
	p[len] = '\0';
	return 0;
}

int manifest_writer_add(struct manifest_writer *w, const struct mf_entry_in *in)
{
	struct mf_entry e;
	int ret;

	memset(&e, 0, sizeof(e));
	e.type = in->type;
	e.mode = in->mode & 07777;
	e.uid = in->uid;
	e.gid = in->gid;
	e.rdev_major = in->rdev_major;
	e.rdev_minor = in->rdev_minor;
	e.atime = in->atime;
	e.mtime = in->mtime;
	e.ctime = in->ctime;
	e.atime_ns = in->atime_ns;
	e.mtime_ns = in->mtime_ns;
	e.ctime_ns = in->ctime_ns;
	e.size = in->size;
	e.path_len = in->path_len;
	ret = add_str(w, in->path, in->path_len, &e.path_off);
	if (ret)
		return ret;
	/* only links have a target (the reader refuses one anywhere else) */
	if (in->link_len && (in->type == MF_SYMLINK || in->type == MF_HARDLINK)) {
		e.link_len = in->link_len;
		ret = add_str(w, in->link, in->link_len, &e.link_off);
		if (ret)
			return ret;
	}
	e.chunk_first = w->chunks.len;
	e.chunk_count = in->chunk_count;
	if (in->chunk_count) {
		void *p = vec_push(&w->chunks, in->chunk_count);

		if (!p)
			return -ENOMEM;
		memcpy(p, in->chunks, in->chunk_count * sizeof(struct mf_chunk));
		for (uint32_t i = 0; i < in->chunk_count; i++) {
			struct mf_chunk *c = (struct mf_chunk *)p + i;

			uint64_t end = (uint64_t)c->off + c->len;

			if (end > w->chunk_size)
				w->chunk_size = end > UINT32_MAX ? UINT32_MAX : (uint32_t)end;
		}
	}
	e.hole_first = w->holes.len;
	e.hole_count = in->hole_count;
	if (in->hole_count) {
		void *p = vec_push(&w->holes, in->hole_count);

		if (!p)
			return -ENOMEM;
		memcpy(p, in->holes, in->hole_count * sizeof(struct mf_hole));
	}
	e.xattr_first = w->xattrs.len;
	e.xattr_count = in->xattr_count;
	for (uint32_t i = 0; i < in->xattr_count; i++) {
		struct mf_xattr x = { 0 };
		struct mf_xattr *dst;

		x.name_len = in->xattrs[i].name_len;
		x.value_len = in->xattrs[i].value_len;
		ret = add_str(w, in->xattrs[i].name, x.name_len, &x.name_off);
		if (!ret)
			ret = add_str(w, in->xattrs[i].value, x.value_len, &x.value_off);
		if (ret)
			return ret;
		dst = vec_push(&w->xattrs, 1);
		if (!dst)
			return -ENOMEM;
		*dst = x;
	}
	struct mf_entry *dst = vec_push(&w->entries, 1);
	if (!dst)
		return -ENOMEM;
	*dst = e;
	return 0;
}

int manifest_writer_set_config(struct manifest_writer *w, const char *json, size_t len)
{
	if (len > UINT32_MAX)
		return -EFBIG;
	w->config_len = (uint32_t)len;
	return add_str(w, json, len, &w->config_off);
}

static int entry_cmp(const void *a, const void *b, void *strings)
{
	const struct mf_entry *x = a, *y = b;
	const char *s = strings;

	return manifest_path_cmp(s + x->path_off, x->path_len, s + y->path_off, y->path_len);
}

static void sort_entries(struct manifest_writer *w)
{
	if (w->entries.len > 1)
		qsort_r(w->entries.data, w->entries.len, sizeof(struct mf_entry), entry_cmp,
			w->strings.data);
}

/*
 * The pieces in the order of the sorted entries (the reader's rule: each file's pieces follow
 * the previous file's), whatever order the entries were added in.
 */
static int order_pieces(struct manifest_writer *w)
{
	struct mf_entry *ents = w->entries.data;
	struct mf_chunk *from = w->chunks.data, *to;
	uint64_t pos = 0;

	if (!w->chunks.len)
		return 0;
	to = malloc(w->chunks.len * sizeof(*to));
	if (!to)
		return -ENOMEM;
	for (size_t i = 0; i < w->entries.len; i++) {
		memcpy(to + pos, from + ents[i].chunk_first, ents[i].chunk_count * sizeof(*to));
		ents[i].chunk_first = pos;
		pos += ents[i].chunk_count;
	}
	free(w->chunks.data);
	w->chunks.data = to;
	w->chunks.cap = w->chunks.len;
	return 0;
}

int manifest_writer_serialize(struct manifest_writer *w, uint8_t **out, size_t *out_len,
			      char *why, size_t why_len)
{
	struct mf_header h;
	struct mf_entry *ents;
	uint8_t *buf, *p;
	size_t len;
	int ret;

	sort_entries(w);
	ents = w->entries.data;
	for (size_t i = 1; i < w->entries.len; i++) {
		if (manifest_path_cmp((char *)w->strings.data + ents[i - 1].path_off,
				      ents[i - 1].path_len,
				      (char *)w->strings.data + ents[i].path_off,
				      ents[i].path_len) == 0) {
			return why_set(why, why_len, -EEXIST, "duplicate path");
		}
	}
	ret = order_pieces(w);
	if (ret)
		return ret;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, MF_MAGIC, 8);
	h.version = MF_VERSION;
	h.header_size = sizeof(h);
	h.entry_count = w->entries.len;
	h.chunk_count = w->chunks.len;
	h.hole_count = w->holes.len;
	h.xattr_count = w->xattrs.len;
	h.strings_size = w->strings.len;
	h.config_off = w->config_off;
	h.config_len = w->config_len;
	h.chunk_size = w->chunk_size;
	len = sizeof(h) + w->entries.len * sizeof(struct mf_entry) +
	      w->chunks.len * sizeof(struct mf_chunk) + w->holes.len * sizeof(struct mf_hole) +
	      w->xattrs.len * sizeof(struct mf_xattr) + w->strings.len + SHA256_LEN;
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	p = buf;
#define PUT(src, n) do { size_t n_ = (n); if (n_) memcpy(p, src, n_); p += n_; } while (0)
	PUT(&h, sizeof(h));
	PUT(w->entries.data, w->entries.len * sizeof(struct mf_entry));
	PUT(w->chunks.data, w->chunks.len * sizeof(struct mf_chunk));
	PUT(w->holes.data, w->holes.len * sizeof(struct mf_hole));
	PUT(w->xattrs.data, w->xattrs.len * sizeof(struct mf_xattr));
	PUT(w->strings.data, w->strings.len);
#undef PUT
	ret = sha256_buf(buf, len - SHA256_LEN, p);
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	*out_len = len;
	return 0;
}

int manifest_writer_write(struct manifest_writer *w, const char *path,
			  uint8_t digest_out[SHA256_LEN], char *why, size_t why_len)
{
	uint8_t *buf;
	size_t len;
	int ret;

	ret = manifest_writer_serialize(w, &buf, &len, why, why_len);
	if (ret)
		return ret;
	if (digest_out)
		memcpy(digest_out, buf + len - SHA256_LEN, SHA256_LEN);
	ret = fs_write_file_atomic(path, buf, len, 0644);
	free(buf);
	return ret;
}
