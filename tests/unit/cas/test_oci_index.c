/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for cas/remote/oci_index.c: the sorted chunk -> blob reference list, the image
 * manifests and image index built from it (exact bytes, determinism, splitting at
 * OCI_INDEX_MAX_LAYERS), their strict parser against hostile documents, and the parsing
 * of a registry's Bearer challenge.
 */
#include "../helpers.h"

#include <json-c/json.h>

#include "../../../cas/remote/oci_index.h"
#include "../../../common/sha256.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
/* sha256 of the two bytes "{}" */
#define EMPTY_DIGEST "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

/* ------------------------------------------------------------------ helpers */

static struct oci_chunk_ref rand_ref(uint64_t *seed)
{
	struct oci_chunk_ref ref;

	prng_fill(seed, ref.chunk, sizeof(ref.chunk));
	prng_fill(seed, ref.blob, sizeof(ref.blob));
	ref.size = prng_next(seed) % (1u << 22);
	return ref;
}

static void rand_refs(struct oci_refs *r, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		struct oci_chunk_ref ref = rand_ref(&seed);

		assert_int_equal(oci_refs_add(r, &ref), 0);
	}
}

static void assert_ref_equal(const struct oci_chunk_ref *a, const struct oci_chunk_ref *b)
{
	assert_memory_equal(a->chunk, b->chunk, SHA256_LEN);
	assert_memory_equal(a->blob, b->blob, SHA256_LEN);
	assert_int_equal(a->size, b->size);
}

static void shuffle(struct oci_chunk_ref *v, size_t n, uint64_t seed)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(prng_next(&seed) % i);
		struct oci_chunk_ref t = v[i - 1];

		v[i - 1] = v[j];
		v[j] = t;
	}
}

/* Parse that must succeed; returns the parser's verdict for assertions on the rest. */
static void parse_ok(const char *json, size_t len, struct oci_refs *refs,
		     uint8_t (**man)[SHA256_LEN], size_t *n_man)
{
	char why[WHY_MAX] = "";
	int ret = oci_index_parse(json, len, refs, man, n_man, why, sizeof(why));

	if (ret)
		fail_msg("parse: %d (%s) of %.*s", ret, why[0] ? why : "-",
			 (int)(len > 300 ? 300 : len), json);
}

/* Parse that must fail with want, a reason, and nothing appended. */
static void parse_fail_len(const char *json, size_t len, int want)
{
	struct oci_refs refs = { 0 };
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n_man = 0;
	char why[WHY_MAX] = "";
	int ret = oci_index_parse(json, len, &refs, &man, &n_man, why, sizeof(why));

	if (ret != want)
		fail_msg("parse of %.*s: %d, expected %d", (int)(len > 300 ? 300 : len), json, ret,
			 want);
	assert_true(why[0]);
	assert_int_equal(refs.n, 0);
	assert_int_equal(n_man, 0);
	oci_refs_free(&refs);
	free(man);
}

/* Parse that must fail with -EBADMSG, a reason, and nothing appended. */
static void parse_bad_len(const char *json, size_t len)
{
	parse_fail_len(json, len, -EBADMSG);
}

static void parse_bad(const char *json)
{
	parse_bad_len(json, strlen(json));
}

/* A manifest document around the given layers array body. */
static char *manifest_with(const char *layers)
{
	char *s;

	assert_true(asprintf(&s, "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\","
				 "\"config\":{\"mediaType\":\"" OCI_MT_EMPTY "\",\"digest\":\""
				 EMPTY_DIGEST "\",\"size\":2},\"layers\":[%s]}", layers) > 0);
	return s;
}

/* One chunk layer with the given digest, size and annotation texts (already JSON). */
static char *layer_with(const char *digest, const char *size, const char *name)
{
	char *s;

	assert_true(asprintf(&s, "{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":%s,\"size\":%s,"
				 "\"annotations\":{\"" OCI_ANNOT_CHUNK "\":%s}}",
			     digest, size, name) > 0);
	return s;
}

static void manifest_layer_bad(const char *digest, const char *size, const char *name)
{
	char *l = layer_with(digest, size, name), *m = manifest_with(l);

	parse_bad(m);
	free(m);
	free(l);
}

static size_t manifest_layer_count(const char *digest, const char *size, const char *name,
				   struct oci_chunk_ref *out)
{
	char *l = layer_with(digest, size, name), *m = manifest_with(l);
	struct oci_refs refs = { 0 };
	size_t n;

	parse_ok(m, strlen(m), &refs, NULL, NULL);
	n = refs.n;
	if (n && out)
		*out = refs.v[0];
	oci_refs_free(&refs);
	free(m);
	free(l);
	return n;
}

/* ------------------------------------------------------------------ refs */

static void test_refs_add_free(void **state)
{
	struct oci_refs r = { 0 };

	(void)state;
	rand_refs(&r, 1000, 1);
	assert_int_equal(r.n, 1000);
	assert_true(r.cap >= 1000);
	oci_refs_free(&r);
	assert_null(r.v);
	assert_int_equal(r.n, 0);
	oci_refs_free(&r); /* twice is fine */
}

/*
 * Refs whose names come from a small pool (so there are many duplicates) and whose blob's
 * first 8 bytes number them in the order added; checks sort + dedupe against a direct
 * statement: each distinct name once, ascending, with the first-added blob.
 */
