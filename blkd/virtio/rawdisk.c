/* SPDX-License-Identifier: MIT */
/* blkd/virtio/rawdisk: a raw disk file (or block device) as a virtio-blk backend. */
#include "virtio_blk.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/uring.h"

struct rawdisk {
	int fd;
	uint64_t size;
};

static bool raw_range_ok(const struct rawdisk *r, uint64_t off, uint64_t len)
{
	return !(off % BLKD_SECTOR) && !(len % BLKD_SECTOR) && off <= r->size &&
	       len <= r->size - off;
}

static int raw_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	struct rawdisk *r = ctx;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	return uring_pread_full(r->fd, buf, len, (off_t)off);
}

static int raw_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	struct rawdisk *r = ctx;
	int ret;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	ret = uring_pwrite_full(r->fd, buf, len, (off_t)off);
	if (!ret && fua)
		ret = uring_fdatasync(r->fd);
	return ret;
}

static int raw_write_ro(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	(void)ctx, (void)off, (void)len, (void)buf, (void)fua;
	return -EROFS;
}

static int raw_flush(void *ctx)
{
	return uring_fdatasync(((struct rawdisk *)ctx)->fd);
}

static int raw_flush_ro(void *ctx)
{
	(void)ctx;
	return 0;
}

static int raw_discard(void *ctx, uint64_t off, uint64_t len)
{
	struct rawdisk *r = ctx;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	if (!len || !fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
			       (off_t)len))
		return 0;
	/* a hint: a file system without holes keeps the data */
	return errno == EOPNOTSUPP ? 0 : -errno;
}

static int raw_write_zeroes(void *ctx, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[65536];
	struct rawdisk *r = ctx;
	int ret;

	if (!raw_range_ok(r, off, len))
		return -EINVAL;
	if (!len)
		return 0;
	if (!fallocate(r->fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	if (!fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len))
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	while (len) {
		uint32_t n = len < sizeof(zeros) ? (uint32_t)len : sizeof(zeros);

		ret = uring_pwrite_full(r->fd, zeros, n, (off_t)off);
		if (ret < 0)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

int vblk_backend_raw_open(const char *path, bool read_only, struct vblk_backend *out)
{
	struct rawdisk *r;
	struct stat st;
	uint64_t size;
	int fd, err;

	fd = open(path, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		goto fail_errno;
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, &size) < 0)
			goto fail_errno;
	} else if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else {
		errno = EINVAL;
		goto fail_errno;
	}
	r = malloc(sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		goto fail_errno;
	}
	r->fd = fd;
	r->size = size / BLKD_SECTOR * BLKD_SECTOR;
	*out = (struct vblk_backend){
		.ctx = r,
		.size = r->size,
		.read_only = read_only,
		.read = raw_read,
		.write = read_only ? raw_write_ro : raw_write,
		.flush = read_only ? raw_flush_ro : raw_flush,
		.discard = read_only ? NULL : raw_discard,
		.write_zeroes = read_only ? NULL : raw_write_zeroes,
	};
	return 0;

fail_errno:
	err = -errno;
	close(fd);
	return err;
}

void vblk_backend_raw_close(struct vblk_backend *b)
{
	struct rawdisk *r = b->ctx;

	if (r) {
		close(r->fd);
		free(r);
	}
	b->ctx = NULL;
}
