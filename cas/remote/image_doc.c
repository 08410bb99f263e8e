/* SPDX-License-Identifier: MIT */
/* Image documents (image_doc.h): the OCI image manifest and index, image.json, index.json. */
#include "image_doc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "../oci_json.h"
#include "../../common/why.h"
#include "../../common/json_out.h"

/* ------------------------------------------------------------------ building */

static void put_digest(struct json_buf *b, const char *key, const uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	json_buf_printf(b, "\"%s\":\"sha256:%s\"", key, hex);
}

static void put_layer(struct json_buf *b, const char *mt, const struct image_file *f,
		      bool layout)
{
	char hex[SHA256_HEX_LEN + 1];

	json_buf_printf(b, "{\"mediaType\":\"%s\",", mt);
	put_digest(b, "digest", f->sha);
	json_buf_printf(b, ",\"size\":%llu", (unsigned long long)f->size);
	if (layout) {
		sha256_to_hex(f->digest, hex);
		json_buf_printf(b, ",\"annotations\":{\"" IMAGE_ANNOT_LAYOUT "\":\"%s\"}", hex);
	}
	json_buf_puts(b, "}");
}

static int build_image_manifest(const struct image_desc *d, struct oci_doc *doc)
{
	struct json_buf b = { 0 };
	uint8_t empty[SHA256_LEN];
	int ret;

	ret = sha256_buf(OCI_EMPTY_JSON, sizeof(OCI_EMPTY_JSON) - 1, empty);
	if (ret)
		return ret;
	json_buf_printf(&b, "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"artifactType\":\"%s\",\"config\":{\"mediaType\":\"" OCI_MT_EMPTY "\",",
			d->has_snapshot ? IMAGE_ARTIFACT_SNAPSHOT : IMAGE_ARTIFACT);
	put_digest(&b, "digest", empty);
	json_buf_puts(&b, ",\"size\":2},\"layers\":[");
	if (d->has_snapshot)
		put_layer(&b, IMAGE_MT_SNAPDOC, &d->snapshot, false);
	for (unsigned i = 0; i < d->n_layouts; i++) {
		if (i || d->has_snapshot)
			json_buf_puts(&b, ",");
		put_layer(&b, IMAGE_MT_LAYOUT, &d->layouts[i], true);
	}
	if (d->has_manifest) {
		json_buf_puts(&b, ",");
		put_layer(&b, IMAGE_MT_MANIFEST, &d->manifest, false);
	}
	json_buf_printf(&b, "],\"annotations\":{\"" IMAGE_ANNOT_CHUNKS "\":\"%llu\",\""
			IMAGE_ANNOT_DISK_SIZE "\":\"%llu\"}}", (unsigned long long)d->chunks,
			(unsigned long long)d->disk_size);
	ret = oci_doc_finish(&b, doc, OCI_MT_MANIFEST);
	json_buf_free(&b);
	return ret;
}

int image_oci_build(const struct image_desc *d, const struct oci_refs *refs,
		    struct oci_doc **docs, size_t *n)
{
	struct oci_doc *cm = NULL, *all;
	size_t ncm = 0, k;
	int ret;

	*docs = NULL;
	*n = 0;
	ret = oci_index_build(refs, &cm, &ncm); /* its last document, the index, is not used */
	if (ret)
		return ret;
	k = ncm - 1;
	all = calloc(k + 2, sizeof(*all));
	if (!all) {
		oci_docs_free(cm, ncm);
		return -ENOMEM;
	}
	ret = build_image_manifest(d, &all[0]);
	for (size_t i = 0; i < k; i++) {
		all[i + 1] = cm[i];
		memset(&cm[i], 0, sizeof(cm[i]));
	}
	oci_docs_free(cm, ncm);
	if (!ret)
		ret = oci_index_doc(all, k + 1, d->has_snapshot ? IMAGE_ARTIFACT_SNAPSHOT
								: IMAGE_ARTIFACT, &all[k + 1]);
	if (ret) {
		oci_docs_free(all, k + 2);
		return ret;
	}
	*docs = all;
	*n = k + 2;
	return 0;
}

