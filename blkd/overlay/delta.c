/* SPDX-License-Identifier: MIT */
/*
 * Deltas: the header, and starting an overlay from one. Applying checks everything
 * (header, extents, the trailing sha256 over the whole file) while it builds the new
 * overlay aside; only a delta that checks out replaces OVERLAY and OVERLAY.state.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/crc32c.h"
#include "../../common/fsutil.h"
#include "delta.h"
#include "overlay_int.h"

#define APPLY_PIECE 256u /* blocks copied at a time */

static uint32_t delta_crc(const struct delta_header *hdr)
{
	struct delta_header h = *hdr;

	h.header_crc = 0;
	return crc32c(~0u, &h, sizeof(h));
}

void delta_header_init(struct delta_header *h, uint64_t disk_bytes,
		       const uint8_t digest[SHA256_LEN], uint64_t dirty, uint64_t zero,
		       uint64_t extents)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, DELTA_MAGIC, sizeof(h->magic));
	h->version = DELTA_VERSION;
	h->block_size = DISK_BLOCK;
	h->disk_bytes = disk_bytes;
	h->block_count = disk_bytes / DISK_BLOCK;
	memcpy(h->layout_digest, digest, SHA256_LEN);
	h->dirty_blocks = dirty;
	h->zero_blocks = zero;
	h->extent_count = extents;
	h->header_crc = delta_crc(h);
}

struct apply {
	int fd;                           /* the delta */
	uint64_t size;
	uint8_t block[DELTA_HDR];         /* its header block */
	struct delta_header h;
	struct delta_extent *ext;
	uint64_t *words;                  /* the new overlay's states */
	char data_tmp[PATH_MAX], state_tmp[PATH_MAX];
	int data_fd, state_fd;
};

static bool all_zero(const uint8_t *p, size_t len)
{
	return !len || (p[0] == 0 && !memcmp(p, p + 1, len - 1));
}

static int apply_header(struct apply *a, const uint8_t *digest, uint64_t disk_bytes,
			char *why, size_t why_len)
{
	const struct delta_header *h = &a->h;
	uint64_t need;
	int ret;

	if (a->size < sizeof(h->magic))
		return why_set(why, why_len, -EBADMSG, "truncated delta");
	ret = fs_pread_full(a->fd, a->block, a->size < DELTA_HDR ? (size_t)a->size : DELTA_HDR, 0);
	if (ret)
		return ret;
	if (memcmp(a->block, DELTA_MAGIC, sizeof(h->magic)))
		return why_set(why, why_len, -EBADMSG, "bad magic (not a lazyblk delta)");
	if (a->size < DELTA_HDR)
		return why_set(why, why_len, -EBADMSG, "truncated delta");
	memcpy(&a->h, a->block, sizeof(a->h));
	if (h->version != DELTA_VERSION)
		return why_set(why, why_len, -EBADMSG, "unsupported delta version");
	if (h->header_crc != delta_crc(h))
		return why_set(why, why_len, -EBADMSG, "delta header checksum mismatch (file corrupt)");
	if (h->block_size != DISK_BLOCK || h->flags)
		return why_set(why, why_len, -EBADMSG, "unsupported block size or flags in the delta");
	if (!all_zero(h->reserved, sizeof(h->reserved)) ||
	    !all_zero(a->block + sizeof(*h), DELTA_HDR - sizeof(*h)))
		return why_set(why, why_len, -EBADMSG, "delta header padding not zero (file corrupt)");
	if (!h->block_count || h->block_count > OV_MAX_BLOCKS ||
	    h->disk_bytes != h->block_count * DISK_BLOCK)
		return why_set(why, why_len, -EBADMSG, "bad disk size in the delta (file corrupt)");
	if (memcmp(h->layout_digest, digest, SHA256_LEN))
		return why_set(why, why_len, -EBADMSG, "delta belongs to another layout");
	if (h->disk_bytes != disk_bytes)
		return why_set(why, why_len, -EBADMSG, "delta is for a disk of another size");
	if (h->dirty_blocks > h->block_count || h->zero_blocks > h->block_count - h->dirty_blocks ||
	    h->extent_count > h->dirty_blocks + h->zero_blocks)
		return why_set(why, why_len, -EBADMSG, "bad block counts in the delta (file corrupt)");
	need = DELTA_HDR + h->dirty_blocks * DISK_BLOCK + h->extent_count * sizeof(*a->ext) +
	       SHA256_LEN;
	if (a->size != need)
		return why_set(why, why_len, -EBADMSG, "%s",
			       a->size < need ? "truncated delta" : "trailing garbage after the delta");
	return 0;
}

