/* SPDX-License-Identifier: MIT */
/* blkd/virtio/virtio_blk: virtio-blk requests on a disk, shared by every virtio transport. */
#include "virtio_blk.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>

#include "../../common/le.h"

#define HDR_LEN 16u   /* le32 type, le32 reserved (ioprio), le64 sector */
#define DWZ_LEN 16u   /* le64 sector, le32 num_sectors, le32 flags */

#define BIT(n) (1ull << (n))
#define STAT(d, f, v) __atomic_fetch_add(&(d)->st.f, (v), __ATOMIC_RELAXED)

_Static_assert(offsetof(struct virtio_blk_config, unused1) + 3 == VBLK_CONFIG_SIZE,
	       "config layout");

#define CFG(d, field) ((d)->config + offsetof(struct virtio_blk_config, field))

int vblk_dev_init(struct vblk_dev *d, const struct disk *disk, unsigned num_queues,
		  const char *serial)
{
	uint64_t f;

	memset(d, 0, sizeof(*d));
	if (disk_check(disk) || !num_queues || num_queues > 256)
		return -EINVAL;
	d->disk = disk;
	d->num_queues = num_queues;
	if (serial)
		memcpy(d->serial, serial, strnlen(serial, sizeof(d->serial)));

	f = BIT(VIRTIO_F_VERSION_1) | BIT(VIRTQ_F_INDIRECT_DESC) | BIT(VIRTQ_F_EVENT_IDX) |
	    BIT(VIRTIO_BLK_F_SEG_MAX) | BIT(VIRTIO_BLK_F_BLK_SIZE) | BIT(VIRTIO_BLK_F_FLUSH) |
	    BIT(VIRTIO_BLK_F_TOPOLOGY);
	if (disk->read_only) {
		f |= BIT(VIRTIO_BLK_F_RO);
	} else {
		if (disk->can_discard)
			f |= BIT(VIRTIO_BLK_F_DISCARD);
		if (disk->can_write_zeroes)
			f |= BIT(VIRTIO_BLK_F_WRITE_ZEROES);
	}
	if (num_queues > 1)
		f |= BIT(VIRTIO_BLK_F_MQ);
	d->features = f;

	le64_put(CFG(d, capacity), disk->size / BLKD_SECTOR);
	le32_put(CFG(d, seg_max), VBLK_SEG_MAX);
	le32_put(CFG(d, blk_size), BLKD_SECTOR);
	*CFG(d, physical_block_exp) = 3;                 /* 4096-byte physical blocks */
	le16_put(CFG(d, min_io_size), DISK_BLOCK / BLKD_SECTOR);
	le16_put(CFG(d, num_queues), (uint16_t)num_queues);
	le32_put(CFG(d, max_discard_sectors), VBLK_MAX_DISCARD_SECTORS);
	le32_put(CFG(d, max_discard_seg), VBLK_DISCARD_SEG_MAX);
	le32_put(CFG(d, discard_sector_alignment), DISK_BLOCK / BLKD_SECTOR);
	le32_put(CFG(d, max_write_zeroes_sectors), VBLK_MAX_DISCARD_SECTORS);
	le32_put(CFG(d, max_write_zeroes_seg), VBLK_DISCARD_SEG_MAX);
	*CFG(d, write_zeroes_may_unmap) = 1;
	return 0;
}

int vblk_dev_ack_features(struct vblk_dev *d, uint64_t driver)
{
	if ((driver & ~d->features) || !(driver & BIT(VIRTIO_F_VERSION_1)))
		return -EINVAL;
	d->acked = driver;
	return 0;
}

void vblk_config_read(const struct vblk_dev *d, uint32_t off, void *buf, uint32_t len)
{
	uint8_t *out = buf;

	for (uint32_t i = 0; i < len; i++)
		out[i] = off < VBLK_CONFIG_SIZE && i < VBLK_CONFIG_SIZE - off ? d->config[off + i] : 0;
}

int vblk_ring_setup(const struct vblk_dev *d, struct vring_queue *vq, const struct gmem *mem,
		    unsigned num, uint64_t desc, uint64_t avail, uint64_t used)
{
	return vring_setup(vq, mem, num, desc, avail, used,
			   d->acked & BIT(VIRTQ_F_INDIRECT_DESC), d->acked & BIT(VIRTQ_F_EVENT_IDX));
}

