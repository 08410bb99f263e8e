/* SPDX-License-Identifier: MIT */
/*
 * The block engine: the disk a layout describes, with its writes in an overlay.
 * read:  overlay (dirty → its data, zeroed → zeros) → layout metadata → chunk data
 *        (verified) → zeros.
 * write: whole blocks go to the overlay; a partial block is read, merged and written
 *        whole (never more than one block copied).
 * Private to the disk module: every user (the transports, the VMM, the control socket, the
 * file exporter, the CLI) opens it as a disk with disk_open() (blkd/disk/disk.h) and reaches
 * it through the disk (disk_engine.c). Thread-safe: the calls are synchronous, and
 * an export that wants requests in parallel calls them from its own threads
 * (common/workq.h).
 */
#ifndef LZ_BLKD_ENGINE_H
#define LZ_BLKD_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../cas/source.h"
#include "../../common/block.h"
#include "../../common/why.h"
#include "../block_status.h"
#include "../coldstart/prefetch.h"
#include "../sector.h"


struct blkd_engine_opts {
	const char *layout_path;
	bool layout_fetched;       /* an image fetched by reference (layout_open_flags) */
	const char *store_dir;
	const char *overlay_path;  /* NULL: a read-only disk */
	uint64_t mem_cache;        /* decompressed chunk cache bytes (0: 256 MiB) */
	bool read_only;
	/* remote tier (see cas/source.h): the store becomes a cache in front of it */
	const char *remote_url;    /* NULL: the store is the only tier */
	uint64_t cache_size;       /* > 0: bound the store as a cache */
	unsigned fetch_concurrency, fetch_timeout_ms;  /* 0: defaults */
	int fetch_retries;         /* 0: default, < 0: none */
	/* boot traces (trace.h): both need the manifest the layout was made from */
	const char *manifest_path;
	const char *trace_record;  /* record first touches, written here (blkd_engine_trace_finish) */
	const char *prefetch_trace; /* replay this trace's chunks in the background */
	bool prefetch_all;         /* then every other chunk of the layout */
	/*
	 * Chunks loaded ahead of sequential reads: 0 default (the fetch concurrency, 16), < 0
	 * none. By default none with a trace prefetch (it knows what comes next, and read-ahead
	 * would fetch untraced chunks at demand priority).
	 */
	int readahead;
	bool no_plain;             /* no plain tier (cas/source.h) */
	/*
	 * At open, before anything starts: the chunks of the first data runs can be had (in
	 * the store, or the remote answers for the first; an oci tag exists: cas_source_check).
	 * A cheap check that the store or remote is the image's, not a verification.
	 */
	bool check;
	/*
	 * blkd_engine_open's notes: a --prefetch trace of another version of the image (info);
	 * then, for the engine's life, the overlay running out of room and writes succeeding
	 * again (overlay_set_notes: a warning and a notice an episode, on the writing thread)
	 */
	struct note_sink notes;
};

struct blkd_engine;

/*
 * 0, or -errno with one line in why (why_len bytes, may be 0): "IMAGE.layout: bad magic (not
 * a lazyblk layout)", "DIR: not a lazyblk store (no chunks/ directory)", "TRACE: recorded on
 * another image (...)", "OVERLAY: ...", and with check the reason cas_source_check gives,
 * ending "(--no-check to serve anyway)". Prints nothing; the threads it starts (read-ahead,
 * prefetch) log what fails on them.
 */
int blkd_engine_open(const struct blkd_engine_opts *o, struct blkd_engine **out, char *why,
		     size_t why_len);
void blkd_engine_close(struct blkd_engine *e);
uint64_t blkd_engine_size(const struct blkd_engine *e);
/* The layout's digest (sha256 of its header): names the disk (VM snapshots). */
void blkd_engine_layout_digest(const struct blkd_engine *e, uint8_t out[32]);
bool blkd_engine_read_only(const struct blkd_engine *e);
/* The layout the engine reads (lazyblk export walks its runs); valid while e is open. */
struct layout;
const struct layout *blkd_engine_layout(const struct blkd_engine *e);

