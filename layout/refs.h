/* SPDX-License-Identifier: MIT */
/*
 * The chunks an image file references: a layout (lazyblk mkfs) or a manifest (lazyblk
 * import), told apart by their magic. Used by `lazyblk cas gc --keep` and `lazyblk push`.
 * A layout with parents references the chunks of every layer of its chain (each layer is
 * an image of its own), not only those its merged disk reads.
 */
#ifndef LZ_LAYOUT_REFS_H
#define LZ_LAYOUT_REFS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/why.h"

struct chunk_refs {
	uint8_t (*d)[SHA256_LEN];
	size_t n, cap;
	/* the layout digests of every layout file of the chains added (cas gc of STORE/layouts) */
	uint8_t (*layouts)[SHA256_LEN];
	size_t n_layouts, cap_layouts;
};

/*
 * Append every chunk digest path references (the file is read and checked whole first), and
 * for a layout the layout digest of each file of its chain. -EBADMSG with why (common/why.h,
 * cleared on entry) for a file that is neither, or a damaged one; -errno when it cannot be
 * read (-EINVAL: not a regular file, never opened; why empty, or naming a file of a layout's
 * chain); -ENOMEM.
 */
int chunk_refs_add_file(struct chunk_refs *r, const char *path, char *why, size_t why_len);
/* The same for a layout of an image fetched by reference (layout_open LAYOUT_OPEN_FETCHED). */
int chunk_refs_add_fetched(struct chunk_refs *r, const char *path, char *why, size_t why_len);
/* Sort and drop duplicates, of both lists (for bsearch with memcmp order). */
void chunk_refs_finish(struct chunk_refs *r);
void chunk_refs_free(struct chunk_refs *r);

#endif
