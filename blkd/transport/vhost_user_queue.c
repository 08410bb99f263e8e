/* SPDX-License-Identifier: MIT */
/*
 * blkd/transport/vhost_user_queue: one virtqueue of the vhost-user-blk device. A queue runs (its
 * runner has an I/O thread) while it is started (SET_VRING_KICK), enabled
 * (SET_VRING_ENABLE, or always without VHOST_USER_F_PROTOCOL_FEATURES), its memory is
 * mapped and its ring is set up; the runner (virtio/vq_runner.h) waits on the master's kick
 * eventfd, drains the ring and, through queue_notify(), signals the call eventfd when the
 * driver wants an interrupt. What is vhost-user's own: the error eventfd of a broken ring,
 * and the in-flight region (chains a previous instance popped are resubmitted first).
 */
#include "vhost_user_int.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../../common/log.h"

static const struct vq_runner_ops queue_ops;

void vu_queue_init(struct vu_queue *q, struct vhost_user_dev *d, unsigned idx)
{
	memset(q, 0, sizeof(*q));
	q->d = d;
	q->idx = idx;
	q->kick_fd = q->call_fd = q->err_fd = -1;
	q->stop_fd = -1;
	vq_runner_init(&q->run, &d->blk, &queue_ops, q);
}

void vu_queue_destroy(struct vu_queue *q)
{
	vu_queue_reset(q);
	if (q->stop_fd >= 0)
		close(q->stop_fd);
	vq_runner_destroy(&q->run);
}

void vu_queue_set_fd(struct vu_queue *q, int *slot, int fd)
{
	int old;

	pthread_mutex_lock(&q->run.lock);
	old = *slot;
	*slot = fd;
	pthread_mutex_unlock(&q->run.lock);
	if (old >= 0)
		close(old);
}

