/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/manifest.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/sha256.h"
#include "../common/size.h"
#include "../common/uuid.h"
#include "../ext4gen/mkfs.h"
#include "cli.h"

static const char mkfs_usage[] =
	"usage: lazyblk mkfs IMAGE.manifest -o IMAGE.layout [options]\n"
	"\n"
	"Synthesize the metadata of an ext4 filesystem holding the image (no file data is\n"
	"read or copied) and the map from its data blocks to chunks in the store.\n"
	"The filesystem has the features of a current mke2fs -t ext4 (journal, extents,\n"
	"64bit, flex_bg, huge_file, dir_nlink, extra_isize, metadata_csum) and hashed\n"
	"(htree) directories. The same manifest and options give a byte-identical layout.\n"
	"\n"
	"options:\n"
	"  -o, --output FILE     the layout to write (atomically)\n"
	"      --size BYTES      filesystem size (default: used space + 1G, whole groups)\n"
	"      --journal BYTES   journal size, 4M to 4G (default 64M)\n"
	"      --inodes N        inode count (default: one per 16K, at least entries + 25%)\n"
	"      --label NAME      volume label (up to 16 bytes)\n"
	"      --uuid UUID       filesystem UUID (default: derived from the manifest)\n"
	"      --order FILE      paths (one per line), or a trace (serve --trace-record),\n"
	"                        whose files' data is placed first, in that order\n"
	"      --json            print the summary as one JSON object: manifest, layout,\n"
	"                        layout_digest, size_bytes, blocks, groups, inodes,\n"
	"                        used_blocks, meta_blocks, data_runs, uuid\n"
	"  -h, --help            this text\n";

static int mkfs_summary(const char *manifest, const char *out, const struct mkfs_result *res,
			bool json)
{
	char hex[SHA256_HEX_LEN + 1], uuid[37];
	struct json_buf b = { 0 };

	if (!json) {
		sha256_to_hex(res->digest, hex);
		printf("mkfs %s: %llu MiB ext4, %llu groups, %llu inodes, %llu blocks used, "
		       "%llu metadata blocks stored, %llu data runs\nlayout %s sha256:%s\n",
		       manifest, (unsigned long long)(res->blocks >> 8),
		       (unsigned long long)res->groups, (unsigned long long)res->inodes,
		       (unsigned long long)res->used_blocks, (unsigned long long)res->meta_blocks,
		       (unsigned long long)res->data_runs, out, hex);
		return 0;
	}
	for (int i = 0, n = 0; i < 16; i++)
		n += snprintf(uuid + n, sizeof(uuid) - (size_t)n, "%s%02x",
			      i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", res->uuid[i]);
	json_buf_puts(&b, "{");
	cli_json_path(&b, "manifest", manifest);
	cli_json_path(&b, "layout", out);
	cli_json_digest(&b, "layout_digest", res->digest);
	json_field_u64(&b, "size_bytes", res->blocks * 4096);
	json_field_u64(&b, "blocks", res->blocks);
	json_field_u64(&b, "groups", res->groups);
	json_field_u64(&b, "inodes", res->inodes);
	json_field_u64(&b, "used_blocks", res->used_blocks);
	json_field_u64(&b, "meta_blocks", res->meta_blocks);
	json_field_u64(&b, "data_runs", res->data_runs);
	json_field_str(&b, "uuid", uuid);
	json_buf_puts(&b, "}");
	return cli_json_print(&b);
}

enum { O_JSON = 0x200 };
static const struct option mkfs_options[] = {
	{ "output", required_argument, NULL, 'o' },
	{ "size", required_argument, NULL, 'S' },
	{ "journal", required_argument, NULL, 'J' },
	{ "inodes", required_argument, NULL, 'I' },
	{ "label", required_argument, NULL, 'L' },
	{ "uuid", required_argument, NULL, 'U' },
	{ "order", required_argument, NULL, 'O' },
	CLI_LOG_OPTIONS,
	{ "json", no_argument, NULL, O_JSON },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

int cmd_mkfs(int argc, char **argv)
{

	struct mkfs_opts o = { 0 };
	struct mkfs_result res;
	struct manifest *m;
	const char *out = NULL;
	char why[WHY_MAX] = "";
	uint8_t uuid[16];
	char err[PATH_MAX + 256];
	bool json = false;
	uint64_t v;
	int c, ret;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:hvqp", mkfs_options, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			out = optarg;
			break;
		case 'S':
			if (cli_parse_size("--size", optarg, 1, 8u << 20, UINT64_MAX, &v))
				return EXIT_USAGE;
			o.size = v;
			break;
		case 'J':
			/* the filesystem always has a journal: 0 is no size of one */
			if (cli_parse_size("--journal", optarg, 1, 4u << 20, 4ull << 30, &v))
				return EXIT_USAGE;
			o.journal_size = v;
			break;
		case 'I':
			if (size_parse(optarg, &v) || v == 0 || v > UINT32_MAX)
				return cli_usage_error("--inodes: '%s' is not a count", optarg);
			o.inodes = v;
			break;
		case 'L':
			if (strlen(optarg) > 16)
				return cli_usage_error("--label: longer than 16 bytes");
			o.label = optarg;
			break;
		case 'U':
			if (uuid_parse(optarg, strlen(optarg), uuid))
				return cli_usage_error("--uuid: '%s' is not a UUID", optarg);
			o.uuid = uuid;
			break;
		case 'O': o.order_file = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case O_JSON: json = true; break;
		case 'h': fputs(mkfs_usage, stdout); return 0;
		default: return cli_bad_option("mkfs", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing IMAGE.manifest (see lazyblk mkfs --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!out)
		return cli_usage_error("missing -o IMAGE.layout");
	ret = manifest_load(argv[optind], &m, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", argv[optind], why[0] ? why : strerror(-ret));
		return 1;
	}
	o.notes = CLI_NOTES;
	ret = mkfs_run(m, &o, out, &res, err, sizeof(err));
	manifest_free(m);
	if (ret)
		return cli_fail(1, err);
	return mkfs_summary(argv[optind], out, &res, json);
}
