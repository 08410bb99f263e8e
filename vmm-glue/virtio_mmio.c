/* SPDX-License-Identifier: MIT */
/*
 * vmm-glue/virtio_mmio: the virtio-mmio (version 2) transport of a virtio-blk device.
 *
 * Each queue is a runner (blkd/virtio/vq_runner.h): its I/O thread waits on the queue's
 * ioeventfd, drains the ring and raises the interrupt through the ops below; without KVM
 * (no ioeventfd) a QueueNotify write drains the ring on the vCPU that wrote it.
 *
 * Locks: d->lock serializes register accesses (vCPUs); q->run.lock is held by whoever
 * processes queue q (its I/O thread, or the vCPU kicking it when there is no KVM), and by
 * register writes that start or stop the queue, so a reset waits for the batch in progress.
 * Order: d->lock, then q->run.lock. The fields I/O threads change themselves
 * (InterruptStatus, DEVICE_NEEDS_RESET in Status) are atomics.
 *
 * Interrupts are edge-triggered: every notification is one irqfd write (a pulse on the
 * GSI), as in Firecracker; the DSDT declares the line Edge, ActiveHigh (and GSIs 5..15 are
 * edge-triggered ISA lines by default anyway). InterruptStatus only tells the driver why.
 */
#include "virtio_mmio.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/kvm.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_mmio.h>

#include "../blkd/virtio/vq_runner.h"

#define MMIO_MAGIC 0x74726976u    /* "virt" */
#define MMIO_VERSION 2u
#define MMIO_VENDOR 0x4c5a424bu   /* "LZBK" */
#define QUEUE_NUM_MAX 256u
#define CONFIG_BASE 0x100u

struct vmmio_queue {
	struct virtio_mmio *d;
	unsigned idx;
	/* registers, under d->lock */
	uint32_t num, ready;
	uint64_t desc, driver, device;
	/* processing: the ring, its lock, the I/O thread */
	struct vq_runner run;
	bool active;               /* under run.lock */
	int kick_fd;               /* ioeventfd, or -1 without KVM (kicks run inline) */
};

struct virtio_mmio {
	struct virtio_mmio_opts o;
	struct vblk_dev blk;
	pthread_mutex_t lock;
	uint32_t status;           /* atomic */
	uint32_t isr;              /* atomic */
	int paused;                /* atomic: virtio_mmio_pause(), the runners serve nothing */
	uint32_t dev_feat_sel, drv_feat_sel, queue_sel;
	uint64_t drv_features;
	int irq_fd, stop_fd;
	unsigned nq;
	struct vmmio_queue q[];
};

static void irq_raise(struct virtio_mmio *d, uint32_t why)
{
	__atomic_fetch_or(&d->isr, why, __ATOMIC_SEQ_CST);
	if (d->irq_fd >= 0)
		eventfd_write(d->irq_fd, 1);
}

/* The guest broke the rules: stop using the queues until it resets the device. */
static void device_break(struct virtio_mmio *d)
{
	__atomic_fetch_or(&d->status, VIRTIO_CONFIG_S_NEEDS_RESET, __ATOMIC_SEQ_CST);
	irq_raise(d, VIRTIO_MMIO_INT_CONFIG);
}

/* ---- the runner's ops (run.lock held) */

static bool queue_ready(struct vq_runner *r)
{
	struct vmmio_queue *q = r->ctx;

	return q->active && !__atomic_load_n(&q->d->paused, __ATOMIC_SEQ_CST) &&
	       !(__atomic_load_n(&q->d->status, __ATOMIC_SEQ_CST) & VIRTIO_CONFIG_S_NEEDS_RESET);
}

static void queue_notify(struct vq_runner *r)
{
	struct vmmio_queue *q = r->ctx;

	irq_raise(q->d, VIRTIO_MMIO_INT_VRING);
}

static void queue_broken(struct vq_runner *r, const char *why)
{
	struct vmmio_queue *q = r->ctx;

	(void)why;   /* the driver learns it from DEVICE_NEEDS_RESET */
	q->active = false;
	device_break(q->d);
}

