/* SPDX-License-Identifier: MIT */
/* Inside the layout module: shared by its reader (read.c, chain.c) and writer (write.c). */
#ifndef LZ_LAYOUT_LAYOUT_INT_H
#define LZ_LAYOUT_LAYOUT_INT_H

#include "layout.h"

/* A layer over a parent: version 2, or version 3 with LAYOUT_F_PARENT (1 has none). */
static inline bool layout_has_parent(const struct layout_header *h)
{
	return h->version != LAYOUT_VERSION_V1 && (h->flags & LAYOUT_F_PARENT);
}

/*
 * Bytes of the header (struct layout_parent after it in a layer with a parent: version 2,
 * or version 3 with LAYOUT_F_PARENT).
 */
size_t layout_header_len(const struct layout_header *h);
/*
 * crc32c(~0, header with header_crc = 0), as ext4 computes its checksums; with a parent,
 * of the header and the parent record after it.
 */
uint32_t layout_header_crc(const struct layout_header *hdr, const struct layout_parent *par);
/*
 * No data run may share a block with a metadata block. Both lists are sorted and
 * disjoint, so one merge walk decides it. Returns the offending data run or n_data.
 */
size_t layout_meta_data_overlap(const struct layout_meta_run *meta, size_t n_meta,
				const struct layout_data_run *data, size_t n_data);

/*
 * One file, verified, as it is: a one-layer struct layout whose runs are the file's own
 * (a layer's zero runs among its data runs); layers[0].hint is its parent hint.
 * oflags: 0 or O_NOFOLLOW, for fs_open_regular (a file that is not regular: -EINVAL, *why
 * "not a regular file"; never opened).
 */
int layout_load_file(const char *path, int oflags, struct layout **out, char *why,
		     size_t why_len);

#endif
