/* SPDX-License-Identifier: MIT */
/*
 * The NBD export (newstyle, fixed handshake): OPT_GO, OPT_INFO, OPT_LIST,
 * OPT_STRUCTURED_REPLY, OPT_LIST/SET_META_CONTEXT ("base:allocation", "lazyblk:dirty");
 * commands READ, WRITE (FUA), FLUSH, TRIM, WRITE_ZEROES, BLOCK_STATUS, DISC; many
 * connections at once (multi-conn with consistent flush); read-only mode.
 */
#ifndef LZ_BLKD_NBD_H
#define LZ_BLKD_NBD_H

#include <signal.h>
#include <stdbool.h>

#include "../engine/engine.h"

struct nbd_server_opts {
	const char *unix_path;     /* listen on a unix socket, or */
	const char *tcp_host;      /* on host:port (default host 127.0.0.1) */
	const char *tcp_port;
	const char *export_name;   /* "" accepts any name */
	/* called once, when the socket accepts connections (a readiness signal); may be NULL */
	void (*on_listen)(void *arg);
	void *on_listen_arg;
	bool read_only;
	unsigned max_conns;        /* 0: 16 */
};

/*
 * Serve until *stop becomes non-zero (a signal handler sets it). Each client gets a
 * thread; a client that misbehaves is disconnected with a log line, never crashes the
 * server. Prints one error line and returns -errno if it cannot listen.
 */
int nbd_serve(struct blkd_engine *e, const struct nbd_server_opts *o,
	      volatile sig_atomic_t *stop);

#endif
