/* SPDX-License-Identifier: MIT */
/* Waiting for a virtqueue kick (an eventfd) or for a stop request (another eventfd). */
#ifndef LZ_COMMON_KICK_H
#define LZ_COMMON_KICK_H

/*
 * Block until kick_fd is signalled (its counter is consumed: returns 1) or stop_fd is
 * readable, or kick_fd fails (returns 0: the caller's thread should end). EINTR is retried;
 * a spurious wakeup without a kick returns 1 only when the counter was really read.
 */
int kick_wait(int kick_fd, int stop_fd);

#endif
