/* SPDX-License-Identifier: MIT */
/*
 * The control socket of a running server: a unix socket answering one-line text requests,
 * one connection at a time, in its own thread.
 *
 *   snapshot DELTA_PATH   → "ok DELTA_PATH BLOCKS" (blocks recorded: dirty + zeroed)
 *   stats                 → the statistics as one JSON object on one line
 *   flush                 → "ok"
 *   trace stop            → "ok TRACE_PATH RECORDS": --trace-record ends, the trace is written
 *   anything else         → "error MESSAGE"
 *
 * DELTA_PATH must be absolute (the server's working directory is not the client's).
 * A request is at most BLKD_CONTROL_MAX_LINE bytes with its newline; a longer one is
 * answered with an error and the connection closed. A connection idle for
 * BLKD_CONTROL_IDLE_MS is closed. Nothing a client sends stops the server.
 */
#ifndef LZ_BLKD_CONTROL_H
#define LZ_BLKD_CONTROL_H

#include "../disk/disk.h"
#include "../engine/engine.h"

#define BLKD_CONTROL_MAX_LINE 4096u
#define BLKD_CONTROL_IDLE_MS 5000

struct blkd_control;

/*
 * Listen on the unix socket PATH (mode 0600; a stale socket file left by a server that
 * is gone is replaced, a live one or another file is refused) and start answering for the
 * disk d: snapshots, statistics and flushes through it (a disk without snapshots answers
 * "error DELTA_PATH: this disk takes no snapshots"), traces through e, the engine behind
 * it (NULL: not the lazy image; "trace stop" is an error). d and e must outlive the
 * control socket. Prints one error line and returns -errno on failure.
 */
int blkd_control_start(const struct disk *d, struct blkd_engine *e, const char *path,
		       struct blkd_control **out);
/* Finish the request being answered, stop, remove the socket file. NULL is a no-op. */
void blkd_control_stop(struct blkd_control *c);

#endif
