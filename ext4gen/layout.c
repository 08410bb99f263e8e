/* SPDX-License-Identifier: MIT */
/* Writing, loading and validating layouts (format in docs/formats.md). */
#include "layout.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cas/chunk.h"
#include "../common/crc32c.h"
#include "../common/fsutil.h"
#include "../common/grow.h"
#include "../common/hash.h"
#include "layout_int.h"

#define WBUF_SIZE (1u << 20)       /* writer: output buffer */
#define VERIFY_READ (4u << 20)     /* reader: metadata area hashed in reads this large */

/* Bytes of the header its version has (struct layout_parent after it in version 2). */
static size_t header_len(const struct layout_header *h)
{
	return sizeof(*h) + (h->version == LAYOUT_VERSION ? 0 : sizeof(struct layout_parent));
}

/*
 * crc32c(~0, header with header_crc = 0), as ext4 computes its checksums; in version 2,
 * of the header and the parent record after it.
 */
static uint32_t header_crc(const struct layout_header *hdr, const struct layout_parent *par)
{
	uint8_t b[sizeof(*hdr) + sizeof(*par)];
	struct layout_header h = *hdr;

	h.header_crc = 0;
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), par, sizeof(*par));
	return crc32c(~0u, b, header_len(&h));
}

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* ------------------------------------------------------------------ writing */

struct layout_writer {
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	int fd;
	int err;                        /* sticky I/O error */
	bool finished;
	uint64_t block_count;
	uint64_t meta_blocks;
	struct sha256_ctx *body;        /* of every byte after the header, as written */
	uint8_t *wbuf;
	size_t wlen;

	struct layout_meta_run *meta;
	size_t n_meta, cap_meta;
	struct layout_data_run *data;
	size_t n_data, cap_data;
	uint64_t data_end;              /* disk byte after the last data run */
	uint64_t chunk_end;             /* largest chunk_off + len of any data run */

	uint8_t (*chunks)[SHA256_LEN];
	size_t n_chunks, cap_chunks;
	uint32_t *slots;                /* open addressing: chunk index + 1; 0 is free */
	size_t n_slots;                 /* a power of two, at least twice n_chunks */

	bool has_parent;                /* version 2: whole-block runs, zero runs allowed */
	uint8_t parent[SHA256_LEN];
	char hint[LAYOUT_HINT_MAX + 1];
};

