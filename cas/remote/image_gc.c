/* SPDX-License-Identifier: MIT */
/* Garbage collection of a registry repository's chunk index (image_ref.h). */
#include "image_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "../oci_json.h"
#include "remote_int.h"
#include "../../common/why.h"

struct gc_ctx {
	struct remote *r;
	const char *repo, *tag;
	struct oci_refs old, keep;       /* the index now; what stays */
	uint8_t (*old_mans)[SHA256_LEN]; /* the manifests of the index now */
	size_t n_old_mans;
	uint8_t (*live)[SHA256_LEN];     /* manifests the other tags reference */
	size_t n_live;
	uint8_t old_index[SHA256_LEN];   /* the document under the tag now */
	bool has_old_index;
	char *why;
	size_t why_len;
};

static int get_doc(struct gc_ctx *x, const char *ref, bool index, uint8_t **buf, size_t *len)
{
	char rel[PATH_MAX];

	snprintf(rel, sizeof(rel), "v2/%s/manifests/%s", x->repo, ref);
	return remote_obj_get(x->r, rel, index ? OCI_MT_INDEX ", " OCI_MT_MANIFEST : OCI_MT_MANIFEST,
			      index ? OCI_JSON_INDEX_MAX : OCI_JSON_MANIFEST_MAX, buf, len, x->why,
			      x->why_len);
}

/*
 * The chunk index in the document of ref into refs, its manifests appended to *mans.
 * -ENOENT: no such tag.
 */
static int load_index(struct gc_ctx *x, const char *ref, struct oci_refs *refs,
		      uint8_t (**mans)[SHA256_LEN], size_t *n_mans, uint8_t *doc_digest)
{
	uint8_t *buf = NULL, sum[SHA256_LEN];
	size_t len, first = *n_mans;
	char jw[WHY_MAX] = "";
	int ret;

	ret = get_doc(x, ref, true, &buf, &len);
	if (ret)
		return ret;
	if (doc_digest && image_tag_kind((const char *)buf, len) != IMAGE_TAG_CHUNKS) {
		/* the tag gc rewrites: never an image, nor anything else (docs/images.md) */
		snprintf(x->why, x->why_len, "%s: tag %s holds %s: gc rewrites only a chunk index "
			 "(the tag plain push writes, default lazyblk-chunks); nothing changed",
			 remote_url(x->r), ref, image_tag_what(image_tag_kind((const char *)buf, len)));
		free(buf);
		return -EEXIST;
	}
	if (doc_digest)
		ret = sha256_buf(buf, len, doc_digest);
	if (!ret)
		ret = oci_index_parse((const char *)buf, len, refs, mans, n_mans, jw, sizeof(jw));
	free(buf);
	for (size_t i = first; !ret && i < *n_mans; i++) {
		char hex[SHA256_HEX_LEN + 1], mref[8 + SHA256_HEX_LEN];

		sha256_to_hex((*mans)[i], hex);
		snprintf(mref, sizeof(mref), "sha256:%s", hex);
		buf = NULL;
		ret = get_doc(x, mref, false, &buf, &len);
		if (ret)
			return ret;
		if (sha256_buf(buf, len, sum) || memcmp(sum, (*mans)[i], SHA256_LEN)) {
			why_set(jw, sizeof(jw), 0, "a manifest does not match its digest");
			ret = -EBADMSG;
		} else {
			ret = oci_index_parse((const char *)buf, len, refs, NULL, NULL, jw,
					      sizeof(jw));
		}
		free(buf);
	}
	if (ret && jw[0])
		snprintf(x->why, x->why_len, "%s: tag %s: %s", remote_url(x->r), ref, jw);
	return ret;
}

struct gc_tags {
	struct gc_ctx *x;
	struct image_gc_result *res;
};

/* n documents another tag references into x->live: never deleted. */
static int live_add(struct gc_ctx *x, const uint8_t (*d)[SHA256_LEN], size_t n)
{
	uint8_t (*v)[SHA256_LEN];

	if (!n)
		return 0;
	v = realloc(x->live, (x->n_live + n) * SHA256_LEN);
	if (!v)
		return -ENOMEM;
	x->live = v;
	memcpy(x->live[x->n_live], d, n * SHA256_LEN);
	x->n_live += n;
	return 0;
}

/*
 * A tag other than the chunk index's. Whatever it holds, its document and the manifests an
 * index of it lists stay (a DELETE by digest would drop every tag that names the document);
 * when it is an image, its chunks are kept too.
 */