int image_json_build(const struct image_desc *d, const char *created, char **out, size_t *len)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{\"schemaVersion\":1,\"mediaType\":\"" IMAGE_MT_JSON "\",\"layouts\":[");
	for (unsigned i = 0; i < d->n_layouts; i++) {
		json_buf_puts(&b, i ? ",{" : "{");
		put_digest(&b, "digest", d->layouts[i].digest);
		json_buf_puts(&b, ",");
		put_digest(&b, "sha256", d->layouts[i].sha);
		json_buf_printf(&b, ",\"size\":%llu}", (unsigned long long)d->layouts[i].size);
	}
	json_buf_puts(&b, "]");
	if (d->has_manifest) {
		json_buf_puts(&b, ",\"manifest\":{");
		put_digest(&b, "digest", d->manifest.digest);
		json_buf_puts(&b, ",");
		put_digest(&b, "sha256", d->manifest.sha);
		json_buf_printf(&b, ",\"size\":%llu}", (unsigned long long)d->manifest.size);
	}
	if (d->has_snapshot) {
		json_buf_puts(&b, ",\"snapshot\":{");
		put_digest(&b, "digest", d->snapshot.sha);
		json_buf_printf(&b, ",\"size\":%llu}", (unsigned long long)d->snapshot.size);
	}
	json_buf_printf(&b, ",\"disk_size\":%llu,\"chunks\":%llu,\"created\":\"%s\"}\n",
			(unsigned long long)d->disk_size, (unsigned long long)d->chunks, created);
	if (b.err)
		return b.err;
	*out = json_buf_take(&b, len);
	return 0;
}

/* ------------------------------------------------------------------ parsing */

/* A JSON object of kind into *root: 0, or -EBADMSG, -EFBIG (over a limit), -ENOMEM, with why. */
static int parse_root(const char *json, size_t len, enum oci_json_kind kind,
		      struct json_object **root, char *why, size_t why_len)
{
	int ret;

	*root = NULL;
	if (!json || !len || memchr(json, '\0', len))
		return why_set(why, why_len, -EBADMSG, "empty document, or a NUL byte in it");
	ret = oci_json_parse(json, len, kind, root, why, why_len);
	if (ret)
		return ret;
	if (!json_object_is_type(*root, json_type_object)) {
		json_object_put(*root);
		*root = NULL;
		return why_set(why, why_len, -EBADMSG, "not a JSON object");
	}
	return 0;
}

/* A decimal annotation value (absent: 0). */
static uint64_t annot_u64(struct json_object *ann, const char *key)
{
	const char *s = oci_json_str(ann, key);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return 0;
	v = strtoull(s, &end, 10);
	return *end ? 0 : v;
}

