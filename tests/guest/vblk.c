/* SPDX-License-Identifier: MIT */
/*
 * A polled virtio-blk driver over virtio-mmio (version 2) and the disk tests.
 *
 * Interrupts stay off: completions are found by polling the used ring, but event-idx is
 * used honestly (used_event is written before each wait, the driver notifies only when
 * vring_need_event(avail_event, new, old) says so, and the device's avail_event and
 * InterruptStatus are checked).
 *
 * The disk (raw mode, the default) holds pattern A, which the test writes before the run:
 *   the little-endian u64 at every 8-byte-aligned byte offset OFF is (OFF / 8) ^ 0x5a5a5a5a5a5a5a5a
 * The guest writes pattern B:  (OFF / 8) ^ 0xc3c3c3c3c3c3c3c3,  and zeros by DISCARD and
 * WRITE_ZEROES. Sectors touched (SCR = testguest.scratch, default 2048; must be a multiple
 * of 8): B at SCR+0..8, SCR+1001..1012; zeros at SCR+2048..2111 (DISCARD), SCR+3001..3023
 * (WRITE_ZEROES), SCR+3200..3215 (WRITE_ZEROES with UNMAP), SCR+4096..4103 and
 * SCR+4160..4167 (one DISCARD with two ranges, when max_discard_seg >= 2). Everything else
 * keeps pattern A. The raw-mode read tests read sectors below 2048.
 *
 * Command line (all optional): testguest.mode=image (the disk's contents are not pattern A:
 * only the testguest.sumN checks read original data; writes are checked against a pre-read),
 * testguest.sumN=LBA:NSECT:FNV1A64HEX (N = 0..7, NSECT <= 128), testguest.scratch=LBA,
 * testguest.discard_zeroes=1 (DISCARDed sectors must read back as zeros),
 * testguest.lenient=1 (for QEMU as the reference device: it accepts a chain longer than
 * SEG_MAX, a nested INDIRECT descriptor, a device-readable data buffer in an IN request,
 * and buffers at guest-physical addresses without RAM (bounce-buffered as unassigned MMIO):
 * report those as tolerated instead of failing), testguest.id=STRING (expected GET_ID
 * answer), testguest.no_cmdline_devices=1 (skip the virtio_mmio.device= cross-check: QEMU
 * does not add it for a PVH kernel).
 */
#include "guest.h"

/* registers (virtio 1.2, 4.2.2) */
#define R_MAGIC 0x000
#define R_VERSION 0x004
#define R_DEVICE_ID 0x008
#define R_DEV_FEAT 0x010
#define R_DEV_FEAT_SEL 0x014
#define R_DRV_FEAT 0x020
#define R_DRV_FEAT_SEL 0x024
#define R_QUEUE_SEL 0x030
#define R_QUEUE_NUM_MAX 0x034
#define R_QUEUE_NUM 0x038
#define R_QUEUE_READY 0x044
#define R_QUEUE_NOTIFY 0x050
#define R_INT_STATUS 0x060
#define R_INT_ACK 0x064
#define R_STATUS 0x070
#define R_QUEUE_DESC 0x080
#define R_QUEUE_DRIVER 0x090
#define R_QUEUE_DEVICE 0x0a0
#define R_CONFIG_GEN 0x0fc
#define R_CONFIG 0x100

#define S_ACK 1u
#define S_DRIVER 2u
#define S_DRIVER_OK 4u
#define S_FEATURES_OK 8u
#define S_NEEDS_RESET 0x40u
#define S_FAILED 0x80u

#define F_SIZE_MAX 1
#define F_SEG_MAX 2
#define F_GEOMETRY 4
#define F_RO 5
#define F_BLK_SIZE 6
#define F_FLUSH 9
#define F_TOPOLOGY 10
#define F_CONFIG_WCE 11
#define F_MQ 12
#define F_DISCARD 13
#define F_WRITE_ZEROES 14
#define F_INDIRECT 28
#define F_EVENT_IDX 29
#define F_VERSION_1 32
#define BIT(n) (1ull << (n))

#define T_IN 0
#define T_OUT 1
#define T_FLUSH 4
#define T_GET_ID 8
#define T_DISCARD 11
#define T_WRITE_ZEROES 13

#define ST_OK 0
#define ST_IOERR 1
#define ST_UNSUPP 2

#define D_NEXT 1
#define D_WRITE 2
#define D_INDIRECT 4

struct vdesc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

struct req_hdr {
	uint32_t type, reserved;
	uint64_t sector;
};

struct dz_seg { /* DISCARD / WRITE_ZEROES range */
	uint64_t sector;
	uint32_t num, flags;
};

#define QMAX 256
#define NSLOT 8
#define ITAB 64
#define BIGTAB 4100

static struct vdesc q_desc[QMAX] __attribute__((aligned(4096)));
static uint8_t q_avail[4 + 2 * QMAX + 2] __attribute__((aligned(4096)));
static uint8_t q_used[4 + 8 * QMAX + 2] __attribute__((aligned(4096)));

static struct slot {
	struct req_hdr hdr;
	struct dz_seg dz[2];
	uint8_t status;
	bool busy;
	uint16_t head;
	uint32_t len; /* from the used ring */
} slots[NSLOT] __attribute__((aligned(64)));
static struct vdesc itab[NSLOT][ITAB] __attribute__((aligned(16)));
static struct vdesc bigtab[BIGTAB] __attribute__((aligned(16)));
static struct vdesc nesttab[4] __attribute__((aligned(16)));

#define BUFSZ 65536
static uint8_t rbuf[BUFSZ] __attribute__((aligned(4096)));
static uint8_t rbuf2[BUFSZ] __attribute__((aligned(4096)));
static uint8_t wbuf[BUFSZ] __attribute__((aligned(4096)));
static uint8_t ebuf[BUFSZ] __attribute__((aligned(4096)));
static uint8_t batchbuf[4][8192] __attribute__((aligned(4096)));

static struct {
	uint64_t base;
	uint16_t num, avail_idx, last_used, next_desc;
	uint64_t offered, feat;
	uint64_t capacity;
	uint32_t seg_max, blk_size, max_discard, max_discard_seg, discard_align;
	uint32_t max_wz, max_wz_seg;
	uint8_t wz_unmap;
	bool image, lenient, discard_zeroes;
	uint64_t scratch;
	unsigned kicks, suppressed, completions, ae_ok, ae_bad, resets;
	uint8_t hostile_status; /* the status byte after the last hostile request */
} v;

