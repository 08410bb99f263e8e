/* SPDX-License-Identifier: MIT */
/*
 * The overlay: OVERLAY (sparse data, block i at i * 4096), OVERLAY.state (a header and
 * 2 bits per block, as of the last flush) and OVERLAY.live (the states now, ov_live.c).
 * Data is read and written outside any lock; a state change updates the in-memory bitmap
 * and writes the bytes it touched to OVERLAY.live under the mutex, so the file never goes
 * back to an older value and kill -9 loses nothing the kernel has. Data is written before
 * its block is marked dirty: a block is never dirty with data that was not written; and
 * OVERLAY.state takes a change only once a flush made its data durable.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/uring.h"
#include "../../common/crc32c.h"
#include "../../common/fsutil.h"
#include "overlay_int.h"

/* ------------------------------------------------------------------ open / create */


/* An open(2) of one of the overlay's files failed: ELOOP is a symbolic link there. */
static int open_failed(char *why, size_t why_len, const char *link_msg)
{
	return errno == ELOOP ? why_set(why, why_len, -EBADMSG, "%s", link_msg) : -errno;
}

/*
 * OVERLAY for ov_create: made new (O_EXCL), or one left by an interrupted creation
 * (regular, nothing allocated, empty or of the disk's size) reopened; anything else, a
 * symbolic link included, is not ours. An open descriptor, or -errno.
 */
static int ov_create_data(const char *path, uint64_t disk_bytes, char *why, size_t why_len)
{
	const char *foreign = "file exists without a state file (not a lazyblk overlay)";
	struct stat st;
	int fd;

	fd = ov_open_file(path, O_RDWR | O_CREAT | O_EXCL, FS_DATA_MODE);
	if (fd >= 0 || errno != EEXIST)
		return fd >= 0 ? fd : -errno;
	fd = ov_open_file(path, O_RDWR, 0);
	if (fd < 0)
		return open_failed(why, why_len, "overlay path is a symbolic link (refused)");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_blocks ||
	    (st.st_size && (uint64_t)st.st_size != disk_bytes)) {
		close(fd);
		return why_set(why, why_len, -EBADMSG, "%s", foreign);
	}
	return fd;
}

/*
 * Make OVERLAY (sized, sparse) and then OVERLAY.state (written aside, fsync'ed, linked
 * into place so that a racing creator's file is never replaced).
 */
static int ov_create(const char *path, const char *state_path, uint64_t disk_bytes,
		     const uint8_t digest[SHA256_LEN], char *why, size_t why_len)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	int fd, ret = 0;

	fd = ov_create_data(path, disk_bytes, why, why_len);
	if (fd < 0)
		return fd;
	if (ftruncate(fd, (off_t)disk_bytes) < 0 || fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (ret)
		return ret;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", state_path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = fs_mkstemp(tmp, 0, FS_DATA_MODE);
	if (fd < 0)
		return fd;
	ret = ov_state_fill(fd, disk_bytes, digest, NULL);
	close(fd);
	if (!ret && link(tmp, state_path) < 0 && errno != EEXIST)
		ret = -errno;
	unlink(tmp);
	if (ret)
		return ret;
	fs_dirname(path, dir, sizeof(dir));
	return fs_fsync_dir(dir);
}

