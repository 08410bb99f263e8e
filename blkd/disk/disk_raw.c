/* SPDX-License-Identifier: MIT */
/*
 * blkd/disk/disk_raw: a raw disk file (or block device) as a disk (see disk.h). Reads and
 * writes go through io_uring (common/uring.h), at most the disk's size: bytes of a file
 * past its last whole sector are never read or written. Discard and write-zeroes are
 * fallocate() where the file system has it; block status (allocation) comes from
 * SEEK_DATA/SEEK_HOLE, every data/hole boundary widened to whole sectors of data.
 */
#include "disk.h"

#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/uring.h"

struct raw_stats {
	uint64_t reads, writes, flushes, discards, write_zeroes, statuses;
	uint64_t read_bytes, write_bytes, errors;
};

struct rawdisk {
	int fd;
	uint64_t size;
	bool read_only;
	struct raw_stats st;       /* updated atomically */
};

#define STAT(r, f, v) __atomic_fetch_add(&(r)->st.f, (v), __ATOMIC_RELAXED)

static bool raw_range_ok(const struct rawdisk *r, uint64_t off, uint64_t len)
{
	return !(off % DISK_SECTOR) && !(len % DISK_SECTOR) && off <= r->size &&
	       len <= r->size - off;
}

/* Count an operation's result. */
static int counted(struct rawdisk *r, int ret)
{
	if (ret < 0)
		STAT(r, errors, 1);
	return ret;
}

static int raw_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	struct rawdisk *r = ctx;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	STAT(r, reads, 1);
	STAT(r, read_bytes, len);
	return counted(r, len ? uring_pread_full(r->fd, buf, len, (off_t)off) : 0);
}

static int raw_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	struct rawdisk *r = ctx;
	int ret = 0;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	if (r->read_only)
		return -EROFS;
	STAT(r, writes, 1);
	STAT(r, write_bytes, len);
	if (len)
		ret = uring_pwrite_full(r->fd, buf, len, (off_t)off);
	if (!ret && fua)
		ret = uring_fdatasync(r->fd);
	return counted(r, ret);
}

static int raw_flush(void *ctx)
{
	struct rawdisk *r = ctx;

	STAT(r, flushes, 1);
	return r->read_only ? 0 : counted(r, uring_fdatasync(r->fd));
}

