// SPDX-License-Identifier: MIT
/* The sym_* pointers of dl_curl.h and their loader. */
#include "dl_curl.h"

#include "dl.h"

DL_DEFINE(DL_CURL_SYMS, dl_curl_load, "libcurl.so.4", "libcurl4")
