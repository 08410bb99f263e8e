/* SPDX-License-Identifier: MIT */
/*
 * lazyblk cas gc --remote URL: garbage collection that knows images, on a registry
 * repository (its chunk index rewritten to what the image tags and the kept layouts use).
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/remote/image_ref.h"
#include "../cas/remote/lease.h"
#include "../common/log.h"
#include "../common/size.h"
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

struct http_keep {
	struct chunk_refs chunks;
	uint8_t (*files)[SHA256_LEN];     /* layout digests and manifest sha256s to keep */
	size_t n_files;
};

static int files_add(struct http_keep *k, const uint8_t d[SHA256_LEN])
{
	uint8_t (*v)[SHA256_LEN] = realloc(k->files, (k->n_files + 1) * SHA256_LEN);

	if (!v)
		return -ENOMEM;
	k->files = v;
	memcpy(k->files[k->n_files++], d, SHA256_LEN);
	return 0;
}

static int digest_cmp(const void *a, const void *b)
{
	return memcmp(a, b, SHA256_LEN);
}

/* Every image of the store: its files, and the chunks of its layouts (fetched into dir). */
static int http_collect(const char *url, const char *dir, struct http_keep *k, size_t *n_img)
{
	struct remote_opts ro = { .url = url };
	struct image_entry *v = NULL;
	char why[PATH_MAX + 256], ref[PATH_MAX], path[PATH_MAX + 80], hex[SHA256_HEX_LEN + 1];
	struct remote_tags tags;
	size_t n = 0;
	int ret;

	ret = image_list(&ro, &v, &n, &tags, why, sizeof(why));
	if (ret) {
		log_error("%s; nothing removed", why[0] ? why : strerror(-ret));
		return 1;
	}
	*n_img = n;
	for (size_t i = 0; !ret && i < n; i++) {
		struct image_fetched f;
		const char *cw = NULL;

		snprintf(ref, sizeof(ref), "%simages/%s", url, v[i].name);
		ro.url = ref;
		ret = image_fetch(&ro, dir, &f, why, sizeof(why));
		if (ret) {
			log_error("%s; nothing removed", why[0] ? why : strerror(-ret));
			break;
		}
		for (unsigned l = 0; !ret && l < f.d.n_layouts; l++) {
			sha256_to_hex(f.d.layouts[l].digest, hex);
			snprintf(path, sizeof(path), "%s/layouts/%s.layout", dir, hex);
			ret = chunk_refs_add_fetched(&k->chunks, path, &cw);
			if (ret)
				log_error("%s: %s; nothing removed", path, cw ? cw : strerror(-ret));
			else
				ret = files_add(k, f.d.layouts[l].digest);
		}
		if (!ret && f.d.has_manifest)
			ret = files_add(k, f.d.manifest.digest);
		image_fetched_free(&f);
	}
	image_list_free(v, n);
	return ret ? 1 : 0;
}

/* A private directory for the layouts when there is no --store, and its removal. */
static void tmp_remove(const char *dir)
{
	char sub[PATH_MAX], p[PATH_MAX + 300];
	struct dirent *de;
	DIR *d;

	snprintf(sub, sizeof(sub), "%s/layouts", dir);
	d = opendir(sub);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", sub, de->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(sub);
	rmdir(dir);
}

static void print_deleted(void *arg, const char *rel, uint64_t size)
{
	printf("%s: %s (%llu bytes)\n", *(bool *)arg ? "would delete" : "deleted", rel,
	       (unsigned long long)size);
}

/*
 * Whether a push holds a lease on the store (lease.h), with the gc's own still held: 1 (said
 * why) when one does, what it found on the store must stay until its name is written; when
 * is "is under way" (before gc reads the images) or "started while gc read the images".
 */
static int gc_push_seen(const char *url, struct lease *lease, const char *when)
{
	struct lease_seen seen;
	char why[PATH_MAX + 256];
	int ret;

	ret = lease_check(lease, why, sizeof(why));
	if (ret) {
		log_error("%s: gc lost its lease on the store (%s): nothing removed; run gc again",
			  url, why);
		return 1;
	}
	ret = lease_others(lease, LEASE_PUSH, false, &seen, why, sizeof(why));
	if (ret) {
		log_error("%s; nothing removed", why);
		return 1;
	}
	if (seen.live) {
		log_error("%s: a push to the store %s (leases/%s, written %llds ago): nothing "
			  "removed; run gc again when it has finished", url, when, seen.name,
			  (long long)seen.age);
		return 1;
	}
	return 0;
}

