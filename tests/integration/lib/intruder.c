/* SPDX-License-Identifier: MIT */
/*
 * An intruder inside lazyblk serve, for t_confine.sh: LD_PRELOADed, its constructor starts a
 * thread (before the server confines itself, as code that took over a server thread would
 * already be there) that waits for a line on the fifo $INTRUDER_FIFO, then makes the system
 * calls an attacker would and writes one line per call to $INTRUDER_OUT: "NAME ok" or
 * "NAME ERRNO-NAME", then "done". Each call is harmless if it is not refused (a path that
 * does not exist, a child that exits at once). Built by the test: cc -shared -fPIC.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int in_fd = -1;
static FILE *out;

static void report(const char *name, long r)
{
	if (r >= 0)
		fprintf(out, "%s ok\n", name);
	else
		fprintf(out, "%s %s\n", name, strerrorname_np(errno));
	fflush(out);
}

static void *intrude(void *arg)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	char *argv[] = { "x", NULL }, c;
	sigset_t all;
	long r;
	int s;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* the server's signals stay the server's */
	if (read(in_fd, &c, 1) != 1)
		return NULL;
	report("getpid", getpid());
	report("execve", execve("/nonexistent/lazyblk-intruder", argv, argv + 1));
	r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); /* fork */
	if (r == 0)
		_exit(0);
	report("fork", r);
	report("socket-netlink", s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0));
	if (s >= 0)
		close(s);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	report("socket-inet", s);
	report("bind", bind(s, (struct sockaddr *)&in, sizeof(in)));
	if (s >= 0)
		close(s);
	report("unshare-user", unshare(CLONE_NEWUSER));
	report("ptrace", ptrace(PTRACE_PEEKDATA, getppid(), NULL, NULL));
	report("io_uring_setup", syscall(SYS_io_uring_setup, 4, NULL));
	report("open-shadow", s = open("/etc/shadow", O_RDONLY | O_CLOEXEC));
	if (s >= 0)
		close(s);
	fprintf(out, "done\n");
	fflush(out);
	return NULL;
}

__attribute__((constructor)) static void intruder_start(void)
{
	const char *fifo = getenv("INTRUDER_FIFO"), *path = getenv("INTRUDER_OUT");
	pthread_t t;

	if (!fifo || !path)
		return;
	in_fd = open(fifo, O_RDWR | O_CLOEXEC);
	out = fopen(path, "we");
	if (in_fd < 0 || !out || pthread_create(&t, NULL, intrude, NULL))
		abort();
	pthread_detach(t);
}
