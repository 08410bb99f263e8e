/* SPDX-License-Identifier: MIT */
/*
 * The VM snapshot document (vmsnap/doc.c; docs/formats.md, "VM snapshot document"), as a
 * restore by tag gets it from a registry or an HTTP store: snapdoc_parse. What it accepts
 * must survive a round trip: built again by lazyblk's own writer (snapdoc_build) and parsed
 * back, it is the same snapshot, and building that gives the same bytes.
 *
 * Input: the document's bytes.
 */
#include "fuzz.h"
#include "../vmsnap/doc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snapdoc d, d2;
	char why[WHY_MAX] = "";
	char *json, *json2;
	size_t len, len2;
	int ret;

	fuzz_dir();
	ret = snapdoc_parse((const char *)data, size, &d, why, sizeof(why));
	if (fuzz_result("snapdoc_parse", ret, why)) {
		if (!why[0] && ret != -ENOMEM)
			abort(); /* a refusal says why */
		return 0;
	}
	if (snapdoc_build(&d, &json, &len))
		abort(); /* accepted, but lazyblk would not write it */
	if (snapdoc_parse(json, len, &d2, why, sizeof(why)) || memcmp(&d, &d2, sizeof(d)))
		abort(); /* lazyblk's own document refused, or another snapshot */
	if (snapdoc_build(&d2, &json2, &len2))
		abort();
	if (len2 != len || memcmp(json, json2, len))
		abort(); /* not canonical */
	free(json2);
	free(json);
	return 0;
}
