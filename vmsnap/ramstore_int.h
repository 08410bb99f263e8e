/* SPDX-License-Identifier: MIT */
/* Inside vmsnap's RAM store: shared by the RAM writer (ramstore_write.c) and ramstore.c. */
#ifndef LZ_VMSNAP_RAMSTORE_INT_H
#define LZ_VMSNAP_RAMSTORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"

struct store;
struct chunk_codec;

/*
 * The len bytes at data, named d (their sha256), as a chunk of s: touched if there already
 * (*written 0, so cas gc's grace period counts anew, as the chunker does), else compressed
 * with codec into zbuf (zcap: chunk_compress_bound(len)) and staged with store_put
 * (*written its compressed bytes). Visible at the next store_commit. 0 or -errno.
 */
int ramstore_put_chunk(struct store *s, struct chunk_codec *codec, const void *data, size_t len,
		       const uint8_t d[SHA256_LEN], void *zbuf, size_t zcap, size_t *written);

#endif
