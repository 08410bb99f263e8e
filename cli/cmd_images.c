/* SPDX-License-Identifier: MIT */
/* lazyblk images ls: the images published on a remote (push by tag or name). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/remote/image_ref.h"
#include "../common/esc.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char images_usage[] =
	"usage: lazyblk images ls --remote URL [--json]\n"
	"              [--fetch-timeout SECS] [--fetch-retries N]\n"
	"\n"
	"List the images and VM snapshots published on a remote by `lazyblk push IMAGE.layout\n"
	"--remote REF` and `lazyblk push SNAPSHOT --remote REF`, one line each: name, kind\n"
	"(image or vm-snapshot), top layout digest (a snapshot: its disk's; '-' without one),\n"
	"disk size, layers (layout files of the chain), chunks.\n"
	"\n"
	"  oci://HOST[:PORT]/REPO         the tags of REPO whose document is a lazyblk image\n"
	"                                 (other tags are left out; tags that are not valid\n"
	"                                 tag names are skipped, and counted)\n"
	"  http(s)://HOST[:PORT]/PATH/    the names in PATH/images/index.json\n"
	"\n"
	"options:\n"
	"      --remote URL           the registry repository or store (credentials:\n"
	"                             LAZYBLK_REMOTE_USER and LAZYBLK_REMOTE_PASSWORD)\n"
	"      --json                 one JSON object: remote, images (name, kind,\n"
	"                             layout_digest, disk_size, layers, chunks; a snapshot\n"
	"                             also snapshot, its document's digest), tags_skipped,\n"
	"                             tags_truncated\n"
	"      --fetch-timeout SECS   per request attempt (default 30)\n"
	"      --fetch-retries N      retries of a failed request (default 4)\n"
	"  -h, --help                 this text\n"
	"\n"
	"See docs/images.md.\n";

static int images_json(const char *url, const struct image_entry *v, size_t n,
		       const struct remote_tags *tags)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	cli_json_path(&b, "remote", url);
	json_buf_puts(&b, ",\"images\":[");
	for (size_t i = 0; i < n; i++) {
		json_buf_puts(&b, i ? ",{" : "{");
		cli_json_path(&b, "name", v[i].name);
		json_field_str(&b, "kind", v[i].d.has_snapshot ? "vm-snapshot" : "image");
		if (v[i].d.n_layouts)
			cli_json_digest(&b, "layout_digest", v[i].d.layouts[0].digest);
		if (v[i].d.has_snapshot)
			cli_json_digest(&b, "snapshot", v[i].d.snapshot.sha);
		json_field_u64(&b, "disk_size", v[i].d.disk_size);
		json_field_u64(&b, "layers", v[i].d.n_layouts);
		json_field_u64(&b, "chunks", v[i].d.chunks);
		json_buf_puts(&b, "}");
	}
	json_buf_puts(&b, "]");
	json_field_u64(&b, "tags_skipped", tags->skipped);
	json_field_bool(&b, "tags_truncated", tags->truncated);
	json_buf_puts(&b, "}");
	return cli_json_print(&b);
}

static int images_ls(const struct cli_remote *rem, bool json)
{
	struct remote_opts ro = { .url = rem->url, .timeout_ms = rem->timeout_ms,
				  .retries = rem->retries };
	struct image_entry *v;
	char why[PATH_MAX + 256], h[32], hex[SHA256_HEX_LEN + 1], name[ESC_LEN(128)];
	struct remote_tags tags;
	size_t n;
	int ret;

	ret = image_list(&ro, &v, &n, &tags, why, sizeof(why));
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		return 1;
	}
	if (tags.skipped)
		log_warn("%llu tag%s of the registry's list skipped: not valid tag names",
			 (unsigned long long)tags.skipped, tags.skipped == 1 ? "" : "s");
	if (tags.truncated)
		log_warn("the registry's tag list has more than %d pages: the tags past them are "
			 "not listed", REMOTE_TAG_PAGES_MAX);
	if (json) {
		ret = images_json(rem->url, v, n, &tags);
	} else {
		for (size_t i = 0; i < n; i++) {
			if (v[i].d.n_layouts)
				sha256_to_hex(v[i].d.layouts[0].digest, hex);
			esc_str(v[i].name, name, sizeof(name));
			printf("%-24s %-11s %s%-12.12s  %10s  %u layer%s  %llu chunks\n", name,
			       v[i].d.has_snapshot ? "vm-snapshot" : "image",
			       v[i].d.n_layouts ? "sha256:" : "-      ", v[i].d.n_layouts ? hex : "",
			       size_human(v[i].d.disk_size, h, sizeof(h)), v[i].d.n_layouts,
			       v[i].d.n_layouts == 1 ? " " : "s", (unsigned long long)v[i].d.chunks);
		}
	}
	image_list_free(v, n);
	return ret;
}

int cmd_images(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'J' },
		CLI_REMOTE_OPTIONS,
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cli_remote rem = { 0 };
	bool json = false;
	int c, r;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(images_usage, stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "ls"))
		return cli_usage_error("images: want 'ls' (see lazyblk images --help)");
	optind = 2;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hvqp", opts, NULL)) != -1) {
		switch (c) {
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'J': json = true; break;
		case 'h': fputs(images_usage, stdout); return 0;
		case CLI_O_CACHE_SIZE: case CLI_O_NO_PLAIN: case CLI_O_FETCH_CONC:
			return cli_usage_error("%s is not an option of images ls", argv[optind - 1]);
		default:
			r = cli_remote_option(&rem, c, optarg);
			if (r < 0)
				return EXIT_USAGE;
			if (!r)
				return cli_bad_option("images", argv, c);
		}
	}
	if (optind < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (!rem.url)
		return cli_usage_error("missing --remote URL (see lazyblk images --help)");
	return images_ls(&rem, json);
}
