/* SPDX-License-Identifier: MIT */
/*
 * vmm-glue/virtio_mmio: the register interface driven as Linux's virtio_mmio driver does,
 * without KVM (vm_fd -1: QueueNotify runs the queue inline); with /dev/kvm, the ioeventfd
 * + I/O thread path too (kicked through the same register, which then writes the eventfd).
 */
#include "../helpers.h"

#include <endian.h>
#include <linux/kvm.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <sys/ioctl.h>

#include "../../../blkd/disk/disk_int.h"
#include "../../../vmm-glue/virtio_mmio.h"
#include "../virtq_guest.h"

#define DISK (256u << 10)
#define BASE 0xd0000000ull

struct fx {
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t img[DISK];
	struct disk be;
	struct tguest g;
	struct virtio_mmio *d;
	int kvm_fd, vm_fd;
};

static struct fx fx;

static void fx_open(struct fx *f, unsigned nq, int vm_fd)
{
	struct virtio_mmio_opts o = { .vm_fd = vm_fd, .base = BASE, .gsi = 5, .num_queues = nq,
				      .serial = "mmio" };

	disk_file_make(f->dir, f->path, f->img, DISK, 3);
	assert_int_equal(disk_raw_open(f->path, false, &f->be), 0);
	tg_init(&f->g, 16);
	o.mem = &f->g.mem;
	o.disk = &f->be;
	assert_int_equal(virtio_mmio_blk_new(&o, &f->d), 0);
}

static void fx_close(struct fx *f)
{
	virtio_mmio_free(f->d);
	disk_close(&f->be);
	tg_free(&f->g);
	rm_rf(f->dir);
}

static uint32_t rd(struct fx *f, uint64_t off)
{
	uint32_t v;

	virtio_mmio_access(f->d, off, (uint8_t *)&v, 4, false);
	return le32toh(v);
}

static void wr(struct fx *f, uint64_t off, uint32_t v)
{
	v = htole32(v);
	virtio_mmio_access(f->d, off, (uint8_t *)&v, 4, true);
}

