/* SPDX-License-Identifier: MIT */
/*
 * blkd/transport/vhost_user_inflight: VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD. The master asks for a
 * region (GET_INFLIGHT_FD: a memfd made here, num_queues regions of
 * vring_inflight_size(queue_size) bytes, zeroed), keeps its fd, and hands it back to every
 * device instance it (re)connects to (SET_INFLIGHT_FD). Each queue records in it which
 * chains it popped and has not completed (vring.h); a server that restarts after a crash
 * finds them there when the queue starts and resubmits them (vhost_user_queue.c).
 * The region made here is sealed against shrinking and growing; one handed back must be
 * sealed against shrinking (vhost_user_mem.c says why).
 */
#include "vhost_user_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"

#define BIT(n) (1ull << (n))

/* Whether the request's queue count and size can be served; logged when not. */
static int inflight_check(const struct vhost_user_dev *d, const struct vu_inflight *p,
			  const char *req)
{
	unsigned qs = p->queue_size;

	if (!(d->pfeatures & BIT(VU_PF_INFLIGHT_SHMFD))) {
		log_warn("vhost-user: %s: INFLIGHT_SHMFD not negotiated", req);
		return -EINVAL;
	}
	if (!p->num_queues || p->num_queues > d->nq) {
		log_warn("vhost-user: %s: bad number of queues %u (%u queues)", req,
			 p->num_queues, d->nq);
		return -EINVAL;
	}
	if (!qs || qs > VRING_MAX_SIZE || (qs & (qs - 1))) {
		log_warn("vhost-user: %s: bad queue size %u", req, qs);
		return -EINVAL;
	}
	return 0;
}

/* Use the mapping [base, base + len) for nq queues of qsize (queues stopped meanwhile). */
static void inflight_install(struct vhost_user_dev *d, void *base, size_t len, unsigned nq,
			     unsigned qsize)
{
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_stop(&d->q[i]);
	vu_inflight_unmap(d);
	d->ifl = (struct vu_inflight_map){ .base = base, .len = len, .nq = nq, .qsize = qsize };
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_update(&d->q[i]);
	log_info("vhost-user: in-flight tracking: %u queues of %u entries (%zu bytes)", nq, qsize,
		 len);
}

int vu_inflight_get(struct vhost_user_dev *d, struct vu_inflight *p, int *fd_out)
{
	uint64_t size;
	void *base;
	int fd, ret;

	*fd_out = -1;
	ret = inflight_check(d, p, "GET_INFLIGHT_FD");
	if (ret < 0)
		return ret;
	size = vring_inflight_size(p->queue_size) * p->num_queues;
	fd = memfd_create("lazyblk-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)size) < 0)
		goto fail;
	/* the master maps it too: it must not shrink under either of us */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		goto fail;
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		goto fail;
	inflight_install(d, base, size, p->num_queues, p->queue_size);
	p->mmap_size = size;
	p->mmap_offset = 0;
	*fd_out = fd;
	return 0;
fail:
	ret = -errno;
	log_warn("vhost-user: GET_INFLIGHT_FD: %s", strerror(-ret));
	if (fd >= 0)
		close(fd);
	return ret;
}

int vu_inflight_set(struct vhost_user_dev *d, const struct vu_inflight *p, int fd)
{
	uint64_t need, end;
	struct stat st;
	void *base;
	int ret;

	ret = inflight_check(d, p, "SET_INFLIGHT_FD");
	if (ret < 0)
		return ret;
	need = vring_inflight_size(p->queue_size) * p->num_queues;
	if (p->mmap_size < need || p->mmap_size > SIZE_MAX) {
		log_warn("vhost-user: SET_INFLIGHT_FD: %llu bytes for %u queues of %u (%llu needed)",
			 (unsigned long long)p->mmap_size, p->num_queues, p->queue_size,
			 (unsigned long long)need);
		return -EINVAL;
	}
	end = p->mmap_offset + p->mmap_size;
	if (end < p->mmap_offset || p->mmap_offset % (uint64_t)sysconf(_SC_PAGESIZE)) {
		log_warn("vhost-user: SET_INFLIGHT_FD: bad offset %llu",
			 (unsigned long long)p->mmap_offset);
		return -EINVAL;
	}
	/* sealed first: then the size checked below cannot change */
	if (!vu_fd_no_shrink(fd)) {
		log_warn("vhost-user: SET_INFLIGHT_FD refused: its file is not sealed against "
			 "shrinking (F_SEAL_SHRINK)");
		return -EINVAL;
	}
	/* a mapping past the end of the file would SIGBUS on access */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < end) {
		log_warn("vhost-user: SET_INFLIGHT_FD: not a memory file of at least %llu bytes",
			 (unsigned long long)end);
		return -EINVAL;
	}
	base = mmap(NULL, p->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)p->mmap_offset);
	if (base == MAP_FAILED) {
		ret = -errno;
		log_warn("vhost-user: SET_INFLIGHT_FD: mmap: %s", strerror(-ret));
		return ret;
	}
	inflight_install(d, base, p->mmap_size, p->num_queues, p->queue_size);
	return 0;
}

void vu_inflight_unmap(struct vhost_user_dev *d)
{
	if (d->ifl.base)
		munmap(d->ifl.base, d->ifl.len);
	memset(&d->ifl, 0, sizeof(d->ifl));
}
