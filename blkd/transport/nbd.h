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

/*
 * Connection limits (docs/security.md, "Limits"): the whole handshake, from the accept to
 * the option that starts the transmission phase, within handshake_s seconds (default
 * NBD_HANDSHAKE_DEADLINE_S); at most max_conns clients at once (default NBD_DEFAULT_CONNS,
 * at most NBD_MAX_CONNS; one more is accepted and closed at once); a client idle for
 * idle_s seconds disconnected (default 0: never).
 */
#define NBD_HANDSHAKE_DEADLINE_S 10u
#define NBD_MAX_HANDSHAKE_S 3600u
#define NBD_DEFAULT_CONNS 16u
#define NBD_MAX_CONNS 1024u
#define NBD_MAX_IDLE_S 86400u

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
	unsigned max_conns;        /* 0: NBD_DEFAULT_CONNS */
	unsigned handshake_s;      /* 0: NBD_HANDSHAKE_DEADLINE_S */
	/*
	 * 0: none. Else a client in the transmission phase with no request in flight and none
	 * received for idle_s seconds is disconnected (a write payload counts while 64 KiB
	 * pieces of it arrive), and so is one that takes none of a reply's bytes for that long.
	 */
	unsigned idle_s;
};

/*
 * Serve until *stop becomes non-zero (a signal handler sets it; the server stops within
 * a few seconds whatever its clients do). Each client gets a thread; a client that
 * misbehaves or overstays a limit is disconnected with a log line, never crashes the
 * server. Prints one error line and returns -errno if it cannot listen (-EINVAL: the disk
 * fails disk_check()). d must stay valid until it returns.
 */
int nbd_serve(const struct disk *d, const struct nbd_server_opts *o,
	      volatile sig_atomic_t *stop);

#endif
