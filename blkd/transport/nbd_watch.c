/* SPDX-License-Identifier: MIT */
/*
 * What the server's watchdog (nbd.c) sees of a connection, kept up to date by the
 * connection's handshake and transmission (struct nbd_watch, nbd_conn.h).
 */
#include <time.h>

#include "nbd_conn.h"

uint64_t nbd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nbd_watch_touch(struct nbd_session *s, int busy)
{
	if (!s->w)
		return;
	__atomic_store_n(&s->w->since_ms, nbd_now_ms(), __ATOMIC_RELEASE);
	if (busy > 0)
		__atomic_add_fetch(&s->w->busy, 1, __ATOMIC_ACQ_REL);
	else if (busy < 0)
		__atomic_sub_fetch(&s->w->busy, 1, __ATOMIC_ACQ_REL);
}
