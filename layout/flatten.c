/* SPDX-License-Identifier: MIT */
/* A layout's merged view written as a layout of its own, no parent (commit --flatten). */
#include <errno.h>
#include <stdlib.h>

#include "layout.h"

#define FLATTEN_PIECE 256u /* metadata blocks copied at a time */

static int flatten_meta(const struct layout *l, struct layout_writer *w)
{
	uint8_t *buf = malloc((size_t)FLATTEN_PIECE * DISK_BLOCK);
	int ret = buf ? 0 : -ENOMEM;

	for (uint64_t i = 0; !ret && i < l->hdr.meta_run_count; i++) {
		const struct layout_meta_run *m = &l->meta_runs[i];

		for (uint32_t a = 0, n; !ret && a < m->count; a += n) {
			n = m->count - a < FLATTEN_PIECE ? m->count - a : FLATTEN_PIECE;
			ret = layout_read_meta_blocks(l, m, m->first + a, n, buf, NULL);
			if (!ret)
				ret = layout_add_meta(w, m->lba + a, buf, n);
		}
	}
	free(buf);
	return ret;
}

int layout_flatten(const struct layout *l, const char *path, uint8_t digest_out[SHA256_LEN])
{
	struct layout_writer *w;
	int ret;

	ret = layout_writer_new(path, l->hdr.block_count, &w);
	if (ret)
		return ret;
	ret = flatten_meta(l, w);
	for (uint64_t i = 0; !ret && i < l->hdr.data_run_count; i++) {
		const struct layout_data_run *d = &l->data_runs[i];

		ret = layout_add_data(w, layout_data_run_pos(d), d->len, l->chunks[d->chunk],
				      d->chunk_off);
	}
	if (!ret)
		ret = layout_writer_finish(w, l->hdr.manifest_digest, l->hdr.fs_uuid,
					   l->hdr.chunk_size, digest_out);
	layout_writer_free(w);
	return ret;
}
