/* SPDX-License-Identifier: MIT */
/*
 * The store's marker, STORE/lazyblk-store ("lazyblk-store 1\n"): what makes a directory a
 * store, so that pointing --store at a directory of one's own does not silently turn it into
 * one. See store.h for the rules and docs/formats.md for the layout.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/why.h"
#include "store.h"

#define MARKER_MAX 64 /* bytes of the marker read; its one line is shorter */

/* The marker's format into *version: 0, -ENOENT (no marker), -EPROTONOSUPPORT, -errno. */
static int marker_read(int dirfd, char line[MARKER_MAX + 1], unsigned long *version)
{
	int fd = fs_open_regular(dirfd, STORE_MARKER, O_NOFOLLOW, NULL);
	const char *p = line + strlen(STORE_MARKER " ");
	char *end;
	ssize_t n;

	line[0] = '\0';
	if (fd == -EINVAL || fd == -EISDIR || fd == -ELOOP)
		return -EPROTONOSUPPORT; /* a FIFO, a device, a directory: never opened */
	if (fd < 0)
		return fd;
	n = read(fd, line, MARKER_MAX);
	close(fd);
	if (n < 0)
		return -EIO;
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (strncmp(line, STORE_MARKER " ", strlen(STORE_MARKER " ")) || *p < '0' || *p > '9')
		return -EPROTONOSUPPORT;
	*version = strtoul(p, &end, 10);
	if (*end || *version != STORE_FORMAT)
		return -EPROTONOSUPPORT;
	return 0;
}

static bool is_fanout(const char *name)
{
	return strlen(name) == 2 && strspn(name, "0123456789abcdef") == 2;
}

/* A directory whose entries are all fan-out directories (xx/). */
static bool fanout_only(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	bool ok = true;
	DIR *d;

	if (fd < 0)
		return false;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	while (ok && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		ok = is_fanout(de->d_name) && (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN);
	}
	closedir(d);
	return ok;
}

/*
 * Nothing in dir but what a store made by an older lazyblk holds: chunks/ and plain/ with
 * fan-out directories, tmp/ (staging), the files cache.state and cache.lock (a bounded
 * cache), layouts/ (images fetched by reference), snapshots/ (VM snapshots fetched by reference) and lost+found/ (a file system's root). An empty directory passes. So do the marker
 * and its staging file lazyblk-store.tmp.XXXXXX: another process making the same store now.
 */
static int looks_like_store(int dirfd)
{
	int fd = dup(dirfd);
	struct dirent *de;
	bool ok = true;
	struct stat st;
	DIR *d;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	rewinddir(d);
	while (ok && (de = readdir(d))) {
		const char *n = de->d_name;

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
			ok = false;
		else if (!S_ISDIR(st.st_mode))
			ok = S_ISREG(st.st_mode) &&
			     (!strcmp(n, "cache.state") || !strcmp(n, "cache.lock") ||
			      !strncmp(n, STORE_MARKER, strlen(STORE_MARKER)));
		else if (!strcmp(n, "chunks") || !strcmp(n, "plain"))
			ok = fanout_only(dirfd, n);
		else
			ok = !strcmp(n, "tmp") || !strcmp(n, "lost+found") || !strcmp(n, "layouts") ||
			     !strcmp(n, "snapshots");
	}
	closedir(d);
	return ok ? 0 : -ENOTEMPTY;
}

static int marker_write(const char *dir)
{
	char path[PATH_MAX], line[MARKER_MAX];
	int n = snprintf(line, sizeof(line), "%s %d\n", STORE_MARKER, STORE_FORMAT);

	if (snprintf(path, sizeof(path), "%s/%s", dir, STORE_MARKER) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return fs_write_file_atomic(path, line, (size_t)n, 0644);
}

int store_marker_check(const char *dir, int dirfd, bool create, bool adopt)
{
	char line[MARKER_MAX + 1];
	unsigned long version;
	int ret = marker_read(dirfd, line, &version);

	if (ret != -ENOENT || !create)
		return ret == -ENOENT ? 0 : ret;
	if (!adopt) {
		ret = looks_like_store(dirfd);
		if (ret)
			return ret;
	}
	return marker_write(dir);
}

int store_init(const char *dir)
{
	int dirfd, ret = fs_mkdir_p(dir, 0755);

	if (ret)
		return ret;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	ret = store_marker_check(dir, dirfd, true, true);
	close(dirfd);
	return ret;
}

bool store_open_why(int err, const char *dir, bool init_hint, char *why, size_t why_len)
{
	char line[MARKER_MAX + 1];
	unsigned long version;
	int dirfd;

	if (err == -ENOTEMPTY) {
		why_set(why, why_len, err, "store %s: not a lazyblk store (not empty and no "
			"%s/%s); use an empty directory%s", dir, dir, STORE_MARKER,
			init_hint ? ", or --init to make it one" : "");
		return true;
	}
	if (err != -EPROTONOSUPPORT)
		return false;
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	line[0] = '\0';
	if (dirfd >= 0) {
		marker_read(dirfd, line, &version);
		close(dirfd);
	}
	why_set(why, why_len, err, "store %s: %s/%s says '%s'; this lazyblk reads '%s %d' "
		"(a newer lazyblk made the store?)", dir, dir, STORE_MARKER, line, STORE_MARKER,
		STORE_FORMAT);
	return true;
}
