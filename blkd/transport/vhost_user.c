/* SPDX-License-Identifier: MIT */
/* blkd/transport/vhost_user: the vhost-user-blk device, one master connection at a time. */
#include "vhost_user_int.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/sock.h"

int vhost_user_dev_new(const struct disk *disk, unsigned num_queues,
		       const char *serial, struct vhost_user_dev **out)
{
	struct vhost_user_dev *d;
	int ret;

	if (!num_queues)
		num_queues = VHOST_USER_QUEUES;
	if (num_queues > 256)
		return -EINVAL;
	d = calloc(1, sizeof(*d) + num_queues * sizeof(d->q[0]));
	if (!d)
		return -ENOMEM;
	ret = vblk_dev_init(&d->blk, disk, num_queues, serial);
	if (ret < 0) {
		free(d);
		return ret;
	}
	d->nq = num_queues;
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_init(&d->q[i], d, i);
	*out = d;
	return 0;
}

void vhost_user_dev_free(struct vhost_user_dev *d)
{
	if (!d)
		return;
	vu_dev_reset(d);
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_destroy(&d->q[i]);
	free(d);
}

void vhost_user_dev_stats(const struct vhost_user_dev *d, struct vblk_stats *st)
{
	vblk_get_stats(&d->blk, st);
}

static int conn_end(struct vhost_user_dev *d, int fd, struct vu_msg *m, int ret)
{
	vu_dev_reset(d);
	close(fd);
	free(m);
	return ret;
}

int vhost_user_conn_run(struct vhost_user_dev *d, int fd, volatile sig_atomic_t *stop)
{
	struct timeval tv = { .tv_sec = VU_MSG_TIMEOUT_S };
	struct vu_msg *m = malloc(sizeof(*m));
	int ret;

	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	d->stop = stop;   /* replies wait for the master to read no longer than stopping */
	while (!stopped(stop)) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int fds[VU_MAX_FDS];
		char why[WHY_MAX];
		unsigned nfds;

		if (poll(&p, 1, VU_POLL_MS) <= 0 || !p.revents)
			continue;
		ret = vu_msg_recv(fd, m, fds, &nfds, why, sizeof(why));
		if (ret == 1) {
			ret = vu_msg_handle(d, fd, m, fds, nfds);
			if (!ret)
				ret = 1;
		} else if (ret == -EPROTO) {
			log_warn("vhost-user: %s; dropping the connection", why);
		} else if (ret < 0) {
			log_info("vhost-user: connection: %s", strerror(-ret));
		}
		for (unsigned i = 0; i < nfds; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (ret == -EPROTO)
			return conn_end(d, fd, m, ret);
		if (ret <= 0)
			return conn_end(d, fd, m, 0);   /* the master left */
	}
	return conn_end(d, fd, m, 0);
}

int vhost_user_serve(struct vhost_user_dev *d, const char *path, volatile sig_atomic_t *stop,
		     void (*on_listen)(void *arg), void *arg)
{
	struct sock_file file;
	char label[128];
	int lfd, ret;

	snprintf(label, sizeof(label), "--vhost-user %s", path);
	ret = sock_listen_unix(path, 0600, 1, label, &lfd, &file);
	if (ret)
		return ret;
	if (on_listen)
		on_listen(arg);
	while (!stopped(stop)) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, VU_POLL_MS) <= 0 || !(p.revents & POLLIN))
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		log_info("vhost-user: master connected");
		ret = vhost_user_conn_run(d, fd, stop);
		log_info("vhost-user: master %s", ret ? "dropped" : "disconnected");
	}
	close(lfd);
	sock_unlink_unix(path, &file);
	return 0;
}
