/* SPDX-License-Identifier: MIT */
/* One NBD client's connection: the handshake, then the transmission phase (nbd_conn.h). */
#include <sys/socket.h>
#include <sys/time.h>

#include "../../common/log.h"
#include "nbd_conn.h"

/* With an idle limit, a send that moves no byte for that long fails (the client stalls). */
static void send_timeout(int fd, unsigned seconds)
{
	struct timeval tv = { (time_t)seconds, 0 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int nbd_conn_run(const struct nbd_offer *x, int fd, unsigned id, struct nbd_watch *w)
{
	struct nbd_session s = { .x = x, .fd = fd, .id = id, .w = w };
	int ret;

	ret = nbd_handshake(&s);
	if (ret == 0) {
		log_info("nbd: client %u: transmission phase (%s replies)", id,
			 s.structured ? "structured" : "simple");
		if (w) {
			if (w->idle_s)
				send_timeout(fd, w->idle_s);
			nbd_watch_touch(&s, 0);
			__atomic_store_n(&w->transmitting, true, __ATOMIC_RELEASE);
		}
		ret = nbd_transmit(&s);
	} else if (ret == 1) {
		ret = 0;
	}
	return ret == -ENODATA ? 0 : ret;
}
