// SPDX-License-Identifier: MIT
/* The sym_* pointers of dl_curl.h and their loader. */
#include "dl_curl.h"

#include "dl.h"

#define DL_CURL_DEFINE(s) __typeof__(s) *sym_##s;
DL_CURL_SYMS(DL_CURL_DEFINE)

#define DL_CURL_ENTRY(s) { #s, (void **)&sym_##s },
static const struct dl_sym dl_curl_syms[] = { DL_CURL_SYMS(DL_CURL_ENTRY) };

static struct dl_lib dl_curl = {
	.soname = "libcurl.so.4",
	.package = "libcurl4",
	.syms = dl_curl_syms,
	.n_syms = sizeof(dl_curl_syms) / sizeof(dl_curl_syms[0]),
};

int dl_curl_load(void)
{
	return dl_load(&dl_curl);
}
