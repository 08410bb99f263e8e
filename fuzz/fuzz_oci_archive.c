/* SPDX-License-Identifier: MIT */
/*
 * Import of an OCI image archive (cas/import/import_oci_archive.c, `lazyblk import
 * oci-archive:FILE`, what `skopeo copy … oci-archive:` writes): the input is the tar of a
 * layout, its header checksums recomputed (fuzz_import.h). Member names and types, then
 * oci-layout, index.json, the manifest, the config and the layer (the oci: path).
 */
#include "fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	char path[PATH_MAX], src[PATH_MAX + 16];

	fuzz_fix_tar(buf, size, 0);
	fuzz_write_file(fuzz_path(path, sizeof(path), "in.oci.tar"), buf, size);
	free(buf);
	snprintf(src, sizeof(src), "oci-archive:%s", path);
	fuzz_import(src);
	return 0;
}
