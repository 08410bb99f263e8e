/* SPDX-License-Identifier: MIT */
/* Writing a layout (format in docs/formats.md): lazyblk mkfs, commit and flatten. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/chunk.h"
#include "../common/fsutil.h"
#include "../common/grow.h"
#include "../common/hash.h"
#include "layout_int.h"

#define WBUF_SIZE (1u << 20)       /* output buffer */

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

	bool has_parent;                /* a layer: whole-block runs, zero runs allowed */
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
	if (lseek(w->fd, DISK_BLOCK, SEEK_SET) < 0) {
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
	ret = body_put(w, blocks, (size_t)count * DISK_BLOCK);
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
	uint64_t disk = w->block_count * DISK_BLOCK;
	uint32_t idx;
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (len == 0 || disk_byte > disk || len > disk - disk_byte || disk_byte < w->data_end ||
	    chunk_off > UINT32_MAX - len)
		return -EINVAL;
	if (w->has_parent && (disk_byte % DISK_BLOCK || len % DISK_BLOCK))
		return -EINVAL;
	if (!grow((void **)&w->data, &w->cap_data, w->n_data + 1, sizeof(*w->data)))
		return -ENOMEM;
	ret = chunk_intern(w, digest, &idx);
	if (ret)
		return ret;
	w->data[w->n_data++] = (struct layout_data_run){
		.lba = disk_byte / DISK_BLOCK,
		.len = len,
		.chunk = idx,
		.chunk_off = chunk_off,
		.blk_off = (uint16_t)(disk_byte % DISK_BLOCK),
	};
	w->data_end = disk_byte + len;
	if (chunk_off + len > w->chunk_end)
		w->chunk_end = chunk_off + len;
	return 0;
}

int layout_add_zero(struct layout_writer *w, uint64_t lba, uint64_t count)
{
	const uint64_t most = UINT32_MAX / DISK_BLOCK; /* blocks one run holds */
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (!w->has_parent || !count || lba >= w->block_count || count > w->block_count - lba ||
	    lba * DISK_BLOCK < w->data_end)
		return -EINVAL;
	while (count) {
		uint64_t n = count < most ? count : most;

		if (!grow((void **)&w->data, &w->cap_data, w->n_data + 1, sizeof(*w->data)))
			return -ENOMEM;
		w->data[w->n_data++] = (struct layout_data_run){
			.lba = lba, .len = (uint32_t)(n * DISK_BLOCK), .flags = LAYOUT_RUN_ZERO,
		};
		lba += n;
		count -= n;
	}
	w->data_end = lba * DISK_BLOCK;
	return 0;
}

static int writer_commit(struct layout_writer *w, const uint8_t block[DISK_BLOCK])
{
	char dir[PATH_MAX];
	int ret;

	ret = lseek(w->fd, 0, SEEK_SET) < 0 ? -errno : fs_write_full(w->fd, block, DISK_BLOCK);
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
	uint8_t block[DISK_BLOCK];
	struct layout_header h;
	int ret = writer_state(w);

	if (ret)
		return ret;
	if (chunk_size > CHUNK_SIZE_MAX || w->chunk_end > chunk_size ||
	    layout_meta_data_overlap(w->meta, w->n_meta, w->data, w->n_data) != w->n_data)
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
	h.block_size = DISK_BLOCK;
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
		h.flags = LAYOUT_F_PARENT;
		memcpy(par.digest, w->parent, SHA256_LEN);
		par.hint_len = (uint32_t)strlen(w->hint);
	}
	h.header_crc = layout_header_crc(&h, &par);
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
		return sha256_buf(block, DISK_BLOCK, digest_out);
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
