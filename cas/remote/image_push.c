/* SPDX-License-Identifier: MIT */
/* Publishing an image under a name (image_ref.h): after its chunks, its files and documents. */
#include "image_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/fsutil.h"
#include "../../common/why.h"
#include "../oci_json.h"
#include "remote_int.h"

struct ipush {
	const struct image_push_opts *o;
	struct image_push_stats *st;
	struct image_ref ref;
	struct image_desc d;
	uint8_t *data[IMAGE_LAYERS_MAX + 1];   /* the files' bytes: layouts, then the manifest */
};

/* Read the files, take their sizes and digests into x->d. -errno with why. */
static int ipush_read(struct ipush *x, char *why, size_t why_len)
{
	const struct image_push_opts *o = x->o;
	size_t len;
	int ret;

	if ((!o->n_layouts && !o->snapdoc) || o->n_layouts > IMAGE_LAYERS_MAX ||
	    (o->manifest && !o->n_layouts) || o->snapdoc_len > IMAGE_SNAPDOC_MAX) {
		snprintf(why, why_len, "an image is 1 to %d layouts (a VM snapshot 0 to %d, and a "
			 "document of at most 64 KiB)", IMAGE_LAYERS_MAX, IMAGE_LAYERS_MAX);
		return -EINVAL;
	}
	if (o->snapdoc) {
		x->d.has_snapshot = true;
		x->d.snapshot.size = o->snapdoc_len;
		ret = sha256_buf(o->snapdoc, o->snapdoc_len, x->d.snapshot.sha);
		if (ret)
			return ret;
		memcpy(x->d.snapshot.digest, x->d.snapshot.sha, SHA256_LEN);
	}
	x->d.n_layouts = o->n_layouts;
	x->d.disk_size = o->disk_size;
	x->d.chunks = o->push.n_chunks;
	for (unsigned i = 0; i <= o->n_layouts; i++) {
		const char *path = i < o->n_layouts ? o->layouts[i] : o->manifest;
		struct image_file *f = i < o->n_layouts ? &x->d.layouts[i] : &x->d.manifest;

		if (!path)
			break;
		ret = fs_read_file_max(path, IMAGE_FILE_MAX, &x->data[i], &len);
		if (ret) {
			snprintf(why, why_len, "%s: %s", path, strerror(-ret));
			return ret;
		}
		f->size = len;
		ret = sha256_buf(x->data[i], len, f->sha);
		if (ret)
			return ret;
		if (i < o->n_layouts)
			memcpy(f->digest, o->layout_digests[i], SHA256_LEN);
		else
			memcpy(f->digest, f->sha, SHA256_LEN);
	}
	x->d.has_manifest = o->manifest != NULL;
	return 0;
}

/* Each file as a blob of the repository, then the documents, the index last (the tag). */
static int publish_oci(struct ipush *x, struct remote *r, char *why, size_t why_len)
{
	static const char empty[] = OCI_EMPTY_JSON;
	const char *ref = remote_oci_tag(r), *repo = remote_oci_repo(r);
	struct oci_refs refs;
	struct oci_doc *docs = NULL;
	uint8_t ed[SHA256_LEN];
	size_t nd = 0;
	int ret;

	for (unsigned i = 0; i <= x->d.n_layouts; i++) {
		const struct image_file *f = i < x->d.n_layouts ? &x->d.layouts[i] : &x->d.manifest;

		if (i == x->d.n_layouts && !x->d.has_manifest)
			break;
		ret = remote_blob_put(r, f->sha, x->data[i], f->size,
				      i < x->d.n_layouts ? "a layout" : "the manifest", why, why_len);
		if (ret < 0)
			return ret;
		if (ret && i < x->d.n_layouts)
			x->st->layout_bytes += f->size;
		else if (ret)
			x->st->manifest_bytes += f->size;
	}
	if (x->d.has_snapshot) {
		ret = remote_blob_put(r, x->d.snapshot.sha, x->o->snapdoc, x->d.snapshot.size,
				      "the snapshot document", why, why_len);
		if (ret < 0)
			return ret;
		if (ret)
			x->st->snapdoc_bytes += x->d.snapshot.size;
	}
	ret = sha256_buf(empty, 2, ed);
	if (!ret)
		ret = remote_blob_put(r, ed, empty, 2, "the empty config blob", why, why_len);
	if (ret < 0)
		return ret;
	ret = remote_oci_pushed(r, &refs);
	if (ret)
		return ret;
	ret = image_oci_build(&x->d, &refs, &docs, &nd);
	oci_refs_free(&refs);
	for (size_t i = 0; !ret && i < nd; i++) {
		char hex[SHA256_HEX_LEN + 1], rel[PATH_MAX];
		bool last = i + 1 == nd;

		sha256_to_hex(docs[i].digest, hex);
		if (last)
			snprintf(rel, sizeof(rel), "v2/%s/manifests/%s", repo, ref);
		else
			snprintf(rel, sizeof(rel), "v2/%s/manifests/sha256:%s", repo, hex);
		ret = remote_obj_put(r, rel, docs[i].json, docs[i].len, docs[i].media_type,
				     last ? "the image index" : i ? "a chunk manifest"
				     : x->d.has_snapshot ? "the snapshot's manifest" : "the image manifest",
				     why, why_len);
		if (last && !ret)
			memcpy(x->st->digest, docs[i].digest, SHA256_LEN);
	}
	oci_docs_free(docs, nd);
	return ret;
}

