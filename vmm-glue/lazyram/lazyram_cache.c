/* SPDX-License-Identifier: MIT */
/*
 * The shared page cache of one snapshot (lazyram.h): DIR/HEX.ram and DIR/HEX.filled, shared
 * by the restores of the snapshot on this host, counted by flock.
 *
 * Opening and closing hold LOCK_EX on the directory (briefly): opening opens or creates
 * HEX.ram, takes LOCK_SH on it (kept while open), checks or sets the sizes and maps
 * HEX.filled; a fresh HEX.ram (size 0) gets a fresh HEX.filled (truncated): bits without
 * their data are never kept. Closing tries LOCK_EX on HEX.ram without waiting: got, no one
 * else uses the files and both are removed (HEX.filled first).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "internal.h"

static int dir_open(const char *dir, char *why, size_t why_len)
{
	char ewhy[WHY_MAX] = "";
	struct statfs sf;
	struct stat st;
	int fd, ret = fs_mkdir_private(dir, ewhy, sizeof(ewhy));

	if (ret)
		return why_set(why, why_len, ret, "cache dir %s: %s", dir,
			       ewhy[0] ? ewhy : strerror(-ret));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return why_set(why, why_len, -errno, "cache dir %s: %s", dir, strerror(errno));
	if (fstat(fd, &st) < 0 || fstatfs(fd, &sf) < 0)
		ret = why_set(why, why_len, -errno, "cache dir %s: %s", dir, strerror(errno));
	else if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
		ret = why_set(why, why_len, -EPERM, "cache dir %s: not ours alone", dir);
	else if (sf.f_type != TMPFS_MAGIC)
		ret = why_set(why, why_len, -EINVAL,
			      "cache dir %s: not on tmpfs (the RAM cache must be shared memory)",
			      dir);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* fd is what the name holds now (not removed by a last user since it was opened). */
static bool still_named(int dirfd, const char *name, int fd)
{
	struct stat a, b;

	return fstat(fd, &a) == 0 && a.st_nlink > 0 &&
	       fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev;
}

/* Under the directory's lock: HEX.ram, with our share (LOCK_SH). */
static int ram_open(struct lazyram *lr, char *why, size_t why_len)
{
	struct lr_cache *c = &lr->c;
	int fd = openat(c->dirfd, c->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return why_set(why, why_len, -errno, "cache file %s: %s", c->name,
			       strerror(errno));
	if (flock(fd, LOCK_SH) < 0) {
		close(fd);
		return why_set(why, why_len, -errno, "cache file %s: lock: %s", c->name,
			       strerror(errno));
	}
	return fd;
}

static int sized(int fd, uint64_t want, bool fresh, const char *name, char *why,
		 size_t why_len)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return why_set(why, why_len, -errno, "cache file %s: %s", name, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return why_set(why, why_len, -EINVAL, "cache file %s: not a regular file", name);
	if ((uint64_t)st.st_size == want && !fresh)
		return 0;
	if (st.st_size && !fresh)
		return why_set(why, why_len, -EBADMSG, "cache file %s: %llu bytes, not the "
			       "snapshot's %llu", name, (unsigned long long)st.st_size,
			       (unsigned long long)want);
	if ((fresh && ftruncate(fd, 0) < 0) || ftruncate(fd, (off_t)want) < 0)
		return why_set(why, why_len, -errno, "cache file %s: %s", name, strerror(errno));
	return 0;
}

/* Under the directory's lock: the sizes, HEX.filled mapped. */
static int files_init(struct lazyram *lr, char *why, size_t why_len)
{
	struct lr_cache *c = &lr->c;
	char fname[sizeof(c->name) + 8];
	struct stat st;
	bool fresh;
	int ffd, ret;

	if (fstat(c->fd, &st) < 0)
		return -errno;
	fresh = st.st_size == 0;
	ret = sized(c->fd, lr->m->mem_size, false, c->name, why, why_len);
	if (ret)
		return ret;
	snprintf(fname, sizeof(fname), "%.*s.filled", 2 * LAZYRAM_ID_LEN, c->name);
	ffd = openat(c->dirfd, fname, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ffd < 0)
		return why_set(why, why_len, -errno, "cache file %s: %s", fname, strerror(errno));
	c->filled_len = lr_bitmap_words(lr->m->npages) * 8;
	ret = sized(ffd, c->filled_len, fresh, fname, why, why_len);
	if (!ret) {
		void *p = mmap(NULL, c->filled_len, PROT_READ | PROT_WRITE, MAP_SHARED, ffd, 0);

		if (p == MAP_FAILED)
			ret = why_set(why, why_len, -errno, "cache file %s: map: %s", fname,
				      strerror(errno));
		else
			c->filled = p;
	}
	close(ffd);
	return ret;
}

int lr_cache_open(struct lazyram *lr, char *why, size_t why_len)
{
	struct lr_cache *c = &lr->c;
	char dflt[64];
	const char *dir = lr->o.cache_dir;
	int ret;

	c->fd = -1;
	if (!dir) {
		snprintf(dflt, sizeof(dflt), "/dev/shm/lazyblk-%u", (unsigned)geteuid());
		dir = dflt;
	}
	c->dirfd = dir_open(dir, why, why_len);
	if (c->dirfd < 0)
		return c->dirfd;
	sha256_to_hex(lr->o.id, c->name);
	strcat(c->name, ".ram");
	if (flock(c->dirfd, LOCK_EX) < 0)
		return why_set(why, why_len, -errno, "cache dir %s: lock: %s", dir,
			       strerror(errno));
	ret = ram_open(lr, why, why_len);
	if (ret >= 0) {
		c->fd = ret;
		ret = files_init(lr, why, why_len);
	}
	flock(c->dirfd, LOCK_UN);
	return ret;
}

void lr_cache_close(struct lr_cache *c)
{
	if (c->filled)
		munmap((void *)c->filled, c->filled_len);
	c->filled = NULL;
	if (c->fd >= 0) {
		flock(c->dirfd, LOCK_EX);
		if (flock(c->fd, LOCK_EX | LOCK_NB) == 0 && still_named(c->dirfd, c->name, c->fd)) {
			char fname[sizeof(c->name) + 8];

			snprintf(fname, sizeof(fname), "%.*s.filled", 2 * LAZYRAM_ID_LEN, c->name);
			unlinkat(c->dirfd, fname, 0);
			unlinkat(c->dirfd, c->name, 0);
		}
		close(c->fd);
		c->fd = -1;
		flock(c->dirfd, LOCK_UN);
	}
	if (c->dirfd >= 0)
		close(c->dirfd);
	c->dirfd = -1;
}
