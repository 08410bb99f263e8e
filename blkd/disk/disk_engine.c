/* SPDX-License-Identifier: MIT */
/*
 * blkd/disk/disk_engine: the lazy image (a struct blkd_engine) as a disk, and what only the
 * image has (disk.h: its layout, traces, tier counters), asked of the disk.
 */
#include "disk_int.h"

#include "../engine/engine.h"

static int eng_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	return blkd_engine_read(ctx, off, len, buf);
}

static int eng_read_sparse(void *ctx, uint64_t off, uint32_t len, void *buf, disk_extent_fn cb,
			   void *arg)
{
	return blkd_engine_read_sparse(ctx, off, len, buf, cb, arg);
}

static int eng_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	return blkd_engine_write(ctx, off, len, buf, fua);
}

static int eng_flush(void *ctx)
{
	return blkd_engine_flush(ctx);
}

static int eng_discard(void *ctx, uint64_t off, uint64_t len)
{
	return blkd_engine_discard(ctx, off, len);
}

/* Zeroed blocks are recorded as such in the overlay: a hole or not, they cost nothing. */
static int eng_write_zeroes(void *ctx, uint64_t off, uint64_t len, bool may_unmap)
{
	(void)may_unmap;
	return blkd_engine_write_zeroes(ctx, off, len);
}

static int eng_block_status(void *ctx, enum disk_ctx c, uint64_t off, uint64_t len,
			    disk_extent_fn cb, void *arg)
{
	return blkd_engine_status(ctx, c, off, len, cb, arg);
}

static int eng_snapshot(void *ctx, const char *delta_path, uint64_t *dirty, uint64_t *zero,
			char *why, size_t why_len)
{
	return blkd_engine_snapshot(ctx, delta_path, dirty, zero, why, why_len);
}

static void eng_stats(void *ctx, FILE *f, bool json)
{
	blkd_engine_print_stats(ctx, f, json);
}

static void eng_close(void *ctx)
{
	blkd_engine_close(ctx);
}

/* The disk owns its engine: disk_close() closes it. */
static const struct disk_ops engine_ops = {
	.read = eng_read,
	.write = eng_write,
	.flush = eng_flush,
	.discard = eng_discard,
	.write_zeroes = eng_write_zeroes,
	.block_status = eng_block_status,
	.read_sparse = eng_read_sparse,
	.snapshot = eng_snapshot,
	.stats = eng_stats,
	.close = eng_close,
};

void disk_engine(struct blkd_engine *e, struct disk *out)
{
	*out = (struct disk){
		.ops = &engine_ops,
		.ctx = e,
		.size = blkd_engine_size(e) / DISK_SECTOR * DISK_SECTOR,
		.description = "lazyblk lazily loaded disk",
		.read_only = blkd_engine_read_only(e),
		.can_flush = true,
		.can_fua = true,
		.can_discard = true,
		.can_write_zeroes = true,
		.can_multi_conn = true,
		/* an engine without an overlay answers -ENOENT, said by the snapshot's caller */
		.can_snapshot = true,
		.status = DISK_CTX_BIT(DISK_CTX_ALLOCATION) | DISK_CTX_BIT(DISK_CTX_DIRTY),
	};
}


/* The engine behind d, or NULL when d is not the lazy image. */
static struct blkd_engine *disk_to_engine(const struct disk *d)
{
	return d->ops == &engine_ops ? d->ctx : NULL;
}

int disk_layout_digest(const struct disk *d, uint8_t out[32])
{
	struct blkd_engine *e = disk_to_engine(d);

	if (!e)
		return -EOPNOTSUPP;
	blkd_engine_layout_digest(e, out);
	return 0;
}

const struct layout *disk_layout(const struct disk *d)
{
	struct blkd_engine *e = disk_to_engine(d);

	return e ? blkd_engine_layout(e) : NULL;
}

int disk_trace_finish(const struct disk *d, const char *path, uint64_t *records,
		      char *why, size_t why_len)
{
	struct blkd_engine *e = disk_to_engine(d);

	if (why_len)
		why[0] = '\0';
	return e ? blkd_engine_trace_finish(e, path, records, why, why_len) : -EOPNOTSUPP;
}

const char *disk_trace_path(const struct disk *d)
{
	struct blkd_engine *e = disk_to_engine(d);

	return e ? blkd_engine_trace_path(e) : NULL;
}

int disk_image_stats(const struct disk *d, struct disk_image_stats *st)
{
	struct blkd_engine *e = disk_to_engine(d);
	struct blkd_engine_stats es;

	if (!e)
		return -EOPNOTSUPP;
	blkd_engine_get_stats(e, &es);
	*st = (struct disk_image_stats){ .chunk_loads = es.chunk_loads, .cas = es.cas };
	return 0;
}

void disk_stats_cas_text(const struct cas_source_stats *c, struct json_buf *b)
{
	blkd_stats_cas_text(c, b);
}

void disk_stats_cas_json(const struct cas_source_stats *c, struct json_buf *b)
{
	blkd_stats_cas_json(c, b);
}
