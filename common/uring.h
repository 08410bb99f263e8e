/* SPDX-License-Identifier: MIT */
/*
 * File I/O on the hot paths (overlay data, chunk reads) through io_uring (liburing).
 * Each thread gets its own small ring on first use (freed when the thread exits), so
 * callers stay simple and synchronous while the kernel does the I/O asynchronously;
 * where io_uring is unavailable (disabled by sysctl, seccomp) the calls fall back to
 * pread/pwrite/fdatasync. All return 0 or -errno; a read past EOF is -EIO.
 */
#ifndef LZ_COMMON_URING_H
#define LZ_COMMON_URING_H

#include <stddef.h>
#include <sys/types.h>

int uring_pread_full(int fd, void *buf, size_t len, off_t off);
int uring_pwrite_full(int fd, const void *buf, size_t len, off_t off);
int uring_fdatasync(int fd);

#endif
