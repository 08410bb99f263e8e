/* SPDX-License-Identifier: MIT */
#include "sock.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* A socket file left by a server that is gone: nothing accepts on it. */
static bool unix_stale(const char *path, const struct sockaddr_un *a)
{
	struct stat st;
	bool stale = false;
	int fd;

	if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0 && errno == ECONNREFUSED)
		stale = true;
	close(fd);
	return stale;
}

int sock_listen_unix(const char *path, mode_t mode, int backlog, const char *label, int *out)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, ret;

	if (strlen(path) >= sizeof(a.sun_path)) {
		log_error("%s: socket path too long (at most %zu bytes)", label,
			  sizeof(a.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		log_error("%s: %s", label, strerror(-ret));
		return ret;
	}
	ret = bind(fd, (struct sockaddr *)&a, sizeof(a));
	if (ret < 0 && errno == EADDRINUSE && unix_stale(path, &a) && unlink(path) == 0)
		ret = bind(fd, (struct sockaddr *)&a, sizeof(a));
	if (ret < 0 && errno == EADDRINUSE) {
		log_error("%s: already exists (another server, or not a socket)", label);
		close(fd);
		return -EADDRINUSE;
	}
	if (ret < 0 || (mode && chmod(path, mode) < 0) || listen(fd, backlog) < 0) {
		ret = -errno;
		log_error("%s: %s", label, strerror(-ret));
		if (ret != -EADDRINUSE)
			unlink(path);
		close(fd);
		return ret;
	}
	*out = fd;
	return 0;
}
