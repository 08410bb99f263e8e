/* SPDX-License-Identifier: MIT */
/* Loading and validating one layout file (format in docs/formats.md); chain.c stacks them. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cas/chunk.h"
#include "../common/fsutil.h"
#include "../common/hash.h"
#include "layout_int.h"

#define VERIFY_READ (4u << 20)     /* the metadata area is hashed in reads this large */

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static int bad(char *why, size_t why_len, const char *msg)
{
	return why_set(why, why_len, -EBADMSG, "%s", msg);
}

static int read_header(struct layout *l, uint64_t size, char *why, size_t why_len)
{
	const struct layout_header *h = &l->hdr;
	struct layout_parent *par = &l->layers[0].parent;
	uint8_t block[DISK_BLOCK];
	uint64_t need;
	int ret;

	if (size < sizeof(h->magic))
		return bad(why, why_len, "file too short (not a lazyblk layout)");
	ret = fs_pread_full(l->fd, block, size < DISK_BLOCK ? size : DISK_BLOCK, 0);
	if (ret)
		return ret;
	if (memcmp(block, LAYOUT_MAGIC, sizeof(h->magic)))
		return bad(why, why_len, "bad magic (not a lazyblk layout)");
	if (size < DISK_BLOCK)
		return bad(why, why_len, "truncated (shorter than the header)");
	memcpy(&l->hdr, block, sizeof(l->hdr));
	memcpy(par, block + sizeof(l->hdr), sizeof(*par));
	/* 1 has no parent, 2 is a layer over a parent (the flag says so), 3 either by the flag */
	if (h->version > LAYOUT_VERSION)
		return bad(why, why_len, "unsupported layout version (newer than this lazyblk reads: 1 to 3)");
	if (h->version == 0 || (h->version == LAYOUT_VERSION_V2 && h->flags != LAYOUT_F_PARENT))
		return bad(why, why_len, "unsupported layout version");
	if (h->block_size != DISK_BLOCK)
		return bad(why, why_len, "unsupported block size");
	if (h->header_crc != layout_header_crc(h, par))
		return bad(why, why_len, "header checksum mismatch (file corrupt)");
	if (!all_zero(block + layout_header_len(h), DISK_BLOCK - layout_header_len(h)))
		return bad(why, why_len, "header padding not zero (file corrupt)");
	if ((h->version == LAYOUT_VERSION_V1 && h->flags) || (h->flags & ~LAYOUT_F_PARENT))
		return bad(why, why_len, "unsupported flags");
	if (!layout_has_parent(h))
		memset(par, 0, sizeof(*par));
	else if (!par->hint_len || par->hint_len > LAYOUT_HINT_MAX || par->reserved)
		return bad(why, why_len, "bad parent hint length");
	if (h->block_count == 0 || h->block_count > LAYOUT_MAX_BLOCKS)
		return bad(why, why_len, "bad block count");
	if (h->chunk_size > CHUNK_SIZE_MAX)
		return bad(why, why_len, "bad chunk size");
	/* Every count is bounded by the file size, so the sum below does not overflow. */
	if (h->meta_blocks > size / DISK_BLOCK ||
	    h->meta_run_count > size / sizeof(struct layout_meta_run) ||
	    h->data_run_count > size / sizeof(struct layout_data_run) ||
	    h->chunk_count > size / SHA256_LEN)
		return bad(why, why_len, "truncated (counts exceed the file size)");
	need = DISK_BLOCK + h->meta_blocks * DISK_BLOCK +
	       h->meta_run_count * sizeof(struct layout_meta_run) +
	       h->data_run_count * sizeof(struct layout_data_run) + h->chunk_count * SHA256_LEN +
	       par->hint_len;
	if (need != size)
		return bad(why, why_len, need > size ? "truncated" : "trailing garbage after the layout");
	l->meta_offset = DISK_BLOCK;
	return sha256_buf(block, DISK_BLOCK, l->digest);
}

static void *read_section(struct layout *l, uint64_t off, size_t len, int *ret)
{
	void *p = malloc(len ? len : 1);

	if (!p) {
		*ret = -ENOMEM;
		return NULL;
	}
	*ret = fs_pread_full(l->fd, p, len, (off_t)off);
	if (*ret) {
		free(p);
		return NULL;
	}
	return p;
}

