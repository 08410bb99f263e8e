/* SPDX-License-Identifier: MIT */
/*
 * What an OCI registry answers that lazyblk parses itself: the chunk index documents
 * (cas/remote/oci_index.c, oci_index_parse: an image index or an image manifest; and what
 * a tag holds, image_tag_kind, which a push of chunks and gc judge before writing it), the
 * WWW-Authenticate challenge of a 401 (oci_parse_bearer; the same bytes as a Date header or a
 * listing's mtime, http_date_parse), the token endpoint's answer
 * (oci_json_parse with the token's limits, then its "token" member), and the URLs it sends
 * back (an upload Location or a token realm, resolved against the registry's URL and judged
 * by origin: cas/remote/http_url.c), and the Link header of a tag list's page
 * (http_link_next). The first byte's two low bits pick the parser (0: a document, 1: a
 * challenge, 2: a token answer, 3: "BASE\nREF" URLs, the whole also as a Link header), the
 * rest is its input.
 */
#include <json-c/json.h>

#include "fuzz.h"
#include "../cas/oci_json.h"
#include "../cas/remote/http.h"
#include "../cas/remote/image_doc.h"
#include "../cas/remote/oci_index.h"

static void document(const char *json, size_t len)
{
	struct oci_refs refs = { 0 };
	uint8_t (*manifests)[SHA256_LEN] = NULL;
	size_t n = 0;
	char why[WHY_MAX] = "";

	if (!fuzz_result("oci_index_parse",
			 oci_index_parse(json, len, &refs, &manifests, &n, why,
					 sizeof(why)), why)) {
		oci_refs_sort(&refs);
		for (size_t i = 0; i < refs.n; i++)
			if (!oci_refs_find(&refs, refs.v[i].chunk))
				abort(); /* every ref is found again */
	}
	oci_refs_free(&refs);
	free(manifests);
	if (image_tag_kind(json, len) > IMAGE_TAG_OTHER)
		abort();
}

static void challenge(const char *s)
{
	char *realm = NULL, *service = NULL, *scope = NULL;

	if (!fuzz_result("oci_parse_bearer", oci_parse_bearer(s, &realm, &service, &scope), NULL) &&
	    !realm)
		abort(); /* realm is required */
	free(realm);
	free(service);
	free(scope);
	if (http_date_parse(s) < -1)
		abort();
}

static void token(const char *json, size_t len)
{
	char why[WHY_MAX] = "";
	struct json_object *root;

	if (oci_json_parse(json, len, OCI_JSON_TOKEN, &root, why, sizeof(why))) {
		if (!why[0])
			abort(); /* a refusal says why */
		return;
	}
	(void)oci_json_get(root, "token", json_type_string);
	(void)oci_json_get(root, "access_token", json_type_string);
	json_object_put(root);
}

static void location(char *s)
{
	char *ref, *out = NULL, *next = NULL;
	char why[WHY_MAX] = "";
	int ret;

	/* the whole input as a Link header of a tag list's page (http_link_next) */
	ret = http_link_next(s, &next);
	if ((ret == 0) != (next != NULL))
		abort(); /* a link found is a URL reference, and only then */
	free(next);
	ref = strchr(s, '\n');
	if (!ref)
		return;
	*ref++ = '\0';
	ret = http_url_resolve(s, ref, "digest=sha256:00", &out, why, sizeof(why));
	if (!ret) {
		if (!out)
			abort(); /* resolved: a URL */
		(void)http_same_origin(s, out);
		if (!http_same_origin(out, out) && !strncmp(out, "http", 4))
			abort(); /* an http(s) URL that parses is its own origin */
	} else if (ret == -EINVAL && !why[0]) {
		abort(); /* a refusal says why */
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (!size)
		return 0;
	fuzz_dir();
	s = fuzz_cstr_after_first(data, size);
	switch (data[0] & 3) {
	case 0: document(s, size - 1); break;
	case 1: challenge(s); break;
	case 2: token(s, size - 1); break;
	default: location(s); break;
	}
	free(s);
	return 0;
}