/* Status handshake up to FEATURES_OK with the given features; returns the status read back. */
static uint32_t negotiate(struct fx *f, uint64_t feat)
{
	wr(f, VIRTIO_MMIO_STATUS, 0);
	wr(f, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	wr(f, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	wr(f, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	wr(f, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)feat);
	wr(f, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr(f, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(feat >> 32));
	wr(f, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	   VIRTIO_CONFIG_S_FEATURES_OK);
	return rd(f, VIRTIO_MMIO_STATUS);
}

static uint64_t dev_features(struct fx *f)
{
	wr(f, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	uint64_t hi = rd(f, VIRTIO_MMIO_DEVICE_FEATURES);
	wr(f, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	return hi << 32 | rd(f, VIRTIO_MMIO_DEVICE_FEATURES);
}

static void queue_setup(struct fx *f, unsigned q, uint64_t desc, uint64_t avail, uint64_t used)
{
	wr(f, VIRTIO_MMIO_QUEUE_SEL, q);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_READY), 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_NUM_MAX), 256);
	wr(f, VIRTIO_MMIO_QUEUE_NUM, f->g.num);
	wr(f, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	wr(f, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	wr(f, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	wr(f, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(avail >> 32));
	wr(f, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	wr(f, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(used >> 32));
	wr(f, VIRTIO_MMIO_QUEUE_READY, 1);
}

/* The whole bring-up with every offered feature, queue 0 on the test ring. */
static void bring_up(struct fx *f)
{
	uint32_t st = negotiate(f, dev_features(f));

	assert_true(st & VIRTIO_CONFIG_S_FEATURES_OK);
	queue_setup(f, 0, f->g.desc, f->g.avail, f->g.used);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_READY), 1);
	wr(f, VIRTIO_MMIO_STATUS, st | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* Queue an IN request of 1024 bytes at sector; returns the data's gpa (status after it). */
static uint64_t submit_read(struct fx *f, uint64_t sector)
{
	uint64_t h = tg_blk_hdr(&f->g, VIRTIO_BLK_T_IN, sector), data = tg_alloc(&f->g, 1025, 512);

	*((uint8_t *)tg_ptr(&f->g, data) + 1024) = 0xee;
	struct tg_buf b[] = { { h, 16, false }, { data, 1025, true } };
	__atomic_store_n(tg_used_event(&f->g), f->g.last_used, __ATOMIC_RELAXED);
	tg_submit(&f->g, tg_chain(&f->g, b, 2));
	return data;
}

static void check_read(struct fx *f, uint64_t data, uint64_t sector)
{
	uint32_t id, len;

	assert_true(tg_get_used(&f->g, &id, &len));
	assert_int_equal(len, 1025);
	assert_int_equal(*((uint8_t *)tg_ptr(&f->g, data) + 1024), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f->g, data), f->img + sector * 512, 1024);
}

static void test_ids_config(void **state)
{
	struct fx *f = &fx;
	uint8_t b[8];
	uint64_t v64;
	uint16_t v16;

	(void)state;
	fx_open(f, 1, -1);
	assert_int_equal(rd(f, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	assert_int_equal(rd(f, VIRTIO_MMIO_VERSION), 2);
	assert_int_equal(rd(f, VIRTIO_MMIO_DEVICE_ID), 2);
	assert_int_equal(rd(f, VIRTIO_MMIO_VENDOR_ID), 0x4c5a424b);
	uint64_t feat = dev_features(f);
	assert_true(feat & (1ull << VIRTIO_F_VERSION_1));
	assert_true(feat & (1ull << VIRTIO_BLK_F_FLUSH));
	assert_false(feat & (1ull << VIRTIO_BLK_F_MQ));
	wr(f, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	assert_int_equal(rd(f, VIRTIO_MMIO_DEVICE_FEATURES), 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_SHM_LEN_LOW), 0xffffffffu);
	assert_int_equal(rd(f, VIRTIO_MMIO_CONFIG_GENERATION), 0);
	/* registers: 32-bit aligned accesses only */
	memset(b, 0xaa, sizeof(b));
	virtio_mmio_access(f->d, VIRTIO_MMIO_MAGIC_VALUE, b, 2, false);
	assert_int_equal(b[0] | b[1], 0);
	virtio_mmio_access(f->d, VIRTIO_MMIO_MAGIC_VALUE + 1, b, 4, false);
	assert_int_equal(b[0] | b[3], 0);
	virtio_mmio_access(f->d, VIRTIO_MMIO_STATUS, b, 1, true);   /* ignored */
	assert_int_equal(rd(f, VIRTIO_MMIO_STATUS), 0);
	/* config: any width */
	virtio_mmio_access(f->d, 0x100, (uint8_t *)&v64, 8, false);
	assert_int_equal(le64toh(v64), DISK / 512);
	virtio_mmio_access(f->d, 0x100, b, 1, false);
	assert_int_equal(b[0], (DISK / 512) & 0xff);
	virtio_mmio_access(f->d, 0x101, (uint8_t *)&v16, 2, false);
	assert_int_equal(le16toh(v16), (DISK / 512) >> 8);
	assert_int_equal(rd(f, 0x100 + offsetof(struct virtio_blk_config, blk_size)), 512);
	assert_int_equal(rd(f, 0x100 + offsetof(struct virtio_blk_config, seg_max)),
			 VBLK_SEG_MAX);
	assert_int_equal(rd(f, 0xffc), 0);
	wr(f, 0x100, 0x12345678);   /* config writes are ignored */
	virtio_mmio_access(f->d, 0x100, (uint8_t *)&v64, 8, false);
	assert_int_equal(le64toh(v64), DISK / 512);
	fx_close(f);
}

static void test_negotiation(void **state)
{
	struct fx *f = &fx;
	uint64_t feat;

	(void)state;
	fx_open(f, 1, -1);
	feat = dev_features(f);
	/* a feature not offered: FEATURES_OK does not stick */
	assert_false(negotiate(f, feat | (1ull << VIRTIO_BLK_F_MQ)) & VIRTIO_CONFIG_S_FEATURES_OK);
	/* a legacy driver (no VERSION_1) is refused */
	assert_false(negotiate(f, feat & ~(1ull << VIRTIO_F_VERSION_1)) &
		     VIRTIO_CONFIG_S_FEATURES_OK);
	/* DRIVER_OK without FEATURES_OK does not start anything */
	wr(f, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
	   VIRTIO_CONFIG_S_DRIVER_OK);
	assert_false(rd(f, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_DRIVER_OK);
	/* a subset is fine */
	assert_int_equal(negotiate(f, 1ull << VIRTIO_F_VERSION_1),
			 VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
			 VIRTIO_CONFIG_S_FEATURES_OK);
	/* reset */
	wr(f, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_STATUS), 0);
	fx_close(f);
}

static void test_queue_io(void **state)
{
	struct fx *f = &fx;
	uint64_t data;
	uint32_t id, len;

	(void)state;
	fx_open(f, 1, -1);
	wr(f, VIRTIO_MMIO_QUEUE_SEL, 1);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);   /* no such queue */
	bring_up(f);
	data = submit_read(f, 10);
	assert_int_equal(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 10);
	assert_int_equal(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	wr(f, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	assert_int_equal(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	/* queue registers are frozen while the queue is ready */
	wr(f, VIRTIO_MMIO_QUEUE_SEL, 0);
	wr(f, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x1000);
	data = submit_read(f, 20);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 7);   /* no such queue: ignored */
	assert_false(tg_get_used(&f->g, &id, &len));
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 20);
	/* the driver stops the queue (vm_del_vq): kicks do nothing */
	wr(f, VIRTIO_MMIO_QUEUE_READY, 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_READY), 0);
	submit_read(f, 30);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_false(tg_get_used(&f->g, &id, &len));
	fx_close(f);
}

static void test_pending_before_driver_ok(void **state)
{
	struct fx *f = &fx;
	uint64_t data;
	uint32_t id, len, st;

	(void)state;
	fx_open(f, 1, -1);
	st = negotiate(f, dev_features(f));
	queue_setup(f, 0, f->g.desc, f->g.avail, f->g.used);
	data = submit_read(f, 3);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_false(tg_get_used(&f->g, &id, &len));   /* not before DRIVER_OK */
	wr(f, VIRTIO_MMIO_STATUS, st | VIRTIO_CONFIG_S_DRIVER_OK);
	check_read(f, data, 3);
	fx_close(f);
}

static void test_reset(void **state)
{
	struct fx *f = &fx;
	uint64_t data;
	uint32_t id, len;

	(void)state;
	fx_open(f, 1, -1);
	bring_up(f);
	data = submit_read(f, 1);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 1);
	wr(f, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_STATUS), 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	wr(f, VIRTIO_MMIO_QUEUE_SEL, 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_READY), 0);
	submit_read(f, 2);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_false(tg_get_used(&f->g, &id, &len));
	/* a fresh start on fresh rings */
	tg_free(&f->g);
	tg_init(&f->g, 16);
	bring_up(f);
	data = submit_read(f, 5);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 5);
	fx_close(f);
}

static void test_broken(void **state)
{
	struct fx *f = &fx;
	uint64_t data;
	uint32_t id, len, st;

	(void)state;
	fx_open(f, 1, -1);
	bring_up(f);
	/* a descriptor loop */
	tg_set_desc(tg_desc(&f->g, 0), f->g.desc, 16, VIRTQ_DESC_F_NEXT, 0);
	tg_submit(&f->g, 0);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_true(rd(f, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	assert_true(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_CONFIG);
	/* the driver writing status bits keeps NEEDS_RESET; the queue stays stopped */
	wr(f, VIRTIO_MMIO_STATUS, rd(f, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_FAILED);
	assert_true(rd(f, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	f->g.next_desc = 1;
	submit_read(f, 0);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_false(tg_get_used(&f->g, &id, &len));
	/* reset recovers */
	wr(f, VIRTIO_MMIO_STATUS, 0);
	assert_int_equal(rd(f, VIRTIO_MMIO_STATUS), 0);
	tg_free(&f->g);
	tg_init(&f->g, 16);
	bring_up(f);
	data = submit_read(f, 9);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 9);

	/* rings outside guest memory when the queue is made ready */
	wr(f, VIRTIO_MMIO_STATUS, 0);
	st = negotiate(f, dev_features(f));
	queue_setup(f, 0, 0x1000, f->g.avail, f->g.used);
	assert_int_equal(rd(f, VIRTIO_MMIO_QUEUE_READY), 0);
	assert_true(rd(f, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	/* a bad size too */
	wr(f, VIRTIO_MMIO_STATUS, 0);
	st = negotiate(f, dev_features(f));
	wr(f, VIRTIO_MMIO_QUEUE_SEL, 0);
	wr(f, VIRTIO_MMIO_QUEUE_NUM, 12);
	wr(f, VIRTIO_MMIO_QUEUE_READY, 1);
	assert_true(rd(f, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	(void)st;
	fx_close(f);
}

static void test_multiqueue(void **state)
{
	struct fx *f = &fx;
	struct tguest g1;
	uint32_t id, len, st;

	(void)state;
	fx_open(f, 2, -1);
	assert_true(dev_features(f) & (1ull << VIRTIO_BLK_F_MQ));
	assert_int_equal(rd(f, 0x100 + offsetof(struct virtio_blk_config, num_queues)) & 0xffff,
			 2);
	st = negotiate(f, dev_features(f));
	queue_setup(f, 0, f->g.desc, f->g.avail, f->g.used);
	/* queue 1's rings elsewhere in the same memory */
	g1 = f->g;
	g1.desc = tg_alloc(&f->g, 16 * 16, 4096);
	g1.avail = tg_alloc(&f->g, 6 + 2 * 16, 4096);
	g1.used = tg_alloc(&f->g, 6 + 8 * 16, 4096);
	g1.brk = f->g.brk + (64u << 10);   /* separate buffer areas in the same memory */
	f->g.brk += 128u << 10;
	queue_setup(f, 1, g1.desc, g1.avail, g1.used);
	wr(f, VIRTIO_MMIO_STATUS, st | VIRTIO_CONFIG_S_DRIVER_OK);

	struct tguest g0 = f->g;
	f->g = g1;
	uint64_t data = submit_read(f, 40);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_false(tg_get_used(&f->g, &id, &len));   /* queue 0 has nothing */
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 1);
	check_read(f, data, 40);
	f->g = g0;
	data = submit_read(f, 41);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 41);
	fx_close(f);
}

/* The threaded path: ioeventfd-backed kicks on an I/O thread, the irqfd on GSI 5. */
/* Paused: kicks process nothing (the request stays available); resume serves it. */
static void test_pause(void **state)
{
	struct fx *f = &fx;
	uint64_t data;
	uint32_t id, len;

	(void)state;
	fx_open(f, 1, -1);
	bring_up(f);
	virtio_mmio_pause(f->d);
	data = submit_read(f, 5);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	assert_false(tg_get_used(&f->g, &id, &len));
	assert_int_equal(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	virtio_mmio_resume(f->d);
	check_read(f, data, 5);
	data = submit_read(f, 6);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	check_read(f, data, 6);
	fx_close(f);
}

static void test_kvm_threads(void **state)
{
	struct fx *f = &fx;
	uint64_t data;
	uint32_t id, len;

	(void)state;
	f->kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (f->kvm_fd < 0)
		skip();
	f->vm_fd = ioctl(f->kvm_fd, KVM_CREATE_VM, 0);
	if (f->vm_fd < 0 || ioctl(f->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0) {
		if (f->vm_fd >= 0)
			close(f->vm_fd);
		close(f->kvm_fd);
		skip();
	}
	fx_open(f, 2, f->vm_fd);
	bring_up(f);
	for (int i = 0; i < 50; i++) {
		double t0 = now_monotonic();
		bool got = false;

		data = submit_read(f, (uint64_t)i);
		/* what KVM does on the guest's QueueNotify write: the register path writes the
		 * queue's eventfd when there is one */
		wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
		while (!got && now_monotonic() - t0 < 60) { /* a state, waited for generously */
			got = __atomic_load_n(&tg_used(&f->g)->idx, __ATOMIC_ACQUIRE) != f->g.last_used;
			if (!got)
				usleep(100);
		}
		assert_true(got);
		check_read(f, data, (uint64_t)i);
	}
	assert_true(rd(f, VIRTIO_MMIO_INTERRUPT_STATUS) & VIRTIO_MMIO_INT_VRING);
	/* reset with the thread running, then free (joins) */
	submit_read(f, 60);
	wr(f, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	wr(f, VIRTIO_MMIO_STATUS, 0);
	(void)id;
	(void)len;
	fx_close(f);
	close(f->vm_fd);
	close(f->kvm_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ids_config),
		cmocka_unit_test(test_negotiation),
		cmocka_unit_test(test_queue_io),
		cmocka_unit_test(test_pending_before_driver_ok),
		cmocka_unit_test(test_reset),
		cmocka_unit_test(test_broken),
		cmocka_unit_test(test_multiqueue),
		cmocka_unit_test(test_pause),
		cmocka_unit_test(test_kvm_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
