/* SPDX-License-Identifier: MIT */
/*
 * One disk interface for every transport (NBD, vhost-user-blk, the VMM's virtio-mmio),
 * after kvmtool's disk_image_operations and nbdkit's struct backend: a table of
 * operations, a context, a size and what the disk can do (can_* flags). Two disks
 * implement it: the lazy image (disk_engine.c, over a struct blkd_engine) and a raw file
 * or block device (disk_raw.c), both opened by disk_open() (disk_open.c) from a struct
 * disk_spec. A transport takes a struct disk and never knows which; what only the image
 * has (its layout, traces, tier counters) is asked of the disk too, below.
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
#include <stddef.h>
#include <stdio.h>

#include "../../cas/source.h"
#include "../../common/why.h"
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
	 * failure why (common/why.h) gets a reason, or stays empty (then strerror of the
	 * result).
	 */
	int (*snapshot)(void *ctx, const char *delta_path, uint64_t *dirty, uint64_t *zero,
			char *why, size_t why_len);
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

/*
 * ---- opening a disk: the one way in
 *
 * What disk_open opens: the lazy image (a layout with its store and chunk tiers, an
 * overlay, traces) or a raw file or block device (raw_path). Fields that do not apply are
 * zero. Every transport, the VMM, the control socket, snapshots and the file exporter get
 * their disk this way; the engine behind an image (blkd/engine/) is the disk module's own.
 */
struct disk_spec {
	const char *raw_path;      /* a raw file or block device; NULL: the image below */
	bool read_only;            /* writes refused (the image: its overlay left untouched) */
	/* the lazy image */
	const char *layout_path;
	bool layout_fetched;       /* an image fetched by reference (layout_open_flags) */
	struct cas_source_opts tiers;  /* store_dir (needed), remote, cache, plain, fetching */
	const char *overlay_path;  /* copy-on-write overlay of writes; NULL: read-only */
	uint64_t mem_cache;        /* decompressed chunks kept in memory (0: 256 MiB) */
	/* boot traces (blkd/coldstart/): both need the manifest the layout was made from */
	const char *manifest_path;
	const char *trace_record;  /* record first touches, written here (disk_trace_finish) */
	const char *prefetch_trace; /* replay this trace's chunks in the background */
	bool prefetch_all;         /* then every other chunk of the layout */
	/*
	 * Chunks loaded ahead of sequential reads: 0 default (the fetch concurrency, 16), < 0
	 * none; by default none with a trace prefetch.
	 */
	int readahead;
	/* At open: the store or remote can give the image's first chunks (cas_source_check). */
	bool check;
	/* notes of the open (a trace of another version) and, for the disk's life, the
	 * overlay running out of room and recovering */
	struct note_sink notes;
};

/*
 * Open the disk spec describes into *out (disk_close() frees all it owns). 0, or -errno
 * with one line in why (why_len bytes, may be 0), nothing opened:
 *   - a bad spec, -EINVAL: "no disk: give an image layout or a raw file", "both an image
 *     layout (L) and a raw file (F): one disk is one or the other", "L: no store for the
 *     image's chunks", "F: a raw disk takes no store, overlay, remote or traces";
 *   - the image: what its layout, store, remote, trace or overlay says ("IMAGE.layout: bad
 *     magic (not a lazyblk layout)", "OVERLAY: belongs to layout sha256:..."; with check,
 *     cas_source_check's reason ending "(--no-check to serve anyway)");
 *   - a raw file: "F: not a disk (want a regular file or a block device of at least 512
 *     bytes)" (-EINVAL), else "F: strerror" (-EACCES, -EROFS, -EPERM: open it read-only).
 * Prints nothing; the image's threads (read-ahead, prefetch) log what fails on them.
 */
int disk_open(const struct disk_spec *spec, struct disk *out, char *why, size_t why_len);

/*
 * ---- what only the lazy image has (-EOPNOTSUPP, or NULL, for any other disk)
 *
 * disk_layout_digest: the layout's digest (sha256 of its header), which names the disk
 * (VM snapshots). disk_layout: the image's layout, valid while the disk is open.
 * disk_trace_finish: stop recording (spec.trace_record) and write the trace there (or to
 * path, if not NULL): -ENOENT not recording, -EALREADY written already; *records the count
 * written, why (cleared on entry) a reason, or empty. disk_trace_path: where the trace goes
 * (NULL: not recording). disk_image_stats: the counters lazyblk export reports.
 * disk_stats_cas_text/_json: the store/remote/plain/cache counters formatted as serve's
 * statistics name them (text lines, or members of a JSON object) appended to b.
 */
struct layout;
struct json_buf;
struct disk_image_stats {
	uint64_t chunk_loads;         /* chunks loaded into memory (misses of the memory tier) */
	struct cas_source_stats cas;  /* the store, remote, plain and cache tiers */
};
int disk_layout_digest(const struct disk *d, uint8_t out[32]);
const struct layout *disk_layout(const struct disk *d);
int disk_trace_finish(const struct disk *d, const char *path, uint64_t *records,
		      char *why, size_t why_len);
const char *disk_trace_path(const struct disk *d);
int disk_image_stats(const struct disk *d, struct disk_image_stats *st);
void disk_stats_cas_text(const struct cas_source_stats *c, struct json_buf *b);
void disk_stats_cas_json(const struct cas_source_stats *c, struct json_buf *b);

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
				uint64_t *zero, char *why, size_t why_len)
{
	if (why_len)
		why[0] = '\0';
	return d->can_snapshot ? d->ops->snapshot(d->ctx, delta_path, dirty, zero, why, why_len)
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
