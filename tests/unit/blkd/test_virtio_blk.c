/* SPDX-License-Identifier: MIT */
/* blkd/virtio/virtio_blk: requests built in a fake guest memory, served from a raw disk file. */
#include "../helpers.h"

#include <endian.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>

#include "../../../blkd/disk/disk_int.h"
#include "../../../blkd/virtio/virtio_blk.h"
#include "../virtq_guest.h"

#define DISK (1u << 20)
#define SERIAL "lazyblk-test-serial-0123"   /* longer than 20: cut */

struct fx {
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t *img;              /* what the file should hold */
	struct disk be;
	struct vblk_dev d;
	struct tguest g;
	struct vring_queue vq;
};

static void fx_open(struct fx *f, bool ro)
{
	memset(f, 0, sizeof(*f));
	f->img = malloc(DISK);
	assert_non_null(f->img);
	disk_file_make(f->dir, f->path, f->img, DISK, 42);
	assert_int_equal(disk_raw_open(f->path, ro, &f->be), 0);
	assert_int_equal(vblk_dev_init(&f->d, &f->be, 1, SERIAL), 0);
	assert_int_equal(vblk_dev_ack_features(&f->d, f->d.features), 0);
	tg_init(&f->g, 256);
	assert_int_equal(vblk_ring_setup(&f->d, &f->vq, &f->g.mem, 256, f->g.desc, f->g.avail,
					 f->g.used), 0);
}

static void fx_close(struct fx *f)
{
	disk_close(&f->be);
	tg_free(&f->g);
	free(f->img);
	rm_rf(f->dir);
}

/* The file holds the expected image. */
static void check_file(struct fx *f)
{
	uint8_t *buf = malloc(DISK);
	int fd = open(f->path, O_RDONLY);

	assert_non_null(buf);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, DISK, 0), DISK);
	close(fd);
	assert_memory_equal(buf, f->img, DISK);
	free(buf);
}

static uint64_t status_new(struct fx *f)
{
	uint64_t s = tg_alloc(&f->g, 1, 1);

	*(uint8_t *)tg_ptr(&f->g, s) = 0xee;
	return s;
}

/* Submit head, process: one request completed with written bytes; returns its status. */
static uint8_t run(struct fx *f, uint16_t head, uint64_t status_gpa, uint32_t written)
{
	uint32_t id, len;
	bool notify;

	tg_submit(&f->g, head);
	*tg_used_event(&f->g) = f->g.last_used;   /* as virtqueue_enable_cb() does */
	assert_int_equal(vblk_queue_process(&f->d, &f->vq, &notify), 1);
	assert_true(notify);
	assert_true(tg_get_used(&f->g, &id, &len));
	assert_int_equal(id, head);
	assert_int_equal(len, written);
	return *(uint8_t *)tg_ptr(&f->g, status_gpa);
}

