// SPDX-License-Identifier: MIT
/* The sym_* pointers of dl_archive.h and their loader. */
#include "dl_archive.h"

#include "dl.h"

DL_DEFINE(DL_ARCHIVE_SYMS, dl_archive_load, "libarchive.so.13", "libarchive13")