/* The guest broke the ring (q->run.lock held): stop serving it, tell the master. */
static void queue_break(struct vu_queue *q, const char *why)
{
	if (__atomic_load_n(&q->broken, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&q->broken, true, __ATOMIC_RELAXED);
	log_warn("vhost-user: queue %u: %s; queue stopped", q->idx, why);
	if (q->err_fd >= 0)
		eventfd_write(q->err_fd, 1);
}

/* ---- the runner's ops */

static bool queue_ready(struct vq_runner *r)
{
	struct vu_queue *q = r->ctx;

	return !__atomic_load_n(&q->broken, __ATOMIC_RELAXED);
}

static void queue_notify(struct vq_runner *r)
{
	struct vu_queue *q = r->ctx;

	if (q->call_fd >= 0)
		eventfd_write(q->call_fd, 1);
}

static void queue_broken(struct vq_runner *r, const char *why)
{
	/* the chain that broke it was popped: not one to resubmit after a reset */
	vring_inflight_drop(&r->vq);
	queue_break(r->ctx, why);
}

/*
 * The chains a previous instance of this device popped and did not complete (a crash, a
 * kill -9): executed again, in the order they were popped, before anything else. Writes
 * to a block device are idempotent, so one that had reached the disk is harmless.
 */
static void queue_started(struct vq_runner *r)
{
	struct vu_queue *q = r->ctx;
	uint16_t *heads;
	int n;

	if (!q->resubmit)
		return;
	pthread_mutex_lock(&r->lock);
	n = vring_inflight_heads(&r->vq, &heads);
	if (n < 0) {
		queue_break(q, "no memory for the chains in flight");
	} else if (n) {
		log_warn("vhost-user: queue %u: resubmitting %d request%s in flight before the "
			 "restart", q->idx, n, n == 1 ? "" : "s");
		vq_runner_resubmit(r, heads, (unsigned)n);
	}
	q->resubmit = 0;
	pthread_mutex_unlock(&r->lock);
	free(heads);
}

static const struct vq_runner_ops queue_ops = {
	.ready = queue_ready,
	.notify = queue_notify,
	.broken = queue_broken,
	.started = queue_started,
};

static bool vu_queue_should_run(const struct vu_queue *q)
{
	const struct vhost_user_dev *d = q->d;
	bool enabled = q->enabled || !(d->features & (1ull << VU_F_PROTOCOL_FEATURES));

	return q->kicked && enabled && q->num && q->has_addr && d->mem.n &&
	       !__atomic_load_n(&q->broken, __ATOMIC_RELAXED);
}

/* Map the ring and position it where the master left it (q stopped). */
static int queue_setup(struct vu_queue *q)
{
	struct vhost_user_dev *d = q->d;
	struct vring_inflight *region;
	uint64_t desc, avail, used;
	uint16_t used_idx;
	int n, ret;

	q->run.vq.inflight = NULL;   /* the region may have been unmapped since */
	if (vu_uva_to_gpa(d, q->addr.desc, 16ull * q->num, &desc) ||
	    vu_uva_to_gpa(d, q->addr.avail, 6 + 2ull * q->num, &avail) ||
	    vu_uva_to_gpa(d, q->addr.used, 6 + 8ull * q->num, &used))
		return -EFAULT;
	ret = vblk_ring_setup(&d->blk, &q->run.vq, &d->mem, q->num, desc, avail, used);
	if (ret < 0)
		return ret;
	/*
	 * Everything before used->idx is done. With in-flight tracking, the region says which
	 * chains after it were popped and not completed (at most one per queue here, as
	 * requests complete in order): they are resubmitted and popping goes on after them.
	 * Without, the chains after used->idx are popped again from the available ring. The
	 * master's SET_VRING_BASE is not trusted for this: after losing a backend, QEMU
	 * guesses it from its own copy of the used index.
	 */
	used_idx = le16toh(__atomic_load_n(&q->run.vq.used->idx, __ATOMIC_ACQUIRE));
	q->run.vq.used_idx = used_idx;
	region = vu_inflight_region(d, q->idx, q->num);
	n = vring_inflight_attach(&q->run.vq, region);
	if (n < 0) {
		log_warn("vhost-user: queue %u: in-flight region of another version or queue "
			 "size: not tracked", q->idx);
		n = 0;
	}
	q->run.vq.last_avail_idx = (uint16_t)(used_idx + n);
	q->resubmit = (unsigned)n;
	if (q->run.vq.last_avail_idx != q->base || n)
		log_info("vhost-user: queue %u: resuming at used index %u, %d in flight (base %u)",
			 q->idx, used_idx, n, q->base);
	return 0;
}

int vu_queue_update(struct vu_queue *q)
{
	int ret;

	if (!vu_queue_should_run(q)) {
		vu_queue_stop(q);
		return 0;
	}
	if (q->run.has_thread)
		return 0;
	if (q->stop_fd < 0) {
		q->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (q->stop_fd < 0)
			return -errno;
	}
	pthread_mutex_lock(&q->run.lock);
	ret = queue_setup(q);
	if (ret < 0)
		queue_break(q, ret == -EFAULT ? "ring outside the shared memory" :
			       "bad ring size or alignment");
	pthread_mutex_unlock(&q->run.lock);
	if (ret < 0)
		return ret;
	ret = vq_runner_start(&q->run, q->kick_fd, q->stop_fd);
	if (ret < 0) {
		log_warn("vhost-user: queue %u: cannot start its thread", q->idx);
		return ret;
	}
	log_debug("vhost-user: queue %u started (%u entries)", q->idx, q->num);
	return 0;
}

void vu_queue_stop(struct vu_queue *q)
{
	eventfd_t v;

	if (!q->run.has_thread)
		return;
	eventfd_write(q->stop_fd, 1);
	vq_runner_join(&q->run);
	eventfd_read(q->stop_fd, &v);
	q->base = q->run.vq.last_avail_idx;
}

void vu_queue_reset(struct vu_queue *q)
{
	vu_queue_stop(q);
	vu_queue_set_fd(q, &q->kick_fd, -1);
	vu_queue_set_fd(q, &q->call_fd, -1);
	vu_queue_set_fd(q, &q->err_fd, -1);
	q->num = 0;
	q->has_addr = q->kicked = q->enabled = q->broken = false;
	q->base = 0;
	q->resubmit = 0;
	memset(&q->addr, 0, sizeof(q->addr));
	memset(&q->run.vq, 0, sizeof(q->run.vq));
}
