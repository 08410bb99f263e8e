/* SPDX-License-Identifier: MIT */
/* libcurl, loaded at first use (see dl.h): call dl_curl_load() before any sym_* below. */
#ifndef LZ_COMMON_DL_CURL_H
#define LZ_COMMON_DL_CURL_H

#include <curl/curl.h>

#include "dl.h"
#include "test_hook.h"

#define DL_CURL_SYMS(X) \
	X(curl_easy_cleanup) \
	X(curl_easy_escape) \
	X(curl_easy_getinfo) \
	X(curl_easy_init) \
	X(curl_easy_reset) \
	X(curl_easy_setopt) \
	X(curl_easy_strerror) \
	X(curl_free) \
	X(curl_global_init) \
	X(curl_multi_add_handle) \
	X(curl_multi_cleanup) \
	X(curl_multi_info_read) \
	X(curl_multi_init) \
	X(curl_multi_perform) \
	X(curl_multi_poll) \
	X(curl_multi_remove_handle) \
	X(curl_multi_setopt) \
	X(curl_multi_wakeup) \
	X(curl_slist_append) \
	X(curl_slist_free_all) \
	X(curl_url) \
	X(curl_url_cleanup) \
	X(curl_url_get) \
	X(curl_url_set) \
	X(curl_version_info) \

DL_DECLARE(DL_CURL_SYMS)

/*
 * The oldest libcurl accepted: 7.85.0, the first with CURLOPT_PROTOCOLS_STR and
 * CURLOPT_REDIR_PROTOCOLS_STR (which keep every transfer and redirect to http and https:
 * an older one ignores them, silently). It is also past 7.83.0, before which an
 * Authorization header followed a redirect to the same host on another port or scheme
 * (CVE-2022-27776). Debian 12 has 7.88.1.
 */
#define DL_CURL_MIN_VERSION 0x075500u
#define DL_CURL_MIN_VERSION_STR "7.85.0"

/*
 * 0, or -ELIBACC after one error line (libcurl.so.4 missing, lacking a function, or older
 * than DL_CURL_MIN_VERSION: "libcurl 7.81.0 is too old: lazyblk needs 7.85.0 or later ...").
 */
int dl_curl_load(void);
/* The version check of the libcurl loaded (curl_version_info's version_num): 0, or -ELIBACC
 * and why. */
TEST_HOOK
int dl_curl_version_check(unsigned version_num, char *why, size_t why_len);

#endif
