/* SPDX-License-Identifier: MIT */
/*
 * One virtqueue of a virtio-blk device at work: kick → process → notify. Shared by every
 * virtio transport (the built-in VMM's virtio-mmio, the vhost-user-blk export), which keep
 * only what differs between them:
 *   - how kicks arrive: an eventfd (a KVM ioeventfd, the master's kick fd) that the runner's
 *     I/O thread waits on, or, without one, vq_runner_kick() draining the ring inline;
 *   - how the driver is interrupted: ops->notify (a KVM irqfd, the master's call fd);
 *   - when the ring is served (ops->ready), and what a broken ring means (ops->broken:
 *     DEVICE_NEEDS_RESET, or vhost-user's error fd);
 *   - what the I/O thread does first (ops->started: vhost-user resubmits the chains its
 *     in-flight region says a previous instance left, vq_runner_resubmit()).
 * A drain is vblk_queue_process() (bounded: the runner drains again, after looking for a
 * stop, while the ring has requests): every available chain popped, executed and pushed to the
 * used ring, kicks re-enabled (with event idx: avail_event), and whether the driver asked
 * for an interrupt for what was used (with event idx: used_event) decided once at the end.
 *
 * Locking: r->lock is held while the ring is processed (by the I/O thread, or by the
 * caller of vq_runner_kick() without one) and around ops->ready and ops->broken; a
 * transport takes it to change what those read (a queue started or stopped, the ring set
 * up or reset) so that the change waits for the batch in progress. ops->notify is called
 * with it held too.
 */
#ifndef LZ_BLKD_VQ_RUNNER_H
#define LZ_BLKD_VQ_RUNNER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "virtio_blk.h"
#include "vring.h"

struct vq_runner;

struct vq_runner_ops {
	/* Serve the ring now? (lock held) False: a drain does nothing. */
	bool (*ready)(struct vq_runner *r);
	/* Interrupt the driver: it asked to hear about the buffers just used. */
	void (*notify)(struct vq_runner *r);
	/* The guest broke the ring (lock held): stop serving it, tell the driver. */
	void (*broken)(struct vq_runner *r, const char *why);
	/* First thing on the I/O thread, before its first drain; NULL: nothing. */
	void (*started)(struct vq_runner *r);
};

struct vq_runner {
	struct vblk_dev *blk;             /* the device's request logic (borrowed) */
	const struct vq_runner_ops *ops;
	void *ctx;                        /* the transport's queue */
	pthread_mutex_t lock;
	struct vring_queue vq;            /* under lock; set up by the transport */
	/* the I/O thread, while started (vq_runner_start() to vq_runner_join()) */
	int kick_fd, stop_fd;             /* the transport's: the runner never closes them */
	pthread_t thread;
	bool has_thread;
};

/* A runner for one queue of blk, without a thread (kicks drain inline). */
void vq_runner_init(struct vq_runner *r, struct vblk_dev *blk, const struct vq_runner_ops *ops,
		    void *ctx);
/* Joined first if it has a thread. */
void vq_runner_destroy(struct vq_runner *r);

/* A kick: wake the I/O thread, or without one drain here. */
void vq_runner_kick(struct vq_runner *r);
/*
 * Execute the chains at heads[0..n) again (in flight when a previous device instance
 * stopped; lock held, ops->ready not asked), notify, break as a drain does.
 */
void vq_runner_resubmit(struct vq_runner *r, const uint16_t *heads, unsigned n);

/*
 * Start the I/O thread: ops->started, one drain (buffers made available before), then a
 * drain for every kick on kick_fd until stop_fd is readable or kick_fd fails. -errno.
 */
int vq_runner_start(struct vq_runner *r, int kick_fd, int stop_fd);
/* Wait for the I/O thread to end (the transport made stop_fd readable); none: nothing. */
void vq_runner_join(struct vq_runner *r);

#endif
