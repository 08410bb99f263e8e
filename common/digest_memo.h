/* SPDX-License-Identifier: MIT */
/*
 * sha256 digests of files, remembered across runs by the file's identity, so that large
 * inputs read at every start (a kernel, busybox) are hashed once, not at each `lazyblk run`.
 *
 * The identity is the device, inode, size, and modification and change times to the
 * nanosecond. Any write to a file moves its ctime, which no system call can set back, so a
 * remembered digest is used only for the very same unchanged file; a file replaced by another
 * (a new inode) is hashed again. A memo is one small file per identity under DIR, written
 * atomically; a missing, unreadable or foreign memo is only a miss.
 */
#ifndef LZ_COMMON_DIGEST_MEMO_H
#define LZ_COMMON_DIGEST_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "fsutil.h"
#include "sha256.h"
#include "test_hook.h"

/* The memo directory of a cache directory: CACHE_DIR/digests. -ENAMETOOLONG if len is short. */
int digest_memo_dir(const char *cache_dir, char *buf, size_t len);
/* The identity of a file as text ("DEV-INO-SIZE-MTIME.NS-CTIME.NS", hex); -1 if len is short. */
int digest_memo_identity(const struct stat *st, char *buf, size_t len);
/* true and d filled when DIR remembers the digest of the file with this stat. */
TEST_HOOK
bool digest_memo_get(const char *dir, const struct stat *st, uint8_t d[SHA256_LEN]);
/* Remember d for the file with this stat (creates DIR; failures are ignored). */
TEST_HOOK
void digest_memo_put(const char *dir, const struct stat *st, const uint8_t d[SHA256_LEN]);
/*
 * The sha256 of a mapped file (fs_map_file): remembered in DIR by m->st, else hashed now and
 * remembered. 0 or -errno from hashing.
 */
int digest_memo_sha256(const char *dir, const struct fs_map *m, uint8_t d[SHA256_LEN]);

#endif
