/* SPDX-License-Identifier: MIT */
/*
 * lazyblk serve: a layout as a live disk (or, with --raw, a plain file as it is) over NBD
 * and/or vhost-user-blk until SIGINT/SIGTERM; statistics on SIGUSR1 and at exit. Both kinds
 * of disk are a struct disk (blkd/disk/disk.h) that the servers take. Signals are blocked
 * in every thread and taken by one thread with sigwait(), so nothing runs in a signal
 * handler.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../blkd/disk/disk.h"
#include "../blkd/transport/control.h"
#include "../blkd/transport/nbd.h"
#include "../blkd/transport/vhost_user.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"
#include "confine_opts.h"
#include "daemon.h"
#include "serve_usage.h"

enum { O_OVERLAY = 256, O_RO, O_MEM, O_NBD, O_NAME, O_JSON, O_VHOST, O_CONTROL, O_MANIFEST,
       O_RAW, O_NO_CHECK, O_PIDFILE, O_EXIT_PARENT, O_RUN, O_MAXCONN, O_HSTIME, O_IDLE,
       O_USER, O_SECCOMP };

struct serve_args {
	struct disk_spec ds;       /* the disk: the image (its layout, store, ...) or --raw */
	struct nbd_server_opts no;
	const char *nbd, *stats_json, *vhost_user, *control;
	const char *raw;           /* --raw FILE */
	const char *image_opt;     /* the first option that needs a layout (refused with --raw) */
	const char *pidfile, *run; /* --pidfile FILE, --run CMD */
	bool exit_with_parent;
	pid_t ppid;                /* the parent at the start (--exit-with-parent) */
	struct cli_remote rem;
	struct cli_image img;      /* IMAGE by reference: fetched */
	const char *layout;        /* IMAGE.layout, or the fetched one */
	struct cli_trace tr;
	struct cli_confine cf;     /* --user, --seccomp */
	char host[256];
	char run_dir[80];          /* --run without --nbd: the private socket's directory */
	char run_nbd[96];          /* and its --nbd unix:PATH */
};

struct banner;

struct sig_ctx {
	struct disk disk;          /* disk_open's: the lazy image, or the --raw FILE */
	struct serve_args *a;
	sigset_t set;
	volatile sig_atomic_t stop;
	pthread_t sig_thread;
	int ready_left;            /* servers not listening yet (atomic); 0: ready */
	const struct banner *nbd_banner;
	int pid_fd;                /* --pidfile, locked; -1: none */
	pthread_mutex_t run_lock;  /* run_pid, run_status */
	pid_t run_pid;             /* --run's command while it runs, else 0 */
	int run_status;            /* its exit status once it ended, else -1 */
	bool failed;               /* getting ready failed (said why): stopping */
	pthread_mutex_t gate_lock; /* with --user/--seccomp, the servers that listen first wait */
	pthread_cond_t gate_cond;  /* for the confinement (or the stop) before they accept */
	bool gate_open;
};

/*
 * "serving ..." on stdout once a server's socket accepts connections: a readiness signal.
 * NBD's names the port bound (tcp:0: the kernel's pick) and ends with the NBD URI.
 */
struct banner {
	const char *layout, *how, *where;  /* layout: the IMAGE.layout or the --raw FILE */
	char size[32];
	bool read_only;
	const struct serve_args *nbd;      /* NBD: where it listens; port: the port bound */
	unsigned short port;
	struct sig_ctx *sc;
};

/* s percent-encoded for a URI, but for RFC 3986's unreserved characters and '/'. */
static void uri_put(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || strchr("-._~/", c))
			fputc(c, f);
		else
			fprintf(f, "%%%02X", c);
	}
}

/* nbd://HOST:PORT/NAME or nbd+unix:///NAME?socket=PATH */
static void nbd_uri_put(FILE *f, const struct banner *b)
{
	const struct serve_args *a = b->nbd;
	const char *name = a->no.export_name ? a->no.export_name : "";
	const char *host = a->no.tcp_host ? a->no.tcp_host : "127.0.0.1";

	if (a->no.unix_path) {
		fputs("nbd+unix:///", f);
		uri_put(f, name);
		fputs("?socket=", f);
		uri_put(f, a->no.unix_path);
		return;
	}
	fprintf(f, "nbd://%s%s%s:%u/", strchr(host, ':') ? "[" : "", host,
		strchr(host, ':') ? "]" : "", b->port);
	uri_put(f, name);
}

