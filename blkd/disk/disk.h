/* SPDX-License-Identifier: MIT */
/*
 * One disk interface for every transport (NBD, vhost-user-blk, the VMM's virtio-mmio),
 * after kvmtool's disk_image_operations and nbdkit's struct backend: a table of
 * operations, a context, a size and what the disk can do (can_* flags). Two disks
 * implement it: the lazy image (disk_engine.c, over a struct blkd_engine) and a raw file
 * or block device (disk_raw.c). A transport takes a struct disk and never knows which.
 *
 * Rules every implementation keeps (and every transport relies on):
 *   - offsets and lengths are bytes, multiples of DISK_SECTOR (512), inside [0, size);
 *     anything else is -EINVAL (the transports check first and answer in their own way);
 *   - results are 0 or -errno: -EIO a read or write that failed (for the lazy image also
 *     a chunk missing from every tier, or corrupt), -EINVAL a bad range, -EPERM or -EROFS
 *     a write to a read-only disk, -ENOSPC/-EDQUOT/-EFBIG no room, -EOPNOTSUPP an
 *     operation the disk does not offer;
 *   - thread-safe: any number of threads may call any operation at once; a flush makes
 *     every write that completed before it was called durable, whichever thread made it
 *     (so NBD may offer multi-conn when can_multi_conn says so);
 *   - a write with fua is durable when it returns;
 *   - discard: the range's blocks may be deallocated; afterwards it reads as zeros or as
 *     before (the lazy image zeroes the whole 4 KiB blocks inside it, a raw file punches a
 *     hole: zeros). write_zeroes: afterwards the range reads as zeros; with may_unmap the
 *     disk may deallocate it (a hole), without it the space stays allocated where the
 *     disk can keep it so;
 *   - block_status walks [off, off+len) for one context (DISK_CTX_*): cb(arg, off, len,
 *     flags) for consecutive extents from off on, together covering at most len (they may
 *     stop short: the caller asks again from where they end); cb returns 0 to go on, > 0
 *     to stop (the walk returns 0), < 0 to fail (returned as is);
 *   - read_sparse (optional; disk_read_sparse() below) reads and says where the zeros are
 *     in one walk of the disk.
 *
 * An operation the disk cannot do has its can_* flag false and may be NULL in the table;
 * the disk_*() helpers below then return -EOPNOTSUPP (disk_flush(): 0, nothing to flush).
 * read, write and flush are always there (a read-only disk's write says -EPERM/-EROFS).
 */
#ifndef LZ_BLKD_DISK_H
#define LZ_BLKD_DISK_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../block_status.h"
#include "../sector.h"

#define DISK_SECTOR BLKD_SECTOR


struct disk_ops {
	int (*read)(void *ctx, uint64_t off, uint32_t len, void *buf);
	int (*write)(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua);
	int (*flush)(void *ctx);
	int (*discard)(void *ctx, uint64_t off, uint64_t len);
	int (*write_zeroes)(void *ctx, uint64_t off, uint64_t len, bool may_unmap);
	int (*block_status)(void *ctx, enum disk_ctx c, uint64_t off, uint64_t len,
			    disk_extent_fn cb, void *arg);
	/*
	 * A point-in-time delta of the disk's changes to delta_path (the lazy image's overlay:
	 * blkd_engine_snapshot); dirty/zero (may be NULL) get the blocks it records; on
	 * failure *why (may be NULL) gets a reason or NULL (then strerror of the result).
	 */
	int (*snapshot)(void *ctx, const char *delta_path, uint64_t *dirty, uint64_t *zero,
			const char **why);
	/* ---- the read plan (issue 26, item 3): a read and its allocation in one walk */
	/*
	 * Read [off, off+len) into buf (buf[0] is off) and report the range's allocation as
	 * the read goes: cb(arg, off, len, flags) for consecutive extents from off on, covering
	 * the whole range, each told once its bytes are in buf. flags are base:allocation's:
	 * DISK_STATUS_HOLE|DISK_STATUS_ZERO both set, the extent reads as zeros and its bytes in
	 * buf are left as they were (not written); otherwise it was read into buf. cb returns 0
	 * to go on; > 0: no more extents, the rest of the range is read into buf whole (zeros
	 * written); < 0 fails the read (returned as is). On a failure the extents told are read
	 * and the one after the last of them is where it failed. Counted as one read. NULL: the
	 * generic way (disk_read_sparse()).
	 */
	int (*read_sparse)(void *ctx, uint64_t off, uint32_t len, void *buf, disk_extent_fn cb,
			   void *arg);
	/* The disk's statistics on f: human lines (the first starts "requests "), or one JSON
	 * object on one line when json. */
	void (*stats)(void *ctx, FILE *f, bool json);
	void (*close)(void *ctx);  /* NULL: the disk owns nothing (disk_close() is a no-op) */
};

