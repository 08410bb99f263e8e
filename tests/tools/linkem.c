/* SPDX-License-Identifier: MIT */
/*
 * linkem: a loopback TCP proxy that puts one emulated bottleneck link between its clients
 * and one upstream server (docs/linkem.md).
 *
 *   linkem --listen ADDR:PORT --connect HOST:PORT [--rate RATE] [--delay DELAY]
 *          [--buffer BYTES]
 *
 * Each direction (client to server "up", server to client "down") is one link shared by
 * every connection: bytes read from any socket of that direction join one FIFO in arrival
 * order, the link serializes them at RATE (a virtual clock: a segment starts when the link
 * is free, or when it arrives if later) and each segment leaves the link DELAY after its
 * last byte was serialized.  An end of stream (FIN) takes the same path without occupying
 * the link.  A new connection's bytes start flowing one round trip after it was accepted,
 * as the handshake would take on a real link.
 *
 * One thread, edge-triggered epoll, epoll_pwait2 timeouts with nanosecond resolution.
 * Every connection has a ring buffer of BYTES per direction; a full ring stops reading
 * from its source socket (TCP backpressure).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define NSEC		1000000000ULL
#define SEG_MIN		1448		/* one Ethernet-sized TCP segment */
#define SEG_MAX		65536
#define SEG_NS		500000ULL	/* a segment is what the link sends in 500 us */
#define READ_MAX	(256 << 10)	/* bytes per read(2) */
#define DEFAULT_BUFFER	(4 << 20)
#define MAX_EVENTS	64

enum sock_kind { SK_LISTEN, SK_SIGNAL, SK_PEER };

struct conn;
struct flow;

struct sock {
	enum sock_kind kind;
	int fd;
	struct conn *conn;
	struct flow *in;	/* the flow this socket feeds */
	struct flow *out;	/* the flow this socket drains */
	bool readable;		/* edge seen, no EAGAIN since */
	bool writable;
};

/* One segment (or the end of stream when len is 0) in a link's FIFO. */
struct mark {
	struct flow *flow;
	uint32_t len;
	uint64_t due;		/* CLOCK_MONOTONIC ns: when it leaves the link */
};

/* One direction of the emulated link, shared by every connection. */
struct link {
	uint64_t rate;		/* bytes/s, 0: unlimited */
	uint64_t delay;		/* ns, one way */
	uint64_t seg;		/* bytes per mark */
	uint64_t free_at;	/* the link is busy serializing until then */
	struct mark *q;		/* ring of marks, due times never decrease */
	size_t q_cap, q_head, q_len;
	uint64_t bytes;		/* delivered to the receiving sockets */
};

/* One direction of one connection: src -> ring buffer -> link -> dst. */
struct flow {
	struct conn *conn;
	struct link *link;
	struct sock *src, *dst;
	char *buf;
	size_t cap;
	uint64_t rcvd;		/* read from src */
	uint64_t arrived;	/* left the link: may be written */
	uint64_t sent;		/* written to dst */
	unsigned int marks;	/* marks of this flow in the link's FIFO */
	bool eof_read, eof_arrived, shut;
};

struct conn {
	struct sock client, upstream;
	struct flow up, down;
	struct conn *prev, *next;	/* live connections */
	struct conn *hs_next;		/* handshake FIFO */
	struct conn *grave_next;	/* closed, to be freed */
	uint64_t active_at;		/* end of the emulated handshake */
	bool connecting, hs_done, active, dead, in_hs, in_grave;
};

struct linkem {
	int epfd;
	struct sock lsock, ssock;
	struct sockaddr_storage up_addr;
	socklen_t up_len;
	const char *up_name;
	size_t buffer;
	struct link up, down;
	struct conn *conns;
	struct conn *hs_head, *hs_tail;
	struct conn *grave;
	uint64_t nconns, nfailed;
	bool stop;
};

static void flow_pull(struct linkem *lk, struct flow *f);