static int read_tail(struct layout *l, char *why, size_t why_len)
{
	const struct layout_header *h = &l->hdr;
	struct layout_layer *y = &l->layers[0];
	uint64_t off = l->meta_offset + h->meta_blocks * DISK_BLOCK;
	size_t nm = h->meta_run_count * sizeof(*l->meta_runs);
	size_t nd = h->data_run_count * sizeof(*l->data_runs);
	int ret;

	l->meta_runs = read_section(l, off, nm, &ret);
	if (!l->meta_runs)
		return ret;
	l->data_runs = read_section(l, off + nm, nd, &ret);
	if (!l->data_runs)
		return ret;
	l->chunks = read_section(l, off + nm + nd, h->chunk_count * SHA256_LEN, &ret);
	if (!l->chunks || !y->parent.hint_len)
		return l->chunks ? 0 : ret;
	y->hint = malloc(y->parent.hint_len + 1);
	if (!y->hint)
		return -ENOMEM;
	off += nm + nd + h->chunk_count * SHA256_LEN;
	ret = fs_pread_full(l->fd, y->hint, y->parent.hint_len, (off_t)off);
	if (ret)
		return ret;
	y->hint[y->parent.hint_len] = '\0';
	if (strlen(y->hint) != y->parent.hint_len)
		return bad(why, why_len, "bad parent hint (a NUL byte in it)");
	return 0;
}

static int check_body(struct layout *l, char *why, size_t why_len)
{
	const struct layout_header *h = &l->hdr;
	struct sha256_ctx *c = sha256_new();
	uint64_t left = h->meta_blocks * DISK_BLOCK, off = l->meta_offset, blk = 0;
	uint8_t *buf = malloc(VERIFY_READ), got[SHA256_LEN];
	int ret = c && buf ? 0 : -ENOMEM;

	l->meta_sha = malloc(h->meta_blocks ? h->meta_blocks * SHA256_LEN : 1);
	l->layers[0].meta_sha = l->meta_sha;
	if (!l->meta_sha)
		ret = -ENOMEM;
	while (!ret && left) {
		size_t n = left < VERIFY_READ ? left : VERIFY_READ;

		ret = fs_pread_full(l->fd, buf, n, (off_t)off);
		if (!ret)
			ret = sha256_update(c, buf, n);
		for (size_t i = 0; !ret && i < n; i += DISK_BLOCK)
			ret = sha256_buf(buf + i, DISK_BLOCK, l->meta_sha[blk++]);
		off += n;
		left -= n;
	}
	if (!ret)
		ret = sha256_update(c, l->meta_runs, h->meta_run_count * sizeof(*l->meta_runs));
	if (!ret)
		ret = sha256_update(c, l->data_runs, h->data_run_count * sizeof(*l->data_runs));
	if (!ret)
		ret = sha256_update(c, l->chunks, h->chunk_count * SHA256_LEN);
	if (!ret && l->layers[0].parent.hint_len)
		ret = sha256_update(c, l->layers[0].hint, l->layers[0].parent.hint_len);
	if (!ret)
		ret = sha256_final(c, got);
	if (!ret && memcmp(got, h->body_sha256, SHA256_LEN))
		ret = bad(why, why_len, "checksum mismatch (file corrupt)");
	sha256_free(c);
	free(buf);
	return ret;
}

/* A data run's flags and alignment: a layer's runs are whole blocks and may be zero runs. */
static bool data_run_ok(const struct layout_header *h, const struct layout_data_run *d)
{
	if (!layout_has_parent(h))
		return !d->flags;
	if (d->blk_off || d->len % DISK_BLOCK || (d->flags & ~LAYOUT_RUN_ZERO))
		return false;
	return !(d->flags & LAYOUT_RUN_ZERO) || (!d->chunk && !d->chunk_off);
}

