/* SPDX-License-Identifier: MIT */
/*
 * Import of a tar file (cas/import/import_tar.c through libarchive, `lazyblk import
 * FILE.tar`): the input is the archive, its header checksums recomputed (fuzz_import.h):
 * names, links, sizes, sparse maps, pax and GNU extensions, xattrs and ACLs, hard links,
 * whiteouts, all turned into a tree, chunks and a manifest in a fresh store.
 */
#include "fuzz_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	char path[PATH_MAX];

	fuzz_fix_tar(buf, size, 2);
	fuzz_write_file(fuzz_path(path, sizeof(path), "in.tar"), buf, size);
	free(buf);
	fuzz_import(path);
	return 0;
}
