/* SPDX-License-Identifier: MIT */
/* libcurl, loaded at first use (see dl.h): call dl_curl_load() before any sym_* below. */
#ifndef LZ_COMMON_DL_CURL_H
#define LZ_COMMON_DL_CURL_H

#include <curl/curl.h>

#include "dl.h"

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

DL_DECLARE(DL_CURL_SYMS)

/* 0, or -ELIBACC after one error line (libcurl.so.4 missing or too old). */
int dl_curl_load(void);

#endif
