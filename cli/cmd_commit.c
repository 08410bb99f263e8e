/* SPDX-License-Identifier: MIT */
/* lazyblk commit: a sandbox's writes as a new layout over its base (blkd/overlay/commit.h). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../blkd/overlay/commit.h"
#include "../cas/chunk.h"
#include "../common/clock.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char commit_usage[] =
	"usage: lazyblk commit OVERLAY|DELTA --layout BASE.layout --store DIR -o NEW.layout\n"
	"                      [--flatten] [--level N] [--json]\n"
	"\n"
	"Turn the blocks a sandbox wrote into a new image. OVERLAY (the --overlay of serve or\n"
	"run, with OVERLAY.state beside it) or DELTA (written by lazyblk snapshot) must belong\n"
	"to BASE.layout, the layout it was written on; any other is refused. The written\n"
	"blocks - file data and the filesystem's metadata alike, no ext4 is parsed - are\n"
	"packed in disk order into chunks of the base's chunk size, compressed (zstd) and\n"
	"added to the store, where identical chunks are stored once; zeroed or discarded\n"
	"blocks, and written blocks of zeros, become zero runs. NEW.layout is a layer over\n"
	"BASE.layout: it names the base by its layout digest and records where it is (its\n"
	"path relative to NEW.layout's directory); opening NEW.layout finds the base there,\n"
	"else as DIR/<digest hex>.layout beside NEW.layout, and refuses a file with another\n"
	"digest. Commits chain: BASE.layout may itself be a commit. NEW.layout is written\n"
	"atomically and serves, exports, warms and pushes like any layout; it may not be a\n"
	"layout of the chain it is written over. A DELTA is first unpacked into a temporary\n"
	"overlay beside NEW.layout (sparse: about the delta's size), removed at the end. An\n"
	"overlay a server has open is refused. Ctrl-C or SIGTERM stops it, removes what it\n"
	"wrote, and exits 130.\n"
	"\n"
	"options:\n"
	"      --layout FILE       the base layout the overlay or delta belongs to\n"
	"  -s, --store DIR         the chunk store (the base's chunks' store); new chunks go\n"
	"                          there\n"
	"  -o FILE                 the new layout\n"
	"      --flatten           write a layout of the whole disk that needs no base layout\n"
	"                          file (it still uses the base's chunks)\n"
	"      --level N           zstd level, 1..19 (default 3)\n"
	"      --json              print the summary as one JSON object: blocks, zero_blocks,\n"
	"                          chunks, new_chunks, new_bytes, layout, layout_digest,\n"
	"                          parent (the hint recorded; absent with --flatten), seconds\n"
	"  -h, --help              this text\n"
	"\n"
	"On a terminal a progress line shows how many of the written blocks are done.\n";

static void commit_progress(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	if (log_progress_due())
		log_progress("committing: %llu%% (%llu of %llu blocks)",
			     (unsigned long long)(done * 100 / (total ? total : 1)),
			     (unsigned long long)done, (unsigned long long)total);
}

static int commit_json(const struct blkd_commit_opts *o, const struct blkd_commit_result *r,
		       double secs)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	json_field_u64(&b, "blocks", r->blocks);
	json_field_u64(&b, "zero_blocks", r->zero_blocks);
	json_field_u64(&b, "chunks", r->chunks);
	json_field_u64(&b, "new_chunks", r->new_chunks);
	json_field_u64(&b, "new_bytes", r->new_bytes);
	cli_json_path(&b, "layout", o->out_path);
	cli_json_digest(&b, "layout_digest", r->digest);
	if (r->hint[0])
		cli_json_path(&b, "parent", r->hint);
	json_field_fixed(&b, "seconds", secs, 3);
	json_buf_puts(&b, "}");
	return cli_json_print(&b);
}

static int commit_run(struct blkd_commit_opts *o, bool json)
{
	struct blkd_commit_result r;
	char why[2 * PATH_MAX + 256], h1[32], h2[32], hex[SHA256_HEX_LEN + 1];
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	o->progress = commit_progress;
	o->cancel = cli_interrupt_catch();
	ret = blkd_commit(o, &r, why, sizeof(why));
	log_progress_done();
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		return ret == -ECANCELED ? CLI_EXIT_INTERRUPTED : 1;
	}
	if (json)
		return commit_json(o, &r, clock_ms_since(&t0) / 1e3);
	sha256_to_hex(r.digest, hex);
	printf("committed %llu blocks (%s) as %llu chunks (%llu new, %s stored)",
	       (unsigned long long)r.blocks, size_human(r.blocks * 4096, h1, sizeof(h1)),
	       (unsigned long long)r.chunks, (unsigned long long)r.new_chunks,
	       size_human(r.new_bytes, h2, sizeof(h2)));
	if (r.zero_blocks)
		printf(", %llu zeroed blocks", (unsigned long long)r.zero_blocks);
	printf(" \u2192 %s (sha256:%s)\n", o->out_path, hex);
	return 0;
}

int cmd_commit(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "layout", required_argument, NULL, 'B' },
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "flatten", no_argument, NULL, 'F' },
		{ "level", required_argument, NULL, 'L' },
		{ "json", no_argument, NULL, 'J' },
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct blkd_commit_opts o = { .level = CHUNK_LEVEL_DEFAULT };
	bool json = false;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 'B': o.base_path = optarg; break;
		case 's': o.store_dir = optarg; break;
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			o.out_path = optarg;
			break;
		case 'F': o.flatten = true; break;
		case 'L':
			if (cli_parse_level(optarg, &o.level))
				return EXIT_USAGE;
			break;
		case 'J': json = true; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(commit_usage, stdout); return 0;
		default: return cli_bad_option("commit", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing OVERLAY or DELTA (see lazyblk commit --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!o.base_path)
		return cli_usage_error("missing --layout BASE.layout");
	if (!o.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!o.out_path)
		return cli_usage_error("missing -o NEW.layout");
	o.src_path = argv[optind];
	return commit_run(&o, json);
}
