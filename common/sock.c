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
#include "why.h"

/*
 * path holds a socket file left by a server that is gone: remove it, so that bind can make
 * a new one. Only a socket (lstat: a link there is not followed) of this user on which
 * nothing accepts, and still the same file just before the unlink; anything else is left
 * alone, with the reason in why. In a sticky directory (/tmp) nobody but this user and root can swap a
 * file of this user's, so what is checked is what is removed.
 */
static int unix_stale_remove(const char *path, const struct sockaddr_un *a, char *why,
			     size_t why_len)
{
	struct stat st, again;
	bool refused;
	int fd;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno; /* gone meanwhile: bind again */
	if (!S_ISSOCK(st.st_mode)) {
		why_set(why, why_len, 0, "already exists and is not a socket");
		return -EADDRINUSE;
	}
	if (st.st_uid != geteuid()) {
		why_set(why, why_len, 0, "a socket of another user is there (not replaced)");
		return -EADDRINUSE;
	}
	/*
	 * Non-blocking: a live server whose backlog is full makes a blocking connect wait (for
	 * good, if it never accepts); this one says EAGAIN at once, which is "in use" too.
	 */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	refused = connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0 && errno == ECONNREFUSED;
	close(fd);
	if (!refused) {
		why_set(why, why_len, 0, "already exists (another server is listening there)");
		return -EADDRINUSE;
	}
	if (lstat(path, &again) < 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino ||
	    !S_ISSOCK(again.st_mode)) {
		why_set(why, why_len, 0, "replaced while it was checked (not removed)");
		return -EADDRINUSE;
	}
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int sock_file_get(const char *path, struct sock_file *file)
{
	struct stat st;

	file->dev = 0;
	file->ino = 0;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	file->dev = st.st_dev;
	file->ino = st.st_ino;
	return 0;
}

int sock_listen_unix(const char *path, mode_t mode, int backlog, const char *label, int *out,
		     struct sock_file *file)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char why[WHY_MAX] = "";
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
	/*
	 * The socket file gets its mode when bind makes it (Linux: the socket's own mode, less
	 * the umask), so it never exists with a wider one, and nothing is changed by path
	 * afterwards: a chmod by path follows whatever a swap put there.
	 */
	if (mode && fchmod(fd, mode) < 0) {
		ret = -errno;
		log_error("%s: %s", label, strerror(-ret));
		close(fd);
		return ret;
	}
	ret = bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno : 0;
	if (ret == -EADDRINUSE) {
		ret = unix_stale_remove(path, &a, why, sizeof(why));
		if (!ret)
			ret = bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ? -errno : 0;
	}
	if (!ret) {
		/*
		 * The file bind just made, so that only it is removed at the end: a newer server
		 * may have replaced a socket that no longer accepted (this one, stopping) by then.
		 */
		(void)sock_file_get(path, file);
		if (listen(fd, backlog) == 0) {
			*out = fd;
			return 0;
		}
		ret = -errno;
		sock_unlink_unix(path, file);
	}
	if (ret == -EADDRINUSE)
		log_error("%s: %s", label, why[0] ? why : "already exists (another server, or not "
			  "a socket)");
	else
		log_error("%s: %s", label, strerror(-ret));
	close(fd);
	return ret;
}

void sock_unlink_unix(const char *path, const struct sock_file *file)
{
	struct sock_file now;

	if (file->ino && !sock_file_get(path, &now) && now.dev == file->dev &&
	    now.ino == file->ino)
		unlink(path);
}
