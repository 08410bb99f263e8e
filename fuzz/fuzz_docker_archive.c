/* SPDX-License-Identifier: MIT */
/*
 * Import of a docker-archive (cas/import/oci_docker.c, `lazyblk import
 * docker-archive:FILE`, what `docker save` writes): the input is the outer tar, its header
 * checksums and those of the layer tars inside it recomputed (fuzz_import.h). manifest.json,
 * the config, the layers (plain or compressed) and the links between members are parsed.
 */
#include "fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	char path[PATH_MAX], src[PATH_MAX + 16];

	fuzz_fix_tar(buf, size, 0);
	fuzz_write_file(fuzz_path(path, sizeof(path), "in.docker.tar"), buf, size);
	free(buf);
	snprintf(src, sizeof(src), "docker-archive:%s", path);
	fuzz_import(src);
	return 0;
}