/* Offsets and lengths: multiples of 512, inside the disk (-EINVAL otherwise). */
int blkd_engine_read(struct blkd_engine *e, uint64_t off, uint32_t len, void *buf);
/*
 * The same read, sparse (the disk's read_sparse, blkd/disk/disk.h): one walk of the overlay
 * and the layout makes the read's plan, and each extent of it is filled, then told to
 * cb(arg, off, len, flags) with base:allocation's flags (DISK_STATUS_HOLE|DISK_STATUS_ZERO:
 * zeros, left as they are in buf; 0: read into buf), then counted in the statistics. cb
 * returns 0 to go on, > 0 for no more extents (the rest is read whole, zeros written), < 0
 * to fail the read with it. Counted as one read of len bytes, as blkd_engine_read (which is
 * this with no cb).
 */
int blkd_engine_read_sparse(struct blkd_engine *e, uint64_t off, uint32_t len, void *buf,
			    disk_extent_fn cb, void *arg);
int blkd_engine_write(struct blkd_engine *e, uint64_t off, uint32_t len, const void *buf,
		      bool fua);
int blkd_engine_flush(struct blkd_engine *e);
int blkd_engine_discard(struct blkd_engine *e, uint64_t off, uint64_t len);
int blkd_engine_write_zeroes(struct blkd_engine *e, uint64_t off, uint64_t len);

/*
 * Status of [off, off+len) in context ctx (../block_status.h; at most 256 MiB per call; the
 * extents may stop short of len): cb(arg, off, len, flags) for consecutive extents, from the
 * walk a read makes (blkd_engine_read_sparse reports the same allocation).
 */
int blkd_engine_status(struct blkd_engine *e, enum disk_ctx ctx, uint64_t off, uint64_t len,
		       disk_extent_fn cb, void *arg);

/*
 * Point-in-time delta of the overlay (see overlay_snapshot): every write completed before
 * the call and none after, while requests go on. dirty/zero (may be NULL) get the blocks
 * it records. Prints nothing; -errno with why (common/why.h, cleared on entry; left empty:
 * strerror of the result). -ENOENT: the engine has no overlay.
 */
int blkd_engine_snapshot(struct blkd_engine *e, const char *delta_path, uint64_t *dirty,
			 uint64_t *zero, char *why, size_t why_len);

/*
 * Stop recording and write the trace to the --trace-record path (or to path, if not NULL).
 * -ENOENT: not recording; -EALREADY: written already. *records gets the count written.
 * Prints nothing; -errno with why (cleared on entry), or why left empty.
 */
int blkd_engine_trace_finish(struct blkd_engine *e, const char *path, uint64_t *records,
			     char *why, size_t why_len);
/* The path the trace goes to (NULL: not recording). */
const char *blkd_engine_trace_path(const struct blkd_engine *e);

struct blkd_engine_stats {
	uint64_t reads, writes, flushes, discards;
	uint64_t read_bytes, write_bytes;
	/* of those, the ones that failed: reads; writes, write-zeroes, discards and flushes */
	uint64_t read_errors, write_errors;
	uint64_t overlay_hits, meta_hits, chunk_hits, zero_hits;   /* blocks read per tier */
	uint64_t chunk_loads, chunk_cache_hits;  /* misses (loaded from the store), hits */
	uint64_t chunk_loaded_bytes, store_read_bytes;
	uint64_t chunk_readahead;  /* of the loads, those made ahead of the reads (read-ahead) */
	uint64_t dirty_blocks, zero_blocks;
	uint64_t snapshot_copies;  /* blocks writers saved into a running snapshot first */
	uint64_t in_flight;
	struct cas_source_stats cas;  /* store, remote and disk cache tiers */
	bool has_prefetch;
	struct blkd_prefetch_stats prefetch;
	uint64_t prefetch_hits;       /* chunks loaded for a read that a prefetch brought in */
};
void blkd_engine_get_stats(struct blkd_engine *e, struct blkd_engine_stats *st);

/*
 * The statistics formatted (stats.c, the one place): blkd_engine_print_stats writes the
 * engine's statistics now to f, a stream of the caller's (the CLI's stdout, a --stats-json
 * file, the control socket's reply), as one JSON object and a newline or as the human lines
 * (serve's summary); blkd_stats_cas_text appends the store/remote/plain/cache lines of
 * those to b (common/json_out.h; b->err on failure), for lazyblk export too.
 */
struct json_buf;
void blkd_stats_cas_text(const struct cas_source_stats *c, struct json_buf *b);
/* The same as members of a JSON object (export --json's "cas"), appended to b. */
void blkd_stats_cas_json(const struct cas_source_stats *c, struct json_buf *b);
void blkd_engine_print_stats(struct blkd_engine *e, FILE *f, bool json);

#endif
