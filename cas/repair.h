/* SPDX-License-Identifier: MIT */
/* Repairing a store's bad chunks from a remote (lazyblk cas verify --repair --remote URL). */
#ifndef LZ_CAS_REPAIR_H
#define LZ_CAS_REPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "remote/remote.h"
#include "store.h"

/*
 * Fetch chunk d from r, check it against its name (decompressed and re-hashed, as every reader
 * does), and put it in place of the store's copy atomically: written under STORE/tmp,
 * fsynced, renamed over chunks/xx/<hex>, the fan-out directory fsynced. The store's copy is
 * never touched unless the new one is good.
 * 0 repaired; -ENOENT the remote does not have it; -EBADMSG the remote's copy is bad too;
 * -EIO (or another -errno) the fetch failed after the retries (the remote layer has logged
 * it); -errno from the store. why (why_len bytes, may be 0): one phrase saying why, for
 * every failure.
 */
int cas_repair_chunk(struct store *s, struct remote *r, const uint8_t d[SHA256_LEN], char *why,
		     size_t why_len);

#endif
