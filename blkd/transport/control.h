/* SPDX-License-Identifier: MIT */
/*
 * The control socket of a running server: a unix socket answering one-line text requests,
 * one connection at a time, in its own thread.
 *
 *   snapshot DELTA_PATH   → "ok DELTA_PATH BLOCKS" (blocks recorded: dirty + zeroed);
 *                           "snapshot-disk DELTA_PATH" is the same request
 *   stats                 → the statistics as one JSON object on one line
 *   flush                 → "ok"
 *   trace stop            → "ok TRACE_PATH RECORDS": --trace-record ends, the trace is written
 *   anything else         → "error MESSAGE"
 *
 * DELTA_PATH must be absolute (the server's working directory is not the client's).
 * A request is at most BLKD_CONTROL_MAX_LINE bytes with its newline; a longer one is
 * answered with an error and the connection closed. A connection idle for
 * BLKD_CONTROL_IDLE_MS is closed. Nothing a client sends stops the server.
 *
 * A server with more requests (lazyblk run's VM: pause, resume, ...) passes an extension,
 * offered every request first: one parser, one set of rules for the lines.
 */
#ifndef LZ_BLKD_CONTROL_H
#define LZ_BLKD_CONTROL_H

#include "../disk/disk.h"

#define BLKD_CONTROL_MAX_LINE 4096u
#define BLKD_CONTROL_IDLE_MS 5000

struct blkd_control;

struct blkd_control_ext {
	/*
	 * One request (without its newline, NUL-free): answer it on fd with
	 * blkd_control_reply() and return true, or false to leave it to the base requests.
	 * Runs on the control socket's thread.
	 */
	bool (*request)(void *ctx, int fd, const char *line);
	void *ctx;
	const char *names;  /* every request, for the "unknown request" answer (NULL: the base's) */
	bool no_trace;      /* "trace stop" is refused (the VM's trace ends with the run) */
};

/* Answer one line on fd (the newline added; a client gone is ignored). */
void blkd_control_reply(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Listen on the unix socket PATH (mode 0600; a stale socket file left by a server that
 * is gone is replaced, a live one or another file is refused) and start answering for the
 * disk d: snapshots, statistics and flushes through it (a disk without snapshots answers
 * "error DELTA_PATH: this disk takes no snapshots"), the end of its trace recording
 * (disk_trace_finish: "trace stop" is an error for a disk that records none). d may be NULL
 * (no disk: those requests are errors); ext (NULL: none) adds requests. d and ext must
 * outlive the control socket. Prints one error line and returns -errno on failure.
 */
int blkd_control_start(const struct disk *d, const struct blkd_control_ext *ext,
		       const char *path, struct blkd_control **out);
/*
 * The same with lfd, a socket already listening at path that a process before this one
 * (lazyblk run's live upgrade, through exec) made: owned from now on.
 */
int blkd_control_adopt(const struct disk *d, const struct blkd_control_ext *ext,
		       const char *path, int lfd, struct blkd_control **out);
/* The listening socket (a live upgrade hands it over). */
int blkd_control_listen_fd(const struct blkd_control *c);
/* Finish the request being answered, stop, remove the socket file. NULL is a no-op. */
void blkd_control_stop(struct blkd_control *c);

#endif
