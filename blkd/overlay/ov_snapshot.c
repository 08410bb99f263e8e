/* SPDX-License-Identifier: MIT */
/*
 * Point-in-time deltas of a live overlay, with copy-before-write.
 *
 * begin: with every write and zero out of the way (io_lock exclusive), copy the state
 * bitmap; the blocks dirty at that moment are the ones whose data the delta holds, each
 * at a place fixed by how many dirty blocks precede it. Then the overlay serves on.
 *
 * end: walk those blocks in order and copy each one nobody copied yet into the delta.
 * A writer about to change such a block (write or zero) copies it into the delta first.
 * Per block, "taken" says someone copied it or is copying it, "busy" that the copy is
 * under way; the walk and the writers claim blocks under the mutex and copy outside it,
 * and wait only for busy blocks, never while holding a claim they have not finished,
 * so nobody waits on a waiter. Blocks that writers saved are read back from the delta
 * so that the walk hashes the whole file in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/uring.h"
#include "../../common/fsutil.h"
#include "delta.h"
#include "overlay_int.h"

#define SNAP_PIECE 256u /* blocks the walk copies at a time */
#define COW_PIECE 64u   /* blocks a writer copies at a time */

struct overlay_snapshot {
	struct overlay *ov;
	char path[PATH_MAX], tmp[PATH_MAX];
	int fd;                       /* the delta being written, at tmp */
	uint64_t blocks;
	uint64_t *cap;                /* the 2-bit states at the capture */
	uint64_t *dirty0;             /* 1 bit per block: dirty at the capture */
	uint64_t *rank;               /* per dirty0 word: dirty blocks before it */
	uint64_t *taken;              /* copied or being copied */
	uint64_t *busy;               /* being copied */
	uint64_t dirty, zero;         /* at the capture */
	struct delta_extent *ext;
	size_t n_ext;
	int err;                      /* a writer's copy failed: the snapshot fails */
	bool aborted;                 /* stop copying; nobody waits any more */
};

/* The even bits of x, packed into 32 bits. */
static uint64_t even_bits(uint64_t x)
{
	x &= OV_LO;
	x = (x | (x >> 1)) & 0x3333333333333333ULL;
	x = (x | (x >> 2)) & 0x0f0f0f0f0f0f0f0fULL;
	x = (x | (x >> 4)) & 0x00ff00ff00ff00ffULL;
	x = (x | (x >> 8)) & 0x0000ffff0000ffffULL;
	x = (x | (x >> 16)) & 0x00000000ffffffffULL;
	return x;
}

/* Where block b (dirty at the capture) goes in the delta. */
static off_t snap_data_off(const struct overlay_snapshot *s, uint64_t b)
{
	uint64_t below = s->dirty0[b / 64] & ((1ULL << (b % 64)) - 1);

	return (off_t)(DELTA_HDR +
		       (s->rank[b / 64] + (uint64_t)__builtin_popcountll(below)) * DISK_BLOCK);
}

/* Blocks [b, b + n), consecutive dirty blocks, from the overlay into the delta. */
static int snap_copy(struct overlay_snapshot *s, uint64_t b, uint64_t n, uint8_t *buf)
{
	int ret = uring_pread_full(s->ov->fd, buf, (size_t)n * DISK_BLOCK, (off_t)(b * DISK_BLOCK));

	return ret ? ret : fs_pwrite_full(s->fd, buf, (size_t)n * DISK_BLOCK, snap_data_off(s, b));
}

/* Under the mutex. */
static void snap_fail(struct overlay_snapshot *s, int err)
{
	if (!s->err)
		s->err = err;
	s->aborted = true;
	pthread_cond_broadcast(&s->ov->cow_done);
}