struct disk {
	const struct disk_ops *ops;
	void *ctx;
	uint64_t size;             /* bytes, a multiple of DISK_SECTOR */
	const char *description;   /* for humans (NBD_INFO_DESCRIPTION), may be NULL */
	bool read_only;            /* writes, discards and write-zeroes are refused */
	bool can_flush;            /* flush is offered (NBD_FLAG_SEND_FLUSH); else a no-op */
	bool can_fua;              /* write(fua) is durable when it returns */
	bool can_discard, can_write_zeroes;
	bool can_multi_conn;       /* a flush covers writes made through any caller */
	bool can_snapshot;
	unsigned status;           /* DISK_CTX_BIT()s of the contexts block_status knows */
};

/* The lazy image as a disk (disk_engine.c); e must outlive it, disk_close() leaves it open. */
struct blkd_engine;
void disk_engine(struct blkd_engine *e, struct disk *out);

/*
 * A raw disk file or block device (disk_raw.c), opened read-write or read-only. Its size
 * is the file's, rounded down to DISK_SECTOR (-EINVAL for anything but a regular file or
 * a block device, and for a size under one sector). I/O through io_uring (common/uring.h);
 * flush is fdatasync; discard punches a hole; write_zeroes punches a hole (may_unmap) or
 * zeroes the range in place (FALLOC_FL_ZERO_RANGE), writing zeros where the file system
 * can do neither; block status (allocation) from SEEK_DATA/SEEK_HOLE. -errno; prints
 * nothing.
 */
int disk_raw_open(const char *path, bool read_only, struct disk *out);

/*
 * 0 when d is usable: a table with read, write and flush, an operation for every can_*
 * flag and context it claims, a size that is a multiple of DISK_SECTOR. -EINVAL if not.
 */
int disk_check(const struct disk *d);
/* Free what the disk owns (a raw disk's descriptor) and zero *d; a zeroed disk is a no-op. */
void disk_close(struct disk *d);

/* ---- calling a disk: dispatch, -EOPNOTSUPP for what it does not offer */

static inline int disk_read(const struct disk *d, uint64_t off, uint32_t len, void *buf)
{
	return d->ops->read(d->ctx, off, len, buf);
}

/*
 * The disk's read_sparse (see struct disk_ops), or for a disk without one the generic way:
 * the allocation walk of block_status, each data extent read with read as it comes (a disk
 * with no allocation context: the whole range as data, one extent).
 */
int disk_read_sparse(const struct disk *d, uint64_t off, uint32_t len, void *buf,
		     disk_extent_fn cb, void *arg);

static inline int disk_write(const struct disk *d, uint64_t off, uint32_t len,
			     const void *buf, bool fua)
{
	int ret = d->ops->write(d->ctx, off, len, buf, fua && d->can_fua);

	if (!ret && fua && !d->can_fua && d->can_flush)
		ret = d->ops->flush(d->ctx);
	return ret;
}

static inline int disk_flush(const struct disk *d)
{
	return d->can_flush ? d->ops->flush(d->ctx) : 0;
}

static inline int disk_discard(const struct disk *d, uint64_t off, uint64_t len)
{
	return d->can_discard ? d->ops->discard(d->ctx, off, len) : -EOPNOTSUPP;
}

static inline int disk_write_zeroes(const struct disk *d, uint64_t off, uint64_t len,
				    bool may_unmap)
{
	return d->can_write_zeroes ? d->ops->write_zeroes(d->ctx, off, len, may_unmap)
				   : -EOPNOTSUPP;
}

static inline bool disk_has_status(const struct disk *d, enum disk_ctx c)
{
	return (unsigned)c < DISK_CTX_COUNT && (d->status & DISK_CTX_BIT(c)) &&
	       d->ops->block_status;
}

static inline int disk_block_status(const struct disk *d, enum disk_ctx c, uint64_t off,
				    uint64_t len, disk_extent_fn cb, void *arg)
{
	return disk_has_status(d, c) ? d->ops->block_status(d->ctx, c, off, len, cb, arg)
				     : -EOPNOTSUPP;
}

static inline int disk_snapshot(const struct disk *d, const char *delta_path, uint64_t *dirty,
				uint64_t *zero, const char **why)
{
	if (why)
		*why = NULL;
	return d->can_snapshot ? d->ops->snapshot(d->ctx, delta_path, dirty, zero, why)
			       : -EOPNOTSUPP;
}

static inline void disk_stats(const struct disk *d, FILE *f, bool json)
{
	if (d->ops->stats)
		d->ops->stats(d->ctx, f, json);
	else if (json)
		fputs("{}\n", f);
}

#endif
