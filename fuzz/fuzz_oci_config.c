/* SPDX-License-Identifier: MIT */
/*
 * An OCI image config (cas/oci_config.c: oci_config_parse, what `lazyblk run` reads from a
 * manifest to know the image's command, environment, user and working directory; the
 * config blob of an OCI layout or docker-archive on import), straight from the input.
 */
#include "fuzz.h"
#include "../cas/oci_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_config c;
	char why[WHY_MAX] = "";

	fuzz_dir();
	if (!fuzz_result("oci_config_parse",
			 oci_config_parse((const char *)data, size, &c, why, sizeof(why)), why))
		oci_config_free(&c);
	return 0;
}
