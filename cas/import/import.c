/* SPDX-License-Identifier: MIT */
/*
 * What every importer uses (import.h): failures and warnings, progress, chunking of file
 * data (whole files, streams, packing small files), xattr order. import_run.c drives.
 */
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/dl_archive.h"
#include "../../common/fsutil.h"
#include "../chunk.h"

#define IMPORT_WARN_MAX 4096 /* a warning's length, as the logger's line */

void import_warn(struct import_ctx *ic, const char *fmt, ...)
{
	char msg[IMPORT_WARN_MAX];
	va_list ap;

	if (!ic->o || !ic->o->notes.fn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	note_emit(&ic->o->notes, NOTE_WARN, "%s", msg);
}

const char *import_brief(const char *path, char buf[IMPORT_BRIEF_MAX])
{
	size_t len = strlen(path), half = (IMPORT_BRIEF_MAX - 4) / 2;

	if (len < IMPORT_BRIEF_MAX)
		return path;
	memcpy(buf, path, half);
	memcpy(buf + half, "...", 3);
	memcpy(buf + half + 3, path + len - half, half);
	buf[2 * half + 3] = '\0';
	return buf;
}

static void progress_report(struct import_ctx *ic, bool finishing)
{
	struct import_progress p = { .files = ic->files, .bytes = ic->bytes,
				     .finishing = finishing };
	struct chunker_stats st;

	if (!ic->o || !ic->o->progress)
		return;
	if (ic->chunker) {
		chunker_get_stats(ic->chunker, &st);
		p.chunks = st.chunks;
		p.chunks_done = st.new_chunks + st.dup_chunks;
		p.stored_bytes = st.new_bytes;
	}
	if (ic->src_archive && ic->src_size) {
		int64_t pos = sym_archive_filter_bytes(ic->src_archive, -1);

		p.src_size = ic->src_size;
		p.src_done = pos < 0 ? 0 : (uint64_t)pos > ic->src_size ? ic->src_size
									: (uint64_t)pos;
	}
	ic->o->progress(ic->o->progress_arg, &p);
}

void import_progress(struct import_ctx *ic)
{
	progress_report(ic, false);
}

void import_progress_finishing(void *arg)
{
	progress_report(arg, true);
}

bool import_cancelled(const struct import_ctx *ic)
{
	return ic->o && ic->o->cancel && __atomic_load_n(ic->o->cancel, __ATOMIC_RELAXED);
}

/* A new manifest piece for ino: len bytes at off of the chunk in b. */
static int add_piece(struct import_ctx *ic, struct tree_inode *ino, struct chunk_buf *b,
		     size_t off, size_t len)
{
	struct mf_chunk *slot;
	uint64_t idx;

	slot = tree_chunk_new(ic->tree, &idx);
	if (!slot)
		return -ENOMEM;
	slot->len = (uint32_t)len;
	slot->off = (uint32_t)off;
	b->slots[b->n_slots++] = slot;
	if (!ino->chunk_count)
		ino->chunk_first = idx;
	ino->chunk_count++;
	ic->bytes += len;
	return 0;
}

/* A chunk of its own for len bytes of ino (already in b->data). */
/*
 * Hand a full chunk to the chunker. A failure here is the store's (a worker could not write
 * a chunk: no space, a read-only or failing disk), so the reason names the store, not the
 * source file being read when it surfaced (why_first keeps that first reason).
 */
static int submit(struct import_ctx *ic, struct chunk_buf *b)
{
	int ret;

	if (import_cancelled(ic)) {
		chunker_buf_put(ic->chunker, b);
		return why_first(ic->why, ic->why_len, -ECANCELED, "interrupted");
	}
	ret = chunker_submit(ic->chunker, b);

	if (ret && ret != -ENOMEM && ic->o)
		why_first(ic->why, ic->why_len, ret, "store %s: %s", ic->o->store_dir,
			  strerror(-ret));
	import_progress(ic); /* a large file is read a chunk at a time: say so as it goes */
	return ret;
}

static int submit_own(struct import_ctx *ic, struct tree_inode *ino, struct chunk_buf *b,
		      size_t len)
{
	int ret;

	b->fill = len;
	ret = add_piece(ic, ino, b, 0, len);
	if (ret) {
		chunker_buf_put(ic->chunker, b);
		return ret;
	}
	return submit(ic, b);
}

int import_pack_flush(struct import_ctx *ic)
{
	struct chunk_buf *b = ic->pack;

	ic->pack = NULL;
	if (!b)
		return 0;
	if (!b->fill) {
		chunker_buf_put(ic->chunker, b);
		return 0;
	}
	return submit(ic, b);
}

/* Reserve len bytes for ino in the packed chunk; returns where they go, or NULL. */
static uint8_t *pack_reserve(struct import_ctx *ic, struct tree_inode *ino, size_t len, int *err)
{
	uint32_t csize = chunker_chunk_size(ic->chunker);
	struct chunk_buf *b = ic->pack;
	size_t off;

	if (b && (csize - b->fill < len || b->n_slots == CHUNK_PACK_MAX_PIECES)) {
		*err = import_pack_flush(ic);
		if (*err)
			return NULL;
		b = NULL;
	}
	if (!b)
		b = ic->pack = chunker_buf_get(ic->chunker);
	off = b->fill;
	*err = add_piece(ic, ino, b, off, len);
	if (*err)
		return NULL;
	b->fill += len;
	return b->data + off;
}

static bool packable(struct import_ctx *ic, uint64_t size)
{
	return size > 0 && size <= ic->pack_max;
}

int import_file_data(struct import_ctx *ic, struct tree_inode *ino, int fd, uint64_t size,
		     bool maybe_sparse)
{
	uint32_t csize = chunker_chunk_size(ic->chunker);
	uint64_t off = 0;
	int ret = 0;

	ino->size = size;
	if (!maybe_sparse && packable(ic, size)) {
		uint8_t *dst = pack_reserve(ic, ino, (size_t)size, &ret);

		return dst ? fs_pread_full(fd, dst, (size_t)size, 0) : ret;
	}
	while (off < size) {
		off_t data = (off_t)off, hole = (off_t)size;

		if (maybe_sparse) {
			data = lseek(fd, (off_t)off, SEEK_DATA);
			if (data < 0)
				data = errno == ENXIO ? (off_t)size : (off_t)off;
			if ((uint64_t)data > size)
				data = (off_t)size;
		}
		if ((uint64_t)data > off) {
			ret = tree_hole_add(ic->tree, ino, off, (uint64_t)data - off);
			if (ret)
				return ret;
			off = (uint64_t)data;
			if (off >= size)
				break;
		}
		if (maybe_sparse) {
			hole = lseek(fd, (off_t)off, SEEK_HOLE);
			if (hole < 0 || (uint64_t)hole > size || (uint64_t)hole <= off)
				hole = (off_t)size;
		}
		while (off < (uint64_t)hole) {
			size_t len = (uint64_t)hole - off < csize ? (size_t)((uint64_t)hole - off) : csize;
			struct chunk_buf *b = chunker_buf_get(ic->chunker);


			ret = fs_pread_full(fd, b->data, len, (off_t)off);
			if (ret) {
				chunker_buf_put(ic->chunker, b);
				return ret;
			}
			ret = submit_own(ic, ino, b, len);
			if (ret)
				return ret;
			off += len;
		}
	}
	return 0;
}

/* ---- streaming (tar): data arrives in arbitrary pieces, holes by offset jumps ---- */

int import_stream_begin(struct import_ctx *ic, struct import_stream *st, struct tree_inode *ino,
			uint64_t size, bool sparse)
{
	int ret = 0;

	memset(st, 0, sizeof(*st));
	st->ic = ic;
	st->ino = ino;
	if (!sparse && packable(ic, size)) {
		st->packed = pack_reserve(ic, ino, (size_t)size, &ret);
		st->size = size;
	}
	return ret;
}

static int stream_flush(struct import_stream *st)
{
	struct chunk_buf *b = st->buf;

	st->buf = NULL;
	if (!b)
		return 0;
	if (!b->fill) {
		chunker_buf_put(st->ic->chunker, b);
		return 0;
	}
	return submit_own(st->ic, st->ino, b, b->fill);
}

int import_stream_write(struct import_stream *st, const void *data, size_t len)
{
	uint32_t csize = chunker_chunk_size(st->ic->chunker);
	const uint8_t *p = data;

	if (st->packed) {
		if (len > st->size - st->pos)
			return -EFBIG; /* more data than the header declared */
		memcpy(st->packed + st->pos, data, len);
		st->pos += len;
		return 0;
	}
	while (len) {
		size_t n;
		int ret;

		if (!st->buf)
			st->buf = chunker_buf_get(st->ic->chunker);
		n = csize - st->buf->fill < len ? csize - st->buf->fill : len;
		memcpy(st->buf->data + st->buf->fill, p, n);
		st->buf->fill += n;
		st->pos += n;
		p += n;
		len -= n;
		if (st->buf->fill == csize) {
			ret = stream_flush(st);
			if (ret)
				return ret;
		}
	}
	return 0;
}

int import_stream_hole(struct import_stream *st, uint64_t len)
{
	int ret;

	if (!len)
		return 0;
	if (st->packed) { /* declared dense but has a gap: keep the zeros */
		if (len > st->size - st->pos)
			return -EFBIG;
		memset(st->packed + st->pos, 0, (size_t)len);
		st->pos += len;
		return 0;
	}
	ret = stream_flush(st); /* chunks never span a hole */
	if (ret)
		return ret;
	ret = tree_hole_add(st->ic->tree, st->ino, st->pos, len);
	st->pos += len;
	return ret;
}

int import_stream_end(struct import_stream *st, uint64_t size)
{
	int ret;

	if (st->packed) {
		if (st->pos != st->size)
			return -EIO; /* the archive ended inside the file */
		st->ino->size = st->size;
		return 0;
	}
	ret = stream_flush(st);
	if (!ret && size > st->pos)
		ret = import_stream_hole(st, size - st->pos);
	st->ino->size = st->pos;
	return ret;
}

void import_stream_abort(struct import_stream *st)
{
	if (st->buf)
		chunker_buf_put(st->ic->chunker, st->buf);
	st->buf = NULL;
}

static int xattr_cmp(const void *a, const void *b)
{
	const struct mf_xattr_in *x = a, *y = b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, n);

	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

void import_sort_xattrs(struct mf_xattr_in *x, uint32_t n)
{
	if (n > 1)
		qsort(x, n, sizeof(*x), xattr_cmp);
}