static const struct vq_runner_ops queue_ops = {
	.ready = queue_ready,
	.notify = queue_notify,
	.broken = queue_broken,
};

static void queue_stop(struct vmmio_queue *q)
{
	pthread_mutex_lock(&q->run.lock);
	q->active = false;
	pthread_mutex_unlock(&q->run.lock);
}

static void queue_start(struct vmmio_queue *q)
{
	pthread_mutex_lock(&q->run.lock);
	q->active = true;
	pthread_mutex_unlock(&q->run.lock);
	vq_runner_kick(&q->run);   /* buffers made available before DRIVER_OK */
}

static bool driver_ok(uint32_t status)
{
	return (status & (VIRTIO_CONFIG_S_DRIVER_OK | VIRTIO_CONFIG_S_FEATURES_OK |
			  VIRTIO_CONFIG_S_FAILED | VIRTIO_CONFIG_S_NEEDS_RESET)) ==
	       (VIRTIO_CONFIG_S_DRIVER_OK | VIRTIO_CONFIG_S_FEATURES_OK);
}

static void device_reset(struct virtio_mmio *d)
{
	for (unsigned i = 0; i < d->nq; i++) {
		struct vmmio_queue *q = &d->q[i];

		queue_stop(q);   /* waits for the batch in progress */
		q->num = q->ready = 0;
		q->desc = q->driver = q->device = 0;
		memset(&q->run.vq, 0, sizeof(q->run.vq));
		if (q->kick_fd >= 0) {
			eventfd_t v;

			eventfd_read(q->kick_fd, &v);   /* drop a stale kick (non-blocking) */
		}
	}
	d->dev_feat_sel = d->drv_feat_sel = d->queue_sel = 0;
	d->drv_features = 0;
	d->blk.acked = 0;
	__atomic_store_n(&d->isr, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&d->status, 0, __ATOMIC_SEQ_CST);
}

static void status_write(struct virtio_mmio *d, uint32_t v)
{
	uint32_t old = __atomic_load_n(&d->status, __ATOMIC_SEQ_CST), set;

	if (!v) {
		device_reset(d);
		return;
	}
	/* the driver only sets bits (clearing is a reset); NEEDS_RESET is the device's */
	set = v & ~old & ~(uint32_t)VIRTIO_CONFIG_S_NEEDS_RESET;
	if ((set & VIRTIO_CONFIG_S_FEATURES_OK) &&
	    vblk_dev_ack_features(&d->blk, d->drv_features) < 0)
		set &= ~(uint32_t)VIRTIO_CONFIG_S_FEATURES_OK;   /* refused: the driver re-reads */
	if ((set & VIRTIO_CONFIG_S_DRIVER_OK) &&
	    !((old | set) & VIRTIO_CONFIG_S_FEATURES_OK))
		set &= ~(uint32_t)VIRTIO_CONFIG_S_DRIVER_OK;
	old = __atomic_fetch_or(&d->status, set, __ATOMIC_SEQ_CST);
	if (set & VIRTIO_CONFIG_S_FAILED) {
		for (unsigned i = 0; i < d->nq; i++)
			queue_stop(&d->q[i]);
	} else if ((set & VIRTIO_CONFIG_S_DRIVER_OK) && driver_ok(old | set)) {
		for (unsigned i = 0; i < d->nq; i++)
			if (d->q[i].ready)
				queue_start(&d->q[i]);
	}
}

static void queue_ready_write(struct virtio_mmio *d, struct vmmio_queue *q, uint32_t v)
{
	int ret;

	if (v && !q->ready) {
		pthread_mutex_lock(&q->run.lock);
		ret = vblk_ring_setup(&d->blk, &q->run.vq, d->o.mem, q->num, q->desc, q->driver,
				      q->device);
		pthread_mutex_unlock(&q->run.lock);
		if (ret < 0) {
			device_break(d);   /* rings outside guest memory, bad size */
			return;
		}
		q->ready = 1;
		if (driver_ok(__atomic_load_n(&d->status, __ATOMIC_SEQ_CST)))
			queue_start(q);
	} else if (!v && q->ready) {
		queue_stop(q);
		q->ready = 0;
	}
}