/* ---- registers and rings */
static uint32_t rr(uint32_t off)
{
	return mmio_r32(v.base + off);
}
static void rw(uint32_t off, uint32_t val)
{
	mmio_w32(v.base + off, val);
}
static uint32_t cfg32(uint32_t off)
{
	return rr(R_CONFIG + off);
}

#define AV_IDX (*(volatile uint16_t *)(q_avail + 2))
#define AV_RING(i) (*(volatile uint16_t *)(q_avail + 4 + 2 * ((i) % v.num)))
#define AV_USED_EVENT (*(volatile uint16_t *)(q_avail + 4 + 2 * v.num))
#define US_IDX (*(volatile uint16_t *)(q_used + 2))
#define US_ID(i) (*(volatile uint32_t *)(q_used + 4 + 8 * ((i) % v.num)))
#define US_LEN(i) (*(volatile uint32_t *)(q_used + 8 + 8 * ((i) % v.num)))
#define US_AVAIL_EVENT (*(volatile uint16_t *)(q_used + 4 + 8 * v.num))

static bool need_event(uint16_t event, uint16_t new, uint16_t old)
{
	return (uint16_t)(new - event - 1) < (uint16_t)(new - old);
}

static void spin_us(uint64_t us)
{
	uint64_t t = now_us();
	while (now_us() - t < us)
		__asm__ volatile("pause");
}

static bool dev_reset(void)
{
	rw(R_STATUS, 0);
	for (unsigned i = 0; i < 100000; i++)
		if (rr(R_STATUS) == 0)
			return true;
	return false;
}

static const char *feat_name(unsigned b)
{
	switch (b) {
	case F_SIZE_MAX: return "SIZE_MAX";
	case F_SEG_MAX: return "SEG_MAX";
	case F_GEOMETRY: return "GEOMETRY";
	case F_RO: return "RO";
	case F_BLK_SIZE: return "BLK_SIZE";
	case F_FLUSH: return "FLUSH";
	case F_TOPOLOGY: return "TOPOLOGY";
	case F_CONFIG_WCE: return "CONFIG_WCE";
	case F_MQ: return "MQ";
	case F_DISCARD: return "DISCARD";
	case F_WRITE_ZEROES: return "WRITE_ZEROES";
	case 15: return "LIFETIME";
	case 16: return "SECURE_ERASE";
	case 27: return "ANY_LAYOUT";
	case F_INDIRECT: return "RING_INDIRECT_DESC";
	case F_EVENT_IDX: return "RING_EVENT_IDX";
	case F_VERSION_1: return "VERSION_1";
	case 33: return "ACCESS_PLATFORM";
	case 34: return "RING_PACKED";
	case 35: return "IN_ORDER";
	case 36: return "ORDER_PLATFORM";
	case 37: return "SR_IOV";
	case 38: return "NOTIFICATION_DATA";
	case 39: return "NOTIF_CONFIG_DATA";
	case 40: return "RING_RESET";
	default: return NULL;
	}
}

static const uint64_t WANT = BIT(F_VERSION_1) | BIT(F_INDIRECT) | BIT(F_EVENT_IDX) |
			     BIT(F_SEG_MAX) | BIT(F_BLK_SIZE) | BIT(F_FLUSH) | BIT(F_DISCARD) |
			     BIT(F_WRITE_ZEROES);