static void test_features_config(void **state)
{
	struct fx f;
	struct virtio_blk_config c;
	uint8_t tail[8];

	(void)state;
	fx_open(&f, false);
	uint64_t want = (1ull << VIRTIO_F_VERSION_1) | (1ull << VIRTQ_F_INDIRECT_DESC) |
			(1ull << VIRTQ_F_EVENT_IDX) | (1ull << VIRTIO_BLK_F_SEG_MAX) |
			(1ull << VIRTIO_BLK_F_BLK_SIZE) | (1ull << VIRTIO_BLK_F_FLUSH) |
			(1ull << VIRTIO_BLK_F_TOPOLOGY) | (1ull << VIRTIO_BLK_F_DISCARD) |
			(1ull << VIRTIO_BLK_F_WRITE_ZEROES);
	assert_int_equal(f.d.features, want);
	memset(&c, 0xff, sizeof(c));
	vblk_config_read(&f.d, 0, &c, VBLK_CONFIG_SIZE);
	assert_int_equal(le64toh(c.capacity), DISK / 512);
	assert_int_equal(le32toh(c.seg_max), VBLK_SEG_MAX);
	assert_int_equal(le32toh(c.blk_size), 512);
	assert_int_equal(c.physical_block_exp, 3);
	assert_int_equal(le16toh(c.min_io_size), 8);
	assert_int_equal(le16toh(c.num_queues), 1);
	assert_int_equal(le32toh(c.max_discard_seg), VBLK_DISCARD_SEG_MAX);
	assert_int_equal(le32toh(c.discard_sector_alignment), 8);
	assert_int_equal(le32toh(c.max_write_zeroes_seg), VBLK_DISCARD_SEG_MAX);
	/* unaligned, narrow, past the end */
	uint16_t w;
	vblk_config_read(&f.d, 1, &w, 2);
	assert_int_equal(w, (DISK / 512) >> 8);
	memset(tail, 0xff, sizeof(tail));
	vblk_config_read(&f.d, VBLK_CONFIG_SIZE - 4, tail, 8);
	assert_int_equal(tail[4] | tail[5] | tail[6] | tail[7], 0);
	vblk_config_read(&f.d, 0xf00, tail, 8);
	assert_int_equal(tail[0] | tail[7], 0);
	/* negotiation */
	assert_int_equal(vblk_dev_ack_features(&f.d, want | (1ull << VIRTIO_BLK_F_MQ)), -EINVAL);
	assert_int_equal(vblk_dev_ack_features(&f.d, want & ~(1ull << VIRTIO_F_VERSION_1)),
			 -EINVAL);
	assert_int_equal(vblk_dev_ack_features(&f.d, 1ull << VIRTIO_F_VERSION_1), 0);
	fx_close(&f);

	/* read-only, multiqueue */
	static const struct disk_ops ops = { .read = (void *)1, .write = (void *)1,
					     .flush = (void *)1, .discard = (void *)1 };
	struct disk be = { .ops = &ops, .size = 4096, .read_only = true, .can_discard = true,
			   .can_write_zeroes = true };
	struct vblk_dev d;
	assert_int_equal(vblk_dev_init(&d, &be, 4, NULL), -EINVAL); /* no write_zeroes op */
	be.can_write_zeroes = false;
	assert_int_equal(vblk_dev_init(&d, &be, 4, NULL), 0);
	assert_true(d.features & (1ull << VIRTIO_BLK_F_RO));
	assert_true(d.features & (1ull << VIRTIO_BLK_F_MQ));
	assert_false(d.features & (1ull << VIRTIO_BLK_F_DISCARD));
	vblk_config_read(&d, offsetof(struct virtio_blk_config, num_queues), &w, 2);
	assert_int_equal(le16toh(w), 4);
	be.size = 1000;
	assert_int_equal(vblk_dev_init(&d, &be, 1, NULL), -EINVAL);
	be.size = 4096;
	assert_int_equal(vblk_dev_init(&d, &be, 0, NULL), -EINVAL);
	/* writable: DISCARD as the disk can, WRITE_ZEROES not (it cannot); FLUSH always */
	be.read_only = false;
	assert_int_equal(vblk_dev_init(&d, &be, 1, NULL), 0);
	assert_false(d.features & (1ull << VIRTIO_BLK_F_RO));
	assert_true(d.features & (1ull << VIRTIO_BLK_F_DISCARD));
	assert_false(d.features & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
	assert_true(d.features & (1ull << VIRTIO_BLK_F_FLUSH));
	be.ops = NULL;
	assert_int_equal(vblk_dev_init(&d, &be, 1, NULL), -EINVAL);
	assert_int_equal(vblk_dev_init(&d, NULL, 1, NULL), -EINVAL);
}

static void test_read(void **state)
{
	struct fx f;
	uint64_t h, data, st;

	(void)state;
	fx_open(&f, false);
	/* one data descriptor */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, 8);
	data = tg_alloc(&f.g, 4096, 4096);
	st = status_new(&f);
	struct tg_buf b1[] = { { h, 16, false }, { data, 4096, true }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b1, 3), st, 4097), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f.g, data), f.img + 8 * 512, 4096);

	/* split anywhere: 100 + 924 + 3072 (sectors straddle), status inside the last one */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, 100);
	data = tg_alloc(&f.g, 4097, 4096);
	struct tg_buf b2[] = { { h, 16, false }, { data, 100, true }, { data + 100, 924, true },
			       { data + 1024, 3073, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b2, 4), data + 4096, 4097), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f.g, data), f.img + 100 * 512, 4096);

	/* many one-byte-ish pieces: 7 * 73 + rest */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, 2040);
	data = tg_alloc(&f.g, 4096, 4096);
	st = status_new(&f);
	struct tg_buf b3[10];
	b3[0] = (struct tg_buf){ h, 16, false };
	for (int i = 0; i < 7; i++)
		b3[1 + i] = (struct tg_buf){ data + 73u * i, 73, true };
	b3[8] = (struct tg_buf){ data + 7 * 73, 4096 - 7 * 73, true };
	b3[9] = (struct tg_buf){ st, 1, true };
	assert_int_equal(run(&f, tg_chain(&f.g, b3, 10), st, 4097), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f.g, data), f.img + 2040 * 512, 4096);

	/* indirect */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, 0);
	data = tg_alloc(&f.g, 8192, 4096);
	st = status_new(&f);
	struct tg_buf b4[] = { { h, 16, false }, { data, 512, true }, { data + 512, 7680, true },
			       { st, 1, true } };
	assert_int_equal(run(&f, tg_chain_indirect(&f.g, b4, 4), st, 8193), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f.g, data), f.img, 8192);
	fx_close(&f);
}

