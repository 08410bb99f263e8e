/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/chunk.h"
#include "../cas/import/import.h"
#include "../cas/import/oci_files.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char import_usage[] =
	"usage: lazyblk import SRC --store DIR -o IMAGE.manifest [options]\n"
	"\n"
	"Turn a container image into content-addressed chunks in a store plus one manifest.\n"
	"Ctrl-C or SIGTERM stops it: the chunks written so far stay in the store (cas gc\n"
	"removes them), no manifest is written, nothing is left in STORE/tmp, exit 130.\n"
	"\n"
	"SRC:\n"
	"  DIR                      a directory tree (everything lstat/listxattr see)\n"
	"  FILE.tar[.gz|.zst|.xz]   a tar archive (PAX, GNU long names, sparse files,\n"
	"                           xattrs, POSIX ACLs)\n"
	"  oci:DIR[:TAG]            an OCI image layout (default tag: the only image)\n"
	"  oci-archive:FILE[:TAG]   a tar of an OCI image layout (skopeo oci-archive:)\n"
	"  docker-archive:FILE.tar  the output of docker save / skopeo docker-archive\n"
	"  docker://HOST[:PORT]/REPO[:TAG|@sha256:DIGEST]\n"
	"                           an image in a registry (default tag: latest), over\n"
	"                           https (--insecure: http); credentials from\n"
	"                           LAZYBLK_REMOTE_USER and LAZYBLK_REMOTE_PASSWORD\n"
	"An image index (a multi-platform image) is resolved to the --platform asked,\n"
	"else this host's (linux/amd64 on x86-64). Blobs fetched from a registry are\n"
	"checked against their digests as they arrive (4 at a time), staged in\n"
	"STORE/tmp, then imported as from an OCI layout. The members of an oci-archive\n"
	"must be the files of a layout (oci-layout, index.json, blobs/sha256/HEX): any\n"
	"other is refused.\n"
	"Member names of a tar or a layer are relative to the root (\"/etc/x\" is etc/x,\n"
	"\"/\" and \"./\" the root itself); a \"..\" that climbs out of it is refused.\n"
	"A path deeper than 2048 levels, in a tree or an archive, is refused. A tar FILE,\n"
	"a docker-archive FILE and the files of an OCI layout must be regular files (not\n"
	"pipes); a blob that is sparse (an OCI blob file with holes, a sparse member of a\n"
	"docker-archive) is refused.\n"
	"User and group names in a tar's ACLs are looked up in this machine's /etc/passwd\n"
	"and /etc/group, as tar -x does; an ACL naming one unknown here is left out.\n"
	"\n"
	"A DIR holding an OCI layout (DIR/oci-layout) or an unpacked docker archive\n"
	"(DIR/manifest.json), and a FILE.tar that is a docker or OCI image archive, are\n"
	"refused rather than imported as files: the message names the form to use. Any\n"
	"other WORD: or WORD:// prefix (containers-storage:, dir:) is an unknown\n"
	"transport, unless SRC is a path that exists.\n"
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
	"      --platform OS/ARCH[/VARIANT]\n"
	"                           the image of an index to import (linux/arm64/v8)\n"
	"      --insecure           docker://: plain HTTP instead of https\n"
	"      --json               print the summary as one JSON object: src, entries,\n"
	"                           file_bytes, chunks, new_chunks, new_bytes, dup_chunks,\n"
	"                           seconds, manifest, manifest_digest\n"
	"  -h, --help               this text\n"
	"\n"
	"On a terminal a progress line shows the bytes fetched (docker://), then the\n"
	"files and bytes read and stored.\n";

/*
 * The progress line: "importing SRC: [P%, ]N files, SIZE read, SIZE stored", then
 * while the last chunks are compressed ", compressing: N of M chunks (P%)"; before, for a
 * registry, "fetching SRC: SIZE of SIZE (P%)".
 */
static void import_progress_line(void *arg, const struct import_progress *p)
{
	char h1[32], h2[32], pc[24] = "";

	if (!log_progress_due())
		return;
	if (p->fetching) {
		size_human(p->fetched, h1, sizeof(h1));
		size_human(p->fetch_size, h2, sizeof(h2));
		log_progress("fetching %s: %s of %s (%llu%%)", (const char *)arg, h1, h2,
			     (unsigned long long)(p->fetch_size ? p->fetched * 100 / p->fetch_size
								: 100));
		return;
	}
	size_human(p->bytes, h1, sizeof(h1));
	size_human(p->stored_bytes, h2, sizeof(h2));
	if (p->src_size && !p->finishing)
		snprintf(pc, sizeof(pc), "%llu%%, ",
			 (unsigned long long)(p->src_done * 100 / p->src_size));
	if (p->finishing)
		log_progress("importing %s: %llu files, %s read, %s stored, compressing: %llu of "
			     "%llu chunks (%llu%%)", (const char *)arg,
			     (unsigned long long)p->files, h1, h2,
			     (unsigned long long)p->chunks_done, (unsigned long long)p->chunks,
			     (unsigned long long)(p->chunks ? p->chunks_done * 100 / p->chunks
							    : 100));
	else
		log_progress("importing %s: %s%llu files, %s read, %s stored", (const char *)arg,
			     pc, (unsigned long long)p->files, h1, h2);
}