/* Full initialization (virtio 1.2, 3.1.1). verbose: print every step (the first time). */
static bool vblk_init(bool verbose)
{
	const char *nm = verbose ? "virtio: init" : "virtio: re-init";
	if (!dev_reset())
		return check(false, nm, "status does not read 0 after reset");
	rw(R_STATUS, S_ACK);
	rw(R_STATUS, S_ACK | S_DRIVER);
	rw(R_DEV_FEAT_SEL, 0);
	uint64_t f = rr(R_DEV_FEAT);
	rw(R_DEV_FEAT_SEL, 1);
	f |= (uint64_t)rr(R_DEV_FEAT) << 32;
	v.offered = f;
	if (verbose) {
		gprintf("guest: virtio: device features 0x%lx:", f);
		for (unsigned b = 0; b < 64; b++)
			if (f & BIT(b)) {
				const char *n = feat_name(b);
				if (n)
					gprintf(" %s", n);
				else
					gprintf(" bit%u", b);
			}
		gprintf("\n");
		uint64_t miss = WANT & ~f;
		gprintf("guest: virtio: wanted but not offered:");
		for (unsigned b = 0; b < 64; b++)
			if (miss & BIT(b))
				gprintf(" %s", feat_name(b));
		gprintf("%s\n", miss ? "" : " none");
		check(!miss && !(f & BIT(F_RO)), "virtio: features offered",
		      "VERSION_1 RING_INDIRECT_DESC RING_EVENT_IDX SEG_MAX BLK_SIZE FLUSH DISCARD "
		      "WRITE_ZEROES%s", f & BIT(F_RO) ? ", but RO" : ", not RO");
	}
	if (!(f & BIT(F_VERSION_1)))
		return check(false, nm, "no VERSION_1: cannot drive a legacy device");
	v.feat = f & WANT;
	rw(R_DRV_FEAT_SEL, 0);
	rw(R_DRV_FEAT, (uint32_t)v.feat);
	rw(R_DRV_FEAT_SEL, 1);
	rw(R_DRV_FEAT, (uint32_t)(v.feat >> 32));
	rw(R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK);
	uint32_t st = rr(R_STATUS);
	if ((verbose || !(st & S_FEATURES_OK)) &&
	    !check(st & S_FEATURES_OK, verbose ? "virtio: FEATURES_OK" : nm,
		   "accepted 0x%lx, status reads 0x%x", v.feat, st))
		return false;

	/* config space, consistent under ConfigGeneration */
	uint32_t gen;
	do {
		gen = rr(R_CONFIG_GEN);
		v.capacity = cfg32(0) | (uint64_t)cfg32(4) << 32;
		v.seg_max = cfg32(12);
		v.blk_size = cfg32(20);
		v.max_discard = cfg32(36);
		v.max_discard_seg = cfg32(40);
		v.discard_align = cfg32(44);
		v.max_wz = cfg32(48);
		v.max_wz_seg = cfg32(52);
		v.wz_unmap = mmio_r8(v.base + R_CONFIG + 56);
	} while (gen != rr(R_CONFIG_GEN));
	if (verbose) {
		gprintf("guest: virtio: config: capacity %lu sectors (%lu MiB), seg_max %u, blk_size "
			"%u, discard max %u sectors x %u segs align %u, write_zeroes max %u x %u "
			"may_unmap %u\n",
			v.capacity, v.capacity >> 11, v.seg_max, v.blk_size, v.max_discard,
			v.max_discard_seg, v.discard_align, v.max_wz, v.max_wz_seg, v.wz_unmap);
		check(v.capacity >= v.scratch + 8192 && v.seg_max >= 4 && v.blk_size >= 512 &&
			      !(v.blk_size & (v.blk_size - 1)),
		      "virtio: config", "capacity >= %lu sectors, seg_max >= 4, blk_size a power of 2",
		      v.scratch + 8192);
	}

	/* queue 0 */
	rw(R_QUEUE_SEL, 0);
	uint32_t ready = rr(R_QUEUE_READY), max = rr(R_QUEUE_NUM_MAX);
	if ((verbose || !(ready == 0 && max >= 4)) &&
	    !check(ready == 0 && max >= 4, verbose ? "virtio: queue 0" : nm,
		   "QueueNumMax %u, QueueReady %u", max, ready))
		return false;
	uint16_t num = QMAX;
	while (num > max)
		num >>= 1;
	v.num = num;
	memset(q_desc, 0, sizeof(q_desc));
	memset(q_avail, 0, sizeof(q_avail));
	memset(q_used, 0, sizeof(q_used));
	v.avail_idx = v.last_used = v.next_desc = 0;
	for (unsigned i = 0; i < NSLOT; i++)
		slots[i].busy = false;
	rw(R_QUEUE_NUM, num);
	uint64_t d = (uintptr_t)q_desc, a = (uintptr_t)q_avail, u = (uintptr_t)q_used;
	rw(R_QUEUE_DESC, (uint32_t)d);
	rw(R_QUEUE_DESC + 4, (uint32_t)(d >> 32));
	rw(R_QUEUE_DRIVER, (uint32_t)a);
	rw(R_QUEUE_DRIVER + 4, (uint32_t)(a >> 32));
	rw(R_QUEUE_DEVICE, (uint32_t)u);
	rw(R_QUEUE_DEVICE + 4, (uint32_t)(u >> 32));
	rw(R_QUEUE_READY, 1);
	ready = rr(R_QUEUE_READY);
	rw(R_STATUS, S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	st = rr(R_STATUS);
	bool ok = ready == 1 && st == (S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK);
	if (verbose || !ok)
		check(ok, verbose ? "virtio: DRIVER_OK" : nm,
		      "queue 0: %u entries (max %u), desc 0x%lx avail 0x%lx used 0x%lx, status 0x%x",
		      num, max, d, a, u, st);
	return ok;
}

/* ---- requests */
struct seg {
	uint64_t addr;
	uint32_t len;
	uint16_t flags; /* D_WRITE: the device writes it */
};

enum { DIRECT, INDIRECT };

/* Lay out hdr + segs + status for slot s, directly in the ring or in its indirect table;
 * returns the head index or -1 if the ring has no room. */
static int build(unsigned s, uint32_t type, uint64_t sector, const struct seg *segs, unsigned n,
		 int mode)
{
	struct slot *sl = &slots[s];
	sl->hdr = (struct req_hdr){ type, 0, sector };
	sl->status = 0xff;
	sl->len = ~0u;
	unsigned total = n + 2;
	struct vdesc *t;
	unsigned first;
	if (mode == INDIRECT) {
		if (total > ITAB || v.next_desc + 1 > v.num)
			return -1;
		t = itab[s];
		first = 0;
	} else {
		if (v.next_desc + total > v.num)
			return -1;
		t = q_desc;
		first = v.next_desc;
	}
	for (unsigned i = 0; i < total; i++) {
		struct vdesc *dd = &t[first + i];
		if (i == 0)
			*dd = (struct vdesc){ (uintptr_t)&sl->hdr, sizeof(sl->hdr), 0, 0 };
		else if (i == total - 1)
			*dd = (struct vdesc){ (uintptr_t)&sl->status, 1, D_WRITE, 0 };
		else
			*dd = (struct vdesc){ segs[i - 1].addr, segs[i - 1].len, segs[i - 1].flags,
					      0 };
		if (i + 1 < total) {
			dd->flags |= D_NEXT;
			dd->next = (uint16_t)(first + i + 1);
		}
	}
	if (mode == INDIRECT) {
		first = v.next_desc++;
		q_desc[first] = (struct vdesc){ (uintptr_t)t, total * sizeof(struct vdesc),
						D_INDIRECT, 0 };
	} else {
		v.next_desc += total;
	}
	sl->head = (uint16_t)first;
	sl->busy = true;
	return (int)first;
}

/* Put heads in the avail ring and notify the device if its avail_event asks for it. */
static void publish(const uint16_t *heads, unsigned n)
{
	uint16_t old = v.avail_idx;
	for (unsigned i = 0; i < n; i++)
		AV_RING(v.avail_idx + i) = heads[i];
	/* ask for an interrupt once the last of these completes */
	AV_USED_EVENT = (uint16_t)(v.last_used + (uint16_t)(v.avail_idx - v.last_used) + n - 1);
	barrier();
	v.avail_idx += n;
	AV_IDX = v.avail_idx;
	mb();
	if (need_event(US_AVAIL_EVENT, v.avail_idx, old)) {
		rw(R_QUEUE_NOTIFY, 0);
		v.kicks++;
	} else {
		v.suppressed++;
	}
}

enum { W_DONE = 0, W_TIMEOUT = -1, W_RESET = -2 };

/* Wait until every published request is used (or the device needs a reset). */
static int wait_all(uint64_t timeout_us)
{
	uint64_t t0 = now_us();
	unsigned spins = 0;
	for (;;) {
		uint16_t ui = US_IDX;
		barrier();
		while (v.last_used != ui) {
			uint32_t id = US_ID(v.last_used), len = US_LEN(v.last_used);
			bool found = false;
			for (unsigned s = 0; s < NSLOT; s++)
				if (slots[s].busy && slots[s].head == id) {
					slots[s].busy = false;
					slots[s].len = len;
					found = true;
					break;
				}
			if (!found)
				check(false, "virtio: used ring", "entry %u has id %u, not a request "
				      "in flight", v.last_used, id);
			v.last_used++;
			v.completions++;
		}
		if (v.last_used == v.avail_idx)
			break;
		if ((++spins & 15) == 0 && (rr(R_STATUS) & S_NEEDS_RESET))
			return W_RESET;
		if (now_us() - t0 > timeout_us)
			return (rr(R_STATUS) & S_NEEDS_RESET) ? W_RESET : W_TIMEOUT;
		__asm__ volatile("pause");
	}
	v.next_desc = 0;
	/* event idx: the device must have advanced avail_event to what it consumed */
	uint64_t t1 = now_us();
	while (US_AVAIL_EVENT != v.avail_idx && now_us() - t1 < 200000)
		__asm__ volatile("pause");
	if (US_AVAIL_EVENT == v.avail_idx)
		v.ae_ok++;
	else
		v.ae_bad++;
	uint32_t is = rr(R_INT_STATUS);
	if (is)
		rw(R_INT_ACK, is);
	return W_DONE;
}

#define TMO_IO 30000000ull
#define TMO_HOSTILE 5000000ull

/* One request on slot 0: the status byte, or W_TIMEOUT / W_RESET. */
static int req(uint32_t type, uint64_t sector, const struct seg *segs, unsigned n, int mode)
{
	int h = build(0, type, sector, segs, n, mode);
	if (h < 0)
		return check(false, "virtio: ring", "no room for %u descriptors", n + 2), -3;
	uint16_t hh = (uint16_t)h;
	publish(&hh, 1);
	int w = wait_all(TMO_IO);
	return w == W_DONE ? slots[0].status : w;
}

static const char *st_name(int st)
{
	switch (st) {
	case ST_OK: return "OK";
	case ST_IOERR: return "IOERR";
	case ST_UNSUPP: return "UNSUPP";
	case 0xff: return "not written";
	case W_TIMEOUT: return "timeout (no completion)";
	case W_RESET: return "DEVICE_NEEDS_RESET";
	default: return "bad status";
	}
}

/* ---- patterns */
#define PAT_A 0x5a5a5a5a5a5a5a5aull
#define PAT_B 0xc3c3c3c3c3c3c3c3ull

static void fill(void *b, uint64_t disk_off, uint32_t len, uint64_t x)
{
	uint64_t *p = b;
	for (uint32_t i = 0; i < len / 8; i++)
		p[i] = x ? (disk_off / 8 + i) ^ x : 0;
}

/* compare got against want; print the first difference */
static bool same(const char *name, const void *got, const void *want, uint32_t len,
		 uint64_t disk_off)
{
	const uint64_t *g = got, *w = want;
	for (uint32_t i = 0; i < len / 8; i++)
		if (g[i] != w[i]) {
			gprintf("guest: %s: disk byte 0x%lx (sector %lu +%u): got 0x%016lx want "
				"0x%016lx\n",
				name, disk_off + 8 * i, (disk_off + 8 * i) / 512,
				(unsigned)((disk_off + 8 * i) % 512), g[i], w[i]);
			return false;
		}
	return true;
}

static uint64_t fnv1a(const void *b, uint32_t len)
{
	const uint8_t *p = b;
	uint64_t h = 0xcbf29ce484222325ull;
	for (uint32_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* read nsect sectors at lba into buf with one single-segment request */
static int read1(uint64_t lba, uint32_t nsect, void *buf)
{
	struct seg s = { (uintptr_t)buf, nsect * 512, D_WRITE };
	return req(T_IN, lba, &s, 1, DIRECT);
}

/* expectation for sectors [lba, lba+nsect) before a change: pattern A, or a pre-read */
static bool expect_init(uint64_t lba, uint32_t nsect)
{
	if (!v.image) {
		fill(ebuf, lba * 512, nsect * 512, PAT_A);
		return true;
	}
	int st = read1(lba, nsect, ebuf);
	return check(st == ST_OK, "pre-read", "sectors %lu+%u: %s", lba, nsect, st_name(st));
}

/* reads sectors [lba, lba+nsect) back and compares with ebuf */
static bool readback(const char *name, uint64_t lba, uint32_t nsect)
{
	memset(rbuf, 0xee, nsect * 512);
	int st = read1(lba, nsect, rbuf);
	if (st != ST_OK)
		return check(false, name, "read back of sectors %lu+%u: %s", lba, nsect,
			     st_name(st));
	return same(name, rbuf, ebuf, nsect * 512, lba * 512);
}

/* ---- the tests */
static void t_get_id(void)
{
	static char id[21] __attribute__((aligned(8)));
	memset(id, 0, sizeof(id));
	struct seg s = { (uintptr_t)id, 20, D_WRITE };
	int st = req(T_GET_ID, 0, &s, 1, DIRECT);
	char want[24];
	const char *w = cmdline_get("testguest.id", want, sizeof(want));
	bool ok = st == ST_OK && (!w || !strncmp(id, w, 20));
	for (unsigned i = 0; i < 20 && id[i]; i++)
		if (id[i] < 0x20 || id[i] > 0x7e)
			id[i] = '?';
	check(ok, "GET_ID", "status %s, id \"%s\"%s%s%s", st_name(st), id, w ? " (want \"" : "",
	      w ? w : "", w ? "\")" : "");
}

/* raw mode: reads of pattern A in several shapes */
static void t_reads(void)
{
	/* single segment */
	memset(rbuf, 0xee, 4096);
	int st = read1(0, 8, rbuf);
	fill(ebuf, 0, 4096, PAT_A);
	check(st == ST_OK && slots[0].len >= 4096 && slots[0].len <= 4097 &&
		      same("read", rbuf, ebuf, 4096, 0),
	      "read", "sectors 0+8, 1 segment: %s, used len %u", st_name(st), slots[0].len);

	/* three segments of odd sizes in scattered places */
	struct seg s3[3] = { { (uintptr_t)rbuf + 512, 512, D_WRITE },
			     { (uintptr_t)rbuf + 8192 + 1024, 1536, D_WRITE },
			     { (uintptr_t)rbuf + 32768, 4096, D_WRITE } };
	memset(rbuf, 0xee, BUFSZ);
	st = req(T_IN, 100, s3, 3, DIRECT);
	bool ok = st == ST_OK && slots[0].len >= 6144 && slots[0].len <= 6145;
	uint64_t off = 100 * 512;
	for (unsigned i = 0; i < 3 && ok; i++) {
		fill(ebuf, off, s3[i].len, PAT_A);
		ok = same("read multi-segment", (void *)(uintptr_t)s3[i].addr, ebuf, s3[i].len, off);
		off += s3[i].len;
	}
	check(ok, "read multi-segment", "sectors 100+12 in 512+1536+4096: %s, used len %u",
	      st_name(st), slots[0].len);

	/* the same through an indirect table, four segments */
	struct seg s4[4] = { { (uintptr_t)rbuf2 + 4096, 4096, D_WRITE },
			     { (uintptr_t)rbuf2 + 512, 512, D_WRITE },
			     { (uintptr_t)rbuf2 + 16384 + 512, 2048, D_WRITE },
			     { (uintptr_t)rbuf2 + 40960, 1024, D_WRITE } };
	memset(rbuf2, 0xee, BUFSZ);
	st = req(T_IN, 1001, s4, 4, INDIRECT);
	ok = st == ST_OK && slots[0].len >= 7680 && slots[0].len <= 7681;
	off = 1001 * 512;
	for (unsigned i = 0; i < 4 && ok; i++) {
		fill(ebuf, off, s4[i].len, PAT_A);
		ok = same("read indirect", (void *)(uintptr_t)s4[i].addr, ebuf, s4[i].len, off);
		off += s4[i].len;
	}
	check(ok, "read indirect", "sectors 1001+15 in 4096+512+2048+1024 via an indirect "
	      "table: %s, used len %u", st_name(st), slots[0].len);

	/* four requests in flight at once, one notification */
	static const uint64_t lba[4] = { 3, 300, 777, 1500 };
	static const uint32_t ns[4] = { 16, 5, 9, 13 };
	uint16_t heads[4];
	ok = true;
	for (unsigned i = 0; i < 4; i++) {
		memset(batchbuf[i], 0xee, sizeof(batchbuf[i]));
		struct seg s[2] = { { (uintptr_t)batchbuf[i], 1024, D_WRITE },
				    { (uintptr_t)batchbuf[i] + 1024, ns[i] * 512 - 1024, D_WRITE } };
		int h = build(i, T_IN, lba[i], s, 2, i & 1 ? INDIRECT : DIRECT);
		ok &= h >= 0;
		heads[i] = (uint16_t)h;
	}
	unsigned k0 = v.kicks;
	publish(heads, 4);
	int w = wait_all(TMO_IO);
	ok &= w == W_DONE && v.kicks == k0 + 1;
	for (unsigned i = 0; i < 4 && ok; i++) {
		fill(ebuf, lba[i] * 512, ns[i] * 512, PAT_A);
		ok = slots[i].status == ST_OK && same("read batch", batchbuf[i], ebuf, ns[i] * 512,
						      lba[i] * 512);
	}
	check(ok, "read batch", "4 requests (2 direct, 2 indirect) in flight, %u notification: %s",
	      v.kicks - k0, st_name(w));
}

/* image mode (or raw, if given): FNV-1a of regions the test computed from the image */
static void t_sums(void)
{
	for (unsigned k = 0; k < 8; k++) {
		char key[16] = "testguest.sumN", val[64];
		key[13] = (char)('0' + k);
		if (!cmdline_get(key, val, sizeof(val)))
			continue;
		const char *e;
		uint64_t lba = parse_u64(val, &e);
		uint32_t ns = (uint32_t)parse_u64(*e == ':' ? e + 1 : e, &e);
		uint64_t want = 0;
		if (*e == ':') {
			char hx[24] = "0x";
			memcpy(hx + 2, e + 1, 17);
			hx[19] = 0;
			want = parse_u64(hx, NULL);
		}
		char nm[32] = "read sumN";
		nm[8] = (char)('0' + k);
		if (ns == 0 || ns > 128) {
			check(false, nm, "bad %s", val);
			continue;
		}
		memset(rbuf, 0xee, ns * 512);
		int st = read1(lba, ns, rbuf);
		uint64_t h = fnv1a(rbuf, ns * 512);
		check(st == ST_OK && h == want, nm, "sectors %lu+%u: %s, fnv1a %016lx (want %016lx)",
		      lba, ns, st_name(st), h, want);
		/* the same bytes in 3 direct segments and in 4 indirect ones */
		uint32_t len = ns * 512, a = (len / 3) & ~511u, b = (len / 3) & ~511u;
		struct seg s[4] = { { (uintptr_t)rbuf2, a, D_WRITE },
				    { (uintptr_t)rbuf2 + a, b, D_WRITE },
				    { (uintptr_t)rbuf2 + a + b, len - a - b, D_WRITE } };
		unsigned n = a ? 3 : 1;
		if (!a)
			s[0].len = len;
		memset(rbuf2, 0xee, len);
		st = req(T_IN, lba, s, n, DIRECT);
		check(st == ST_OK && !memcmp(rbuf, rbuf2, len), nm, "again in %u segments: %s", n,
		      st_name(st));
		memset(rbuf2, 0xee, len);
		st = req(T_IN, lba, s, n, INDIRECT);
		check(st == ST_OK && !memcmp(rbuf, rbuf2, len), nm,
		      "again in %u segments via an indirect table: %s", n, st_name(st));
	}
}

static void t_writes(void)
{
	uint64_t scr = v.scratch;
	/* multi-segment write (direct) of pattern B at scr+0..8, neighbors untouched */
	if (expect_init(scr - 1, 11)) {
		fill(wbuf, scr * 512, 4608, PAT_B);
		struct seg s[3] = { { (uintptr_t)wbuf, 1024, 0 },
				    { (uintptr_t)wbuf + 1024, 512, 0 },
				    { (uintptr_t)wbuf + 1536, 3072, 0 } };
		int st = req(T_OUT, scr, s, 3, DIRECT);
		check(st == ST_OK && slots[0].len <= 1, "write multi-segment",
		      "sectors %lu+9 in 1024+512+3072: %s, used len %u", scr, st_name(st),
		      slots[0].len);
		fill(ebuf + 512, scr * 512, 4608, PAT_B);
		check(readback("write multi-segment read back", scr - 1, 11),
		      "write multi-segment read back", "sectors %lu+11: B inside, neighbors kept",
		      scr - 1);
	}
	/* indirect write at scr+1001..1012, read back through an indirect table too */
	uint64_t l = scr + 1001;
	if (expect_init(l - 1, 14)) {
		fill(wbuf, l * 512, 6144, PAT_B);
		struct seg s[4] = { { (uintptr_t)wbuf, 4096, 0 },
				    { (uintptr_t)wbuf + 4096, 512, 0 },
				    { (uintptr_t)wbuf + 4608, 512, 0 },
				    { (uintptr_t)wbuf + 5120, 1024, 0 } };
		int st = req(T_OUT, l, s, 4, INDIRECT);
		check(st == ST_OK, "write indirect", "sectors %lu+12 in 4096+512+512+1024: %s", l,
		      st_name(st));
		fill(ebuf + 512, l * 512, 6144, PAT_B);
		memset(rbuf2, 0xee, BUFSZ);
		struct seg r[3] = { { (uintptr_t)rbuf2 + 8192, 2048, D_WRITE },
				    { (uintptr_t)rbuf2, 4096, D_WRITE },
				    { (uintptr_t)rbuf2 + 16384, 1024, D_WRITE } };
		st = req(T_IN, l - 1, r, 3, INDIRECT);
		bool ok = st == ST_OK;
		uint32_t o = 0;
		for (unsigned i = 0; i < 3 && ok; i++) {
			ok = same("write indirect read back", (void *)(uintptr_t)r[i].addr, ebuf + o,
				  r[i].len, (l - 1) * 512 + o);
			o += r[i].len;
		}
		check(ok, "write indirect read back", "sectors %lu+14 via an indirect table: %s",
		      l - 1, st_name(st));
	}
	/* FLUSH */
	int st = req(T_FLUSH, 0, NULL, 0, DIRECT);
	check(st == ST_OK, "FLUSH", "%s", st_name(st));
}

static int dz_req(uint32_t type, const struct dz_seg *r, unsigned n)
{
	memcpy(slots[0].dz, r, n * sizeof(*r));
	struct seg s = { (uintptr_t)slots[0].dz, n * sizeof(*r), 0 };
	return req(type, 0, &s, 1, DIRECT);
}

static void t_discard_zeroes(void)
{
	uint64_t scr = v.scratch;
	/* DISCARD of 64 sectors, 4 KiB aligned */
	uint64_t l = scr + 2048;
	if ((v.feat & BIT(F_DISCARD)) && expect_init(l - 1, 66)) {
		struct dz_seg r = { l, 64, 0 };
		int st = dz_req(T_DISCARD, &r, 1);
		check(st == ST_OK && 64 <= v.max_discard, "DISCARD", "sectors %lu+64: %s", l,
		      st_name(st));
		memset(rbuf, 0xee, 66 * 512);
		st = read1(l - 1, 66, rbuf);
		bool zero = true;
		for (unsigned i = 512; i < 65 * 512; i++)
			zero &= rbuf[i] == 0;
		if (v.discard_zeroes) {
			memset(ebuf + 512, 0, 64 * 512);
			check(st == ST_OK && same("DISCARD read back", rbuf, ebuf, 66 * 512,
						  (l - 1) * 512),
			      "DISCARD read back", "sectors %lu+66: zeros inside, neighbors kept",
			      l - 1);
		} else {
			check(st == ST_OK && same("DISCARD read back", rbuf, ebuf, 512, (l - 1) * 512),
			      "DISCARD read back", "%s; the range reads as %s (not required)",
			      st_name(st), zero ? "zeros" : "its old data");
		}
	}
	/* WRITE_ZEROES of 23 sectors, not 4 KiB aligned */
	l = scr + 3001;
	if ((v.feat & BIT(F_WRITE_ZEROES)) && expect_init(l - 1, 25)) {
		struct dz_seg r = { l, 23, 0 };
		int st = dz_req(T_WRITE_ZEROES, &r, 1);
		check(st == ST_OK, "WRITE_ZEROES", "sectors %lu+23: %s", l, st_name(st));
		memset(ebuf + 512, 0, 23 * 512);
		check(readback("WRITE_ZEROES read back", l - 1, 25), "WRITE_ZEROES read back",
		      "sectors %lu+25: zeros inside, neighbors kept", l - 1);
	}
	l = scr + 3200;
	if ((v.feat & BIT(F_WRITE_ZEROES)) && expect_init(l - 1, 18)) {
		struct dz_seg r = { l, 16, 1 /* UNMAP */ };
		int st = dz_req(T_WRITE_ZEROES, &r, 1);
		check(st == ST_OK, "WRITE_ZEROES unmap", "sectors %lu+16 with UNMAP: %s", l,
		      st_name(st));
		memset(ebuf + 512, 0, 16 * 512);
		check(readback("WRITE_ZEROES unmap read back", l - 1, 18),
		      "WRITE_ZEROES unmap read back", "sectors %lu+18: zeros inside, neighbors kept",
		      l - 1);
	}
	/* one DISCARD with two ranges */
	l = scr + 4096;
	if ((v.feat & BIT(F_DISCARD)) && v.max_discard_seg >= 2 && expect_init(l - 1, 74)) {
		struct dz_seg r[2] = { { l, 8, 0 }, { l + 64, 8, 0 } };
		int st = dz_req(T_DISCARD, r, 2);
		check(st == ST_OK, "DISCARD 2 ranges", "sectors %lu+8 and %lu+8: %s", l, l + 64,
		      st_name(st));
		if (v.discard_zeroes) {
			memset(ebuf + 512, 0, 8 * 512);
			memset(ebuf + 65 * 512, 0, 8 * 512);
			check(readback("DISCARD 2 ranges read back", l - 1, 74),
			      "DISCARD 2 ranges read back", "sectors %lu+74: zeros in both ranges",
			      l - 1);
		}
	}
}

static void t_errors(void)
{
	uint64_t c = v.capacity;
	memset(rbuf, 0xee, 1024);
	struct seg s = { (uintptr_t)rbuf, 1024, D_WRITE };
	int st = req(T_IN, c - 1, &s, 1, DIRECT);
	check(st == ST_IOERR, "read across the end", "sectors %lu+2 (capacity %lu): %s", c - 1, c,
	      st_name(st));
	s.len = 512;
	st = req(T_IN, c, &s, 1, DIRECT);
	check(st == ST_IOERR, "read beyond capacity", "sector %lu: %s", c, st_name(st));
	/* sector * 512 wraps to 512 in 64 bits: must not read sector 1 */
	st = req(T_IN, (1ull << 55) + 1, &s, 1, DIRECT);
	check(st == ST_IOERR, "read at sector 2^55+1", "(byte offset wraps 64 bits): %s",
	      st_name(st));
	fill(wbuf, 0, 512, PAT_B);
	struct seg w = { (uintptr_t)wbuf, 512, 0 };
	st = req(T_OUT, c, &w, 1, DIRECT);
	check(st == ST_IOERR, "write beyond capacity", "sector %lu: %s", c, st_name(st));
	if (v.feat & BIT(F_WRITE_ZEROES)) {
		struct dz_seg r = { c - 4, 8, 0 };
		st = dz_req(T_WRITE_ZEROES, &r, 1);
		check(st == ST_IOERR, "WRITE_ZEROES beyond capacity", "sectors %lu+8: %s", c - 4,
		      st_name(st));
	}
	st = req(0x7f, 0, &s, 1, DIRECT);
	check(st == ST_UNSUPP, "unknown request type", "type 0x7f: %s", st_name(st));
}

/* event idx: InterruptStatus follows used_event */
static void t_event_idx(void)
{
	uint32_t is = rr(R_INT_STATUS);
	if (is)
		rw(R_INT_ACK, is);
	/* used_event one behind: no interrupt wanted for the next completion */
	int h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)rbuf, 512, D_WRITE }, 1, DIRECT);
	uint16_t old = v.avail_idx, hh = (uint16_t)h;
	AV_RING(v.avail_idx) = hh;
	AV_USED_EVENT = (uint16_t)(v.last_used - 1);
	barrier();
	AV_IDX = ++v.avail_idx;
	mb();
	if (need_event(US_AVAIL_EVENT, v.avail_idx, old))
		rw(R_QUEUE_NOTIFY, 0), v.kicks++;
	else
		v.suppressed++;
	uint64_t t0 = now_us();
	while (US_IDX != v.avail_idx && now_us() - t0 < TMO_IO)
		__asm__ volatile("pause");
	spin_us(20000);
	uint32_t is1 = rr(R_INT_STATUS);
	int w = wait_all(TMO_IO);
	check(w == W_DONE && !(is1 & 1), "event-idx: suppressed",
	      "used_event = used idx - 1: %s, InterruptStatus 0x%x", st_name(w), is1);
	if (is1)
		rw(R_INT_ACK, is1);
	/* used_event = this completion: the interrupt must come */
	h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)rbuf, 512, D_WRITE }, 1, DIRECT);
	old = v.avail_idx;
	hh = (uint16_t)h;
	AV_RING(v.avail_idx) = hh;
	AV_USED_EVENT = v.last_used;
	barrier();
	AV_IDX = ++v.avail_idx;
	mb();
	if (need_event(US_AVAIL_EVENT, v.avail_idx, old))
		rw(R_QUEUE_NOTIFY, 0), v.kicks++;
	else
		v.suppressed++;
	t0 = now_us();
	uint32_t is2 = 0;
	while (now_us() - t0 < TMO_IO && !((is2 = rr(R_INT_STATUS)) & 1))
		__asm__ volatile("pause");
	rw(R_INT_ACK, is2);
	uint32_t is3 = rr(R_INT_STATUS);
	w = wait_all(TMO_IO);
	check(w == W_DONE && (is2 & 1) && !(is3 & 1), "event-idx: notified",
	      "used_event = used idx: %s, InterruptStatus 0x%x, 0x%x after ACK", st_name(w), is2,
	      is3);
}

