/* SPDX-License-Identifier: MIT */
/*
 * The NBD server: listen on a unix socket or a TCP address, give every client a thread
 * (at most max_conns at once; more are accepted and closed at once), stop when *stop is
 * set. On stop the clients' receive sides are shut so that they finish the requests they
 * hold; a client that does not read its replies within NBD_STOP_GRACE_MS is cut off.
 *
 * The accept loop is also the watchdog: every NBD_POLL_MS it cuts (shuts down) a
 * connection whose handshake is not over by the deadline, however slowly its bytes come
 * (a slow-loris), and with an idle limit one in the transmission phase that has no
 * request in flight and sent none for that long.
 *
 * The server owns the client sockets: a client thread shuts its socket down when it is
 * done (the client sees the end at once) and the accept loop closes it after joining the
 * thread, so no descriptor is ever shut down after its number was reused.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/sock.h"
#include "nbd.h"
#include "nbd_conn.h"

#define NBD_POLL_MS 100
#define NBD_STOP_GRACE_MS 5000

struct client {
	pthread_t thread;
	int fd;                    /* -1: the slot is free */
	unsigned id;
	int done;                  /* set (atomically) by the thread as it ends */
	const struct nbd_offer *x;
	struct nbd_watch w;
};

/* The limits every connection is watched against, in milliseconds (idle 0: none). */
struct limits {
	uint64_t handshake_ms, idle_ms;
};

static void *client_main(void *arg)
{
	struct client *c = arg;

	nbd_conn_run(c->x, c->fd, c->id, &c->w);
	shutdown(c->fd, SHUT_RDWR);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Join the threads that ended and close their sockets; returns how many still run. */
static unsigned clients_reap(struct client *cl, unsigned n)
{
	unsigned running = 0;

	for (unsigned i = 0; i < n; i++) {
		if (cl[i].fd < 0)
			continue;
		if (!__atomic_load_n(&cl[i].done, __ATOMIC_ACQUIRE)) {
			running++;
			continue;
		}
		pthread_join(cl[i].thread, NULL);
		close(cl[i].fd);
		cl[i].fd = -1;
	}
	return running;
}

/* Cut c: shut its socket down (its thread ends, the slot is freed once it did). */
static void client_cut(struct client *c)
{
	__atomic_store_n(&c->w.cut, true, __ATOMIC_RELEASE);
	shutdown(c->fd, SHUT_RDWR);
}

/* The watchdog: cut the clients past the handshake deadline or the idle limit. */
static void clients_watch(struct client *cl, unsigned n, const struct limits *lim)
{
	uint64_t now = nbd_now_ms();

	for (unsigned i = 0; i < n; i++) {
		struct nbd_watch *w = &cl[i].w;
		uint64_t since, quiet;

		if (cl[i].fd < 0 || __atomic_load_n(&cl[i].done, __ATOMIC_ACQUIRE) ||
		    __atomic_load_n(&w->cut, __ATOMIC_ACQUIRE))
			continue;
		since = __atomic_load_n(&w->since_ms, __ATOMIC_ACQUIRE);
		quiet = now > since ? now - since : 0; /* touched since now was read: 0 */
		if (!__atomic_load_n(&w->transmitting, __ATOMIC_ACQUIRE)) {
			if (quiet < lim->handshake_ms)
				continue;
			log_warn("nbd: client %u: handshake not done after %llu s, disconnecting",
				 cl[i].id, (unsigned long long)lim->handshake_ms / 1000);
			client_cut(&cl[i]);
		} else if (lim->idle_ms && !__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE) &&
			   quiet >= lim->idle_ms) {
			log_info("nbd: client %u: idle for %llu s, disconnecting", cl[i].id,
				 (unsigned long long)lim->idle_ms / 1000);
			client_cut(&cl[i]);
		}
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Let every client finish what it holds, then cut off the ones that do not. */
static void clients_stop(struct client *cl, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (cl[i].fd >= 0)
			shutdown(cl[i].fd, SHUT_RD);
	for (int waited = 0; clients_reap(cl, n) && waited < NBD_STOP_GRACE_MS; waited += 10)
		sleep_ms(10);
	for (unsigned i = 0; i < n; i++)
		if (cl[i].fd >= 0)
			shutdown(cl[i].fd, SHUT_RDWR);
	for (unsigned i = 0; i < n; i++) {
		if (cl[i].fd < 0)
			continue;
		pthread_join(cl[i].thread, NULL);
		close(cl[i].fd);
		cl[i].fd = -1;
	}
}

/*
 * The export is the server user's alone, as --control and --vhost-user are: 0600 from the
 * socket's creation (mode 0 took 0777 less the umask: under umask 002 its group could
 * connect and write a writable export).
 */
static int listen_unix(const char *path, int *out, struct sock_file *file)
{
	char label[sizeof(((struct sockaddr_un *)0)->sun_path) + 16];

	snprintf(label, sizeof(label), "unix:%.*s", (int)sizeof(label) - 8, path);
	return sock_listen_unix(path, 0600, 64, label, out, file);
}

static int listen_tcp(const char *host, const char *port, int *out)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	int fd = -1, ret, one = 1;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret) {
		log_error("tcp:%s:%s: %s", host, port, gai_strerror(ret));
		return -EINVAL;
	}
	ret = -EADDRNOTAVAIL;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
			    ai->ai_protocol);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		ret = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		log_error("tcp:%s:%s: %s", host, port, strerror(-ret));
		return ret;
	}
	*out = fd;
	return 0;
}