static void test_write(void **state)
{
	struct fx f;
	uint64_t h, data, st;
	uint64_t seed = 7;

	(void)state;
	fx_open(&f, false);
	/* header and the first 500 data bytes in one descriptor (any layout), then 12, 3584 */
	h = tg_alloc(&f.g, 16 + 4096, 8);
	tg_blk_hdr_at(&f.g, h, VIRTIO_BLK_T_OUT, 33);
	data = h + 16;
	prng_fill(&seed, tg_ptr(&f.g, data), 4096);
	memcpy(f.img + 33 * 512, tg_ptr(&f.g, data), 4096);
	st = status_new(&f);
	struct tg_buf b1[] = { { h, 516, false }, { data + 500, 12, false },
			       { data + 512, 3584, false }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b1, 4), st, 1), VIRTIO_BLK_S_OK);
	check_file(&f);

	/* the header itself split 5 + 11, indirect, data in one piece */
	uint64_t h2 = tg_blk_hdr(&f.g, VIRTIO_BLK_T_OUT, 2047);
	data = tg_alloc(&f.g, 512, 512);
	prng_fill(&seed, tg_ptr(&f.g, data), 512);
	memcpy(f.img + 2047 * 512, tg_ptr(&f.g, data), 512);
	st = status_new(&f);
	struct tg_buf b2[] = { { h2, 5, false }, { h2 + 5, 11, false }, { data, 512, false },
			       { st, 1, true } };
	assert_int_equal(run(&f, tg_chain_indirect(&f.g, b2, 4), st, 1), VIRTIO_BLK_S_OK);
	check_file(&f);

	/* FLUSH */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_FLUSH, 0);
	st = status_new(&f);
	struct tg_buf b3[] = { { h, 16, false }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b3, 2), st, 1), VIRTIO_BLK_S_OK);

	struct vblk_stats s;
	vblk_get_stats(&f.d, &s);
	assert_int_equal(s.writes, 2);
	assert_int_equal(s.write_bytes, 4096 + 512);
	assert_int_equal(s.flushes, 1);
	fx_close(&f);
}

/* A disk that records the writes it is given and passes everything to another. */
struct wtap {
	const struct disk *inner;
	unsigned n;
	uint64_t off[8];
	uint32_t len[8];
};

static int wtap_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	return disk_read(((struct wtap *)ctx)->inner, off, len, buf);
}

static int wtap_flush(void *ctx)
{
	return disk_flush(((struct wtap *)ctx)->inner);
}

static int wtap_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	struct wtap *t = ctx;

	assert_true(t->n < 8);
	t->off[t->n] = off;
	t->len[t->n++] = len;
	return disk_write(t->inner, off, len, buf, fua);
}

/* One write of len bytes at sector, its data in segments of the sizes in seg (0-ended). */
static void write_split(struct fx *f, uint64_t sector, const uint32_t *seg, uint64_t *seed)
{
	struct tg_buf b[8];
	uint64_t data, len = 0;
	unsigned n = 0;

	for (unsigned i = 0; seg[i]; i++)
		len += seg[i];
	b[n++] = (struct tg_buf){ tg_blk_hdr(&f->g, VIRTIO_BLK_T_OUT, sector), 16, false };
	data = tg_alloc(&f->g, len, 4096);
	prng_fill(seed, tg_ptr(&f->g, data), len);
	memcpy(f->img + sector * 512, tg_ptr(&f->g, data), len);
	for (uint64_t at = data, i = 0; seg[i]; at += seg[i], i++)
		b[n++] = (struct tg_buf){ at, seg[i], false };
	b[n] = (struct tg_buf){ status_new(f), 1, true };
	assert_int_equal(run(f, tg_chain(&f->g, b, n + 1), b[n].gpa, 1), VIRTIO_BLK_S_OK);
	check_file(f);
}