/* " on WHERE at URI": the spec as given, with the port bound in place of the one asked for */
static void nbd_where_print(const struct banner *b)
{
	const struct serve_args *a = b->nbd;

	if (a->no.unix_path)
		printf(" on %s at ", a->nbd);
	else
		printf(" on %.*s%u at ", (int)(a->no.tcp_port - a->nbd), a->nbd, b->port);
	nbd_uri_put(stdout, b);
}

static void serve_ready(const struct banner *b);

/* No connection is taken before the confinement: the servers wait here until it is done. */
static void gate_wait(struct sig_ctx *sc)
{
	pthread_mutex_lock(&sc->gate_lock);
	while (!sc->gate_open)
		pthread_cond_wait(&sc->gate_cond, &sc->gate_lock);
	pthread_mutex_unlock(&sc->gate_lock);
}

static void gate_release(struct sig_ctx *sc)
{
	pthread_mutex_lock(&sc->gate_lock);
	sc->gate_open = true;
	pthread_cond_broadcast(&sc->gate_cond);
	pthread_mutex_unlock(&sc->gate_lock);
}

static void banner_print(void *arg)
{
	const struct banner *b = arg;

	/* each server says it on its own thread: one whole line at a time */
	flockfile(stdout);
	printf("serving %s (%s%s) over %s", b->layout, b->size,
	       b->read_only ? ", read-only" : "", b->how);
	if (b->nbd)
		nbd_where_print(b);
	else
		printf(" on %s", b->where);
	putchar('\n');
	fflush(stdout);
	funlockfile(stdout);
	if (b->sc && !__atomic_sub_fetch(&b->sc->ready_left, 1, __ATOMIC_ACQ_REL))
		serve_ready(b);
	else if (b->sc && (b->sc->a->cf.drop || b->sc->a->cf.seccomp))
		gate_wait(b->sc);
}

/* "NAME=VALUE", malloc'ed (NULL: out of memory). */
static char *env_var(const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 2;
	char *v = malloc(n);

	if (v)
		snprintf(v, n, "%s=%s", name, value);
	return v;
}

/* --run: the command, with nbdkit's variables: uri, nbd, exportname, unixsocket or port. */
static int run_start(struct sig_ctx *sc)
{
	const struct serve_args *a = sc->a;
	const struct banner *b = sc->nbd_banner;
	char *uri = NULL, *env[6] = { 0 }, port[8];
	size_t ulen, n = 0;
	FILE *f = open_memstream(&uri, &ulen);
	int ret = 1;

	if (f) {
		nbd_uri_put(f, b);
		if (fclose(f))
			uri = NULL; /* freed below either way */
	}
	snprintf(port, sizeof(port), "%u", b->port);
	if (uri) {
		env[n++] = env_var("uri", uri);
		env[n++] = env_var("nbd", uri);
		env[n++] = env_var("exportname", a->no.export_name ? a->no.export_name : "");
		env[n++] = a->no.unix_path ? env_var("unixsocket", a->no.unix_path)
					   : env_var("port", port);
	}
	if (!uri || !env[0] || !env[1] || !env[2] || !env[3]) {
		log_error("--run: out of memory");
	} else {
		pthread_mutex_lock(&sc->run_lock);
		ret = daemon_run_spawn(a->run, env, &sc->run_pid);
		pthread_mutex_unlock(&sc->run_lock);
	}
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	free(uri);
	return ret;
}

/*
 * --user: become USER, who must be able to write the store (with --remote: the chunks it
 * fetches), the directories of the files written at exit; the parent-death signal, which
 * the switch clears, is asked for again. 0, or 1 (said why).
 */