static int parse_layer(struct json_object *l, struct image_desc *d, char *why, size_t why_len)
{
	const char *mt = oci_json_str(l, "mediaType");
	struct json_object *ann = oci_json_get(l, "annotations", json_type_object);
	struct image_file f = { 0 };
	char dig[8 + SHA256_HEX_LEN + 1];
	const char *lhex;

	if (!mt || oci_digest_parse(oci_json_str(l, "digest"), f.sha) || oci_json_u64(l, "size", &f.size))
		return why_set(why, why_len, -EBADMSG,
			       "image manifest layer without a mediaType, a sha256 digest or a size");
	if (!strcmp(mt, IMAGE_MT_SNAPDOC)) {
		if (d->has_snapshot || d->n_layouts || d->has_manifest || f.size > IMAGE_SNAPDOC_MAX)
			return why_set(why, why_len, -EBADMSG, "%s", f.size > IMAGE_SNAPDOC_MAX
				       ? "a snapshot document larger than 64 KiB"
				       : "image manifest with a snapshot document not first, or two");
		memcpy(f.digest, f.sha, SHA256_LEN);
		d->snapshot = f;
		d->has_snapshot = true;
		return 0;
	}
	if (!strcmp(mt, IMAGE_MT_MANIFEST)) {
		if (d->has_manifest)
			return why_set(why, why_len, -EBADMSG,
				       "image manifest with two lazyblk manifests");
		memcpy(f.digest, f.sha, SHA256_LEN);
		d->manifest = f;
		d->has_manifest = true;
		return 0;
	}
	if (strcmp(mt, IMAGE_MT_LAYOUT))
		return 0; /* not ours */
	lhex = ann ? oci_json_str(ann, IMAGE_ANNOT_LAYOUT) : NULL;
	/* all of it (a cut copy would take "HEX64 and trailing junk" for HEX64) */
	if (!lhex || snprintf(dig, sizeof(dig), "sha256:%s", lhex) >= (int)sizeof(dig) ||
	    oci_digest_parse(dig, f.digest))
		return why_set(why, why_len, -EBADMSG,
			       "layout layer without its org.lazyblk.layout annotation (64 lowercase hex)");
	if (d->has_manifest || d->n_layouts == IMAGE_LAYERS_MAX)
		return why_set(why, why_len, -EBADMSG, "%s", d->has_manifest
			       ? "image manifest with a layout after its manifest"
				       : "image chain longer than 64 layouts");
	d->layouts[d->n_layouts++] = f;
	return 0;
}

int image_oci_manifest_parse(const char *json, size_t len, struct image_desc *d,
			     char *why, size_t why_len)
{
	struct json_object *root, *layers, *ann;
	const char *at;
	bool snap;
	int ret;

	memset(d, 0, sizeof(*d));
	ret = parse_root(json, len, OCI_JSON_MANIFEST, &root, why, why_len);
	if (ret)
		return ret;
	layers = oci_json_get(root, "layers", json_type_array);
	at = oci_json_str(root, "artifactType");
	snap = at && !strcmp(at, IMAGE_ARTIFACT_SNAPSHOT);
	if (!layers || !at || (strcmp(at, IMAGE_ARTIFACT) && !snap)) {
		ret = why_set(why, why_len, -EBADMSG, "not a lazyblk image manifest");
		goto out;
	}
	ret = 0;
	for (size_t i = 0; !ret && i < json_object_array_length(layers); i++)
		ret = parse_layer(json_object_array_get_idx(layers, i), d, why, why_len);
	if (!ret && snap != d->has_snapshot)
		ret = why_set(why, why_len, -EBADMSG, "%s", snap
			      ? "VM snapshot manifest without its snapshot document"
			      : "lazyblk image manifest with a snapshot document");
	else if (!ret && !snap && !d->n_layouts)
		ret = why_set(why, why_len, -EBADMSG, "lazyblk image manifest without a layout");
	else if (!ret && d->has_manifest && !d->n_layouts)
		ret = why_set(why, why_len, -EBADMSG, "VM snapshot manifest with a manifest but "
			      "no layout");
	ann = oci_json_get(root, "annotations", json_type_object);
	d->chunks = annot_u64(ann, IMAGE_ANNOT_CHUNKS);
	d->disk_size = annot_u64(ann, IMAGE_ANNOT_DISK_SIZE);
out:
	json_object_put(root);
	return ret;
}

/*
 * The first entry of an image or VM snapshot in a parsed index: 0 (*snap: which), -ENOENT
 * (why "not a lazyblk image"), -EBADMSG.
 */