/*
 * A write's block split across guest segments reaches the disk in one call, whole (the
 * overlay would read, modify and write it once per part); a contiguous span goes as it is.
 */
static void test_write_gathered(void **state)
{
	static const struct disk_ops ops = { .read = wtap_read, .write = wtap_write,
					     .flush = wtap_flush };
	static const uint32_t halves[] = { 2048, 2048, 0 }, thirds[] = { 1024, 6144, 1024, 0 },
			      one[] = { 8192, 0 };
	struct fx f;
	struct wtap t = { 0 };
	struct disk tap;
	uint64_t seed = 11;

	(void)state;
	fx_open(&f, false);
	t.inner = &f.be;
	tap = f.be;
	tap.ops = &ops;
	tap.ctx = &t;
	tap.can_discard = tap.can_write_zeroes = tap.can_snapshot = false;
	tap.status = 0;
	assert_int_equal(vblk_dev_init(&f.d, &tap, 1, SERIAL), 0);
	assert_int_equal(vblk_dev_ack_features(&f.d, f.d.features), 0);
	assert_int_equal(vblk_ring_setup(&f.d, &f.vq, &f.g.mem, 256, f.g.desc, f.g.avail,
					 f.g.used), 0);
	write_split(&f, 8, halves, &seed);      /* one block in two halves: one call */
	assert_int_equal(t.n, 1);
	assert_int_equal(t.off[0], 4096);
	assert_int_equal(t.len[0], 4096);
	t.n = 0;
	write_split(&f, 16, thirds, &seed);     /* two blocks, each across two segments */
	assert_int_equal(t.n, 2);
	assert_int_equal(t.off[0], 8192);
	assert_int_equal(t.len[0], 4096);
	assert_int_equal(t.off[1], 12288);
	assert_int_equal(t.len[1], 4096);
	t.n = 0;
	write_split(&f, 1, one, &seed);         /* off a block boundary but contiguous: as is */
	assert_int_equal(t.n, 1);
	assert_int_equal(t.off[0], 512);
	assert_int_equal(t.len[0], 8192);
	fx_close(&f);
}

static void test_get_id(void **state)
{
	struct fx f;
	uint64_t h, data, st;

	(void)state;
	fx_open(&f, false);
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_GET_ID, 0);
	data = tg_alloc(&f.g, 20, 8);
	st = status_new(&f);
	struct tg_buf b[] = { { h, 16, false }, { data, 20, true }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b, 3), st, 21), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f.g, data), SERIAL, 20);
	fx_close(&f);
}

/* A DISCARD / WRITE_ZEROES request of n segments. */
static uint8_t dwz(struct fx *f, uint32_t type, const uint64_t (*segs)[3], unsigned n)
{
	uint64_t h = tg_blk_hdr(&f->g, type, 0), s = tg_alloc(&f->g, 16ull * n, 8), st = status_new(f);

	for (unsigned i = 0; i < n; i++) {
		uint8_t *p = (uint8_t *)tg_ptr(&f->g, s) + 16 * i;

		le64_put(p, segs[i][0]);
		le32_put(p + 8, (uint32_t)segs[i][1]);
		le32_put(p + 12, (uint32_t)segs[i][2]);
	}
	struct tg_buf b[] = { { h, 16, false }, { s, 16 * n, false }, { st, 1, true } };
	return run(f, tg_chain(&f->g, b, 3), st, 1);
}

