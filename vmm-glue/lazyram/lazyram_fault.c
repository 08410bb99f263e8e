/* SPDX-License-Identifier: MIT */
/*
 * The userfaultfd and its fault handler threads (lazyram.h, "a fault"). A handler reads the
 * fault messages and resolves each: the zero page, or the page of the cache file, filled
 * first when it is not. It never touches the mapping. A fault it cannot resolve without
 * wrong memory (its chunk cannot be had) stays unresolved: the faulting thread waits until
 * the process ends or lazyram_close fences the page.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

#define FEATURES (UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM)
#define IOCTLS ((1ull << _UFFDIO_CONTINUE) | (1ull << _UFFDIO_ZEROPAGE) | (1ull << _UFFDIO_WAKE))

/* The system call; where it is refused to an unprivileged process, /dev/userfaultfd. */
static int uffd_new(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int dev, err;

	if (fd >= 0 || (errno != EPERM && errno != ENOSYS))
		return fd >= 0 ? fd : -errno;
	err = -errno;
	dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return err;
	fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	close(dev);
	return fd >= 0 ? fd : err;
}

int lr_uffd_open(struct lazyram *lr, char *why, size_t why_len)
{
	struct uffdio_api api = { .api = UFFD_API, .features = FEATURES };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)lr->base, .len = lr->m->mem_size },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_MINOR,
	};
	int fd = uffd_new();

	if (fd < 0)
		return why_set(why, why_len, fd, "userfaultfd: %s", strerror(-fd));
	lr->uffd = fd;
	if (ioctl(fd, UFFDIO_API, &api) < 0 || (api.features & FEATURES) != FEATURES)
		return why_set(why, why_len, -EOPNOTSUPP, "userfaultfd: no missing and minor "
			       "faults of shared memory (Linux 5.14 or later)");
	if (ioctl(fd, UFFDIO_REGISTER, &reg) < 0)
		return why_set(why, why_len, -errno, "userfaultfd: register the RAM: %s",
			       strerror(errno));
	if ((reg.ioctls & IOCTLS) != IOCTLS)
		return why_set(why, why_len, -EOPNOTSUPP, "userfaultfd: no CONTINUE or ZEROPAGE "
			       "on the RAM mapping");
	return 0;
}

/* [*a, *b) around p: the pages want() takes that are not mapped here, in p's window. */
static void around(struct lazyram *lr, uint64_t p, uint32_t chunk, bool need_filled,
		   uint64_t *a, uint64_t *b)
{
	const struct rammap *m = lr->m;
	uint64_t lo = p & ~(uint64_t)(LR_RUN_PAGES - 1);
	uint64_t hi = lo + LR_RUN_PAGES < m->npages ? lo + LR_RUN_PAGES : m->npages;

#define TAKE(i) (m->pages[i].chunk == chunk && !lr_bit(lr->mapped, i) && \
		 (!need_filled || lr_bit(lr->c.filled, i)))
	*a = p;
	while (*a > lo && TAKE(*a - 1))
		(*a)--;
	*b = p + 1;
	while (*b < hi && TAKE(*b))
		(*b)++;
#undef TAKE
}

static int resolve_data(struct lazyram *lr, uint64_t p, uint32_t c)
{
	uint64_t a, b;
	int ret;

	if (!lr_bit(lr->c.filled, p)) {
		char why[WHY_MAX];
		uint64_t t = lr_now_us(lr);

		why[0] = '\0';
		ret = lr_fill_chunk(lr, c, false, why, sizeof(why));
		atomic_fetch_add(&lr->st.fetch_us, lr_now_us(lr) - t);
		if (ret) {
			lr_fatal(lr, p, c, why);
			return 0; /* never mapped: the fault stays */
		}
	}
	around(lr, p, c + 1, true, &a, &b);
	ret = lr_map_range(lr, false, a, b - a);
	if (ret == -EFAULT)
		lr_fatal(lr, p, c, "cache file: a page marked filled is not in it");
	return ret == -EFAULT ? 0 : ret;
}

static void on_fault(struct lazyram *lr, uint64_t addr, uint64_t flags)
{
	uint64_t p = (addr - (uintptr_t)lr->base) / LAZYRAM_PAGE, t = lr_now_us(lr), zero = 0;
	uint32_t c;
	int ret;

	if (addr < (uintptr_t)lr->base || p >= lr->m->npages)
		return;
	atomic_fetch_add(flags & UFFD_PAGEFAULT_FLAG_MINOR ? &lr->st.minor : &lr->st.missing, 1);
	atomic_compare_exchange_strong(&lr->st.first_us, &zero, t ? t : 1);
	atomic_store(&lr->st.last_us, t);
	if (lr->touched && lr_bit_set(lr->touched, p))
		lr_touch_note(lr, p, t);
	c = lr->m->pages[p].chunk;
	if (!c) {
		uint64_t a, b;

		atomic_fetch_add(&lr->st.zero, 1);
		around(lr, p, 0, false, &a, &b);
		ret = lr_map_range(lr, true, a, b - a);
	} else {
		ret = resolve_data(lr, p, c - 1);
	}
	/* a page mapped already (EEXIST) was not woken; a changing mapping (EAGAIN): the
	 * thread faults again and the handler sees it anew */
	if (ret > 0 || ret == -EAGAIN)
		lr_wake(lr, p);
}

static void *handler_main(void *arg)
{
	struct lazyram *lr = arg;
	struct pollfd pf[2] = { { .fd = lr->uffd, .events = POLLIN },
				{ .fd = lr->stopfd, .events = POLLIN } };
	struct uffd_msg msg[16];

	for (;;) {
		ssize_t n;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents || (pf[0].revents & (POLLERR | POLLNVAL)))
			break;
		n = read(lr->uffd, msg, sizeof(msg));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			break;
		}
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++)
			if (msg[i].event == UFFD_EVENT_PAGEFAULT)
				on_fault(lr, msg[i].arg.pagefault.address & ~(uint64_t)4095,
					 msg[i].arg.pagefault.flags);
	}
	return NULL;
}

int lr_handlers_start(struct lazyram *lr, char *why, size_t why_len)
{
	unsigned n = lr->o.threads ? lr->o.threads : 1;

	if (n > LR_THREADS_MAX)
		n = LR_THREADS_MAX;
	for (lr->nth = 0; lr->nth < n; lr->nth++) {
		int ret = pthread_create(&lr->th[lr->nth], NULL, handler_main, lr);

		if (ret)
			return why_set(why, why_len, -ret, "fault handler thread: %s",
				       strerror(ret));
	}
	return 0;
}
