/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the server's lifecycle (blkd/serve/serve.h): a raw disk file in a temporary
 * directory served over NBD (a unix socket, TCP on 127.0.0.1 port 0, --run's private
 * socket) and vhost-user; readiness seen the way systemd sees it, as READY=1 on a
 * $NOTIFY_SOCKET datagram socket of the test's; the pid file; a --run command's exit status
 * (its own, or 128 + SIGTERM when the server is stopped under it); stops by serve_stop() and
 * by SIGTERM; options refused with one line. Every wait is for an event (a datagram, a
 * child's exit, the server's return), never for time.
 */
#include "../helpers.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>

#include "../../../blkd/disk/disk_int.h"
#include "../../../blkd/serve/serve.h"
#include "../../../common/log.h"

#define DISK_SIZE (1u << 20)

struct fix {
	char dir[PATH_MAX], raw[PATH_MAX], sock[PATH_MAX], notify[PATH_MAX];
	struct disk d;
	int nfd;                   /* the $NOTIFY_SOCKET datagram socket */
	pthread_mutex_t lock;
	unsigned listens;          /* on_listen calls */
	char how[2][16], where[2][PATH_MAX], uri[2][PATH_MAX];
};

static void on_listen(void *arg, const struct serve_listen *l)
{
	struct fix *f = arg;

	pthread_mutex_lock(&f->lock);
	if (f->listens < 2) {
		snprintf(f->how[f->listens], sizeof(f->how[0]), "%s", l->how);
		snprintf(f->where[f->listens], PATH_MAX, "%s", l->where);
		snprintf(f->uri[f->listens], PATH_MAX, "%s", l->uri ? l->uri : "(none)");
	}
	f->listens++;
	pthread_mutex_unlock(&f->lock);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 120 }; /* a bound on a hung test, not a timing check */

	assert_non_null(f);
	log_set_level(0);
	tmpdir_make(f->dir);
	path_fmt(f->raw, "%s/raw", f->dir);
	path_fmt(f->sock, "%s/nbd.sock", f->dir);
	path_fmt(f->notify, "%s/notify", f->dir);
	write_file(f->raw, "", 0);
	assert_int_equal(truncate(f->raw, DISK_SIZE), 0);
	assert_int_equal(disk_raw_open(f->raw, false, &f->d), 0);
	f->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(f->nfd >= 0);
	assert_true(strlen(f->notify) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, f->notify, strlen(f->notify));
	assert_int_equal(bind(f->nfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(setsockopt(f->nfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	setenv("NOTIFY_SOCKET", f->notify, 1);
	pthread_mutex_init(&f->lock, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	unsetenv("NOTIFY_SOCKET");
	disk_close(&f->d);
	close(f->nfd);
	rm_rf(f->dir);
	pthread_mutex_destroy(&f->lock);
	free(f);
	return 0;
}

/* The next datagram on $NOTIFY_SOCKET, as a string. */
static void notify_recv(struct fix *f, char *buf, size_t len)
{
	ssize_t n = recv(f->nfd, buf, len - 1, 0);

	assert_true(n > 0);
	buf[n] = '\0';
}

static struct serve_opts opts_base(struct fix *f)
{
	return (struct serve_opts){ .name = f->raw, .on_listen = on_listen, .arg = f,
				    .ppid = getppid() };
}

struct runner {
	struct serve *s;
	const struct disk *d;
	bool served;
	int ret;
	char why[512];
	pthread_t t;
};

static void *run_main(void *arg)
{
	struct runner *r = arg;

	r->ret = serve_run(r->s, r->d, &r->served, r->why, sizeof(r->why));
	return NULL;
}

static void runner_start(struct runner *r, struct serve *s, const struct disk *d)
{
	*r = (struct runner){ .s = s, .d = d };
	assert_int_equal(pthread_create(&r->t, NULL, run_main, r), 0);
}

/* The greeting of an NBD server on the unix socket path: "NBDMAGIC". */
static void nbd_greeted(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char magic[8];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(recv(fd, magic, sizeof(magic), MSG_WAITALL), (ssize_t)sizeof(magic));
	assert_memory_equal(magic, "NBDMAGIC", 8);
	close(fd);
}

/*
 * NBD and vhost-user: each says it listens, then READY=1 (with the STATUS) once both do,
 * the pid file holds this pid, a client is greeted; serve_stop() ends it in order
 * (STOPPING=1) and serve_close() removes the pid file.
 */
static void test_ready_then_stop(void **state)
{
	struct fix *f = *state;
	struct serve_opts o = opts_base(f);
	char nbd[PATH_MAX + 8], vu[PATH_MAX], pid[PATH_MAX], msg[PATH_MAX + 64], want[64];
	char why[512] = "";
	struct runner r;
	struct serve *s;

	path_fmt(nbd, "unix:%s", f->sock);
	path_fmt(vu, "%s/vu.sock", f->dir);
	path_fmt(pid, "%s/pid", f->dir);
	o.nbd = nbd;
	o.nbd_opts.unix_path = nbd + 5;
	o.vhost_user = vu;
	o.pidfile = pid;
	assert_int_equal(serve_open(&o, &s, why, sizeof(why)), 0);
	runner_start(&r, s, &f->d);
	notify_recv(f, msg, sizeof(msg));
	snprintf(want, sizeof(want), "READY=1\nSTATUS=serving ");
	assert_memory_equal(msg, want, strlen(want));
	assert_non_null(strstr(msg, " (1.0 MiB)"));
	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->listens, 2);
	for (unsigned i = 0; i < 2; i++) {
		bool is_nbd = !strcmp(f->how[i], "NBD");

		assert_true(is_nbd || !strcmp(f->how[i], "vhost-user"));
		assert_string_equal(f->where[i], is_nbd ? nbd : vu);
		if (is_nbd) {
			char u[PATH_MAX + 64];

			snprintf(u, sizeof(u), "nbd+unix:///?socket=%s", f->sock);
			assert_string_equal(f->uri[i], u);
		} else {
			assert_string_equal(f->uri[i], "(none)");
		}
	}
	pthread_mutex_unlock(&f->lock);
	snprintf(want, sizeof(want), "%ld\n", (long)getpid());
	{
		FILE *pf = fopen(pid, "r");

		assert_non_null(pf);
		assert_non_null(fgets(msg, sizeof(msg), pf));
		fclose(pf);
		assert_string_equal(msg, want);
	}
	nbd_greeted(f->sock);

	serve_stop(s);
	pthread_join(r.t, NULL);
	assert_int_equal(r.ret, 0);
	assert_true(r.served);
	notify_recv(f, msg, sizeof(msg));
	assert_string_equal(msg, "STOPPING=1");
	assert_int_equal(serve_close(s), -1); /* no --run */
	assert_int_equal(access(pid, F_OK), -1);
}

/* --run without an NBD socket: a private one, the command's exit status, the socket gone. */
static void test_run_status(void **state)
{
	struct fix *f = *state;
	struct serve_opts o = opts_base(f);
	char why[512] = "", msg[256], dir[PATH_MAX];
	struct serve *s;
	bool served;

	o.run = "test \"$nbd\" = \"$uri\" && test -S \"$unixsocket\" && test -z \"${port-}\" && "
		"test -z \"${NOTIFY_SOCKET-}\" && exit 7";
	assert_int_equal(serve_open(&o, &s, why, sizeof(why)), 0);
	assert_int_equal(serve_run(s, &f->d, &served, why, sizeof(why)), 0); /* ends with it */
	assert_true(served);
	notify_recv(f, msg, sizeof(msg));
	assert_memory_equal(msg, "READY=1", 7);
	assert_int_equal(f->listens, 1);
	assert_string_equal(f->how[0], "NBD");
	assert_memory_equal(f->where[0], "unix:", 5);
	assert_non_null(strstr(f->where[0], "/lazyblk-"));
	assert_non_null(strstr(f->uri[0], "?socket="));
	assert_int_equal(serve_close(s), 7);
	snprintf(dir, sizeof(dir), "%s", f->where[0] + 5);
	assert_int_equal(access(dir, F_OK), -1);       /* the socket */
	*strrchr(dir, '/') = '\0';
	assert_int_equal(access(dir, F_OK), -1);       /* and its directory */
}

/*
 * NBD over TCP (port 0: the port bound is said, and given to the command) and SIGTERM while
 * the command runs: serving ends in order, the command gets SIGTERM too: 128 + 15.
 */
static void test_sigterm_stops_command(void **state)
{
	struct fix *f = *state;
	struct serve_opts o = opts_base(f);
	static const char nbd[] = "tcp:127.0.0.1:0";
	char why[512] = "", msg[256], want[64];
	unsigned port;
	struct runner r;
	struct serve *s;

	o.nbd = nbd;
	o.nbd_opts.tcp_host = "127.0.0.1";
	o.nbd_opts.tcp_port = nbd + strlen("tcp:127.0.0.1:");
	o.nbd_opts.export_name = "x y";
	o.run = "test \"$uri\" = \"nbd://127.0.0.1:$port/x%20y\" && test \"$exportname\" = 'x y' "
		"&& exec sleep 600";
	assert_int_equal(serve_open(&o, &s, why, sizeof(why)), 0);
	runner_start(&r, s, &f->d);
	notify_recv(f, msg, sizeof(msg));
	assert_memory_equal(msg, "READY=1", 7); /* after the command started */
	assert_int_equal(sscanf(f->where[0], "tcp:127.0.0.1:%u", &port), 1);
	assert_true(port > 0);
	snprintf(want, sizeof(want), "nbd://127.0.0.1:%u/x%%20y", port);
	assert_string_equal(f->uri[0], want);

	assert_int_equal(kill(getpid(), SIGTERM), 0); /* taken by serve's signal thread */
	pthread_join(r.t, NULL);
	assert_int_equal(r.ret, 0);
	assert_true(r.served);
	assert_int_equal(serve_close(s), 128 + SIGTERM);
}

/*
 * Refused with one line: a pid file that is a symbolic link (nothing opened, nothing
 * served); a vhost-user socket that cannot be made fails its server (which says why
 * itself: why stays empty, and nothing was served in order).
 */
static void test_refused(void **state)
{
	struct fix *f = *state;
	struct serve_opts o = opts_base(f);
	char why[512] = "", pid[PATH_MAX], vu[PATH_MAX], want[PATH_MAX + 64];
	struct serve *s = (struct serve *)1;
	bool served = true;

	path_fmt(pid, "%s/pid.link", f->dir);
	assert_int_equal(symlink(f->raw, pid), 0);
	o.pidfile = pid;
	o.vhost_user = "unused";
	assert_int_equal(serve_open(&o, &s, why, sizeof(why)), -ELOOP);
	assert_null(s);
	snprintf(want, sizeof(want), "--pidfile %s: a symbolic link (not followed)", pid);
	assert_string_equal(why, want);
	assert_null(strchr(why, '\n'));

	o = opts_base(f);
	path_fmt(vu, "%s/no-such-dir/vu.sock", f->dir);
	o.vhost_user = vu;
	assert_int_equal(serve_open(&o, &s, why, sizeof(why)), 0);
	assert_true(serve_run(s, &f->d, &served, why, sizeof(why)) < 0);
	assert_false(served);
	assert_string_equal(why, "");
	assert_int_equal(f->listens, 0);
	assert_int_equal(serve_close(s), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_then_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sigterm_stops_command, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
