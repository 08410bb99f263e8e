/* SPDX-License-Identifier: MIT */
/* cas gc --remote http(s)://…/PATH/: what the images keep, swept under a lease (gc_http.h). */
#include "gc_http.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/remote/lease.h"
#include "../common/fsutil.h"
#include "../vmsnap/snapfile.h"
#include "snap_ref.h"

#define GC_WHY (PATH_MAX + 256)

/* The chunks of every layer of a fetched image's chain (its layouts in dir/layouts/). */
static int fetched_add(struct chunk_refs *r, const struct image_fetched *f, const char *dir,
		       char *why, size_t why_len, int (*also)(void *arg, const uint8_t d[SHA256_LEN]),
		       void *arg)
{
	char path[PATH_MAX + 80], hex[SHA256_HEX_LEN + 1];
	char cw[WHY_MAX] = "";
	int ret = 0;

	for (unsigned l = 0; !ret && l < f->d.n_layouts; l++) {
		sha256_to_hex(f->d.layouts[l].digest, hex);
		snprintf(path, sizeof(path), "%s/layouts/%s.layout", dir, hex);
		ret = chunk_refs_add_fetched(r, path, cw, sizeof(cw));
		if (ret)
			why_set(why, why_len, ret, "%s: %s; nothing removed", path,
				cw[0] ? cw : strerror(-ret));
		else if (also)
			ret = also(arg, f->d.layouts[l].digest);
	}
	return ret;
}

