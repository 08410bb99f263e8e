/* SPDX-License-Identifier: MIT */
/*
 * Between disk bytes, chunk bytes and file bytes of one image (a manifest and a layout made
 * from it, or from another version of it): the lookups that recording and replaying traces
 * need. Built once (sorting the manifest's pieces by chunk), then read-only.
 *
 * Identical file contents share chunk bytes, so disk bytes of either file resolve to the
 * first such file in manifest order: a trace names one of them.
 */
#ifndef LZ_BLKD_TRACE_INDEX_H
#define LZ_BLKD_TRACE_INDEX_H

#include <stdint.h>

#include "../../cas/manifest.h"
#include "../../layout/layout.h"
#include "../../common/test_hook.h"

struct trace_index;

int trace_index_new(const struct manifest *m, const struct layout *l, struct trace_index **out);
void trace_index_free(struct trace_index *x);

/* File data within disk bytes [a, b), in disk order: cb(arg, entry, disk_off, file_off, len). */
typedef void (*trace_file_fn)(void *arg, uint32_t entry, uint64_t disk_off, uint64_t file_off,
			      uint32_t len);
void trace_index_disk_to_files(const struct trace_index *x, uint64_t a, uint64_t b,
			       trace_file_fn cb, void *arg);

/*
 * The chunks (indexes into the layout's chunk table) holding bytes [off, off + len) of
 * regular file e, in file order: cb(arg, chunk, frame bytes unknown). Pieces whose chunk the
 * layout does not reference are skipped. cb returns 0 to go on, non-zero to stop (returned).
 */
typedef int (*trace_chunk_fn)(void *arg, uint32_t chunk);
int trace_index_file_chunks(const struct trace_index *x, const struct mf_entry *e, uint64_t off,
			    uint64_t len, trace_chunk_fn cb, void *arg);

/* The layout chunk index of digest d, or -1. */
TEST_HOOK
int64_t trace_index_chunk(const struct trace_index *x, const uint8_t d[SHA256_LEN]);

#endif
