/* SPDX-License-Identifier: MIT */
/*
 * Chunk -> blob references published in an OCI registry: the sorted reference list, the
 * image manifests and image index that carry it (built as fixed-order JSON without white
 * space, so the same refs always give the same bytes and digests), their strict parser,
 * and the Bearer challenge of a registry's 401 answer.
 */
#include "oci_index.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "../oci_json.h"
#include "../../common/grow.h"
#include "../../common/json_out.h"
#include "../../common/why.h"

/* ------------------------------------------------------------------ refs */

void oci_refs_free(struct oci_refs *r)
{
	free(r->v);
	r->v = NULL;
	r->n = r->cap = 0;
}

int oci_refs_add(struct oci_refs *r, const struct oci_chunk_ref *ref)
{
	if (!grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v)))
		return -ENOMEM;
	r->v[r->n++] = *ref;
	return 0;
}

static int ref_cmp(const struct oci_chunk_ref *a, const struct oci_chunk_ref *b)
{
	return memcmp(a->chunk, b->chunk, SHA256_LEN);
}

static void ref_swap(struct oci_chunk_ref *a, struct oci_chunk_ref *b)
{
	struct oci_chunk_ref t = *a;

	*a = *b;
	*b = t;
}

/* Stable bottom-up merge sort through tmp[n]. */
static void refs_merge_sort(struct oci_chunk_ref *v, struct oci_chunk_ref *tmp, size_t n)
{
	struct oci_chunk_ref *src = v, *dst = tmp, *t;

	for (size_t w = 1; w < n; w *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * w) {
			size_t mid = lo + w < n ? lo + w : n;
			size_t hi = mid + w < n ? mid + w : n;
			size_t i = lo, j = mid, k = lo;

			while (i < mid && j < hi)
				dst[k++] = ref_cmp(&src[j], &src[i]) < 0 ? src[j++] : src[i++];
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
}

/*
 * Stable sort without extra memory (for small arrays, and when no buffer can be had):
 * insertion sort of short blocks, then merges by rotation (SymMerge, Kim & Kutzner 2004),
 * O(n log n) comparisons and O(n log^2 n) swaps.
 */
static void refs_insertion_sort(struct oci_chunk_ref *v, size_t a, size_t b)
{
	for (size_t i = a + 1; i < b; i++)
		for (size_t j = i; j > a && ref_cmp(&v[j], &v[j - 1]) < 0; j--)
			ref_swap(&v[j], &v[j - 1]);
}

static void refs_swap_range(struct oci_chunk_ref *v, size_t a, size_t b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ref_swap(&v[a + i], &v[b + i]);
}

/* [a, m) [m, b) -> [m, b) [a, m) */
static void refs_rotate(struct oci_chunk_ref *v, size_t a, size_t m, size_t b)
{
	size_t i = m - a, j = b - m;

	while (i != j) {
		if (i > j) {
			refs_swap_range(v, m - i, m, j);
			i -= j;
		} else {
			refs_swap_range(v, m - i, m + j - i, i);
			j -= i;
		}
	}
	refs_swap_range(v, m - i, m, i);
}

/* Merge the sorted runs [a, m) and [m, b), both non-empty. */
static void refs_sym_merge(struct oci_chunk_ref *v, size_t a, size_t m, size_t b)
{
	size_t mid, n, start, r, end;

	if (m - a == 1) {
		/* the first run's element goes after every element of the second not below it */
		size_t i = m, j = b;

		while (i < j) {
			size_t h = i + (j - i) / 2;

			if (ref_cmp(&v[h], &v[a]) < 0)
				i = h + 1;
			else
				j = h;
		}
		for (size_t k = a; k + 1 < i; k++)
			ref_swap(&v[k], &v[k + 1]);
		return;
	}
	if (b - m == 1) {
		size_t i = a, j = m;

		while (i < j) {
			size_t h = i + (j - i) / 2;

			if (ref_cmp(&v[m], &v[h]) >= 0)
				i = h + 1;
			else
				j = h;
		}
		for (size_t k = m; k > i; k--)
			ref_swap(&v[k], &v[k - 1]);
		return;
	}
	mid = a + (b - a) / 2;
	n = mid + m;
	if (m > mid) {
		start = n - b;
		r = mid;
	} else {
		start = a;
		r = m;
	}
	while (start < r) {
		size_t c = start + (r - start) / 2;

		if (ref_cmp(&v[n - 1 - c], &v[c]) >= 0)
			start = c + 1;
		else
			r = c;
	}
	end = n - start;
	if (start < m && m < end)
		refs_rotate(v, start, m, end);
	if (a < start && start < mid)
		refs_sym_merge(v, a, start, mid);
	if (mid < end && end < b)
		refs_sym_merge(v, mid, end, b);
}

static void refs_inplace_sort(struct oci_chunk_ref *v, size_t n)
{
	const size_t block = 20;
	size_t a = 0;

	for (; n - a > block; a += block)
		refs_insertion_sort(v, a, a + block);
	refs_insertion_sort(v, a, n);
	for (size_t w = block; w < n; w *= 2) {
		for (a = 0; n - a > w; a += 2 * w) {
			size_t b = n - a - w > w ? a + 2 * w : n;

			refs_sym_merge(v, a, a + w, b);
			if (b == n)
				break;
		}
	}
}

#define REFS_SORT_SMALL 64

void oci_refs_sort(struct oci_refs *r)
{
	struct oci_chunk_ref *tmp = NULL;
	size_t i, k;

	for (i = 1; i < r->n && ref_cmp(&r->v[i - 1], &r->v[i]) < 0; i++)
		;
	if (i >= r->n)
		return; /* already sorted without duplicates */

	if (r->n > REFS_SORT_SMALL)
		tmp = malloc(r->n * sizeof(*tmp));
	if (tmp)
		refs_merge_sort(r->v, tmp, r->n);
	else
		refs_inplace_sort(r->v, r->n);
	free(tmp);

	/* equal names are now in the order they were added: keep the first of each run */
	for (i = 1, k = 1; i < r->n; i++) {
		if (ref_cmp(&r->v[k - 1], &r->v[i]) == 0)
			continue;
		if (k != i)
			r->v[k] = r->v[i];
		k++;
	}
	r->n = k;
}

const struct oci_chunk_ref *oci_refs_find(const struct oci_refs *r, const uint8_t chunk[SHA256_LEN])
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(r->v[mid].chunk, chunk, SHA256_LEN);

		if (c == 0)
			return &r->v[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ------------------------------------------------------------------ building */

static void put_hex(struct json_buf *b, const uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	json_buf_put(b, hex, SHA256_HEX_LEN);
}

/* Hand the bytes over to doc, with their digest. */
int oci_doc_finish(struct json_buf *b, struct oci_doc *doc, const char *media_type)
{
	int ret;

	if (b->err)
		return b->err;
	ret = sha256_buf(b->p, b->len, doc->digest);
	if (ret)
		return ret;
	doc->media_type = media_type;
	doc->json = json_buf_take(b, &doc->len);
	return 0;
}

static int build_manifest(const struct oci_chunk_ref *v, size_t n,
			  const uint8_t empty[SHA256_LEN], struct oci_doc *doc)
{
	struct json_buf b = { 0 };
	int ret;

	/* about 250 bytes a layer: one allocation for a full manifest */
	json_buf_reserve(&b, 512 + n * 256);
	json_buf_puts(&b, "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\","
		    "\"artifactType\":\"" OCI_ARTIFACT_CHUNKS "\","
		    "\"config\":{\"mediaType\":\"" OCI_MT_EMPTY "\",\"digest\":\"sha256:");
	put_hex(&b, empty);
	json_buf_puts(&b, "\",\"size\":");
	json_buf_u64(&b, sizeof(OCI_EMPTY_JSON) - 1);
	json_buf_puts(&b, "},\"layers\":[");
	for (size_t i = 0; i < n; i++) {
		json_buf_puts(&b, i ? ",{" : "{");
		json_buf_puts(&b, "\"mediaType\":\"" OCI_MT_CHUNK "\",\"digest\":\"sha256:");
		put_hex(&b, v[i].blob);
		json_buf_puts(&b, "\",\"size\":");
		json_buf_u64(&b, v[i].size);
		json_buf_puts(&b, ",\"annotations\":{\"" OCI_ANNOT_CHUNK "\":\"");
		put_hex(&b, v[i].chunk);
		json_buf_puts(&b, "\"}}");
	}
	json_buf_puts(&b, "]}");
	ret = oci_doc_finish(&b, doc, OCI_MT_MANIFEST);
	json_buf_free(&b);
	return ret;
}

int oci_index_doc(const struct oci_doc *manifests, size_t n, const char *artifact,
		  struct oci_doc *doc)
{
	struct json_buf b = { 0 };
	int ret;

	json_buf_puts(&b, "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",");
	json_buf_printf(&b, "\"artifactType\":\"%s\",\"manifests\":[", artifact);
	for (size_t i = 0; i < n; i++) {
		json_buf_puts(&b, i ? ",{" : "{");
		json_buf_puts(&b, "\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"sha256:");
		put_hex(&b, manifests[i].digest);
		json_buf_puts(&b, "\",\"size\":");
		json_buf_u64(&b, manifests[i].len);
		json_buf_printf(&b, ",\"artifactType\":\"%s\"}", i ? OCI_ARTIFACT_CHUNKS : artifact);
	}
	json_buf_puts(&b, "]}");
	ret = oci_doc_finish(&b, doc, OCI_MT_INDEX);
	json_buf_free(&b);
	return ret;
}

int oci_index_build(const struct oci_refs *r, struct oci_doc **docs, size_t *n)
{
	size_t n_man = r->n ? (r->n - 1) / OCI_INDEX_MAX_LAYERS + 1 : 1;
	uint8_t empty[SHA256_LEN];
	struct oci_doc *d;
	int ret;

	*docs = NULL;
	*n = 0;
	ret = sha256_buf(OCI_EMPTY_JSON, sizeof(OCI_EMPTY_JSON) - 1, empty);
	if (ret)
		return ret;
	d = calloc(n_man + 1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n_man; i++) {
		size_t first = i * OCI_INDEX_MAX_LAYERS;
		size_t cnt = r->n - first;

		if (cnt > OCI_INDEX_MAX_LAYERS)
			cnt = OCI_INDEX_MAX_LAYERS;
		ret = build_manifest(r->v ? r->v + first : NULL, cnt, empty, &d[i]);
		if (ret)
			goto fail;
	}
	ret = oci_index_doc(d, n_man, OCI_ARTIFACT_CHUNKS, &d[n_man]);
	if (ret)
		goto fail;
	*docs = d;
	*n = n_man + 1;
	return 0;
fail:
	oci_docs_free(d, n_man + 1);
	return ret;
}

void oci_docs_free(struct oci_doc *docs, size_t n)
{
	if (!docs)
		return;
	for (size_t i = 0; i < n; i++)
		free(docs[i].json);
	free(docs);
}

/* ------------------------------------------------------------------ parsing */

_Static_assert(OCI_INDEX_MAX_CHUNKS == 1048576 && OCI_INDEX_MAX_MANIFESTS == 263,
	       "the numbers in the messages below");

/* Member key of o if it is a string without NUL bytes (a \u0000 escape), else NULL. */
static const char *json_cstr(struct json_object *o, const char *key)
{
	struct json_object *v = oci_json_get(o, key, json_type_string);
	const char *s = json_object_get_string(v);

	if (!s || strlen(s) != (size_t)json_object_get_string_len(v))
		return NULL;
	return s;
}

static bool json_has(struct json_object *o, const char *key)
{
	return json_object_object_get_ex(o, key, NULL);
}

/* Exactly 64 lowercase hex digits. */
static int hex64_parse(const char *s, uint8_t d[SHA256_LEN])
{
	for (size_t i = 0; i < SHA256_HEX_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return -EINVAL; /* also stops at the NUL of a short string */
	if (s[SHA256_HEX_LEN])
		return -EINVAL;
	return sha256_from_hex(s, d);
}

/* A content descriptor: mediaType, digest sha256:<64 lowercase hex>, size. */
static int desc_parse(struct json_object *o, const char **media_type, uint8_t digest[SHA256_LEN],
		      uint64_t *size, char *why, size_t why_len)
{
	struct json_object *sz;
	int64_t v;

	if (!json_object_is_type(o, json_type_object))
		return why_set(why, why_len, -EBADMSG, "descriptor is not an object");
	*media_type = json_cstr(o, "mediaType");
	if (!*media_type)
		return why_set(why, why_len, -EBADMSG, "descriptor without a mediaType string");
	if (oci_digest_parse(json_cstr(o, "digest"), digest))
		return why_set(why, why_len, -EBADMSG,
			       "descriptor digest is not sha256:<64 lowercase hex>");
	sz = oci_json_get(o, "size", json_type_int);
	if (!sz)
		return why_set(why, why_len, -EBADMSG, "descriptor without an integer size");
	v = json_object_get_int64(sz);
	if (v < 0)
		return why_set(why, why_len, -EBADMSG, "descriptor size is negative");
	if (v == INT64_MAX) { /* json-c saturates larger numbers here */
		return why_set(why, why_len, -EBADMSG, "descriptor size is too large");
	}
	*size = (uint64_t)v;
	return 0;
}

static int parse_index(struct json_object *root, uint8_t (**manifests)[SHA256_LEN],
		       size_t *n_manifests, char *why, size_t why_len)
{
	struct json_object *list = oci_json_get(root, "manifests", json_type_array);
	uint8_t (*out)[SHA256_LEN];
	size_t n, k = 0;

	if (!list)
		return why_set(why, why_len, -EBADMSG, "image index without a manifests array");
	if (!manifests || !n_manifests)
		return why_set(why, why_len, -EBADMSG,
			       "an image index where an image manifest was expected");
	n = json_object_array_length(list);
	if (n > OCI_INDEX_MAX_MANIFESTS - *n_manifests)
		return why_set(why, why_len, -EFBIG,
			       "the chunk index lists more than 263 manifests, the limit");
	out = *manifests;
	if (n) {
		out = realloc(out, (*n_manifests + n) * SHA256_LEN);
		if (!out)
			return -ENOMEM;
		*manifests = out; /* grown, the count is raised only on success */
	}
	for (size_t i = 0; i < n; i++) {
		const char *mt;
		uint64_t size;
		int ret;

		ret = desc_parse(json_object_array_get_idx(list, i), &mt, out[*n_manifests + k],
				 &size, why, why_len);
		if (ret)
			return ret;
		if (!strcmp(mt, OCI_MT_MANIFEST))
			k++; /* anything else (a nested index, an attestation) is not ours */
	}
	*n_manifests += k;
	return 0;
}

static int parse_layer(struct json_object *layer, struct oci_refs *refs, char *why, size_t why_len)
{
	struct json_object *ann;
	struct oci_chunk_ref ref;
	const char *mt, *name;
	int ret;

	ret = desc_parse(layer, &mt, ref.blob, &ref.size, why, why_len);
	if (ret)
		return ret;
	if (!json_object_object_get_ex(layer, "annotations", &ann))
		return 0;
	if (!json_object_is_type(ann, json_type_object))
		return why_set(why, why_len, -EBADMSG, "layer annotations is not an object");
	if (!json_has(ann, OCI_ANNOT_CHUNK))
		return 0;
	name = json_cstr(ann, OCI_ANNOT_CHUNK);
	if (!name || hex64_parse(name, ref.chunk))
		return why_set(why, why_len, -EBADMSG, "chunk annotation is not 64 lowercase hex");
	if (strcmp(mt, OCI_MT_CHUNK))
		return why_set(why, why_len, -EBADMSG,
			       "chunk annotation on a layer of another media type");
	return oci_refs_add(refs, &ref);
}

static int parse_manifest(struct json_object *root, struct oci_refs *refs, char *why,
			  size_t why_len)
{
	struct json_object *layers = oci_json_get(root, "layers", json_type_array);
	size_t n, old;
	int ret = 0;

	if (!layers)
		return why_set(why, why_len, -EBADMSG, "image manifest without a layers array");
	if (!refs)
		return why_set(why, why_len, -EBADMSG,
			       "an image manifest where an image index was expected");
	n = json_object_array_length(layers);
	if (refs->n > OCI_INDEX_MAX_CHUNKS || n > OCI_INDEX_MAX_CHUNKS - refs->n)
		return why_set(why, why_len, -EFBIG,
			       "the chunk index lists more than 1048576 chunks, the limit");
	old = refs->n;
	for (size_t i = 0; i < n && !ret; i++)
		ret = parse_layer(json_object_array_get_idx(layers, i), refs, why, why_len);
	if (ret)
		refs->n = old;
	return ret;
}

int oci_index_parse(const char *json, size_t len, struct oci_refs *refs,
		    uint8_t (**manifests)[SHA256_LEN], size_t *n_manifests, char *why, size_t why_len)
{
	struct json_object *root, *sv;
	const char *mt;
	enum oci_json_kind kind;
	bool index;
	int ret;

	if (!json || !len)
		return why_set(why, why_len, -EBADMSG, "empty document");
	if (memchr(json, '\0', len))
		return why_set(why, why_len, -EBADMSG, "NUL byte in the document");
	kind = manifests ? OCI_JSON_INDEX : OCI_JSON_MANIFEST;
	ret = oci_json_parse(json, len, kind, &root, why, why_len);
	if (ret)
		return ret == -ENOMEM ? why_set(why, why_len, ret, "out of memory") : ret;
	ret = -EBADMSG;
	if (!json_object_is_type(root, json_type_object)) {
		why_set(why, why_len, 0, "not a JSON object");
		goto out;
	}
	sv = oci_json_get(root, "schemaVersion", json_type_int);
	if (!sv || json_object_get_int64(sv) != 2) {
		why_set(why, why_len, 0, "schemaVersion is not 2");
		goto out;
	}
	if (json_has(root, "mediaType")) {
		mt = json_cstr(root, "mediaType");
		if (mt && !strcmp(mt, OCI_MT_INDEX)) {
			index = true;
		} else if (mt && !strcmp(mt, OCI_MT_MANIFEST)) {
			index = false;
		} else {
			why_set(why, why_len, 0, "mediaType is neither an image index nor an image "
				"manifest");
			goto out;
		}
	} else {
		bool has_m = json_has(root, "manifests"), has_l = json_has(root, "layers");

		if (has_m == has_l) {
			why_set(why, why_len, 0, "no mediaType, and not one of manifests or "
				"layers");
			goto out;
		}
		index = has_m;
	}
	if (index)
		ret = parse_index(root, manifests, n_manifests, why, why_len);
	else
		ret = parse_manifest(root, refs, why, why_len);
out:
	json_object_put(root);
	if (ret == -ENOMEM)
		why_set(why, why_len, ret, "out of memory");
	return ret;
}

/* ------------------------------------------------------------------ WWW-Authenticate */

/* RFC 9110 tchar */
static bool is_tchar(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static const char *skip_ws(const char *p)
{
	while (is_ws(*p))
		p++;
	return p;
}

/* A parameter value at *pp: quoted-string (with \ escapes) or a run of visible bytes. */
static int auth_value(const char **pp, char **out)
{
	const char *p = *pp;
	char *v = malloc(strlen(p) + 1);
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	if (*p == '"') {
		for (p++; *p != '"'; p++) {
			if (*p == '\\')
				p++;
			if (!*p || ((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f) {
				free(v); /* unterminated, or a control byte */
				return -EINVAL;
			}
			v[n++] = *p;
		}
		p++;
	} else {
		for (; (unsigned char)*p > 0x20 && *p != 0x7f && *p != ',' && *p != '"'; p++)
			v[n++] = *p;
	}
	v[n] = '\0';
	*out = v;
	*pp = p;
	return 0;
}

/*
 * The auth-params after a scheme, up to the end or to the next challenge's scheme. With
 * vals (realm, service, scope), those are kept; a repeated one is -EINVAL.
 */
static int auth_params(const char **pp, char *vals[3])
{
	static const char *const names[3] = { "realm", "service", "scope" };
	const char *p = *pp;

	for (;;) {
		const char *name, *q;
		size_t len;
		char *v;
		int ret;

		p = skip_ws(p);
		if (!*p)
			break;
		if (*p == ',') {
			p++;
			continue;
		}
		for (name = p; is_tchar(*p); p++)
			;
		len = (size_t)(p - name);
		if (!len)
			return -EINVAL;
		q = skip_ws(p);
		if (*q != '=') {
			if (!*q || *q == ',') { /* a bare token (token68, or a stray word) */
				p = q;
				continue;
			}
			p = name; /* "Scheme param=..": the next challenge */
			break;
		}
		p = skip_ws(q + 1);
		ret = auth_value(&p, &v);
		if (ret)
			return ret;
		for (int i = 0; vals && i < 3; i++) {
			if (len != strlen(names[i]) || strncasecmp(name, names[i], len))
				continue;
			if (vals[i]) {
				free(v);
				return -EINVAL;
			}
			vals[i] = v;
			v = NULL;
		}
		free(v);
	}
	*pp = p;
	return 0;
}

int oci_parse_bearer(const char *header, char **realm, char **service, char **scope)
{
	char *vals[3] = { NULL, NULL, NULL };
	const char *p = header;
	int ret = -EINVAL;

	*realm = NULL;
	if (service)
		*service = NULL;
	if (scope)
		*scope = NULL;
	for (;;) {
		const char *scheme;
		bool bearer;

		while (is_ws(*p) || *p == ',')
			p++;
		if (!*p)
			break;
		for (scheme = p; is_tchar(*p); p++)
			;
		if (p == scheme || (*p && !is_ws(*p) && *p != ','))
			break; /* not a challenge */
		bearer = p - scheme == 6 && !strncasecmp(scheme, "Bearer", 6);
		ret = auth_params(&p, bearer ? vals : NULL);
		if (ret || bearer)
			break;
		ret = -EINVAL;
	}
	if (!ret && (!vals[0] || !*vals[0]))
		ret = -EINVAL;
	if (ret) {
		for (int i = 0; i < 3; i++)
			free(vals[i]);
		return ret;
	}
	*realm = vals[0];
	if (service)
		*service = vals[1];
	else
		free(vals[1]);
	if (scope)
		*scope = vals[2];
	else
		free(vals[2]);
	return 0;
}
