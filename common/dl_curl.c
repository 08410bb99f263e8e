// SPDX-License-Identifier: MIT
/* The sym_* pointers of dl_curl.h, their loader, and the check of the version loaded. */
#include "dl_curl.h"

#include <errno.h>

#include "dl.h"
#include "why.h"

int dl_curl_version_check(unsigned version_num, char *why, size_t why_len)
{
	if (version_num >= DL_CURL_MIN_VERSION)
		return 0;
	return why_set(why, why_len, -ELIBACC, "libcurl %u.%u.%u is too old: lazyblk needs "
		       DL_CURL_MIN_VERSION_STR " or later (older ones ignore the limit of "
		       "transfers and redirects to http and https; before 7.83.0 credentials "
		       "followed a redirect to another port, CVE-2022-27776)",
		       version_num >> 16, (version_num >> 8) & 0xff, version_num & 0xff);
}

static int curl_check(char *why, size_t why_len)
{
	const curl_version_info_data *v = sym_curl_version_info(CURLVERSION_NOW);

	return dl_curl_version_check(v ? v->version_num : 0, why, why_len);
}

DL_DEFINE_CHECKED(DL_CURL_SYMS, dl_curl_load, "libcurl.so.4", "libcurl4", curl_check)
