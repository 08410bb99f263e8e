/* SPDX-License-Identifier: MIT */
/* lazyblk repack: the boot set a trace read, in chunks of its own (cas/repack.h). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/chunk.h"
#include "../cas/repack.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char repack_usage[] =
	"usage: lazyblk repack IMAGE.manifest --trace TRACE --store DIR -o NEW.manifest\n"
	"                      [--remote URL] [--chunk-size BYTES] [--level N]\n"
	"\n"
	"Write a manifest of the same image whose boot set - the file byte ranges the trace\n"
	"(serve or run --trace-record) read - is packed into chunks of its own, in the order\n"
	"the trace read it: a cold start then fetches little more than the bytes it reads, in\n"
	"few requests. The rest of each file keeps its chunks, so only the boot set's chunks are\n"
	"added to the store (deduplicated against it). The file tree, and the filesystem mkfs\n"
	"makes of it, are unchanged. A trace of an older version of the image counts for the\n"
	"files that still exist. Then: lazyblk mkfs NEW.manifest --order TRACE, and publish the\n"
	"new chunks (lazyblk push).\n"
	"\n"
	"options:\n"
	"      --trace TRACE       the trace to pack for\n"
	"  -s, --store DIR         the store holding the image's chunks; the new ones go there\n"
	"  -o FILE                 the new manifest (written atomically)\n"
	"      --remote URL        fetch chunks missing from the store from URL (verified)\n"
	"      --chunk-size BYTES  size of the boot chunks (default: the image's chunk size)\n"
	"      --level N           zstd level, 1..19 (default 3)\n"
	"  -h, --help              this text\n";

int cmd_repack(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "trace", required_argument, NULL, 'T' },
		{ "store", required_argument, NULL, 's' },
		{ "remote", required_argument, NULL, 'R' },
		{ "chunk-size", required_argument, NULL, 'C' },
		{ "level", required_argument, NULL, 'L' },
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct repack_opts o = { .level = CHUNK_LEVEL_DEFAULT };
	struct repack_result res;
	char hex[SHA256_HEX_LEN + 1], b1[32], why[4096];
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 'T': o.trace_path = optarg; break;
		case 's': o.src.store_dir = optarg; break;
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			o.out_path = optarg;
			break;
		case 'R': o.src.remote_url = optarg; break;
		case 'C':
			if (cli_parse_chunk_size(optarg, &o.chunk_size))
				return EXIT_USAGE;
			break;
		case 'L':
			if (cli_parse_level(optarg, &o.level))
				return EXIT_USAGE;
			break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(repack_usage, stdout); return 0;
		default: return cli_bad_option("repack", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing IMAGE.manifest (see lazyblk repack --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!o.trace_path)
		return cli_usage_error("missing --trace TRACE");
	if (!o.src.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!o.out_path)
		return cli_usage_error("missing -o NEW.manifest");
	o.manifest_path = argv[optind];
	if (repack_run(&o, &res, why, sizeof(why))) {
		if (why[0])
			log_error("%s", why);
		return 1; /* else the chunk tiers said why */
	}
	printf("repacked %s: %llu traced files, %s of boot set in %llu chunks (%llu new, %s "
	       "stored)", o.manifest_path, (unsigned long long)res.files,
	       size_human(res.boot_bytes, b1, sizeof(b1)), (unsigned long long)res.chunks.chunks,
	       (unsigned long long)res.chunks.new_chunks,
	       size_human(res.chunks.new_bytes, hex, sizeof(hex)));
	if (res.files_missing)
		printf("; %llu traced files are not in this image",
		       (unsigned long long)res.files_missing);
	sha256_to_hex(res.digest, hex);
	printf("\nmanifest %s sha256:%s\n", o.out_path, hex);
	return 0;
}