static int import_summary(const struct import_opts *o, const struct import_result *res,
			  bool json)
{
	char hex[SHA256_HEX_LEN + 1], h1[32], h2[32];
	struct json_buf b = { 0 };

	if (json) {
		json_buf_puts(&b, "{");
		cli_json_path(&b, "src", o->src);
		json_field_u64(&b, "entries", res->entries);
		json_field_u64(&b, "file_bytes", res->file_bytes);
		json_field_u64(&b, "chunks", res->image_chunks);
		json_field_u64(&b, "new_chunks", res->chunks.new_chunks);
		json_field_u64(&b, "new_bytes", res->chunks.new_bytes);
		json_field_u64(&b, "dup_chunks", res->chunks.dup_chunks);
		json_field_fixed(&b, "seconds", res->seconds, 3);
		cli_json_path(&b, "manifest", o->output);
		cli_json_digest(&b, "manifest_digest", res->digest);
		json_buf_puts(&b, "}");
		return cli_json_print(&b);
	}
	sha256_to_hex(res->digest, hex);
	printf("imported %s: %llu entries, %s in %llu chunks (%llu new, %s stored), %.2f s\n"
	       "manifest %s sha256:%s\n",
	       o->src, (unsigned long long)res->entries,
	       size_human(res->file_bytes, h1, sizeof(h1)),
	       (unsigned long long)res->image_chunks, (unsigned long long)res->chunks.new_chunks,
	       size_human(res->chunks.new_bytes, h2, sizeof(h2)), res->seconds, o->output, hex);
	return 0;
}

static const struct option import_options[] = {
	{ "store", required_argument, NULL, 's' },
	{ "output", required_argument, NULL, 'o' },
	{ "chunk-size", required_argument, NULL, 'C' },
	{ "level", required_argument, NULL, 'L' },
	{ "pack-max", required_argument, NULL, 'P' },
	{ "threads", required_argument, NULL, 'j' },
	{ "platform", required_argument, NULL, 'F' },
	{ "insecure", no_argument, NULL, 'K' },
	CLI_LOG_OPTIONS,
	{ "json", no_argument, NULL, 'J' },
	{ "init", no_argument, NULL, 'I' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

int cmd_import(int argc, char **argv)
{

	struct import_opts o = { .chunk_size = CHUNK_SIZE_DEFAULT, .level = CHUNK_LEVEL_DEFAULT,
				 .progress = import_progress_line, .notes = CLI_NOTES };
	struct import_result res;
	struct oci_platform plat;
	char why[4096];
	bool json = false;
	int64_t pack_max = -1;
	uint64_t v;
	int c, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:j:hvqp", import_options, NULL)) != -1) {
		switch (c) {
		case 's': o.store_dir = optarg; break;
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			o.output = optarg;
			break;
		case 'I': o.init = true; break;
		case 'C':
			if (cli_parse_chunk_size(optarg, &o.chunk_size))
				return EXIT_USAGE;
			break;
		case 'P':
			if (cli_parse_size("--pack-max", optarg, 1, 0, CHUNK_SIZE_MAX, &v))
				return EXIT_USAGE;
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
		case 'F':
			if (oci_platform_parse(optarg, &plat))
				return cli_usage_error("--platform: '%s' is not OS/ARCH[/VARIANT] "
						       "(e.g. linux/arm64)", optarg);
			o.platform = optarg;
			break;
		case 'K': o.insecure = true; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'J': json = true; break;
		case 'h': fputs(import_usage, stdout); return 0;
		default: return cli_bad_option("import", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing SRC (see lazyblk import --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	o.src = argv[optind];
	if (o.insecure && strncmp(o.src, "docker://", 9))
		return cli_usage_error("--insecure is for docker:// sources only");
	if (!o.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!o.output)
		return cli_usage_error("missing -o IMAGE.manifest");
	o.pack_max = pack_max < 0 ? o.chunk_size / 8 : (uint32_t)pack_max;
	if (o.pack_max > o.chunk_size)
		return cli_usage_error("--pack-max must not exceed --chunk-size");
	o.progress_arg = argv[optind];
	o.cancel = cli_interrupt_catch();
	ret = import_run(&o, &res, why, sizeof(why));
	log_progress_done();
	if (ret) {
		if (why[0])
			log_error("%s", why);
		/* else the layer below said why */
		return ret == -ECANCELED ? CLI_EXIT_INTERRUPTED : 1;
	}
	return import_summary(&o, &res, json);
}