/*
 * images/index.json with NAME added (a missing one is empty), and every name the server
 * lists under images/: what another push wrote back from an older copy is put right.
 */
static int publish_names(struct ipush *x, struct remote *r, char *why, size_t why_len)
{
	char **names = NULL, *json = NULL;
	size_t n = 0, len;
	int ret;

	ret = image_names_http(r, x->ref.name, &names, &n, NULL, why, why_len);
	if (ret == -ENOMEM)
		return why_set(why, why_len, ret, "out of memory");
	if (ret)
		return ret;
	ret = image_names_build(names, n, &json, &len);
	if (!ret)
		ret = remote_obj_put(r, "images/index.json", json, len, "application/json",
				     "the list of images", why, why_len);
	free(json);
	image_names_free(names, n);
	return ret;
}

/* The snapshot document at PATH/snapshots/<sha256 hex>.json. */
static int put_snapdoc(struct ipush *x, struct remote *r, struct lease *lease, char *why,
		       size_t why_len)
{
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	int ret;

	ret = cas_push_held(lease, x->o->push.remote.url, why, why_len);
	if (ret)
		return ret;
	sha256_to_hex(x->d.snapshot.sha, hex);
	snprintf(rel, sizeof(rel), "snapshots/%s.json", hex);
	ret = remote_obj_put(r, rel, x->o->snapdoc, x->d.snapshot.size, "application/json",
			     "the snapshot document", why, why_len);
	if (!ret)
		x->st->snapdoc_bytes += x->d.snapshot.size;
	return ret;
}

static int publish_http(struct ipush *x, struct remote *r, struct lease *lease, char *why,
			size_t why_len)
{
	const char *url = x->o->push.remote.url;
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1], *json = NULL;
	size_t len;
	int ret = 0;

	for (unsigned i = 0; i <= x->d.n_layouts && !ret; i++) {
		bool layout = i < x->d.n_layouts;
		const struct image_file *f = layout ? &x->d.layouts[i] : &x->d.manifest;

		if (!layout && !x->d.has_manifest)
			break;
		/* the push's lease still held (a layout upload may take long) */
		ret = cas_push_held(lease, url, why, why_len);
		if (ret)
			break;
		sha256_to_hex(f->digest, hex);
		snprintf(rel, sizeof(rel), layout ? "layouts/%s.layout" : "manifests/%s.manifest",
			 hex);
		ret = remote_obj_put(r, rel, x->data[i], f->size, "application/octet-stream",
				     layout ? "a layout" : "the manifest", why, why_len);
		if (!ret)
			*(layout ? &x->st->layout_bytes : &x->st->manifest_bytes) += f->size;
	}
	if (!ret && x->d.has_snapshot)
		ret = put_snapdoc(x, r, lease, why, why_len);
	if (!ret)
		ret = image_json_build(&x->d, x->o->created, &json, &len);
	if (!ret) /* the name: only while no gc can have taken a chunk */
		ret = cas_push_held(lease, url, why, why_len);
	if (!ret) {
		snprintf(rel, sizeof(rel), "images/%s/image.json", x->ref.name);
		ret = remote_obj_put(r, rel, json, len, "application/json", "image.json", why,
				     why_len);
		sha256_buf(json, len, x->st->digest);
	}
	free(json);
	return ret ? ret : publish_names(x, r, why, why_len);
}

static int ipush_publish(void *arg, struct remote *r, struct lease *lease, char *why,
			 size_t why_len)
{
	struct ipush *x = arg;

	return x->ref.oci ? publish_oci(x, r, why, why_len)
			  : publish_http(x, r, lease, why, why_len);
}

int image_push(const struct image_push_opts *o, struct image_push_stats *st, char *why,
	       size_t why_len)
{
	struct ipush x = { .o = o, .st = st };
	struct cas_push_opts po = o->push;
	char w[WHY_MAX] = "";
	int ret;

	memset(st, 0, sizeof(*st));
	if (why_len)
		why[0] = '\0';
	ret = image_ref_parse(o->push.remote.url, &x.ref, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", o->push.remote.url, w[0] ? w : strerror(-ret));
		return ret;
	}
	if (x.ref.oci && !strncmp(x.ref.name, "sha256:", 7)) {
		snprintf(why, why_len, "%s: cannot push to a digest: name a tag", o->push.remote.url);
		ret = -EINVAL;
		goto out;
	}
	ret = ipush_read(&x, why, why_len);
	if (ret)
		goto out;
	po.remote.url = x.ref.chunk_url;
	po.publish = ipush_publish;
	po.publish_arg = &x;
	ret = cas_push(&po, &st->chunks, why, why_len);
out:
	for (unsigned i = 0; i <= IMAGE_LAYERS_MAX; i++)
		free(x.data[i]);
	image_ref_free(&x.ref);
	return ret;
}
