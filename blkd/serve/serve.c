/* SPDX-License-Identifier: MIT */
/*
 * The server's lifecycle (serve.h): the signal thread, the servers, readiness, the --run
 * command. Signals are blocked in every thread and taken by one thread with sigwait(), so
 * nothing runs in a signal handler.
 */
#include "serve.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/size.h"
#include "../disk/disk.h"
#include "../transport/vhost_user.h"
#include "serve_int.h"

/* One server: what it says once it listens. */
struct listener {
	struct serve *s;
	struct serve_listen l;
	char *where, *uri;         /* malloc'ed when built (NBD) */
	unsigned short port;       /* NBD over TCP: the port bound */
};

struct serve {
	struct serve_opts o;       /* a copy: nbd and nbd_opts set here for --run's socket */
	const struct disk *disk;
	sigset_t set;
	volatile sig_atomic_t stop;
	pthread_t sig_thread;
	bool sig_running;          /* under gate_lock: serve_stop may signal it */
	int ready_left;            /* servers not listening yet (atomic); 0: ready */
	int pid_fd;                /* --pidfile, locked; -1: none */
	pthread_mutex_t run_lock;  /* run_pid, run_status */
	pid_t run_pid;             /* --run's command while it runs, else 0 */
	int run_status;            /* its exit status once it ended, else -1 */
	bool failed;               /* getting ready failed (why, err): stopping */
	int err;
	char why[PATH_MAX + 256];
	pthread_mutex_t gate_lock; /* with --user/--seccomp, the servers that listen first wait */
	pthread_cond_t gate_cond;  /* for the confinement (or the stop) before they accept */
	bool gate_open;
	char size[32];             /* the disk's size, for STATUS= */
	struct listener nbd, vu;
	struct vhost_user_dev *dev;
	int vu_ret;
	char run_dir[80];          /* --run without --nbd: the private socket's directory */
	char run_nbd[96];          /* and its unix:PATH */
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

/* nbd://HOST:PORT/NAME or nbd+unix:///NAME?socket=PATH, malloc'ed (NULL: no memory) */
static char *nbd_uri(const struct nbd_server_opts *no, unsigned short port)
{
	const char *name = no->export_name ? no->export_name : "";
	const char *host = no->tcp_host ? no->tcp_host : "127.0.0.1";
	char *uri = NULL;
	size_t len;
	FILE *f = open_memstream(&uri, &len);

	if (!f)
		return NULL;
	if (no->unix_path) {
		fputs("nbd+unix:///", f);
		uri_put(f, name);
		fputs("?socket=", f);
		uri_put(f, no->unix_path);
	} else {
		fprintf(f, "nbd://%s%s%s:%u/", strchr(host, ':') ? "[" : "", host,
			strchr(host, ':') ? "]" : "", port);
		uri_put(f, name);
	}
	if (fclose(f)) {
		free(uri);
		return NULL;
	}
	return uri;
}

/* No connection is taken before the confinement: the servers wait here until it is done. */
static void gate_wait(struct serve *s)
{
	pthread_mutex_lock(&s->gate_lock);
	while (!s->gate_open)
		pthread_cond_wait(&s->gate_cond, &s->gate_lock);
	pthread_mutex_unlock(&s->gate_lock);
}

static void gate_release(struct serve *s)
{
	pthread_mutex_lock(&s->gate_lock);
	s->gate_open = true;
	pthread_cond_broadcast(&s->gate_cond);
	pthread_mutex_unlock(&s->gate_lock);
}

void serve_stop(struct serve *s)
{
	__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->gate_lock);
	s->gate_open = true; /* a server waiting for the others: it stops too */
	pthread_cond_broadcast(&s->gate_cond);
	if (s->sig_running)
		pthread_kill(s->sig_thread, SIGTERM); /* the signal thread ends */
	pthread_mutex_unlock(&s->gate_lock);
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
static int run_start(struct serve *s)
{
	const struct nbd_server_opts *no = &s->o.nbd_opts;
	const char *uri = s->nbd.uri;
	char *env[6] = { 0 }, port[8];
	size_t n = 0;
	int ret = -ENOMEM;

	snprintf(port, sizeof(port), "%u", s->nbd.port);
	if (uri) {
		env[n++] = env_var("uri", uri);
		env[n++] = env_var("nbd", uri);
		env[n++] = env_var("exportname", no->export_name ? no->export_name : "");
		env[n++] = no->unix_path ? env_var("unixsocket", no->unix_path)
					 : env_var("port", port);
	}
	if (!uri || !env[0] || !env[1] || !env[2] || !env[3]) {
		why_set(s->why, sizeof(s->why), ret, "--run: out of memory");
	} else {
		pthread_mutex_lock(&s->run_lock);
		ret = serve_spawn(s->o.run, env, &s->run_pid, s->why, sizeof(s->why));
		pthread_mutex_unlock(&s->run_lock);
	}
	for (size_t i = 0; i < n; i++)
		free(env[i]);
	return ret;
}

/*
 * --user: become USER, who must be able to write what the caller listed; --run's private
 * socket is handed over first (the command, run as USER, connects); the parent-death signal,
 * which the switch clears, is asked for again.
 */
static int ready_drop_user(struct serve *s)
{
	const struct serve_confine *c = &s->o.confine;
	int ret;

	if (c->user && s->run_dir[0] &&
	    chown(s->run_nbd + 5, c->user->uid, c->user->gid))
		return why_set(s->why, sizeof(s->why), -errno, "--run: %s: %s", s->run_nbd + 5,
			       strerror(errno));
	ret = serve_confine_drop(c, s->why, sizeof(s->why));
	if (ret)
		return ret;
	if (c->user && s->o.exit_with_parent)
		return serve_exit_with_parent(s->o.ppid, s->why, sizeof(s->why));
	return 0;
}

/*
 * Every server listens: the pid file, --user, --run's command (as USER, unfiltered), the
 * seccomp filter, then the servers may take connections, and READY=1 to systemd.
 */
static void serve_ready(struct serve *s)
{
	char msg[PATH_MAX + 64];
	int ret = 0;

	if (s->pid_fd >= 0)
		ret = serve_pidfile_write(s->o.pidfile, s->pid_fd, s->why, sizeof(s->why));
	if (!ret)
		ret = ready_drop_user(s);
	if (!ret && s->o.run)
		ret = run_start(s);
	if (!ret)
		ret = serve_confine_filter(&s->o.confine, 0, s->why, sizeof(s->why));
	if (ret) {
		s->err = ret;
		__atomic_store_n(&s->failed, true, __ATOMIC_RELEASE);
		serve_stop(s); /* before any connection */
		return;
	}
	gate_release(s);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving %s (%s)", s->o.name, s->size);
	serve_notify(msg, &s->o.notes);
}

/* A server listens (on its thread): the caller says so; the last one makes it ready. */
static void listening(struct listener *lr)
{
	struct serve *s = lr->s;

	if (s->o.on_listen)
		s->o.on_listen(s->o.arg, &lr->l);
	if (!__atomic_sub_fetch(&s->ready_left, 1, __ATOMIC_ACQ_REL))
		serve_ready(s);
	else if (s->o.confine.user || s->o.confine.seccomp)
		gate_wait(s);
}

/* NBD's: the port bound (tcp:0: the kernel's pick) in WHERE, and the URI. */
static void nbd_listening(void *arg)
{
	struct listener *lr = arg;
	const struct serve_opts *o = &lr->s->o;

	if (o->nbd_opts.unix_path) {
		lr->l.where = o->nbd;
	} else if (asprintf(&lr->where, "%.*s%u", (int)(o->nbd_opts.tcp_port - o->nbd), o->nbd,
			    lr->port) >= 0) {
		lr->l.where = lr->where;
	} else {
		lr->where = NULL;
		lr->l.where = o->nbd;
	}
	lr->uri = nbd_uri(&o->nbd_opts, lr->port);
	lr->l.uri = lr->uri ? lr->uri : "";
	listening(lr);
}

static void vu_listening(void *arg)
{
	listening(arg);
}

/* --run's command ended? (wait: wait for it.) Then its status is kept: true. */
static bool run_reap(struct serve *s, bool wait)
{
	bool done = false;
	int st;

	pthread_mutex_lock(&s->run_lock);
	if (s->run_pid > 0 && waitpid(s->run_pid, &st, wait ? 0 : WNOHANG) == s->run_pid) {
		s->run_status = serve_exit_status(st);
		s->run_pid = 0;
		done = true;
	}
	pthread_mutex_unlock(&s->run_lock);
	return done;
}

static void *sig_main(void *arg)
{
	struct serve *s = arg;
	int sig;

	for (;;) {
		if (sigwait(&s->set, &sig))
			continue;
		if (sig == SIGUSR1) {
			if (s->o.on_stats)
				s->o.on_stats(s->o.arg);
			continue;
		}
		if (sig == SIGCHLD && !run_reap(s, false))
			continue;
		__atomic_store_n(&s->stop, 1, __ATOMIC_RELAXED);
		gate_release(s); /* a server waiting for the others: it stops too */
		return NULL;
	}
}

/* The vhost-user server, in its own thread when NBD is served as well. */
static void *vu_main(void *arg)
{
	struct serve *s = arg;

	s->vu_ret = vhost_user_serve(s->dev, s->o.vhost_user, &s->stop, vu_listening, &s->vu);
	if (s->vu_ret && !__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
		serve_stop(s); /* it failed: stop the NBD server too */
	return NULL;
}

/* Run the servers until stopped: 0, or -errno (a transport failed: it said why). */
static int servers_run(struct serve *s, char *why, size_t why_len)
{
	pthread_t t;
	int ret;

	if (!s->o.nbd) {
		vu_main(s);
		return s->vu_ret;
	}
	if (!s->o.vhost_user)
		return nbd_serve(s->disk, &s->o.nbd_opts, &s->stop);
	if (pthread_create(&t, NULL, vu_main, s))
		return why_set(why, why_len, -EAGAIN, "cannot start the vhost-user thread");
	ret = nbd_serve(s->disk, &s->o.nbd_opts, &s->stop);
	if (ret && !__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
		serve_stop(s);
	pthread_join(t, NULL);
	return ret ? ret : s->vu_ret;
}

/* The servers' listeners, and the vhost-user device. 0, or -errno with why. */
static int servers_prepare(struct serve *s, char *why, size_t why_len)
{
	struct nbd_server_opts *no = &s->o.nbd_opts;
	int ret;

	if (s->o.vhost_user) {
		ret = vhost_user_dev_new(s->disk, 0, "lazyblk", &s->dev);
		if (ret)
			return why_set(why, why_len, ret, "--vhost-user: %s", strerror(-ret));
	}
	size_human(s->disk->size, s->size, sizeof(s->size));
	s->nbd.s = s->vu.s = s;
	s->nbd.l = (struct serve_listen){ .how = "NBD", .where = s->o.nbd,
					  .read_only = no->read_only || s->disk->read_only };
	s->vu.l = (struct serve_listen){ .how = "vhost-user", .where = s->o.vhost_user,
					 .read_only = s->disk->read_only };
	no->on_listen = nbd_listening;
	no->on_listen_arg = &s->nbd;
	no->tcp_bound_port = &s->nbd.port;
	s->ready_left = !!s->o.nbd + !!s->o.vhost_user;
	return 0;
}

int serve_run(struct serve *s, const struct disk *d, bool *served, char *why, size_t why_len)
{
	int ret;

	*served = false;
	why_set(why, why_len, 0, "%s", "");
	s->disk = d;
	pthread_mutex_lock(&s->gate_lock);
	ret = pthread_create(&s->sig_thread, NULL, sig_main, s);
	s->sig_running = !ret;
	pthread_mutex_unlock(&s->gate_lock);
	if (ret)
		return why_set(why, why_len, -EAGAIN, "cannot start the signal thread");
	ret = servers_prepare(s, why, why_len);
	if (!ret)
		ret = servers_run(s, why, why_len);
	if (__atomic_load_n(&s->ready_left, __ATOMIC_ACQUIRE) == 0)
		serve_notify("STOPPING=1", &s->o.notes);
	if (!__atomic_load_n(&s->stop, __ATOMIC_RELAXED))
		serve_stop(s); /* a server failed: end the signal thread */
	pthread_join(s->sig_thread, NULL);
	pthread_mutex_lock(&s->gate_lock);
	s->sig_running = false;
	pthread_mutex_unlock(&s->gate_lock);
	vhost_user_dev_free(s->dev);
	s->dev = NULL;
	if (ret)
		return ret; /* a transport said why, or why says it */
	*served = true;
	if (__atomic_load_n(&s->failed, __ATOMIC_ACQUIRE))
		return why_set(why, why_len, s->err, "%s", s->why);
	return 0;
}

/* --run without --nbd: NBD on a private unix socket, in a directory of its own. */
static int run_socket(struct serve *s, char *why, size_t why_len)
{
	const struct confine_user *u = s->o.confine.user;
	const char *tmp = getenv("TMPDIR");
	int ret;

	if (!tmp || !*tmp || strlen(tmp) > sizeof(s->run_dir) - 16)
		tmp = "/tmp";
	snprintf(s->run_dir, sizeof(s->run_dir), "%s/lazyblk-XXXXXX", tmp);
	if (!mkdtemp(s->run_dir)) {
		s->run_dir[0] = '\0';
		return why_set(why, why_len, -errno, "--run: cannot make a directory in %s for the "
			       "NBD socket: %s", tmp, strerror(errno));
	}
	/* --user: the server removes the socket and the directory at exit as USER */
	if (u && chown(s->run_dir, u->uid, u->gid)) {
		ret = why_set(why, why_len, -errno, "--run: %s: %s", s->run_dir, strerror(errno));
		rmdir(s->run_dir);
		s->run_dir[0] = '\0';
		return ret;
	}
	snprintf(s->run_nbd, sizeof(s->run_nbd), "unix:%s/nbd.sock", s->run_dir);
	s->o.nbd = s->run_nbd;
	s->o.nbd_opts.unix_path = s->run_nbd + 5;
	return 0;
}

int serve_open(const struct serve_opts *o, struct serve **out, char *why, size_t why_len)
{
	struct serve *s = calloc(1, sizeof(*s));
	int ret = 0;

	*out = NULL;
	if (!s)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	s->o = *o;
	s->pid_fd = -1;
	s->run_status = -1;
	s->ready_left = -1; /* set when the servers are known */
	pthread_mutex_init(&s->run_lock, NULL);
	pthread_mutex_init(&s->gate_lock, NULL);
	pthread_cond_init(&s->gate_cond, NULL);
	/* before any thread exists, so that every thread inherits the mask */
	sigemptyset(&s->set);
	sigaddset(&s->set, SIGINT);
	sigaddset(&s->set, SIGTERM);
	sigaddset(&s->set, SIGUSR1);
	sigaddset(&s->set, SIGCHLD); /* --run's command ended */
	pthread_sigmask(SIG_BLOCK, &s->set, NULL);
	signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the server */
	if (o->run && !o->nbd)
		ret = run_socket(s, why, why_len);
	if (!ret && o->pidfile)
		ret = serve_pidfile_lock(o->pidfile, &s->pid_fd, why, why_len);
	if (!ret && o->exit_with_parent)
		ret = serve_exit_with_parent(o->ppid, why, why_len);
	if (ret) {
		serve_close(s);
		return ret;
	}
	*out = s;
	return 0;
}

int serve_close(struct serve *s)
{
	pid_t pid;
	int status;

	if (!s)
		return -1;
	pthread_mutex_lock(&s->run_lock);
	pid = s->run_pid;
	pthread_mutex_unlock(&s->run_lock);
	if (pid > 0) { /* stopped by a signal while it runs: it goes too */
		kill(pid, SIGTERM);
		run_reap(s, true);
	}
	serve_pidfile_remove(s->o.pidfile, s->pid_fd);
	if (s->run_dir[0]) {
		unlink(s->run_nbd + 5); /* the server removes it; not if it never listened */
		rmdir(s->run_dir);
	}
	status = s->run_status;
	pthread_mutex_destroy(&s->run_lock);
	pthread_mutex_destroy(&s->gate_lock);
	pthread_cond_destroy(&s->gate_cond);
	free(s->nbd.where);
	free(s->nbd.uri);
	free(s);
	return status;
}
