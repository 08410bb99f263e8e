/* SPDX-License-Identifier: MIT */
/*
 * What the reader checks and the writer makes sure of alike: the header's length and
 * checksum, metadata and data runs apart.
 */
#include <string.h>

#include "../common/crc32c.h"
#include "layout_int.h"

size_t layout_header_len(const struct layout_header *h)
{
	return sizeof(*h) + (layout_has_parent(h) ? sizeof(struct layout_parent) : 0);
}

uint32_t layout_header_crc(const struct layout_header *hdr, const struct layout_parent *par)
{
	uint8_t b[sizeof(*hdr) + sizeof(*par)];
	struct layout_header h = *hdr;

	h.header_crc = 0;
	memcpy(b, &h, sizeof(h));
	memcpy(b + sizeof(h), par, sizeof(*par));
	return crc32c(~0u, b, layout_header_len(&h));
}

size_t layout_meta_data_overlap(const struct layout_meta_run *meta, size_t n_meta,
				const struct layout_data_run *data, size_t n_data)
{
	size_t i = 0;

	for (size_t k = 0; k < n_data; k++) {
		uint64_t pos = layout_data_run_pos(&data[k]);
		uint64_t first = pos / DISK_BLOCK, last = (pos + data[k].len - 1) / DISK_BLOCK;

		while (i < n_meta && meta[i].lba + meta[i].count <= first)
			i++;
		if (i < n_meta && meta[i].lba <= last)
			return k;
	}
	return n_data;
}
