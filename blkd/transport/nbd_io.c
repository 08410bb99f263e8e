/* SPDX-License-Identifier: MIT */
/* Socket I/O for the NBD export: whole messages in, whole messages out. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "nbd_conn.h"

int nbd_recv(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, p + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		/* a reset is the peer going away too (unread data was left behind) */
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return got ? -ECONNRESET : -ENODATA;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	return 0;
}

int nbd_skip(int fd, uint64_t len)
{
	uint8_t scratch[16384];

	while (len) {
		size_t n = len < sizeof(scratch) ? (size_t)len : sizeof(scratch);
		int ret = nbd_recv(fd, scratch, n);

		if (ret)
			return ret == -ENODATA ? -ECONNRESET : ret;
		len -= n;
	}
	return 0;
}

int nbd_sendv(int fd, struct iovec *iov, int n)
{
	struct msghdr msg = { 0 };

	msg.msg_iov = iov;
	msg.msg_iovlen = (size_t)n;
	while (msg.msg_iovlen) {
		ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);

		if (sent < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* drop what went out; a partial element is advanced in place */
		while (msg.msg_iovlen && (size_t)sent >= msg.msg_iov->iov_len) {
			sent -= (ssize_t)msg.msg_iov->iov_len;
			msg.msg_iov++;
			msg.msg_iovlen--;
		}
		if (msg.msg_iovlen) {
			msg.msg_iov->iov_base = (uint8_t *)msg.msg_iov->iov_base + sent;
			msg.msg_iov->iov_len -= (size_t)sent;
		}
	}
	return 0;
}

int nbd_send(int fd, const void *buf, size_t len)
{
	struct iovec iov = { (void *)buf, len };

	return nbd_sendv(fd, &iov, 1);
}