static int serve_drop_user(struct serve_args *a)
{
	char d1[PATH_MAX], d2[PATH_MAX];
	const struct cli_confine_dir dirs[] = {
		{ a->rem.url ? a->ds.tiers.store_dir : NULL, CLI_CONFINE_STORE_DEPTH },
		{ a->stats_json ? cli_confine_parent(a->stats_json, d1, sizeof(d1)) : NULL, 0 },
		{ a->tr.record ? cli_confine_parent(a->tr.record, d2, sizeof(d2)) : NULL, 0 },
	};

	/* --run's private socket (in a directory of USER's): the command, run as USER, connects */
	if (a->cf.drop && a->run_dir[0] && chown(a->run_nbd + 5, a->cf.user.uid, a->cf.user.gid)) {
		log_error("--run: %s: %s", a->run_nbd + 5, strerror(errno));
		return 1;
	}
	if (cli_confine_drop(&a->cf, dirs, 3))
		return 1;
	return a->cf.drop && a->exit_with_parent ? daemon_exit_with_parent(a->ppid) : 0;
}

/*
 * Every server listens: the pid file, --user, --run's command (as USER, unfiltered), the
 * seccomp filter, then the servers may take connections, and READY=1 to systemd.
 */
static void serve_ready(const struct banner *b)
{
	struct sig_ctx *sc = b->sc;
	char msg[PATH_MAX + 64];

	if ((sc->pid_fd >= 0 && daemon_pidfile_write(sc->a->pidfile, sc->pid_fd)) ||
	    serve_drop_user(sc->a) || (sc->a->run && run_start(sc)) ||
	    cli_confine_filter(&sc->a->cf, 0)) {
		__atomic_store_n(&sc->failed, true, __ATOMIC_RELAXED);
		__atomic_store_n(&sc->stop, 1, __ATOMIC_RELAXED); /* before any connection */
		gate_release(sc);
		pthread_kill(sc->sig_thread, SIGTERM); /* said why: stop */
		return;
	}
	gate_release(sc);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving %s (%s)", b->layout, b->size);
	daemon_notify(msg);
}

/* --run's command ended? (wait: wait for it.) Then its status is kept: true. */
static bool run_reap(struct sig_ctx *sc, bool wait)
{
	bool done = false;
	int st;

	pthread_mutex_lock(&sc->run_lock);
	if (sc->run_pid > 0 && waitpid(sc->run_pid, &st, wait ? 0 : WNOHANG) == sc->run_pid) {
		sc->run_status = daemon_exit_status(st);
		sc->run_pid = 0;
		done = true;
	}
	pthread_mutex_unlock(&sc->run_lock);
	return done;
}

/* The vhost-user server, in its own thread when NBD is served as well. */
struct vu_ctx {
	struct vhost_user_dev *dev;
	const char *path;
	struct sig_ctx *sc;
	pthread_t sig_thread;
	struct banner banner;
	int ret;
};

static void *vu_main(void *arg)
{
	struct vu_ctx *v = arg;

	v->ret = vhost_user_serve(v->dev, v->path, &v->sc->stop, banner_print, &v->banner);
	if (v->ret && !__atomic_load_n(&v->sc->stop, __ATOMIC_RELAXED))
		pthread_kill(v->sig_thread, SIGTERM); /* it failed: stop the NBD server too */
	return NULL;
}

/* Run the servers asked for until a signal stops them; 0, or non-zero if one failed. */
static int servers_run(struct serve_args *a, struct sig_ctx *sc, struct vu_ctx *v)
{
	pthread_t t;
	int ret;

	if (!a->nbd) {
		vu_main(v);
		return v->ret;
	}
	if (!a->vhost_user)
		return nbd_serve(&sc->disk, &a->no, &sc->stop);
	if (pthread_create(&t, NULL, vu_main, v)) {
		log_error("cannot start the vhost-user thread");
		return -EAGAIN;
	}
	ret = nbd_serve(&sc->disk, &a->no, &sc->stop);
	if (ret && !__atomic_load_n(&sc->stop, __ATOMIC_RELAXED))
		pthread_kill(v->sig_thread, SIGTERM);
	pthread_join(t, NULL);
	return ret ? ret : v->ret;
}

/* A TCP port: decimal, 0 (any free one) to 65535. */
static int port_check(const char *p)
{
	size_t n = strspn(p, "0123456789");

	if (!n || p[n] || n > 5 || strtoul(p, NULL, 10) > 65535)
		return -EINVAL;
	return 0;
}

