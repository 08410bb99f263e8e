/* SPDX-License-Identifier: MIT */
/*
 * The control socket: one thread polls the listening socket and a stop pipe, takes one
 * connection at a time and answers its requests line by line. Requests are bounded and
 * parsed by hand; a bad one gets "error ..." and the server goes on.
 */
#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/sock.h"

struct blkd_control {
	const struct disk *d;
	const struct blkd_control_ext *ext;  /* NULL: none */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct sock_file file;   /* the socket file at path: removed at the end if still there */
	int lfd;
	int stop[2];   /* a byte on stop[1] ends the thread */
	pthread_t thread;
};

static int ctl_listen(struct blkd_control *c, const char *path)
{
	char label[sizeof(c->path) + 16];
	int ret;

	snprintf(label, sizeof(label), "--control %.*s", (int)sizeof(c->path), path);
	ret = sock_listen_unix(path, 0600, 8, label, &c->lfd, &c->file);
	if (ret) {
		c->lfd = -1;
		return ret;
	}
	strcpy(c->path, path);
	return 0;
}

static void ctl_send(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return; /* the client is gone: nothing to tell it */
		s += n;
		len -= (size_t)n;
	}
}

#define ctl_reply blkd_control_reply

void blkd_control_reply(int fd, const char *fmt, ...)
{
	char buf[BLKD_CONTROL_MAX_LINE + 256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	ctl_send(fd, buf, (size_t)n);
}

static void ctl_snapshot(struct blkd_control *c, int fd, const char *path)
{
	uint64_t dirty = 0, zero = 0;
	char why[WHY_MAX] = "";
	int ret;

	if (!*path) {
		ctl_reply(fd, "error snapshot needs a DELTA_PATH");
		return;
	}
	if (path[0] != '/') {
		ctl_reply(fd, "error DELTA_PATH must be absolute: %s", path);
		return;
	}
	if (!c->d) {
		ctl_reply(fd, "error %s: no disk", path);
		return;
	}
	ret = disk_snapshot(c->d, path, &dirty, &zero, why, sizeof(why));
	if (ret) {
		const char *msg = why[0] ? why
				  : ret == -EOPNOTSUPP ? "this disk takes no snapshots"
				  : strerror(-ret);

		log_warn("control: snapshot %s: %s", path, msg);
		ctl_reply(fd, "error %s: %s", path, msg);
		return;
	}
	log_info("control: snapshot %s: %" PRIu64 " dirty, %" PRIu64 " zeroed blocks", path,
		 dirty, zero);
	ctl_reply(fd, "ok %s %" PRIu64, path, dirty + zero);
}

static void ctl_stats(struct blkd_control *c, int fd)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = c->d ? open_memstream(&buf, &len) : NULL;

	if (!c->d) {
		ctl_reply(fd, "error no disk");
		return;
	}
	if (!f) {
		ctl_reply(fd, "error %s", strerror(errno));
		return;
	}
	disk_stats(c->d, f, true);
	if (fclose(f) || !len)
		ctl_reply(fd, "error cannot format the statistics");
	else if (buf[len - 1] != '\n')
		ctl_reply(fd, "%s", buf);
	else
		ctl_send(fd, buf, len);
	free(buf);
}

/* End the --trace-record recording now and write the trace. */
static void ctl_trace_stop(struct blkd_control *c, int fd)
{
	bool traced = c->d && !(c->ext && c->ext->no_trace);
	const char *path = traced ? disk_trace_path(c->d) : NULL;
	char why[WHY_MAX] = "";
	uint64_t n = 0;
	int ret = traced ? disk_trace_finish(c->d, NULL, &n, why, sizeof(why)) : -ENOENT;

	if (ret == -ENOENT || ret == -EOPNOTSUPP) {
		ctl_reply(fd, "error not recording a trace (serve --trace-record FILE)");
		return;
	}
	if (ret) {
		ctl_reply(fd, "error trace: %s", why[0] ? why : strerror(-ret));
		return;
	}
	log_info("control: trace of %" PRIu64 " records written to %s", n, path);
	ctl_reply(fd, "ok %s %" PRIu64, path, n);
}

/* "WORD" or "WORD ARG": ARG ("" for none), or NULL when line is another request. */
static const char *ctl_word(const char *line, const char *word)
{
	size_t n = strlen(word);

	if (strncmp(line, word, n) || (line[n] != ' ' && line[n]))
		return NULL;
	return line[n] ? line + n + 1 : "";
}

