/* SPDX-License-Identifier: MIT */
#include "kick.h"

#include <errno.h>
#include <poll.h>
#include <sys/eventfd.h>

int kick_wait(int kick_fd, int stop_fd)
{
	struct pollfd pfd[2] = {
		{ .fd = kick_fd, .events = POLLIN },
		{ .fd = stop_fd, .events = POLLIN },
	};

	for (;;) {
		eventfd_t v;

		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (pfd[1].revents || (pfd[0].revents & (POLLERR | POLLNVAL)))
			return 0;
		if ((pfd[0].revents & POLLIN) && eventfd_read(kick_fd, &v) == 0)
			return 1;
	}
}