/*
 * The gc's lease on the store (lease.h), taken before anything is read; 1 (said why) when a
 * push holds one, or when the store has no place for leases that a push would look at.
 */
static int gc_lease(const char *url, struct lease **lease)
{
	struct remote_opts ro = { .url = url };
	char why[PATH_MAX + 256];
	int ret;

	ret = lease_take(&ro, LEASE_GC, lease, why, sizeof(why));
	if (ret) {
		log_error("%s; nothing removed", why[0] ? why : strerror(-ret));
		return 1;
	}
	if (!*lease) {
		log_error("%s: neither leases/ nor the store itself is listed as JSON there, so a "
			  "push could not see a gc's lease: nothing removed (the server must list "
			  "the whole store: autoindex on; autoindex_format json;)", url);
		return 1;
	}
	return gc_push_seen(url, *lease, "is under way");
}

static int gc_http(const char *url, const char *const *keep, size_t n_keep,
		   const char *store_dir, uint64_t grace, bool dry_run)
{
	struct image_sweep_opts o = { .remote.url = url, .dry_run = dry_run, .grace_secs = grace };
	struct image_sweep_result res;
	struct http_keep k = { 0 };
	struct lease *lease = NULL;
	struct lease_seen seen;
	char tmp[] = "/tmp/lazyblk-gc.XXXXXX", why[PATH_MAX + 256], h[32], hy[32];
	const char *dir = store_dir;
	size_t n_img = 0;
	int ret = 0;

	if (url[strlen(url) - 1] != '/')
		return cli_usage_error("--remote %s: an http(s) store is http(s)://HOST/PATH/ "
				       "(with the slash)", url);
	if (!dry_run && gc_lease(url, &lease)) {
		lease_drop(lease);
		return 1;
	}
	if (!dir && !(dir = mkdtemp(tmp))) {
		log_error("%s: %s", tmp, strerror(errno));
		lease_drop(lease);
		return 1;
	}
	for (size_t i = 0; !ret && i < n_keep; i++)
		ret = cli_keep_add(&k.chunks, keep[i], dir);
	if (!ret)
		ret = http_collect(url, dir, &k, &n_img);
	if (!ret && !n_img && !n_keep) {
		log_error("%s: no image in images/index.json and no --keep: nothing would stay; "
			  "nothing removed", url);
		ret = 1;
	}
	/* a push that began while the images were read (our lease lapsed, say): it stays */
	if (!ret && !dry_run)
		ret = gc_push_seen(url, lease, "started while gc read the images");
	if (!ret) {
		chunk_refs_finish(&k.chunks);
		qsort(k.files, k.n_files, SHA256_LEN, digest_cmp);
		o.chunks = (const uint8_t (*)[SHA256_LEN])k.chunks.d;
		o.n_chunks = k.chunks.n;
		o.files = (const uint8_t (*)[SHA256_LEN])k.files;
		o.n_files = k.n_files;
		o.deleted = print_deleted;
		o.arg = &dry_run;
		o.lease = lease;
		ret = image_sweep_http(&o, &res, why, sizeof(why));
		if (ret && why[0])
			log_error("%s", why);
		ret = ret ? 1 : 0;
	}
	if (!ret)
		printf("gc: %s: %s %llu of %llu files (%s); kept %llu (%zu image%s%s), %llu newer "
		       "than the grace period (%s)\n", url, dry_run ? "would delete" : "deleted",
		       (unsigned long long)res.deleted, (unsigned long long)res.listed,
		       size_human(res.deleted_bytes, h, sizeof(h)), (unsigned long long)res.kept,
		       n_img, n_img == 1 ? "" : "s", n_keep ? ", and the --keep files" : "",
		       (unsigned long long)res.young, size_human(res.young_bytes, hy, sizeof(hy)));
	if (!store_dir)
		tmp_remove(dir);
	chunk_refs_free(&k.chunks);
	free(k.files);
	/* the expired leases of crashed pushes and gcs go too */
	if (lease && !ret && lease_others(lease, LEASE_PUSH, true, &seen, why, sizeof(why)))
		log_warn("%s", why);
	lease_drop(lease);
	return ret;
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
		return gc_http(url, keep, n_keep, store_dir, grace, dry_run);
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