/* fallocate(mode) of the range: 0, or -errno (-EOPNOTSUPP: the file system has no such mode). */
static int raw_fallocate(struct rawdisk *r, int mode, uint64_t off, uint64_t len)
{
	if (!fallocate(r->fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return 0;
	return errno == EOPNOTSUPP || errno == ENOSYS ? -EOPNOTSUPP : -errno;
}

static int raw_discard(void *ctx, uint64_t off, uint64_t len)
{
	struct rawdisk *r = ctx;
	int ret;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	if (r->read_only)
		return -EROFS;
	STAT(r, discards, 1);
	if (!len)
		return 0;
	ret = raw_fallocate(r, FALLOC_FL_PUNCH_HOLE, off, len);
	/* a hint: a file system without holes keeps the data */
	return counted(r, ret == -EOPNOTSUPP ? 0 : ret);
}

static int write_zeros(struct rawdisk *r, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[65536];

	while (len) {
		uint32_t n = len < sizeof(zeros) ? (uint32_t)len : (uint32_t)sizeof(zeros);
		int ret = uring_pwrite_full(r->fd, zeros, n, (off_t)off);

		if (ret < 0)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

static int raw_write_zeroes(void *ctx, uint64_t off, uint64_t len, bool may_unmap)
{
	struct rawdisk *r = ctx;
	int ret = -EOPNOTSUPP;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	if (r->read_only)
		return -EROFS;
	STAT(r, write_zeroes, 1);
	if (!len)
		return 0;
	if (may_unmap)
		ret = raw_fallocate(r, FALLOC_FL_PUNCH_HOLE, off, len);
	if (ret == -EOPNOTSUPP)
		ret = raw_fallocate(r, FALLOC_FL_ZERO_RANGE, off, len);
	if (ret == -EOPNOTSUPP)
		ret = write_zeros(r, off, len);
	return counted(r, ret);
}

static uint64_t round_up(uint64_t v)
{
	return (v + DISK_SECTOR - 1) / DISK_SECTOR * DISK_SECTOR;
}

/*
 * The extent at off (< end): [off, *next) is data (returns 0) or a hole (returns
 * DISK_STATUS_HOLE | DISK_STATUS_ZERO). A sector holding any data byte is data; a file
 * system without SEEK_DATA makes it all data.
 */
static uint32_t raw_extent(const struct rawdisk *r, uint64_t off, uint64_t end, uint64_t *next)
{
	off_t data = lseek(r->fd, (off_t)off, SEEK_DATA), hole;
	uint64_t d;

	if (data < 0 && errno == ENXIO) { /* no data from off to the end of the file */
		*next = end;
		return DISK_STATUS_HOLE | DISK_STATUS_ZERO;
	}
	if (data < 0) { /* no SEEK_DATA here: all data */
		*next = end;
		return 0;
	}
	d = (uint64_t)data / DISK_SECTOR * DISK_SECTOR;
	if (d > off) { /* a hole up to the sector holding the next data byte */
		*next = d < end ? d : end;
		return DISK_STATUS_HOLE | DISK_STATUS_ZERO;
	}
	hole = lseek(r->fd, data, SEEK_HOLE);
	*next = hole <= data ? end : round_up((uint64_t)hole);
	if (*next > end)
		*next = end;
	return 0;
}

static int raw_block_status(void *ctx, enum disk_ctx c, uint64_t off, uint64_t len,
			    disk_extent_fn cb, void *arg)
{
	struct rawdisk *r = ctx;
	uint64_t end = off + len, next;

	if (c != DISK_CTX_ALLOCATION)
		return -EOPNOTSUPP;
	if (!raw_range_ok(r, off, len) || !len)
		return -EINVAL;
	STAT(r, statuses, 1);
	while (off < end) {
		uint32_t flags = raw_extent(r, off, end, &next);
		int ret = cb(arg, off, next - off, flags);

		if (ret)
			return ret > 0 ? 0 : ret;
		off = next;
	}
	return 0;
}

static void raw_stats(void *ctx, FILE *f, bool json)
{
	struct rawdisk *r = ctx;
	struct raw_stats s;
	const uint64_t *src = (const uint64_t *)&r->st;
	uint64_t *dst = (uint64_t *)&s;

	for (size_t i = 0; i < sizeof(s) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	if (json) {
		fprintf(f, "{\"reads\":%" PRIu64 ",\"writes\":%" PRIu64 ",\"flushes\":%" PRIu64
			   ",\"discards\":%" PRIu64 ",\"write_zeroes\":%" PRIu64
			   ",\"block_status\":%" PRIu64 ",\"read_bytes\":%" PRIu64
			   ",\"write_bytes\":%" PRIu64 ",\"errors\":%" PRIu64 "}\n",
			s.reads, s.writes, s.flushes, s.discards, s.write_zeroes, s.statuses,
			s.read_bytes, s.write_bytes, s.errors);
		return;
	}
	fprintf(f, "requests   %" PRIu64 " reads (%" PRIu64 " bytes), %" PRIu64 " writes (%" PRIu64
		   " bytes), %" PRIu64 " flushes, %" PRIu64 " discards, %" PRIu64
		   " write-zeroes, %" PRIu64 " block status, %" PRIu64 " failed\n",
		s.reads, s.read_bytes, s.writes, s.write_bytes, s.flushes, s.discards,
		s.write_zeroes, s.statuses, s.errors);
}

static void raw_close(void *ctx)
{
	struct rawdisk *r = ctx;

	if (r) {
		close(r->fd);
		free(r);
	}
}

static const struct disk_ops raw_ops = {
	.read = raw_read,
	.write = raw_write,
	.flush = raw_flush,
	.discard = raw_discard,
	.write_zeroes = raw_write_zeroes,
	.block_status = raw_block_status,
	.stats = raw_stats,
	.close = raw_close,
};

/* The size of what fd is: a regular file or a block device. -errno. */
static int raw_size(int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, size) < 0 ? -errno : 0;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	*size = (uint64_t)st.st_size;
	return 0;
}

int disk_raw_open(const char *path, bool read_only, struct disk *out)
{
	struct rawdisk *r;
	uint64_t size = 0;
	int fd, ret;

	/*
	 * A regular file or a block device: a FIFO there must not block the open (O_NONBLOCK,
	 * cleared once raw_size has seen what it is: io_uring would honour it).
	 */
	fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	ret = raw_size(fd, &size);
	if (!ret && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)
		ret = -errno;
	if (!ret && size < DISK_SECTOR)
		ret = -EINVAL;
	r = ret ? NULL : calloc(1, sizeof(*r));
	if (!ret && !r)
		ret = -ENOMEM;
	if (ret) {
		close(fd);
		return ret;
	}
	r->fd = fd;
	r->size = size / DISK_SECTOR * DISK_SECTOR;
	r->read_only = read_only;
	*out = (struct disk){
		.ops = &raw_ops,
		.ctx = r,
		.size = r->size,
		.description = "lazyblk raw disk file",
		.read_only = read_only,
		.can_flush = true,         /* read-only: a no-op */
		.can_fua = true,
		.can_discard = true,
		.can_write_zeroes = true,
		.can_multi_conn = true,
		.status = DISK_CTX_BIT(DISK_CTX_ALLOCATION),
	};
	return 0;
}