/* --max-connections, --handshake-timeout, --idle-timeout: 0, or EXIT_USAGE (said why). */
static int nbd_limit_option(struct nbd_server_opts *no, int c, const char *arg)
{
	static const struct { int c; const char *name, *what; unsigned min, max; } lim[] = {
		{ O_MAXCONN, "--max-connections", "", 1, NBD_MAX_CONNS },
		{ O_HSTIME, "--handshake-timeout", " seconds", 1, NBD_MAX_HANDSHAKE_S },
		{ O_IDLE, "--idle-timeout", " seconds", 0, NBD_MAX_IDLE_S },
	};
	unsigned i = c == O_MAXCONN ? 0 : c == O_HSTIME ? 1 : 2;
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v < lim[i].min || v > lim[i].max)
		return cli_usage_error("bad %s '%s' (%u to %u%s)", lim[i].name, arg, lim[i].min,
				       lim[i].max, lim[i].what);
	if (c == O_MAXCONN)
		no->max_conns = (unsigned)v;
	else if (c == O_HSTIME)
		no->handshake_s = (unsigned)v;
	else
		no->idle_s = (unsigned)v;
	return 0;
}

/* "unix:PATH", "tcp:HOST:PORT", "tcp:PORT", "tcp:[v6addr]:PORT". */
static int parse_nbd(struct serve_args *a)
{
	const char *s = a->nbd, *colon;
	size_t hl;

	if (!strncmp(s, "unix:", 5) && s[5]) {
		a->no.unix_path = s + 5;
		return 0;
	}
	if (strncmp(s, "tcp:", 4) || !s[4])
		return -EINVAL;
	s += 4;
	colon = strrchr(s, ':');
	a->no.tcp_port = colon ? colon + 1 : s;
	if (port_check(a->no.tcp_port))
		return -EINVAL;
	if (!colon)
		return 0;
	hl = (size_t)(colon - s);
	if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
		s++;
		hl -= 2;
	}
	if (!*a->no.tcp_port || hl >= sizeof(a->host))
		return -EINVAL;
	memcpy(a->host, s, hl);
	a->host[hl] = '\0';
	a->no.tcp_host = hl ? a->host : NULL;
	return 0;
}

static void *sig_main(void *arg)
{
	struct sig_ctx *c = arg;
	int sig;

	for (;;) {
		if (sigwait(&c->set, &sig))
			continue;
		if (sig == SIGUSR1) {
			disk_stats(&c->disk, stdout, false);
			fflush(stdout);
			continue;
		}
		if (sig == SIGCHLD && !run_reap(c, false))
			continue;
		__atomic_store_n(&c->stop, 1, __ATOMIC_RELAXED);
		gate_release(c); /* a server waiting for the others: it stops too */
		return NULL;
	}
}

/* The disk to serve (disk_open): the --raw FILE, or the layout's image. 0, or 1 (said why). */
static int serve_disk_open(struct serve_args *a, const char *what, struct sig_ctx *sc)
{
	char why[PATH_MAX + 256];
	int ret;

	if (a->raw)
		a->ds.raw_path = what;
	else
		a->ds.layout_path = what;
	a->ds.notes = CLI_NOTES;
	ret = disk_open(&a->ds, &sc->disk, why, sizeof(why));
	if (a->raw && (ret == -EACCES || ret == -EROFS || ret == -EPERM))
		log_error("%s (serve it with --read-only?)", why);
	else if (ret)
		cli_fail(ret, why);
	return ret ? 1 : 0;
}

static void disk_done(struct sig_ctx *sc)
{
	disk_close(&sc->disk);
}

/* The servers' "serving" lines, and the vhost-user device. 0, or -errno (said why). */
static int servers_prepare(struct serve_args *a, const char *what, struct sig_ctx *sc,
			   struct vu_ctx *vu, struct banner *nb)
{
	char h[32];
	int ret;

	if (a->vhost_user) {
		ret = vhost_user_dev_new(&sc->disk, 0, "lazyblk", &vu->dev);
		if (ret) {
			log_error("--vhost-user: %s", strerror(-ret));
			return ret;
		}
	}
	size_human(sc->disk.size, h, sizeof(h));
	*nb = (struct banner){ .layout = what, .how = "NBD", .where = a->nbd, .nbd = a,
			       .read_only = a->no.read_only || sc->disk.read_only, .sc = sc };
	snprintf(nb->size, sizeof(nb->size), "%s", h);
	a->no.on_listen = banner_print;
	a->no.on_listen_arg = nb;
	a->no.tcp_bound_port = &nb->port;
	vu->banner = (struct banner){ .layout = what, .how = "vhost-user", .where = a->vhost_user,
				      .read_only = sc->disk.read_only, .sc = sc };
	snprintf(vu->banner.size, sizeof(vu->banner.size), "%s", h);
	sc->nbd_banner = nb;
	sc->ready_left = !!a->nbd + !!a->vhost_user;
	return 0;
}

