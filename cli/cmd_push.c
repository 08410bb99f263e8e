/* SPDX-License-Identifier: MIT */
/* lazyblk push: publish a store's chunks (all, or those of some layouts) to a remote. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cas/manifest.h"
#include "../cas/remote/image_ref.h"
#include "../cas/remote/push.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../layout/layout.h"
#include "../layout/refs.h"
#include "../vmsnap/snapfile.h"
#include "cli.h"

static const char push_usage[] =
	"usage: lazyblk push --store DIR --remote URL [IMAGE.layout|IMAGE.manifest ...]\n"
	"              [--fetch-concurrency N] [--fetch-timeout SECS] [--fetch-retries N]\n"
	"              [--json]\n"
	"       lazyblk push --store DIR --remote REF IMAGE.layout [--manifest FILE] [--json]\n"
	"       lazyblk push --store DIR --remote REF SNAPSHOT [--json]\n"
	"\n"
	"Publish chunks to a remote: every chunk of the store, or only those the given layouts\n"
	"or manifests use. Each chunk is verified against its sha256 first (a corrupt chunk is never\n"
	"pushed) and uploaded only if the remote does not have it. Ctrl-C or SIGTERM stops it\n"
	"after the uploads under way (each chunk is on the remote whole or not at all; an OCI\n"
	"index is not published) and exits 130; pushing again sends only what is missing.\n"
	"\n"
	"  http(s)://HOST[:PORT]/PATH/   PUT PATH/chunks/xx/<sha256> (a WebDAV-enabled web\n"
	"                                server, or any server that accepts PUT); where the\n"
	"                                server lists directories, with a lease in\n"
	"                                PATH/leases/, after waiting for a cas gc of the\n"
	"                                store to finish\n"
	"  oci://HOST[:PORT]/REPO[:TAG]  each chunk's zstd frame as a blob of REPO, then an\n"
	"                                image index under TAG (default lazyblk-chunks) that\n"
	"                                maps chunks to blobs, merged with what TAG holds; a\n"
	"                                TAG that holds an image (or a container image) is\n"
	"                                refused: push the image's layout to replace it\n"
	"\n"
	"Publishing an image by name (one IMAGE.layout and REF one of):\n"
	"\n"
	"  oci://HOST[:PORT]/REPO:TAG     its chunks, every layout file of its chain and its\n"
	"                                 manifest as blobs, an image manifest, then under TAG\n"
	"                                 an image index (artifactType application/vnd.lazyblk.\n"
	"                                 image.v1) that is also the chunk index of exactly the\n"
	"                                 image's chunks: TAG is replaced, not merged\n"
	"  http(s)://HOST[:PORT]/PATH/images/NAME   its chunks at PATH/chunks/, its layouts at\n"
	"                                 PATH/layouts/, its manifest at PATH/manifests/, then\n"
	"                                 PATH/images/NAME/image.json and PATH/images/index.json\n"
	"\n"
	"A VM snapshot (SNAPSHOT: the directory `lazyblk snapshot` wrote into the store, holding\n"
	"snapshot.json, or that file) is published by name the same way: every chunk it uses\n"
	"(vm.state, the RAM's page map and pages, the disk's chunks; each must be in the store),\n"
	"its disk's layout chain, then its document; the tag's artifactType is\n"
	"application/vnd.lazyblk.vm-snapshot.v1. run --restore REF resumes it on any host.\n"
	"\n"
	"serve, run, export and warm then take REF in place of IMAGE.layout; lazyblk images ls\n"
	"lists what a remote holds. The manifest published with the image is --manifest FILE,\n"
	"else IMAGE.manifest beside the layout if there is one; it must be the one the layout\n"
	"was made from. See docs/images.md.\n"
	"\n"
	"options:\n"
	"  -s, --store DIR            the store to publish from\n"
	"      --remote URL           where to (credentials: LAZYBLK_REMOTE_USER and\n"
	"                             LAZYBLK_REMOTE_PASSWORD)\n"
	"      --fetch-concurrency N  uploads at once (default 16)\n"
	"      --fetch-timeout SECS   per request attempt (default 30)\n"
	"      --fetch-retries N      retries of a failed request (default 4)\n"
	"      --manifest FILE        (an image) the manifest to publish with the layout\n"
	"      --json                 print the summary as one JSON object: remote, chunks,\n"
	"                             uploaded, uploaded_bytes, present, seconds; for an\n"
	"                             image also image, layout_digest, layers, layout_bytes,\n"
	"                             manifest_bytes (uploaded now), digest (of the image\n"
	"                             index, or of image.json); for a VM snapshot also kind\n"
	"                             (vm-snapshot), snapshot (its document's sha256),\n"
	"                             ram_chunks, disk_chunks, snapshot_bytes\n"
	"  -h, --help                 this text\n"
	"\n"
	"On a terminal a progress line counts the chunks done.\n";

/* The chunks the layouts (or manifests) use, without duplicates. */
static int collect_images(struct chunk_refs *refs, char **paths, int n)
{
	for (int i = 0; i < n; i++) {
		char why[WHY_MAX] = "";
		int ret = chunk_refs_add_file(refs, paths[i], why, sizeof(why));

		if (ret) {
			log_error("%s: %s", paths[i], why[0] ? why : strerror(-ret));
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
		log_error("%s", why[0] ? why : strerror(-ret));
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

/* Whether the push publishes an image: an oci URL with a tag and one layout, or .../images/NAME. */
static bool push_is_image(const char *url, char **images, int n)
{
	struct image_ref ref;
	bool yes;

	if (!image_ref_is(url) || image_ref_parse(url, &ref, NULL, 0))
		return false;
	/* images NULL: whether url names one (a snapshot is published by name) */
	yes = !ref.oci || !images || (n == 1 && strlen(images[0]) > 7 &&
				      !strcmp(images[0] + strlen(images[0]) - 7, ".layout"));
	image_ref_free(&ref);
	return yes;
}

/* The manifest to publish with the layout: --manifest, or IMAGE.manifest beside it; NULL. */
static int image_manifest(const struct layout *l, const char *layout, const char *given,
			  char **out)
{
	size_t n = strlen(layout) - (strlen(layout) > 7 ? 7 : 0);
	struct manifest *m = NULL;
	char why[WHY_MAX] = "";
	char *beside = NULL;
	int ret;

	*out = NULL;
	if (!given && asprintf(&beside, "%.*s.manifest", (int)n, layout) < 0)
		return -ENOMEM;
	if (!given && access(beside, F_OK)) {
		free(beside);
		return 0;
	}
	ret = manifest_load(given ? given : beside, &m, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", given ? given : beside, why[0] ? why : strerror(-ret));
	} else if (memcmp(m->digest, l->hdr.manifest_digest, SHA256_LEN)) {
		log_error("%s: not the manifest %s was made from", given ? given : beside, layout);
		ret = -EINVAL;
	} else if (!(*out = strdup(given ? given : beside))) {
		ret = -ENOMEM;
	}
	manifest_free(m);
	free(beside);
	return ret;
}

static int image_json(const struct image_push_opts *o, const struct image_push_stats *st)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	cli_json_path(&b, "remote", o->push.remote.url);
	json_field_u64(&b, "chunks", st->chunks.chunks);
	json_field_u64(&b, "uploaded", st->chunks.uploaded);
	json_field_u64(&b, "uploaded_bytes", st->chunks.uploaded_bytes);
	json_field_u64(&b, "present", st->chunks.present);
	json_field_fixed(&b, "seconds", st->chunks.seconds, 3);
	cli_json_path(&b, "image", o->push.remote.url);
	cli_json_digest(&b, "layout_digest", o->layout_digests[0]);
	json_field_u64(&b, "layers", o->n_layouts);
	json_field_u64(&b, "layout_bytes", st->layout_bytes);
	json_field_u64(&b, "manifest_bytes", st->manifest_bytes);
	cli_json_digest(&b, "digest", st->digest);
	json_buf_puts(&b, "}");
	return cli_json_print(&b);
}

/* The current time as RFC 3339 UTC. */
static void now_rfc3339(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int push_image(struct cas_push_opts *po, const char *path, const char *manifest,
		      bool json)
{
	struct image_push_opts o = { .push = *po };
	struct image_push_stats st;
	struct chunk_refs refs = { 0 };
	struct layout *l = NULL;
	char why[PATH_MAX + 256], created[32], h[32], hex[SHA256_HEX_LEN + 1];
	char lw[WHY_MAX] = "";
	char *man = NULL;
	int ret;

	ret = layout_open(path, &l, lw, sizeof(lw));
	if (ret) {
		log_error("%s: %s", path, lw[0] ? lw : strerror(-ret));
		return 1;
	}
	ret = image_layout_files(l, path, (const char ***)&o.layouts, &o.layout_digests,
				 &o.n_layouts);
	if (!ret)
		ret = image_manifest(l, path, manifest, &man);
	for (unsigned i = 0; !ret && i < o.n_layouts; i++)
		ret = collect_images(&refs, (char **)&o.layouts[i], 1);
	if (ret) {
		if (ret == -ENOMEM)
			log_error("out of memory");
		goto out;
	}
	chunk_refs_finish(&refs);
	o.push.chunks = (const uint8_t (*)[SHA256_LEN])refs.d;
	o.push.n_chunks = refs.n;
	o.push.progress = push_progress;
	o.push.cancel = cli_interrupt_catch();
	o.manifest = man;
	o.disk_size = l->hdr.block_count * DISK_BLOCK;
	now_rfc3339(created, sizeof(created));
	o.created = created;
	ret = image_push(&o, &st, why, sizeof(why));
	log_progress_done();
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		ret = ret == -ECANCELED ? CLI_EXIT_INTERRUPTED : 1;
		goto out;
	}
	if (json) {
		ret = image_json(&o, &st);
		goto out;
	}
	sha256_to_hex(o.layout_digests[0], hex);
	printf("pushed %s (layout sha256:%s, %u layout%s%s) to %s: %llu chunks, %llu uploaded "
	       "(%s), %llu already there, %.2f s\n", path, hex, o.n_layouts,
	       o.n_layouts == 1 ? "" : "s", man ? ", manifest" : "", po->remote.url,
	       (unsigned long long)st.chunks.chunks, (unsigned long long)st.chunks.uploaded,
	       size_human(st.chunks.uploaded_bytes + st.layout_bytes + st.manifest_bytes, h,
			  sizeof(h)),
	       (unsigned long long)st.chunks.present, st.chunks.seconds);
out:
	chunk_refs_free(&refs);
	free((void *)o.layouts);
	free(man);
	layout_close(l);
	return ret;
}

int cmd_push(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'J' },
		{ "manifest", required_argument, NULL, 'm' },
		CLI_REMOTE_OPTIONS,
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cli_remote rem = { 0 };
	struct cas_push_opts o = { 0 };
	const char *manifest = NULL;
	bool json = false;
	int c, r;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.store_dir = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'J': json = true; break;
		case 'm': manifest = optarg; break;
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
	o.notes = CLI_NOTES;
	log_first_error_only(true); /* one line, the first, whatever fails */
	if (argc - optind == 1 && snapfile_is(argv[optind])) {
		if (!image_ref_is(rem.url) || !push_is_image(rem.url, NULL, 0))
			return cli_usage_error("a VM snapshot is published by name: --remote "
					       "oci://HOST/REPO:TAG or http(s)://HOST/PATH/images/NAME");
		if (manifest)
			return cli_usage_error("--manifest is for publishing an image");
		return cli_push_snapshot(&o, argv[optind], json);
	}
	if (push_is_image(rem.url, argv + optind, argc - optind)) {
		if (argc - optind != 1)
			return cli_usage_error("publishing an image takes exactly one IMAGE.layout");
		return push_image(&o, argv[optind], manifest, json);
	}
	if (manifest)
		return cli_usage_error("--manifest is for publishing an image "
				       "(--remote oci://HOST/REPO:TAG or .../images/NAME)");
	return push_run(&o, argv + optind, argc - optind, json);
}