static void test_discard_write_zeroes(void **state)
{
	struct fx f;

	(void)state;
	fx_open(&f, false);
	const uint64_t wz[][3] = { { 16, 8, 0 }, { 100, 3, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, wz, 2), VIRTIO_BLK_S_OK);
	memset(f.img + 16 * 512, 0, 8 * 512);
	memset(f.img + 100 * 512, 0, 3 * 512);
	check_file(&f);
	const uint64_t dc[][3] = { { 0, 8, 0 } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_DISCARD, dc, 1), VIRTIO_BLK_S_OK);
	memset(f.img, 0, 8 * 512);   /* a raw file punches a hole */
	check_file(&f);
	/* flags: UNMAP is not allowed on discard, unknown flags nowhere */
	const uint64_t du[][3] = { { 0, 8, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_DISCARD, du, 1), VIRTIO_BLK_S_UNSUPP);
	const uint64_t wu[][3] = { { 0, 8, 2 } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, wu, 1), VIRTIO_BLK_S_UNSUPP);
	/* one bad segment fails the request before anything is done */
	const uint64_t oob[][3] = { { 200, 8, 0 }, { DISK / 512 - 4, 8, 0 } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, oob, 2), VIRTIO_BLK_S_IOERR);
	const uint64_t wrap[][3] = { { UINT64_MAX - 2, 8, 0 } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_DISCARD, wrap, 1), VIRTIO_BLK_S_IOERR);
	check_file(&f);
	/* too many segments */
	static uint64_t many[VBLK_DISCARD_SEG_MAX + 1][3];
	for (unsigned i = 0; i <= VBLK_DISCARD_SEG_MAX; i++) {
		many[i][0] = i * 8;
		many[i][1] = 8;
	}
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, (const uint64_t(*)[3])many,
			     VBLK_DISCARD_SEG_MAX + 1),
			 VIRTIO_BLK_S_IOERR);
	check_file(&f);
	/* not negotiated: unsupported */
	assert_int_equal(vblk_dev_ack_features(&f.d, 1ull << VIRTIO_F_VERSION_1), 0);
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, wz, 1), VIRTIO_BLK_S_UNSUPP);
	fx_close(&f);
}

/*
 * The segments of a DISCARD / WRITE_ZEROES are read from guest memory once: a guest that
 * rewrites them while the request runs (here: from the disk's first discard) cannot get
 * anything executed that was not checked.
 */
struct racy {
	struct tguest *g;
	uint64_t segs;              /* gpa of the segment array */
	unsigned calls;
	uint64_t off[4], len[4];
};

static int racy_discard(void *ctx, uint64_t off, uint64_t len)
{
	struct racy *r = ctx;

	if (r->calls < 4) {
		r->off[r->calls] = off;
		r->len[r->calls] = len;
	}
	if (!r->calls++) {   /* the guest rewrites the second segment: far past the end */
		uint8_t *p = (uint8_t *)tg_ptr(r->g, r->segs) + 16;

		le64_put(p, 1ull << 40);
		le32_put(p + 8, VBLK_MAX_DISCARD_SECTORS);
	}
	return 0;
}

static int racy_rw(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	(void)ctx, (void)off, (void)len, (void)buf;
	return 0;
}

static int racy_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	(void)ctx, (void)off, (void)len, (void)buf, (void)fua;
	return 0;
}

static int racy_flush(void *ctx)
{
	(void)ctx;
	return 0;
}

static void test_discard_segments_read_once(void **state)
{
	static const struct disk_ops ops = { .read = racy_rw, .write = racy_write,
					     .flush = racy_flush, .discard = racy_discard };
	struct tguest g;
	struct racy r = { .g = &g };
	struct disk be = { .ops = &ops, .ctx = &r, .size = DISK, .can_discard = true };
	struct vblk_dev d;
	struct vring_queue vq;
	uint32_t id, len;
	bool notify;

	(void)state;
	assert_int_equal(vblk_dev_init(&d, &be, 1, NULL), 0);
	assert_int_equal(vblk_dev_ack_features(&d, d.features), 0);
	tg_init(&g, 16);
	assert_int_equal(vblk_ring_setup(&d, &vq, &g.mem, 16, g.desc, g.avail, g.used), 0);
	uint64_t h = tg_blk_hdr(&g, VIRTIO_BLK_T_DISCARD, 0), st = tg_alloc(&g, 1, 1);
	r.segs = tg_alloc(&g, 32, 8);
	uint8_t *p = tg_ptr(&g, r.segs);
	le64_put(p, 8);
	le32_put(p + 8, 8);
	le64_put(p + 16, 64);
	le32_put(p + 24, 16);
	struct tg_buf b[] = { { h, 16, false }, { r.segs, 32, false }, { st, 1, true } };
	tg_submit(&g, tg_chain(&g, b, 3));
	assert_int_equal(vblk_queue_process(&d, &vq, &notify), 1);
	assert_true(tg_get_used(&g, &id, &len));
	assert_int_equal(*(uint8_t *)tg_ptr(&g, st), VIRTIO_BLK_S_OK);
	/* both segments as they were checked, not as rewritten */
	assert_int_equal(r.calls, 2);
	assert_int_equal(r.off[0], 8 * 512);
	assert_int_equal(r.len[0], 8 * 512);
	assert_int_equal(r.off[1], 64 * 512);
	assert_int_equal(r.len[1], 16 * 512);
	tg_free(&g);
}

