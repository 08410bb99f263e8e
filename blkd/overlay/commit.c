/* SPDX-License-Identifier: MIT */
/* lazyblk commit: an overlay's blocks as chunks and a layout over its base (commit.h). */
#include "commit.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../cas/chunk.h"
#include "../../cas/chunker.h"
#include "../../cas/store.h"
#include "../../common/fsutil.h"
#include "../../common/why.h"
#include "../../layout/layout.h"
#include "delta.h"
#include "overlay.h"

#define READ_PIECE 256u   /* blocks read from the overlay at a time */
#define PIECE_BLOCK 4096u /* pieces per allocation (they never move: the chunker fills slots) */

/*
 * A run of the new layout, in disk order: zeros, or dirty blocks that are bytes
 * [slot.off, + slot.len) of a chunk (the chunker writes slot.digest once it has hashed it).
 */
struct piece {
	uint64_t lba, count;
	bool zero;
	struct mf_chunk slot;
};

struct piece_block {
	struct piece_block *next;
	size_t n;
	struct piece p[PIECE_BLOCK];
};

struct commit {
	const struct blkd_commit_opts *o;
	struct blkd_commit_result *res;
	struct overlay *ov;
	struct store *store;
	struct chunker *ck;
	struct layout_writer *w;
	uint32_t cs;                 /* chunk size, whole blocks */
	struct chunk_buf *buf;       /* the chunk being filled, or NULL */
	struct piece_block *first, *last;
	struct piece *open;          /* the last piece, if it may grow */
	uint64_t done, total;
};

static bool zero_block(const uint8_t *p)
{
	return p[0] == 0 && !memcmp(p, p + 1, DISK_BLOCK - 1);
}

static struct piece *piece_new(struct commit *c)
{
	if (!c->last || c->last->n == PIECE_BLOCK) {
		struct piece_block *b = calloc(1, sizeof(*b));

		if (!b)
			return NULL;
		if (c->last)
			c->last->next = b;
		else
			c->first = b;
		c->last = b;
	}
	return &c->last->p[c->last->n++];
}

static int zero_add(struct commit *c, uint64_t lba, uint64_t n)
{
	struct piece *p = c->open;

	if (!p || !p->zero || p->lba + p->count != lba) {
		p = piece_new(c);
		if (!p)
			return -ENOMEM;
		*p = (struct piece){ .lba = lba, .zero = true };
	}
	p->count += n;
	c->open = p;
	return 0;
}

/* Hand the chunk being filled to the chunker. */
static int chunk_submit(struct commit *c)
{
	struct chunk_buf *b = c->buf;

	c->buf = NULL;
	if (c->open && !c->open->zero)
		c->open = NULL; /* the next chunk's bytes start a piece of their own */
	if (!b)
		return 0;
	if (!b->fill) {
		chunker_buf_put(c->ck, b);
		return 0;
	}
	return chunker_submit(c->ck, b);
}

/* Dirty block lba (bytes p) into the chunk being filled. */
static int data_add(struct commit *c, uint64_t lba, const uint8_t *data)
{
	struct piece *p = c->open;

	if (!c->buf)
		c->buf = chunker_buf_get(c->ck);
	if (!p || p->zero || p->lba + p->count != lba) {
		if (c->buf->n_slots == CHUNK_PACK_MAX_PIECES) {
			int ret = chunk_submit(c);

			if (ret)
				return ret;
			c->buf = chunker_buf_get(c->ck);
		}
		p = piece_new(c);
		if (!p)
			return -ENOMEM;
		*p = (struct piece){ .lba = lba, .slot.off = (uint32_t)c->buf->fill };
		c->buf->slots[c->buf->n_slots++] = &p->slot;
	}
	memcpy(c->buf->data + c->buf->fill, data, DISK_BLOCK);
	c->buf->fill += DISK_BLOCK;
	p->count++;
	p->slot.len += DISK_BLOCK;
	c->open = p;
	return c->buf->fill == c->cs ? chunk_submit(c) : 0;
}