static int gc_tag(void *arg, const char *t)
{
	struct gc_tags *g = arg;
	struct gc_ctx *x = g->x;
	char jw[WHY_MAX] = "";
	uint8_t *buf = NULL, man[SHA256_LEN], sum[SHA256_LEN], (*mans)[SHA256_LEN] = NULL;
	uint64_t size;
	size_t len, n_mans = 0;
	int ret;

	if (!strcmp(t, x->tag))
		return 0;
	ret = get_doc(x, t, true, &buf, &len);
	if (ret)
		return ret == -ENOENT ? 0 : ret;
	ret = sha256_buf(buf, len, sum);
	if (!ret)
		ret = live_add(x, (const uint8_t (*)[SHA256_LEN])sum, 1);
	if (!ret && image_oci_index_parse((const char *)buf, len, man, &size, jw, sizeof(jw))) {
		/* not an image (its chunks are its own business): the manifests it lists stay */
		if (oci_index_parse((const char *)buf, len, NULL, &mans, &n_mans, jw,
				    sizeof(jw)) == -ENOMEM)
			ret = -ENOMEM;
		else
			ret = live_add(x, (const uint8_t (*)[SHA256_LEN])mans, n_mans);
		free(mans);
		free(buf);
		return ret;
	}
	free(buf);
	if (ret)
		return ret;
	g->res->images++;
	ret = load_index(x, t, &x->keep, &mans, &n_mans, NULL);
	if (!ret)
		ret = live_add(x, (const uint8_t (*)[SHA256_LEN])mans, n_mans);
	free(mans);
	return ret;
}

/* Every image tag's chunks into x->keep, its manifests into x->live. */
static int load_images(struct gc_ctx *x, struct image_gc_result *res)
{
	struct gc_tags g = { .x = x, .res = res };

	return remote_obj_tags(x->r, x->repo, gc_tag, &g, &res->tags, x->why, x->why_len);
}

/*
 * Whether the tag list was seen whole, so that a manifest no tag of it references is one no
 * tag references: no entry skipped, no page left unread, and a list at all when the chunk
 * index's tag exists (a registry that answers 404 for the list while serving a tag hides
 * them all).
 */
static bool tags_whole(const struct gc_ctx *x, const struct image_gc_result *res)
{
	return !res->tags.skipped && !res->tags.truncated &&
	       !(res->tags.no_list && x->has_old_index);
}

/*
 * Just before the tag is written: it must still hold the chunk index gc read (or still
 * nothing), not an image pushed to it meanwhile, nor another index. 0, or -EBUSY with why.
 */
static int tag_unchanged(struct gc_ctx *x)
{
	uint8_t *buf = NULL, sum[SHA256_LEN];
	const char *now = NULL;
	size_t len;
	int ret;

	ret = get_doc(x, x->tag, true, &buf, &len);
	if (ret == -ENOENT && !x->has_old_index)
		return 0;
	if (ret == -ENOENT)
		now = "nothing (it was deleted)";
	else if (ret)
		return ret;
	else if (sha256_buf(buf, len, sum))
		ret = -ENOMEM;
	else if (!x->has_old_index || memcmp(sum, x->old_index, SHA256_LEN))
		now = image_tag_kind((const char *)buf, len) == IMAGE_TAG_CHUNKS
		    ? "another chunk index" : image_tag_what(image_tag_kind((const char *)buf, len));
	free(buf);
	if (ret || !now)
		return ret;
	snprintf(x->why, x->why_len, "%s: tag %s changed while gc ran (it now holds %s): left as "
		 "it is, nothing deleted; run gc again", remote_url(x->r), x->tag, now);
	return -EBUSY;
}

static bool mans_have(uint8_t (*v)[SHA256_LEN], size_t n, const uint8_t d[SHA256_LEN])
{
	for (size_t i = 0; i < n; i++)
		if (!memcmp(v[i], d, SHA256_LEN))
			return true;
	return false;
}

/* The kept layouts' chunks, mapped to blobs through the old index or an image's. */
static int add_kept(struct gc_ctx *x, const struct image_gc_opts *o, struct image_gc_result *res)
{
	struct oci_refs images = { 0 };
	int ret = 0;

	for (size_t i = 0; !ret && i < x->keep.n; i++)
		ret = oci_refs_add(&images, &x->keep.v[i]);
	oci_refs_sort(&images);
	for (size_t i = 0; !ret && i < o->n_keep; i++) {
		const struct oci_chunk_ref *f = oci_refs_find(&x->old, o->keep[i]);

		if (!f)
			f = oci_refs_find(&images, o->keep[i]);
		if (f)
			ret = oci_refs_add(&x->keep, f);
		else
			res->missing++;
	}
	oci_refs_free(&images);
	oci_refs_sort(&x->keep);
	return ret;
}