/* ---- hostile chains: an error status or DEVICE_NEEDS_RESET, never OK, never a hang */
static void sanity_read(const char *name)
{
	memset(rbuf, 0xee, 512);
	int st = read1(0, 1, rbuf);
	bool ok = st == ST_OK;
	if (ok && !v.image) {
		fill(ebuf, 0, 512, PAT_A);
		ok = same(name, rbuf, ebuf, 512, 0);
	}
	check(ok, name, "device works again (read of sector 0: %s)", st_name(st));
}

/* heads already built on slot 0 (or raw descriptors); publish, wait, judge, recover */
static void hostile(const char *name, uint16_t head, bool lenient_ok, bool status_in_chain)
{
	publish(&head, 1);
	int w = wait_all(TMO_HOSTILE);
	int st = w == W_DONE ? slots[0].status : w;
	bool ok;
	const char *how;
	if (w == W_RESET) {
		ok = true;
		how = "DEVICE_NEEDS_RESET";
	} else if (w == W_TIMEOUT) {
		ok = false;
		how = "no completion and no DEVICE_NEEDS_RESET";
	} else if (st == ST_OK) {
		ok = lenient_ok && v.lenient;
		how = ok ? "status OK (tolerated: testguest.lenient=1)" : "status OK";
	} else if (st == 0xff) {
		ok = !status_in_chain;
		how = "completed without a status byte";
	} else {
		ok = true;
		how = st_name(st);
	}
	check(ok, name, "%s", how);
	v.hostile_status = slots[0].status;
	if (w != W_DONE) {
		v.resets++;
		slots[0].busy = false;
		if (vblk_init(false))
			sanity_read("hostile: recovered");
	}
}