static void test_errors(void **state)
{
	struct fx f;
	uint64_t h, data, st;
	bool notify;

	(void)state;
	fx_open(&f, false);
	data = tg_alloc(&f.g, 8192, 4096);
	/* past the end, wrapping sector, not a multiple of 512 */
	struct {
		uint64_t sector;
		uint32_t len;
	} rw[] = { { DISK / 512 - 1, 1024 }, { UINT64_MAX, 512 }, { UINT64_MAX / 512, 1024 },
		   { 0, 1000 } };
	for (unsigned i = 0; i < sizeof(rw) / sizeof(rw[0]); i++) {
		for (uint32_t type = VIRTIO_BLK_T_IN; type <= VIRTIO_BLK_T_OUT; type++) {
			h = tg_blk_hdr(&f.g, type, rw[i].sector);
			st = status_new(&f);
			struct tg_buf b[] = { { h, 16, false }, { data, rw[i].len, type == 0 },
					      { st, 1, true } };
			assert_int_equal(run(&f, tg_chain(&f.g, b, 3), st, type ? 1 : rw[i].len + 1),
					 VIRTIO_BLK_S_IOERR);
		}
	}
	/* unknown type */
	h = tg_blk_hdr(&f.g, 99, 0);
	st = status_new(&f);
	struct tg_buf b1[] = { { h, 16, false }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b1, 2), st, 1), VIRTIO_BLK_S_UNSUPP);
	/* short header */
	st = status_new(&f);
	struct tg_buf b2[] = { { h, 8, false }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b2, 2), st, 1), VIRTIO_BLK_S_IOERR);
	/* a data buffer outside guest memory: an error, nothing written anywhere */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_OUT, 0);
	st = status_new(&f);
	struct tg_buf b3[] = { { h, 16, false }, { data, 512, false }, { 0x1000, 512, false },
			       { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b3, 4), st, 1), VIRTIO_BLK_S_IOERR);
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, 0);
	st = status_new(&f);
	struct tg_buf b4[] = { { h, 16, false }, { TG_GPA + TG_SIZE - 256, 512, true },
			       { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b4, 3), st, 513), VIRTIO_BLK_S_IOERR);
	check_file(&f);

	struct vblk_stats s;
	vblk_get_stats(&f.d, &s);
	assert_int_equal(s.ioerr, 11);
	assert_int_equal(s.unsupp, 1);
	assert_int_equal(s.bad_chains, 2);

	/* no status byte: the device is broken */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_FLUSH, 0);
	struct tg_buf b5[] = { { h, 16, false } };
	tg_submit(&f.g, tg_chain(&f.g, b5, 1));
	assert_int_equal(vblk_queue_process(&f.d, &f.vq, &notify), -EPROTO);
	fx_close(&f);

	/* a status byte outside guest memory: broken too */
	fx_open(&f, false);
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_FLUSH, 0);
	struct tg_buf b6[] = { { h, 16, false }, { 0x10, 1, true } };
	tg_submit(&f.g, tg_chain(&f.g, b6, 2));
	assert_int_equal(vblk_queue_process(&f.d, &f.vq, &notify), -EPROTO);
	fx_close(&f);
}