/* The first block in [b, end) a writer must copy or wait for; end if none. */
static uint64_t snap_next(const struct overlay_snapshot *s, uint64_t b, uint64_t end)
{
	while (b < end) {
		size_t w = (size_t)(b / 64);
		uint64_t m = s->dirty0[w] & (~s->taken[w] | s->busy[w]) & (~0ULL << (b % 64));

		if (m) {
			b = (uint64_t)w * 64 + (uint64_t)__builtin_ctzll(m);
			return b < end ? b : end;
		}
		b = ((uint64_t)w + 1) * 64;
	}
	return end;
}

void ov_snapshot_cow(struct overlay *ov, uint64_t b, uint64_t n)
{
	/* Stable while the caller holds io_lock shared: it only changes under exclusive. */
	struct overlay_snapshot *s = ov->snap;
	uint64_t end = b + n;
	uint8_t *buf = NULL;

	if (!s)
		return;
	pthread_mutex_lock(&ov->lock);
	while (!s->aborted) {
		uint64_t run = 0;
		int ret;

		b = snap_next(s, b, end);
		if (b >= end)
			break;
		if (bit_test(s->busy, b)) {
			pthread_cond_wait(&ov->cow_done, &ov->lock);
			continue;
		}
		for (; run < COW_PIECE && b + run < end && bit_test(s->dirty0, b + run) &&
		       !bit_test(s->taken, b + run); run++) {
			bit_set(s->taken, b + run);
			bit_set(s->busy, b + run);
		}
		pthread_mutex_unlock(&ov->lock);
		if (!buf)
			buf = malloc((size_t)COW_PIECE * DISK_BLOCK);
		ret = buf ? snap_copy(s, b, run, buf) : -ENOMEM;
		pthread_mutex_lock(&ov->lock);
		for (uint64_t i = 0; i < run; i++)
			bit_clear(s->busy, b + i);
		ov->snapshot_copies += run;
		if (ret)
			snap_fail(s, ret);
		pthread_cond_broadcast(&ov->cow_done);
		b += run;
	}
	pthread_mutex_unlock(&ov->lock);
	free(buf);
}

static void snap_free(struct overlay_snapshot *s)
{
	if (s->fd >= 0) {
		close(s->fd);
		unlink(s->tmp);
	}
	free(s->cap);
	free(s->dirty0);
	free(s->rank);
	free(s->taken);
	free(s->busy);
	free(s->ext);
	free(s);
}

/* Under io_lock exclusive: nothing changes the state meanwhile. */
static void snap_capture(struct overlay_snapshot *s, const struct overlay *ov)
{
	size_t nw = ov_words(s->blocks), nb = ov_bitwords(s->blocks);
	uint64_t r = 0;

	memcpy(s->cap, ov->words, nw * sizeof(uint64_t));
	s->dirty = ov->dirty;
	s->zero = ov->zero;
	for (size_t i = 0; i < nb; i++) {
		uint64_t lo = s->cap[2 * i], hi = 2 * i + 1 < nw ? s->cap[2 * i + 1] : 0;

		s->dirty0[i] = even_bits(lo & ~(lo >> 1)) | even_bits(hi & ~(hi >> 1)) << 32;
		s->rank[i] = r;
		r += (uint64_t)__builtin_popcountll(s->dirty0[i]);
	}
}

int overlay_snapshot_begin(struct overlay *ov, const char *delta_path,
			   struct overlay_snapshot **out, char *why, size_t why_len)
{
	struct overlay_snapshot *s;
	size_t nw = ov_words(ov->blocks), nb = ov_bitwords(ov->blocks);
	int ret = 0;