int chunk_refs_add_keep(struct chunk_refs *r, const char *keep, const char *store_dir,
			char *why, size_t why_len)
{
	struct remote_opts ro = { .url = keep };
	struct image_fetched f;
	char w[GC_WHY];
	char cw[WHY_MAX] = "";
	int ret;

	if (!image_ref_is(keep) && snapfile_is(keep))
		return snap_ref_keep_file(r, keep, store_dir, why, why_len);
	if (!image_ref_is(keep)) {
		ret = chunk_refs_add_file(r, keep, cw, sizeof(cw));
		if (ret)
			why_set(why, why_len, ret, "%s: %s; nothing removed", keep,
				cw[0] ? cw : fs_open_why(ret));
		return ret;
	}
	if (!store_dir)
		return why_set(why, why_len, -EINVAL, "--keep %s: an image by reference needs "
			       "--store DIR (its layouts are fetched into DIR/layouts/)", keep);
	ret = image_fetch_as(&ro, store_dir, IMAGE_WANT_ANY, &f, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s; nothing removed", w[0] ? w : strerror(-ret));
	/* every layer of the chain: its own chunks; a snapshot's RAM too */
	ret = fetched_add(r, &f, store_dir, why, why_len, NULL, NULL);
	if (!ret && f.d.has_snapshot)
		ret = snap_ref_keep_fetched(r, &f, store_dir, why, why_len);
	image_fetched_free(&f);
	return ret;
}

/* ------------------------------------------------------------------ what stays */

struct http_keep {
	struct chunk_refs chunks;
	uint8_t (*files)[SHA256_LEN];     /* layout digests and manifest sha256s to keep */
	size_t n_files;
};

static int files_add(void *arg, const uint8_t d[SHA256_LEN])
{
	struct http_keep *k = arg;
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
static int http_collect(const char *url, const char *dir, struct http_keep *k, size_t *n_img,
			char *why, size_t why_len)
{
	struct remote_opts ro = { .url = url };
	struct image_entry *v = NULL;
	char w[GC_WHY], ref[PATH_MAX];
	struct remote_tags tags;
	size_t n = 0;
	int ret;

	ret = image_list(&ro, &v, &n, &tags, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s; nothing removed", w[0] ? w : strerror(-ret));
	*n_img = n;
	for (size_t i = 0; !ret && i < n; i++) {
		struct image_fetched f;

		snprintf(ref, sizeof(ref), "%simages/%s", url, v[i].name);
		ro.url = ref;
		ret = image_fetch_as(&ro, dir, IMAGE_WANT_ANY, &f, w, sizeof(w));
		if (ret) {
			why_set(why, why_len, ret, "%s; nothing removed", w[0] ? w : strerror(-ret));
			break;
		}
		ret = fetched_add(&k->chunks, &f, dir, why, why_len, files_add, k);
		if (!ret && f.d.has_manifest)
			ret = files_add(k, f.d.manifest.digest);
		/* a VM snapshot: its document and its RAM's chunks (its map read through dir) */
		if (!ret && f.d.has_snapshot)
			ret = files_add(k, f.d.snapshot.sha);
		if (!ret && f.d.has_snapshot)
			ret = snap_ref_keep_fetched(&k->chunks, &f, dir, why, why_len);
		image_fetched_free(&f);
	}
	image_list_free(v, n);
	return ret;
}

/*
 * A private directory for the layouts (and a snapshot's page map, read through a store made
 * there) when there is no --store, and its removal, whole.
 */
static int tmp_unlink(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void tmp_remove(const char *dir)
{
	nftw(dir, tmp_unlink, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------------ the leases */

/*
 * Whether a push holds a lease on the store (lease.h), with the gc's own still held: -EBUSY
 * (with why) when one does, what it found on the store must stay until its name is written;
 * when is "is under way" (before gc reads the images) or "started while gc read the images".
 */
static int gc_push_seen(const char *url, struct lease *lease, const char *when, char *why,
			size_t why_len)
{
	struct lease_seen seen;
	char w[GC_WHY];
	int ret;

	ret = lease_check(lease, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s: gc lost its lease on the store (%s): nothing "
			       "removed; run gc again", url, w);
	ret = lease_others(lease, LEASE_PUSH, false, &seen, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s; nothing removed", w);
	if (seen.live)
		return why_set(why, why_len, -EBUSY, "%s: a push to the store %s (leases/%s, "
			       "written %llds ago): nothing removed; run gc again when it has "
			       "finished", url, when, seen.name, (long long)seen.age);
	return 0;
}

/*
 * The gc's lease on the store (lease.h), taken before anything is read; -errno (with why)
 * when a push holds one, or when the store has no place for leases that a push would see.
 */
static int gc_lease(const char *url, struct lease **lease, char *why, size_t why_len)
{
	struct remote_opts ro = { .url = url };
	char w[GC_WHY];
	int ret;

	ret = lease_take(&ro, LEASE_GC, lease, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s; nothing removed", w[0] ? w : strerror(-ret));
	if (!*lease)
		return why_set(why, why_len, -EOPNOTSUPP, "%s: neither leases/ nor the store itself "
			       "is listed as JSON there, so a push could not see a gc's lease: "
			       "nothing removed (the server must list the whole store: autoindex "
			       "on; autoindex_format json;)", url);
	return gc_push_seen(url, *lease, "is under way", why, why_len);
}

/* ------------------------------------------------------------------ gc */

static int gc_sweep(const struct gc_http_opts *o, struct http_keep *k, struct lease *lease,
		    struct gc_http_result *res, char *why, size_t why_len)
{
	struct image_sweep_opts so = { .remote.url = o->url, .dry_run = o->dry_run,
				       .grace_secs = o->grace_secs };

	chunk_refs_finish(&k->chunks);
	qsort(k->files, k->n_files, SHA256_LEN, digest_cmp);
	so.chunks = (const uint8_t (*)[SHA256_LEN])k->chunks.d;
	so.n_chunks = k->chunks.n;
	so.files = (const uint8_t (*)[SHA256_LEN])k->files;
	so.n_files = k->n_files;
	so.deleted = o->deleted;
	so.arg = o->arg;
	so.lease = lease;
	return image_sweep_http(&so, &res->sweep, why, why_len);
}

int gc_http(const struct gc_http_opts *o, struct gc_http_result *res, char *why,
	    size_t why_len)
{
	struct http_keep k = { 0 };
	struct lease *lease = NULL;
	struct lease_seen seen;
	char tmp[] = "/tmp/lazyblk-gc.XXXXXX", w[GC_WHY];
	const char *dir = o->store_dir;
	int ret = 0;

	if (why_len)
		why[0] = 0;
	memset(res, 0, sizeof(*res));
	if (!o->dry_run && (ret = gc_lease(o->url, &lease, why, why_len))) {
		lease_drop(lease);
		return ret;
	}
	if (!dir && !(dir = mkdtemp(tmp))) {
		int err = errno;

		ret = why_set(why, why_len, -err, "%s: %s", tmp, strerror(err));
		lease_drop(lease);
		return ret;
	}
	for (size_t i = 0; !ret && i < o->n_keep; i++)
		ret = chunk_refs_add_keep(&k.chunks, o->keep[i], dir, why, why_len);
	if (!ret)
		ret = http_collect(o->url, dir, &k, &res->images, why, why_len);
	if (!ret && !res->images && !o->n_keep)
		ret = why_set(why, why_len, -ENOENT, "%s: no image in images/index.json and no "
			      "--keep: nothing would stay; nothing removed", o->url);
	/* a push that began while the images were read (our lease lapsed, say): it stays */
	if (!ret && !o->dry_run)
		ret = gc_push_seen(o->url, lease, "started while gc read the images", why, why_len);
	if (!ret)
		ret = gc_sweep(o, &k, lease, res, why, why_len);
	if (!o->store_dir)
		tmp_remove(dir);
	chunk_refs_free(&k.chunks);
	free(k.files);
	/* the expired leases of crashed pushes and gcs go too */
	if (lease && !ret && lease_others(lease, LEASE_PUSH, true, &seen, w, sizeof(w)))
		note_emit(&o->notes, NOTE_WARN, "%s", w);
	lease_drop(lease);
	return ret;
}