/* Extents sorted, disjoint, inside the disk, matching the counts; into a->words. */
static int apply_extents(struct apply *a, char *why, size_t why_len)
{
	const struct delta_header *h = &a->h;
	uint64_t next = 0, dirty = 0, zero = 0, nd = 0, nz = 0;
	size_t bytes = (size_t)h->extent_count * sizeof(*a->ext);
	int ret;

	a->ext = malloc(bytes ? bytes : 1);
	a->words = calloc(ov_words(h->block_count), sizeof(uint64_t));
	if (!a->ext || !a->words)
		return -ENOMEM;
	ret = fs_pread_full(a->fd, a->ext, bytes, (off_t)(DELTA_HDR + h->dirty_blocks * DISK_BLOCK));
	if (ret)
		return ret;
	for (uint64_t i = 0; i < h->extent_count; i++) {
		const struct delta_extent *e = &a->ext[i];

		if (!e->count || e->block < next || e->block >= h->block_count ||
		    e->count > h->block_count - e->block || e->reserved ||
		    (e->state != OV_DIRTY && e->state != OV_ZERO))
			return why_set(why, why_len, -EBADMSG, "bad extent in the delta (file corrupt)");
		next = e->block + e->count;
		*(e->state == OV_DIRTY ? &nd : &nz) += e->count;
		ov_bits_set(a->words, e->block, e->count, (enum ov_state)e->state, &dirty, &zero);
	}
	if (nd != h->dirty_blocks || nz != h->zero_blocks)
		return why_set(why, why_len, -EBADMSG, "extents do not match the block counts (file corrupt)");
	return 0;
}

/* Every dirty block into the new data file (all-zero blocks stay holes), hashing. */
static int apply_data(struct apply *a, struct sha256_ctx *sha)
{
	uint8_t *buf = malloc((size_t)APPLY_PIECE * DISK_BLOCK);
	off_t off = DELTA_HDR;
	int ret = buf ? 0 : -ENOMEM;

	for (uint64_t i = 0; i < a->h.extent_count && !ret; i++) {
		uint64_t b = a->ext[i].block, end = b + a->ext[i].count, n;

		if (a->ext[i].state != OV_DIRTY)
			continue;
		for (; b < end && !ret; b += n, off += (off_t)(n * DISK_BLOCK)) {
			n = end - b < APPLY_PIECE ? end - b : APPLY_PIECE;
			ret = fs_pread_full(a->fd, buf, (size_t)n * DISK_BLOCK, off);
			if (!ret)
				ret = sha256_update(sha, buf, (size_t)n * DISK_BLOCK);
			for (uint64_t k = 0, j; k < n && !ret; k = j) {
				uint8_t *p = buf + k * DISK_BLOCK;
				bool zero = all_zero(p, DISK_BLOCK);

				for (j = k + 1; j < n; j++)
					if (all_zero(buf + j * DISK_BLOCK, DISK_BLOCK) != zero)
						break;
				if (!zero)
					ret = fs_pwrite_full(a->data_fd, p,
							     (size_t)(j - k) * DISK_BLOCK,
							     (off_t)((b + k) * DISK_BLOCK));
			}
		}
	}
	free(buf);
	return ret;
}

static int apply_verify_copy(struct apply *a, char *why, size_t why_len)
{
	uint8_t digest[SHA256_LEN], trailer[SHA256_LEN];
	struct sha256_ctx *sha = sha256_new();
	int ret;

	if (!sha)
		return -ENOMEM;
	ret = sha256_update(sha, a->block, DELTA_HDR);
	if (!ret)
		ret = apply_data(a, sha);
	if (!ret)
		ret = sha256_update(sha, a->ext, (size_t)a->h.extent_count * sizeof(*a->ext));
	if (!ret)
		ret = sha256_final(sha, digest);
	sha256_free(sha);
	if (!ret)
		ret = fs_pread_full(a->fd, trailer, sizeof(trailer), (off_t)(a->size - SHA256_LEN));
	if (!ret && memcmp(digest, trailer, SHA256_LEN))
		ret = why_set(why, why_len, -EBADMSG, "checksum mismatch (file corrupt)");
	return ret;
}