	*out = NULL;
	if (why_len)
		why[0] = '\0';
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->ov = ov;
	s->blocks = ov->blocks;
	s->cap = malloc(nw * sizeof(uint64_t));
	s->dirty0 = malloc(nb * sizeof(uint64_t));
	s->rank = malloc(nb * sizeof(uint64_t));
	s->taken = calloc(nb, sizeof(uint64_t));
	s->busy = calloc(nb, sizeof(uint64_t));
	if (!s->cap || !s->dirty0 || !s->rank || !s->taken || !s->busy) {
		snap_free(s);
		return -ENOMEM;
	}
	if (snprintf(s->path, sizeof(s->path), "%s", delta_path) >= (int)sizeof(s->path) ||
	    snprintf(s->tmp, sizeof(s->tmp), "%s.tmp.XXXXXX", delta_path) >= (int)sizeof(s->tmp)) {
		snap_free(s);
		return -ENAMETOOLONG;
	}
	s->fd = fs_mkstemp(s->tmp, 0, FS_DATA_MODE);
	if (s->fd < 0) {
		ret = s->fd;
		snap_free(s);
		return ret;
	}
	pthread_rwlock_wrlock(&ov->io_lock);
	pthread_mutex_lock(&ov->lock);
	if (ov->snap) {
		ret = -EBUSY;
	} else {
		snap_capture(s, ov);
		ov->snap = s;
	}
	pthread_mutex_unlock(&ov->lock);
	pthread_rwlock_unlock(&ov->io_lock);
	if (ret) {
		why_set(why, why_len, ret, "a snapshot of this overlay is already running");
		snap_free(s);
		return ret;
	}
	*out = s;
	return 0;
}

void overlay_snapshot_counts(const struct overlay_snapshot *s, uint64_t *dirty,
			     uint64_t *zero)
{
	*dirty = s->dirty;
	*zero = s->zero;
}

/* The dirty and zeroed runs of the captured states. */
static int snap_extents(struct overlay_snapshot *s)
{
	enum ov_state st;
	size_t n = 0;

	for (int pass = 0; pass < 2; pass++) {
		n = 0;
		for (uint64_t b = 0, len; b < s->blocks; b += len) {
			len = ov_bits_run(s->cap, s->blocks, b, &st);
			if (st == OV_CLEAN)
				continue;
			if (pass)
				s->ext[n] = (struct delta_extent){ .block = b, .count = len,
								   .state = st };
			n++;
		}
		if (!pass) {
			s->ext = malloc((n ? n : 1) * sizeof(*s->ext));
			if (!s->ext)
				return -ENOMEM;
		}
	}
	s->n_ext = n;
	return 0;
}

/* Blocks [b, b + n) of a dirty extent into the delta and into buf. */
static int snap_piece(struct overlay_snapshot *s, uint64_t b, uint64_t n, uint8_t *buf)
{
	struct overlay *ov = s->ov;
	bool mine[SNAP_PIECE];
	int ret = 0;

	pthread_mutex_lock(&ov->lock);
	for (uint64_t i = 0; i < n; i++) {
		mine[i] = !bit_test(s->taken, b + i);
		if (mine[i]) {
			bit_set(s->taken, b + i);
			bit_set(s->busy, b + i);
		}
	}
	pthread_mutex_unlock(&ov->lock);
	for (uint64_t i = 0, k; i < n && !ret; i = k) {
		for (k = i + 1; k < n && mine[k] == mine[i]; k++)
			;
		if (mine[i])
			ret = snap_copy(s, b + i, k - i, buf + i * DISK_BLOCK);
	}
	pthread_mutex_lock(&ov->lock);
	for (uint64_t i = 0; i < n; i++)
		if (mine[i])
			bit_clear(s->busy, b + i);
	pthread_cond_broadcast(&ov->cow_done);
	for (uint64_t i = 0; i < n && !s->aborted;) {
		if (bit_test(s->busy, b + i))
			pthread_cond_wait(&ov->cow_done, &ov->lock);
		else
			i++;
	}
	if (!ret && s->aborted)
		ret = s->err ? s->err : -ECANCELED;
	pthread_mutex_unlock(&ov->lock);
	/* What writers saved, read back from its place in the delta. */
	for (uint64_t i = 0, k; i < n && !ret; i = k) {
		for (k = i + 1; k < n && mine[k] == mine[i]; k++)
			;
		if (!mine[i])
			ret = fs_pread_full(s->fd, buf + i * DISK_BLOCK, (size_t)(k - i) * DISK_BLOCK,
					    snap_data_off(s, b + i));
	}
	return ret;
}

