/* SPDX-License-Identifier: MIT */
/*
 * What an OCI registry answers that lazyblk parses itself (cas/remote/oci_index.c): the
 * chunk index documents (oci_index_parse: an image index or an image manifest) and the
 * WWW-Authenticate challenge of a 401 (oci_parse_bearer). The first byte picks the parser
 * (even: a document, odd: a challenge), the rest is its input.
 */
#include "fuzz.h"
#include "../cas/remote/oci_index.h"

static void document(const char *json, size_t len)
{
	struct oci_refs refs = { 0 };
	uint8_t (*manifests)[SHA256_LEN] = NULL;
	size_t n = 0;
	const char *why = NULL;

	if (!fuzz_result("oci_index_parse",
			 oci_index_parse(json, len, &refs, &manifests, &n, &why), why)) {
		oci_refs_sort(&refs);
		for (size_t i = 0; i < refs.n; i++)
			if (!oci_refs_find(&refs, refs.v[i].chunk))
				abort(); /* every ref is found again */
	}
	oci_refs_free(&refs);
	free(manifests);
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
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (!size)
		return 0;
	fuzz_dir();
	s = malloc(size);
	if (!s)
		abort();
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	if (data[0] & 1)
		challenge(s);
	else
		document(s, size - 1);
	free(s);
	return 0;
}