static void check_sort(size_t n, size_t pool, uint64_t seed)
{
	struct oci_refs r = { 0 };
	uint8_t (*names)[SHA256_LEN] = calloc(pool ? pool : 1, SHA256_LEN);
	size_t *first = malloc((n ? n : 1) * sizeof(*first)), n_first = 0;
	struct oci_chunk_ref *want;

	assert_non_null(names);
	assert_non_null(first);
	for (size_t i = 0; i < pool; i++) {
		prng_fill(&seed, names[i], SHA256_LEN);
		names[i][0] &= 0x0f; /* shared prefixes too */
	}
	for (size_t i = 0; i < n; i++) {
		struct oci_chunk_ref ref;
		uint64_t k = i;
		size_t pick = (size_t)(prng_next(&seed) % pool);
		bool seen = false;

		memset(&ref, 0, sizeof(ref));
		memcpy(ref.chunk, names[pick], SHA256_LEN);
		memcpy(ref.blob, &k, sizeof(k));
		ref.size = i;
		assert_int_equal(oci_refs_add(&r, &ref), 0);
		for (size_t j = 0; j < n_first && !seen; j++)
			seen = !memcmp(r.v[first[j]].chunk, ref.chunk, SHA256_LEN);
		if (!seen)
			first[n_first++] = i;
	}
	/* the expected result, from a copy before sorting */
	want = malloc((n_first ? n_first : 1) * sizeof(*want));

	assert_non_null(want);
	for (size_t j = 0; j < n_first; j++)
		want[j] = r.v[first[j]];
	for (size_t i = 1; i < n_first; i++) { /* insertion sort: plain and obviously right */
		for (size_t j = i; j > 0; j--) {
			struct oci_chunk_ref t = want[j];

			if (memcmp(want[j].chunk, want[j - 1].chunk, SHA256_LEN) >= 0)
				break;
			want[j] = want[j - 1];
			want[j - 1] = t;
		}
	}

	oci_refs_sort(&r);
	if (r.n != n_first)
		fail_msg("n=%zu pool=%zu: %zu refs after sort, want %zu", n, pool, r.n, n_first);
	for (size_t j = 0; j < n_first; j++)
		assert_ref_equal(&r.v[j], &want[j]);
	/* sorting again changes nothing */
	oci_refs_sort(&r);
	assert_int_equal(r.n, n_first);
	for (size_t j = 0; j < n_first; j++)
		assert_ref_equal(&r.v[j], &want[j]);
	free(want);
	free(first);
	free(names);
	oci_refs_free(&r);
}

static void test_refs_sort_small(void **state)
{
	(void)state;
	/* the in-place stable sort (up to 64) and the merge sort above it */
	for (size_t n = 0; n <= 140; n++) {
		check_sort(n, 1, n);
		check_sort(n, 3, n + 1000);
		check_sort(n, n / 2 + 1, n + 2000);
		check_sort(n, 4 * n + 1, n + 3000);
	}
}

static void test_refs_sort_large(void **state)
{
	(void)state;
	check_sort(3000, 700, 7);
	check_sort(3001, 100000, 8);
	check_sort(2048, 2, 9);
}

static void test_refs_sort_presorted(void **state)
{
	struct oci_refs r = { 0 };
	struct oci_chunk_ref a, b;
	uint64_t seed = 5;

	(void)state;
	oci_refs_sort(&r); /* empty */
	assert_int_equal(r.n, 0);
	rand_refs(&r, 500, 11);
	oci_refs_sort(&r);
	assert_int_equal(r.n, 500);
	for (size_t i = 1; i < r.n; i++)
		assert_true(memcmp(r.v[i - 1].chunk, r.v[i].chunk, SHA256_LEN) < 0);
	oci_refs_free(&r);

	/* sorted, with an adjacent duplicate at the end: the earlier one stays */
	a = rand_ref(&seed);
	b = a;
	b.size = a.size + 1;
	assert_int_equal(oci_refs_add(&r, &a), 0);
	assert_int_equal(oci_refs_add(&r, &b), 0);
	oci_refs_sort(&r);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.v[0].size, a.size);
	oci_refs_free(&r);
}

static void test_refs_find(void **state)
{
	struct oci_refs r = { 0 };
	uint8_t absent[SHA256_LEN];

	(void)state;
	memset(absent, 0, sizeof(absent));
	assert_null(oci_refs_find(&r, absent));
	rand_refs(&r, 777, 3);
	oci_refs_sort(&r);
	for (size_t i = 0; i < r.n; i++) {
		const struct oci_chunk_ref *f = oci_refs_find(&r, r.v[i].chunk);

		assert_ptr_equal(f, &r.v[i]);
	}
	assert_null(oci_refs_find(&r, absent));
	memset(absent, 0xff, sizeof(absent));
	assert_null(oci_refs_find(&r, absent));
	memcpy(absent, r.v[100].chunk, SHA256_LEN);
	absent[31] ^= 1;
	assert_null(oci_refs_find(&r, absent));
	oci_refs_free(&r);
}

/* ------------------------------------------------------------------ build + parse */

static void check_round_trip(size_t count)
{
	struct oci_refs r = { 0 }, back = { 0 };
	struct oci_doc *docs = NULL;
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n = 0, n_man = 0, want_man = count ? (count + OCI_INDEX_MAX_LAYERS - 1) /
						   OCI_INDEX_MAX_LAYERS : 1;

	rand_refs(&r, count, 1000 + count);
	oci_refs_sort(&r);
	assert_int_equal(r.n, count);
	assert_int_equal(oci_index_build(&r, &docs, &n), 0);
	assert_int_equal(n, want_man + 1);

	for (size_t i = 0; i < n; i++) {
		uint8_t d[SHA256_LEN];

		assert_non_null(docs[i].json);
		assert_int_equal(strlen(docs[i].json), docs[i].len);
		assert_int_equal(sha256_buf(docs[i].json, docs[i].len, d), 0);
		assert_memory_equal(d, docs[i].digest, SHA256_LEN);
		assert_string_equal(docs[i].media_type, i + 1 < n ? OCI_MT_MANIFEST : OCI_MT_INDEX);
		assert_null(memchr(docs[i].json, ' ', docs[i].len));
		assert_null(memchr(docs[i].json, '\n', docs[i].len));
	}

	parse_ok(docs[n - 1].json, docs[n - 1].len, &back, &man, &n_man);
	assert_int_equal(back.n, 0);
	assert_int_equal(n_man, n - 1);
	for (size_t i = 0; i + 1 < n; i++)
		assert_memory_equal(man[i], docs[i].digest, SHA256_LEN);

	for (size_t i = 0; i + 1 < n; i++) {
		size_t before = back.n, layers;

		parse_ok(docs[i].json, docs[i].len, &back, &man, &n_man);
		assert_int_equal(n_man, n - 1); /* a manifest adds no manifests */
		layers = back.n - before;
		if (i + 2 < n)
			assert_int_equal(layers, OCI_INDEX_MAX_LAYERS);
		else
			assert_int_equal(layers, count - i * OCI_INDEX_MAX_LAYERS);
	}
	assert_int_equal(back.n, count);
	for (size_t i = 0; i < count; i++)
		assert_ref_equal(&back.v[i], &r.v[i]);
	oci_refs_sort(&back); /* already sorted: unchanged */
	assert_int_equal(back.n, count);
	for (size_t i = 0; i < count; i++)
		assert_ptr_equal(oci_refs_find(&back, r.v[i].chunk), &back.v[i]);

	free(man);
	oci_refs_free(&back);
	oci_docs_free(docs, n);
	oci_refs_free(&r);
}