static int wflush(struct layout_writer *w)
{
	int ret;

	if (!w->wlen)
		return 0;
	ret = fs_write_full(w->fd, w->wbuf, w->wlen);
	w->wlen = 0;
	/* start writeback now: the final fsync then has little left to wait for */
	if (!ret)
		sync_file_range(w->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return ret;
}

/* Append to the body: hashed now, buffered for the file. */
static int body_put(struct layout_writer *w, const void *data, size_t len)
{
	const uint8_t *p = data;
	int ret;

	ret = sha256_update(w->body, data, len);
	if (ret)
		return ret;
	if (len >= WBUF_SIZE) {
		ret = wflush(w);
		return ret ? ret : fs_write_full(w->fd, data, len);
	}
	while (len) {
		size_t n = WBUF_SIZE - w->wlen < len ? WBUF_SIZE - w->wlen : len;

		memcpy(w->wbuf + w->wlen, p, n);
		w->wlen += n;
		p += n;
		len -= n;
		if (w->wlen == WBUF_SIZE) {
			ret = wflush(w);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int layout_writer_new(const char *path, uint64_t block_count, struct layout_writer **out)
{
	struct layout_writer *w;
	int ret;

	if (block_count == 0 || block_count > LAYOUT_MAX_BLOCKS)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	w->block_count = block_count;
	if (snprintf(w->path, sizeof(w->path), "%s", path) >= (int)sizeof(w->path) ||
	    snprintf(w->tmp, sizeof(w->tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(w->tmp)) {
		free(w);
		return -ENAMETOOLONG;
	}
	w->body = sha256_new();
	w->wbuf = malloc(WBUF_SIZE);
	if (!w->body || !w->wbuf) {
		ret = -ENOMEM;
		goto fail;
	}
	/* a fresh name (O_EXCL): never a file or a link someone left at a name we could guess */
	w->fd = fs_mkstemp(w->tmp, 0, FS_DATA_MODE);
	if (w->fd < 0) {
		ret = w->fd;
		w->tmp[0] = '\0';
		goto fail;
	}
	/* the header is written last, into this hole */
	if (lseek(w->fd, LAYOUT_BLOCK, SEEK_SET) < 0) {
		ret = -errno;
		goto fail;
	}
	*out = w;
	return 0;
fail:
	layout_writer_free(w);
	return ret;
}

static int writer_state(const struct layout_writer *w)
{
	if (w->err)
		return w->err;
	return w->finished ? -EINVAL : 0;
}

int layout_writer_set_parent(struct layout_writer *w, const uint8_t parent[SHA256_LEN],
			     const char *hint)
{
	size_t n = strlen(hint);
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (w->n_meta || w->n_data || !n || n > LAYOUT_HINT_MAX)
		return -EINVAL;
	memcpy(w->parent, parent, SHA256_LEN);
	memcpy(w->hint, hint, n + 1);
	w->has_parent = true;
	return 0;
}

int layout_add_meta(struct layout_writer *w, uint64_t lba, const void *blocks, uint32_t count)
{
	struct layout_meta_run *last = w->n_meta ? &w->meta[w->n_meta - 1] : NULL;
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (count == 0 || lba >= w->block_count || count > w->block_count - lba)
		return -EINVAL;
	if (last && lba < last->lba + last->count)
		return -EINVAL; /* out of order or overlapping */
	if (!grow((void **)&w->meta, &w->cap_meta, w->n_meta + 1, sizeof(*w->meta)))
		return -ENOMEM;
	last = w->n_meta ? &w->meta[w->n_meta - 1] : NULL;
	ret = body_put(w, blocks, (size_t)count * LAYOUT_BLOCK);
	if (ret) {
		w->err = ret;
		return ret;
	}
	if (last && last->lba + last->count == lba && last->count <= UINT32_MAX - count) {
		last->count += count;
	} else {
		w->meta[w->n_meta++] = (struct layout_meta_run){
			.lba = lba, .first = w->meta_blocks, .count = count,
		};
	}
	w->meta_blocks += count;
	return 0;
}

static int slots_rehash(struct layout_writer *w)
{
	size_t n = w->n_slots ? w->n_slots * 2 : 1024;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < w->n_chunks; i++) {
		size_t k = hash_bytes(w->chunks[i], SHA256_LEN, 0) & (n - 1);

		while (s[k])
			k = (k + 1) & (n - 1);
		s[k] = (uint32_t)(i + 1);
	}
	free(w->slots);
	w->slots = s;
	w->n_slots = n;
	return 0;
}

/* The index of digest d in the chunk table, adding it if new. */
static int chunk_intern(struct layout_writer *w, const uint8_t d[SHA256_LEN], uint32_t *idx)
{
	size_t k;
	int ret;

	if ((w->n_chunks + 1) * 2 > w->n_slots) {
		ret = slots_rehash(w);
		if (ret)
			return ret;
	}
	k = hash_bytes(d, SHA256_LEN, 0) & (w->n_slots - 1);
	for (; w->slots[k]; k = (k + 1) & (w->n_slots - 1)) {
		if (!memcmp(w->chunks[w->slots[k] - 1], d, SHA256_LEN)) {
			*idx = w->slots[k] - 1;
			return 0;
		}
	}
	if (w->n_chunks >= UINT32_MAX - 1)
		return -EOVERFLOW;
	if (!grow((void **)&w->chunks, &w->cap_chunks, w->n_chunks + 1, sizeof(*w->chunks)))
		return -ENOMEM;
	memcpy(w->chunks[w->n_chunks], d, SHA256_LEN);
	w->slots[k] = (uint32_t)(w->n_chunks + 1);
	*idx = (uint32_t)w->n_chunks++;
	return 0;
}

int layout_add_data(struct layout_writer *w, uint64_t disk_byte, uint32_t len,
		    const uint8_t digest[SHA256_LEN], uint32_t chunk_off)
{
	uint64_t disk = w->block_count * LAYOUT_BLOCK;
	uint32_t idx;
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (len == 0 || disk_byte > disk || len > disk - disk_byte || disk_byte < w->data_end ||
	    chunk_off > UINT32_MAX - len)
		return -EINVAL;
	if (w->has_parent && (disk_byte % LAYOUT_BLOCK || len % LAYOUT_BLOCK))
		return -EINVAL;
	if (!grow((void **)&w->data, &w->cap_data, w->n_data + 1, sizeof(*w->data)))
		return -ENOMEM;
	ret = chunk_intern(w, digest, &idx);
	if (ret)
		return ret;
	w->data[w->n_data++] = (struct layout_data_run){
		.lba = disk_byte / LAYOUT_BLOCK,
		.len = len,
		.chunk = idx,
		.chunk_off = chunk_off,
		.blk_off = (uint16_t)(disk_byte % LAYOUT_BLOCK),
	};
	w->data_end = disk_byte + len;
	if (chunk_off + len > w->chunk_end)
		w->chunk_end = chunk_off + len;
	return 0;
}

int layout_add_zero(struct layout_writer *w, uint64_t lba, uint64_t count)
{
	const uint64_t most = UINT32_MAX / LAYOUT_BLOCK; /* blocks one run holds */
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (!w->has_parent || !count || lba >= w->block_count || count > w->block_count - lba ||
	    lba * LAYOUT_BLOCK < w->data_end)
		return -EINVAL;
	while (count) {
		uint64_t n = count < most ? count : most;

		if (!grow((void **)&w->data, &w->cap_data, w->n_data + 1, sizeof(*w->data)))
			return -ENOMEM;
		w->data[w->n_data++] = (struct layout_data_run){
			.lba = lba, .len = (uint32_t)(n * LAYOUT_BLOCK), .flags = LAYOUT_RUN_ZERO,
		};
		lba += n;
		count -= n;
	}
	w->data_end = lba * LAYOUT_BLOCK;
	return 0;
}

/*
 * No data run may share a block with a metadata block. Both lists are sorted and
 * disjoint, so one merge walk decides it. Returns the offending data run or n_data.
 */
static size_t meta_data_overlap(const struct layout_meta_run *meta, size_t n_meta,
				const struct layout_data_run *data, size_t n_data)
{
	size_t i = 0;

	for (size_t k = 0; k < n_data; k++) {
		uint64_t pos = layout_data_run_pos(&data[k]);
		uint64_t first = pos / LAYOUT_BLOCK, last = (pos + data[k].len - 1) / LAYOUT_BLOCK;

		while (i < n_meta && meta[i].lba + meta[i].count <= first)
			i++;
		if (i < n_meta && meta[i].lba <= last)
			return k;
	}
	return n_data;
}

static int writer_commit(struct layout_writer *w, const uint8_t block[LAYOUT_BLOCK])
{
	char dir[PATH_MAX];
	int ret;

	ret = lseek(w->fd, 0, SEEK_SET) < 0 ? -errno : fs_write_full(w->fd, block, LAYOUT_BLOCK);
	if (!ret && fsync(w->fd) < 0)
		ret = -errno;
	if (close(w->fd) < 0 && !ret)
		ret = -errno;
	w->fd = -1;
	if (!ret)
		ret = fs_rename_output(w->tmp, w->path);
	if (ret)
		return ret;
	w->finished = true;
	fs_dirname(w->path, dir, sizeof(dir));
	return fs_fsync_dir(dir);
}

int layout_writer_finish(struct layout_writer *w, const uint8_t manifest_digest[SHA256_LEN],
			 const uint8_t fs_uuid[16], uint32_t chunk_size,
			 uint8_t digest_out[SHA256_LEN])
{
	struct layout_parent par = { .hint_len = 0 };
	uint8_t block[LAYOUT_BLOCK];
	struct layout_header h;
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (chunk_size > CHUNK_SIZE_MAX || w->chunk_end > chunk_size ||
	    meta_data_overlap(w->meta, w->n_meta, w->data, w->n_data) != w->n_data)
		return -EINVAL;
	ret = body_put(w, w->meta, w->n_meta * sizeof(*w->meta));
	if (!ret)
		ret = body_put(w, w->data, w->n_data * sizeof(*w->data));
	if (!ret)
		ret = body_put(w, w->chunks, w->n_chunks * sizeof(*w->chunks));
	if (!ret && w->has_parent)
		ret = body_put(w, w->hint, strlen(w->hint));
	if (!ret)
		ret = wflush(w);
	memset(&h, 0, sizeof(h));
	if (!ret)
		ret = sha256_final(w->body, h.body_sha256);
	if (ret) {
		w->err = ret;
		return ret;
	}
	memcpy(h.magic, LAYOUT_MAGIC, sizeof(h.magic));
	h.version = LAYOUT_VERSION;
	h.block_size = LAYOUT_BLOCK;
	h.block_count = w->block_count;
	h.meta_blocks = w->meta_blocks;
	h.meta_run_count = w->n_meta;
	h.data_run_count = w->n_data;
	h.chunk_count = w->n_chunks;
	h.chunk_size = chunk_size;
	if (manifest_digest)
		memcpy(h.manifest_digest, manifest_digest, SHA256_LEN);
	if (fs_uuid)
		memcpy(h.fs_uuid, fs_uuid, sizeof(h.fs_uuid));
	if (w->has_parent) {
		h.version = LAYOUT_VERSION_PARENT;
		h.flags = LAYOUT_F_PARENT;
		memcpy(par.digest, w->parent, SHA256_LEN);
		par.hint_len = (uint32_t)strlen(w->hint);
	}
	h.header_crc = header_crc(&h, &par);
	memset(block, 0, sizeof(block));
	memcpy(block, &h, sizeof(h));
	if (w->has_parent)
		memcpy(block + sizeof(h), &par, sizeof(par));
	ret = writer_commit(w, block);
	if (ret) {
		w->err = ret;
		return ret;
	}
	if (digest_out)
		return sha256_buf(block, LAYOUT_BLOCK, digest_out);
	return 0;
}

void layout_writer_free(struct layout_writer *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	if (!w->finished)
		unlink(w->tmp);
	sha256_free(w->body);
	free(w->wbuf);
	free(w->meta);
	free(w->data);
	free(w->chunks);
	free(w->slots);
	free(w);
}

/* ------------------------------------------------------------------ reading */

static int bad(const char **why, const char *msg)
{
	if (why)
		*why = msg;
	return -EBADMSG;
}

static int read_header(struct layout *l, uint64_t size, const char **why)
{
	const struct layout_header *h = &l->hdr;
	struct layout_parent *par = &l->layers[0].parent;
	uint8_t block[LAYOUT_BLOCK];
	uint64_t need;
	int ret;

	if (size < sizeof(h->magic))
		return bad(why, "file too short (not a lazyblk layout)");
	ret = fs_pread_full(l->fd, block, size < LAYOUT_BLOCK ? size : LAYOUT_BLOCK, 0);
	if (ret)
		return ret;
	if (memcmp(block, LAYOUT_MAGIC, sizeof(h->magic)))
		return bad(why, "bad magic (not a lazyblk layout)");
	if (size < LAYOUT_BLOCK)
		return bad(why, "truncated (shorter than the header)");
	memcpy(&l->hdr, block, sizeof(l->hdr));
	memcpy(par, block + sizeof(l->hdr), sizeof(*par));
	/* version 2 is a layer over a parent: the flag says so */
	if (h->version != LAYOUT_VERSION &&
	    (h->version != LAYOUT_VERSION_PARENT || h->flags != LAYOUT_F_PARENT))
		return bad(why, "unsupported layout version");
	if (h->block_size != LAYOUT_BLOCK)
		return bad(why, "unsupported block size");
	if (h->header_crc != header_crc(h, par))
		return bad(why, "header checksum mismatch (file corrupt)");
	if (!all_zero(block + header_len(h), LAYOUT_BLOCK - header_len(h)))
		return bad(why, "header padding not zero (file corrupt)");
	if (h->version == LAYOUT_VERSION && h->flags)
		return bad(why, "unsupported flags");
	if (h->version == LAYOUT_VERSION)
		memset(par, 0, sizeof(*par));
	else if (!par->hint_len || par->hint_len > LAYOUT_HINT_MAX || par->reserved)
		return bad(why, "bad parent hint length");
	if (h->block_count == 0 || h->block_count > LAYOUT_MAX_BLOCKS)
		return bad(why, "bad block count");
	if (h->chunk_size > CHUNK_SIZE_MAX)
		return bad(why, "bad chunk size");
	/* Every count is bounded by the file size, so the sum below does not overflow. */
	if (h->meta_blocks > size / LAYOUT_BLOCK ||
	    h->meta_run_count > size / sizeof(struct layout_meta_run) ||
	    h->data_run_count > size / sizeof(struct layout_data_run) ||
	    h->chunk_count > size / SHA256_LEN)
		return bad(why, "truncated (counts exceed the file size)");
	need = LAYOUT_BLOCK + h->meta_blocks * LAYOUT_BLOCK +
	       h->meta_run_count * sizeof(struct layout_meta_run) +
	       h->data_run_count * sizeof(struct layout_data_run) + h->chunk_count * SHA256_LEN +
	       par->hint_len;
	if (need != size)
		return bad(why, need > size ? "truncated" : "trailing garbage after the layout");
	l->meta_offset = LAYOUT_BLOCK;
	return sha256_buf(block, LAYOUT_BLOCK, l->digest);
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

static int read_tail(struct layout *l, const char **why)
{
	const struct layout_header *h = &l->hdr;
	struct layout_layer *y = &l->layers[0];
	uint64_t off = l->meta_offset + h->meta_blocks * LAYOUT_BLOCK;
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
		return bad(why, "bad parent hint (a NUL byte in it)");
	return 0;
}

static int check_body(struct layout *l, const char **why)
{
	const struct layout_header *h = &l->hdr;
	struct sha256_ctx *c = sha256_new();
	uint64_t left = h->meta_blocks * LAYOUT_BLOCK, off = l->meta_offset, blk = 0;
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
		for (size_t i = 0; !ret && i < n; i += LAYOUT_BLOCK)
			ret = sha256_buf(buf + i, LAYOUT_BLOCK, l->meta_sha[blk++]);
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
		ret = bad(why, "checksum mismatch (file corrupt)");
	sha256_free(c);
	free(buf);
	return ret;
}

/* A data run's flags and alignment: version 2 runs are whole blocks and may be zero runs. */
static bool data_run_ok(const struct layout_header *h, const struct layout_data_run *d)
{
	if (h->version == LAYOUT_VERSION)
		return !d->flags;
	if (d->blk_off || d->len % LAYOUT_BLOCK || (d->flags & ~LAYOUT_RUN_ZERO))
		return false;
	return !(d->flags & LAYOUT_RUN_ZERO) || (!d->chunk && !d->chunk_off);
}

static int check_runs(const struct layout *l, const char **why)
{
	const struct layout_header *h = &l->hdr;
	uint64_t disk = h->block_count * LAYOUT_BLOCK, end = 0;

	for (uint64_t i = 0; i < h->meta_run_count; i++) {
		const struct layout_meta_run *m = &l->meta_runs[i];

		if (m->count == 0 || m->reserved)
			return bad(why, "bad metadata run");
		if (m->lba >= h->block_count || m->count > h->block_count - m->lba)
			return bad(why, "metadata run beyond the end of the disk");
		if (m->first >= h->meta_blocks || m->count > h->meta_blocks - m->first)
			return bad(why, "metadata run beyond the metadata area");
		if (i && m->lba < end)
			return bad(why, "metadata runs not sorted or overlapping");
		end = m->lba + m->count;
	}
	end = 0;
	for (uint64_t i = 0; i < h->data_run_count; i++) {
		const struct layout_data_run *d = &l->data_runs[i];
		uint64_t pos = layout_data_run_pos(d);

		if (d->len == 0 || d->blk_off >= LAYOUT_BLOCK || !data_run_ok(h, d))
			return bad(why, "bad data run");
		if (d->lba >= h->block_count || d->len > disk - pos)
			return bad(why, "data run beyond the end of the disk");
		if (!(d->flags & LAYOUT_RUN_ZERO) && d->chunk >= h->chunk_count)
			return bad(why, "data run names a chunk not in the chunk table");
		if (!(d->flags & LAYOUT_RUN_ZERO) &&
		    (uint64_t)d->chunk_off + d->len > h->chunk_size)
			return bad(why, "data run beyond the chunk size");
		if (pos < end)
			return bad(why, "data runs not sorted or overlapping");
		end = pos + d->len;
	}
	if (meta_data_overlap(l->meta_runs, h->meta_run_count, l->data_runs,
			      h->data_run_count) != h->data_run_count)
		return bad(why, "data run overlaps a metadata block");
	return 0;
}

int layout_load_file(const char *path, int oflags, struct layout **out, const char **why)
{
	struct layout *l;
	struct stat st;
	int ret;

	if (why)
		*why = NULL;
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
		if (ret == -EINVAL && why)
			*why = "not a regular file";
		goto fail;
	}
	l->fd = l->layers[0].fd = ret;
	ret = read_header(l, (uint64_t)st.st_size, why);
	if (!ret)
		ret = read_tail(l, why);
	if (!ret)
		ret = check_body(l, why);
	if (!ret)
		ret = check_runs(l, why);
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
