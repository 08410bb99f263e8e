/* SPDX-License-Identifier: MIT */
/*
 * lazyblk snapshot: the dirty and zeroed blocks of an overlay at rest, as a delta; or the
 * same asked of a running server over its control socket.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../blkd/transport/control.h"
#include "../blkd/overlay/overlay.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char snapshot_usage[] =
	"usage: lazyblk snapshot OVERLAY -o DELTA\n"
	"       lazyblk snapshot --server CONTROL_PATH -o DELTA\n"
	"       lazyblk snapshot --vm CONTROL_PATH DIR [--store STORE]\n"
	"\n"
	"Write the dirty blocks (with their data) and the zeroed blocks of an overlay as a\n"
	"delta, for the layout the overlay belongs to (read from OVERLAY.state; the layout\n"
	"itself is not needed). DELTA is written to DELTA.tmp.XXXXXX, made durable and\n"
	"renamed into place, so it is either complete or untouched.\n"
	"\n"
	"The first form reads an overlay no server is using (a server's overlay is locked\n"
	"and refused). The second asks a running server, through the control socket it was\n"
	"started with (lazyblk serve --control PATH), for a point-in-time delta: every write\n"
	"completed before the request and none after, while it keeps serving. The server\n"
	"writes DELTA (made absolute here), so it must be able to write there.\n"
	"Start an overlay from a delta with 'lazyblk overlay apply' (docs/formats.md).\n"
	"\n"
	"The third asks a VM (lazyblk run --control PATH) for a snapshot of the whole VM into\n"
	"DIR, which must not exist: with --store, its RAM, state and disk go into STORE as\n"
	"chunks and a committed layer (a second snapshot stores only what changed) and\n"
	"DIR/snapshot.json names them: push it by tag with 'lazyblk push', resume it with\n"
	"'lazyblk run --restore DIR --store STORE' (docs/run.md, \"Snapshots in a store\");\n"
	"without, DIR holds vm.state, ram and disk.delta. It prints the snapshot's id.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE   the delta to write\n"
	"      --server PATH   ask the server listening on control socket PATH\n"
	"      --vm PATH       ask the VM listening on control socket PATH\n"
	"      --store STORE   with --vm: the chunk store the snapshot goes into\n"
	"  -h, --help          this text\n";

static int snapshot_run(const char *path, const char *out)
{
	struct overlay_stats st;
	struct overlay *ov;
	char why[WHY_MAX] = "";
	char h[32];
	int ret;

	ret = overlay_open_existing(path, true, &ov, why, sizeof(why));
	if (ret) {
		if (ret == -ENOENT)
			why_set(why, sizeof(why), ret, "no such overlay (no OVERLAY.state)");
		else if (ret == -EBUSY)
			why_set(why, sizeof(why), ret,
				"overlay is in use by a server (ask the server for the snapshot)");
		log_error("%s: %s", path, why[0] ? why : strerror(-ret));
		return 1;
	}
	overlay_get_stats(ov, &st);
	ret = overlay_snapshot(ov, out, why, sizeof(why));
	overlay_close(ov);
	if (ret) {
		log_error("%s: %s", out, why[0] ? why : strerror(-ret));
		return 1;
	}
	printf("snapshot of %s: %llu dirty blocks (%s), %llu zeroed blocks -> %s\n", path,
	       (unsigned long long)st.dirty_blocks,
	       size_human(st.dirty_blocks * DISK_BLOCK, h, sizeof(h)),
	       (unsigned long long)st.zero_blocks, out);
	return 0;
}

/* DELTA as an absolute path for the server. */
static int abs_path(const char *out, char *buf, size_t len)
{
	char cwd[PATH_MAX];

	if (out[0] == '/')
		return snprintf(buf, len, "%s", out) < (int)len ? 0 : -ENAMETOOLONG;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	return snprintf(buf, len, "%s/%s", strcmp(cwd, "/") ? cwd : "", out) < (int)len ?
		0 : -ENAMETOOLONG;
}

