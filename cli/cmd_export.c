/* SPDX-License-Identifier: MIT */
/* lazyblk export: every block of a layout, through the image disk's read path, into a raw disk. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "../blkd/export/file_export.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char export_usage[] =
	"usage: lazyblk export IMAGE.layout|REF --store DIR -o DISK.raw\n"
	"              [--mem-cache BYTES]\n"
	"              [--remote URL [--cache-size BYTES]] [--fetch-concurrency N]\n"
	"              [--fetch-timeout SECS] [--fetch-retries N] [--json]\n"
	"\n"
	"Materialize every block of a layout into a raw disk image of the layout's size:\n"
	"metadata blocks from the layout, data blocks from the store's chunks (each chunk\n"
	"verified against its sha256), zeros elsewhere. All-zero blocks are not written, so\n"
	"DISK.raw is sparse. It is written to a file without a name, made durable, and then\n"
	"named DISK.raw (by way of DISK.raw.tmp.PID, renamed into place), so DISK.raw is\n"
	"either complete or untouched, and an export that dies leaves nothing behind (on a\n"
	"filesystem without O_TMPFILE: DISK.raw.tmp.XXXXXX from the start). Ctrl-C or\n"
	"SIGTERM stops it, removes what it wrote, and exits 130.\n"
	"\n"
	"options:\n"
	"  -s, --store DIR         the chunk store holding the image's chunks (with --remote:\n"
	"                          the local cache, created if missing)\n"
	"  -o, --output FILE       the raw disk image to write\n"
	"      --mem-cache BYTES   decompressed chunks kept in memory while reading (default\n"
	"                          64M); a chunk shared by far-apart files may be read again\n"
	"      --json              print the summary as one JSON object: layout, output,\n"
	"                          disk_bytes, mapped_bytes, written_bytes, chunks,\n"
	"                          chunk_loads, seconds, and cas (the store and remote\n"
	"                          counters, as serve --stats-json names them)\n"
	"%s"
	"  -h, --help              this text\n"
	"\n"
	"On a terminal a progress line shows how much of the disk is done.\n";

static void export_progress(void *arg, uint64_t done, uint64_t total)
{
	char h1[32], h2[32];

	(void)arg;
	if (log_progress_due())
		log_progress("exporting: %llu%% (%s of %s)",
			     (unsigned long long)(done * 100 / (total ? total : 1)),
			     size_human(done, h1, sizeof(h1)), size_human(total, h2, sizeof(h2)));
}

static int export_json(const struct blkd_export_opts *o, const struct blkd_export_stats *st)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	cli_json_path(&b, "layout", o->disk.layout_path);
	cli_json_path(&b, "output", o->out_path);
	json_field_u64(&b, "disk_bytes", st->disk_bytes);
	json_field_u64(&b, "mapped_bytes", st->mapped_bytes);
	json_field_u64(&b, "written_bytes", st->written_bytes);
	json_field_u64(&b, "chunks", st->chunks);
	json_field_u64(&b, "chunk_loads", st->chunk_loads);
	json_field_fixed(&b, "seconds", st->seconds, 3);
	json_buf_puts(&b, ",\"cas\":{");
	disk_stats_cas_json(&st->cas, &b);
	json_buf_puts(&b, "}}");
	return cli_json_print(&b);
}

static int export_run(struct blkd_export_opts *o, bool json)
{
	struct blkd_export_stats st;
	struct json_buf b = { 0 };
	char why[PATH_MAX + 128], h1[32], h2[32];
	int ret;

	o->progress = export_progress;
	o->cancel = cli_interrupt_catch();
	ret = blkd_export(o, &st, why, sizeof(why));
	log_progress_done();
	if (ret) {
		if (why[0])
			log_error("%s", why);
		/* else the chunk tiers said why */
		return ret == -ECANCELED ? CLI_EXIT_INTERRUPTED : 1;
	}
	if (json)
		return export_json(o, &st);
	printf("exported %s to %s: %s disk, %s of non-zero blocks, %llu chunks",
	       o->disk.layout_path, o->out_path, size_human(st.disk_bytes, h1, sizeof(h1)),
	       size_human(st.written_bytes, h2, sizeof(h2)), (unsigned long long)st.chunks);
	if (st.chunk_loads > st.chunks)
		printf(" (%llu loads: some read again after the memory cache let them go)",
		       (unsigned long long)st.chunk_loads);
	printf(", %.2f s\n", st.seconds);
	if (o->disk.tiers.remote_url) {
		disk_stats_cas_text(&st.cas, &b);
		if (b.p)
			fputs(b.p, stdout);
		json_buf_free(&b);
	}
	return 0;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "mem-cache", required_argument, NULL, 'M' },
		{ "json", no_argument, NULL, 'J' },
		CLI_REMOTE_OPTIONS,
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cli_remote rem = { 0 };
	struct cli_image img;
	struct blkd_export_opts o = { 0 };
	bool json = false;
	uint64_t v;
	int c, r;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.disk.tiers.store_dir = optarg; break;
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			o.out_path = optarg;
			break;
		case 'M':
			if (cli_parse_size("--mem-cache", optarg, 1, 1, UINT64_MAX, &v))
				return EXIT_USAGE;
			o.disk.mem_cache = v;
			break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'J': json = true; break;
		case 'h': printf(export_usage, cli_remote_help); return 0;
		default:
			r = cli_remote_option(&rem, c, optarg);
			if (r < 0)
				return EXIT_USAGE;
			if (!r)
				return cli_bad_option("export", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing IMAGE.layout (see lazyblk export --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!o.disk.tiers.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!o.out_path)
		return cli_usage_error("missing -o DISK.raw");
	if (cli_image_resolve(argv[optind], o.disk.tiers.store_dir, &rem, &img, &o.disk.layout_path))
		return 1;
	o.disk.layout_fetched = img.f != NULL;
	if (cli_remote_check(&rem)) {
		cli_image_free(&img);
		return EXIT_USAGE;
	}
	cli_remote_to_source(&rem, &o.disk.tiers);
	log_first_error_only(true); /* reader threads may fail at once: say it once */
	r = export_run(&o, json);
	cli_image_free(&img);
	return r;
}