/* Publish x->keep under the tag, then delete the old manifests nobody references. */
static int rewrite(struct gc_ctx *x, struct image_gc_result *res)
{
	static const char empty[] = OCI_EMPTY_JSON;
	struct oci_doc *docs = NULL;
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t ed[SHA256_LEN];
	size_t nd = 0;
	int ret;

	ret = sha256_buf(empty, 2, ed);
	if (!ret)
		ret = remote_blob_put(x->r, ed, empty, 2, "the empty config blob", x->why,
				      x->why_len);
	if (ret < 0)
		return ret;
	ret = oci_index_build(&x->keep, &docs, &nd);
	for (size_t i = 0; !ret && i < nd; i++) {
		bool last = i + 1 == nd;

		if (last && (ret = tag_unchanged(x)))
			break;
		sha256_to_hex(docs[i].digest, hex);
		snprintf(rel, sizeof(rel), "v2/%s/manifests/%s%s", x->repo, last ? "" : "sha256:",
			 last ? x->tag : hex);
		ret = remote_obj_put(x->r, rel, docs[i].json, docs[i].len, docs[i].media_type,
				     last ? "the chunk index" : "a manifest of the chunk index", x->why,
				     x->why_len);
	}
	/* the old index document first (it references the old manifests), then those */
	for (size_t i = 0; !ret && i <= x->n_old_mans; i++) {
		const uint8_t *d = i ? x->old_mans[i - 1] : x->old_index;
		bool now = false;

		if (!i && !x->has_old_index)
			continue;
		for (size_t k = 0; k < nd; k++)
			now |= !memcmp(docs[k].digest, d, SHA256_LEN);
		if (now || mans_have(x->live, x->n_live, d))
			continue;
		if (!tags_whole(x, res)) {
			res->manifests_left++; /* a tag not seen may name it */
			continue;
		}
		sha256_to_hex(d, hex);
		snprintf(rel, sizeof(rel), "v2/%s/manifests/sha256:%s", x->repo, hex);
		ret = remote_obj_delete(x->r, rel, i ? "an old manifest of the chunk index"
						    : "the old chunk index", x->why, x->why_len);
		if (!ret)
			res->manifests_deleted++;
	}
	oci_docs_free(docs, nd);
	return ret;
}

int image_gc_oci(const struct image_gc_opts *o, struct image_gc_result *res, char *why,
		 size_t why_len)
{
	struct gc_ctx x = { .why = why, .why_len = why_len };
	struct remote_opts ro = o->remote;
	char w[WHY_MAX] = "";
	int ret;

	memset(res, 0, sizeof(*res));
	if (why_len)
		why[0] = '\0';
	ro.push = !o->dry_run;
	ret = remote_open(&ro, &x.r, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", ro.url, w[0] ? w : strerror(-ret));
		return ret;
	}
	x.repo = remote_is_oci(x.r) ? remote_oci_repo(x.r) : NULL;
	x.tag = x.repo ? remote_oci_tag(x.r) : NULL;
	if (!x.repo || !strncmp(x.tag, "sha256:", 7)) {
		snprintf(why, why_len, "%s: gc of a registry is for oci://HOST/REPO[:TAG]", ro.url);
		ret = -EINVAL;
		goto out;
	}
	ret = load_index(&x, x.tag, &x.old, &x.old_mans, &x.n_old_mans, x.old_index);
	if (!ret)
		x.has_old_index = true;
	if (ret == -ENOENT)
		ret = 0; /* no chunk index yet */
	oci_refs_sort(&x.old);
	if (!ret)
		ret = load_images(&x, res);
	if (!ret)
		ret = add_kept(&x, o, res);
	if (ret)
		goto out;
	res->before = x.old.n;
	res->after = x.keep.n;
	for (size_t i = 0; i < x.old.n; i++) {
		if (oci_refs_find(&x.keep, x.old.v[i].chunk))
			continue;
		res->dropped++;
		res->dropped_bytes += x.old.v[i].size;
		if (o->dropped)
			o->dropped(o->arg, &x.old.v[i]);
	}
	if (!o->dry_run)
		ret = rewrite(&x, res);
out:
	if (ret == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	remote_close(x.r);
	oci_refs_free(&x.old);
	oci_refs_free(&x.keep);
	free(x.old_mans);
	free(x.live);
	return ret;
}