/* One request, one reply line (without its newline) into reply. */
static int control_ask(const char *ctl, const char *req, char *reply, size_t len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t have = 0;
	int fd, ret = 0;

	if (strlen(ctl) >= sizeof(a.sun_path)) {
		log_error("%s: socket path too long (at most %zu bytes)", ctl,
			  sizeof(a.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(a.sun_path, ctl);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		ret = -errno;
		log_error("%s: %s%s", ctl, strerror(-ret),
			  ret == -ECONNREFUSED || ret == -ENOENT ?
			  " (is a server running with --control here?)" : "");
		goto out;
	}
	if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
		ret = -EIO;
		log_error("%s: cannot send the request: %s", ctl, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t n = recv(fd, reply + have, len - 1 - have, 0);
		char *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = -EIO;
			log_error("%s: the server closed the connection without a reply", ctl);
			goto out;
		}
		have += (size_t)n;
		reply[have] = '\0';
		nl = strchr(reply, '\n');
		if (nl) {
			*nl = '\0';
			break;
		}
		if (have == len - 1) {
			ret = -EIO;
			log_error("%s: reply too long", ctl);
			goto out;
		}
	}
out:
	if (fd >= 0)
		close(fd);
	return ret;
}

static int snapshot_server(const char *ctl, const char *out)
{
	char path[PATH_MAX], req[PATH_MAX + 16], reply[BLKD_CONTROL_MAX_LINE + 256];
	const char *blocks;
	int ret = abs_path(out, path, sizeof(path));

	if (ret) {
		log_error("%s: %s", out, strerror(-ret));
		return 1;
	}
	if (strchr(path, '\n')) {
		log_error("%s: a newline in the path cannot be sent to the server", out);
		return 1;
	}
	snprintf(req, sizeof(req), "snapshot-disk %s\n", path);
	if (strlen(req) > BLKD_CONTROL_MAX_LINE) {
		log_error("%s: path too long for a control request", out);
		return 1;
	}
	if (control_ask(ctl, req, reply, sizeof(reply)))
		return 1; /* it said why */
	if (!strncmp(reply, "error ", 6)) {
		log_error("%s", reply + 6); /* the server names the delta */
		return 1;
	}
	blocks = strrchr(reply, ' ');
	if (strncmp(reply, "ok ", 3) || !blocks || blocks < reply + 3) {
		log_error("%s: unexpected reply '%.80s'", ctl, reply);
		return 1;
	}
	printf("snapshot by the server on %s: %s blocks -> %s\n", ctl, blocks + 1, path);
	return 0;
}

/* --vm: the whole VM, into DIR (and STORE). */
static int snapshot_vm(const char *ctl, const char *dir, const char *store)
{
	char d[PATH_MAX], st[PATH_MAX], req[2 * PATH_MAX + 32];
	char reply[BLKD_CONTROL_MAX_LINE + 256];
	const char *bad = dir;
	int ret = abs_path(dir, d, sizeof(d));

	if (!ret && store && (ret = abs_path(store, st, sizeof(st))))
		bad = store;
	if (ret) {
		log_error("%s: %s", bad, strerror(-ret));
		return 1;
	}
	if (strchr(d, '\n') || (store && strchr(st, '\n')) || strstr(d, " --store ")) {
		log_error("%s: this path cannot be sent to the VM", dir);
		return 1;
	}
	snprintf(req, sizeof(req), "snapshot %s%s%s\n", d, store ? " --store " : "",
		 store ? st : "");
	if (strlen(req) > BLKD_CONTROL_MAX_LINE) {
		log_error("%s: paths too long for a control request", dir);
		return 1;
	}
	if (control_ask(ctl, req, reply, sizeof(reply)))
		return 1; /* it said why */
	if (!strncmp(reply, "error ", 6)) {
		log_error("%s", reply + 6);
		return 1;
	}
	if (strncmp(reply, "ok ", 3)) {
		log_error("%s: unexpected reply '%.80s'", ctl, reply);
		return 1;
	}
	printf("%s\n", reply + 3);
	return 0;
}

/* The --vm form's arguments: DIR alone, no -o or --server. */
static int snapshot_vm_args(const char *vm, const char *server, const char *out,
			    const char *store, int n, char **args)
{
	if (server || out)
		return cli_usage_error("--vm takes DIR, not --server or -o");
	if (n < 1)
		return cli_usage_error("missing DIR (see lazyblk snapshot --help)");
	if (n > 1)
		return cli_usage_error("unexpected argument '%s'", args[1]);
	return snapshot_vm(vm, args[0], store);
}

int cmd_snapshot(int argc, char **argv)
{
	enum { O_SERVER = 256, O_VM, O_STORE };
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "server", required_argument, NULL, O_SERVER },
		{ "vm", required_argument, NULL, O_VM },
		{ "store", required_argument, NULL, O_STORE },
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = NULL, *server = NULL, *vm = NULL, *store = NULL;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			out = optarg;
			break;
		case O_SERVER: server = optarg; break;
		case O_VM: vm = optarg; break;
		case O_STORE: store = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(snapshot_usage, stdout); return 0;
		default: return cli_bad_option("snapshot", argv, c);
		}
	}
	if (vm)
		return snapshot_vm_args(vm, server, out, store, argc - optind, argv + optind);
	if (store)
		return cli_usage_error("--store is for a VM's snapshot (--vm PATH)");
	if (server) {
		if (optind < argc)
			return cli_usage_error("unexpected argument '%s' (--server takes no "
					       "OVERLAY)", argv[optind]);
		if (!out)
			return cli_usage_error("missing -o DELTA");
		return snapshot_server(server, out);
	}
	if (optind >= argc)
		return cli_usage_error("missing OVERLAY (see lazyblk snapshot --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!out)
		return cli_usage_error("missing -o DELTA");
	return snapshot_run(argv[optind], out);
}
