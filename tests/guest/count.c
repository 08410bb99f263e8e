/* SPDX-License-Identifier: MIT */
/*
 * Counting mode (testguest.mode=count): the guest counts forever, for the tests of a running
 * VM (pause/resume, snapshot/restore). It never ends by itself: the VMM stops it.
 *
 * The count is a u64 in guest RAM, incremented once every testguest.count_us microseconds
 * (default 20000); every value is printed on COM1 as "guest: count N" (N = 1, 2, 3, ...
 * with no gap: a test that sees N then N+1 around a pause knows nothing was lost or
 * repeated). Every testguest.count_every counts (default 4) the guest writes a record to
 * the disk with one virtio-blk OUT request, without waiting for it: several requests are in
 * flight while it goes on counting (up to CNT_SLOTS). The record of sequence S (S = 1, 2,
 * ...) goes to sector testguest.count_lba (default 0) + S % 64; its first 32 bytes are the
 * little-endian u64s "LZCOUNT1", S, N (the count when it was written) and the FNV-1a 64
 * hash of the first 24 bytes; the rest of the sector is zero. When the device completes it
 * the guest prints "guest: count-disk: seq S count N ok" (or "... status X" on an error):
 * a record acknowledged so must be on the disk (tests/guest/disk.py counts DISK reads them).
 *
 * With testguest.count_to=N (default 0: never) the guest ends at count N: it prints
 * "guest: count done N", writes exit status 0 to port 0x441 and halts (the snapshot tests
 * let the runs end by themselves).
 *
 * Before a count whose VM generation ID (ACPI VGEN) differs from the last one printed, the
 * guest prints it again: "guest: vmgenid: HEX at 0xADDR" (a restored snapshot gets a new one).
 *
 * The driver here is its own, minimal one (no feature but VERSION_1, one queue, polled,
 * every request notified): slot s uses descriptors 3s..3s+2 (header, record, status).
 */
#include "guest.h"

#define CNT_SLOTS 8
#define CNT_RING 64     /* sectors the records rotate over */
#define CNT_QNUM 32
#define CNT_MAGIC 0x31544e554f435a4cull /* "LZCOUNT1" */

struct cnt_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static struct cnt_desc c_desc[CNT_QNUM] __attribute__((aligned(4096)));
static uint8_t c_avail[4 + 2 * CNT_QNUM + 2] __attribute__((aligned(4096)));
static uint8_t c_used[4 + 8 * CNT_QNUM + 2] __attribute__((aligned(4096)));

static struct cnt_slot {
	struct {
		uint32_t type, reserved;
		uint64_t sector;
	} hdr;
	uint64_t seq, count;
	uint8_t status;
	bool busy;
	uint8_t rec[512] __attribute__((aligned(512)));
} c_slot[CNT_SLOTS] __attribute__((aligned(4096)));

static volatile uint64_t g_count; /* the count, in RAM */

static uint64_t c_base;
static uint16_t c_avail_idx, c_last_used;

#define C_AV_IDX (*(volatile uint16_t *)(c_avail + 2))
#define C_AV_RING(i) (*(volatile uint16_t *)(c_avail + 4 + 2 * ((i) % CNT_QNUM)))
#define C_US_IDX (*(volatile uint16_t *)(c_used + 2))
#define C_US_ID(i) (*(volatile uint32_t *)(c_used + 4 + 8 * ((i) % CNT_QNUM)))

static void creg(uint32_t off, uint32_t val)
{
	mmio_w32(c_base + off, val);
}

static uint32_t cget(uint32_t off)
{
	return mmio_r32(c_base + off);
}

/* Reset, VERSION_1 only, queue 0 of CNT_QNUM entries, DRIVER_OK. */
static bool cnt_init(void)
{
	uint64_t d = (uintptr_t)c_desc, a = (uintptr_t)c_avail, u = (uintptr_t)c_used;

	creg(0x070, 0);
	creg(0x070, 1);
	creg(0x070, 3);
	creg(0x024, 1);
	creg(0x020, 1); /* VERSION_1 (bit 32) */
	creg(0x024, 0);
	creg(0x020, 0);
	creg(0x070, 0xb);
	if (!(cget(0x070) & 8))
		return false;
	creg(0x030, 0);
	if (cget(0x034) < CNT_QNUM)
		return false;
	creg(0x038, CNT_QNUM);
	creg(0x080, (uint32_t)d);
	creg(0x084, (uint32_t)(d >> 32));
	creg(0x090, (uint32_t)a);
	creg(0x094, (uint32_t)(a >> 32));
	creg(0x0a0, (uint32_t)u);
	creg(0x0a4, (uint32_t)(u >> 32));
	creg(0x044, 1);
	creg(0x070, 0xf);
	return cget(0x070) == 0xf;
}