static void set_lo(uint64_t *r, uint32_t v)
{
	*r = (*r & ~0xffffffffull) | v;
}

static void set_hi(uint64_t *r, uint32_t v)
{
	*r = (*r & 0xffffffffull) | (uint64_t)v << 32;
}

static void reg_write(struct virtio_mmio *d, uint32_t off, uint32_t v)
{
	struct vmmio_queue *q = d->queue_sel < d->nq ? &d->q[d->queue_sel] : NULL;
	bool cfg_ok = !(__atomic_load_n(&d->status, __ATOMIC_SEQ_CST) &
			VIRTIO_CONFIG_S_FEATURES_OK);

	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		d->dev_feat_sel = v;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (cfg_ok && d->drv_feat_sel == 0)
			set_lo(&d->drv_features, v);
		else if (cfg_ok && d->drv_feat_sel == 1)
			set_hi(&d->drv_features, v);
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		d->drv_feat_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		d->queue_sel = v;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		if (q && !q->ready)
			q->num = v;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		if (q)
			queue_ready_write(d, q, v);
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		if (v < d->nq)
			vq_runner_kick(&d->q[v].run);
		break;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		__atomic_fetch_and(&d->isr, ~v, __ATOMIC_SEQ_CST);
		break;
	case VIRTIO_MMIO_STATUS:
		status_write(d, v);
		break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW:
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH:
	case VIRTIO_MMIO_QUEUE_USED_LOW:
	case VIRTIO_MMIO_QUEUE_USED_HIGH: {
		uint64_t *r;

		if (!q || q->ready)
			break;
		r = off < VIRTIO_MMIO_QUEUE_AVAIL_LOW ? &q->desc :
		    off < VIRTIO_MMIO_QUEUE_USED_LOW ? &q->driver : &q->device;
		if (off & 4)
			set_hi(r, v);
		else
			set_lo(r, v);
		break;
	}
	default:
		break;   /* read-only registers, SHMSel, QueueReset (not offered) */
	}
}

static uint32_t reg_read(struct virtio_mmio *d, uint32_t off)
{
	struct vmmio_queue *q = d->queue_sel < d->nq ? &d->q[d->queue_sel] : NULL;

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:
		return MMIO_VERSION;
	case VIRTIO_MMIO_DEVICE_ID:
		return VIRTIO_ID_BLOCK;
	case VIRTIO_MMIO_VENDOR_ID:
		return MMIO_VENDOR;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return d->dev_feat_sel == 0 ? (uint32_t)d->blk.features :
		       d->dev_feat_sel == 1 ? (uint32_t)(d->blk.features >> 32) : 0;
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return q ? QUEUE_NUM_MAX : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return q ? q->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return __atomic_load_n(&d->isr, __ATOMIC_SEQ_CST);
	case VIRTIO_MMIO_STATUS:
		return __atomic_load_n(&d->status, __ATOMIC_SEQ_CST);
	case VIRTIO_MMIO_SHM_LEN_LOW:
	case VIRTIO_MMIO_SHM_LEN_HIGH:
	case VIRTIO_MMIO_SHM_BASE_LOW:
	case VIRTIO_MMIO_SHM_BASE_HIGH:
		return 0xffffffffu;   /* no shared memory regions */
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return 0;             /* the config space never changes */
	default:
		return 0;
	}
}