void vblk_get_stats(const struct vblk_dev *d, struct vblk_stats *st)
{
	const uint64_t *src = (const uint64_t *)&d->st;
	uint64_t *dst = (uint64_t *)st;

	for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

/*
 * A position in one direction of a chain (readable segments, or writable ones), so that
 * requests never depend on where the driver split its descriptors.
 */
struct cursor {
	const struct vring_chain *c;
	unsigned i, end;     /* current segment, one past the last of this direction */
	uint32_t off;        /* inside seg[i] */
};

static void cursor_init(struct cursor *k, const struct vring_chain *c, bool wr, uint64_t pos)
{
	k->c = c;
	k->i = wr ? c->nrd : 0;
	k->end = wr ? c->nseg : c->nrd;
	k->off = 0;
	while (k->i < k->end && pos >= c->seg[k->i].len) {
		pos -= c->seg[k->i].len;
		k->i++;
	}
	k->off = (uint32_t)pos;
}

/* Bytes left in the current segment (0 at the end), and its host address. */
static uint32_t cursor_span(struct cursor *k, uint8_t **p)
{
	while (k->i < k->end && k->off == k->c->seg[k->i].len) {
		k->i++;
		k->off = 0;
	}
	if (k->i == k->end)
		return 0;
	*p = k->c->seg[k->i].p + k->off;
	return k->c->seg[k->i].len - k->off;
}

static void cursor_skip(struct cursor *k, uint32_t n)
{
	k->off += n;
}

/* Copy between a flat buffer and the chain; the caller has checked the length. */
static void cursor_copy(struct cursor *k, void *buf, uint32_t len, bool to_chain)
{
	uint8_t *b = buf, *p;

	while (len) {
		uint32_t n = cursor_span(k, &p);

		if (n > len)
			n = len;
		if (to_chain)
			memcpy(p, b, n);
		else
			memcpy(b, p, n);
		cursor_skip(k, n);
		b += n;
		len -= n;
	}
}

/*
 * How much of a write's span of n contiguous guest bytes at disk offset off (len bytes left
 * in the request) goes to the disk straight from guest memory: all of it when it ends the
 * request, else up to the last block boundary in it. 0: the span ends inside a block that
 * the next segment goes on with (or is less than a sector), which is then gathered whole.
 */
static uint32_t write_span(uint64_t off, uint32_t n, uint64_t len)
{
	uint32_t tail;

	if (n >= len)
		return (uint32_t)len;
	n &= ~(BLKD_SECTOR - 1);
	tail = (uint32_t)((off + n) % DISK_BLOCK);
	return n > tail ? n - tail : 0;
}

/*
 * Move len bytes (a multiple of 512) between the disk at off and the chain's data at
 * stream position pos, straight into or out of guest memory a segment at a time. A read's
 * sector split across segments goes through a sector's bounce buffer; a write's block
 * split across segments is gathered into a block's, so the disk gets it in one call (a
 * block written in two parts would be read, modified and written twice by the overlay).
 */
static int data_io(const struct disk *b, const struct vring_chain *c, bool to_guest,
		   uint64_t pos, uint64_t off, uint64_t len)
{
	struct cursor k;
	uint8_t bounce[DISK_BLOCK], *p;
	int ret;

	cursor_init(&k, c, to_guest, pos);
	while (len) {
		uint32_t n = cursor_span(&k, &p);

		if (!to_guest && (n = write_span(off, n, len))) {
			ret = disk_write(b, off, n, p, false);
			cursor_skip(&k, n);
		} else if (!to_guest) {
			n = DISK_BLOCK - (uint32_t)(off % DISK_BLOCK);
			if (n > len)
				n = (uint32_t)len;
			cursor_copy(&k, bounce, n, false);
			ret = disk_write(b, off, n, bounce, false);
		} else if (n >= BLKD_SECTOR) {
			n &= ~(BLKD_SECTOR - 1);
			if (n > len)
				n = (uint32_t)len;
			ret = disk_read(b, off, n, p);
			cursor_skip(&k, n);
		} else {
			n = BLKD_SECTOR;
			ret = disk_read(b, off, n, bounce);
			if (ret >= 0)
				cursor_copy(&k, bounce, n, true);
		}
		if (ret < 0)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

static bool range_ok(const struct vblk_dev *d, uint64_t sector, uint64_t nsect)
{
	uint64_t cap = d->disk->size / BLKD_SECTOR;

	return sector <= cap && nsect <= cap - sector;
}

static uint8_t do_rw(struct vblk_dev *d, const struct vring_chain *c, bool in, uint64_t sector,
		     uint64_t data_len)
{
	int ret;

	if (data_len % BLKD_SECTOR || !range_ok(d, sector, data_len / BLKD_SECTOR))
		return VIRTIO_BLK_S_IOERR;
	if (!in && d->disk->read_only)
		return VIRTIO_BLK_S_IOERR;
	ret = data_io(d->disk, c, in, in ? 0 : HDR_LEN, sector * BLKD_SECTOR, data_len);
	if (ret < 0)
		return VIRTIO_BLK_S_IOERR;
	if (in) {
		STAT(d, reads, 1);
		STAT(d, read_bytes, data_len);
	} else {
		STAT(d, writes, 1);
		STAT(d, write_bytes, data_len);
	}
	return VIRTIO_BLK_S_OK;
}

static uint8_t do_get_id(struct vblk_dev *d, const struct vring_chain *c, uint64_t data_len)
{
	struct cursor k;

	cursor_init(&k, c, true, 0);
	cursor_copy(&k, d->serial, data_len < VBLK_ID_BYTES ? (uint32_t)data_len : VBLK_ID_BYTES,
		    true);
	STAT(d, get_ids, 1);
	return VIRTIO_BLK_S_OK;
}

/* One segment of a DISCARD / WRITE_ZEROES request, as copied out of guest memory. */
struct dwz_seg {
	uint64_t sector;
	uint32_t nsect, flags;
};

/*
 * DISCARD / WRITE_ZEROES: the segments are copied out of guest memory once, every one is
 * checked, and then the checked copies are executed. The guest may rewrite its buffers
 * at any time: a second read could differ from what was checked.
 */
static uint8_t do_dwz(struct vblk_dev *d, const struct vring_chain *c, bool wz)
{
	uint64_t feat = wz ? BIT(VIRTIO_BLK_F_WRITE_ZEROES) : BIT(VIRTIO_BLK_F_DISCARD);
	uint32_t allowed = wz ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
	uint64_t n = (c->rd_len - HDR_LEN) / DWZ_LEN;
	struct dwz_seg seg[VBLK_DISCARD_SEG_MAX];
	struct cursor k;

	if (!(d->acked & feat))
		return VIRTIO_BLK_S_UNSUPP;
	if (d->disk->read_only)
		return VIRTIO_BLK_S_IOERR;
	if ((c->rd_len - HDR_LEN) % DWZ_LEN || !n || n > VBLK_DISCARD_SEG_MAX)
		return VIRTIO_BLK_S_IOERR;
	cursor_init(&k, c, false, HDR_LEN);
	for (uint64_t i = 0; i < n; i++) {
		uint8_t s[DWZ_LEN];

		cursor_copy(&k, s, DWZ_LEN, false);
		seg[i] = (struct dwz_seg){
			.sector = le64_get(s), .nsect = le32_get(s + 8), .flags = le32_get(s + 12),
		};
		if (seg[i].flags & ~allowed)
			return VIRTIO_BLK_S_UNSUPP;
		if (seg[i].nsect > VBLK_MAX_DISCARD_SECTORS ||
		    !range_ok(d, seg[i].sector, seg[i].nsect))
			return VIRTIO_BLK_S_IOERR;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = seg[i].sector * BLKD_SECTOR, len = (uint64_t)seg[i].nsect * BLKD_SECTOR;
		int ret;

		if (wz)
			ret = disk_write_zeroes(d->disk, off, len,
						seg[i].flags & VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
		else
			ret = disk_discard(d->disk, off, len);
		if (ret < 0)
			return VIRTIO_BLK_S_IOERR;
	}
	if (wz)
		STAT(d, write_zeroes, 1);
	else
		STAT(d, discards, 1);
	return VIRTIO_BLK_S_OK;
}

static uint8_t request_exec(struct vblk_dev *d, const struct vring_chain *c)
{
	uint8_t hdr[HDR_LEN];
	uint64_t wr_data = c->wr_len - 1, sector;
	uint32_t type;
	struct cursor k;

	if (c->rd_len < HDR_LEN)
		return VIRTIO_BLK_S_IOERR;
	/* header + data + status: more data segments than SEG_MAX allows is a driver bug */
	if (c->nseg > VBLK_SEG_MAX + 2)
		return VIRTIO_BLK_S_IOERR;
	cursor_init(&k, c, false, 0);
	cursor_copy(&k, hdr, HDR_LEN, false);
	type = le32_get(hdr);
	sector = le64_get(hdr + 8);

	/*
	 * Directions: a request whose data goes to the device has only the status byte
	 * writable; one whose data comes from the device has only the header readable.
	 * Anything else is a malformed request, answered with an error, never half-executed.
	 */
	switch (type) {
	case VIRTIO_BLK_T_IN:
	case VIRTIO_BLK_T_GET_ID:
		if (c->rd_len != HDR_LEN)
			return VIRTIO_BLK_S_IOERR;
		break;
	case VIRTIO_BLK_T_OUT:
	case VIRTIO_BLK_T_DISCARD:
	case VIRTIO_BLK_T_WRITE_ZEROES:
	case VIRTIO_BLK_T_FLUSH:
		if (c->wr_len != 1)
			return VIRTIO_BLK_S_IOERR;
		break;
	}
	switch (type) {
	case VIRTIO_BLK_T_IN:
		return do_rw(d, c, true, sector, wr_data);
	case VIRTIO_BLK_T_OUT:
		return do_rw(d, c, false, sector, c->rd_len - HDR_LEN);
	case VIRTIO_BLK_T_FLUSH:
		STAT(d, flushes, 1);
		return disk_flush(d->disk) < 0 ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
	case VIRTIO_BLK_T_GET_ID:
		return do_get_id(d, c, wr_data);
	case VIRTIO_BLK_T_DISCARD:
		return do_dwz(d, c, false);
	case VIRTIO_BLK_T_WRITE_ZEROES:
		return do_dwz(d, c, true);
	default:
		return VIRTIO_BLK_S_UNSUPP;
	}
}

/* One popped chain: execute, write the status byte, push. -EPROTO: no status byte. */
static int request_complete(struct vblk_dev *d, struct vring_queue *vq,
			    const struct vring_chain *c)
{
	const struct vring_seg *last = c->nseg ? &c->seg[c->nseg - 1] : NULL;
	uint8_t status;

	if (!last || !last->wr || !last->p)
		return -EPROTO;
	STAT(d, requests, 1);
	if (c->bad) {
		STAT(d, bad_chains, 1);
		status = VIRTIO_BLK_S_IOERR;
	} else {
		status = request_exec(d, c);
	}
	if (status == VIRTIO_BLK_S_IOERR)
		STAT(d, ioerr, 1);
	else if (status == VIRTIO_BLK_S_UNSUPP)
		STAT(d, unsupp, 1);
	last->p[last->len - 1] = status;
	vring_push(vq, c->head, c->wr_len > UINT32_MAX ? UINT32_MAX : (uint32_t)c->wr_len);
	return 0;
}

int vblk_queue_process(struct vblk_dev *d, struct vring_queue *vq, bool *notify)
{
	struct vring_chain c;
	unsigned steps = 0;
	int done = 0, ret = 0;

	*notify = false;
	do {
		vring_disable_notify(vq);
		while (++steps <= VBLK_DRAIN_MAX && (ret = vring_pop(vq, &c)) > 0) {
			ret = request_complete(d, vq, &c);
			if (ret < 0)
				break;
			done++;
		}
		if (ret < 0) {
			*notify = done && vring_need_notify(vq);
			return ret;
		}
	} while (vring_enable_notify(vq) && steps < VBLK_DRAIN_MAX);
	*notify = done && vring_need_notify(vq);
	return done;
}

int vblk_queue_resubmit(struct vblk_dev *d, struct vring_queue *vq, const uint16_t *heads,
			unsigned n, bool *notify)
{
	struct vring_chain c;
	int done = 0, ret = 0;

	for (unsigned i = 0; i < n; i++) {
		ret = vring_pop_head(vq, heads[i], &c);
		if (ret > 0)
			ret = request_complete(d, vq, &c);
		if (ret < 0)
			break;
		done++;
	}
	*notify = done && vring_need_notify(vq);
	return ret < 0 ? ret : done;
}