static int snap_data(struct overlay_snapshot *s, struct sha256_ctx *sha)
{
	uint8_t *buf = malloc((size_t)SNAP_PIECE * DISK_BLOCK);
	int ret = buf ? 0 : -ENOMEM;

	for (size_t i = 0; i < s->n_ext && !ret; i++) {
		uint64_t b = s->ext[i].block, end = b + s->ext[i].count, n;

		if (s->ext[i].state != OV_DIRTY)
			continue;
		for (; b < end && !ret; b += n) {
			n = end - b < SNAP_PIECE ? end - b : SNAP_PIECE;
			ret = snap_piece(s, b, n, buf);
			if (!ret)
				ret = sha256_update(sha, buf, (size_t)n * DISK_BLOCK);
		}
	}
	free(buf);
	return ret;
}

/* Header, data, extents, trailer. */
static int snap_write(struct overlay_snapshot *s)
{
	uint8_t block[DELTA_HDR] = { 0 }, digest[SHA256_LEN];
	struct sha256_ctx *sha;
	size_t ext_bytes;
	off_t off;
	int ret;

	ret = snap_extents(s);
	if (ret)
		return ret;
	sha = sha256_new();
	if (!sha)
		return -ENOMEM;
	delta_header_init((struct delta_header *)block, s->ov->disk_bytes, s->ov->digest,
			  s->dirty, s->zero, s->n_ext);
	ret = fs_pwrite_full(s->fd, block, sizeof(block), 0);
	if (!ret)
		ret = sha256_update(sha, block, sizeof(block));
	if (!ret)
		ret = snap_data(s, sha);
	ext_bytes = s->n_ext * sizeof(*s->ext);
	off = (off_t)(DELTA_HDR + s->dirty * DISK_BLOCK);
	if (!ret)
		ret = fs_pwrite_full(s->fd, s->ext, ext_bytes, off);
	if (!ret)
		ret = sha256_update(sha, s->ext, ext_bytes);
	if (!ret)
		ret = sha256_final(sha, digest);
	if (!ret)
		ret = fs_pwrite_full(s->fd, digest, sizeof(digest), off + (off_t)ext_bytes);
	sha256_free(sha);
	return ret;
}

int overlay_snapshot_end(struct overlay_snapshot *s, char *why, size_t why_len)
{
	struct overlay *ov = s->ov;
	char dir[PATH_MAX];
	int ret;

	if (why_len)
		why[0] = '\0';
	ret = snap_write(s);
	if (ret) {
		pthread_mutex_lock(&ov->lock);
		snap_fail(s, ret);
		pthread_mutex_unlock(&ov->lock);
	}
	/* Writers in flight may still look at s: let them finish first. */
	pthread_rwlock_wrlock(&ov->io_lock);
	pthread_mutex_lock(&ov->lock);
	ov->snap = NULL;
	if (!ret)
		ret = s->err;
	pthread_mutex_unlock(&ov->lock);
	pthread_rwlock_unlock(&ov->io_lock);
	if (!ret && fsync(s->fd) < 0)
		ret = -errno;
	if (!ret)
		ret = fs_rename_output(s->tmp, s->path);
	if (!ret) {
		close(s->fd);
		s->fd = -1;
		fs_dirname(s->path, dir, sizeof(dir));
		ret = fs_fsync_dir(dir);
	}
	snap_free(s);
	return ret;
}

int overlay_snapshot(struct overlay *ov, const char *delta_path, char *why, size_t why_len)
{
	struct overlay_snapshot *s;
	int ret = overlay_snapshot_begin(ov, delta_path, &s, why, why_len);

	return ret ? ret : overlay_snapshot_end(s, why, why_len);
}
