/* SPDX-License-Identifier: MIT */
/*
 * Inside the NBD export: one client connection, from the handshake (nbd_handshake.c)
 * through the transmission phase (nbd_xmit.c), over socket helpers (nbd_io.c).
 * nbd.c listens and runs nbd_conn_run() in a thread per client; the unit test drives
 * nbd_conn_run() over a socketpair.
 */
#ifndef LZ_BLKD_NBD_CONN_H
#define LZ_BLKD_NBD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../../common/block.h"
#include "../disk/disk.h"
#include "nbd.h"
#include "../../common/test_hook.h"

#define NBD_MAX_PAYLOAD (32u << 20)         /* largest READ or WRITE */
#define NBD_MAX_OPTION (64u << 10)          /* larger option data: hard disconnect */
#define NBD_MAX_STRING 4096u                /* export names, context queries */
#define NBD_MAX_EXTENTS 8192u               /* descriptors in one block-status chunk */
/*
 * Structured reads: zero ranges at least NBD_READ_MIN_HOLE long go out as OFFSET_HOLE
 * chunks. A shorter zero range between data is sent as data: its bytes cost about what a
 * chunk costs the client to parse (a header, another pass of its reply loop), and a
 * disk written or trimmed block by block would otherwise cut one read into thousands of
 * chunks. At most NBD_READ_MAX_CHUNKS content chunks per reply (two iovecs each, well
 * under IOV_MAX): past that, the rest of the range is one data chunk.
 */
#define NBD_READ_MIN_HOLE (16u << 10)
#define NBD_READ_MAX_CHUNKS 256u

/* Requests handled at once on one connection, and the payload bytes they may hold. */
#define NBD_CONN_WORKERS 4u
#define NBD_CONN_MAX_INFLIGHT 64u
#define NBD_CONN_MAX_INFLIGHT_BYTES (64u << 20)

/* Metadata contexts: the disk's (disk.h); the wire id of context i is i + 1. */
enum nbd_ctx {
	NBD_CTX_ALLOCATION = DISK_CTX_ALLOCATION,
	NBD_CTX_DIRTY = DISK_CTX_DIRTY,
	NBD_CTX_COUNT = DISK_CTX_COUNT
};

static inline const char *nbd_ctx_name(enum nbd_ctx c)
{
	return c == NBD_CTX_ALLOCATION ? "base:allocation" : "lazyblk:dirty";
}

/*
 * The disk one NBD server offers under a name (what the NBD protocol calls an "export"; in
 * lazyblk "export" means `lazyblk export` alone); shared read-only by every connection.
 */
struct nbd_offer {
	const struct disk *d;
	const char *name;          /* "" (or NULL): any name asked is this disk */
	uint64_t size;             /* d->size */
	bool read_only;            /* d->read_only, or the server refuses writes */
};

/* The offer has context c (its disk's block status knows it). */
static inline bool nbd_ctx_offered(const struct nbd_offer *x, enum nbd_ctx c)
{
	return disk_has_status(x->d, (enum disk_ctx)c);
}

/*
 * What the server's watchdog (nbd.c) sees of one connection; every field but idle_s is
 * read and written atomically. since_ms (CLOCK_MONOTONIC): when the connection was
 * accepted, then when the last request arrived or the last reply was done. busy: requests
 * in flight. cut: the watchdog shut the connection (and said why; its thread says
 * nothing more).
 */
struct nbd_watch {
	uint64_t since_ms;
	unsigned busy;
	bool transmitting;         /* the handshake is over */
	bool cut;
	unsigned idle_s;           /* --idle-timeout (0: none): also a send's longest stall */
};

/* The state one connection negotiates. */
struct nbd_session {
	const struct nbd_offer *x;
	int fd;
	unsigned id;               /* connection number, for log lines */
	struct nbd_watch *w;       /* NULL: not watched (no deadlines) */
	bool no_zeroes;            /* client set NBD_FLAG_C_NO_ZEROES */
	bool structured;           /* NBD_OPT_STRUCTURED_REPLY acknowledged */
	bool ctx[NBD_CTX_COUNT];   /* contexts selected by the last SET_META_CONTEXT */
};

/*
 * Serve one client on fd: handshake, then requests until it disconnects. Never closes
 * fd (the caller owns it). w (may be NULL) is what the server's watchdog watches.
 * Returns 0 when the client left cleanly, -errno when the connection was dropped (a log
 * line said why).
 */
int nbd_conn_run(const struct nbd_offer *x, int fd, unsigned id, struct nbd_watch *w);
/* The watchdog cut this connection: its end needs no log line. */
static inline bool nbd_cut(const struct nbd_session *s)
{
	return s->w && __atomic_load_n(&s->w->cut, __ATOMIC_ACQUIRE);
}
/* A request arrived (busy: it is now in flight) or one was done (busy: -1). */
void nbd_watch_touch(struct nbd_session *s, int busy);
/* CLOCK_MONOTONIC in milliseconds: the watch's clock. */
uint64_t nbd_now_ms(void);

/* 0: enter transmission; 1: the client ended the negotiation; -errno: drop it. */
int nbd_handshake(struct nbd_session *s);
/* Requests until NBD_CMD_DISC (0) or a dropped connection (-errno). */
int nbd_transmit(struct nbd_session *s);
/* A disk's -errno to an NBD error value. */
TEST_HOOK
uint32_t nbd_errno(int err);

/*
 * Socket I/O, retrying short transfers and EINTR. nbd_recv: 0, -ENODATA when the peer
 * closed (or reset) the connection before the first byte, -ECONNRESET when it did so part
 * way. Sends never raise SIGPIPE.
 */
int nbd_recv(int fd, void *buf, size_t len);
int nbd_skip(int fd, uint64_t len);
int nbd_sendv(int fd, struct iovec *iov, int n);
int nbd_send(int fd, const void *buf, size_t len);

#endif