static int check_runs(const struct layout *l, char *why, size_t why_len)
{
	const struct layout_header *h = &l->hdr;
	uint64_t disk = h->block_count * DISK_BLOCK, end = 0;
	/* only version 3 defines the field, and a file without parents has one layer */
	bool layer_refs = h->version == LAYOUT_VERSION && layout_has_parent(h);

	for (uint64_t i = 0; i < h->meta_run_count; i++) {
		const struct layout_meta_run *m = &l->meta_runs[i];

		if (m->count == 0 || (m->layer && !layer_refs) || m->layer >= LAYOUT_CHAIN_MAX)
			return bad(why, why_len, "bad metadata run");
		if (m->lba >= h->block_count || m->count > h->block_count - m->lba)
			return bad(why, why_len, "metadata run beyond the end of the disk");
		/* a parent's area: checked when the chain is opened (chain.c) */
		if (!m->layer && (m->first >= h->meta_blocks || m->count > h->meta_blocks - m->first))
			return bad(why, why_len, "metadata run beyond the metadata area");
		if (i && m->lba < end)
			return bad(why, why_len, "metadata runs not sorted or overlapping");
		end = m->lba + m->count;
	}
	end = 0;
	for (uint64_t i = 0; i < h->data_run_count; i++) {
		const struct layout_data_run *d = &l->data_runs[i];
		uint64_t pos = layout_data_run_pos(d);

		if (d->len == 0 || d->blk_off >= DISK_BLOCK || !data_run_ok(h, d))
			return bad(why, why_len, "bad data run");
		if (d->lba >= h->block_count || d->len > disk - pos)
			return bad(why, why_len, "data run beyond the end of the disk");
		if (!(d->flags & LAYOUT_RUN_ZERO) && d->chunk >= h->chunk_count)
			return bad(why, why_len, "data run names a chunk not in the chunk table");
		if (!(d->flags & LAYOUT_RUN_ZERO) &&
		    (uint64_t)d->chunk_off + d->len > h->chunk_size)
			return bad(why, why_len, "data run beyond the chunk size");
		if (pos < end)
			return bad(why, why_len, "data runs not sorted or overlapping");
		end = pos + d->len;
	}
	if (layout_meta_data_overlap(l->meta_runs, h->meta_run_count, l->data_runs,
			      h->data_run_count) != h->data_run_count)
		return bad(why, why_len, "data run overlaps a metadata block");
	return 0;
}

int layout_load_file(const char *path, int oflags, struct layout **out, char *why, size_t why_len)
{
	struct layout *l;
	struct stat st;
	int ret;

	if (why_len)
		why[0] = '\0';
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->layers = calloc(1, sizeof(*l->layers));
	if (!l->layers) {
		free(l);
		return -ENOMEM;
	}
	l->n_layers = 1;
	l->fd = l->layers[0].fd = -1;
	l->layers[0].path = strdup(path);
	if (!l->layers[0].path) {
		ret = -ENOMEM;
		goto fail;
	}
	/* a FIFO or a device at path (a parent hint may name anything) is never opened */
	ret = fs_open_regular(AT_FDCWD, path, oflags, &st);
	if (ret < 0) {
		if (ret == -EINVAL)
			why_set(why, why_len, ret, "not a regular file");
		goto fail;
	}
	l->fd = l->layers[0].fd = ret;
	ret = read_header(l, (uint64_t)st.st_size, why, why_len);
	if (!ret)
		ret = read_tail(l, why, why_len);
	if (!ret)
		ret = check_body(l, why, why_len);
	if (!ret)
		ret = check_runs(l, why, why_len);
	if (ret)
		goto fail;
	l->layers[0].chunks = l->chunks;
	l->layers[0].meta_offset = l->meta_offset;
	l->layers[0].hdr = l->hdr;
	memcpy(l->layers[0].digest, l->digest, SHA256_LEN);
	*out = l;
	return 0;
fail:
	layout_close(l);
	return ret;
}

static void layout_layer_free(struct layout_layer *y)
{
	if (y->fd >= 0)
		close(y->fd);
	free(y->path);
	free(y->meta_sha);
	free(y->hint);
	memset(y, 0, sizeof(*y));
	y->fd = -1;
}

void layout_close(struct layout *l)
{
	if (!l)
		return;
	for (unsigned i = 0; i < l->n_layers; i++) {
		if (l->layers[i].chunks != l->chunks)
			free(l->layers[i].chunks);
		layout_layer_free(&l->layers[i]);
	}
	free(l->layers);
	free(l->meta_runs);
	free(l->data_runs);
	free(l->chunks);
	free(l);
}

size_t layout_meta_run_at(const struct layout *l, uint64_t lba)
{
	size_t lo = 0, hi = l->hdr.meta_run_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct layout_meta_run *m = &l->meta_runs[mid];

		if (m->lba + m->count <= lba)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t layout_data_run_at(const struct layout *l, uint64_t pos)
{
	size_t lo = 0, hi = l->hdr.data_run_count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct layout_data_run *d = &l->data_runs[mid];

		if (layout_data_run_pos(d) + d->len <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
