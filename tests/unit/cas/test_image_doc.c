/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for cas/remote/image_doc.c: the image manifest, image index, image.json and
 * images/index.json built deterministically and parsed back; the parsers against hostile
 * documents (a layout layer without its annotation, bad digests, too long a chain, a tag
 * that is a plain chunk index); image references and names. VM snapshots published the
 * same way: the OCI documents of a snapshot (its document as the first layer, with or
 * without a disk), image.json with "snapshot", the kinds told apart, hostile ones refused.
 */
#include "../helpers.h"

#include "../../../cas/remote/image_doc.h"
#include "../../../cas/remote/image_ref.h"
#include "../../../common/sha256.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void desc_fill(struct image_desc *d, unsigned layers, bool manifest)
{
	memset(d, 0, sizeof(*d));
	for (unsigned i = 0; i < layers; i++) {
		memset(d->layouts[i].digest, 0x10 + i, SHA256_LEN);
		memset(d->layouts[i].sha, 0x80 + i, SHA256_LEN);
		d->layouts[i].size = 4096 * (i + 2);
	}
	d->n_layouts = layers;
	if (manifest) {
		d->has_manifest = true;
		memset(d->manifest.sha, 0x33, SHA256_LEN);
		memcpy(d->manifest.digest, d->manifest.sha, SHA256_LEN);
		d->manifest.size = 777;
	}
	d->disk_size = 1u << 30;
	d->chunks = 3;
}

static void refs_fill(struct oci_refs *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct oci_chunk_ref ref = { .size = 100 + i };

		memset(ref.chunk, (int)i + 1, SHA256_LEN);
		memset(ref.blob, (int)i + 0x41, SHA256_LEN);
		assert_int_equal(oci_refs_add(r, &ref), 0);
	}
	oci_refs_sort(r);
}

static void assert_desc_equal(const struct image_desc *a, const struct image_desc *b)
{
	assert_int_equal(a->n_layouts, b->n_layouts);
	for (unsigned i = 0; i < a->n_layouts; i++) {
		assert_memory_equal(a->layouts[i].digest, b->layouts[i].digest, SHA256_LEN);
		assert_memory_equal(a->layouts[i].sha, b->layouts[i].sha, SHA256_LEN);
		assert_int_equal(a->layouts[i].size, b->layouts[i].size);
	}
	assert_int_equal(a->has_manifest, b->has_manifest);
	if (a->has_manifest) {
		assert_memory_equal(a->manifest.sha, b->manifest.sha, SHA256_LEN);
		assert_int_equal(a->manifest.size, b->manifest.size);
	}
	assert_int_equal(a->disk_size, b->disk_size);
	assert_int_equal(a->chunks, b->chunks);
	assert_int_equal(a->has_snapshot, b->has_snapshot);
	if (a->has_snapshot) {
		assert_memory_equal(a->snapshot.sha, b->snapshot.sha, SHA256_LEN);
		assert_memory_equal(a->snapshot.digest, b->snapshot.digest, SHA256_LEN);
		assert_int_equal(a->snapshot.size, b->snapshot.size);
	}
}

static void snap_fill(struct image_desc *d, unsigned layers, bool manifest)
{
	desc_fill(d, layers, manifest);
	d->has_snapshot = true;
	memset(d->snapshot.sha, 0x5a, SHA256_LEN);
	memcpy(d->snapshot.digest, d->snapshot.sha, SHA256_LEN);
	d->snapshot.size = 1234;
}