void virtio_mmio_access(struct virtio_mmio *d, uint64_t off, uint8_t *data, uint32_t len,
			bool is_write)
{
	uint32_t v;

	if (off >= VIRTIO_MMIO_WINDOW || !len || len > 8)
		return;
	if (off >= CONFIG_BASE) {
		/* any width; read-only (no VIRTIO_BLK_F_CONFIG_WCE), never changes: no lock */
		if (!is_write)
			vblk_config_read(&d->blk, (uint32_t)off - CONFIG_BASE, data, len);
		return;
	}
	if (len != 4 || (off & 3)) {
		/* registers are 32-bit, aligned (4.2.2.2): ignore anything else */
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (is_write) {
		memcpy(&v, data, 4);
		reg_write(d, (uint32_t)off, le32toh(v));
	} else {
		v = htole32(reg_read(d, (uint32_t)off));
		memcpy(data, &v, 4);
	}
	pthread_mutex_unlock(&d->lock);
}

void virtio_mmio_pause(struct virtio_mmio *d)
{
	__atomic_store_n(&d->paused, 1, __ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < d->nq; i++) {
		/* the batch in progress ends (its requests complete) before the lock is ours */
		pthread_mutex_lock(&d->q[i].run.lock);
		pthread_mutex_unlock(&d->q[i].run.lock);
	}
}

void virtio_mmio_resume(struct virtio_mmio *d)
{
	__atomic_store_n(&d->paused, 0, __ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < d->nq; i++)
		vq_runner_kick(&d->q[i].run); /* what the driver made available meanwhile */
}

int virtio_mmio_state_save(struct virtio_mmio *d, struct virtio_mmio_state *st)
{
	memset(st, 0, sizeof(*st));
	if (d->nq > VIRTIO_MMIO_STATE_QUEUES)
		return -E2BIG;
	st->status = __atomic_load_n(&d->status, __ATOMIC_SEQ_CST);
	st->isr = __atomic_load_n(&d->isr, __ATOMIC_SEQ_CST);
	st->dev_feat_sel = d->dev_feat_sel;
	st->drv_feat_sel = d->drv_feat_sel;
	st->queue_sel = d->queue_sel;
	st->nq = d->nq;
	st->drv_features = d->drv_features;
	st->acked = d->blk.acked;
	for (unsigned i = 0; i < d->nq; i++) {
		const struct vmmio_queue *q = &d->q[i];
		const struct vring_queue *vq = &q->run.vq;

		if (q->ready && vq->last_avail_idx != vq->used_idx)
			return -EBUSY;
		st->q[i] = (struct virtio_mmio_qstate){
			.num = q->num, .ready = q->ready, .desc = q->desc, .driver = q->driver,
			.device = q->device, .last_avail_idx = vq->last_avail_idx,
			.used_idx = vq->used_idx, .signalled_used = vq->signalled_used,
			.signalled_used_valid = vq->signalled_used_valid,
		};
	}
	return 0;
}

static int queue_state_load(struct virtio_mmio *d, struct vmmio_queue *q,
			    const struct virtio_mmio_qstate *qs)
{
	struct vring_queue *vq = &q->run.vq;

	if (qs->ready > 1 || qs->num > QUEUE_NUM_MAX || (qs->num & (qs->num - 1)) ||
	    qs->signalled_used_valid > 1)
		return -EINVAL;
	q->num = qs->num;
	q->desc = qs->desc;
	q->driver = qs->driver;
	q->device = qs->device;
	if (!qs->ready)
		return 0;
	if (vblk_ring_setup(&d->blk, vq, d->o.mem, q->num, q->desc, q->driver, q->device) < 0)
		return -EINVAL;
	vq->last_avail_idx = qs->last_avail_idx;
	vq->used_idx = qs->used_idx;
	vq->signalled_used = qs->signalled_used;
	vq->signalled_used_valid = qs->signalled_used_valid;
	q->ready = 1;
	return 0;
}

int virtio_mmio_state_load(struct virtio_mmio *d, const struct virtio_mmio_state *st)
{
	int ret = 0;

	if (st->nq != d->nq || st->status > 0xff)
		return -EINVAL;
	pthread_mutex_lock(&d->lock);
	d->dev_feat_sel = st->dev_feat_sel;
	d->drv_feat_sel = st->drv_feat_sel;
	d->queue_sel = st->queue_sel;
	d->drv_features = st->drv_features;
	if ((st->status & VIRTIO_CONFIG_S_FEATURES_OK) &&
	    vblk_dev_ack_features(&d->blk, st->acked) < 0)
		ret = -EINVAL;
	for (unsigned i = 0; !ret && i < d->nq; i++) {
		pthread_mutex_lock(&d->q[i].run.lock);
		ret = queue_state_load(d, &d->q[i], &st->q[i]);
		pthread_mutex_unlock(&d->q[i].run.lock);
	}
	if (!ret) {
		__atomic_store_n(&d->isr, st->isr & 3, __ATOMIC_SEQ_CST);
		__atomic_store_n(&d->status, st->status, __ATOMIC_SEQ_CST);
		if (driver_ok(st->status))
			for (unsigned i = 0; i < d->nq; i++)
				if (d->q[i].ready)
					queue_start(&d->q[i]);
	}
	pthread_mutex_unlock(&d->lock);
	return ret;
}

static int kvm_ioeventfd(struct virtio_mmio *d, struct vmmio_queue *q)
{
	struct kvm_ioeventfd io = {
		.datamatch = q->idx,
		.addr = d->o.base + VIRTIO_MMIO_QUEUE_NOTIFY,
		.len = 4,
		.fd = q->kick_fd,
		.flags = KVM_IOEVENTFD_FLAG_DATAMATCH,
	};

	return ioctl(d->o.vm_fd, KVM_IOEVENTFD, &io) < 0 ? -errno : 0;
}

static int kvm_irqfd(struct virtio_mmio *d)
{
	struct kvm_irqfd irq = {
		.fd = (uint32_t)d->irq_fd,
		.gsi = d->o.gsi,
	};

	return ioctl(d->o.vm_fd, KVM_IRQFD, &irq) < 0 ? -errno : 0;
}

void virtio_mmio_free(struct virtio_mmio *d)
{
	if (!d)
		return;
	if (d->stop_fd >= 0)
		eventfd_write(d->stop_fd, 1);
	for (unsigned i = 0; i < d->nq; i++) {
		struct vmmio_queue *q = &d->q[i];

		vq_runner_destroy(&q->run);   /* joins the I/O thread */
		if (q->kick_fd >= 0)
			close(q->kick_fd);
	}
	/*
	 * The ioeventfds and the irqfd are not deassigned: the device goes only with its VM,
	 * whose teardown drops them, and a deassign waits for an SRCU grace period (25-30 ms
	 * each on a loaded machine) on the way out.
	 */
	if (d->irq_fd >= 0)
		close(d->irq_fd);
	if (d->stop_fd >= 0)
		close(d->stop_fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* KVM notifications: the irqfd, one ioeventfd and one I/O thread per queue. */
static int kvm_wire(struct virtio_mmio *d)
{
	int ret;

	d->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	d->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->irq_fd < 0 || d->stop_fd < 0)
		return -errno;
	ret = kvm_irqfd(d);
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < d->nq; i++) {
		struct vmmio_queue *q = &d->q[i];

		q->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->kick_fd < 0)
			return -errno;
		ret = kvm_ioeventfd(d, q);
		if (ret < 0)
			return ret;
		ret = vq_runner_start(&q->run, q->kick_fd, d->stop_fd);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int virtio_mmio_blk_new(const struct virtio_mmio_opts *o, struct virtio_mmio **out)
{
	struct virtio_mmio *d;
	int ret;

	if (!o->mem || !o->disk || !o->num_queues || o->num_queues > 256 ||
	    (o->base & (VIRTIO_MMIO_WINDOW - 1)))
		return -EINVAL;
	d = calloc(1, sizeof(*d) + o->num_queues * sizeof(d->q[0]));
	if (!d)
		return -ENOMEM;
	d->o = *o;
	d->nq = o->num_queues;
	d->irq_fd = d->stop_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	for (unsigned i = 0; i < d->nq; i++) {
		d->q[i].d = d;
		d->q[i].idx = i;
		d->q[i].kick_fd = -1;
		vq_runner_init(&d->q[i].run, &d->blk, &queue_ops, &d->q[i]);
	}
	ret = vblk_dev_init(&d->blk, o->disk, o->num_queues, o->serial);
	if (!ret && o->vm_fd >= 0)
		ret = kvm_wire(d);
	if (ret < 0) {
		virtio_mmio_free(d);
		return ret;
	}
	*out = d;
	return 0;
}
