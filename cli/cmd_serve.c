/* SPDX-License-Identifier: MIT */
/*
 * lazyblk serve: a layout as a live disk (or, with --raw, a plain file as it is) over NBD
 * and/or vhost-user-blk until SIGINT/SIGTERM; statistics on SIGUSR1 and at exit. Both kinds
 * of disk are a struct disk (blkd/disk/disk.h) that the servers take. The options are
 * parsed here and the disk opened; the server's lifecycle (signals, readiness, --run, the
 * confinement's order) is blkd/serve/serve.h's; this file says what happens.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../blkd/disk/disk.h"
#include "../blkd/transport/control.h"
#include "../blkd/serve/serve.h"
#include "../blkd/transport/nbd.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"
#include "confine_opts.h"
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
	char dir1[PATH_MAX], dir2[PATH_MAX]; /* where --stats-json, --trace-record go */
};

/* The disk served, and what the "serving" lines say of it. */
struct sig_ctx {
	struct disk disk;          /* disk_open's: the lazy image, or the --raw FILE */
	const char *what;          /* the IMAGE.layout or the --raw FILE */
	char size[32];
};

/*
 * "serving ..." on stdout once a server's socket accepts connections: a readiness signal.
 * NBD's names the port bound (tcp:0: the kernel's pick) and ends with the NBD URI. Each
 * server says it on its own thread: one whole line at a time.
 */
static void serve_listening(void *arg, const struct serve_listen *l)
{
	const struct sig_ctx *sc = arg;

	flockfile(stdout);
	printf("serving %s (%s%s) over %s on %s", sc->what, sc->size,
	       l->read_only ? ", read-only" : "", l->how, l->where);
	if (l->uri)
		printf(" at %s", l->uri);
	putchar('\n');
	fflush(stdout);
	funlockfile(stdout);
}

/* SIGUSR1: the statistics. */
static void serve_stats(void *arg)
{
	struct sig_ctx *sc = arg;

	disk_stats(&sc->disk, stdout, false);
	fflush(stdout);
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

/* The library's options (blkd/serve/serve.h) from the command's. */
static void serve_opts_fill(struct serve_args *a, struct sig_ctx *sc, struct serve_opts *so)
{
	struct serve_dir *dirs = so->confine.dirs;

	*so = (struct serve_opts){ .name = sc->what, .nbd = a->nbd, .nbd_opts = a->no,
				   .vhost_user = a->vhost_user, .pidfile = a->pidfile,
				   .run = a->run, .exit_with_parent = a->exit_with_parent,
				   .ppid = a->ppid, .on_listen = serve_listening,
				   .on_stats = serve_stats, .arg = sc, .notes = CLI_NOTES };
	/* --user must be able to write the store (with --remote: the chunks it fetches) and
	 * the directories of the files written at exit */
	so->confine.user = a->cf.drop ? &a->cf.user : NULL;
	so->confine.seccomp = a->cf.seccomp;
	dirs[0] = (struct serve_dir){ a->rem.url ? a->ds.tiers.store_dir : NULL,
				      CLI_CONFINE_STORE_DEPTH };
	if (a->stats_json)
		dirs[1].path = cli_confine_parent(a->stats_json, a->dir1, sizeof(a->dir1));
	if (a->tr.record)
		dirs[2].path = cli_confine_parent(a->tr.record, a->dir2, sizeof(a->dir2));
}

/*
 * what: the IMAGE.layout, or the --raw FILE. The exit status: --run's command's, unless
 * serving failed; then 1.
 */
static int serve_main(struct serve_args *a, const char *what)
{
	struct sig_ctx sc = { .what = what };
	struct blkd_control *ctl = NULL;
	char why[PATH_MAX + 256];
	struct serve_opts so;
	struct serve *s;
	bool served;
	int ret, rc, st;

	serve_opts_fill(a, &sc, &so);
	if (serve_open(&so, &s, why, sizeof(why)))
		return cli_fail(1, why);
	if (serve_disk_open(a, what, &sc)) {
		serve_close(s);
		return 1;
	}
	if (a->control && blkd_control_start(&sc.disk, NULL, a->control, &ctl)) {
		disk_done(&sc); /* it said why */
		serve_close(s);
		return 1;
	}
	size_human(sc.disk.size, sc.size, sizeof(sc.size));
	ret = serve_run(s, &sc.disk, &served, why, sizeof(why));
	cli_fail(ret, why);
	blkd_control_stop(ctl); /* a snapshot under way completes first */
	rc = served ? serve_finish(a, &sc) : 1; /* a server that failed said why */
	disk_done(&sc);
	st = serve_close(s);
	if (ret && served)
		return 1; /* getting ready failed (said why): nothing served */
	if (st >= 0)
		return rc && !st ? 1 : st;
	return rc;
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
	if (!a->nbd && !a->vhost_user && !a->run) /* --run alone: a private socket (serve.h) */
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
		r = serve_main(&a, a.raw ? a.raw : a.layout);
	cli_trace_free(&a.tr);
	cli_image_free(&a.img);
	return r;
}