/* The OCI documents: deterministic, the index a valid chunk index, parsed back. */
static void test_oci_roundtrip(void **state)
{
	struct image_desc d, back;
	struct oci_refs refs = { 0 }, got = { 0 };
	struct oci_doc *docs, *docs2;
	uint8_t (*mans)[SHA256_LEN] = NULL, man[SHA256_LEN];
	size_t n, n2, n_mans = 0;
	uint64_t size;
	char why[WHY_MAX] = "";

	(void)state;
	desc_fill(&d, 3, true);
	refs_fill(&refs, 3);
	assert_int_equal(image_oci_build(&d, &refs, &docs, &n), 0);
	assert_int_equal(n, 3); /* image manifest, one chunk manifest, the index */
	assert_int_equal(image_oci_build(&d, &refs, &docs2, &n2), 0);
	assert_int_equal(n2, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(docs[i].len, docs2[i].len);
		assert_memory_equal(docs[i].json, docs2[i].json, docs[i].len);
	}
	oci_docs_free(docs2, n2);
	/* the index names the image manifest first */
	assert_int_equal(image_oci_index_parse(docs[2].json, docs[2].len, man, &size, why,
					       sizeof(why)), 0);
	assert_memory_equal(man, docs[0].digest, SHA256_LEN);
	assert_int_equal(size, docs[0].len);
	assert_int_equal(image_oci_manifest_parse(docs[0].json, docs[0].len, &back, why,
						  sizeof(why)), 0);
	assert_desc_equal(&d, &back);
	/* and the chunk index reader takes the tag: both manifests, only the chunk layers */
	assert_int_equal(oci_index_parse(docs[2].json, docs[2].len, NULL, &mans, &n_mans, why,
					 sizeof(why)), 0);
	assert_int_equal(n_mans, 2);
	for (size_t i = 0; i < 2; i++)
		assert_int_equal(oci_index_parse(docs[i].json, docs[i].len, &got, NULL, NULL, why,
						 sizeof(why)), 0);
	assert_int_equal(got.n, 3);
	free(mans);
	oci_refs_free(&got);
	oci_refs_free(&refs);
	oci_docs_free(docs, n);
}

/* A chunk index (no image in it) is "not a lazyblk image". */
static void test_oci_not_image(void **state)
{
	struct oci_refs refs = { 0 };
	struct oci_doc *docs;
	uint8_t man[SHA256_LEN];
	uint64_t size;
	char why[WHY_MAX] = "";
	size_t n;

	(void)state;
	refs_fill(&refs, 2);
	assert_int_equal(oci_index_build(&refs, &docs, &n), 0);
	assert_int_equal(image_oci_index_parse(docs[n - 1].json, docs[n - 1].len, man, &size, why,
					       sizeof(why)),
			 -ENOENT);
	assert_string_equal(why, "not a lazyblk image");
	oci_docs_free(docs, n);
	oci_refs_free(&refs);
}

/* What a tag holds, for the commands that would write it: only a chunk index is theirs. */
static void test_tag_kind(void **state)
{
	static const char *other[] = {
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"layers\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"manifests\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.docker.distribution.manifest."
		"list.v2+json\",\"manifests\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"artifactType\":\"application/vnd.lazyblk.chunks.v1\",\"layers\":[]}",
		"not json", "[]",
	};
	struct image_desc d;
	struct oci_refs refs = { 0 };
	struct oci_doc *docs;
	size_t n;

	(void)state;
	refs_fill(&refs, 3);
	assert_int_equal(oci_index_build(&refs, &docs, &n), 0);
	assert_int_equal(image_tag_kind(docs[n - 1].json, docs[n - 1].len), IMAGE_TAG_CHUNKS);
	oci_docs_free(docs, n);
	desc_fill(&d, 2, true);
	assert_int_equal(image_oci_build(&d, &refs, &docs, &n), 0);
	assert_int_equal(image_tag_kind(docs[n - 1].json, docs[n - 1].len), IMAGE_TAG_IMAGE);
	/* the image manifest alone is no chunk index either */
	assert_int_equal(image_tag_kind(docs[0].json, docs[0].len), IMAGE_TAG_OTHER);
	oci_docs_free(docs, n);
	oci_refs_free(&refs);
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		assert_int_equal(image_tag_kind(other[i], strlen(other[i])), IMAGE_TAG_OTHER);
}

static int manifest_parse_str(const char *json, char *why, size_t why_len)
{
	struct image_desc d;

	return image_oci_manifest_parse(json, strlen(json), &d, why, why_len);
}

#define MHEAD "{\"schemaVersion\":2,\"artifactType\":\"application/vnd.lazyblk.image.v1\",\"layers\":["
#define LAYOUT_L(ann) "{\"mediaType\":\"application/vnd.lazyblk.layout.v1\",\"digest\":\"sha256:" \
	HEX64 "\",\"size\":10" ann "}"
#define ANN ",\"annotations\":{\"org.lazyblk.layout\":\"" HEX64 "\"}"

