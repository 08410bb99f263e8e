/* SPDX-License-Identifier: MIT */
/*
 * For the socket targets: the input is what a client sends. A server function runs on one
 * end of a socketpair in a thread; a writer thread sends the input on the other end and
 * (or a target's own sender does, with descriptors) and then shuts it down for writing, while the caller reads (and drops) everything the server
 * answers, with any descriptors it passes, until the server closes its end.
 */
#ifndef LZ_FUZZ_SOCKPAIR_H
#define LZ_FUZZ_SOCKPAIR_H

#include <pthread.h>
#include <sys/socket.h>

#include "fuzz.h"

struct fuzz_conn {
	int cfd, sfd;
	const uint8_t *data;
	size_t size;
	void (*serve)(struct fuzz_conn *c);  /* the server; fuzz_conn_run closes sfd after */
	void (*send)(struct fuzz_conn *c);   /* NULL: the input as one byte stream */
	void *arg;
};

static void *fuzz_conn_server(void *p)
{
	struct fuzz_conn *c = p;

	c->serve(c);
	close(c->sfd);
	return NULL;
}

static void *fuzz_conn_writer(void *p)
{
	struct fuzz_conn *c = p;
	size_t off = 0;

	if (c->send) {
		c->send(c);
		shutdown(c->cfd, SHUT_WR);
		return NULL;
	}
	while (off < c->size) {
		ssize_t n = send(c->cfd, c->data + off, c->size - off, MSG_NOSIGNAL);

		if (n <= 0)
			break; /* the server closed its end */
		off += (size_t)n;
	}
	shutdown(c->cfd, SHUT_WR);
	return NULL;
}

/* Read until EOF, closing the descriptors the server passes. */
static void fuzz_conn_drain(int fd)
{
	static uint8_t buf[1 << 16];
	char cbuf[CMSG_SPACE(16 * sizeof(int))];

	for (;;) {
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
				     .msg_controllen = sizeof(cbuf) };
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		for (struct cmsghdr *cm = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
				close(((int *)CMSG_DATA(cm))[i]);
		}
		if (n <= 0)
			break;
	}
}

static inline void fuzz_conn_run(struct fuzz_conn *c)
{
	pthread_t srv, wr;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	c->cfd = sv[0];
	c->sfd = sv[1];
	if (pthread_create(&srv, NULL, fuzz_conn_server, c) ||
	    pthread_create(&wr, NULL, fuzz_conn_writer, c))
		abort();
	fuzz_conn_drain(c->cfd);
	pthread_join(wr, NULL);
	pthread_join(srv, NULL);
	close(c->cfd);
}

#endif