static void test_round_trip(void **state)
{
	static const size_t counts[] = { 0, 1, 2, 3999, 4000, 4001, 8000, 9000 };

	(void)state;
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		check_round_trip(counts[i]);
}

static void test_build_exact(void **state)
{
	struct oci_refs r = { 0 };
	struct oci_chunk_ref ref;
	struct oci_doc *docs;
	char *want, hex[SHA256_HEX_LEN + 1];
	size_t n;

	(void)state;
	assert_int_equal(sha256_from_hex(HEX64, ref.chunk), 0);
	assert_int_equal(sha256_from_hex(HEX64B, ref.blob), 0);
	ref.size = 12345678901ull;
	assert_int_equal(oci_refs_add(&r, &ref), 0);
	assert_int_equal(oci_index_build(&r, &docs, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(docs[0].json,
		"{\"schemaVersion\":2,"
		"\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"artifactType\":\"application/vnd.lazyblk.chunks.v1\","
		"\"config\":{\"mediaType\":\"application/vnd.oci.empty.v1+json\","
		"\"digest\":\"" EMPTY_DIGEST "\",\"size\":2},"
		"\"layers\":[{\"mediaType\":\"application/vnd.lazyblk.chunk.v1+zstd\","
		"\"digest\":\"sha256:" HEX64B "\",\"size\":12345678901,"
		"\"annotations\":{\"org.lazyblk.chunk\":\"" HEX64 "\"}}]}");
	sha256_to_hex(docs[0].digest, hex);
	assert_true(asprintf(&want,
		"{\"schemaVersion\":2,"
		"\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"artifactType\":\"application/vnd.lazyblk.chunks.v1\","
		"\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"sha256:%s\",\"size\":%zu,"
		"\"artifactType\":\"application/vnd.lazyblk.chunks.v1\"}]}", hex, docs[0].len) > 0);
	assert_string_equal(docs[1].json, want);
	free(want);
	oci_docs_free(docs, n);
	oci_refs_free(&r);
}

static void test_build_empty(void **state)
{
	struct oci_refs r = { 0 }, back = { 0 };
	struct oci_doc *docs;
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n, n_man = 0;

	(void)state;
	assert_int_equal(oci_index_build(&r, &docs, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(docs[0].json,
		"{\"schemaVersion\":2,"
		"\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"artifactType\":\"application/vnd.lazyblk.chunks.v1\","
		"\"config\":{\"mediaType\":\"application/vnd.oci.empty.v1+json\","
		"\"digest\":\"" EMPTY_DIGEST "\",\"size\":2},\"layers\":[]}");
	parse_ok(docs[0].json, docs[0].len, &back, &man, &n_man);
	assert_int_equal(back.n, 0);
	parse_ok(docs[1].json, docs[1].len, &back, &man, &n_man);
	assert_int_equal(n_man, 1);
	assert_memory_equal(man[0], docs[0].digest, SHA256_LEN);
	free(man);
	oci_docs_free(docs, n);
	oci_docs_free(NULL, 0);
}

/* Every document is JSON that json-c reads back to the expected fields (not via our parser). */
static void test_build_valid_json(void **state)
{
	struct oci_refs r = { 0 };
	struct oci_doc *docs;
	size_t n;

	(void)state;
	rand_refs(&r, 4003, 77);
	oci_refs_sort(&r);
	assert_int_equal(oci_index_build(&r, &docs, &n), 0);
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_tokener_parse(docs[i].json), *v, *list;

		assert_non_null(o);
		assert_true(json_object_object_get_ex(o, "schemaVersion", &v));
		assert_int_equal(json_object_get_int(v), 2);
		assert_true(json_object_object_get_ex(o, "mediaType", &v));
		assert_string_equal(json_object_get_string(v), docs[i].media_type);
		assert_true(json_object_object_get_ex(o, "artifactType", &v));
		assert_string_equal(json_object_get_string(v), OCI_ARTIFACT_CHUNKS);
		if (i + 1 < n) {
			struct json_object *l, *ann;
			char hex[SHA256_HEX_LEN + 1];

			assert_true(json_object_object_get_ex(o, "layers", &list));
			assert_int_equal(json_object_array_length(list), i ? 3 : 4000);
			l = json_object_array_get_idx(list, 0);
			assert_true(json_object_object_get_ex(l, "annotations", &ann));
			assert_true(json_object_object_get_ex(ann, OCI_ANNOT_CHUNK, &v));
			sha256_to_hex(r.v[i * OCI_INDEX_MAX_LAYERS].chunk, hex);
			assert_string_equal(json_object_get_string(v), hex);
			assert_true(json_object_object_get_ex(l, "size", &v));
			assert_int_equal(json_object_get_int64(v),
					 r.v[i * OCI_INDEX_MAX_LAYERS].size);
		} else {
			assert_true(json_object_object_get_ex(o, "manifests", &list));
			assert_int_equal(json_object_array_length(list), 2);
		}
		json_object_put(o);
	}
	oci_docs_free(docs, n);
	oci_refs_free(&r);
}

static void test_build_deterministic(void **state)
{
	struct oci_refs a = { 0 }, b = { 0 };
	struct oci_doc *da, *db;
	size_t na, nb;

	(void)state;
	rand_refs(&a, 5000, 42);
	for (size_t i = 0; i < a.n; i++)
		assert_int_equal(oci_refs_add(&b, &a.v[i]), 0);
	shuffle(b.v, b.n, 9);
	oci_refs_sort(&a);
	oci_refs_sort(&b);
	assert_int_equal(oci_index_build(&a, &da, &na), 0);
	assert_int_equal(oci_index_build(&b, &db, &nb), 0);
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		assert_int_equal(da[i].len, db[i].len);
		assert_memory_equal(da[i].json, db[i].json, da[i].len);
		assert_memory_equal(da[i].digest, db[i].digest, SHA256_LEN);
	}
	oci_docs_free(db, nb);
	/* and again from the same refs */
	assert_int_equal(oci_index_build(&a, &db, &nb), 0);
	for (size_t i = 0; i < na; i++)
		assert_memory_equal(da[i].json, db[i].json, da[i].len);
	oci_docs_free(db, nb);
	oci_docs_free(da, na);
	oci_refs_free(&a);
	oci_refs_free(&b);
}

/* ------------------------------------------------------------------ parse: accepted shapes */

static void test_parse_appends(void **state)
{
	struct oci_refs r1 = { 0 }, r2 = { 0 }, back = { 0 };
	struct oci_doc *d1, *d2;
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n1, n2, n_man = 0;
	char *bad;

	(void)state;
	rand_refs(&r1, 10, 1);
	rand_refs(&r2, 20, 2);
	oci_refs_sort(&r1);
	oci_refs_sort(&r2);
	assert_int_equal(oci_index_build(&r1, &d1, &n1), 0);
	assert_int_equal(oci_index_build(&r2, &d2, &n2), 0);
	parse_ok(d1[1].json, d1[1].len, &back, &man, &n_man);
	parse_ok(d2[1].json, d2[1].len, &back, &man, &n_man);
	assert_int_equal(n_man, 2);
	assert_memory_equal(man[0], d1[0].digest, SHA256_LEN);
	assert_memory_equal(man[1], d2[0].digest, SHA256_LEN);
	parse_ok(d1[0].json, d1[0].len, &back, &man, &n_man);
	parse_ok(d2[0].json, d2[0].len, &back, &man, &n_man);
	assert_int_equal(back.n, 30);
	assert_ref_equal(&back.v[0], &r1.v[0]);
	assert_ref_equal(&back.v[10], &r2.v[0]);

	/* a failed parse leaves what is there alone */
	bad = manifest_with("{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64 "\","
			    "\"size\":1,\"annotations\":{\"" OCI_ANNOT_CHUNK "\":\"" HEX64 "\"}},"
			    "{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64 "\","
			    "\"size\":-1,\"annotations\":{\"" OCI_ANNOT_CHUNK "\":\"" HEX64 "\"}}");
	{
		char why[WHY_MAX] = "";

		assert_int_equal(oci_index_parse(bad, strlen(bad), &back, &man, &n_man, why,
						 sizeof(why)),
				 -EBADMSG);
		assert_true(why[0]);
	}
	assert_int_equal(back.n, 30);
	assert_int_equal(n_man, 2);
	free(bad);

	free(man);
	oci_refs_free(&back);
	oci_docs_free(d1, n1);
	oci_docs_free(d2, n2);
	oci_refs_free(&r1);
	oci_refs_free(&r2);
}

static void test_parse_ignores_foreign(void **state)
{
	struct oci_refs refs = { 0 };
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n_man = 0;
	struct oci_chunk_ref ref;
	char *m;

	(void)state;
	/* layers without the annotation, or with other annotations only, are skipped */
	m = manifest_with("{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
			  "\"digest\":\"sha256:" HEX64 "\",\"size\":10},"
			  "{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64 "\","
			  "\"size\":11,\"annotations\":{\"org.example\":\"x\"}},"
			  "{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64B "\","
			  "\"size\":12,\"annotations\":{\"org.example\":\"x\","
			  "\"" OCI_ANNOT_CHUNK "\":\"" HEX64 "\"},\"urls\":[1,2]}");
	parse_ok(m, strlen(m), &refs, NULL, NULL);
	assert_int_equal(refs.n, 1);
	assert_int_equal(refs.v[0].size, 12);
	assert_int_equal(sha256_from_hex(HEX64B, ref.blob), 0);
	assert_memory_equal(refs.v[0].blob, ref.blob, SHA256_LEN);
	assert_int_equal(sha256_from_hex(HEX64, ref.chunk), 0);
	assert_memory_equal(refs.v[0].chunk, ref.chunk, SHA256_LEN);
	free(m);

	/* index entries of other media types (nested index, attestations) are skipped */
	m = strdup("{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",\"manifests\":["
		   "{\"mediaType\":\"" OCI_MT_INDEX "\",\"digest\":\"sha256:" HEX64 "\","
		   "\"size\":1},"
		   "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"sha256:" HEX64B "\","
		   "\"size\":2,\"platform\":{\"os\":\"linux\"},\"annotations\":{\"a\":\"b\"}},"
		   "{\"mediaType\":\"application/vnd.in-toto+json\",\"digest\":\"sha256:" HEX64
		   "\",\"size\":3}],\"annotations\":{\"x\":\"y\"}}");
	parse_ok(m, strlen(m), &refs, &man, &n_man);
	assert_int_equal(n_man, 1);
	assert_memory_equal(man[0], ref.blob, SHA256_LEN);
	assert_int_equal(refs.n, 1);
	free(m);

	/* an empty index */
	m = strdup("{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",\"manifests\":[]}");
	parse_ok(m, strlen(m), &refs, &man, &n_man);
	free(m);
	assert_int_equal(n_man, 1);

	free(man);
	oci_refs_free(&refs);
}

static void test_parse_no_media_type(void **state)
{
	struct oci_refs refs = { 0 };
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n_man = 0;
	const char *idx = "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST
			  "\",\"digest\":\"sha256:" HEX64 "\",\"size\":5}]}";
	const char *mf = "{\"schemaVersion\":2,\"layers\":[{\"mediaType\":\"" OCI_MT_CHUNK
			 "\",\"digest\":\"sha256:" HEX64 "\",\"size\":5,\"annotations\":"
			 "{\"" OCI_ANNOT_CHUNK "\":\"" HEX64B "\"}}]}";

	(void)state;
	parse_ok(idx, strlen(idx), &refs, &man, &n_man);
	assert_int_equal(n_man, 1);
	assert_int_equal(refs.n, 0);
	parse_ok(mf, strlen(mf), &refs, &man, &n_man);
	assert_int_equal(n_man, 1);
	assert_int_equal(refs.n, 1);
	/* trailing white space is fine */
	{
		const char *ws = "{\"schemaVersion\":2,\"layers\":[]} \n";

		parse_ok(ws, strlen(ws), &refs, &man, &n_man);
	}
	/* both, or neither */
	parse_bad("{\"schemaVersion\":2,\"layers\":[],\"manifests\":[]}");
	parse_bad("{\"schemaVersion\":2}");
	free(man);
	oci_refs_free(&refs);
}

static void test_parse_unexpected_kind(void **state)
{
	struct oci_refs refs = { 0 };
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n_man = 0;
	char why[WHY_MAX] = "";
	const char *idx = "{\"schemaVersion\":2,\"manifests\":[]}";
	const char *mf = "{\"schemaVersion\":2,\"layers\":[]}";

	(void)state;
	/* NULL outputs say which kind of document is expected */
	assert_int_equal(oci_index_parse(idx, strlen(idx), &refs, NULL, NULL, why, sizeof(why)),
			 -EBADMSG);
	assert_true(why[0]);
	why[0] = '\0';
	assert_int_equal(oci_index_parse(mf, strlen(mf), NULL, &man, &n_man, why, sizeof(why)),
			 -EBADMSG);
	assert_true(why[0]);
	assert_int_equal(oci_index_parse(mf, strlen(mf), &refs, NULL, NULL, NULL, 0), 0);
}

/* ------------------------------------------------------------------ parse: hostile */

static void test_parse_hostile(void **state)
{
	static const char *const bad[] = {
		"",
		" ",
		"null",
		"true",
		"2",
		"\"x\"",
		"[]",
		"[{\"schemaVersion\":2,\"layers\":[]}]",
		"{}",
		"{\"schemaVersion\":2}",
		"{\"schemaVersion\":1,\"layers\":[]}",
		"{\"schemaVersion\":\"2\",\"layers\":[]}",
		"{\"schemaVersion\":2.0,\"layers\":[]}",
		"{\"layers\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\"}",
		"{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\"}",
		"{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",\"layers\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\",\"manifests\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"application/json\",\"layers\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":5,\"layers\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":null,\"layers\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\\u0000\",\"layers\":[]}",
		"{\"schemaVersion\":2,\"layers\":{}}",
		"{\"schemaVersion\":2,\"layers\":null}",
		"{\"schemaVersion\":2,\"layers\":\"x\"}",
		"{\"schemaVersion\":2,\"layers\":[1]}",
		"{\"schemaVersion\":2,\"layers\":[null]}",
		"{\"schemaVersion\":2,\"layers\":[[]]}",
		"{\"schemaVersion\":2,\"layers\":[\"sha256:" HEX64 "\"]}",
		"{\"schemaVersion\":2,\"layers\":[{}]}",
		"{\"schemaVersion\":2,\"manifests\":{}}",
		"{\"schemaVersion\":2,\"manifests\":[1]}",
		"{\"schemaVersion\":2,\"manifests\":[\"sha256:" HEX64 "\"]}",
		"{\"schemaVersion\":2,\"manifests\":[{}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha256:" HEX64 "\","
			"\"size\":1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"size\":1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"digest\":\"sha256:" HEX64 "\"}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"digest\":\"sha256:" HEX64 "\",\"size\":-1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"digest\":\"sha256:" HEX64 "\",\"size\":\"1\"}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"digest\":\"SHA256:" HEX64 "\",\"size\":1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" OCI_MT_MANIFEST "\","
			"\"digest\":\"sha512:" HEX64 HEX64 "\",\"size\":1}]}",
		/* a bad entry of another media type is still bad */
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"x\","
			"\"digest\":\"sha256:" HEX64 "\",\"size\":-1}]}",
		/* not an object / trailing garbage / two documents */
		"{\"schemaVersion\":2,\"layers\":[]}x",
		"{\"schemaVersion\":2,\"layers\":[]}{}",
		"{\"schemaVersion\":2,\"layers\":[]},",
		"{\"schemaVersion\":2,\"layers\":[],}",
		"{\"schemaVersion\":2,\"layers\":[1,]}",
		"{schemaVersion:2,layers:[]}",
		"{\"schemaVersion\":2,\"layers\":[]",
		"\xef\xbb\xbf{\"schemaVersion\":2,\"layers\":[]}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		parse_bad(bad[i]);
	parse_bad_len(NULL, 0);
	parse_bad_len("{}", 0);
}

static void test_parse_bad_layers(void **state)
{
	const char *h = "\"sha256:" HEX64 "\"", *n = "\"" HEX64B "\"";
	struct oci_chunk_ref ref;
	char *l, *m;

	(void)state;
	/* the good one, for reference */
	assert_int_equal(manifest_layer_count(h, "7", n, &ref), 1);
	assert_int_equal(ref.size, 7);
	assert_int_equal(manifest_layer_count(h, "0", n, NULL), 1);
	assert_int_equal(manifest_layer_count(h, "-0", n, NULL), 1);
	assert_int_equal(manifest_layer_count(h, "9223372036854775806", n, &ref), 1);
	assert_int_equal(ref.size, 9223372036854775806ull);

	/* digests */
	manifest_layer_bad("\"sha256:" HEX64 "0\"", "7", n);
	manifest_layer_bad("\"sha256:0123456789abcdef0123456789abcdef"
			   "0123456789abcdef0123456789abcde\"", "7", n);
	manifest_layer_bad("\"sha256:0123456789ABCDEF0123456789abcdef"
			   "0123456789abcdef0123456789abcdef\"", "7", n);
	manifest_layer_bad("\"sha256:" HEX64 "\\u0000\"", "7", n);
	manifest_layer_bad("\"sha256:../../etc/passwd\"", "7", n);
	manifest_layer_bad("\"" HEX64 "\"", "7", n);
	manifest_layer_bad("\"sha256:g123456789abcdef0123456789abcdef"
			   "0123456789abcdef0123456789abcdef\"", "7", n);
	manifest_layer_bad("\"\"", "7", n);
	manifest_layer_bad("null", "7", n);
	manifest_layer_bad("1", "7", n);
	manifest_layer_bad("[\"sha256:" HEX64 "\"]", "7", n);
	manifest_layer_bad("{}", "7", n);

	/* sizes */
	manifest_layer_bad(h, "-1", n);
	manifest_layer_bad(h, "-9223372036854775808", n);
	manifest_layer_bad(h, "-99999999999999999999999", n);
	manifest_layer_bad(h, "\"7\"", n);
	manifest_layer_bad(h, "7.0", n);
	manifest_layer_bad(h, "7e0", n);
	manifest_layer_bad(h, "1e400", n);
	manifest_layer_bad(h, "9223372036854775807", n);
	manifest_layer_bad(h, "9223372036854775808", n);
	manifest_layer_bad(h, "18446744073709551615", n);
	manifest_layer_bad(h, "99999999999999999999999999999999999999", n);
	manifest_layer_bad(h, "null", n);
	manifest_layer_bad(h, "true", n);
	manifest_layer_bad(h, "[7]", n);
	manifest_layer_bad(h, "{}", n);

	/* chunk names */
	manifest_layer_bad(h, "7", "\"0123456789ABCDEF0123456789abcdef"
			   "0123456789abcdef0123456789abcdef\"");
	manifest_layer_bad(h, "7", "\"sha256:" HEX64 "\"");
	manifest_layer_bad(h, "7", "\"" HEX64 "0\"");
	manifest_layer_bad(h, "7", "\"" HEX64 "\\u0000\"");
	manifest_layer_bad(h, "7", "\"" HEX64 " \"");
	manifest_layer_bad(h, "7", "\"\"");
	manifest_layer_bad(h, "7", "null");
	manifest_layer_bad(h, "7", "7");
	manifest_layer_bad(h, "7", "[\"" HEX64 "\"]");

	/* missing size; annotations of the wrong type; a chunk of another media type */
	m = manifest_with("{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64 "\","
			  "\"annotations\":{\"" OCI_ANNOT_CHUNK "\":\"" HEX64 "\"}}");
	parse_bad(m);
	free(m);
	m = manifest_with("{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64 "\","
			  "\"size\":1,\"annotations\":[\"" OCI_ANNOT_CHUNK "\"]}");
	parse_bad(m);
	free(m);
	m = manifest_with("{\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:" HEX64 "\","
			  "\"size\":1,\"annotations\":\"" HEX64 "\"}");
	parse_bad(m);
	free(m);
	m = manifest_with("{\"mediaType\":\"application/octet-stream\",\"digest\":\"sha256:" HEX64
			  "\",\"size\":1,\"annotations\":{\"" OCI_ANNOT_CHUNK "\":\"" HEX64 "\"}}");
	parse_bad(m);
	free(m);
	m = manifest_with("{\"digest\":\"sha256:" HEX64 "\",\"size\":1,"
			  "\"annotations\":{\"" OCI_ANNOT_CHUNK "\":\"" HEX64 "\"}}");
	parse_bad(m);
	free(m);
	/* a good layer, then a bad unannotated one */
	l = layer_with(h, "1", n);
	assert_true(asprintf(&m, "%s,{\"mediaType\":\"x\",\"digest\":\"sha256:X\","
				 "\"size\":1}", l) > 0);
	free(l);
	l = manifest_with(m);
	parse_bad(l);
	free(l);
	free(m);
}

/* Every proper prefix of a good document, and every one-byte corruption that breaks it. */
static void test_parse_truncated(void **state)
{
	struct oci_refs r = { 0 };
	struct oci_doc *docs;
	size_t n;

	(void)state;
	rand_refs(&r, 3, 5);
	oci_refs_sort(&r);
	assert_int_equal(oci_index_build(&r, &docs, &n), 0);
	for (size_t d = 0; d < n; d++) {
		char *copy = malloc(docs[d].len);

		assert_non_null(copy);
		for (size_t len = 0; len < docs[d].len; len++) {
			memcpy(copy, docs[d].json, len); /* an exact-length buffer for ASan */
			parse_bad_len(copy, len);
		}
		free(copy);
	}
	oci_docs_free(docs, n);
	oci_refs_free(&r);
}

static void test_parse_nul(void **state)
{
	const char *doc = "{\"schemaVersion\":2,\"layers\":[]}";
	size_t len = strlen(doc);
	char buf[64];

	(void)state;
	/* the terminating NUL counted in */
	parse_bad_len(doc, len + 1);
	/* a NUL inside, where white space or a string byte would be */
	for (size_t at = 0; at < len; at++) {
		memcpy(buf, doc, len);
		buf[at] = '\0';
		parse_bad_len(buf, len);
	}
	memcpy(buf, doc, len);
	memcpy(buf + len, " \0 ", 3);
	parse_bad_len(buf, len + 3);
}

static void test_parse_deep(void **state)
{
	enum { depth = 1000 };
	static char s[2 * depth + 64];
	char *p;

	(void)state;
	/* bare nesting */
	memset(s, '[', depth);
	memset(s + depth, ']', depth);
	parse_fail_len(s, 2 * depth, -EFBIG); /* over OCI_JSON_DEPTH_MAX */
	/* nested inside layers, and as an annotation value */
	p = s + sprintf(s, "{\"schemaVersion\":2,\"layers\":");
	memset(p, '[', depth);
	memset(p + depth, ']', depth);
	strcpy(p + 2 * depth, "}");
	parse_fail_len(s, strlen(s), -EFBIG);
	p = s + sprintf(s, "{\"schemaVersion\":2,\"layers\":[{\"annotations\":");
	for (size_t i = 0; i < depth / 8; i++)
		p += sprintf(p, "{\"a\":");
	p += sprintf(p, "1");
	memset(p, '}', depth / 8);
	strcpy(p + depth / 8, "}]}");
	parse_fail_len(s, strlen(s), -EFBIG);
}

/* Bytes flipped at random places never crash, and what parses stays well-formed. */
/* The whole index is capped: manifests in the image index, chunks over all manifests. */
static void test_parse_caps(void **state)
{
	char desc[160], *l, *m, *idx, *p;
	struct oci_refs refs = { 0 };
	uint8_t (*man)[SHA256_LEN] = NULL;
	size_t n_man = 0, cap = 64 + (OCI_INDEX_MAX_MANIFESTS + 1) * sizeof(desc);
	char why[WHY_MAX] = "";

	(void)state;
	snprintf(desc, sizeof(desc), "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\""
		 EMPTY_DIGEST "\",\"size\":2}");
	idx = malloc(cap);
	assert_non_null(idx);
	for (size_t n = OCI_INDEX_MAX_MANIFESTS; n <= OCI_INDEX_MAX_MANIFESTS + 1; n++) {
		p = idx + sprintf(idx, "{\"schemaVersion\":2,\"manifests\":[");
		for (size_t i = 0; i < n; i++)
			p += sprintf(p, "%s%s", i ? "," : "", desc);
		strcpy(p, "]}");
		if (n == OCI_INDEX_MAX_MANIFESTS) {
			parse_ok(idx, strlen(idx), NULL, &man, &n_man);
			assert_int_equal(n_man, OCI_INDEX_MAX_MANIFESTS);
		} else {
			assert_int_equal(oci_index_parse(idx, strlen(idx), NULL, &man, &n_man,
							 why, sizeof(why)), -EFBIG);
			assert_non_null(strstr(why, "263 manifests"));
		}
	}
	free(idx);
	free(man);
	/* a manifest that would take the refs past OCI_INDEX_MAX_CHUNKS (n faked, v unused) */
	l = layer_with("\"" EMPTY_DIGEST "\"", "2", "\"" HEX64 "\"");
	m = manifest_with(l);
	refs.n = OCI_INDEX_MAX_CHUNKS;
	assert_int_equal(oci_index_parse(m, strlen(m), &refs, NULL, NULL, why, sizeof(why)),
			 -EFBIG);
	assert_non_null(strstr(why, "1048576 chunks"));
	assert_int_equal(refs.n, OCI_INDEX_MAX_CHUNKS);
	refs.n = 0;
	parse_ok(m, strlen(m), &refs, NULL, NULL);
	assert_int_equal(refs.n, 1);
	oci_refs_free(&refs);
	free(m);
	free(l);
}

static void test_parse_fuzz(void **state)
{
	struct oci_refs r = { 0 };
	struct oci_doc *docs;
	uint64_t seed = 99;
	size_t n;

	(void)state;
	rand_refs(&r, 4, 6);
	oci_refs_sort(&r);
	assert_int_equal(oci_index_build(&r, &docs, &n), 0);
	for (int it = 0; it < 20000; it++) {
		const struct oci_doc *d = &docs[prng_next(&seed) % n];
		char *buf = malloc(d->len);
		struct oci_refs out = { 0 };
		uint8_t (*man)[SHA256_LEN] = NULL;
		size_t n_man = 0, flips = 1 + prng_next(&seed) % 3;
		static const char alphabet[] = "{}[]\",:0123456789-.eEaAfFsS\\u \t\n";
		char why[WHY_MAX] = "";
		int ret;

		assert_non_null(buf);
		memcpy(buf, d->json, d->len);
		for (size_t k = 0; k < flips; k++)
			buf[prng_next(&seed) % d->len] =
				alphabet[prng_next(&seed) % (sizeof(alphabet) - 1)];
		ret = oci_index_parse(buf, d->len, &out, &man, &n_man, why, sizeof(why));
		assert_true(ret == 0 || ret == -EBADMSG);
		if (ret)
			assert_true(why[0]);
		assert_true(out.n <= 4 && n_man <= 1);
		free(man);
		oci_refs_free(&out);
		free(buf);
	}
	oci_docs_free(docs, n);
	oci_refs_free(&r);
}

/* ------------------------------------------------------------------ Bearer challenges */

static void bearer_ok(const char *h, const char *realm, const char *service, const char *scope)
{
	char *re = (char *)1, *se = (char *)1, *sc = (char *)1;
	int ret = oci_parse_bearer(h, &re, &se, &sc);

	if (ret)
		fail_msg("'%s': %d", h, ret);
	assert_non_null(re);
	assert_string_equal(re, realm);
	if (service)
		assert_string_equal(se, service);
	else
		assert_null(se);
	if (scope)
		assert_string_equal(sc, scope);
	else
		assert_null(sc);
	free(re);
	free(se);
	free(sc);
}

static void bearer_bad(const char *h)
{
	char *re = (char *)1, *se = (char *)1, *sc = (char *)1;
	int ret = oci_parse_bearer(h, &re, &se, &sc);

	if (ret != -EINVAL)
		fail_msg("'%s': %d, expected -EINVAL", h, ret);
	assert_null(re);
	assert_null(se);
	assert_null(sc);
}

static void test_bearer(void **state)
{
	char *re = NULL;

	(void)state;
	/* distribution/registry:2 */
	bearer_ok("Bearer realm=\"http://127.0.0.1:5001/token\",service=\"registry.local\","
		  "scope=\"repository:foo:pull,push\"",
		  "http://127.0.0.1:5001/token", "registry.local", "repository:foo:pull,push");
	/* Docker Hub */
	bearer_ok("Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
		  "scope=\"repository:library/ubuntu:pull\"",
		  "https://auth.docker.io/token", "registry.docker.io",
		  "repository:library/ubuntu:pull");
	/* ghcr.io */
	bearer_ok("Bearer realm=\"https://ghcr.io/token\",service=\"ghcr.io\","
		  "scope=\"repository:user/image:pull\"",
		  "https://ghcr.io/token", "ghcr.io", "repository:user/image:pull");
	/* Harbor-like, with spaces after the commas, and an error parameter */
	bearer_ok("Bearer realm=\"https://harbor.example/service/token\", "
		  "service=\"harbor-registry\", scope=\"repository:p/r:pull\", "
		  "error=\"insufficient_scope\"",
		  "https://harbor.example/service/token", "harbor-registry", "repository:p/r:pull");
	/* realm only; lower/upper case scheme and names; white space around '=' */
	bearer_ok("Bearer realm=\"https://a/t\"", "https://a/t", NULL, NULL);
	bearer_ok("bearer realm=\"https://a/t\"", "https://a/t", NULL, NULL);
	bearer_ok("BEARER REALM=\"https://a/t\",Service=\"s\"", "https://a/t", "s", NULL);
	bearer_ok("  Bearer   realm = \"https://a/t\" ,  scope = \"x\"  ", "https://a/t", NULL,
		  "x");
	bearer_ok("Bearer\trealm=\"https://a/t\"\r\n", "https://a/t", NULL, NULL);
	/* parameters in any order, unknown ones ignored, empty list elements */
	bearer_ok("Bearer scope=\"repository:a:pull\",,foo=bar, realm=\"https://a/t\",x=\"y,z\"",
		  "https://a/t", NULL, "repository:a:pull");
	/* token (unquoted) values */
	bearer_ok("Bearer realm=https://a/t,service=reg", "https://a/t", "reg", NULL);
	/* escapes and commas inside quotes */
	bearer_ok("Bearer realm=\"https://a/t?q=\\\"x\\\"\",scope=\"repository:a:pull,push "
		  "repository:b:pull\\\\\"",
		  "https://a/t?q=\"x\"", NULL, "repository:a:pull,push repository:b:pull\\");
	bearer_ok("Bearer realm=\"\\h\\t\\t\\p\"", "http", NULL, NULL);
	/* a Basic challenge before or after the Bearer one */
	bearer_ok("Basic realm=\"basic\", Bearer realm=\"https://a/t\",service=\"s\"",
		  "https://a/t", "s", NULL);
	bearer_ok("Bearer realm=\"https://a/t\",service=\"s\", Basic realm=\"basic\"",
		  "https://a/t", "s", NULL);

	/* not Bearer, no realm, malformed */
	bearer_bad("");
	bearer_bad("   ");
	bearer_bad("Basic realm=\"Registry Realm\"");
	bearer_bad("Digest realm=\"x\", nonce=\"y\"");
	bearer_bad("Bearer");
	bearer_bad("Bearer ");
	bearer_bad("Bearer service=\"s\",scope=\"x\"");
	bearer_bad("Bearer realm=\"\"");
	bearer_bad("Bearer realm=");
	bearer_bad("Bearer abc68==");
	bearer_bad("Bearerrealm=\"x\"");
	bearer_bad("Bear realm=\"x\"");
	bearer_bad("Bearers realm=\"x\"");
	bearer_bad("Bearer realm=\"https://a/t");
	bearer_bad("Bearer realm=\"https://a/t\\");
	bearer_bad("Bearer realm=\"a\nb\"");
	bearer_bad("Bearer realm=\"a\x01" "b\"");
	bearer_bad("Bearer realm=\"a\",realm=\"b\"");
	bearer_bad("Bearer realm=\"a\",service=\"b\",Service=\"c\"");
	bearer_bad("Bearer =\"a\"");
	bearer_bad("Bearer realm=\"a\" \"b\"");
	bearer_bad("\"Bearer\" realm=\"a\"");

	/* service and scope are optional outputs */
	assert_int_equal(oci_parse_bearer("Bearer realm=\"r\",service=\"s\",scope=\"c\"", &re,
					  NULL, NULL), 0);
	assert_string_equal(re, "r");
	free(re);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refs_add_free),
		cmocka_unit_test(test_refs_sort_small),
		cmocka_unit_test(test_refs_sort_large),
		cmocka_unit_test(test_refs_sort_presorted),
		cmocka_unit_test(test_refs_find),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_build_exact),
		cmocka_unit_test(test_build_empty),
		cmocka_unit_test(test_build_valid_json),
		cmocka_unit_test(test_build_deterministic),
		cmocka_unit_test(test_parse_appends),
		cmocka_unit_test(test_parse_ignores_foreign),
		cmocka_unit_test(test_parse_no_media_type),
		cmocka_unit_test(test_parse_unexpected_kind),
		cmocka_unit_test(test_parse_hostile),
		cmocka_unit_test(test_parse_bad_layers),
		cmocka_unit_test(test_parse_truncated),
		cmocka_unit_test(test_parse_nul),
		cmocka_unit_test(test_parse_deep),
		cmocka_unit_test(test_parse_caps),
		cmocka_unit_test(test_parse_fuzz),
		cmocka_unit_test(test_bearer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