/* Hostile image manifests. */
static void test_oci_manifest_bad(void **state)
{
	char why[WHY_MAX] = "";
	char big[400 * 66];
	size_t k = 0;

	(void)state;
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L(ANN) "]}", why, sizeof(why)), 0);
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L("") "]}", why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "annotation"));
	/* the annotation whole, not its first 64 characters: trailing junk, a second digest */
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L(",\"annotations\":{\"org.lazyblk.layout"
					    "\":\"" HEX64 "x\"}") "]}", why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "annotation"));
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L(",\"annotations\":{\"org.lazyblk.layout"
					    "\":\"" HEX64 HEX64 "\"}") "]}", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L(",\"annotations\":{\"org.lazyblk.layout"
					    "\":\"" HEX64 "\\n../x\"}") "]}", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L(",\"annotations\":{\"org.lazyblk.layout"
					    "\":\"sha256:" HEX64 "\"}") "]}", why, sizeof(why)), -EBADMSG);
	/* a NUL inside the string: its C string is HEX64 alone (18dca29 took it) */
	assert_int_equal(manifest_parse_str(MHEAD LAYOUT_L(",\"annotations\":{\"org.lazyblk.layout"
					    "\":\"" HEX64 "\\u0000junk\"}") "]}", why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "annotation"));
	assert_int_equal(manifest_parse_str(MHEAD "{\"mediaType\":\"application/vnd.lazyblk."
					    "layout.v1\\u0000x\",\"digest\":\"sha256:" HEX64
					    "\",\"size\":10" ANN "}]}", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(MHEAD "]}", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str("{\"schemaVersion\":2,\"layers\":[" LAYOUT_L(ANN) "]}",
					    why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(MHEAD "{\"mediaType\":\"application/vnd.lazyblk."
					    "layout.v1\",\"digest\":\"sha256:ABC\",\"size\":1}]}", why, sizeof(why)),
			 -EBADMSG);
	assert_int_equal(manifest_parse_str(MHEAD "{\"mediaType\":\"application/vnd.lazyblk."
					    "layout.v1\",\"digest\":\"sha256:" HEX64 "\",\"size\":-1"
					    ANN "}]}", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str("[1,2]", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str("{\"a\":", why, sizeof(why)), -EBADMSG);
	/* 65 layouts: longer than a chain can be */
	k += (size_t)snprintf(big + k, sizeof(big) - k, "%s", MHEAD);
	for (int i = 0; i < 65; i++)
		k += (size_t)snprintf(big + k, sizeof(big) - k, "%s%s", i ? "," : "", LAYOUT_L(ANN));
	snprintf(big + k, sizeof(big) - k, "]}");
	assert_int_equal(manifest_parse_str(big, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "64"));
}

/* image.json: parsed back; "created" is the only thing that varies. */
static void test_image_json(void **state)
{
	struct image_desc d, back;
	char *a, *b;
	size_t la, lb;
	char why[WHY_MAX] = "";

	(void)state;
	desc_fill(&d, 2, false);
	assert_int_equal(image_json_build(&d, "2026-01-01T00:00:00Z", &a, &la), 0);
	assert_int_equal(image_json_build(&d, "2026-01-01T00:00:00Z", &b, &lb), 0);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	assert_int_equal(image_json_parse(a, la, &back, why, sizeof(why)), 0);
	assert_desc_equal(&d, &back);
	free(a);
	free(b);
	desc_fill(&d, 1, true);
	assert_int_equal(image_json_build(&d, "2026-01-01T00:00:00Z", &a, &la), 0);
	assert_int_equal(image_json_parse(a, la, &back, why, sizeof(why)), 0);
	assert_desc_equal(&d, &back);
	free(a);
	const char *bad[] = {
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[]}",
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[]}",
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[{\"digest\":\"sha256:" HEX64 "\",\"size\":3}]}",
		"{\"schemaVersion\":1,\"mediaType\":\"x\",\"layouts\":[{\"digest\":\"sha256:" HEX64
		"\",\"sha256\":\"sha256:" HEX64 "\",\"size\":3}]}",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		assert_int_equal(image_json_parse(bad[i], strlen(bad[i]), &back, why, sizeof(why)),
				 -EBADMSG);
}

/* A VM snapshot's OCI documents: its own artifactType, the document first, parsed back. */
static void test_oci_snapshot(void **state)
{
	struct image_desc d, back;
	struct oci_refs refs = { 0 }, got = { 0 };
	struct oci_doc *docs;
	uint8_t man[SHA256_LEN];
	uint64_t size;
	char why[WHY_MAX] = "";
	size_t n;

	(void)state;
	refs_fill(&refs, 5);
	for (unsigned layers = 0; layers <= 2; layers++) {
		snap_fill(&d, layers, layers == 2);
		assert_int_equal(image_oci_build(&d, &refs, &docs, &n), 0);
		assert_int_equal(n, 3);
		assert_non_null(strstr(docs[n - 1].json, "\"artifactType\":\""
				       IMAGE_ARTIFACT_SNAPSHOT "\""));
		assert_non_null(strstr(docs[0].json, "\"layers\":[{\"mediaType\":\""
				       IMAGE_MT_SNAPDOC "\""));
		assert_int_equal(image_tag_kind(docs[n - 1].json, docs[n - 1].len),
				 IMAGE_TAG_SNAPSHOT);
		assert_int_equal(image_oci_index_parse(docs[n - 1].json, docs[n - 1].len, man,
						       &size, why, sizeof(why)), 0);
		assert_memory_equal(man, docs[0].digest, SHA256_LEN);
		assert_int_equal(image_oci_manifest_parse(docs[0].json, docs[0].len, &back, why,
							  sizeof(why)), 0);
		assert_desc_equal(&d, &back);
		/* the tag is a chunk index too: the snapshot's chunks, whatever its layers */
		assert_int_equal(oci_index_parse(docs[1].json, docs[1].len, &got, NULL, NULL, why,
						 sizeof(why)), 0);
		assert_int_equal(got.n, 5);
		oci_refs_free(&got);
		oci_docs_free(docs, n);
	}
	assert_string_equal(image_tag_what(IMAGE_TAG_SNAPSHOT), "a lazyblk VM snapshot");
	oci_refs_free(&refs);
}

#define SHEAD "{\"schemaVersion\":2,\"artifactType\":\"" IMAGE_ARTIFACT_SNAPSHOT "\",\"layers\":["
#define SNAP_L(size) "{\"mediaType\":\"" IMAGE_MT_SNAPDOC "\",\"digest\":\"sha256:" HEX64 \
	"\",\"size\":" size "}"
#define MAN_L "{\"mediaType\":\"application/vnd.lazyblk.manifest.v1\",\"digest\":\"sha256:" \
	HEX64 "\",\"size\":10}"

/* Hostile snapshot manifests: no document, two, one after a layout, too big, in an image. */
static void test_oci_snapshot_bad(void **state)
{
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(manifest_parse_str(SHEAD SNAP_L("10") "]}", why, sizeof(why)), 0);
	assert_int_equal(manifest_parse_str(SHEAD SNAP_L("10") "," LAYOUT_L(ANN) "]}", why,
					    sizeof(why)), 0);
	assert_int_equal(manifest_parse_str(SHEAD "]}", why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "without its snapshot document"));
	assert_int_equal(manifest_parse_str(SHEAD LAYOUT_L(ANN) "]}", why, sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(SHEAD SNAP_L("10") "," SNAP_L("10") "]}", why,
					    sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(SHEAD LAYOUT_L(ANN) "," SNAP_L("10") "]}", why,
					    sizeof(why)), -EBADMSG);
	assert_int_equal(manifest_parse_str(SHEAD SNAP_L("65537") "]}", why, sizeof(why)),
			 -EBADMSG);
	assert_non_null(strstr(why, "64 KiB"));
	assert_int_equal(manifest_parse_str(SHEAD SNAP_L("10") "," MAN_L "]}", why, sizeof(why)),
			 -EBADMSG);
	/* an image's manifest never carries a snapshot document */
	assert_int_equal(manifest_parse_str(MHEAD SNAP_L("10") "," LAYOUT_L(ANN) "]}", why,
					    sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "image manifest with a snapshot document"));
}

/* image.json of a snapshot: "snapshot" names the document; without a disk, no layouts. */
static void test_image_json_snapshot(void **state)
{
	static const char *bad[] = {
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[],\"snapshot\":{\"digest\":\"sha256:" HEX64 "\"}}",
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[],\"snapshot\":{\"digest\":\"sha256:" HEX64 "\",\"size\":70000}}",
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[],\"snapshot\":{\"digest\":\"sha256:xyz\",\"size\":10}}",
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[]}",
		"{\"schemaVersion\":1,\"mediaType\":\"application/vnd.lazyblk.image.v1+json\","
		"\"layouts\":[],\"manifest\":{\"digest\":\"sha256:" HEX64 "\",\"sha256\":\"sha256:"
		HEX64 "\",\"size\":3},\"snapshot\":{\"digest\":\"sha256:" HEX64 "\",\"size\":10}}",
	};
	struct image_desc d, back;
	char *a;
	size_t la;
	char why[WHY_MAX] = "";

	(void)state;
	for (unsigned layers = 0; layers <= 2; layers++) {
		snap_fill(&d, layers, layers == 2);
		assert_int_equal(image_json_build(&d, "2026-01-01T00:00:00Z", &a, &la), 0);
		assert_non_null(strstr(a, "\"snapshot\":{\"digest\":\"sha256:5a5a"));
		assert_int_equal(image_json_parse(a, la, &back, why, sizeof(why)), 0);
		assert_desc_equal(&d, &back);
		free(a);
	}
	/* an image's has none */
	desc_fill(&d, 1, false);
	assert_int_equal(image_json_build(&d, "2026-01-01T00:00:00Z", &a, &la), 0);
	assert_null(strstr(a, "snapshot"));
	assert_int_equal(image_json_parse(a, la, &back, why, sizeof(why)), 0);
	assert_false(back.has_snapshot);
	free(a);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(image_json_parse(bad[i], strlen(bad[i]), &back, why, sizeof(why)),
				 -EBADMSG);
}

static void test_names(void **state)
{
	char *names[] = { strdup("zeta"), strdup("alpha"), strdup("zeta"), strdup("m-1.0_x") };
	char **back, *json;
	char why[WHY_MAX] = "";
	size_t n, len;
	const char *bad = "{\"schemaVersion\":1,\"images\":[\"../x\"]}";

	(void)state;
	assert_true(image_name_valid("a"));
	assert_true(image_name_valid("0a._-"));
	assert_false(image_name_valid(""));
	assert_false(image_name_valid("-a"));
	assert_false(image_name_valid("A"));
	assert_false(image_name_valid("a/b"));
	assert_false(image_name_valid(".."));
	assert_int_equal(image_names_build(names, 4, &json, &len), 0);
	assert_string_equal(json, "{\"schemaVersion\":1,\"images\":[\"alpha\",\"m-1.0_x\",\"zeta\"]}\n");
	assert_int_equal(image_names_parse(json, len, &back, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(back[1], "m-1.0_x");
	image_names_free(back, n);
	free(json);
	assert_int_equal(image_names_parse(bad, strlen(bad), &back, &n, why, sizeof(why)),
			 -EBADMSG);
	for (int i = 0; i < 4; i++)
		free(names[i]);
}

static void test_ref_parse(void **state)
{
	struct image_ref r;
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(image_ref_parse("oci://h:5000/a/b:v1", &r, why, sizeof(why)), 0);
	assert_true(r.oci);
	assert_string_equal(r.name, "v1");
	assert_string_equal(r.chunk_url, "oci://h:5000/a/b:v1");
	image_ref_free(&r);
	assert_int_equal(image_ref_parse("oci://h/a@sha256:" HEX64, &r, why, sizeof(why)), 0);
	assert_string_equal(r.name, "sha256:" HEX64);
	image_ref_free(&r);
	assert_int_equal(image_ref_parse("oci://h:5000/a/b", &r, why, sizeof(why)), -EINVAL);
	/* an empty tag or digest names nothing (fuzz_image_doc) */
	assert_int_equal(image_ref_parse("oci://h:5000/a/b:", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("oci://h/a@", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("http://h/p/q/images/n1", &r, why, sizeof(why)), 0);
	assert_false(r.oci);
	assert_string_equal(r.name, "n1");
	assert_string_equal(r.chunk_url, "http://h/p/q/");
	image_ref_free(&r);
	assert_int_equal(image_ref_parse("https://h/images/n", &r, why, sizeof(why)), 0);
	assert_string_equal(r.chunk_url, "https://h/");
	image_ref_free(&r);
	assert_int_equal(image_ref_parse("http://h/p/", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("http://h/images/", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("http://h/images/a/b", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("http://h/images/N", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("http://images/x", &r, why, sizeof(why)), -EINVAL);
	assert_int_equal(image_ref_parse("./x.layout", &r, why, sizeof(why)), -EINVAL);
	assert_false(image_ref_is("x.layout"));
	assert_true(image_ref_is("oci+http://h/r:t"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_oci_roundtrip),
		cmocka_unit_test(test_oci_not_image),
		cmocka_unit_test(test_tag_kind),
		cmocka_unit_test(test_oci_manifest_bad),
		cmocka_unit_test(test_image_json),
		cmocka_unit_test(test_oci_snapshot),
		cmocka_unit_test(test_oci_snapshot_bad),
		cmocka_unit_test(test_image_json_snapshot),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_ref_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