static void t_hostile(void)
{
	uint16_t d;
	int h;
	/* 1. a data buffer far outside guest RAM */
	h = build(0, T_IN, 0, &(struct seg){ 0xfff0000000ull, 512, D_WRITE }, 1, DIRECT);
	hostile("hostile: buffer outside RAM (0xfff0000000, IN)", (uint16_t)h, true, true);
	h = build(0, T_OUT, 8, &(struct seg){ 0xfff0000000ull, 512, 0 }, 1, DIRECT);
	hostile("hostile: buffer outside RAM (0xfff0000000, OUT)", (uint16_t)h, true, true);

	/* 2. a buffer that runs past the end of the highest RAM region below 4 GiB */
	uint64_t top = 0;
	for (unsigned i = 0; i < g_boot.ne820; i++) {
		const struct e820 *e = &g_boot.e820[i];
		if (e->type == 1 && e->addr + e->size <= (1ull << 32) && e->addr + e->size > top)
			top = e->addr + e->size;
	}
	h = build(0, T_IN, 0, &(struct seg){ top - 256, 512, D_WRITE }, 1, DIRECT);
	gprintf("guest: hostile: top of RAM below 4 GiB: 0x%lx\n", top);
	hostile("hostile: buffer across the end of RAM", (uint16_t)h, true, true);
	h = build(0, T_IN, 0, &(struct seg){ 0x100000, 0xffffffffu, D_WRITE }, 1, DIRECT);
	hostile("hostile: 4 GiB buffer", (uint16_t)h, false, true);

	/* 3. a chain that loops: desc 0 (the header) -> 0 */
	slots[0].hdr = (struct req_hdr){ T_IN, 0, 0 };
	slots[0].status = 0xff;
	slots[0].busy = true;
	slots[0].head = 0;
	v.next_desc = 1;
	q_desc[0] = (struct vdesc){ (uintptr_t)&slots[0].hdr, 16, D_NEXT, 0 };
	hostile("hostile: chain loops (desc 0 -> 0)", 0, false, false);
	/* a longer loop through data descriptors: 0 -> 1 -> 2 -> 1 */
	slots[0].status = 0xff;
	slots[0].busy = true;
	v.next_desc = 3;
	q_desc[0] = (struct vdesc){ (uintptr_t)&slots[0].hdr, 16, D_NEXT, 1 };
	q_desc[1] = (struct vdesc){ (uintptr_t)rbuf, 512, D_NEXT | D_WRITE, 2 };
	q_desc[2] = (struct vdesc){ (uintptr_t)rbuf + 512, 512, D_NEXT | D_WRITE, 1 };
	hostile("hostile: chain loops (0 -> 1 -> 2 -> 1)", 0, false, false);

	/* 4. an indirect table containing an INDIRECT descriptor */
	nesttab[0] = (struct vdesc){ (uintptr_t)rbuf2, 512, D_WRITE, 0 };
	nesttab[1] = (struct vdesc){ (uintptr_t)&slots[0].status, 1, D_WRITE, 0 };
	h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)nesttab, 2 * sizeof(struct vdesc),
				      D_INDIRECT }, 1, INDIRECT);
	hostile("hostile: INDIRECT inside an indirect table", (uint16_t)h, true, true);

	/* 5. a chain longer than SEG_MAX (direct if it fits in the ring, else indirect) */
	uint32_t n = v.seg_max + 1;
	if (n + 2 <= BIGTAB && n + 2 <= 65535) {
		slots[0].hdr = (struct req_hdr){ T_IN, 0, 0 };
		slots[0].status = 0xff;
		slots[0].busy = true;
		bool direct = n + 2 <= v.num;
		struct vdesc *t = direct ? q_desc : bigtab;
		for (uint32_t i = 0; i < n + 2; i++) {
			t[i] = i == 0 ? (struct vdesc){ (uintptr_t)&slots[0].hdr, 16, 0, 0 }
			     : i == n + 1 ? (struct vdesc){ (uintptr_t)&slots[0].status, 1, D_WRITE, 0 }
					  : (struct vdesc){ (uintptr_t)rbuf, 512, D_WRITE, 0 };
			if (i < n + 1) {
				t[i].flags |= D_NEXT;
				t[i].next = (uint16_t)(i + 1);
			}
		}
		if (direct) {
			v.next_desc = (uint16_t)(n + 2);
			d = 0;
		} else {
			q_desc[0] = (struct vdesc){ (uintptr_t)bigtab, (n + 2) * 16, D_INDIRECT, 0 };
			v.next_desc = 1;
			d = 0;
		}
		slots[0].head = d;
		gprintf("guest: hostile: %u data segments (%s), seg_max %u, queue %u\n", n,
			direct ? "direct" : "in an indirect table", v.seg_max, v.num);
		hostile("hostile: chain longer than SEG_MAX", d, true, true);
	} else {
		check(false, "hostile: chain longer than SEG_MAX", "seg_max %u too large to test",
		      v.seg_max);
	}

	/* 6. an avail ring entry that is not a descriptor index */
	slots[0].busy = false;
	v.next_desc = 0;
	hostile("hostile: avail entry >= queue size", (uint16_t)(v.num + 5), false, false);

	/* 7. an indirect table outside RAM, and one whose length is not a multiple of 16 */
	slots[0].busy = true;
	slots[0].head = 0;
	slots[0].status = 0xff;
	q_desc[0] = (struct vdesc){ 0xfff0000000ull, 48, D_INDIRECT, 0 };
	v.next_desc = 1;
	hostile("hostile: indirect table outside RAM", 0, false, false);
	h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)rbuf, 512, D_WRITE }, 1, INDIRECT);
	q_desc[h].len = 3 * 16 + 5;
	hostile("hostile: indirect table length 53", (uint16_t)h, false, false);

	/* 8. a header shorter than 16 bytes */
	h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)rbuf, 512, D_WRITE }, 1, DIRECT);
	q_desc[h].len = 8;
	hostile("hostile: 8-byte request header", (uint16_t)h, false, false);

	/* 9. wrong directions: the status byte device-readable; an IN buffer device-readable.
	 * The device must not write into either. */
	h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)rbuf, 512, D_WRITE }, 1, DIRECT);
	q_desc[h + 2].flags = 0;
	hostile("hostile: read-only status descriptor", (uint16_t)h, false, false);
	check(v.hostile_status == 0xff, "hostile: read-only status untouched", "0x%x",
	      v.hostile_status);
	memset(rbuf2, 0xee, 512);
	h = build(0, T_IN, 0, &(struct seg){ (uintptr_t)rbuf2, 512, 0 }, 1, DIRECT);
	hostile("hostile: IN into a device-readable buffer", (uint16_t)h, true, true);
	bool kept = true;
	for (unsigned i = 0; i < 512; i++)
		kept &= rbuf2[i] == 0xee;
	check(kept, "hostile: device-readable buffer untouched", "%s",
	      kept ? "512 bytes kept" : "the device wrote into it");

	sanity_read("hostile: device still works");
}