static uint64_t cnt_fnv(const void *b, unsigned len)
{
	const uint8_t *p = b;
	uint64_t h = 0xcbf29ce484222325ull;

	for (unsigned i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Put record seq (count n) in flight on a free slot; false when every slot is busy. */
static bool cnt_submit(uint64_t lba, uint64_t seq, uint64_t n)
{
	struct cnt_slot *s = NULL;
	unsigned i;

	for (i = 0; i < CNT_SLOTS; i++)
		if (!c_slot[i].busy) {
			s = &c_slot[i];
			break;
		}
	if (!s)
		return false;
	uint64_t *r = (uint64_t *)s->rec;
	memset(s->rec, 0, sizeof(s->rec));
	r[0] = CNT_MAGIC;
	r[1] = seq;
	r[2] = n;
	r[3] = cnt_fnv(s->rec, 24);
	s->hdr.type = 1; /* OUT */
	s->hdr.reserved = 0;
	s->hdr.sector = lba + seq % CNT_RING;
	s->seq = seq;
	s->count = n;
	s->status = 0xff;
	s->busy = true;
	c_desc[3 * i] = (struct cnt_desc){ (uintptr_t)&s->hdr, 16, 1, (uint16_t)(3 * i + 1) };
	c_desc[3 * i + 1] = (struct cnt_desc){ (uintptr_t)s->rec, 512, 1, (uint16_t)(3 * i + 2) };
	c_desc[3 * i + 2] = (struct cnt_desc){ (uintptr_t)&s->status, 1, 2, 0 };
	C_AV_RING(c_avail_idx) = (uint16_t)(3 * i);
	barrier();
	c_avail_idx++;
	C_AV_IDX = c_avail_idx;
	mb();
	creg(0x050, 0);
	return true;
}

/* Report the completed requests. */
static void cnt_reap(void)
{
	uint16_t ui = C_US_IDX;

	barrier();
	if (c_last_used == ui)
		return; /* nothing new: no register read (each is a VM exit) */
	while (c_last_used != ui) {
		uint32_t id = C_US_ID(c_last_used);
		struct cnt_slot *s = id % 3 == 0 && id / 3 < CNT_SLOTS ? &c_slot[id / 3] : NULL;

		c_last_used++;
		if (!s || !s->busy) {
			gprintf("guest: count-disk: FAIL used id %u is no request in flight\n", id);
			continue;
		}
		if (s->status == 0)
			gprintf("guest: count-disk: seq %lu count %lu ok\n", s->seq, s->count);
		else
			gprintf("guest: count-disk: seq %lu count %lu FAIL status %u\n", s->seq,
				s->count, s->status);
		s->busy = false;
	}
	uint32_t is = cget(0x060);
	if (is)
		creg(0x064, is);
}

/* count_to reached: the requests in flight complete, then exit status 0 and halt. */
static void count_done(void)
{
	for (unsigned i = 0; i < CNT_SLOTS; i++)
		while (c_base && c_slot[i].busy)
			cnt_reap();
	gprintf("guest: count done %lu\n", g_count);
	outb(0x441, 0);
	for (;;)
		__asm__ volatile("cli; hlt");
}

void count_run(const struct mmio_dev *d)
{
	char b[32];
	uint64_t every_us = 20000, every = 4, lba = 0, seq = 0, next, skipped = 0, to = 0;

	if (cmdline_get("testguest.count_us", b, sizeof(b)))
		every_us = parse_u64(b, NULL);
	if (cmdline_get("testguest.count_every", b, sizeof(b)))
		every = parse_u64(b, NULL);
	if (cmdline_get("testguest.count_lba", b, sizeof(b)))
		lba = parse_u64(b, NULL);
	if (cmdline_get("testguest.count_to", b, sizeof(b)))
		to = parse_u64(b, NULL);
	if (!every)
		every = 1;
	c_base = d ? d->base : 0;
	if (c_base && !cnt_init()) {
		gprintf("guest: count: FAIL: the virtio-blk device did not initialize\n");
		c_base = 0;
	}
	gprintf("guest: count mode: a count every %lu us, a disk record every %lu counts at "
		"sectors %lu..%lu%s\n", every_us, every, lba, lba + CNT_RING - 1,
		c_base ? "" : " (no disk: counting only)");
	next = now_us() + every_us;
	for (;;) {
		if (c_base)
			cnt_reap();
		if ((int64_t)(now_us() - next) < 0) {
			__asm__ volatile("pause");
			continue;
		}
		next += every_us;
		if ((int64_t)(now_us() - next) > 0)
			next = now_us() + every_us; /* paused or slow: no burst of catch-up counts */
		g_count = g_count + 1;
		vmgenid_show(false); /* a restored clone gets a new one */
		gprintf("guest: count %lu\n", g_count);
		if (c_base && g_count % every == 0) {
			if (cnt_submit(lba, seq + 1, g_count))
				seq++;
			else if (++skipped % 16 == 1)
				gprintf("guest: count-disk: every slot busy (%lu skipped)\n", skipped);
		}
		if (to && g_count >= to)
			count_done();
	}
}
