/* SPDX-License-Identifier: MIT */
/*
 * The plain tier: STORE/plain/<2 hex>/<64 hex> holds the uncompressed bytes of chunk
 * <64 hex>, written only after they were verified against that name, so that a later
 * load costs neither decompression nor sha256, and every process reading the store shares
 * the bytes through the page cache.
 *
 * File: the chunk's bytes (len, at offset 0), then a 64-byte trailer (little-endian):
 *   magic "LZBKPLN1", u64 len, the 32-byte digest, u32 crc32c of the bytes, 12 zero bytes.
 * Written under STORE/tmp and renamed into place (never modified in place; mode 0444); not
 * fsynced: a file torn by a host crash fails the check below and is replaced.
 *
 * Trust. A plain copy is checked when opened: size == len + 64, trailer magic, digest equal
 * to its name, len within the chunk size, and the crc32c of the bytes (read once, at open).
 * That catches truncation, torn or foreign files and accidental corruption; it does not
 * stand against someone who can write STORE/plain on purpose (who could write a matching
 * crc) — the plain tier trusts the store directory's writers, which the compressed chunks
 * (verified by sha256 at every load) do not need to. `lazyblk cas verify` re-hashes every
 * plain copy (sha256) and removes the bad ones. Serve with --no-plain to use only the
 * compressed chunks.
 */
#ifndef LZ_CAS_PLAIN_H
#define LZ_CAS_PLAIN_H

#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/why.h"
#include "store.h"

#define PLAIN_TRAILER 64u

/*
 * Open chunk d's plain copy, checked (above). 0 with *fd (read-only, the bytes at offset 0)
 * and *len; -ENOENT none; -EBADMSG with why (common/why.h): present but bad (the caller removes it);
 * -ENOMEM, -errno.
 */
int plain_open(struct store *s, const uint8_t d[SHA256_LEN], size_t max, int *fd, size_t *len,
	       char *why, size_t why_len);
/*
 * Add a plain copy of chunk d from its verified bytes: 1 added (*fd, when fd is not NULL, a
 * descriptor of the file written, *file_bytes its size), 0 one was there already (nothing
 * written, *fd = -1), -errno (-ENOSPC, -EROFS, ...: nothing left behind).
 */
int plain_put(struct store *s, const uint8_t d[SHA256_LEN], const void *data, size_t len,
	      int *fd, uint64_t *file_bytes);
/* Remove chunk d's plain copy: 0 with *bytes its size, -ENOENT, -errno. */
int plain_remove(struct store *s, const uint8_t d[SHA256_LEN], uint64_t *bytes);
/*
 * Full check of the plain copy at path (named d) for `cas verify`: the trailer and the
 * sha256 of the bytes. 0 ok, -EBADMSG with why, -ENOENT, -errno.
 */
int plain_verify_file(const char *path, const uint8_t d[SHA256_LEN], char *why,
		      size_t why_len);

#endif
