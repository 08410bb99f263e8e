/* SPDX-License-Identifier: MIT */
/*
 * The tables the master sets (memory regions: vhost_user_mem.c; the in-flight region:
 * vhost_user_inflight.c) as the queues read them: a ring's guest address from the
 * master's user address, a queue's in-flight records; and the seal both tables' files
 * must carry.
 */
#include <errno.h>
#include <fcntl.h>

#include "../../common/log.h"
#include "vhost_user_int.h"

bool vu_fd_no_shrink(int fd)
{
	int seals = fcntl(fd, F_GET_SEALS);

	return seals >= 0 && (seals & F_SEAL_SHRINK);
}

int vu_uva_to_gpa(const struct vhost_user_dev *d, uint64_t uva, uint64_t len, uint64_t *gpa)
{
	for (unsigned i = 0; i < d->mem.n; i++) {
		uint64_t u = d->map[i].uva, size = d->mem.r[i].size;

		if (uva >= u && uva - u < size && len <= size - (uva - u)) {
			*gpa = d->mem.r[i].gpa + (uva - u);
			return 0;
		}
	}
	return -EFAULT;
}

struct vring_inflight *vu_inflight_region(struct vhost_user_dev *d, unsigned idx, unsigned num)
{
	if (!d->ifl.base || idx >= d->ifl.nq)
		return NULL;
	if (d->ifl.qsize != num) {
		log_warn("vhost-user: queue %u: %u entries, in-flight region for %u: not tracked",
			 idx, num, d->ifl.qsize);
		return NULL;
	}
	return (struct vring_inflight *)((uint8_t *)d->ifl.base +
					 idx * vring_inflight_size(num));
}
