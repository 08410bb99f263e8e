/* SPDX-License-Identifier: MIT */
/* lazyblk push: publish a store's chunks (all, or those of some layouts) to a remote. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/remote/push.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../ext4gen/refs.h"
#include "cli.h"

static const char push_usage[] =
	"usage: lazyblk push --store DIR --remote URL [IMAGE.layout|IMAGE.manifest ...]\n"
	"              [--fetch-concurrency N] [--fetch-timeout SECS] [--fetch-retries N]\n"
	"              [--json]\n"
	"\n"
	"Publish chunks to a remote: every chunk of the store, or only those the given layouts\n"
	"or manifests use. Each chunk is verified against its sha256 first (a corrupt chunk is never\n"
	"pushed) and uploaded only if the remote does not have it. Ctrl-C or SIGTERM stops it\n"
	"after the uploads under way (each chunk is on the remote whole or not at all; an OCI\n"
	"index is not published) and exits 130; pushing again sends only what is missing.\n"
	"\n"
	"  http(s)://HOST[:PORT]/PATH/   PUT PATH/chunks/xx/<sha256> (a WebDAV-enabled web\n"
	"                                server, or any server that accepts PUT)\n"
	"  oci://HOST[:PORT]/REPO[:TAG]  each chunk's zstd frame as a blob of REPO, then an\n"
	"                                image index under TAG (default lazyblk-chunks) that\n"
	"                                maps chunks to blobs, merged with what TAG held\n"
	"\n"
	"options:\n"
	"  -s, --store DIR            the store to publish from\n"
	"      --remote URL           where to (credentials: LAZYBLK_REMOTE_USER and\n"
	"                             LAZYBLK_REMOTE_PASSWORD)\n"
	"      --fetch-concurrency N  uploads at once (default 16)\n"
	"      --fetch-timeout SECS   per request attempt (default 30)\n"
	"      --fetch-retries N      retries of a failed request (default 4)\n"
	"      --json                 print the summary as one JSON object: remote, chunks,\n"
	"                             uploaded, uploaded_bytes, present, seconds\n"
	"  -h, --help                 this text\n"
	"\n"
	"On a terminal a progress line counts the chunks done.\n";

/* The chunks the layouts (or manifests) use, without duplicates. */
static int collect_images(struct chunk_refs *refs, char **paths, int n)
{
	for (int i = 0; i < n; i++) {
		const char *why = NULL;
		int ret = chunk_refs_add_file(refs, paths[i], &why);

		if (ret) {
			log_error("%s: %s", paths[i], why ? why : strerror(-ret));
			return ret;
		}
	}
	chunk_refs_finish(refs);
	return 0;
}

static void push_progress(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	if (log_progress_due())
		log_progress("pushing: %llu of %llu chunks", (unsigned long long)done,
			     (unsigned long long)total);
}

static int push_json(const struct cas_push_opts *o, const struct cas_push_stats *st)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	cli_json_path(&b, "remote", o->remote.url);
	json_field_u64(&b, "chunks", st->chunks);
	json_field_u64(&b, "uploaded", st->uploaded);
	json_field_u64(&b, "uploaded_bytes", st->uploaded_bytes);
	json_field_u64(&b, "present", st->present);
	json_field_fixed(&b, "seconds", st->seconds, 3);
	json_buf_puts(&b, "}");
	return cli_json_print(&b);
}

static int push_run(struct cas_push_opts *o, char **images, int n_images, bool json)
{
	struct chunk_refs refs = { 0 };
	struct cas_push_stats st;
	char why[PATH_MAX + 128], h[32];
	int ret;

	if (n_images) {
		ret = collect_images(&refs, images, n_images);
		if (ret) {
			chunk_refs_free(&refs);
			return 1;
		}
		o->chunks = (const uint8_t (*)[SHA256_LEN])refs.d;
		o->n_chunks = refs.n;
	}
	o->progress = push_progress;
	o->cancel = cli_interrupt_catch();
	ret = cas_push(o, &st, why, sizeof(why));
	log_progress_done();
	chunk_refs_free(&refs);
	if (ret) {
		if (why[0])
			log_error("%s", why);
		/* else the remote said why */
		return ret == -ECANCELED ? CLI_EXIT_INTERRUPTED : 1;
	}
	if (json)
		return push_json(o, &st);
	printf("pushed %llu chunks to %s: %llu uploaded (%s), %llu already there, %.2f s\n",
	       (unsigned long long)st.chunks, o->remote.url, (unsigned long long)st.uploaded,
	       size_human(st.uploaded_bytes, h, sizeof(h)), (unsigned long long)st.present,
	       st.seconds);
	return 0;
}

int cmd_push(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'J' },
		CLI_REMOTE_OPTIONS,
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cli_remote rem = { 0 };
	struct cas_push_opts o = { 0 };
	bool json = false;
	int c, r;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.store_dir = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'J': json = true; break;
		case 'h': fputs(push_usage, stdout); return 0;
		case CLI_O_CACHE_SIZE:
			return cli_usage_error("--cache-size is for serve, export and run");
		default:
			r = cli_remote_option(&rem, c, optarg);
			if (r < 0)
				return EXIT_USAGE;
			if (!r)
				return cli_bad_option("push", argv, c);
		}
	}
	if (!o.store_dir)
		return cli_usage_error("missing --store DIR (see lazyblk push --help)");
	if (!rem.url)
		return cli_usage_error("missing --remote URL (see lazyblk push --help)");
	o.remote.url = rem.url;
	o.remote.concurrency = rem.concurrency;
	o.remote.timeout_ms = rem.timeout_ms;
	o.remote.retries = rem.retries;
	log_first_error_only(true); /* uploader threads may fail at once: say it once */
	return push_run(&o, argv + optind, argc - optind, json);
}
