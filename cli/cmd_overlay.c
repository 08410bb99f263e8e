/* SPDX-License-Identifier: MIT */
/* lazyblk overlay show|apply: inspect an overlay; start one from a delta. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../blkd/overlay/overlay.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/sha256.h"
#include "../common/size.h"
#include "../layout/layout.h"
#include "cli.h"

static const char overlay_usage[] =
	"usage: lazyblk overlay show [--json] OVERLAY\n"
	"       lazyblk overlay apply DELTA --layout IMAGE.layout -o OVERLAY\n"
	"\n"
	"An overlay is the pair OVERLAY (the blocks written to a served disk, a sparse file\n"
	"of the disk's size) and OVERLAY.state (per 4 KiB block: clean, dirty or zeroed, and\n"
	"the digest of the layout it belongs to), with OVERLAY.live beside them: the states\n"
	"a server has not flushed yet, read in the boot that wrote them (after a host crash,\n"
	"the overlay is as of its last flush). See docs/formats.md, docs/reliability.md.\n"
	"\n"
	"show   the layout digest, the disk size and how many blocks are dirty, zeroed and\n"
	"       clean; --json prints one object with the same figures\n"
	"apply  make OVERLAY (and OVERLAY.state) hold exactly the blocks of DELTA, a file\n"
	"       written by 'lazyblk snapshot': serving IMAGE.layout with --overlay OVERLAY\n"
	"       then gives the disk as it was when the snapshot was taken (fork or restore a\n"
	"       sandbox). DELTA must be a snapshot of an overlay of IMAGE.layout; it is\n"
	"       checked whole (sha256) before OVERLAY is replaced. An existing OVERLAY is\n"
	"       overwritten, unless a server is using it.\n"
	"\n"
	"options:\n"
	"  -l, --layout FILE   apply: the layout the delta belongs to\n"
	"  -o, --output FILE   apply: the overlay to write\n"
	"  --json              show: JSON output\n"
	"  -h, --help          this text\n";

static int overlay_show(const char *path, bool json)
{
	char hex[SHA256_HEX_LEN + 1], h1[32], h2[32], h3[32];
	struct overlay_stats st;
	struct overlay *ov;
	char why[WHY_MAX] = "";
	struct stat sb;
	uint64_t blocks, alloc;
	int ret;

	ret = overlay_open_existing(path, true, &ov, why, sizeof(why));
	if (ret) {
		if (ret == -ENOENT)
			why_set(why, sizeof(why), ret, "no such overlay (no OVERLAY.state)");
		log_error("%s: %s", path, why[0] ? why : strerror(-ret));
		return 1;
	}
	overlay_get_stats(ov, &st);
	blocks = overlay_blocks(ov);
	sha256_to_hex(overlay_layout_digest(ov), hex);
	alloc = stat(path, &sb) == 0 ? (uint64_t)sb.st_blocks * 512 : 0;
	if (json) {
		struct json_buf j = { 0 };

		json_buf_puts(&j, "{");
		json_field_str(&j, "layout", hex);
		json_field_u64(&j, "disk_bytes", overlay_disk_bytes(ov));
		json_field_u64(&j, "blocks", blocks);
		json_field_u64(&j, "dirty_blocks", st.dirty_blocks);
		json_field_u64(&j, "zero_blocks", st.zero_blocks);
		json_field_u64(&j, "clean_blocks", blocks - st.dirty_blocks - st.zero_blocks);
		json_field_u64(&j, "allocated_bytes", alloc);
		json_buf_puts(&j, "}\n");
		if (j.p)
			fputs(j.p, stdout);
		json_buf_free(&j);
	} else {
		printf("layout     %s\n", hex);
		printf("disk       %s (%llu blocks)\n", size_human(overlay_disk_bytes(ov), h1,
		       sizeof(h1)), (unsigned long long)blocks);
		printf("dirty      %llu blocks (%s)\n", (unsigned long long)st.dirty_blocks,
		       size_human(st.dirty_blocks * DISK_BLOCK, h2, sizeof(h2)));
		printf("zeroed     %llu blocks\n", (unsigned long long)st.zero_blocks);
		printf("clean      %llu blocks\n",
		       (unsigned long long)(blocks - st.dirty_blocks - st.zero_blocks));
		printf("allocated  %s in %s\n", size_human(alloc, h3, sizeof(h3)), path);
	}
	overlay_close(ov);
	return 0;
}

static int overlay_apply(const char *delta, const char *layout_path, const char *out)
{
	struct overlay_stats st;
	struct layout *l = NULL;
	struct overlay *ov;
	char why[WHY_MAX] = "";
	int ret;

	if (access(delta, R_OK) < 0) {
		log_error("%s: %s", delta, strerror(errno));
		return 1;
	}
	ret = layout_open(layout_path, &l, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", layout_path, why[0] ? why : strerror(-ret));
		return 1;
	}
	ret = overlay_apply_delta(delta, out, l->digest, l->hdr.block_count * DISK_BLOCK, why,
				  sizeof(why));
	layout_close(l);
	if (ret) {
		/* A reason names what is wrong with the delta, or that OVERLAY is busy. */
		if (ret == -EBUSY)
			log_error("%s: %s", out, why[0] ? why : strerror(-ret));
		else if (why[0])
			log_error("%s: %s", delta, why);
		else
			log_error("%s -> %s: %s", delta, out, strerror(-ret));
		return 1;
	}
	ret = overlay_open_existing(out, true, &ov, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", out, why[0] ? why : strerror(-ret));
		return 1;
	}
	overlay_get_stats(ov, &st);
	overlay_close(ov);
	printf("applied %s to %s: %llu dirty blocks, %llu zeroed blocks\n", delta, out,
	       (unsigned long long)st.dirty_blocks, (unsigned long long)st.zero_blocks);
	return 0;
}

int cmd_overlay(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "layout", required_argument, NULL, 'l' },
		{ "output", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *layout = NULL, *out = NULL, *sub;
	bool json = false;
	int c;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(overlay_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	sub = argv[1];
	if (strcmp(sub, "show") && strcmp(sub, "apply"))
		return cli_usage_error("unknown overlay command '%s' (see lazyblk overlay --help)",
				       sub);
	log_set_context(!strcmp(sub, "show") ? "overlay show" : "overlay apply");
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, ":l:o:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 'l': layout = optarg; break;
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			out = optarg;
			break;
		case 'j': json = true; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(overlay_usage, stdout); return 0;
		default: return cli_bad_option("overlay", argv + 1, c);
		}
	}
	if (optind >= argc - 1)
		return cli_usage_error("missing %s (see lazyblk overlay --help)",
				       !strcmp(sub, "show") ? "OVERLAY" : "DELTA");
	if (optind + 1 < argc - 1)
		return cli_usage_error("unexpected argument '%s'", argv[1 + optind + 1]);
	if (!strcmp(sub, "show")) {
		if (layout || out)
			return cli_usage_error("show takes no --layout or -o");
		return overlay_show(argv[1 + optind], json);
	}
	if (json)
		return cli_usage_error("apply takes no --json");
	if (!layout)
		return cli_usage_error("missing --layout IMAGE.layout");
	if (!out)
		return cli_usage_error("missing -o OVERLAY");
	return overlay_apply(argv[1 + optind], layout, out);
}