/* After the servers stopped: flush, the trace, statistics. 0, or 1 if any failed. */
static int serve_finish(struct serve_args *a, struct sig_ctx *sc)
{
	int ret, rc = 0;

	ret = disk_flush(&sc->disk);
	if (ret) {
		log_error("flush: %s", strerror(-ret));
		rc = 1;
	}
	if (cli_trace_finish(&a->tr, &sc->disk))
		rc = 1;
	disk_stats(&sc->disk, stdout, false);
	fflush(stdout);
	if (a->stats_json && cli_write_stats_json(&sc->disk, a->stats_json))
		rc = 1;
	return rc;
}

/*
 * Before anything else: signals blocked (before any thread exists, so that every thread
 * inherits the mask), the pid file locked, the parent watched. 0, or 1 (said why).
 */
static int serve_start(struct serve_args *a, struct sig_ctx *sc)
{
	sigemptyset(&sc->set);
	sigaddset(&sc->set, SIGINT);
	sigaddset(&sc->set, SIGTERM);
	sigaddset(&sc->set, SIGUSR1);
	sigaddset(&sc->set, SIGCHLD); /* --run's command ended */
	pthread_sigmask(SIG_BLOCK, &sc->set, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the server */
	sc->a = a;
	sc->pid_fd = -1;
	sc->run_status = -1;
	sc->ready_left = -1; /* set when the servers are known */
	pthread_mutex_init(&sc->run_lock, NULL);
	pthread_mutex_init(&sc->gate_lock, NULL);
	pthread_cond_init(&sc->gate_cond, NULL);
	if (a->pidfile && daemon_pidfile_lock(a->pidfile, &sc->pid_fd))
		return 1;
	if (a->exit_with_parent && daemon_exit_with_parent(a->ppid))
		return 1;
	return 0;
}

/* The exit status: --run's command's, unless serving failed; then 1. */
static int serve_end(struct serve_args *a, struct sig_ctx *sc, int rc)
{
	pid_t pid;

	pthread_mutex_lock(&sc->run_lock);
	pid = sc->run_pid;
	pthread_mutex_unlock(&sc->run_lock);
	if (pid > 0) { /* stopped by a signal while it runs: it goes too */
		kill(pid, SIGTERM);
		run_reap(sc, true);
	}
	daemon_pidfile_remove(a->pidfile, sc->pid_fd);
	pthread_mutex_destroy(&sc->run_lock);
	pthread_mutex_destroy(&sc->gate_lock);
	pthread_cond_destroy(&sc->gate_cond);
	if (__atomic_load_n(&sc->failed, __ATOMIC_RELAXED))
		return 1;
	if (sc->run_status >= 0)
		return rc && !sc->run_status ? 1 : sc->run_status;
	return rc;
}

/* what: the IMAGE.layout, or the --raw FILE. */
static int serve_run(struct serve_args *a, const char *what)
{
	struct sig_ctx sc = { 0 };
	struct vu_ctx vu = { .path = a->vhost_user, .sc = &sc };
	struct blkd_control *ctl = NULL;
	struct banner nbd_banner;
	int ret, rc;

	if (serve_start(a, &sc) || serve_disk_open(a, what, &sc))
		return serve_end(a, &sc, 1);
	if (a->control && blkd_control_start(&sc.disk, NULL, a->control, &ctl)) {
		disk_done(&sc); /* it said why */
		return serve_end(a, &sc, 1);
	}
	if (pthread_create(&sc.sig_thread, NULL, sig_main, &sc)) {
		log_error("cannot start the signal thread");
		blkd_control_stop(ctl);
		disk_done(&sc);
		return serve_end(a, &sc, 1);
	}
	vu.sig_thread = sc.sig_thread;
	ret = servers_prepare(a, what, &sc, &vu, &nbd_banner);
	if (!ret)
		ret = servers_run(a, &sc, &vu);
	if (__atomic_load_n(&sc.ready_left, __ATOMIC_ACQUIRE) == 0)
		daemon_notify("STOPPING=1");
	if (!__atomic_load_n(&sc.stop, __ATOMIC_RELAXED))
		pthread_kill(sc.sig_thread, SIGTERM); /* a server failed: end the signal thread */
	pthread_join(sc.sig_thread, NULL);
	vhost_user_dev_free(vu.dev);
	blkd_control_stop(ctl); /* a snapshot under way completes first */
	rc = ret ? 1 : serve_finish(a, &sc); /* a server that failed said why; nothing served */
	disk_done(&sc);
	return serve_end(a, &sc, rc);
}

/* Options that need a layout (refused with --raw): all but --read-only and the servers'. */
static bool image_only(int c)
{
	switch (c) {
	case O_RO: case O_NBD: case O_NAME: case O_JSON: case O_VHOST: case O_CONTROL: case O_RAW:
	case O_PIDFILE: case O_EXIT_PARENT: case O_RUN: case O_USER: case O_SECCOMP:
	case 'h': case '?': case ':':
	case O_MAXCONN: case O_HSTIME: case O_IDLE:
	CLI_LOG_CASES:
		return false;
	default:
		return true;
	}
}

/*
 * --run without --nbd: NBD on a private unix socket, in a directory of its own made here
 * (removed at exit). 0, or 1 (said why).
 */
static int run_socket(struct serve_args *a)
{
	const char *tmp = getenv("TMPDIR");

	if (!tmp || !*tmp || strlen(tmp) > sizeof(a->run_dir) - 16)
		tmp = "/tmp";
	snprintf(a->run_dir, sizeof(a->run_dir), "%s/lazyblk-XXXXXX", tmp);
	if (!mkdtemp(a->run_dir)) {
		log_error("--run: cannot make a directory in %s for the NBD socket: %s", tmp,
			  strerror(errno));
		a->run_dir[0] = '\0';
		return 1;
	}
	/* --user: the server removes the socket and the directory at exit as USER */
	if (a->cf.drop && chown(a->run_dir, a->cf.user.uid, a->cf.user.gid)) {
		log_error("--run: %s: %s", a->run_dir, strerror(errno));
		rmdir(a->run_dir);
		a->run_dir[0] = '\0';
		return 1;
	}
	snprintf(a->run_nbd, sizeof(a->run_nbd), "unix:%s/nbd.sock", a->run_dir);
	a->nbd = a->run_nbd;
	return 0;
}

/* After parsing: the combination makes sense. 0, or EXIT_USAGE (said why), or 1. */
static int serve_check(struct serve_args *a, int argc, char **argv)
{
	if (a->raw) {
		if (optind < argc)
			return cli_usage_error("unexpected argument '%s' (--raw FILE is the disk: no "
					       "IMAGE.layout)", argv[optind]);
		if (!*a->raw)
			return cli_usage_error("bad --raw '' (want a disk file)");
		if (a->image_opt)
			return cli_usage_error("--%s does not go with --raw (a raw file is served as "
					       "it is: no store, overlay, remote or traces)",
					       a->image_opt);
	} else {
		if (optind >= argc)
			return cli_usage_error("missing IMAGE.layout (see lazyblk serve --help)");
		if (optind + 1 < argc)
			return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
		if (!a->ds.tiers.store_dir)
			return cli_usage_error("missing --store DIR");
		if (cli_image_resolve(argv[optind], a->ds.tiers.store_dir, &a->rem, &a->img,
				      &a->layout))
			return 1;
		a->ds.layout_fetched = a->img.f != NULL;
		if (cli_remote_check(&a->rem))
			return EXIT_USAGE;
		cli_remote_to_source(&a->rem, &a->ds.tiers);
	}
	if (a->run && !*a->run)
		return cli_usage_error("bad --run '' (want a shell command)");
	if (a->run && !a->nbd && a->vhost_user)
		return cli_usage_error("--run needs an NBD export: add --nbd (a vhost-user socket "
				       "has no URI to give the command)");
	if (a->run && !a->nbd && run_socket(a))
		return 1;
	if (!a->nbd && !a->vhost_user)
		return cli_usage_error("missing --nbd unix:PATH, --nbd tcp:HOST:PORT or "
				       "--vhost-user PATH");
	if (a->vhost_user && !*a->vhost_user)
		return cli_usage_error("bad --vhost-user '' (want a socket path)");
	if (a->nbd && parse_nbd(a))
		return cli_usage_error("bad --nbd '%s' (want unix:PATH or tcp:HOST:PORT, "
				       "PORT 0 to 65535)", a->nbd);
	if (!a->raw && cli_trace_to_spec(&a->tr, a->layout, &a->ds))
		return EXIT_USAGE;
	return 0;
}

static const struct option serve_options[] = {
	{ "store", required_argument, NULL, 's' },
	{ "overlay", required_argument, NULL, O_OVERLAY },
	{ "read-only", no_argument, NULL, O_RO },
	{ "mem-cache", required_argument, NULL, O_MEM },
	{ "nbd", required_argument, NULL, O_NBD },
	{ "export-name", required_argument, NULL, O_NAME },
	{ "stats-json", required_argument, NULL, O_JSON },
	{ "vhost-user", required_argument, NULL, O_VHOST },
	{ "raw", required_argument, NULL, O_RAW },
	CLI_REMOTE_OPTIONS,
	CLI_TRACE_OPTIONS,
	{ "manifest", required_argument, NULL, O_MANIFEST },
	{ "control", required_argument, NULL, O_CONTROL },
	CLI_LOG_OPTIONS,
	{ "no-check", no_argument, NULL, O_NO_CHECK },
	{ "pidfile", required_argument, NULL, O_PIDFILE },
	{ "exit-with-parent", no_argument, NULL, O_EXIT_PARENT },
	{ "run", required_argument, NULL, O_RUN },
	{ "max-connections", required_argument, NULL, O_MAXCONN },
	{ "handshake-timeout", required_argument, NULL, O_HSTIME },
	{ "idle-timeout", required_argument, NULL, O_IDLE },
	{ "user", required_argument, NULL, O_USER },
	{ "seccomp", no_argument, NULL, O_SECCOMP },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

int cmd_serve(int argc, char **argv)
{

	struct serve_args a = { .ds.check = true, .ppid = getppid() };
	uint64_t v;
	int c, r, li = -1;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:hvqp", serve_options, &li)) != -1) {
		if (!a.image_opt && image_only(c))
			a.image_opt = li >= 0 ? serve_options[li].name : "store";
		li = -1;
		switch (c) {
		case 's': a.ds.tiers.store_dir = optarg; break;
		case O_OVERLAY: a.ds.overlay_path = optarg; break;
		case O_RO: a.ds.read_only = a.no.read_only = true; break;
		case O_MEM:
			if (cli_parse_size("--mem-cache", optarg, 1, 0, UINT64_MAX, &v))
				return EXIT_USAGE;
			a.ds.mem_cache = v;
			break;
		case O_NBD: a.nbd = optarg; break;
		case O_NAME: a.no.export_name = optarg; break;
		case O_JSON: a.stats_json = optarg; break;
		case O_VHOST: a.vhost_user = optarg; break;
		case O_CONTROL: a.control = optarg; break;
		case O_RAW: a.raw = optarg; break;
		case O_MANIFEST: a.tr.manifest = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case O_NO_CHECK: a.ds.check = false; break;
		case O_PIDFILE: a.pidfile = optarg; break;
		case O_EXIT_PARENT: a.exit_with_parent = true; break;
		case O_RUN: a.run = optarg; break;
		case O_MAXCONN: case O_HSTIME: case O_IDLE:
			if (nbd_limit_option(&a.no, c, optarg))
				return EXIT_USAGE;
			break;
		case O_USER:
			if (cli_confine_user(&a.cf, optarg))
				return EXIT_USAGE;
			break;
		case O_SECCOMP: a.cf.seccomp = true; break;
		case 'h': printf(serve_usage, cli_remote_help, cli_trace_help); return 0;
		default:
			if (cli_serving_option("serve", argv, &a.tr, &a.rem, c, optarg) <= 0)
				return EXIT_USAGE;
		}
	}
	r = serve_check(&a, argc, argv);
	if (!r)
		r = serve_run(&a, a.raw ? a.raw : a.layout);
	if (a.run_dir[0]) {
		unlink(a.run_nbd + 5); /* the server removes it; not if it never listened */
		rmdir(a.run_dir);
	}
	cli_trace_free(&a.tr);
	cli_image_free(&a.img);
	return r;
}