static void progress(struct commit *c, uint64_t n)
{
	c->done += n;
	if (c->o->progress)
		c->o->progress(c->o->progress_arg, c->done, c->total);
}

/* The dirty blocks [b, b + n) into chunks (blocks of zeros into zero runs). */
static int commit_dirty(struct commit *c, uint64_t b, uint64_t n)
{
	uint8_t *buf = malloc((size_t)READ_PIECE * DISK_BLOCK);
	int ret = buf ? 0 : -ENOMEM;

	while (!ret && n) {
		uint32_t k = n < READ_PIECE ? (uint32_t)n : READ_PIECE;

		if (c->o->cancel && __atomic_load_n(c->o->cancel, __ATOMIC_RELAXED)) {
			ret = -ECANCELED;
			break;
		}
		ret = overlay_read(c->ov, b, k, buf);
		for (uint32_t i = 0; !ret && i < k; i++) {
			const uint8_t *p = buf + (size_t)i * DISK_BLOCK;

			ret = zero_block(p) ? zero_add(c, b + i, 1) : data_add(c, b + i, p);
		}
		c->res->blocks += k;
		progress(c, k);
		b += k;
		n -= k;
	}
	free(buf);
	return ret;
}

/* The pieces, their digests known, as the runs of the new layout. */
static int commit_runs(struct commit *c)
{
	int ret = 0;

	for (struct piece_block *pb = c->first; pb && !ret; pb = pb->next) {
		for (size_t i = 0; i < pb->n && !ret; i++) {
			const struct piece *p = &pb->p[i];

			if (p->zero)
				ret = layout_add_zero(c->w, p->lba, p->count);
			else
				ret = layout_add_data(c->w, p->lba * DISK_BLOCK, p->slot.len,
						      p->slot.digest, p->slot.off);
		}
	}
	return ret;
}

static int commit_blocks(struct commit *c)
{
	uint64_t blocks = overlay_blocks(c->ov), b = 0, n;
	struct chunker_stats st;
	enum ov_state state;
	int ret = 0, r2;

	for (; !ret && b < blocks; b += n) {
		n = overlay_run(c->ov, b, &state);
		if (state == OV_DIRTY) {
			ret = commit_dirty(c, b, n);
		} else if (state == OV_ZERO) {
			ret = zero_add(c, b, n);
			c->res->zero_blocks += n;
			progress(c, n);
		}
	}
	if (!ret)
		ret = chunk_submit(c);
	else if (c->buf)
		chunker_buf_put(c->ck, c->buf);
	c->buf = NULL;
	r2 = chunker_finish(c->ck); /* waits for every chunk; stored ones are whole */
	chunker_get_stats(c->ck, &st);
	c->res->chunks = st.chunks;
	c->res->new_chunks = st.new_chunks;
	c->res->new_bytes = st.new_bytes;
	if (!ret)
		ret = r2;
	return ret ? ret : commit_runs(c);
}

/* Path of target relative to the directory dir (both made absolute), into out. */
static int rel_path(const char *target, const char *dir, char *out, size_t len)
{
	char t[PATH_MAX], d[PATH_MAX];
	size_t i = 0, common = 0, n = 0;

	if (!realpath(target, t) || !realpath(dir, d))
		return -errno;
	if (!strcmp(d, "/"))
		return snprintf(out, len, "%s", t + 1) >= (int)len ? -ENAMETOOLONG : 0;
	for (; t[i] && t[i] == d[i]; i++)
		if (t[i] == '/')
			common = i;
	if (!d[i] && t[i] == '/')
		common = i; /* dir is a prefix of target */
	out[0] = '\0';
	for (const char *p = d + common; *p; p++)
		if (*p == '/' && n + 4 < len) {
			memcpy(out + n, "../", 4);
			n += 3;
		}
	if (snprintf(out + n, len - n, "%s", t + common + (t[common] == '/')) >= (int)(len - n))
		return -ENAMETOOLONG;
	return 0;
}

