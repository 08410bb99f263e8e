/* SPDX-License-Identifier: MIT */
/* lazyblk snapshot: the dirty and zeroed blocks of an overlay at rest, as a delta. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../blkd/overlay.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char snapshot_usage[] =
	"usage: lazyblk snapshot OVERLAY -o DELTA\n"
	"\n"
	"Write the dirty blocks (with their data) and the zeroed blocks of an overlay as a\n"
	"delta, for the layout the overlay belongs to (read from OVERLAY.state; the layout\n"
	"itself is not needed). DELTA is written to DELTA.tmp.XXXXXX, made durable and\n"
	"renamed into place, so it is either complete or untouched.\n"
	"\n"
	"This reads an overlay no server is using; a server's overlay is locked, and a\n"
	"snapshot of it is asked of the server, which keeps serving meanwhile.\n"
	"Start an overlay from a delta with 'lazyblk overlay apply' (docs/formats.md).\n"
	"\n"
	"options:\n"
	"  -o, --output FILE   the delta to write\n"
	"  -h, --help          this text\n";

static int snapshot_run(const char *path, const char *out)
{
	struct overlay_stats st;
	struct overlay *ov;
	const char *why = NULL;
	char h[32];
	int ret;

	ret = overlay_open_existing(path, true, &ov, &why);
	if (ret) {
		if (ret == -ENOENT)
			why = "no such overlay (no OVERLAY.state)";
		else if (ret == -EBUSY)
			why = "overlay is in use by a server (ask the server for the snapshot)";
		log_error("%s: %s", path, why ? why : strerror(-ret));
		return 1;
	}
	overlay_get_stats(ov, &st);
	ret = overlay_snapshot(ov, out, &why);
	overlay_close(ov);
	if (ret) {
		log_error("%s: %s", out, why ? why : strerror(-ret));
		return 1;
	}
	printf("snapshot of %s: %llu dirty blocks (%s), %llu zeroed blocks -> %s\n", path,
	       (unsigned long long)st.dirty_blocks,
	       size_human(st.dirty_blocks * OV_BLOCK, h, sizeof(h)),
	       (unsigned long long)st.zero_blocks, out);
	return 0;
}

int cmd_snapshot(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *out = NULL;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'h': fputs(snapshot_usage, stdout); return 0;
		default: return cli_bad_option("snapshot", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing OVERLAY (see lazyblk snapshot --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!out)
		return cli_usage_error("missing -o DELTA");
	return snapshot_run(argv[optind], out);
}
