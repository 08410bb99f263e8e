/* SPDX-License-Identifier: MIT */
/* blkd/virtio/vq_runner: kick → process → notify for one virtqueue, for every transport. */
#include "vq_runner.h"

#include <string.h>
#include <sys/eventfd.h>

#include "../../common/kick.h"

void vq_runner_init(struct vq_runner *r, struct vblk_dev *blk, const struct vq_runner_ops *ops,
		    void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->blk = blk;
	r->ops = ops;
	r->ctx = ctx;
	r->kick_fd = r->stop_fd = -1;
	pthread_mutex_init(&r->lock, NULL);
}

void vq_runner_destroy(struct vq_runner *r)
{
	vq_runner_join(r);
	pthread_mutex_destroy(&r->lock);
}

/* After a batch (lock held): the interrupt first, so the driver sees what completed. */
static void runner_finish(struct vq_runner *r, int ret, bool notify, const char *why)
{
	if (notify)
		r->ops->notify(r);
	if (ret < 0)
		r->ops->broken(r, why);
}

/*
 * One drain (takes the lock): when ops->ready, process the ring, notify, break. True when
 * the ring still has requests (a drain ends after VBLK_DRAIN_MAX steps): drain again, the
 * lock released in between so that a transport stopping the queue gets in.
 */
static bool vq_runner_run(struct vq_runner *r)
{
	bool notify, more = false;
	int ret;

	pthread_mutex_lock(&r->lock);
	if (r->ops->ready(r)) {
		ret = vblk_queue_process(r->blk, &r->vq, &notify);
		runner_finish(r, ret, notify, "malformed descriptor chain or ring index");
		more = ret >= 0 && vring_pending(&r->vq);
	}
	pthread_mutex_unlock(&r->lock);
	return more;
}

void vq_runner_kick(struct vq_runner *r)
{
	if (r->kick_fd >= 0)
		eventfd_write(r->kick_fd, 1);
	else
		while (vq_runner_run(r))
			;
}

void vq_runner_resubmit(struct vq_runner *r, const uint16_t *heads, unsigned n)
{
	bool notify;
	int ret;

	ret = vblk_queue_resubmit(r->blk, &r->vq, heads, n, &notify);
	runner_finish(r, ret, notify, "malformed descriptor chain in flight");
}

static void *runner_thread(void *arg)
{
	struct vq_runner *r = arg;

	if (r->ops->started)
		r->ops->started(r);
	/* buffers made available before the thread started; after a full drain, kick ourselves:
	 * the wait sees a stop first */
	if (vq_runner_run(r))
		eventfd_write(r->kick_fd, 1);
	while (kick_wait(r->kick_fd, r->stop_fd))
		if (vq_runner_run(r))
			eventfd_write(r->kick_fd, 1);
	return NULL;
}

int vq_runner_start(struct vq_runner *r, int kick_fd, int stop_fd)
{
	int ret;

	r->kick_fd = kick_fd;
	r->stop_fd = stop_fd;
	ret = -pthread_create(&r->thread, NULL, runner_thread, r);
	if (ret < 0) {
		r->kick_fd = r->stop_fd = -1;
		return ret;
	}
	r->has_thread = true;
	return 0;
}

void vq_runner_join(struct vq_runner *r)
{
	if (!r->has_thread)
		return;
	pthread_join(r->thread, NULL);
	r->has_thread = false;
	r->kick_fd = r->stop_fd = -1;
}
