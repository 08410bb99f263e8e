/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/chunk.h"
#include "../cas/import/import.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char import_usage[] =
	"usage: lazyblk import SRC --store DIR -o IMAGE.manifest [options]\n"
	"\n"
	"Turn a container image into content-addressed chunks in a store plus one manifest.\n"
	"\n"
	"SRC:\n"
	"  DIR                      a directory tree (everything lstat/listxattr see)\n"
	"  FILE.tar[.gz|.zst|.xz]   a tar archive (PAX, GNU long names, sparse files)\n"
	"  oci:DIR[:TAG]            an OCI image layout (default tag: the only image)\n"
	"  docker-archive:FILE.tar  the output of docker save / skopeo docker-archive\n"
	"\n"
	"A DIR holding an OCI layout (DIR/oci-layout) or an unpacked docker archive\n"
	"(DIR/manifest.json), and a FILE.tar that is a docker or OCI image archive, are\n"
	"refused rather than imported as files: the message names the form to use. Any\n"
	"other WORD: or WORD:// prefix (docker://, oci-archive:) is an unknown transport,\n"
	"unless SRC is a path that exists.\n"
	"\n"
	"options:\n"
	"  -s, --store DIR          chunk store: made if missing; an existing DIR must be\n"
	"                           empty or a store (DIR/lazyblk-store)\n"
	"      --init               make DIR a store even if it holds other files\n"
	"  -o, --output FILE        manifest to write (atomically)\n"
	"      --chunk-size BYTES   largest chunk, 4K..64M (default 1M)\n"
	"      --pack-max BYTES     files up to this size are packed, several to a chunk\n"
	"                           (default: chunk size / 8; 0: one chunk per file)\n"
	"      --level N            zstd level, 1..19 (default 3)\n"
	"  -j, --threads N          hashing/compression threads (default: all CPUs)\n"
	"  -h, --help               this text\n";

/* The progress line: "importing SRC: N files, SIZE". */
static void import_progress_line(void *arg, uint64_t files, uint64_t bytes)
{
	char hb[32];

	if (!log_progress_due())
		return;
	log_progress("importing %s: %llu files, %s", (const char *)arg,
		     (unsigned long long)files, size_human(bytes, hb, sizeof(hb)));
}

int cmd_import(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "chunk-size", required_argument, NULL, 'C' },
		{ "level", required_argument, NULL, 'L' },
		{ "pack-max", required_argument, NULL, 'P' },
		{ "threads", required_argument, NULL, 'j' },
		{ "init", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct import_opts o = { .chunk_size = CHUNK_SIZE_DEFAULT, .level = CHUNK_LEVEL_DEFAULT,
				 .progress = import_progress_line, .notes = CLI_NOTES };
	struct import_result res;
	char hex[SHA256_HEX_LEN + 1], h1[32], h2[32], why[4096];
	int64_t pack_max = -1;
	uint64_t v;
	int c, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:j:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.store_dir = optarg; break;
		case 'o': o.output = optarg; break;
		case 'I': o.init = true; break;
		case 'C':
			if (cli_parse_chunk_size(optarg, &o.chunk_size))
				return EXIT_USAGE;
			break;
		case 'P':
			if (size_parse(optarg, &v) || v > CHUNK_SIZE_MAX)
				return cli_usage_error("--pack-max: '%s' is not a size up to 64M", optarg);
			pack_max = (int64_t)v;
			break;
		case 'L':
			if (cli_parse_level(optarg, &o.level))
				return EXIT_USAGE;
			break;
		case 'j':
			o.threads = (unsigned)atoi(optarg);
			if (o.threads < 1 || o.threads > 256)
				return cli_usage_error("--threads: '%s' is not 1..256", optarg);
			break;
		case 'h': fputs(import_usage, stdout); return 0;
		default: return cli_bad_option("import", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing SRC (see lazyblk import --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	o.src = argv[optind];
	if (!o.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!o.output)
		return cli_usage_error("missing -o IMAGE.manifest");
	o.pack_max = pack_max < 0 ? o.chunk_size / 8 : (uint32_t)pack_max;
	if (o.pack_max > o.chunk_size)
		return cli_usage_error("--pack-max must not exceed --chunk-size");
	o.progress_arg = argv[optind];
	ret = import_run(&o, &res, why, sizeof(why));
	log_progress_done();
	if (ret) {
		if (why[0])
			log_error("%s", why);
		return 1; /* else the layer below said why */
	}
	sha256_to_hex(res.digest, hex);
	printf("imported %s: %llu entries, %s in %llu chunks (%llu new, %s stored), %.2f s\n"
	       "manifest %s sha256:%s\n",
	       o.src, (unsigned long long)res.entries,
	       size_human(res.file_bytes, h1, sizeof(h1)),
	       (unsigned long long)res.image_chunks, (unsigned long long)res.chunks.new_chunks,
	       size_human(res.chunks.new_bytes, h2, sizeof(h2)), res.seconds, o.output, hex);
	return 0;
}