static int tmp_open(const char *path, const char *suffix, char tmp[PATH_MAX], int *fd)
{
	if (snprintf(tmp, PATH_MAX, "%s%s.tmp.XXXXXX", path, suffix) >= PATH_MAX)
		return -ENAMETOOLONG;
	*fd = fs_mkstemp(tmp, 0, FS_DATA_MODE);
	if (*fd < 0) {
		tmp[0] = 0;
		return *fd;
	}
	return 0;
}

/*
 * Replace OVERLAY.state and OVERLAY. The old state goes first: if we are interrupted,
 * OVERLAY is left without a state file, which opening refuses, rather than with a state
 * that does not describe its data. The old OVERLAY.live goes with it (it names the old
 * state file's instance, so it would not be believed anyway).
 */
static int apply_commit(struct apply *a, const char *path, char *why, size_t why_len)
{
	char state_path[PATH_MAX], live_path[PATH_MAX], dir[PATH_MAX];
	int lock_fd, ret;

	ret = ov_state_path(path, state_path, sizeof(state_path));
	if (!ret)
		ret = ov_live_path(path, live_path, sizeof(live_path));
	if (ret)
		return ret;
	/* a link there is not followed; O_RDWR does not block on a FIFO (flock then fails) */
	lock_fd = open(state_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (lock_fd < 0 && errno != ENOENT)
		return -errno;
	if (lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) < 0) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		if (ret == -EBUSY)
			why_set(why, why_len, ret, "overlay is in use by another process");
	}
	if (!ret && lock_fd >= 0 && unlink(state_path) < 0)
		ret = -errno;
	if (!ret && unlink(live_path) < 0 && errno != ENOENT)
		ret = -errno;
	if (!ret)
		ret = fs_output_check(state_path);
	if (!ret)
		ret = fs_rename_output(a->data_tmp, path);
	if (!ret) {
		a->data_tmp[0] = 0;
		ret = fs_rename_output(a->state_tmp, state_path);
		if (!ret)
			a->state_tmp[0] = 0;
	}
	if (!ret) {
		fs_dirname(path, dir, sizeof(dir));
		ret = fs_fsync_dir(dir);
	}
	if (lock_fd >= 0)
		close(lock_fd);
	return ret;
}

int overlay_apply_delta(const char *delta_path, const char *overlay_path,
			const uint8_t layout_digest[SHA256_LEN], uint64_t disk_bytes,
			char *why, size_t why_len)
{
	struct apply a = { .fd = -1, .data_fd = -1, .state_fd = -1 };
	struct stat st;
	int ret = 0;

	if (why_len)
		why[0] = '\0';
	a.fd = fs_open_regular(AT_FDCWD, delta_path, 0, &st); /* a FIFO: never opened */
	if (a.fd == -EINVAL)
		return why_set(why, why_len, -EBADMSG, "not a regular file");
	if (a.fd < 0)
		return a.fd;
	a.size = (uint64_t)st.st_size;
	if (!ret)
		ret = apply_header(&a, layout_digest, disk_bytes, why, why_len);
	if (!ret)
		ret = apply_extents(&a, why, why_len);
	if (!ret)
		ret = tmp_open(overlay_path, "", a.data_tmp, &a.data_fd);
	if (!ret && ftruncate(a.data_fd, (off_t)disk_bytes) < 0)
		ret = -errno;
	if (!ret)
		ret = apply_verify_copy(&a, why, why_len);
	if (!ret && fsync(a.data_fd) < 0)
		ret = -errno;
	if (!ret)
		ret = tmp_open(overlay_path, ".state", a.state_tmp, &a.state_fd);
	if (!ret)
		ret = ov_state_fill(a.state_fd, disk_bytes, layout_digest, a.words);
	if (!ret)
		ret = apply_commit(&a, overlay_path, why, why_len);
	if (a.data_fd >= 0)
		close(a.data_fd);
	if (a.state_fd >= 0)
		close(a.state_fd);
	if (a.data_tmp[0])
		unlink(a.data_tmp);
	if (a.state_tmp[0])
		unlink(a.state_tmp);
	close(a.fd);
	free(a.ext);
	free(a.words);
	return ret;
}
