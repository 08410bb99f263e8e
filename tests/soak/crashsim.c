/* SPDX-License-Identifier: MIT */
/*
 * crashsim.so: a simulated host crash for the crash-consistency soak (docs/reliability.md),
 * LD_PRELOADed into `lazyblk serve`. A SIGKILL of the server keeps the kernel's page cache,
 * so it cannot tell a FLUSH that reached the disk from one that did nothing; this shim keeps
 * what a power cut would need to undo.
 *
 * With CRASHSIM_FILE=OVERLAY (an absolute path), for OVERLAY and OVERLAY.state:
 *   - io_uring_setup fails with ENOSYS (a seccomp filter), so lazyblk falls back to
 *     pwrite/fdatasync (common/uring.h), which this shim sees;
 *   - before a pwrite changes a 4 KiB page of the file for the first time since the file's
 *     last fsync/fdatasync, the page as it was is appended to FILE.undo;
 *   - a successful fsync/fdatasync of the file empties FILE.undo (those pages are durable).
 * After the server is killed, `blkstamp crash --overlay OVERLAY` writes back every page of
 * the undo logs (--all), or each with probability 1/2 (pages the kernel did or did not write
 * back before the power cut, data and state independently), or those of OVERLAY only
 * (--state-first: the kernel wrote the state back and none of the data): the files are then
 * as a host crash could have left them. A write and its logging, and a sync and the
 * emptying of the log, are atomic under one lock, so no write slips between a sync and its
 * log's reset. Not simulated: fallocate (the overlay's zeroing), renames and directory
 * syncs, OVERLAY.live (written in one boot, believed in no other).
 *
 * With CRASHSIM_BOOT_ID=FILE, an open(2) of /proc/sys/kernel/random/boot_id opens FILE
 * instead: the boot id lazyblk tags OVERLAY.live with (common/boot_id.c). The soak writes a
 * new id into FILE after each simulated crash, so the restarted server runs in another
 * boot, as after a real one.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096u

struct tracked {
	char path[4096], undo[4096];
	dev_t dev;
	ino_t ino;
	bool known;
	int log;                         /* FILE.undo, O_APPEND */
	uint8_t *seen;                   /* a bit per page: pre-image logged since the sync */
	size_t pages;
};

static struct tracked tr[2];
static bool active;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);
static int (*real_open)(const char *, int, ...);
static const char *boot_id_file;

static void no_io_uring(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
		perror("crashsim: seccomp");
		_exit(99);
	}
}

__attribute__((constructor)) static void crashsim_init(void)
{
	const char *f = getenv("CRASHSIM_FILE");

	real_pwrite = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
	real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	boot_id_file = getenv("CRASHSIM_BOOT_ID");
	if (!f || f[0] != '/' || strlen(f) > 4000)
		return;
	snprintf(tr[0].path, sizeof(tr[0].path), "%s", f);
	snprintf(tr[1].path, sizeof(tr[1].path), "%s.state", f);
	snprintf(tr[0].undo, sizeof(tr[0].undo), "%s.undo", f);
	snprintf(tr[1].undo, sizeof(tr[1].undo), "%s.state.undo", f);
	for (int i = 0; i < 2; i++) {
		tr[i].log = open(tr[i].undo, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		if (tr[i].log < 0) {
			perror("crashsim: undo log");
			_exit(99);
		}
	}
	no_io_uring();
	active = true;
}

/* The tracked file fd is, or NULL (under lock). */
static struct tracked *find(int fd)
{
	struct stat st;

	if (!active || fstat(fd, &st) < 0)
		return NULL;
	for (int i = 0; i < 2; i++) {
		struct tracked *t = &tr[i];
		struct stat ps;

		if (!t->known && stat(t->path, &ps) == 0) {
			t->dev = ps.st_dev;
			t->ino = ps.st_ino;
			t->known = true;
		}
		if (t->known && t->dev == st.st_dev && t->ino == st.st_ino) {
			size_t pages = ((size_t)st.st_size + PAGE - 1) / PAGE + 1;

			if (pages > t->pages) {
				uint8_t *n = realloc(t->seen, (pages + 7) / 8);

				if (!n)
					abort();
				memset(n + (t->pages + 7) / 8, 0, (pages + 7) / 8 - (t->pages + 7) / 8);
				t->seen = n;
				t->pages = pages;
			}
			return t;
		}
	}
	return NULL;
}

/* Log the pre-image of the pages of [off, off + len) not logged since the last sync. */
static void log_pages(struct tracked *t, int fd, off_t off, size_t len)
{
	uint8_t rec[8 + PAGE];

	for (uint64_t p = (uint64_t)off / PAGE; p * PAGE < (uint64_t)off + len; p++) {
		ssize_t n;

		if (p >= t->pages || (t->seen[p / 8] >> (p % 8)) & 1)
			continue;
		memcpy(rec, &p, 8);
		n = pread(fd, rec + 8, PAGE, (off_t)(p * PAGE));
		if (n < 0)
			abort();
		memset(rec + 8 + n, 0, PAGE - (size_t)n);
		if (write(t->log, rec, sizeof(rec)) != (ssize_t)sizeof(rec))
			abort();
		t->seen[p / 8] |= (uint8_t)(1u << (p % 8));
	}
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	struct tracked *t;
	ssize_t n;

	pthread_mutex_lock(&lock);
	t = find(fd);
	if (t)
		log_pages(t, fd, off, len);
	n = real_pwrite(fd, buf, len, off);
	pthread_mutex_unlock(&lock);
	return n;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return pwrite64(fd, buf, len, off);
}

static int synced(int fd, int (*real)(int))
{
	struct tracked *t;
	int ret;

	pthread_mutex_lock(&lock);
	t = find(fd);
	ret = real(fd);
	if (!ret && t) {
		if (ftruncate(t->log, 0) < 0)
			abort();
		memset(t->seen, 0, (t->pages + 7) / 8);
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

int fdatasync(int fd)
{
	return synced(fd, real_fdatasync);
}

int fsync(int fd)
{
	return synced(fd, real_fsync);
}

/* The boot id lazyblk reads, from CRASHSIM_BOOT_ID. */
static int open_as(const char *path, int flags, va_list ap)
{
	mode_t mode = 0;

	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		mode = va_arg(ap, mode_t);
	if (!real_open) /* an open before the constructor ran */
		real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	if (boot_id_file && !strcmp(path, "/proc/sys/kernel/random/boot_id"))
		path = boot_id_file;
	return real_open(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	va_list ap;
	int fd;

	va_start(ap, flags);
	fd = open_as(path, flags, ap);
	va_end(ap);
	return fd;
}

int open64(const char *path, int flags, ...)
{
	va_list ap;
	int fd;

	va_start(ap, flags);
	fd = open_as(path, flags, ap);
	va_end(ap);
	return fd;
}
