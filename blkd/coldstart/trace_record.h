/* SPDX-License-Identifier: MIT */
/*
 * Recording a boot trace (cas/trace.h) in the block engine: the engine's reads of the base
 * image (reads the overlay answers are the guest's own writes, not the image's) are
 * touched here; a block is recorded the first time it is read. Resolving disk ranges to
 * paths needs the image's manifest.
 */
#ifndef LZ_BLKD_TRACE_RECORD_H
#define LZ_BLKD_TRACE_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../../cas/manifest.h"
#include "../../cas/trace.h"
#include "../../layout/layout.h"

struct trace_recorder;

/*
 * Record first touches of the disk l describes, resolved to files through m (the manifest
 * l was made from: -EINVAL otherwise, with why: common/why.h). Both are borrowed until the recorder is
 * freed. t0: the server's start (CLOCK_MONOTONIC).
 */
int trace_recorder_new(const struct layout *l, const struct manifest *m,
		       const struct timespec *t0, struct trace_recorder **out, char *why,
		       size_t why_len);
void trace_recorder_free(struct trace_recorder *r);
/* Base bytes [off, off + len) were read. Thread-safe; cheap once a range has been seen. */
void trace_recorder_touch(struct trace_recorder *r, uint64_t off, uint64_t len);
/*
 * Stop recording (later touches are ignored) and write the trace atomically to path.
 * Only the first call writes; later ones return -EALREADY. *records (may be NULL) gets the
 * number of records written. -errno with why (cleared on entry), or why empty.
 */
int trace_recorder_finish(struct trace_recorder *r, const char *path, uint64_t *records,
			  char *why, size_t why_len);

#endif
