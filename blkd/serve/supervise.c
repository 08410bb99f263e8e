/* SPDX-License-Identifier: MIT */
/*
 * Running under a supervisor: pid file, sd_notify, parent-death signal, a captive command
 * (serve_int.h). Nothing prints.
 */
#include "serve_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/fsutil.h"

extern char **environ;

/*
 * The pid file, made (O_EXCL) or, if there, opened only if it is a regular file and not a
 * link (fs_open_regular): a link planted at path is never followed (ftruncate would empty
 * what it points to), a FIFO or a device never opened. The descriptor, or -errno.
 */
static int pidfile_open(const char *path)
{
	for (int tries = 0; tries < 8; tries++) {
		int f = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
			     0644);

		if (f >= 0 || errno != EEXIST)
			return f >= 0 ? f : -errno;
		f = fs_open_regular(AT_FDCWD, path, O_RDWR | O_NOFOLLOW, NULL);
		if (f != -ENOENT) /* removed meanwhile: make it again */
			return f;
	}
	return -EAGAIN;
}

int serve_pidfile_lock(const char *path, int *fd, char *why, size_t why_len)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	int f = pidfile_open(path);

	if (f < 0)
		return why_set(why, why_len, f, "--pidfile %s: %s", path,
			       f == -ELOOP ? "a symbolic link (not followed)"
			       : f == -EINVAL || f == -EISDIR ? "not a regular file" : strerror(-f));
	if (fcntl(f, F_SETLK, &fl) < 0) {
		int err = errno;
		struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		if ((err == EAGAIN || err == EACCES) && !fcntl(f, F_GETLK, &who) &&
		    who.l_type != F_UNLCK)
			why_set(why, why_len, -err, "--pidfile %s: held by process %ld (another "
				"server is running)", path, (long)who.l_pid);
		else
			why_set(why, why_len, -err, "--pidfile %s: cannot lock it: %s", path,
				strerror(err));
		close(f);
		return -err;
	}
	if (ftruncate(f, 0) < 0) {
		int err = errno;

		close(f);
		return why_set(why, why_len, -err, "--pidfile %s: %s", path, strerror(err));
	}
	*fd = f;
	return 0;
}

int serve_pidfile_write(const char *path, int fd, char *why, size_t why_len)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	errno = 0;
	if (pwrite(fd, buf, (size_t)n, 0) != n) {
		int err = errno ? errno : EIO;

		return why_set(why, why_len, -err, "--pidfile %s: %s", path, strerror(err));
	}
	return 0;
}

void serve_pidfile_remove(const char *path, int fd)
{
	struct stat mine, there;

	if (fd < 0)
		return;
	/* only the file this server locked, not whatever has been put at path since */
	if (!fstat(fd, &mine) && !lstat(path, &there) && mine.st_dev == there.st_dev &&
	    mine.st_ino == there.st_ino)
		unlink(path);
	close(fd);
}

void serve_notify(const char *msg, const struct note_sink *notes)
{
	const char *e = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n, len = strlen(msg);
	int s;

	if (!e || !*e)
		return;
	n = strlen(e);
	if ((e[0] != '/' && e[0] != '@') || n >= sizeof(sa.sun_path)) {
		note_emit(notes, NOTE_WARN, "NOTIFY_SOCKET '%s': not a unix socket path or @name: "
			  "not notified", e);
		return;
	}
	memcpy(sa.sun_path, e, n);
	if (e[0] == '@')
		sa.sun_path[0] = '\0'; /* the abstract namespace: no terminating NUL counted */
	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0 || sendto(s, msg, len, MSG_NOSIGNAL, (struct sockaddr *)&sa,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
		note_emit(notes, NOTE_WARN, "NOTIFY_SOCKET %s: %s", e, strerror(errno));
	if (s >= 0)
		close(s);
}

int serve_exit_with_parent(pid_t ppid, char *why, size_t why_len)
{
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
		return why_set(why, why_len, -errno, "--exit-with-parent: %s", strerror(errno));
	/* the parent may have gone before the call: then no signal comes, so stop now */
	if (getppid() != ppid)
		kill(getpid(), SIGTERM);
	return 0;
}

/* environ without the variables env sets and NOTIFY_SOCKET, then env; NULL if no memory. */
static char **env_build(char *const *env)
{
	size_t n = 0, k = 0, m = 0;
	char **out;

	while (environ[n])
		n++;
	while (env[k])
		k++;
	out = calloc(n + k + 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(environ[i], '=');
		size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
		bool drop = nl == 13 && !strncmp(environ[i], "NOTIFY_SOCKET", 13);

		for (size_t j = 0; j < k && !drop; j++)
			drop = !strncmp(env[j], environ[i], nl) && env[j][nl] == '=';
		if (!drop)
			out[m++] = environ[i];
	}
	for (size_t j = 0; j < k; j++)
		out[m++] = env[j];
	return out;
}

int serve_spawn(const char *cmd, char *const *env, pid_t *pid, char *why, size_t why_len)
{
	char *argv[] = { "sh", "-c", (char *)cmd, NULL };
	posix_spawnattr_t at;
	sigset_t none, dfl;
	char **envp = env_build(env);
	int ret;

	if (!envp)
		return why_set(why, why_len, -ENOMEM, "--run: out of memory");
	sigemptyset(&none);
	sigemptyset(&dfl); /* what a server ignores or takes: back to the defaults */
	for (int sig = 1; sig < SIGRTMIN; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaddset(&dfl, sig);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &dfl);
	ret = posix_spawn(pid, "/bin/sh", NULL, &at, argv, envp);
	posix_spawnattr_destroy(&at);
	free(envp);
	if (ret)
		return why_set(why, why_len, -ret, "--run: /bin/sh: %s", strerror(ret));
	return 0;
}

int serve_exit_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}
