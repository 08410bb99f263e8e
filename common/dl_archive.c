// SPDX-License-Identifier: MIT
/* The sym_* pointers of dl_archive.h and their loader. */
#include "dl_archive.h"

#include "dl.h"

#define DL_ARCHIVE_DEFINE(s) __typeof__(s) *sym_##s;
DL_ARCHIVE_SYMS(DL_ARCHIVE_DEFINE)

#define DL_ARCHIVE_ENTRY(s) { #s, (void **)&sym_##s },
static const struct dl_sym dl_archive_syms[] = { DL_ARCHIVE_SYMS(DL_ARCHIVE_ENTRY) };

static struct dl_lib dl_archive = {
	.soname = "libarchive.so.13",
	.package = "libarchive13",
	.syms = dl_archive_syms,
	.n_syms = sizeof(dl_archive_syms) / sizeof(dl_archive_syms[0]),
};

int dl_archive_load(void)
{
	return dl_load(&dl_archive);
}