static void test_read_only(void **state)
{
	struct fx f;
	uint64_t h, data, st;

	(void)state;
	fx_open(&f, true);
	assert_true(f.d.features & (1ull << VIRTIO_BLK_F_RO));
	assert_false(f.d.features & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_OUT, 0);
	data = tg_alloc(&f.g, 512, 512);
	st = status_new(&f);
	struct tg_buf b[] = { { h, 16, false }, { data, 512, false }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b, 3), st, 1), VIRTIO_BLK_S_IOERR);
	check_file(&f);
	const uint64_t wz[][3] = { { 0, 8, 0 } };
	assert_int_equal(dwz(&f, VIRTIO_BLK_T_WRITE_ZEROES, wz, 1), VIRTIO_BLK_S_UNSUPP);
	/* reads and flushes work */
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, 1);
	st = status_new(&f);
	struct tg_buf b2[] = { { h, 16, false }, { data, 512, true }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b2, 3), st, 513), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f.g, data), f.img + 512, 512);
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_FLUSH, 0);
	st = status_new(&f);
	struct tg_buf b3[] = { { h, 16, false }, { st, 1, true } };
	assert_int_equal(run(&f, tg_chain(&f.g, b3, 2), st, 1), VIRTIO_BLK_S_OK);
	fx_close(&f);
}

static void test_batch(void **state)
{
	struct fx f;
	uint64_t st[20];
	uint32_t id, len;
	bool notify;

	(void)state;
	fx_open(&f, false);
	for (int i = 0; i < 20; i++) {
		uint64_t h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_IN, (uint64_t)i * 8);
		uint64_t data = tg_alloc(&f.g, 4096, 4096);

		st[i] = status_new(&f);
		struct tg_buf b[] = { { h, 16, false }, { data, 4096, true }, { st[i], 1, true } };
		tg_submit(&f.g, tg_chain(&f.g, b, 3));
	}
	/* the driver wants to hear only after the 10th completion (used_event 9) */
	*tg_used_event(&f.g) = 9;
	assert_int_equal(vblk_queue_process(&f.d, &f.vq, &notify), 20);
	assert_true(notify);
	for (int i = 0; i < 20; i++) {
		assert_true(tg_get_used(&f.g, &id, &len));
		assert_int_equal(*(uint8_t *)tg_ptr(&f.g, st[i]), VIRTIO_BLK_S_OK);
	}
	/* kicks re-enabled at the right place */
	assert_int_equal(*tg_avail_event(&f.g), 20);
	/* nothing new: no notification */
	assert_int_equal(vblk_queue_process(&f.d, &f.vq, &notify), 0);
	assert_false(notify);
	/* used_event far ahead: completions without an interrupt */
	*tg_used_event(&f.g) = 100;
	uint64_t h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_FLUSH, 0), s = status_new(&f);
	struct tg_buf b[] = { { h, 16, false }, { s, 1, true } };
	tg_submit(&f.g, tg_chain(&f.g, b, 2));
	assert_int_equal(vblk_queue_process(&f.d, &f.vq, &notify), 1);
	assert_false(notify);
	fx_close(&f);
}

/*
 * A guest that lays its available ring 2 bytes before its used ring: used->flags is
 * avail->idx and used->idx is avail->ring[0], so the device's own writes (the notification
 * flag, the used index) make the ring look non-empty again after every pass. A drain ends
 * anyway, after VBLK_DRAIN_MAX steps (it went on forever: the queue's runner spun holding
 * the queue's lock, and a stop or a disconnect waited for it forever).
 */
static void test_overlapping_rings(void **state)
{
	struct fx f;
	uint64_t area, h, s;
	bool notify;

	(void)state;
	fx_open(&f, false);
	area = tg_alloc(&f.g, 4096, 4096);
	assert_int_equal(vring_setup(&f.vq, &f.g.mem, 256, f.g.desc, area + 2, area + 4, false,
				     false), 0);
	h = tg_blk_hdr(&f.g, VIRTIO_BLK_T_FLUSH, 0);
	s = status_new(&f);
	struct tg_buf b[] = { { h, 16, false }, { s, 1, true } };
	assert_int_equal(tg_chain(&f.g, b, 2), 0);   /* avail->ring[0] (used->idx 0) names it */
	assert_int_equal(vblk_queue_process(&f.d, &f.vq, &notify), 1);
	assert_int_equal(*(uint8_t *)tg_ptr(&f.g, s), VIRTIO_BLK_S_OK);
	fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_features_config),
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_write),
		cmocka_unit_test(test_write_gathered),
		cmocka_unit_test(test_get_id),
		cmocka_unit_test(test_discard_write_zeroes),
		cmocka_unit_test(test_discard_segments_read_once),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_read_only),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_overlapping_rings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