void vblk_tests(const struct mmio_dev *dev)
{
	char b[32];
	v.base = dev->base;
	v.image = cmdline_get("testguest.mode", b, sizeof(b)) && !strncmp(b, "image", 6);
	v.lenient = cmdline_flag("testguest.lenient");
	v.discard_zeroes = cmdline_flag("testguest.discard_zeroes");
	v.scratch = cmdline_get("testguest.scratch", b, sizeof(b)) ? parse_u64(b, NULL) : 2048;
	gprintf("guest: mode %s, scratch sector %lu%s%s\n", v.image ? "image" : "raw (pattern A)",
		v.scratch, v.lenient ? ", lenient" : "",
		v.discard_zeroes ? ", discard zeroes" : "");
	if (!check(v.scratch >= 8 && v.scratch % 8 == 0, "testguest.scratch", "%lu", v.scratch))
		return;
	if (!vblk_init(true))
		return;
	t_get_id();
	if (!v.image)
		t_reads();
	t_sums();
	t_writes();
	t_discard_zeroes();
	t_errors();
	t_event_idx();
	t_hostile();
	check(v.ae_bad == 0, "event-idx: avail_event", "matched the avail index after %u of %u "
	      "waits; %u notifications, %u suppressed, %u completions, %u device resets",
	      v.ae_ok, v.ae_ok + v.ae_bad, v.kicks, v.suppressed, v.completions, v.resets);
	dev_reset();
}

/* ---- count mode (count.c): the driver without the tests */
bool vblk_open(const struct mmio_dev *dev)
{
	v.base = dev->base;
	return vblk_init(false);
}

int vblk_write_sector(uint64_t lba, const void *buf)
{
	struct seg s = { (uintptr_t)wbuf, 512, 0 };

	memcpy(wbuf, buf, 512);
	return req(T_OUT, lba, &s, 1, DIRECT);
}
