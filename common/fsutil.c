/* SPDX-License-Identifier: MIT */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uring.h"
#include "why.h"

/* -errno for a file that is not regular, as fs_open_regular says it. */
static int not_regular(mode_t m)
{
	return S_ISDIR(m) ? -EISDIR : S_ISLNK(m) ? -ELOOP : -EINVAL;
}

/*
 * Without /proc: the name opened again (O_NONBLOCK, so a FIFO swapped in meanwhile cannot
 * block the open; a device swapped in is opened, which only /proc avoids), then cleared.
 */
static int open_by_name(int dfd, const char *name, int flags)
{
	int fd = openat(dfd, name, flags | O_NONBLOCK), fl;

	if (fd < 0)
		return -errno;
	if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		fl = -errno;
		close(fd);
		return fl;
	}
	return fd;
}

int fs_open_regular(int dfd, const char *name, int flags, struct stat *st)
{
	int real = O_RDONLY | O_CLOEXEC | O_NOCTTY | flags, pfd, fd, ret;
	char proc[32];
	struct stat what, tmp;

	if (!st)
		st = &tmp;
	/* the file itself, without opening it: no FIFO waits, no device's open runs */
	pfd = openat(dfd, name, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW));
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &what) < 0) {
		fd = -errno;
	} else if (!S_ISREG(what.st_mode)) {
		fd = not_regular(what.st_mode);
	} else {
		/* that very file opened for reading (the magic link is not a link to refuse) */
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
		fd = open(proc, real & ~O_NOFOLLOW);
		if (fd < 0)
			fd = errno == ENOENT ? open_by_name(dfd, name, real) : -errno;
	}
	close(pfd);
	if (fd < 0)
		return fd;
	/* the same file through /proc; without it, whatever the name held at the open */
	if (fstat(fd, st) < 0)
		ret = -errno;
	else if (!S_ISREG(st->st_mode))
		ret = not_regular(st->st_mode);
	else
		return fd;
	close(fd);
	return ret;
}

const char *fs_open_why(int err)
{
	return err == -EINVAL ? "not a regular file" : strerror(-err);
}

int fs_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;

			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = c;
			if (c == '\0')
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int fs_mkdir_private(const char *path, char *why, size_t why_len)
{
	const char *bad = NULL;
	struct stat st;
	int ret = fs_mkdir_p(path, 0700);

	if (why_len)
		why[0] = '\0';
	if (lstat(path, &st) < 0)
		return ret ? ret : -errno;
	if (S_ISLNK(st.st_mode))
		bad = "a symbolic link";
	else if (!S_ISDIR(st.st_mode))
		bad = "not a directory";
	else if (st.st_uid != geteuid())
		bad = "owned by another user";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		bad = "writable by its group or others";
	return bad ? why_set(why, why_len, -EPERM, "%s", bad) : 0;
}

/* read(2) (off < 0) or pread(2) until len bytes came; -EIO at an early end of file. */
static int read_loop(int fd, void *buf, size_t len, off_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t r = off < 0 ? read(fd, p, len) : pread(fd, p, len, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		p += r;
		if (off >= 0)
			off += r;
		len -= (size_t)r;
	}
	return 0;
}

int fs_read_full(int fd, void *buf, size_t len)
{
	return read_loop(fd, buf, len, -1);
}

int fs_pread_full(int fd, void *buf, size_t len, off_t off)
{
	return off < 0 ? -EINVAL : read_loop(fd, buf, len, off);
}

int fs_write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t r = write(fd, p, len);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

int fs_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t r = pwrite(fd, p, len, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		off += r;
		len -= (size_t)r;
	}
	return 0;
}

/* fs_read_fd, -EFBIG for a file larger than max bytes (nothing read). */
static int fs_read_fd_max(int fd, uint64_t max, uint8_t **data, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int ret;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	if ((uint64_t)st.st_size > max)
		return -EFBIG;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM;
	ret = uring_pread_full(fd, buf, (size_t)st.st_size, 0);
	if (ret) {
		free(buf);
		return ret;
	}
	buf[st.st_size] = '\0';
	*data = buf;
	*len = (size_t)st.st_size;
	return 0;
}

int fs_read_fd(int fd, uint8_t **data, size_t *len)
{
	return fs_read_fd_max(fd, UINT64_MAX, data, len);
}

int fs_read_file(const char *path, uint8_t **data, size_t *len)
{
	return fs_read_file_max(path, UINT64_MAX, data, len);
}

int fs_read_file_max(const char *path, uint64_t max, uint8_t **data, size_t *len)
{
	int fd = fs_open_regular(AT_FDCWD, path, 0, NULL), ret;

	if (fd < 0)
		return fd;
	ret = fs_read_fd_max(fd, max, data, len);
	close(fd);
	return ret;
}

int fs_map_file(const char *path, struct fs_map *m)
{
	int fd = fs_open_regular(AT_FDCWD, path, 0, NULL), ret;

	m->data = NULL;
	m->len = 0;
	if (fd < 0)
		return fd;
	ret = fs_map_fd(fd, m);
	close(fd);
	return ret;
}

int fs_map_fd(int fd, struct fs_map *m)
{
	struct stat *st = &m->st;
	int ret = 0;
	void *p;

	m->data = NULL;
	m->len = 0;
	if (fstat(fd, st) < 0) {
		ret = -errno;
	} else if (!S_ISREG(st->st_mode)) {
		ret = S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL;
	} else if (st->st_size > 0) {
		p = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED) {
			ret = -errno;
		} else {
			m->data = p;
			m->len = (size_t)st->st_size;
		}
	}
	return ret;
}

void fs_unmap(struct fs_map *m)
{
	if (m->data)
		munmap(m->data, m->len);
	m->data = NULL;
	m->len = 0;
}

void fs_dirname(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		snprintf(buf, len, ".");
	} else if (slash == path) {
		snprintf(buf, len, "/");
	} else {
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
	}
}

int fs_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int fs_output_check(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? 0 : -EEXIST;
}

int fs_rename_output(const char *tmp, const char *path)
{
	int ret = fs_output_check(path);

	if (!ret && rename(tmp, path) < 0)
		ret = -errno;
	return ret;
}

int fs_mkstemp(char *tmpl, int flags, mode_t mode)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	size_t n = strlen(tmpl);
	char *x;

	if (n < 6 || strcmp(tmpl + n - 6, "XXXXXX"))
		return -EINVAL;
	x = tmpl + n - 6;
	for (int tries = 0; tries < 100; tries++) {
		uint8_t r[6];
		int fd;

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
			/* interrupted: a name that still differs from try to try */
			uint64_t v = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^
				     (uint64_t)(uintptr_t)tmpl ^ (uint64_t)tries << 40;

			for (size_t i = 0; i < sizeof(r); i++)
				r[i] = (uint8_t)(v >> (8 * i));
		}
		for (size_t i = 0; i < sizeof(r); i++)
			x[i] = set[r[i] % (sizeof(set) - 1)];
		fd = open(tmpl, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | flags, mode);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int fs_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	int fd, ret;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = fs_mkstemp(tmp, 0, mode);
	if (fd < 0)
		return fd;
	ret = fs_write_full(fd, data, len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (!ret)
		ret = fs_rename_output(tmp, path);
	if (ret) {
		unlink(tmp);
		return ret;
	}
	fs_dirname(path, dir, sizeof(dir));
	return fs_fsync_dir(dir);
}
