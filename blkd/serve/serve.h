/* SPDX-License-Identifier: MIT */
/*
 * A disk served until it is told to stop (lazyblk serve): the server's lifecycle around the
 * transports (blkd/transport/): the signals (taken by one thread with sigwait(): nothing
 * runs in a signal handler), the servers (NBD on the calling thread, vhost-user-blk on its
 * own when both), readiness once every server listens (the pid file, --user, the --run
 * command, the seccomp filter, then connections are taken and READY=1 goes to systemd), and
 * the --run command's end. Modelled on nbdkit's captive mode and systemd's sd_notify.
 *
 * The order, as docs/security.md says it:
 *   serve_open     signals blocked (before any thread: every thread inherits the mask),
 *                  SIGPIPE ignored, the pid file locked, the parent watched, --run's
 *                  private socket directory made
 *   (the caller opens the disk, starts the control socket)
 *   serve_run      the signal thread, the servers listen; once all of them do: the pid
 *                  written, --user (the run socket handed over), the --run command started
 *                  (as USER, unfiltered), the seccomp filter, then the servers take their
 *                  first connections and READY=1; until SIGINT, SIGTERM, the command's end,
 *                  a server's failure or serve_stop(); STOPPING=1
 *   (the caller stops the control socket, flushes, says the statistics)
 *   serve_close    the --run command stopped if it still runs, its status; the pid file
 *                  and the private socket removed
 *
 * Nothing here prints: -errno and one line in why (the failing option named as lazyblk
 * serve's: "--pidfile PATH: held by process N"), warnings as notes; what is said on stdout
 * (the "serving" lines, the statistics at SIGUSR1) the caller says in its callbacks. A
 * transport that fails logs its own line (blkd/transport/).
 */
#ifndef LZ_BLKD_SERVE_H
#define LZ_BLKD_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../../common/confine.h"
#include "../../common/test_hook.h"
#include "../../common/why.h"
#include "../transport/nbd.h"

struct disk;
struct serve;

/* ---- confinement (--user, --seccomp): also lazyblk run's, before its first vCPU */

#define SERVE_CONFINE_DIRS 3

/* A directory written after the switch, and how deep its subdirectories go. */
struct serve_dir {
	const char *path;        /* NULL: none */
	unsigned depth;
};

struct serve_confine {
	const struct confine_user *user;      /* --user: become it; NULL: stay who we are */
	bool seccomp;                         /* --seccomp */
	struct serve_dir dirs[SERVE_CONFINE_DIRS]; /* checked writable once switched */
};

/*
 * Step 1: become c->user (if set), then check that it can write into each of c->dirs and
 * their subdirectories. 0, or -errno with why ("--user USER: ...").
 */
int serve_confine_drop(const struct serve_confine *c, char *why, size_t why_len);
/* Step 2: the seccomp filter (if c->seccomp; needs: enum confine_needs). 0, or -errno. */
int serve_confine_filter(const struct serve_confine *c, unsigned needs, char *why,
			 size_t why_len);

/* ---- serving */

/* One server listening: what the caller says ("serving NAME (SIZE) over HOW on WHERE"). */
struct serve_listen {
	const char *how;         /* "NBD" or "vhost-user" */
	const char *where;       /* the socket as given (TCP: the port bound in place of 0) */
	const char *uri;         /* NBD: nbd://HOST:PORT/NAME or nbd+unix:///NAME?socket=PATH */
	bool read_only;          /* served read-only */
};

/* Everything borrowed until serve_close(). */
struct serve_opts {
	const char *name;        /* what is served: READY's STATUS=serving NAME (SIZE) */
	/*
	 * --nbd as given (unix:PATH, tcp:[HOST:]PORT), parsed into nbd_opts (unix_path, or
	 * tcp_host and tcp_port, tcp_port pointing into nbd), with the export name, the limits
	 * and read_only; on_listen and tcp_bound_port are serve's. NULL: no NBD (with run: on a
	 * private unix socket in a directory of its own, under $TMPDIR or /tmp).
	 */
	const char *nbd;
	struct nbd_server_opts nbd_opts;
	const char *vhost_user;  /* --vhost-user PATH, or NULL */
	const char *pidfile;     /* --pidfile, or NULL */
	const char *run;         /* --run: a shell command given $uri, $nbd, $exportname, and
				  * $unixsocket or $port (nbdkit's names); serving ends with it */
	bool exit_with_parent;   /* SIGTERM when the parent (ppid) goes, also after --user */
	pid_t ppid;
	struct serve_confine confine;
	/* each server listening, on its own thread, before it takes a connection */
	void (*on_listen)(void *arg, const struct serve_listen *l);
	void (*on_stats)(void *arg);   /* SIGUSR1, on the signal thread */
	void *arg;
	struct note_sink notes;  /* warnings (a bad $NOTIFY_SOCKET), from any of its threads */
};

/* Step 1, before the caller starts any thread. *out, or -errno with why. */
int serve_open(const struct serve_opts *o, struct serve **out, char *why, size_t why_len);

/*
 * Serve d until stopped (the calling thread runs the NBD server). 0, or -errno with why,
 * empty when a transport failed (it said why). *served: the servers ran and stopped in
 * order (even if getting ready failed: nothing was served then): flush the disk and give
 * its statistics; false when a server failed.
 */
int serve_run(struct serve *s, const struct disk *d, bool *served, char *why, size_t why_len);

/* Stop serve_run (as SIGTERM does), from any thread; once it is running. */
TEST_HOOK
void serve_stop(struct serve *s);

/*
 * The end: the --run command, still running, gets SIGTERM and is waited for; the pid file
 * and --run's private socket go (the signals stay blocked: a late SIGTERM does not kill the
 * process on its way out). The command's exit status (128 + a signal that killed it), or -1
 * if there was none. s NULL: -1.
 */
int serve_close(struct serve *s);

#endif