static int ov_open_data(struct overlay *ov, char *why, size_t why_len)
{
	struct stat st;

	ov->fd = ov_open_file(ov->path, ov->read_only ? O_RDONLY : O_RDWR, 0);
	if (ov->fd < 0) {
		if (errno == ENOENT)
			return why_set(why, why_len, -EBADMSG,
				       "overlay data file missing (only its .state file exists)");
		return open_failed(why, why_len, "overlay path is a symbolic link (refused)");
	}
	if (fstat(ov->fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return why_set(why, why_len, -EBADMSG, "overlay data file is not a regular file");
	if ((uint64_t)st.st_size != ov->disk_bytes)
		return why_set(why, why_len, -EBADMSG,
			       "overlay data file has the wrong size (truncated or foreign)");
	return 0;
}

static int ov_init_locks(struct overlay *ov)
{
	pthread_rwlockattr_t a;
	int ret;

	ret = pthread_rwlockattr_init(&a);
	if (ret)
		return -ret;
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	ret = pthread_rwlock_init(&ov->io_lock, &a);
	pthread_rwlockattr_destroy(&a);
	if (ret)
		return -ret;
	pthread_mutex_init(&ov->lock, NULL);
	pthread_mutex_init(&ov->flush_lock, NULL);
	pthread_cond_init(&ov->flush_cond, NULL);
	pthread_cond_init(&ov->cow_done, NULL);
	return 0;
}

static void ov_free(struct overlay *ov)
{
	if (ov->fd >= 0)
		close(ov->fd);
	if (ov->state_fd >= 0)
		close(ov->state_fd);
	ov_live_free(ov);
	ov_flush_free(ov);
	free(ov->words);
	free(ov->path);
	free(ov);
}

static int ov_open(const char *path, bool read_only, bool create, uint64_t want_bytes,
		   const uint8_t *want_digest, struct overlay **out, char *why, size_t why_len)
{
	const char *state_link = "state file path is a symbolic link (refused)";
	char state_path[PATH_MAX];
	struct overlay *ov;
	int ret;

	*out = NULL;
	if (why_len)
		why[0] = '\0';
	ret = ov_state_path(path, state_path, sizeof(state_path));
	if (ret)
		return ret;
	ov = calloc(1, sizeof(*ov));
	if (!ov)
		return -ENOMEM;
	ov->fd = ov->state_fd = ov->live_fd = -1;
	ov->read_only = read_only;
	ov->path = strdup(path);
	if (!ov->path) {
		ov_free(ov);
		return -ENOMEM;
	}
	ov->state_fd = ov_open_file(state_path, read_only ? O_RDONLY : O_RDWR, 0);
	if (ov->state_fd < 0 && errno == ENOENT) {
		if (!create) {
			ret = access(path, F_OK) < 0
				      ? -ENOENT
				      : why_set(why, why_len, -EBADMSG, "state file missing (not a "
						"lazyblk overlay, or an interrupted apply)");
		} else {
			ret = ov_create(path, state_path, want_bytes, want_digest, why, why_len);
			if (!ret) {
				ov->state_fd = ov_open_file(state_path, O_RDWR, 0);
				ret = ov->state_fd < 0 ? open_failed(why, why_len, state_link) : 0;
			}
		}
	} else if (ov->state_fd < 0) {
		ret = open_failed(why, why_len, state_link);
	}
	if (!ret && flock(ov->state_fd, (read_only ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0) {
		ret = -errno;
		if (ret == -EWOULDBLOCK) {
			ret = why_set(why, why_len, -EBUSY, "overlay is in use by another process");
		}
	}
	if (!ret)
		ret = ov_state_load(ov, want_bytes, want_digest, why, why_len);
	if (!ret)
		ret = ov_open_data(ov, why, why_len);
	if (!ret)
		ret = ov_live_open(ov, why, why_len);
	if (!ret)
		ret = ov_init_locks(ov);
	if (ret) {
		ov_free(ov);
		return ret;
	}
	*out = ov;
	return 0;
}

int overlay_open(const char *path, uint64_t disk_bytes, const uint8_t layout_digest[SHA256_LEN],
		 bool create, struct overlay **out, char *why, size_t why_len)
{
	if (!disk_bytes || disk_bytes % DISK_BLOCK || disk_bytes / DISK_BLOCK > OV_MAX_BLOCKS)
		return -EINVAL;
	return ov_open(path, false, create, disk_bytes, layout_digest, out, why, why_len);
}

int overlay_open_read_only(const char *path, uint64_t disk_bytes,
			   const uint8_t layout_digest[SHA256_LEN], struct overlay **out,
			   char *why, size_t why_len)
{
	if (!disk_bytes || disk_bytes % DISK_BLOCK || disk_bytes / DISK_BLOCK > OV_MAX_BLOCKS)
		return -EINVAL;
	return ov_open(path, true, false, disk_bytes, layout_digest, out, why, why_len);
}

int overlay_open_existing(const char *path, bool read_only, struct overlay **out,
			  char *why, size_t why_len)
{
	return ov_open(path, read_only, false, 0, NULL, out, why, why_len);
}

void overlay_remove(const char *path)
{
	char p[PATH_MAX];

	if (!ov_live_path(path, p, sizeof(p)))
		unlink(p);
	if (!ov_state_path(path, p, sizeof(p)))
		unlink(p);
	unlink(path);
}

void overlay_close(struct overlay *ov)
{
	if (!ov)
		return;
	pthread_cond_destroy(&ov->cow_done);
	pthread_cond_destroy(&ov->flush_cond);
	pthread_mutex_destroy(&ov->flush_lock);
	pthread_mutex_destroy(&ov->lock);
	pthread_rwlock_destroy(&ov->io_lock);
	ov_free(ov);
}

uint64_t overlay_blocks(const struct overlay *ov)
{
	return ov->blocks;
}

const uint8_t *overlay_layout_digest(const struct overlay *ov)
{
	return ov->digest;
}

uint64_t overlay_disk_bytes(const struct overlay *ov)
{
	return ov->disk_bytes;
}

/* ------------------------------------------------------------------ state */

enum ov_state overlay_state(struct overlay *ov, uint64_t block)
{
	enum ov_state s;

	if (block >= ov->blocks)
		return OV_CLEAN;
	pthread_mutex_lock(&ov->lock);
	s = ov_get(ov->words, block);
	pthread_mutex_unlock(&ov->lock);
	return s;
}

uint64_t overlay_run(struct overlay *ov, uint64_t block, enum ov_state *state)
{
	uint64_t n;

	if (block >= ov->blocks) {
		if (state)
			*state = OV_CLEAN;
		return 1;
	}
	pthread_mutex_lock(&ov->lock);
	n = ov_bits_run(ov->words, ov->blocks, block, state);
	pthread_mutex_unlock(&ov->lock);
	return n;
}

/*
 * Mark [b, b + n) and write the words that changed to OVERLAY.live. grew (may be NULL):
 * blocks became dirty that were not (the write took new room in OVERLAY).
 */
static int ov_mark(struct overlay *ov, uint64_t b, uint64_t n, enum ov_state st, bool write,
		   bool *grew)
{
	uint64_t dirty;
	int ret = 0;

	pthread_mutex_lock(&ov->lock);
	dirty = ov->dirty;
	if (ov_bits_set(ov->words, b, n, st, &ov->dirty, &ov->zero)) {
		ret = ov_live_mark(ov, (size_t)(b / 32), (size_t)((b + n - 1) / 32));
		if (ret && !ov->state_err)
			ov->state_err = ret;
	}
	if (write)
		ov->writes++;
	if (grew)
		*grew = ov->dirty > dirty;
	pthread_mutex_unlock(&ov->lock);
	return ret;
}

/* ------------------------------------------------------------------ running out of room */

enum ov_room_event ov_room_update(struct ov_room *r, int ret, bool grew, uint64_t *failed)
{
	if (ret == -ENOSPC || ret == -EDQUOT) {
		r->failed++;
		if (r->full)
			return OV_ROOM_SAME;
		__atomic_store_n(&r->full, true, __ATOMIC_RELAXED);
		return OV_ROOM_FULL;
	}
	if (ret || !grew || !r->full)
		return OV_ROOM_SAME;
	*failed = r->failed;
	r->failed = 0;
	__atomic_store_n(&r->full, false, __ATOMIC_RELAXED);
	return OV_ROOM_BACK;
}

void overlay_set_notes(struct overlay *ov, const struct note_sink *notes)
{
	ov->notes = *notes;
}

/* One write's result (0 or -errno) for the episodes; says the start and end of one. */
static void ov_room_note(struct overlay *ov, int ret, bool grew)
{
	enum ov_room_event ev;
	uint64_t failed = 0;

	/* the common case, a success while there is room, takes no lock */
	if (!ret && !__atomic_load_n(&ov->room.full, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&ov->lock);
	ev = ov_room_update(&ov->room, ret, grew, &failed);
	pthread_mutex_unlock(&ov->lock);
	if (ev == OV_ROOM_FULL)
		note_emit(&ov->notes, NOTE_WARN, "overlay %s: %s; writes fail until space is freed",
			  ov->path, strerror(-ret));
	else if (ev == OV_ROOM_BACK)
		note_emit(&ov->notes, NOTE_NOTICE, "overlay %s: writes succeed again after %llu "
			  "failed", ov->path, (unsigned long long)failed);
}

static int ov_check(struct overlay *ov, uint64_t block, uint64_t n)
{
	if (ov->read_only)
		return -EROFS;
	if (!n || block >= ov->blocks || n > ov->blocks - block)
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------------ I/O */

int overlay_read(struct overlay *ov, uint64_t block, uint32_t n, void *buf)
{
	if (!n || block >= ov->blocks || n > ov->blocks - block)
		return -EINVAL;
	return uring_pread_full(ov->fd, buf, (size_t)n * DISK_BLOCK, (off_t)(block * DISK_BLOCK));
}

int overlay_write(struct overlay *ov, uint64_t block, uint32_t n, const void *buf)
{
	int ret = ov_check(ov, block, n);
	bool grew = false;

	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ov->io_lock);
	ov_snapshot_cow(ov, block, n);
	ret = uring_pwrite_full(ov->fd, buf, (size_t)n * DISK_BLOCK, (off_t)(block * DISK_BLOCK));
	if (!ret)
		ret = ov_mark(ov, block, n, OV_DIRTY, true, &grew);
	pthread_rwlock_unlock(&ov->io_lock);
	ov_room_note(ov, ret, grew);
	return ret;
}

int overlay_zero(struct overlay *ov, uint64_t block, uint64_t n)
{
	int ret = ov_check(ov, block, n);

	if (ret)
		return ret;
	pthread_rwlock_rdlock(&ov->io_lock);
	ov_snapshot_cow(ov, block, n);
	/* Zeroed blocks read as zeros whatever the file holds: the hole only frees space. */
	if (fallocate(ov->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(block * DISK_BLOCK),
		      (off_t)(n * DISK_BLOCK)) < 0 && errno != EOPNOTSUPP && errno != ENOSYS)
		ret = -errno;
	if (!ret)
		ret = ov_mark(ov, block, n, OV_ZERO, true, NULL);
	pthread_rwlock_unlock(&ov->io_lock);
	ov_room_note(ov, ret, false);
	return ret;
}

int overlay_flush(struct overlay *ov)
{
	int ret = 0;

	if (ov->read_only)
		return 0;
	/* the data first, then the states that point at it (ov_live.c) */
	ret = ov_live_flush(ov);
	pthread_mutex_lock(&ov->lock);
	ov->flushes++;
	if (!ret)
		ret = ov->state_err;
	pthread_mutex_unlock(&ov->lock);
	return ret;
}

void overlay_get_stats(struct overlay *ov, struct overlay_stats *st)
{
	pthread_mutex_lock(&ov->lock);
	st->dirty_blocks = ov->dirty;
	st->zero_blocks = ov->zero;
	st->writes = ov->writes;
	st->flushes = ov->flushes;
	st->snapshot_copies = ov->snapshot_copies;
	pthread_mutex_unlock(&ov->lock);
}
