/* SPDX-License-Identifier: MIT */
/*
 * Synchronous file I/O (pread/pwrite/fdatasync to completion) through io_uring — not an
 * asynchronous engine. Each thread has a small ring of its own, made on first use and freed
 * when the thread exits (a forked child starts without one); every call puts ONE request in
 * it and waits for that request (io_uring_submit_and_wait: one system call, as pread is),
 * retrying short counts and EINTR. The caller's thread is blocked for the whole operation,
 * exactly as with pread/pwrite, and there is never more than one request in flight per
 * thread: concurrency comes from the callers' threads (NBD workers, vhost-user and
 * virtio-mmio queue threads, the reader's loaders), not from the ring.
 *
 * Used for the overlay's data (reads, writes, flushes), chunk and plain-copy reads, whole-file
 * reads (fs_read_fd) and raw disks. Today it neither saves system calls nor overlaps I/O
 * compared with pread/pwrite; it is the one place where batching (several requests of a
 * caller per submit, fixed buffers, O_DIRECT) would go, should a measurement ask for it.
 * No asynchronous engine is built on it: an export that wants requests in parallel runs
 * them on threads (common/workq.h). Where io_uring is unavailable (kernel too old,
 * disabled by sysctl, refused by seccomp) each thread falls back to pread/pwrite/fdatasync.
 *
 * All return 0 or -errno; a read past EOF is -EIO.
 */
#ifndef LZ_COMMON_URING_H
#define LZ_COMMON_URING_H

#include <stddef.h>
#include <sys/types.h>

int uring_pread_full(int fd, void *buf, size_t len, off_t off);
int uring_pwrite_full(int fd, const void *buf, size_t len, off_t off);
int uring_fdatasync(int fd);

#endif
