/* SPDX-License-Identifier: MIT */
/*
 * lazyblk cas gc --remote URL: garbage collection that knows images, on a registry
 * repository (its chunk index rewritten to what the image tags and the kept layouts use,
 * cas/remote/image_gc.c) or an HTTP store (what its images keep, the rest swept under a
 * lease, layout/gc_http.c). Parses, calls and prints.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../cas/remote/image_ref.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../layout/gc_http.h"
#include "../layout/refs.h"
#include "cli.h"

static void print_dropped(void *arg, const struct oci_chunk_ref *ref)
{
	char hex[SHA256_HEX_LEN + 1], bhex[SHA256_HEX_LEN + 1];

	sha256_to_hex(ref->chunk, hex);
	sha256_to_hex(ref->blob, bhex);
	printf("%s: %s (blob sha256:%s, %llu bytes)\n", *(bool *)arg ? "would drop" : "dropped",
	       hex, bhex, (unsigned long long)ref->size);
}

/* ------------------------------------------------------------------ http(s) stores */

static void print_deleted(void *arg, const char *rel, uint64_t size)
{
	printf("%s: %s (%llu bytes)\n", *(bool *)arg ? "would delete" : "deleted", rel,
	       (unsigned long long)size);
}

static int gc_http_cli(const char *url, const char *const *keep, size_t n_keep,
		       const char *store_dir, uint64_t grace, bool dry_run)
{
	struct gc_http_opts o = { .url = url, .keep = keep, .n_keep = n_keep,
				  .store_dir = store_dir, .grace_secs = grace, .dry_run = dry_run,
				  .deleted = print_deleted, .arg = &dry_run,
				  .notes = { .fn = cli_note } };
	struct gc_http_result res;
	char why[PATH_MAX + 512], h[32], hy[32];

	if (url[strlen(url) - 1] != '/')
		return cli_usage_error("--remote %s: an http(s) store is http(s)://HOST/PATH/ "
				       "(with the slash)", url);
	if (gc_http(&o, &res, why, sizeof(why)))
		return cli_fail(1, why);
	printf("gc: %s: %s %llu of %llu files (%s); kept %llu (%zu image%s%s), %llu newer "
	       "than the grace period (%s)\n", url, dry_run ? "would delete" : "deleted",
	       (unsigned long long)res.sweep.deleted, (unsigned long long)res.sweep.listed,
	       size_human(res.sweep.deleted_bytes, h, sizeof(h)),
	       (unsigned long long)res.sweep.kept, res.images, res.images == 1 ? "" : "s",
	       n_keep ? ", and the --keep files" : "", (unsigned long long)res.sweep.young,
	       size_human(res.sweep.young_bytes, hy, sizeof(hy)));
	return 0;
}

/* ------------------------------------------------------------------ registries */

int cli_cas_gc_remote(const char *url, const char *const *keep, size_t n_keep,
		      const char *store_dir, uint64_t grace, bool dry_run)
{
	struct image_gc_opts o = { .remote.url = url, .dry_run = dry_run };
	struct image_gc_result res;
	struct chunk_refs refs = { 0 };
	char why[PATH_MAX + 256], h[32];
	int ret;

	if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8))
		return gc_http_cli(url, keep, n_keep, store_dir, grace, dry_run);
	if (strncmp(url, "oci", 3))
		return cli_usage_error("--remote %s: gc of a remote is for oci://HOST[:PORT]/REPO[:TAG] "
				       "or http(s)://HOST[:PORT]/PATH/", url);
	for (size_t i = 0; i < n_keep; i++) {
		if (cli_keep_add(&refs, keep[i], store_dir)) {
			chunk_refs_free(&refs);
			return 1;
		}
	}
	chunk_refs_finish(&refs);
	o.keep = (const uint8_t (*)[SHA256_LEN])refs.d;
	o.n_keep = refs.n;
	o.dropped = print_dropped;
	o.arg = &dry_run;
	ret = image_gc_oci(&o, &res, why, sizeof(why));
	chunk_refs_free(&refs);
	if (ret) {
		if (why[0])
			log_error("%s", why);
		return 1;
	}
	printf("gc: %s: the chunk index %s %llu of %llu chunks (%s); it keeps %llu (%llu image "
	       "tag%s", url, dry_run ? "would drop" : "dropped", (unsigned long long)res.dropped,
	       (unsigned long long)res.before, size_human(res.dropped_bytes, h, sizeof(h)),
	       (unsigned long long)res.after, (unsigned long long)res.images,
	       res.images == 1 ? "" : "s");
	if (n_keep)
		printf(", %zu kept file%s", n_keep, n_keep == 1 ? "" : "s");
	printf(")");
	if (res.missing)
		printf("; %llu kept chunk%s not in the repository", (unsigned long long)res.missing,
		       res.missing == 1 ? " is" : "s are");
	if (res.tags.skipped)
		printf("; %llu tag%s of the registry's list skipped (not valid tag names)",
		       (unsigned long long)res.tags.skipped, res.tags.skipped == 1 ? "" : "s");
	if (res.tags.truncated)
		printf("; the registry's tag list has more than %d pages (tags past them not seen)",
		       REMOTE_TAG_PAGES_MAX);
	if (!dry_run)
		printf("; %llu old manifest%s deleted (the registry's garbage collection removes the "
		       "blobs)", (unsigned long long)res.manifests_deleted,
		       res.manifests_deleted == 1 ? "" : "s");
	if (res.manifests_left)
		printf("; %llu old manifest%s left in place: a tag not seen may name %s (%s)",
		       (unsigned long long)res.manifests_left, res.manifests_left == 1 ? "" : "s",
		       res.manifests_left == 1 ? "it" : "them",
		       res.tags.skipped ? "tags skipped" : res.tags.truncated
		       ? "the tag list not read to its end" : "the registry's tags/list is not found");
	putchar('\n');
	return 0;
}
