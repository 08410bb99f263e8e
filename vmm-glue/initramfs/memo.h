/* SPDX-License-Identifier: MIT */
/*
 * Inside the initramfs builder: the recipe memo. Finding a cached initramfs by its content
 * key means reading the kernel, busybox and the modules, resolving module dependencies
 * (a walk of the modules tree when depmod never ran) and decompressing modules: tens of
 * milliseconds at every `lazyblk run`. The recipe — the digests of the kernel and busybox
 * (remembered by file identity, common/digest_memo.h) plus every option — is known without
 * any of that; a memo file names, for a recipe, the cpio it produced and the module files it
 * read, with their identities. A hit needs every one of those files unchanged and the cpio
 * present; anything else is a miss and the builder takes the full path.
 */
#ifndef LZ_VMM_GLUE_INITRAMFS_MEMO_H
#define LZ_VMM_GLUE_INITRAMFS_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"

/* The mode of every file in the cache (a cpio holds the command's env; a memo names paths). */
#define INITRAMFS_CACHE_MODE 0600

/* 0 and cpio (a path under dir) set on a hit; -ENOENT on any miss. */
int initramfs_memo_lookup(const char *dir, const uint8_t recipe[SHA256_LEN], char *cpio,
			  size_t len);
/*
 * Remember that recipe produced cpio (a file name in dir) after reading paths[n] (module
 * files, and the files and directories the module resolution looked at), whose identities
 * (common/digest_memo.h) were ids[n] when they were read — "-" for one that did not exist.
 * Failures only cost the next run the full path.
 */
void initramfs_memo_store(const char *dir, const uint8_t recipe[SHA256_LEN], const char *cpio,
			  const char *const *paths, const char *const *ids, size_t n);

#endif