/* The port a listening TCP socket is bound to (0 if the kernel cannot say). */
static unsigned short bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/* What the accept loop keeps between connections. */
struct accepting {
	int lfd;
	bool tcp;
	bool full;                 /* refusing: said once until a slot is taken again */
	unsigned next_id;
	unsigned idle_s;
	const struct nbd_offer *x;
};

/* Take one pending connection into a free slot, or refuse it (close it at once). */
static void accept_one(struct accepting *ac, struct client *cl, unsigned n)
{
	int fd = accept4(ac->lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
	unsigned i;

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			log_warn("nbd: accept: %s", strerror(errno));
		return;
	}
	if (ac->tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	clients_reap(cl, n);
	for (i = 0; i < n && cl[i].fd >= 0; i++)
		;
	if (i == n) {
		if (!ac->full)
			log_warn("nbd: %u clients connected (the most allowed: --max-connections); "
				 "refusing new ones until one leaves", n);
		else
			log_info("nbd: %u clients connected already; refusing another", n);
		ac->full = true;
		close(fd);
		return;
	}
	cl[i] = (struct client){ .fd = fd, .id = ++ac->next_id, .x = ac->x };
	cl[i].w = (struct nbd_watch){ .since_ms = nbd_now_ms(), .idle_s = ac->idle_s };
	if (pthread_create(&cl[i].thread, NULL, client_main, &cl[i])) {
		log_warn("nbd: no thread for a new client; refusing it");
		close(fd);
		cl[i].fd = -1;
		return;
	}
	ac->full = false;
	log_info("nbd: client %u connected", cl[i].id);
}

int nbd_serve(const struct disk *d, const struct nbd_server_opts *o,
	      volatile sig_atomic_t *stop)
{
	struct nbd_offer x = {
		.d = d,
		.name = o->export_name ? o->export_name : "",
		.size = d ? d->size : 0,
		.read_only = o->read_only || (d && d->read_only),
	};
	unsigned n = o->max_conns ? o->max_conns : NBD_DEFAULT_CONNS;
	struct limits lim = {
		.handshake_ms = 1000ull * (o->handshake_s ? o->handshake_s : NBD_HANDSHAKE_DEADLINE_S),
		.idle_ms = 1000ull * o->idle_s,
	};
	struct accepting ac = { .lfd = -1, .tcp = !o->unix_path, .idle_s = o->idle_s, .x = &x };
	bool tcp = ac.tcp;
	struct sock_file file = { 0 };
	struct client *cl;
	int lfd = -1, ret;

	if (disk_check(d)) {
		log_error("nbd: not a usable disk");
		return -EINVAL;
	}
	if (tcp && !o->tcp_port) {
		log_error("nbd: no socket path and no TCP port to listen on");
		return -EINVAL;
	}
	cl = calloc(n, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		cl[i].fd = -1;
	ret = tcp ? listen_tcp(o->tcp_host ? o->tcp_host : "127.0.0.1", o->tcp_port, &lfd)
		  : listen_unix(o->unix_path, &lfd, &file);
	if (ret) {
		free(cl);
		return ret;
	}
	if (tcp && o->tcp_bound_port)
		*o->tcp_bound_port = bound_port(lfd);
	if (o->on_listen)
		o->on_listen(o->on_listen_arg);
	ac.lfd = lfd;
	/* *stop is set by a signal handler or by another thread */
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };

		clients_reap(cl, n);
		clients_watch(cl, n, &lim);
		if (poll(&p, 1, NBD_POLL_MS) > 0 && (p.revents & POLLIN))
			accept_one(&ac, cl, n);
	}
	close(lfd);
	if (!tcp)
		sock_unlink_unix(o->unix_path, &file);
	clients_stop(cl, n);
	free(cl);
	return 0;
}
