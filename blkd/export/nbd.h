/* SPDX-License-Identifier: MIT */
/*
 * The NBD export of a disk (blkd/disk/disk.h: the lazy image or a raw file), newstyle
 * fixed handshake: OPT_GO, OPT_INFO, OPT_LIST, OPT_STRUCTURED_REPLY,
 * OPT_LIST/SET_META_CONTEXT ("base:allocation", "lazyblk:dirty": the contexts the disk's
 * block status knows); commands READ, WRITE (FUA), FLUSH, TRIM, WRITE_ZEROES,
 * BLOCK_STATUS, DISC (TRIM and WRITE_ZEROES when the disk can); many connections at once
 * (multi-conn with consistent flush, when the disk says so); read-only mode.
 */
#ifndef LZ_BLKD_NBD_H
#define LZ_BLKD_NBD_H

#include <signal.h>
#include <stdbool.h>

#include "../disk/disk.h"

struct nbd_server_opts {
	const char *unix_path;     /* listen on a unix socket, or */
	const char *tcp_host;      /* on host:port (default host 127.0.0.1) */
	const char *tcp_port;
	const char *export_name;   /* "" accepts any name */
	/* called once, when the socket accepts connections (a readiness signal); may be NULL */
	void (*on_listen)(void *arg);
	void *on_listen_arg;
	/* if set: the TCP port listened on (tcp_port "0": the one the kernel picked), stored
	 * before on_listen is called */
	unsigned short *tcp_bound_port;
	bool read_only;            /* refuse writes even when the disk takes them */
	unsigned max_conns;        /* 0: 16 */
};

/*
 * Serve until *stop becomes non-zero (a signal handler sets it). Each client gets a
 * thread; a client that misbehaves is disconnected with a log line, never crashes the
 * server. Prints one error line and returns -errno if it cannot listen (-EINVAL: the disk
 * fails disk_check()). d must stay valid until it returns.
 */
int nbd_serve(const struct disk *d, const struct nbd_server_opts *o,
	      volatile sig_atomic_t *stop);

#endif