static int index_entry(struct json_object *root, uint8_t man[SHA256_LEN], uint64_t *size,
		       bool *snap, char *why, size_t why_len)
{
	struct json_object *list = oci_json_get(root, "manifests", json_type_array);
	const char *at;

	for (size_t i = 0; list && i < json_object_array_length(list); i++) {
		struct json_object *m = json_object_array_get_idx(list, i);

		at = oci_json_str(m, "artifactType");
		if (!at || (strcmp(at, IMAGE_ARTIFACT) && strcmp(at, IMAGE_ARTIFACT_SNAPSHOT)))
			continue;
		*snap = !strcmp(at, IMAGE_ARTIFACT_SNAPSHOT);
		if (oci_digest_parse(oci_json_str(m, "digest"), man) || oci_json_u64(m, "size", size))
			return why_set(why, why_len, -EBADMSG,
				       "image index entry without a sha256 digest or a size");
		return 0;
	}
	return why_set(why, why_len, -ENOENT, "not a lazyblk image");
}

int image_oci_index_parse(const char *json, size_t len, uint8_t man[SHA256_LEN],
			  uint64_t *size, char *why, size_t why_len)
{
	struct json_object *root;
	bool snap;
	int ret;

	ret = parse_root(json, len, OCI_JSON_INDEX, &root, why, why_len);
	if (ret)
		return ret;
	ret = index_entry(root, man, size, &snap, why, why_len);
	json_object_put(root);
	return ret;
}

enum image_tag_kind image_tag_kind(const char *json, size_t len)
{
	uint8_t man[SHA256_LEN];
	struct json_object *root;
	const char *mt, *at;
	enum image_tag_kind kind = IMAGE_TAG_OTHER;
	uint64_t size;
	bool snap = false;
	int ret;

	if (parse_root(json, len, OCI_JSON_INDEX, &root, NULL, 0))
		return IMAGE_TAG_OTHER;
	ret = index_entry(root, man, &size, &snap, NULL, 0);
	if (ret != -ENOENT) {
		json_object_put(root);
		return ret ? IMAGE_TAG_OTHER : snap ? IMAGE_TAG_SNAPSHOT : IMAGE_TAG_IMAGE;
	}
	mt = oci_json_str(root, "mediaType");
	at = oci_json_str(root, "artifactType");
	if (mt && at && !strcmp(mt, OCI_MT_INDEX) && !strcmp(at, OCI_ARTIFACT_CHUNKS))
		kind = IMAGE_TAG_CHUNKS;
	json_object_put(root);
	return kind;
}

const char *image_tag_what(enum image_tag_kind kind)
{
	switch (kind) {
	case IMAGE_TAG_CHUNKS: return "a lazyblk chunk index";
	case IMAGE_TAG_IMAGE: return "a lazyblk image";
	case IMAGE_TAG_SNAPSHOT: return "a lazyblk VM snapshot";
	default: return "something other than a lazyblk chunk index";
	}
}

static int parse_file(struct json_object *o, struct image_file *f)
{
	if (!o || oci_digest_parse(oci_json_str(o, "digest"), f->digest) ||
	    oci_digest_parse(oci_json_str(o, "sha256"), f->sha) || oci_json_u64(o, "size", &f->size))
		return -EBADMSG;
	return 0;
}

