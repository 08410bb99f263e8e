/* SPDX-License-Identifier: MIT */
/*
 * lazyblk cas gc --remote URL: garbage collection that knows images, on a registry
 * repository (its chunk index rewritten to what the image tags and the kept layouts use).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/remote/image_ref.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../ext4gen/refs.h"
#include "cli.h"

static void print_dropped(void *arg, const struct oci_chunk_ref *ref)
{
	char hex[SHA256_HEX_LEN + 1], bhex[SHA256_HEX_LEN + 1];

	sha256_to_hex(ref->chunk, hex);
	sha256_to_hex(ref->blob, bhex);
	printf("%s: %s (blob sha256:%s, %llu bytes)\n", *(bool *)arg ? "would drop" : "dropped",
	       hex, bhex, (unsigned long long)ref->size);
}

int cli_cas_gc_remote(const char *url, const char *const *keep, size_t n_keep,
		      const char *store_dir, bool dry_run)
{
	struct image_gc_opts o = { .remote.url = url, .dry_run = dry_run };
	struct image_gc_result res;
	struct chunk_refs refs = { 0 };
	char why[PATH_MAX + 256], h[32];
	int ret;

	if (strncmp(url, "oci", 3))
		return cli_usage_error("--remote %s: gc of a remote is for oci://HOST[:PORT]/REPO[:TAG]",
				       url);
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
	if (!dry_run)
		printf("; %llu old manifest%s deleted (the registry's garbage collection removes the "
		       "blobs)", (unsigned long long)res.manifests_deleted,
		       res.manifests_deleted == 1 ? "" : "s");
	putchar('\n');
	return 0;
}
