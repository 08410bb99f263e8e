/* SPDX-License-Identifier: MIT */
/*
 * A disk in memory (blkd/disk/disk.h) for the transport targets: FUZZ_DISK bytes, every
 * operation and both block status contexts offered, so that every request a client or a
 * guest can make reaches the disk. Block status reports 64 KiB extents, alternately data
 * and hole (allocation) or clean and dirty.
 */
#ifndef LZ_FUZZ_DISK_H
#define LZ_FUZZ_DISK_H

#include "fuzz.h"
#include "../blkd/disk/disk.h"

#define FUZZ_DISK (1u << 20)
#define FUZZ_EXTENT (64u << 10)

static uint8_t fuzz_disk_bytes[FUZZ_DISK];

static int md_check(uint64_t off, uint64_t len)
{
	if (off % DISK_SECTOR || len % DISK_SECTOR || off > FUZZ_DISK || len > FUZZ_DISK - off)
		abort(); /* the transports check ranges before calling a disk */
	return 0;
}

static int md_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	(void)ctx;
	md_check(off, len);
	if (len)
		memcpy(buf, fuzz_disk_bytes + off, len);
	return 0;
}

static int md_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	(void)ctx;
	(void)fua;
	md_check(off, len);
	if (len) /* a 0-byte write may come with no buffer */
		memcpy(fuzz_disk_bytes + off, buf, len);
	return 0;
}

static int md_flush(void *ctx)
{
	(void)ctx;
	return 0;
}

static int md_zero(void *ctx, uint64_t off, uint64_t len, bool may_unmap)
{
	(void)ctx;
	(void)may_unmap;
	md_check(off, len);
	memset(fuzz_disk_bytes + off, 0, len);
	return 0;
}

static int md_discard(void *ctx, uint64_t off, uint64_t len)
{
	return md_zero(ctx, off, len, true);
}

static int md_status(void *ctx, enum disk_ctx c, uint64_t off, uint64_t len, disk_extent_fn cb,
		     void *arg)
{
	(void)ctx;
	md_check(off, len);
	while (len) {
		uint64_t n = FUZZ_EXTENT - off % FUZZ_EXTENT;
		uint32_t odd = (uint32_t)(off / FUZZ_EXTENT) & 1;
		int ret;

		n = n < len ? n : len;
		ret = cb(arg, off, n, c == DISK_CTX_ALLOCATION ? odd * 3 : odd);
		if (ret)
			return ret < 0 ? ret : 0;
		off += n;
		len -= n;
	}
	return 0;
}

static const struct disk_ops fuzz_disk_ops = {
	.read = md_read,
	.write = md_write,
	.flush = md_flush,
	.discard = md_discard,
	.write_zeroes = md_zero,
	.block_status = md_status,
};

static inline void fuzz_disk(struct disk *d)
{
	*d = (struct disk){
		.ops = &fuzz_disk_ops,
		.size = FUZZ_DISK,
		.description = "fuzz",
		.can_flush = true,
		.can_fua = true,
		.can_discard = true,
		.can_write_zeroes = true,
		.can_multi_conn = true,
		.status = DISK_CTX_BIT(DISK_CTX_ALLOCATION) | DISK_CTX_BIT(DISK_CTX_DIRTY),
	};
}

#endif