int image_json_parse(const char *json, size_t len, struct image_desc *d, char *why, size_t why_len)
{
	struct json_object *root, *list, *sv, *m;
	size_t n;
	int ret;

	memset(d, 0, sizeof(*d));
	ret = parse_root(json, len, OCI_JSON_MANIFEST, &root, why, why_len);
	if (ret)
		return ret;
	sv = oci_json_get(root, "schemaVersion", json_type_int);
	list = oci_json_get(root, "layouts", json_type_array);
	if (!sv || json_object_get_int64(sv) != 1 || !oci_json_str(root, "mediaType") ||
	    strcmp(oci_json_str(root, "mediaType"), IMAGE_MT_JSON) || !list) {
		ret = why_set(why, why_len, -EBADMSG, "%s",
			      "not a lazyblk image.json (schemaVersion 1, mediaType " IMAGE_MT_JSON ")");
		goto out;
	}
	n = json_object_array_length(list);
	m = oci_json_get(root, "snapshot", json_type_object);
	if (m && (oci_digest_parse(oci_json_str(m, "digest"), d->snapshot.sha) ||
		  oci_json_u64(m, "size", &d->snapshot.size) || d->snapshot.size > IMAGE_SNAPDOC_MAX)) {
		ret = why_set(why, why_len, -EBADMSG,
			      "image.json snapshot without a digest or a size (at most 64 KiB)");
		goto out;
	}
	memcpy(d->snapshot.digest, d->snapshot.sha, SHA256_LEN);
	d->has_snapshot = m != NULL;
	if ((!n && !d->has_snapshot) || n > IMAGE_LAYERS_MAX) {
		ret = why_set(why, why_len, -EBADMSG,
			      "image.json lists no layout, or more than 64");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (parse_file(json_object_array_get_idx(list, i), &d->layouts[i])) {
			ret = why_set(why, why_len, -EBADMSG,
				      "image.json layout without a digest, a sha256 or a size");
			goto out;
		}
	}
	d->n_layouts = (unsigned)n;
	m = oci_json_get(root, "manifest", json_type_object);
	if (m && parse_file(m, &d->manifest)) {
		ret = why_set(why, why_len, -EBADMSG,
			      "image.json manifest without a digest, a sha256 or a size");
		goto out;
	}
	d->has_manifest = m != NULL;
	if (d->has_manifest && !n) {
		ret = why_set(why, why_len, -EBADMSG, "image.json with a manifest but no layout");
		goto out;
	}
	oci_json_u64(root, "disk_size", &d->disk_size);
	oci_json_u64(root, "chunks", &d->chunks);
	ret = 0;
out:
	json_object_put(root);
	return ret;
}

/* ------------------------------------------------------------------ names */

bool image_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > 128 || !strchr("abcdefghijklmnopqrstuvwxyz0123456789", name[0]))
		return false;
	return strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int image_names_build(char **names, size_t n, char **out, size_t *len)
{
	struct json_buf b = { 0 };
	size_t k = 0;

	qsort(names, n, sizeof(*names), name_cmp);
	json_buf_puts(&b, "{\"schemaVersion\":1,\"images\":[");
	for (size_t i = 0; i < n; i++) {
		if (i && !strcmp(names[i], names[i - 1]))
			continue;
		json_buf_printf(&b, "%s\"%s\"", k++ ? "," : "", names[i]);
	}
	json_buf_puts(&b, "]}\n");
	if (b.err)
		return b.err;
	*out = json_buf_take(&b, len);
	return 0;
}

void image_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int image_names_parse(const char *json, size_t len, char ***names, size_t *n, char *why,
		      size_t why_len)
{
	struct json_object *root, *list;
	char **v = NULL;
	size_t k = 0, cnt;
	int ret;

	*names = NULL;
	*n = 0;
	ret = parse_root(json, len, OCI_JSON_INDEX, &root, why, why_len);
	if (ret)
		return ret;
	list = oci_json_get(root, "images", json_type_array);
	if (!list) {
		ret = why_set(why, why_len, -EBADMSG, "images/index.json without an images array");
		goto out;
	}
	cnt = json_object_array_length(list);
	v = calloc(cnt ? cnt : 1, sizeof(*v));
	ret = v ? 0 : -ENOMEM;
	for (size_t i = 0; !ret && i < cnt; i++) {
		struct json_object *s = json_object_array_get_idx(list, i);

		if (!json_object_is_type(s, json_type_string) ||
		    !image_name_valid(json_object_get_string(s))) {
			ret = why_set(why, why_len, -EBADMSG,
				      "images/index.json lists a name that is not [a-z0-9][a-z0-9._-]*");
		} else if (!(v[k++] = strdup(json_object_get_string(s)))) {
			ret = -ENOMEM;
		}
	}
	if (ret) {
		image_names_free(v, k);
	} else {
		*names = v;
		*n = k;
	}
out:
	json_object_put(root);
	return ret;
}
