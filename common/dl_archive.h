/* SPDX-License-Identifier: MIT */
/* libarchive, loaded at first use (see dl.h): call dl_archive_load() before any sym_* below. */
#ifndef LZ_COMMON_DL_ARCHIVE_H
#define LZ_COMMON_DL_ARCHIVE_H

#include <archive.h>
#include <archive_entry.h>

#include "dl.h"

#define DL_ARCHIVE_SYMS(X) \
	X(archive_entry_acl_next) \
	X(archive_entry_acl_reset) \
	X(archive_entry_atime) \
	X(archive_entry_atime_is_set) \
	X(archive_entry_atime_nsec) \
	X(archive_entry_ctime) \
	X(archive_entry_ctime_is_set) \
	X(archive_entry_ctime_nsec) \
	X(archive_entry_filetype) \
	X(archive_entry_free) \
	X(archive_entry_gid) \
	X(archive_entry_hardlink) \
	X(archive_entry_mtime) \
	X(archive_entry_mtime_nsec) \
	X(archive_entry_new) \
	X(archive_entry_pathname) \
	X(archive_entry_perm) \
	X(archive_entry_rdevmajor) \
	X(archive_entry_rdevminor) \
	X(archive_entry_set_filetype) \
	X(archive_entry_set_gid) \
	X(archive_entry_set_ino) \
	X(archive_entry_set_mtime) \
	X(archive_entry_set_nlink) \
	X(archive_entry_set_pathname) \
	X(archive_entry_set_perm) \
	X(archive_entry_set_rdevmajor) \
	X(archive_entry_set_rdevminor) \
	X(archive_entry_set_size) \
	X(archive_entry_set_symlink) \
	X(archive_entry_set_uid) \
	X(archive_entry_size) \
	X(archive_entry_size_is_set) \
	X(archive_entry_sparse_count) \
	X(archive_entry_symlink) \
	X(archive_entry_uid) \
	X(archive_entry_xattr_next) \
	X(archive_entry_xattr_reset) \
	X(archive_errno) \
	X(archive_error_string) \
	X(archive_filter_bytes) \
	X(archive_filter_code) \
	X(archive_filter_count) \
	X(archive_read_data) \
	X(archive_read_data_block) \
	X(archive_read_free) \
	X(archive_read_new) \
	X(archive_read_next_header) \
	X(archive_read_open2) \
	X(archive_read_open_fd) \
	X(archive_read_open_filename) \
	X(archive_read_open_memory) \
	X(archive_read_support_filter_all) \
	X(archive_read_support_filter_bzip2) \
	X(archive_read_support_filter_gzip) \
	X(archive_read_support_filter_xz) \
	X(archive_read_support_filter_zstd) \
	X(archive_read_support_format_empty) \
	X(archive_read_support_format_raw) \
	X(archive_read_support_format_tar) \
	X(archive_set_error) \
	X(archive_write_add_filter_gzip) \
	X(archive_write_close) \
	X(archive_write_data) \
	X(archive_write_free) \
	X(archive_write_header) \
	X(archive_write_new) \
	X(archive_write_open_fd) \
	X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_filter_option) \
	X(archive_write_set_format_cpio_newc) \

DL_DECLARE(DL_ARCHIVE_SYMS)

/* 0, or -ELIBACC after one error line (libarchive.so.13 missing or too old). */
int dl_archive_load(void);

#endif
