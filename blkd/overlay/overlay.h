/* SPDX-License-Identifier: MIT */
/*
 * The copy-on-write overlay of a served disk: OVERLAY is a sparse file the size of the
 * disk (block i at offset i * 4096) holding the blocks the guest wrote; OVERLAY.state
 * records, per 4 KiB block, whether it is clean (read the base), dirty (read OVERLAY) or
 * zeroed (reads as zeros; its range of OVERLAY is a hole), and the digest of the layout
 * the overlay belongs to. Format in docs/formats.md.
 *
 * Durability: every state change is written to OVERLAY.live as it happens (so kill -9
 * loses nothing the kernel has: reopened in the same boot, OVERLAY.live is believed);
 * overlay_flush() makes the data durable and then writes the changed states into
 * OVERLAY.state and makes them durable, so after a host crash (another boot: OVERLAY.live
 * is not read) every flushed write is there, and a block changed since reads as it did at
 * the last flush, never as zeros it was not given (docs/reliability.md). Thread-safe.
 */
#ifndef LZ_BLKD_OVERLAY_H
#define LZ_BLKD_OVERLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "../../common/block.h"
#include "../../common/sha256.h"
#include "../../common/why.h"
#include "../../common/test_hook.h"


enum ov_state {
	OV_CLEAN = 0,
	OV_DIRTY = 1,
	OV_ZERO = 2,
};

struct overlay;

/*
 * Open OVERLAY (and OVERLAY.state, OVERLAY.live); with create, make them if missing. An
 * existing overlay must be for the same layout digest and disk size: otherwise -EBADMSG /
 * why ("overlay belongs to another layout", "truncated state file", ...). Needs the
 * kernel's boot id (common/boot_id.h); a version 1 state file is made version 2.
 */
int overlay_open(const char *path, uint64_t disk_bytes, const uint8_t layout_digest[SHA256_LEN],
		 bool create, struct overlay **out, char *why, size_t why_len);
/*
 * The same overlay for reading only (serve --read-only): never made or changed (a version 1
 * state file stays version 1, OVERLAY.live is read when it is believed, never started), and
 * locked shared, as overlay_open_existing's readers: a writer is refused while it is open.
 */
int overlay_open_read_only(const char *path, uint64_t disk_bytes,
			   const uint8_t layout_digest[SHA256_LEN], struct overlay **out,
			   char *why, size_t why_len);
void overlay_close(struct overlay *ov);
/*
 * Open an existing overlay for the layout its state file records (overlay_layout_digest,
 * overlay_disk_bytes): lazyblk snapshot and overlay show use it without the layout.
 * read_only: writes fail with -EROFS and several readers may share the overlay.
 * An overlay open for writing is locked (flock) against every other open: a second
 * opener gets -EBUSY / "overlay is in use by another process".
 */
int overlay_open_existing(const char *path, bool read_only, struct overlay **out,
			  char *why, size_t why_len);
/*
 * Remove the files of the overlay at path (OVERLAY, OVERLAY.state, OVERLAY.live; missing
 * ones are fine): what a command that made one and then failed leaves behind.
 */
void overlay_remove(const char *path);
const uint8_t *overlay_layout_digest(const struct overlay *ov);
uint64_t overlay_disk_bytes(const struct overlay *ov);

uint64_t overlay_blocks(const struct overlay *ov);
/* One block's state (the engine asks overlay_run, once per run of equal state). */
TEST_HOOK
enum ov_state overlay_state(struct overlay *ov, uint64_t block);
/* Length (in blocks, >= 1) of the run of equal state starting at block. */
uint64_t overlay_run(struct overlay *ov, uint64_t block, enum ov_state *state);

/*
 * Where the overlay says it has run out of room: when a write first fails with ENOSPC or
 * EDQUOT, a warning ("overlay FILE: No space left on device; writes fail until space is
 * freed"); when a write that needs new room succeeds again, a notice ("overlay FILE: writes
 * succeed again after N failed"). Two lines an episode, however many writes fail in it;
 * emitted on the writing thread. Default: nowhere. Call before the first write.
 */
void overlay_set_notes(struct overlay *ov, const struct note_sink *notes);

/* Whole blocks only; the caller does any read-modify-write. */
int overlay_read(struct overlay *ov, uint64_t block, uint32_t n, void *buf);
int overlay_write(struct overlay *ov, uint64_t block, uint32_t n, const void *buf);
/* Punch the range out of OVERLAY and mark it zeroed. */
int overlay_zero(struct overlay *ov, uint64_t block, uint64_t n);
/* Data, then state, durable. Flushes run at once; each returns after those before it. */
int overlay_flush(struct overlay *ov);

struct overlay_stats {
	uint64_t dirty_blocks, zero_blocks;
	uint64_t writes, flushes;
	uint64_t snapshot_copies;  /* blocks writers copied into a running snapshot first */
};
void overlay_get_stats(struct overlay *ov, struct overlay_stats *st);

/*
 * Deltas (snapshots): the dirty and zeroed blocks of an overlay, as one file.
 * overlay_snapshot() writes a point-in-time delta: blocks whose state or data change
 * while it runs are saved as they were when it started (writers copy the old block to
 * the delta first), so it holds every write completed before the call and none after.
 */
int overlay_snapshot(struct overlay *ov, const char *delta_path, char *why, size_t why_len);
/*
 * overlay_snapshot() in two steps: begin captures the point in time (it waits for the
 * writes in flight and pauses new ones only while it copies the state bitmap), end
 * copies the blocks and commits DELTA (atomically: DELTA.tmp.XXXXXX, fsync, rename).
 * A server may acknowledge a snapshot request once begin returns. One at a time per
 * overlay (-EBUSY). end frees s whatever it returns.
 */
struct overlay_snapshot;
int overlay_snapshot_begin(struct overlay *ov, const char *delta_path,
			   struct overlay_snapshot **out, char *why, size_t why_len);
int overlay_snapshot_end(struct overlay_snapshot *s, char *why, size_t why_len);
/* Between begin and end: the dirty and zeroed blocks captured (what the delta records). */
void overlay_snapshot_counts(const struct overlay_snapshot *s, uint64_t *dirty,
			     uint64_t *zero);
/* Start (or overwrite) an overlay from a delta: the new overlay's state and data are the
 * delta's, for the same layout. */
int overlay_apply_delta(const char *delta_path, const char *overlay_path,
			const uint8_t layout_digest[SHA256_LEN], uint64_t disk_bytes,
			char *why, size_t why_len);

#endif
