/* SPDX-License-Identifier: MIT */
/*
 * The documents that publish an image by reference, as a registry or an HTTP store answers
 * them (cas/remote/image_doc.c; docs/images.md): the image index under an OCI tag
 * (image_oci_index_parse), the lazyblk image manifest it names (image_oci_manifest_parse),
 * an HTTP store's images/NAME/image.json (image_json_parse) and its images/index.json
 * (image_names_parse), and the references a user writes (image_ref_parse). What a parser
 * accepts must survive a round trip: built again by lazyblk's own writer (image_oci_build,
 * image_json_build, image_names_build) and parsed back, it is the same image (the same
 * names, sorted and once each). A VM snapshot's (its document a layer, "snapshot" in
 * image.json; its layouts may be none) is held to the same.
 *
 * Input: the first byte picks the parser (its value modulo 5, in the order above), the rest
 * is the document (a NUL-terminated copy is handed over, with its length).
 */
#include "fuzz.h"
#include "../cas/remote/image_doc.h"
#include "../cas/remote/image_ref.h"

static void same_desc(const struct image_desc *a, const struct image_desc *b)
{
	if (a->n_layouts != b->n_layouts || a->has_manifest != b->has_manifest ||
	    a->disk_size != b->disk_size || a->chunks != b->chunks ||
	    memcmp(a->layouts, b->layouts, a->n_layouts * sizeof(a->layouts[0])) ||
	    (a->has_manifest && memcmp(&a->manifest, &b->manifest, sizeof(a->manifest))) ||
	    a->has_snapshot != b->has_snapshot ||
	    (a->has_snapshot && memcmp(&a->snapshot, &b->snapshot, sizeof(a->snapshot))))
		abort(); /* the round trip changed the image */
}

static void oci_index(const char *s, size_t len)
{
	uint8_t man[SHA256_LEN];
	uint64_t size;
	char why[WHY_MAX] = "";
	int ret = image_oci_index_parse(s, len, man, &size, why, sizeof(why));

	fuzz_result("image_oci_index_parse", ret, why);
	if (ret && !why[0])
		abort(); /* a refusal says why */
}

/* Accepted: built as lazyblk publishes it (with no chunks), parsed back the same. */
static void oci_manifest(const char *s, size_t len)
{
	struct image_desc d, d2;
	struct oci_refs refs = { 0 };
	struct oci_doc *docs;
	uint8_t man[SHA256_LEN];
	uint64_t size;
	char why[WHY_MAX] = "";
	size_t n;
	int ret = image_oci_manifest_parse(s, len, &d, why, sizeof(why));

	if (fuzz_result("image_oci_manifest_parse", ret, why)) {
		if (!why[0])
			abort();
		return;
	}
	if ((d.n_layouts < 1 && !d.has_snapshot) || d.n_layouts > IMAGE_LAYERS_MAX ||
	    (d.has_manifest && !d.n_layouts))
		abort();
	if (image_oci_build(&d, &refs, &docs, &n))
		return; /* -ENOMEM */
	if (image_oci_manifest_parse(docs[0].json, docs[0].len, &d2, why, sizeof(why)))
		abort(); /* lazyblk's own image manifest refused */
	same_desc(&d, &d2);
	if (image_oci_index_parse(docs[n - 1].json, docs[n - 1].len, man, &size, why,
				  sizeof(why)) ||
	    memcmp(man, docs[0].digest, SHA256_LEN) || size != docs[0].len)
		abort(); /* its index does not name it */
	oci_docs_free(docs, n);
}

static void image_json(const char *s, size_t len)
{
	struct image_desc d, d2;
	char why[WHY_MAX] = "";
	char *out;
	size_t olen;
	int ret = image_json_parse(s, len, &d, why, sizeof(why));

	if (fuzz_result("image_json_parse", ret, why)) {
		if (!why[0])
			abort();
		return;
	}
	if ((d.n_layouts < 1 && !d.has_snapshot) || d.n_layouts > IMAGE_LAYERS_MAX ||
	    (d.has_manifest && !d.n_layouts))
		abort();
	if (image_json_build(&d, "2026-12-01T22:00:00Z", &out, &olen))
		return;
	if (image_json_parse(out, olen, &d2, why, sizeof(why)))
		abort(); /* lazyblk's own image.json refused */
	same_desc(&d, &d2);
	free(out);
}

static void names(const char *s, size_t len)
{
	char **v, **v2;
	size_t n, n2, olen;
	char why[WHY_MAX] = "";
	char *out;
	int ret = image_names_parse(s, len, &v, &n, why, sizeof(why));

	if (fuzz_result("image_names_parse", ret, why)) {
		if (!why[0] && ret != -ENOMEM)
			abort();
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!image_name_valid(v[i]))
			abort(); /* a name lazyblk would not write */
	if (!image_names_build(v, n, &out, &olen)) {
		if (image_names_parse(out, olen, &v2, &n2, why, sizeof(why)) || n2 > n)
			abort(); /* lazyblk's own index.json refused, or grown */
		for (size_t i = 1; i < n2; i++)
			if (strcmp(v2[i - 1], v2[i]) >= 0)
				abort(); /* not sorted, or a name twice */
		image_names_free(v2, n2);
		free(out);
	}
	image_names_free(v, n);
}

static void ref(const char *s)
{
	struct image_ref r = { 0 };
	char why[WHY_MAX] = "";
	int ret = image_ref_parse(s, &r, why, sizeof(why));

	(void)image_ref_is(s);
	if (fuzz_result("image_ref_parse", ret, why)) {
		if (ret == -EINVAL && !why[0])
			abort();
		return;
	}
	if (!r.chunk_url || !r.name || !*r.name)
		abort(); /* accepted: a chunk remote and a name */
	image_ref_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (!size)
		return 0;
	fuzz_dir();
	s = fuzz_cstr_after_first(data, size);
	switch (data[0] % 5) {
	case 0: oci_index(s, size - 1); break;
	case 1: oci_manifest(s, size - 1); break;
	case 2: image_json(s, size - 1); break;
	case 3: names(s, size - 1); break;
	default: ref(s); break;
	}
	free(s);
	return 0;
}