static void say(FILE *to, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *to, const char *fmt, ...)
{
	va_list ap;

	fputs("linkem: ", to);
	va_start(ap, fmt);
	vfprintf(to, fmt, ap);
	va_end(ap);
	fputc('\n', to);
	fflush(to);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* ------------------------------------------------------------------ options */

struct unit {
	const char *name;
	double mult;
};

/* "12.5" + unit from table (case-insensitive); a bare number only if bare_mult > 0. */
static int parse_scaled(const char *s, const struct unit *units, double bare_mult, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v < 0)
		return -EINVAL;
	if (!*end) {
		if (bare_mult <= 0 && v != 0)
			return -EINVAL;
		*out = v * bare_mult;
		return 0;
	}
	for (; units->name; units++) {
		if (!strcasecmp(end, units->name)) {
			*out = v * units->mult;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_rate(const char *s, uint64_t *bytes_per_s)
{
	static const struct unit units[] = {
		{ "bit", 1.0 / 8 }, { "kbit", 1e3 / 8 }, { "mbit", 1e6 / 8 },
		{ "gbit", 1e9 / 8 }, { "tbit", 1e12 / 8 },
		{ "bps", 1 }, { "kbps", 1e3 }, { "mbps", 1e6 }, { "gbps", 1e9 },
		{ NULL, 0 },
	};
	double v;

	if (parse_scaled(s, units, 1, &v) || v > 1e13)
		return -EINVAL;
	*bytes_per_s = (uint64_t)llround(v);
	if (v > 0 && *bytes_per_s == 0)
		return -EINVAL;
	return 0;
}

static int parse_delay(const char *s, uint64_t *ns)
{
	static const struct unit units[] = {
		{ "s", 1e9 }, { "ms", 1e6 }, { "us", 1e3 }, { "ns", 1 }, { NULL, 0 },
	};
	double v;

	if (parse_scaled(s, units, 0, &v) || v > 3600e9)
		return -EINVAL;
	*ns = (uint64_t)llround(v);
	return 0;
}

static int parse_size(const char *s, size_t *bytes)
{
	static const struct unit units[] = {
		{ "k", 1024.0 }, { "kib", 1024.0 }, { "m", 1048576.0 }, { "mib", 1048576.0 },
		{ "g", 1073741824.0 }, { "gib", 1073741824.0 }, { NULL, 0 },
	};
	double v;

	if (parse_scaled(s, units, 1, &v) || v < 1024 || v > 1073741824.0 || v != floor(v))
		return -EINVAL;
	*bytes = (size_t)v;
	return 0;
}

/* "HOST:PORT" or "[V6]:PORT" -> the first address getaddrinfo gives. */
static int parse_hostport(const char *arg, bool passive, struct sockaddr_storage *ss,
			  socklen_t *len, const char **why)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res;
	char host[256], *end;
	const char *colon = strrchr(arg, ':');
	size_t hl;
	long port;
	int err;

	*why = "expected HOST:PORT";
	if (!colon || colon == arg || colon[1] == '\0')
		return -EINVAL;
	hl = (size_t)(colon - arg);
	if (arg[0] == '[' && colon[-1] == ']') {
		arg++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return -EINVAL;
	memcpy(host, arg, hl);
	host[hl] = '\0';
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (*end || errno || port < (passive ? 0 : 1) || port > 65535) {
		*why = "bad port";
		return -EINVAL;
	}
	if (passive)
		hints.ai_flags |= AI_PASSIVE;
	err = getaddrinfo(host, colon + 1, &hints, &res);
	if (err) {
		*why = gai_strerror(err);
		return -ENOENT;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void usage(FILE *to)
{
	fputs("usage: linkem --listen ADDR:PORT --connect HOST:PORT [--rate RATE] [--delay DELAY]\n"
	      "              [--buffer BYTES]\n"
	      "A TCP proxy emulating one bottleneck link in each direction, shared by all\n"
	      "connections (docs/linkem.md).\n"
	      "  --listen ADDR:PORT   where clients connect (PORT 0: any free port; the\n"
	      "                       line 'linkem: listening on ADDR:PORT' tells which)\n"
	      "  --connect HOST:PORT  the upstream server\n"
	      "  --rate RATE          per direction: 25mbit, 1gbit, 500kbit, 10kbps, or a plain\n"
	      "                       number of bytes/s (0 or absent: unlimited)\n"
	      "  --delay DELAY        one-way delay per direction: 10ms, 500us, 1s, 0 (default 0)\n"
	      "  --buffer BYTES       per connection and direction (default 4M); when full,\n"
	      "                       linkem stops reading from that socket\n"
	      "SIGTERM or SIGINT: print 'linkem: up N bytes, down N bytes, N connections', exit 0.\n",
	      to);
}

struct opts {
	const char *listen, *connect;
	uint64_t rate, delay;
	size_t buffer;
};

static int bad_value(const char *opt, const char *val)
{
	say(stderr, "invalid %s '%s' (see --help)", opt, val);
	return -EINVAL;
}

/* 0: run; 1: --help shown; -EINVAL: one line printed. */
static int opts_parse(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "connect", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "delay", required_argument, NULL, 'd' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (struct opts){ .buffer = DEFAULT_BUFFER };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': o->listen = optarg; break;
		case 'c': o->connect = optarg; break;
		case 'r':
			if (parse_rate(optarg, &o->rate))
				return bad_value("--rate", optarg);
			break;
		case 'd':
			if (parse_delay(optarg, &o->delay))
				return bad_value("--delay", optarg);
			break;
		case 'b':
			if (parse_size(optarg, &o->buffer))
				return bad_value("--buffer", optarg);
			break;
		case 'h':
			usage(stdout);
			return 1;
		case ':':
			say(stderr, "%s needs a value (see --help)", argv[optind - 1]);
			return -EINVAL;
		default:
			say(stderr, "unknown option '%s' (see --help)", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		say(stderr, "unexpected argument '%s' (see --help)", argv[optind]);
		return -EINVAL;
	}
	if (!o->listen || !o->connect) {
		say(stderr, "--listen and --connect are required (see --help)");
		return -EINVAL;
	}
	return 0;

}

/* ------------------------------------------------------------------ the link */

static void link_init(struct link *l, uint64_t rate, uint64_t delay)
{
	*l = (struct link){ .rate = rate, .delay = delay, .seg = SEG_MAX };
	if (rate) {
		l->seg = rate * SEG_NS / NSEC;
		l->seg = l->seg < SEG_MIN ? SEG_MIN : l->seg > SEG_MAX ? SEG_MAX : l->seg;
	}
}

static int link_grow(struct link *l)
{
	size_t cap = l->q_cap ? l->q_cap * 2 : 1024, i;
	struct mark *q = malloc(cap * sizeof(*q));

	if (!q)
		return -ENOMEM;
	for (i = 0; i < l->q_len; i++)
		q[i] = l->q[(l->q_head + i) % l->q_cap];
	free(l->q);
	l->q = q;
	l->q_cap = cap;
	l->q_head = 0;
	return 0;
}

static int link_append(struct link *l, struct flow *f, uint32_t len, uint64_t due)
{
	if (l->q_len == l->q_cap && link_grow(l))
		return -ENOMEM;
	l->q[(l->q_head + l->q_len) % l->q_cap] = (struct mark){ f, len, due };
	l->q_len++;
	f->marks++;
	return 0;
}

/* n bytes of f arrived at now: serialize them behind everything queued before. */
static int link_send(struct link *l, struct flow *f, uint64_t n, uint64_t now)
{
	while (n) {
		uint64_t len = n < l->seg ? n : l->seg;

		if (l->rate)
			l->free_at = max_u64(now, l->free_at) + len * NSEC / l->rate;
		else
			l->free_at = max_u64(now, l->free_at);
		if (link_append(l, f, (uint32_t)len, l->free_at + l->delay))
			return -ENOMEM;
		n -= len;
	}
	return 0;
}

/* The end of f's stream: it follows the last byte, takes no link time. */
static int link_eof(struct link *l, struct flow *f, uint64_t now)
{
	return link_append(l, f, 0, max_u64(now, l->free_at) + l->delay);
}

static bool link_next(const struct link *l, uint64_t *due)
{
	if (!l->q_len)
		return false;
	*due = l->q[l->q_head].due;
	return true;
}

/* ------------------------------------------------------------------ connections */

static void conn_maybe_free(struct linkem *lk, struct conn *c)
{
	if (!c->dead || c->up.marks || c->down.marks || c->in_hs || c->in_grave)
		return;
	c->in_grave = true;
	c->grave_next = lk->grave;
	lk->grave = c;
}

static void grave_sweep(struct linkem *lk)
{
	while (lk->grave) {
		struct conn *c = lk->grave;

		lk->grave = c->grave_next;
		free(c);
	}
}

static void sock_close(struct sock *s, bool rst)
{
	if (s->fd < 0)
		return;
	if (rst) {
		struct linger lg = { .l_onoff = 1, .l_linger = 0 };

		setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(s->fd);
	s->fd = -1;
}

/* Close both sockets; rst: reset them (a reset on one side resets the pair). */
static void conn_close(struct linkem *lk, struct conn *c, bool rst)
{
	if (c->dead)
		return;
	c->dead = true;
	sock_close(&c->client, rst);
	sock_close(&c->upstream, rst);
	free(c->up.buf);
	free(c->down.buf);
	c->up.buf = c->down.buf = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		lk->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	conn_maybe_free(lk, c);
}

static void conn_try_activate(struct linkem *lk, struct conn *c)
{
	if (c->dead || c->active || !c->hs_done || c->connecting)
		return;
	c->active = true;
	flow_pull(lk, &c->up);
	flow_pull(lk, &c->down);
}

static void conn_connect_failed(struct linkem *lk, struct conn *c, int err)
{
	lk->nfailed++;
	say(stderr, "connect %s: %s", lk->up_name, strerror(err));
	conn_close(lk, c, false);
}

static int sock_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return errno;
	return err;
}

static void flow_init(struct flow *f, struct conn *c, struct link *l, struct sock *src,
		      struct sock *dst)
{
	f->conn = c;
	f->link = l;
	f->src = src;
	f->dst = dst;
	src->in = f;
	dst->out = f;
}

static int epoll_add(struct linkem *lk, struct sock *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	return epoll_ctl(lk->epfd, EPOLL_CTL_ADD, s->fd, &ev) ? -errno : 0;
}

/* Set up the connection of an accepted client: upstream connect, handshake timer. */
static int conn_setup(struct linkem *lk, struct conn *c, int cfd)
{
	static const int one = 1;
	int ufd;

	c->client = (struct sock){ .kind = SK_PEER, .fd = cfd, .conn = c, .writable = true };
	c->upstream = (struct sock){ .kind = SK_PEER, .fd = -1, .conn = c };
	flow_init(&c->up, c, &lk->up, &c->client, &c->upstream);
	flow_init(&c->down, c, &lk->down, &c->upstream, &c->client);
	c->up.cap = c->down.cap = lk->buffer;
	c->up.buf = malloc(lk->buffer);
	c->down.buf = malloc(lk->buffer);
	if (!c->up.buf || !c->down.buf)
		return -ENOMEM;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ufd = socket(lk->up_addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (ufd < 0)
		return -errno;
	c->upstream.fd = ufd;
	setsockopt(ufd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (epoll_add(lk, &c->client, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) ||
	    epoll_add(lk, &c->upstream, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET))
		return -errno;
	return 0;
}

static void conn_new(struct linkem *lk, int cfd)
{
	struct conn *c = calloc(1, sizeof(*c));
	int err;

	lk->nconns++;
	if (!c) {
		say(stderr, "out of memory for a connection");
		close(cfd);
		return;
	}
	c->next = lk->conns;
	if (lk->conns)
		lk->conns->prev = c;
	lk->conns = c;
	/* the client could send its first byte one round trip after its SYN */
	c->active_at = now_ns() + 2 * lk->up.delay;
	c->in_hs = true;
	if (lk->hs_tail)
		lk->hs_tail->hs_next = c;
	else
		lk->hs_head = c;
	lk->hs_tail = c;
	err = conn_setup(lk, c, cfd);
	if (err) {
		say(stderr, "new connection: %s", strerror(-err));
		conn_close(lk, c, true);
		return;
	}
	c->connecting = true;
	if (connect(c->upstream.fd, (struct sockaddr *)&lk->up_addr, lk->up_len) == 0) {
		c->connecting = false;
		c->upstream.writable = true;
	} else if (errno != EINPROGRESS) {
		conn_connect_failed(lk, c, errno);
	}
}

static void hs_run(struct linkem *lk, uint64_t now)
{
	while (lk->hs_head && lk->hs_head->active_at <= now) {
		struct conn *c = lk->hs_head;

		lk->hs_head = c->hs_next;
		if (!lk->hs_head)
			lk->hs_tail = NULL;
		c->in_hs = false;
		c->hs_done = true;
		conn_try_activate(lk, c);
		conn_maybe_free(lk, c);
	}
}

/* ------------------------------------------------------------------ data path */

static size_t ring_iov(const struct flow *f, uint64_t pos, size_t n, struct iovec iov[2])
{
	size_t off = pos % f->cap, first = f->cap - off < n ? f->cap - off : n;

	iov[0] = (struct iovec){ f->buf + off, first };
	iov[1] = (struct iovec){ f->buf, n - first };
	return n - first ? 2 : 1;
}

/* Read from f's source while it has data and the ring has room; queue it on the link. */
static void flow_pull(struct linkem *lk, struct flow *f)
{
	struct conn *c = f->conn;

	while (!c->dead && c->active && f->src->readable && !f->eof_read) {
		size_t room = f->cap - (size_t)(f->rcvd - f->sent);
		struct iovec iov[2];
		ssize_t n;
		int cnt;

		if (!room)
			return;
		cnt = (int)ring_iov(f, f->rcvd, room < READ_MAX ? room : READ_MAX, iov);
		n = readv(f->src->fd, iov, cnt);
		if (n > 0) {
			f->rcvd += (uint64_t)n;
			if (link_send(f->link, f, (uint64_t)n, now_ns()))
				goto nomem;
		} else if (n == 0) {
			f->eof_read = true;
			if (link_eof(f->link, f, now_ns()))
				goto nomem;
		} else if (errno == EAGAIN) {
			f->src->readable = false;
		} else if (errno != EINTR) {
			conn_close(lk, c, true);
		}
	}
	return;
nomem:
	say(stderr, "out of memory for the link queue");
	conn_close(lk, c, true);
}

/* Write what has left the link to f's destination; forward the end of stream. */
static void flow_push(struct linkem *lk, struct flow *f)
{
	struct conn *c = f->conn;
	bool freed = false;

	while (!c->dead && f->dst->writable && f->arrived > f->sent) {
		struct msghdr msg = { 0 };
		struct iovec iov[2];
		ssize_t n;

		msg.msg_iov = iov;
		msg.msg_iovlen = ring_iov(f, f->sent, (size_t)(f->arrived - f->sent), iov);
		n = sendmsg(f->dst->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			f->sent += (uint64_t)n;
			f->link->bytes += (uint64_t)n;
			freed = true;
		} else if (errno == EAGAIN) {
			f->dst->writable = false;
		} else if (errno != EINTR) {
			conn_close(lk, c, true);
		}
	}
	if (c->dead)
		return;
	if (f->eof_arrived && !f->shut && f->sent == f->rcvd) {
		shutdown(f->dst->fd, SHUT_WR);
		f->shut = true;
		if (c->up.shut && c->down.shut) {
			conn_close(lk, c, false);
			return;
		}
	}
	if (freed)
		flow_pull(lk, f);
}

/* Deliver every mark of l that is due; write each flow once per run of its marks. */
static void link_run(struct linkem *lk, struct link *l, uint64_t now)
{
	struct flow *last = NULL;

	while (l->q_len && l->q[l->q_head].due <= now) {
		struct mark m = l->q[l->q_head];
		struct flow *f = m.flow;

		l->q_head = (l->q_head + 1) % l->q_cap;
		l->q_len--;
		f->marks--;
		if (f->conn->dead) {
			conn_maybe_free(lk, f->conn);
			continue;
		}
		if (m.len)
			f->arrived += m.len;
		else
			f->eof_arrived = true;
		if (last && last != f)
			flow_push(lk, last);
		last = f;
	}
	if (last) {
		flow_push(lk, last);
		conn_maybe_free(lk, last->conn);
	}
}

/* Forget every mark of l (at exit, all connections closed). */
static void link_drop(struct linkem *lk, struct link *l)
{
	while (l->q_len) {
		struct flow *f = l->q[l->q_head].flow;

		l->q_head = (l->q_head + 1) % l->q_cap;
		l->q_len--;
		f->marks--;
		conn_maybe_free(lk, f->conn);
	}
}

/* ------------------------------------------------------------------ events */

static void accept_all(struct linkem *lk)
{
	for (;;) {
		int fd = accept4(lk->lsock.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			conn_new(lk, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN)
			say(stderr, "accept: %s", strerror(errno));
		return;
	}
}

static void peer_event(struct linkem *lk, struct sock *s, uint32_t ev)
{
	struct conn *c = s->conn;
	int err;

	if (c->dead)
		return;
	if (s == &c->upstream && c->connecting) {
		if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		err = sock_error(s->fd);
		if (err || (ev & EPOLLHUP)) {
			conn_connect_failed(lk, c, err ? err : ECONNREFUSED);
			return;
		}
		c->connecting = false;
		conn_try_activate(lk, c);
	}
	if (ev & EPOLLERR) {
		err = sock_error(s->fd);
		if (err) {
			conn_close(lk, c, true);
			return;
		}
	}
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) {
		s->readable = true;
		flow_pull(lk, s->in);
	}
	if (!c->dead && (ev & EPOLLOUT)) {
		s->writable = true;
		flow_push(lk, s->out);
	}
}

static void signal_event(struct linkem *lk)
{
	struct signalfd_siginfo si;

	while (read(lk->ssock.fd, &si, sizeof(si)) == sizeof(si))
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT)
			lk->stop = true;
}

/* The earliest due mark or handshake end; false when nothing is waiting. */
static bool next_deadline(const struct linkem *lk, uint64_t *t)
{
	uint64_t d;
	bool any = false;

	if (link_next(&lk->up, &d)) {
		*t = d;
		any = true;
	}
	if (link_next(&lk->down, &d) && (!any || d < *t)) {
		*t = d;
		any = true;
	}
	if (lk->hs_head && (!any || lk->hs_head->active_at < *t)) {
		*t = lk->hs_head->active_at;
		any = true;
	}
	return any;
}

static int loop(struct linkem *lk)
{
	struct epoll_event evs[MAX_EVENTS];

	while (!lk->stop) {
		struct timespec ts, *tmo = NULL;
		uint64_t t, now;
		int i, n;

		grave_sweep(lk);
		if (next_deadline(lk, &t)) {
			now = now_ns();
			t = t > now ? t - now : 0;
			ts = (struct timespec){ (time_t)(t / NSEC), (long)(t % NSEC) };
			tmo = &ts;
		}
		n = epoll_pwait2(lk->epfd, evs, MAX_EVENTS, tmo, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			say(stderr, "epoll_wait: %s", strerror(errno));
			return -errno;
		}
		for (i = 0; i < n; i++) {
			struct sock *s = evs[i].data.ptr;

			if (s->kind == SK_LISTEN)
				accept_all(lk);
			else if (s->kind == SK_SIGNAL)
				signal_event(lk);
			else
				peer_event(lk, s, evs[i].events);
		}
		now = now_ns();
		hs_run(lk, now);
		link_run(lk, &lk->up, now);
		link_run(lk, &lk->down, now);
	}
	return 0;
}

/* ------------------------------------------------------------------ set-up */

static void print_listening(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN];

	getsockname(fd, (struct sockaddr *)&ss, &len);
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		printf("linkem: listening on [%s]:%u\n", host, ntohs(a->sin6_port));
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		printf("linkem: listening on %s:%u\n", host, ntohs(a->sin_port));
	}
	fflush(stdout);
}

static int listen_on(struct linkem *lk, const char *arg)
{
	static const int one = 1;
	struct sockaddr_storage ss;
	const char *why;
	socklen_t len;
	int fd;

	if (parse_hostport(arg, true, &ss, &len, &why)) {
		say(stderr, "--listen %s: %s", arg, why);
		return -EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 1024)) {
		say(stderr, "--listen %s: %s", arg, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	lk->lsock = (struct sock){ .kind = SK_LISTEN, .fd = fd };
	return epoll_add(lk, &lk->lsock, EPOLLIN);
}

static int signals_setup(struct linkem *lk)
{
	sigset_t set;
	int fd;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	lk->ssock = (struct sock){ .kind = SK_SIGNAL, .fd = fd };
	return epoll_add(lk, &lk->ssock, EPOLLIN);
}

static void linkem_teardown(struct linkem *lk)
{
	close(lk->lsock.fd);
	close(lk->ssock.fd);
	while (lk->conns)
		conn_close(lk, lk->conns, false);
	/* the link FIFOs and the handshake queue may still name closed connections */
	link_drop(lk, &lk->up);
	link_drop(lk, &lk->down);
	while (lk->hs_head) {
		struct conn *c = lk->hs_head;

		lk->hs_head = c->hs_next;
		c->in_hs = false;
		conn_maybe_free(lk, c);
	}
	grave_sweep(lk);
	free(lk->up.q);
	free(lk->down.q);
	close(lk->epfd);
}

int main(int argc, char **argv)
{
	struct linkem lk = { .epfd = -1 };
	struct opts o;
	const char *why;
	int err;

	err = opts_parse(argc, argv, &o);
	if (err)
		return err > 0 ? 0 : 2;
	if (parse_hostport(o.connect, false, &lk.up_addr, &lk.up_len, &why)) {
		say(stderr, "--connect %s: %s", o.connect, why);
		return 2;
	}
	lk.up_name = o.connect;
	lk.buffer = o.buffer;
	link_init(&lk.up, o.rate, o.delay);
	link_init(&lk.down, o.rate, o.delay);
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

	lk.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (lk.epfd < 0 || signals_setup(&lk)) {
		say(stderr, "set-up: %s", strerror(errno));
		return 1;
	}
	err = listen_on(&lk, o.listen);
	if (err)
		return err == -EINVAL ? 2 : 1;
	print_listening(lk.lsock.fd);
	err = loop(&lk);
	if (lk.nfailed)
		printf("linkem: %llu upstream connects failed\n", (unsigned long long)lk.nfailed);
	printf("linkem: up %llu bytes, down %llu bytes, %llu connections\n",
	       (unsigned long long)lk.up.bytes, (unsigned long long)lk.down.bytes,
	       (unsigned long long)lk.nconns);
	fflush(stdout);
	linkem_teardown(&lk);
	return err ? 1 : 0;
}
