/* SPDX-License-Identifier: MIT */
/*
 * Internals of the vhost-user-blk export, shared by its files:
 *   vhost_user.c        the device, the connection loop, listening;
 *   vhost_user_msg.c    receiving, validating and answering messages;
 *   vhost_user_mem.c    SET_MEM_TABLE: mapping the master's regions;
 *   vhost_user_queue.c  per-queue state and the I/O threads;
 *   vhost_user_inflight.c  GET/SET_INFLIGHT_FD: the region tracking chains in flight;
 *   vhost_user_tables.c the queues' lookups in those two tables (address translation, a
 *                       queue's in-flight records), the seal check of their files.
 *
 * Threads: the connection thread handles every message; each running queue has an I/O
 * thread, its runner's (virtio/vq_runner.h). q->run.lock is held by the I/O thread while it
 * processes the ring, and by the connection thread when it changes what the I/O thread
 * uses while running (the call and error eventfds). Everything else a queue thread uses
 * (memory, ring, kick fd) only changes while it is stopped (vu_queue_stop() joins it).
 */
#ifndef LZ_BLKD_VHOST_USER_INT_H
#define LZ_BLKD_VHOST_USER_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/why.h"
#include "../virtio/vq_runner.h"
#include "vhost_user.h"
#include "vhost_user_proto.h"

#define VU_POLL_MS 200       /* how often *stop is looked at */
#define VU_MSG_TIMEOUT_S 5   /* for the rest of a message once its first byte came */
#define VU_REPLY_TIMEOUT_MS 5000   /* for the master to take a reply off the socket */

struct vu_queue {
	struct vhost_user_dev *d;
	unsigned idx;
	/* set by messages */
	unsigned num;                /* SET_VRING_NUM (0: not yet) */
	struct vu_vring_addr addr;   /* SET_VRING_ADDR (master user addresses) */
	bool has_addr;
	uint16_t base;               /* next avail index to pop when (re)started */
	int kick_fd, call_fd, err_fd;
	bool kicked;                 /* SET_VRING_KICK received: the ring is started */
	bool enabled;                /* SET_VRING_ENABLE */
	bool broken;                 /* the guest broke the ring (atomic): not served until set up again */
	unsigned resubmit;           /* chains in flight in the region when started: resubmit them */
	/* the ring, its lock and, while running (run.has_thread), its I/O thread */
	struct vq_runner run;
	int stop_fd;
};

struct vu_map {
	void *base;                  /* mmap()ed */
	size_t len;
	uint64_t uva;                /* the region's address in the master */
};

struct vu_inflight_map {
	void *base;                  /* mmap()ed; NULL: no in-flight tracking */
	size_t len;
	unsigned nq, qsize;          /* queues in it, entries per queue */
};

struct vhost_user_dev {
	struct vblk_dev blk;
	uint64_t features;           /* SET_FEATURES (with VU_F_PROTOCOL_FEATURES) */
	uint64_t pfeatures;          /* SET_PROTOCOL_FEATURES */
	struct gmem mem;             /* keyed by guest-physical address */
	struct vu_map map[GMEM_MAX_REGIONS];
	struct vu_inflight_map ifl;  /* GET/SET_INFLIGHT_FD */
	volatile sig_atomic_t *stop; /* the connection's stop flag (NULL: none) */
	unsigned nq;
	struct vu_queue q[];
};

/* vhost_user_mem.c */
/* -errno refused (one line logged). */
int vu_mem_set(struct vhost_user_dev *d, const struct vu_mem_table *t, int *fds);
void vu_mem_unmap(struct vhost_user_dev *d);

/* vhost_user_inflight.c: -errno refused (logged). */
/* A new zeroed region for p's queues: p's mmap_size/offset and its fd are the reply. */
int vu_inflight_get(struct vhost_user_dev *d, struct vu_inflight *p, int *fd_out);
/* Map the master's region (fd stays the caller's). */
int vu_inflight_set(struct vhost_user_dev *d, const struct vu_inflight *p, int fd);
void vu_inflight_unmap(struct vhost_user_dev *d);

/* vhost_user_tables.c */
/* Guest-physical address of [uva, uva + len) in one region: 0, or -EFAULT. */
int vu_uva_to_gpa(const struct vhost_user_dev *d, uint64_t uva, uint64_t len, uint64_t *gpa);
/* Queue idx's part of the in-flight region for a ring of num entries, or NULL (not tracked). */
struct vring_inflight *vu_inflight_region(struct vhost_user_dev *d, unsigned idx, unsigned num);
/* Whether fd's file is sealed against shrinking (F_SEAL_SHRINK): safe to map for good. */
bool vu_fd_no_shrink(int fd);

/* vhost_user_queue.c */
void vu_queue_init(struct vu_queue *q, struct vhost_user_dev *d, unsigned idx);
void vu_queue_destroy(struct vu_queue *q);
/* Start or stop q's I/O thread as its state says (started, enabled, mapped). -errno. */
int vu_queue_update(struct vu_queue *q);
void vu_queue_stop(struct vu_queue *q);
/* Forget everything about q (a reset, a disconnect): stopped, fds closed. */
void vu_queue_reset(struct vu_queue *q);
/* Replace one of q's eventfds (fd -1: none); the old one is closed. */
void vu_queue_set_fd(struct vu_queue *q, int *slot, int fd);

/* vhost_user_msg.c */
/*
 * Read one message (header, payload, fds) from fd. Returns 1 with a message, 0 at
 * end of stream between messages, -EPROTO for a malformed one (why says what), or
 * -errno. The fds received are in fds[0..*nfds); the caller closes those it does not keep.
 */
int vu_msg_recv(int fd, struct vu_msg *m, int *fds, unsigned *nfds, char *why, size_t why_len);
/*
 * Handle one message; replies on fd (bounded: VU_REPLY_TIMEOUT_MS, d->stop). -EPROTO: drop
 * the connection (logged, unless the master is gone); -ECANCELED: the server is stopping.
 */
int vu_msg_handle(struct vhost_user_dev *d, int fd, struct vu_msg *m, int *fds,
		  unsigned nfds);
void vu_dev_reset(struct vhost_user_dev *d);

static inline bool stopped(volatile sig_atomic_t *stop)
{
	return stop && __atomic_load_n(stop, __ATOMIC_RELAXED);
}

#endif
