/* SPDX-License-Identifier: MIT */
#include "uring.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <liburing.h>

#define RING_DEPTH 8
/* ring_do: the ring itself was refused (see ring_refused) */
#define RING_REFUSED INT_MIN

/* Per-thread ring, like errno: created on first use, torn down at thread exit. */
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static __thread struct io_uring *ring_cur;
static __thread bool ring_failed;

static void ring_free(void *p)
{
	struct io_uring *r = p;

	io_uring_queue_exit(r);
	free(r);
}

/* A forked child must not touch its parent's ring (the queues are shared memory). */
static void ring_after_fork(void)
{
	ring_cur = NULL;
	ring_failed = false;
}

static void ring_key_init(void)
{
	pthread_key_create(&ring_key, ring_free);
	pthread_atfork(NULL, NULL, ring_after_fork);
}

static struct io_uring *ring_get(void)
{
	struct io_uring *r;

	if (ring_cur || ring_failed)
		return ring_cur;
	pthread_once(&ring_once, ring_key_init);
	r = malloc(sizeof(*r));
	if (!r || io_uring_queue_init(RING_DEPTH, r, 0) < 0) {
		free(r);
		ring_failed = true; /* fall back to plain syscalls in this thread */
		return NULL;
	}
	pthread_setspecific(ring_key, r);
	ring_cur = r;
	return r;
}

enum op { OP_READ, OP_WRITE, OP_FSYNC };

/*
 * A ring made before a seccomp filter that refuses io_uring (common/confine.h: its operations
 * would bypass the filter) fails its submit with ENOSYS or EPERM: this thread drops it for
 * good and goes on with plain system calls. The ring is freed at the thread's exit.
 */
static bool ring_refused(int ret)
{
	if (ret != -ENOSYS && ret != -EPERM)
		return false;
	ring_cur = NULL;
	ring_failed = true;
	return true;
}

/* One operation, waited for: the cqe result (bytes, or -errno), or RING_REFUSED. */
static int ring_do(struct io_uring *r, enum op op, int fd, void *buf, size_t len, off_t off)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(r);
	struct io_uring_cqe *cqe;
	int ret;

	if (!sqe)
		return -EBUSY;
	if (op == OP_READ)
		io_uring_prep_read(sqe, fd, buf, (unsigned)len, (uint64_t)off);
	else if (op == OP_WRITE)
		io_uring_prep_write(sqe, fd, buf, (unsigned)len, (uint64_t)off);
	else
		io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	/* one system call: submit and wait */
	ret = io_uring_submit_and_wait(r, 1);
	if (ret < 0 && ring_refused(ret))
		return RING_REFUSED;
	if (ret < 0 && ret != -EINTR)
		return ret;
	do
		ret = io_uring_wait_cqe(r, &cqe);
	while (ret == -EINTR);
	if (ret < 0)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(r, cqe);
	return ret;
}

static int rw_full(enum op op, int fd, void *buf, size_t len, off_t off)
{
	struct io_uring *r = ring_get();
	uint8_t *p = buf;

	while (len) {
		size_t chunk = len > (1u << 30) ? (1u << 30) : len;
		ssize_t n;

		n = r ? ring_do(r, op, fd, p, chunk, off) : RING_REFUSED;
		if (n == RING_REFUSED) {
			r = NULL;
			n = op == OP_READ ? pread(fd, p, chunk, off) : pwrite(fd, p, chunk, off);
			if (n < 0)
				n = -errno;
		}
		if (n == -EINTR || n == -EAGAIN)
			continue;
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO; /* EOF inside the range (reads), or no progress (writes) */
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int uring_pread_full(int fd, void *buf, size_t len, off_t off)
{
	return rw_full(OP_READ, fd, buf, len, off);
}

int uring_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	return rw_full(OP_WRITE, fd, (void *)buf, len, off);
}

int uring_fdatasync(int fd)
{
	struct io_uring *r = ring_get();
	int ret = r ? ring_do(r, OP_FSYNC, fd, NULL, 0, 0) : RING_REFUSED;

	if (ret == RING_REFUSED)
		return fdatasync(fd) < 0 ? -errno : 0;
	return ret;
}
