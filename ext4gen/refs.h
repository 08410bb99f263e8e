/* SPDX-License-Identifier: MIT */
/*
 * The chunks an image file references: a layout (lazyblk mkfs) or a manifest (lazyblk
 * import), told apart by their magic. Used by `lazyblk cas gc --keep` and `lazyblk push`.
 * A layout with parents references the chunks of every layer of its chain (each layer is
 * an image of its own), not only those its merged disk reads.
 */
#ifndef LZ_EXT4GEN_REFS_H
#define LZ_EXT4GEN_REFS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"

struct chunk_refs {
	uint8_t (*d)[SHA256_LEN];
	size_t n, cap;
};

/*
 * Append every chunk digest path references (the file is read and checked whole first).
 * -EBADMSG with *why (static text) for a file that is neither, or a damaged one; -errno
 * (*why NULL) when it cannot be read; -ENOMEM.
 */
int chunk_refs_add_file(struct chunk_refs *r, const char *path, const char **why);
/* Sort and drop duplicates (for bsearch with memcmp order). */
void chunk_refs_finish(struct chunk_refs *r);
void chunk_refs_free(struct chunk_refs *r);

#endif
