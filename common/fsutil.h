/* SPDX-License-Identifier: MIT */
/* Small file-system helpers shared by every module. All return 0 or -errno. */
#ifndef LZ_COMMON_FSUTIL_H
#define LZ_COMMON_FSUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "test_hook.h"
#include "why.h"

/*
 * Open name (relative to dfd, or AT_FDCWD) for reading, O_RDONLY | O_CLOEXEC | O_NOCTTY |
 * flags (O_NOFOLLOW where the name is lazyblk's own: a chunk, a plain copy, a fetched layout),
 * only if it is a regular file. A FIFO would block open() until a writer comes, a terminal
 * would become the controlling one, and opening some devices has effects of its own, so the
 * name is opened O_PATH first (which opens nothing: no FIFO waits, no driver runs), that
 * descriptor is fstat'ed, and only a regular file is then opened, through /proc/self/fd/N:
 * the very file checked, whatever the name holds by then. Where /proc is not mounted, the
 * name is opened again (O_NONBLOCK, cleared afterwards: a FIFO swapped in meanwhile cannot
 * block it) and the result checked. The descriptor is fstat'ed into st (may be NULL).
 * Returns the descriptor, or -errno: -EISDIR for a directory, -EINVAL for any other file
 * that is not regular (fs_open_why says "not a regular file"), -ELOOP for a symbolic link
 * with O_NOFOLLOW. Says nothing.
 */
int fs_open_regular(int dfd, const char *name, int flags, struct stat *st);
/* strerror(-err), but "not a regular file" for the -EINVAL of fs_open_regular. */
const char *fs_open_why(int err);
/* mkdir -p with the given mode for created components. */
int fs_mkdir_p(const char *path, mode_t mode);
/*
 * A directory lazyblk reads back what it wrote to (a cache): made with its missing parents,
 * mode 0700, if absent; then 0 only if path itself (lstat: a link is not followed) is a
 * directory owned by geteuid() that neither its group nor others may write. Otherwise -EPERM
 * with the reason in why ("owned by another user", "writable by its group or others",
			   "a symbolic link",
 * "not a directory"): whoever may change the directory may replace what is read back from
 * it. Another -errno (why empty) when it cannot be made or looked at. Its mode is never
 * changed (an older lazyblk made such directories 0755, which stays).
 */
int fs_mkdir_private(const char *path, char *why, size_t why_len);
/* read(2)/write(2) loops that retry on EINTR and short counts. */
TEST_HOOK
int fs_read_full(int fd, void *buf, size_t len);              /* -EIO on early EOF */
int fs_pread_full(int fd, void *buf, size_t len, off_t off);  /* -EIO on early EOF */
int fs_write_full(int fd, const void *buf, size_t len);
int fs_pwrite_full(int fd, const void *buf, size_t len, off_t off);
/*
 * Whole regular file (from offset 0, through io_uring) into a malloc'ed buffer, NUL-terminated.
 * The _file forms open it with fs_open_regular (a FIFO, a device: -EINVAL, never opened).
 */
int fs_read_fd(int fd, uint8_t **data, size_t *len);
int fs_read_file(const char *path, uint8_t **data, size_t *len);
/* The same, -EFBIG for a file larger than max bytes (nothing read). */
int fs_read_file_max(const char *path, uint64_t max, uint8_t **data, size_t *len);
/*
 * A whole regular file mapped read-only (private): no copy and no allocation, and only the
 * pages used are read — for large inputs of which a start-up needs little or reads once
 * (kernels, modules). The file must not be truncated while mapped (files replaced by rename,
 * as package managers and caches do, are fine). An empty file maps to data == NULL, len == 0.
 * fs_map_file opens it with fs_open_regular; fs_map_fd maps an open descriptor (which may be
 * closed afterwards). fs_unmap() accepts a zeroed struct.
 */
struct fs_map {
	uint8_t *data;
	size_t len;
	struct stat st;  /* of the file mapped (from the same descriptor) */
};
int fs_map_file(const char *path, struct fs_map *m);
int fs_map_fd(int fd, struct fs_map *m);
void fs_unmap(struct fs_map *m);
/*
 * Whether a new file may be renamed over path: 0 if nothing is there, or a regular file or a
 * symbolic link (the link is replaced, not its target); -EEXIST for a directory, a device,
 * a FIFO or a socket (an atomic writer must never replace /dev/null or /dev/sdX with a file);
 * another -errno if lstat fails otherwise.
 */
int fs_output_check(const char *path);
/* rename(tmp, path) if fs_output_check(path) allows it: 0 or -errno. */
int fs_rename_output(const char *tmp, const char *path);
/*
 * The mode of every file lazyblk creates that holds image or guest data (manifests, layouts,
 * chunks, overlays and their state, deltas, exported disks, traces, fetched layouts), before
 * the umask: the file gets FS_DATA_MODE & ~umask, as open(2) gives it, so the operator's umask
 * decides who else may read a sandbox's data (umask 022: 0644; umask 077: 0600). Never
 * widened afterwards (no fchmod). docs/security.md, "Files lazyblk writes".
 */
#define FS_DATA_MODE 0644
/*
 * mkostemp(3) with a mode: a new file named by tmpl (ending in "XXXXXX", replaced by random
 * letters and digits) opened O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | flags with mode filtered
 * by the umask (mkostemp's is always 0600, which callers then widened ignoring the umask).
 * The descriptor, or -errno (-EINVAL: no XXXXXX; -EEXIST after 100 names taken).
 */
int fs_mkstemp(char *tmpl, int flags, mode_t mode);
/*
 * Atomic replace: PATH.tmp.XXXXXX (fs_mkstemp: mode & ~umask), write, fsync, rename, fsync
 * the directory.
 */
int fs_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);
/* fsync the directory containing path (or path itself if dir=1). */
int fs_fsync_dir(const char *path);
/* Directory part of path into buf ("." if none). */
void fs_dirname(const char *path, char *buf, size_t len);

#endif
