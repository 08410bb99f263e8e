/* SPDX-License-Identifier: MIT */
/* import_run(): source dispatch, chunking of file data, and writing the manifest. */
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/size.h"
#include "chunk.h"

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void import_progress(struct import_ctx *ic)
{
	static __thread double last; /* rate limit per thread; progress is cosmetic */
	char hb[32];
	double t;

	if (!log_progress_enabled())
		return;
	t = now_sec();
	if (t - last < 0.1)
		return;
	last = t;
	log_progress("importing %s: %llu files, %s", ic->src_label, (unsigned long long)ic->files,
		     size_human(ic->bytes, hb, sizeof(hb)));
}

static int submit(struct import_ctx *ic, struct tree_inode *ino, uint8_t *buf, size_t len)
{
	struct mf_chunk *slot;
	uint64_t idx;

	slot = tree_chunk_new(ic->tree, &idx);
	if (!slot) {
		chunker_buf_put(ic->chunker, buf);
		return -ENOMEM;
	}
	if (!ino->chunk_count)
		ino->chunk_first = idx;
	ino->chunk_count++;
	ic->bytes += len;
	return chunker_submit(ic->chunker, buf, len, slot);
}

int import_file_data(struct import_ctx *ic, struct tree_inode *ino, int fd, uint64_t size)
{
	uint32_t csize = chunker_chunk_size(ic->chunker);
	uint64_t off = 0;
	int ret = 0;

	ino->size = size;
	while (off < size) {
		off_t data = lseek(fd, (off_t)off, SEEK_DATA), hole;

		if (data < 0)
			data = errno == ENXIO ? (off_t)size : (off_t)off;
		if ((uint64_t)data > size)
			data = (off_t)size;
		if ((uint64_t)data > off) {
			ret = tree_hole_add(ic->tree, ino, off, (uint64_t)data - off);
			if (ret)
				return ret;
			off = (uint64_t)data;
			if (off >= size)
				break;
		}
		hole = lseek(fd, (off_t)off, SEEK_HOLE);
		if (hole < 0 || (uint64_t)hole > size)
			hole = (off_t)size;
		if ((uint64_t)hole <= off)
			hole = (off_t)size;
		while (off < (uint64_t)hole) {
			size_t len = (uint64_t)hole - off < csize ? (size_t)((uint64_t)hole - off) : csize;
			uint8_t *buf = chunker_buf_get(ic->chunker);

			ret = fs_pread_full(fd, buf, len, (off_t)off);
			if (ret) {
				chunker_buf_put(ic->chunker, buf);
				return ret;
			}
			ret = submit(ic, ino, buf, len);
			if (ret)
				return ret;
			off += len;
		}
	}
	return 0;
}

/* ---- streaming (tar): data arrives in arbitrary pieces, holes by offset jumps ---- */

int import_stream_begin(struct import_ctx *ic, struct import_stream *st, struct tree_inode *ino)
{
	memset(st, 0, sizeof(*st));
	st->ic = ic;
	st->ino = ino;
	return 0;
}

static int stream_flush(struct import_stream *st)
{
	int ret;

	if (!st->buf)
		return 0;
	if (!st->fill) {
		chunker_buf_put(st->ic->chunker, st->buf);
		st->buf = NULL;
		return 0;
	}
	ret = submit(st->ic, st->ino, st->buf, st->fill);
	st->buf = NULL;
	st->fill = 0;
	return ret;
}

int import_stream_write(struct import_stream *st, const void *data, size_t len)
{
	uint32_t csize = chunker_chunk_size(st->ic->chunker);
	const uint8_t *p = data;

	while (len) {
		size_t n;
		int ret;

		if (!st->buf) {
			st->buf = chunker_buf_get(st->ic->chunker);
			st->fill = 0;
		}
		n = csize - st->fill < len ? csize - st->fill : len;
		memcpy(st->buf + st->fill, p, n);
		st->fill += n;
		st->pos += n;
		p += n;
		len -= n;
		if (st->fill == csize) {
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
	ret = stream_flush(st); /* chunks never span a hole */
	if (ret)
		return ret;
	ret = tree_hole_add(st->ic->tree, st->ino, st->pos, len);
	st->pos += len;
	return ret;
}

int import_stream_end(struct import_stream *st, uint64_t size)
{
	int ret = stream_flush(st);

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

/* ---------------------------------------------------------------- dispatch */

static int run_source(struct import_ctx *ic, const char *src)
{
	struct stat st;

	if (!strncmp(src, "oci:", 4))
		return import_oci(ic, src + 4);
	if (!strncmp(src, "docker-archive:", 15))
		return import_docker_archive(ic, src + 15);
	if (stat(src, &st) < 0) {
		log_error("%s: %s", src, strerror(errno));
		return -errno;
	}
	if (S_ISDIR(st.st_mode))
		return import_dir(ic, src);
	if (S_ISREG(st.st_mode))
		return import_tar_file(ic, src);
	log_error("%s: not a directory, a tar file, oci:DIR or docker-archive:FILE", src);
	return -EINVAL;
}

int import_run(const struct import_opts *o, struct import_result *res)
{
	struct chunker_opts copts = { o->threads, o->chunk_size, o->level };
	struct import_ctx ic = { 0 };
	struct manifest_writer *w = NULL;
	struct store *store = NULL;
	const char *why = NULL;
	double t0 = now_sec();
	int ret;

	memset(res, 0, sizeof(*res));
	ret = store_open(o->store_dir, true, &store);
	if (ret) {
		log_error("store %s: %s", o->store_dir, strerror(-ret));
		return ret;
	}
	ic.src_label = o->src;
	ic.tree = tree_new();
	if (!ic.tree) {
		ret = -ENOMEM;
		goto out;
	}
	ret = chunker_new(store, &copts, &ic.chunker);
	if (ret) {
		log_error("cannot start chunker: %s", strerror(-ret));
		goto out;
	}
	ret = run_source(&ic, o->src);
	if (ret) {
		chunker_finish(ic.chunker); /* let staged chunks land; they are valid */
		goto out;
	}
	ret = chunker_finish(ic.chunker);
	log_progress_done();
	if (ret) {
		log_error("store %s: %s", o->store_dir, strerror(-ret));
		goto out;
	}
	chunker_get_stats(ic.chunker, &res->chunks);
	w = manifest_writer_new(chunker_chunk_size(ic.chunker));
	if (!w) {
		ret = -ENOMEM;
		goto out;
	}
	ret = tree_write(ic.tree, w);
	if (!ret && ic.config_json)
		ret = manifest_writer_set_config(w, ic.config_json, ic.config_len);
	if (ret) {
		log_error("building manifest: %s", strerror(-ret));
		goto out;
	}
	res->entries = tree_node_count(ic.tree);
	ret = manifest_writer_write(w, o->output, res->digest, &why);
	if (ret) {
		log_error("%s: %s", o->output, why ? why : strerror(-ret));
		goto out;
	}
	res->seconds = now_sec() - t0;
out:
	log_progress_done();
	if (ret == -ENOMEM)
		log_error("out of memory");
	manifest_writer_free(w);
	chunker_free(ic.chunker);
	tree_free(ic.tree);
	free(ic.config_json);
	store_close(store);
	return ret;
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