/* The overlay (or the delta, applied to an overlay in tmpdir) for base l, read-only. */
static int source_open(struct commit *c, const struct layout *l, char *tmpdir, char *why,
		       size_t why_len)
{
	const struct blkd_commit_opts *o = c->o;
	uint64_t disk = l->hdr.block_count * DISK_BLOCK;
	char magic[8] = { 0 }, ovp[PATH_MAX], h1[SHA256_HEX_LEN + 1], h2[SHA256_HEX_LEN + 1];
	char w[WHY_MAX] = "";
	const char *path = o->src_path;
	int fd, ret;

	fd = fs_open_regular(AT_FDCWD, o->src_path, 0, NULL); /* a FIFO: never opened */
	if (fd < 0)
		return why_set(why, why_len, fd, "%s: %s", o->src_path, fs_open_why(fd));
	ret = fs_pread_full(fd, magic, sizeof(magic), 0);
	close(fd);
	if (!ret && !memcmp(magic, DELTA_MAGIC, sizeof(magic))) {
		snprintf(tmpdir, PATH_MAX, "%s.commit.XXXXXX", o->out_path);
		if (!mkdtemp(tmpdir)) {
			ret = -errno;
			tmpdir[0] = '\0';
			return why_set(why, why_len, ret, "%s: %s", o->out_path, strerror(-ret));
		}
		snprintf(ovp, sizeof(ovp), "%s/overlay", tmpdir);
		ret = overlay_apply_delta(o->src_path, ovp, l->digest, disk, w, sizeof(w));
		if (ret)
			return why_set(why, why_len, ret, "%s: %s", o->src_path,
				       w[0] ? w : strerror(-ret));
		path = ovp;
	}
	ret = overlay_open_existing(path, true, &c->ov, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", o->src_path, w[0] ? w : strerror(-ret));
	if (memcmp(overlay_layout_digest(c->ov), l->digest, SHA256_LEN)) {
		sha256_to_hex(overlay_layout_digest(c->ov), h1);
		sha256_to_hex(l->digest, h2);
		return why_set(why, why_len, -EBADMSG,
			       "%s belongs to layout sha256:%s, not %s (sha256:%s)", o->src_path,
			       h1, o->base_path, h2);
	}
	if (overlay_disk_bytes(c->ov) != disk)
		return why_set(why, why_len, -EBADMSG, "%s is for a disk of another size than %s",
			       o->src_path, o->base_path);
	return 0;
}

static void tmpdir_remove(const char *dir)
{
	char p[PATH_MAX];

	if (!dir[0])
		return;
	snprintf(p, sizeof(p), "%s/overlay", dir);
	overlay_remove(p);
	rmdir(dir);
}

/* Set up c for base l: the store, the chunker, the writer of path. */
static int commit_setup(struct commit *c, const struct layout *l, const char *path,
			char *why, size_t why_len)
{
	const struct blkd_commit_opts *o = c->o;
	char dir[PATH_MAX];
	struct overlay_stats st;
	int ret;

	c->cs = (l->hdr.chunk_size ? l->hdr.chunk_size : CHUNK_SIZE_DEFAULT) / DISK_BLOCK *
		DISK_BLOCK;
	if (!c->cs)
		c->cs = DISK_BLOCK;
	ret = store_open(o->store_dir, true, &c->store);
	if (ret) {
		if (!store_open_why(ret, o->store_dir, false, why, why_len))
			why_set(why, why_len, ret, "store %s: %s", o->store_dir, strerror(-ret));
		return ret;
	}
	ret = chunker_new(c->store, &(struct chunker_opts){ .chunk_size = c->cs,
							    .level = o->level }, &c->ck);
	if (ret)
		return why_set(why, why_len, ret, "%s", strerror(-ret));
	overlay_get_stats(c->ov, &st);
	c->total = st.dirty_blocks + st.zero_blocks;
	fs_dirname(o->out_path, dir, sizeof(dir));
	ret = rel_path(o->base_path, dir, c->res->hint, sizeof(c->res->hint));
	if (!ret)
		ret = layout_writer_new(path, l->hdr.block_count, &c->w);
	if (!ret)
		ret = layout_writer_set_parent(c->w, l->digest, c->res->hint);
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	return 0;
}

/* NEW.layout must not replace a file of the chain it is written over. */
static int out_check(const struct blkd_commit_opts *o, const struct layout *l, char *why,
		     size_t why_len)
{
	struct stat a, b;

	if (stat(o->out_path, &a) < 0)
		return 0;
	for (unsigned i = 0; i < l->n_layers; i++)
		if (!fstat(l->layers[i].fd, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return why_set(why, why_len, -EEXIST,
				       "-o %s would replace %s, a layout the commit is "
				       "written over", o->out_path, l->layers[i].path);
	return 0;
}

/* With flatten: the layer written at tmp, opened as a chain, written as one layout. */
static int commit_flatten(const struct blkd_commit_opts *o, const char *tmp,
			  uint8_t digest[SHA256_LEN], char *why, size_t why_len)
{
	char w[WHY_MAX] = "";
	struct layout *l;
	int ret;

	ret = layout_open(tmp, &l, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", tmp, w[0] ? w : strerror(-ret));
	ret = layout_flatten(l, o->out_path, digest);
	layout_close(l);
	if (ret)
		why_set(why, why_len, ret, "%s: %s", o->out_path, strerror(-ret));
	return ret;
}

int blkd_commit(const struct blkd_commit_opts *o, struct blkd_commit_result *res, char *why,
		size_t why_len)
{
	struct commit c = { .o = o, .res = res };
	char tmpdir[PATH_MAX] = "", layer[PATH_MAX];
	char w[WHY_MAX] = "";
	struct layout *l;
	int ret;

	memset(res, 0, sizeof(*res));
	if (why_len)
		why[0] = '\0';
	ret = layout_open(o->base_path, &l, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", o->base_path, w[0] ? w : strerror(-ret));
	if (snprintf(layer, sizeof(layer), "%s%s", o->out_path, o->flatten ? ".layer.tmp" : "") >=
	    (int)sizeof(layer))
		ret = why_set(why, why_len, -ENAMETOOLONG, "%s: %s", o->out_path,
			      strerror(ENAMETOOLONG));
	if (!ret)
		ret = out_check(o, l, why, why_len);
	if (!ret)
		ret = source_open(&c, l, tmpdir, why, why_len);
	if (!ret)
		ret = commit_setup(&c, l, layer, why, why_len);
	if (!ret) {
		ret = commit_blocks(&c);
		if (!ret)
			ret = layout_writer_finish(c.w, l->hdr.manifest_digest, l->hdr.fs_uuid,
						   l->hdr.chunk_size > c.cs ? l->hdr.chunk_size
									   : c.cs,
						   res->digest);
		if (ret == -ECANCELED)
			why_set(why, why_len, ret, "interrupted");
		else if (ret && !why[0])
			why_set(why, why_len, ret, "%s: %s", layer, strerror(-ret));
	}
	if (!ret && o->flatten) {
		ret = commit_flatten(o, layer, res->digest, why, why_len);
		unlink(layer);
		res->hint[0] = '\0';
	}
	layout_writer_free(c.w);
	overlay_close(c.ov);
	tmpdir_remove(tmpdir);
	chunker_free(c.ck);
	store_close(c.store);
	while (c.first) {
		struct piece_block *next = c.first->next;

		free(c.first);
		c.first = next;
	}
	layout_close(l);
	return ret;
}