/* One request, without its newline. */
static void ctl_request(struct blkd_control *c, int fd, char *line, size_t len)
{
	const char *arg, *want = c->ext && c->ext->names ? c->ext->names :
				 "snapshot DELTA_PATH, stats, flush or trace stop";
	int ret;

	if (len && line[len - 1] == '\r')
		line[--len] = '\0';
	if (memchr(line, '\0', len)) {
		ctl_reply(fd, "error request holds a NUL byte");
		return;
	}
	if (c->ext && len && c->ext->request(c->ext->ctx, fd, line))
		return;
	if ((arg = ctl_word(line, "snapshot")) || (arg = ctl_word(line, "snapshot-disk"))) {
		ctl_snapshot(c, fd, arg);
	} else if (!strcmp(line, "stats")) {
		ctl_stats(c, fd);
	} else if (!strcmp(line, "flush") && !c->d) {
		ctl_reply(fd, "error no disk");
	} else if (!strcmp(line, "flush")) {
		ret = disk_flush(c->d);
		if (ret)
			ctl_reply(fd, "error flush: %s", strerror(-ret));
		else
			ctl_reply(fd, "ok");
	} else if (!strcmp(line, "trace stop")) {
		ctl_trace_stop(c, fd);
	} else if (!len) {
		ctl_reply(fd, "error empty request (want %s)", want);
	} else {
		ctl_reply(fd, "error unknown request '%.64s' (want %s)", line, want);
	}
}

/* Answer fd's requests until it closes, misbehaves, idles or the server stops. */
static void ctl_client(struct blkd_control *c, int fd)
{
	char buf[BLKD_CONTROL_MAX_LINE + 1];
	size_t have = 0;

	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
				       { .fd = c->stop[0], .events = POLLIN } };
		char *nl;
		ssize_t n;
		int r = poll(p, 2, BLKD_CONTROL_IDLE_MS);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || p[1].revents)
			return;
		n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return;
		have += (size_t)n;
		while ((nl = memchr(buf, '\n', have))) {
			size_t len = (size_t)(nl - buf);

			*nl = '\0';
			ctl_request(c, fd, buf, len);
			have -= len + 1;
			memmove(buf, nl + 1, have);
		}
		if (have >= sizeof(buf) - 1) {
			ctl_reply(fd, "error request too long (at most %u bytes with its newline)",
				  BLKD_CONTROL_MAX_LINE);
			return;
		}
	}
}

/* Only the server's own user (or root) may drive it, whatever the socket's mode. */
static bool ctl_peer_ok(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return false;
	return cr.uid == 0 || cr.uid == geteuid();
}

static void *ctl_main(void *arg)
{
	struct blkd_control *c = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = c->lfd, .events = POLLIN },
				       { .fd = c->stop[0], .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("control: poll: %s", strerror(errno));
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue; /* EAGAIN, a client gone before accept, EMFILE: try again */
		if (ctl_peer_ok(fd))
			ctl_client(c, fd);
		close(fd);
	}
}

static void ctl_free(struct blkd_control *c)
{
	if (c->lfd >= 0)
		close(c->lfd);
	if (c->stop[0] >= 0)
		close(c->stop[0]);
	if (c->stop[1] >= 0)
		close(c->stop[1]);
	free(c);
}

/* Start with lfd (>= 0: a listening socket already bound to path, ours now) or listen. */
static int ctl_start(const struct disk *d, const struct blkd_control_ext *ext,
		     const char *path, int lfd, struct blkd_control **out)
{
	struct blkd_control *c = calloc(1, sizeof(*c));
	int ret;

	*out = NULL;
	if (!c) {
		log_error("--control %s: %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	c->d = d;
	c->ext = ext;
	c->lfd = c->stop[0] = c->stop[1] = -1;
	if (pipe2(c->stop, O_CLOEXEC) < 0) {
		ret = -errno;
		log_error("--control %s: %s", path, strerror(-ret));
		ctl_free(c);
		return ret;
	}
	if (lfd >= 0 && strlen(path) < sizeof(c->path)) {
		c->lfd = lfd;
		strcpy(c->path, path);
		(void)sock_file_get(path, &c->file); /* the one the server before made */
		ret = 0;
	} else {
		ret = ctl_listen(c, path);
	}
	if (ret) {
		ctl_free(c);
		return ret;
	}
	ret = -pthread_create(&c->thread, NULL, ctl_main, c);
	if (ret) {
		log_error("--control %s: cannot start its thread: %s", path, strerror(-ret));
		sock_unlink_unix(c->path, &c->file);
		ctl_free(c);
		return ret;
	}
	*out = c;
	return 0;
}

int blkd_control_start(const struct disk *d, const struct blkd_control_ext *ext,
		       const char *path, struct blkd_control **out)
{
	return ctl_start(d, ext, path, -1, out);
}

int blkd_control_adopt(const struct disk *d, const struct blkd_control_ext *ext,
		       const char *path, int lfd, struct blkd_control **out)
{
	return ctl_start(d, ext, path, lfd, out);
}

int blkd_control_listen_fd(const struct blkd_control *c)
{
	return c->lfd;
}

void blkd_control_stop(struct blkd_control *c)
{
	if (!c)
		return;
	while (write(c->stop[1], "x", 1) < 0 && errno == EINTR)
		;
	pthread_join(c->thread, NULL);
	sock_unlink_unix(c->path, &c->file);
	ctl_free(c);
}
