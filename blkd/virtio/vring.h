/* SPDX-License-Identifier: MIT */
/*
 * The device side of a split virtqueue (virtio 1.2 section 2.7) in guest memory.
 *
 * The driver (the guest, untrusted) owns the descriptor table and the available ring; the
 * device owns the used ring. vring_pop() walks the next available descriptor chain and
 * returns it as a bounded list of host segments, every address and length translated
 * through gmem_ptr(); nothing in guest memory is trusted or read twice.
 *
 * Errors have two levels:
 *  - the queue is broken (a loop, an index out of range, a malformed indirect table, a
 *    writable descriptor before a readable one, the avail index moving by more than the
 *    ring size): vring_pop() returns -EPROTO and the transport sets DEVICE_NEEDS_RESET;
 *  - the request is bad but the chain is well-formed (a buffer outside guest memory, more
 *    than 4 GiB in one direction): the chain comes back with bad set and NULL host
 *    pointers for the segments that could not be translated; the device completes it with
 *    an error status if it can still reach the status byte.
 *
 * Names avoid <linux/virtio_ring.h> (struct vring, vring_init, vring_need_event), which
 * the vhost-user export pulls in through <linux/vhost.h>.
 *
 * One thread at a time per queue; the guest runs concurrently on other CPUs: the index
 * fields are read with acquire and written with release semantics, the notification
 * checks use full fences.
 */
#ifndef LZ_BLKD_VRING_H
#define LZ_BLKD_VRING_H

#include <stdbool.h>
#include <stdint.h>

#include "gmem.h"

#define VRING_MAX_SIZE 32768u   /* largest queue size (split rings) */
#define VRING_CHAIN_MAX 1024u   /* segments per chain (as QEMU's VIRTQUEUE_MAX_SIZE) */

/* Feature bits (virtio 1.2 section 6) */
#define VIRTQ_F_INDIRECT_DESC 28
#define VIRTQ_F_EVENT_IDX 29

/* Descriptor and ring flags (spec names; <linux/virtio_ring.h> spells them VRING_*) */
#define VIRTQ_DESC_F_NEXT 1u
#define VIRTQ_DESC_F_WRITE 2u
#define VIRTQ_DESC_F_INDIRECT 4u
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1u
#define VIRTQ_USED_F_NO_NOTIFY 1u

/* Guest layout, little-endian */
struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct virtq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];   /* [num], then used_event */
};

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct virtq_used {
	uint16_t flags;
	uint16_t idx;
	struct virtq_used_elem ring[];   /* [num], then avail_event */
};

/*
 * In-flight tracking for a split ring (vhost-user's INFLIGHT_SHMFD, QEMU
 * docs/interop/vhost-user.rst "Inflight I/O tracking"): a region in memory shared with the
 * vhost-user master that outlives this process, so that a restarted backend finds the
 * chains that were popped but not completed. Per queue, a header and one entry per
 * descriptor head; vring_inflight_size() bytes (the header and entries rounded up to 64,
 * as libvhost-user and DPDK lay it out, so that any of them can take over the region).
 */
struct vring_inflight_desc {
	uint8_t inflight;          /* popped and not yet returned (head descriptors only) */
	uint8_t padding[5];
	uint16_t next;             /* the last batch of used heads, a list */
	uint64_t counter;          /* pop order */
};

struct vring_inflight {
	uint64_t features;         /* 0 */
	uint16_t version;          /* VRING_INFLIGHT_VERSION; 0: a fresh region */
	uint16_t desc_num;         /* the queue size */
	uint16_t last_batch_head;  /* the list of the last batch pushed */
	uint16_t used_idx;         /* used->idx once that batch is no longer in flight */
	struct vring_inflight_desc desc[];
};

_Static_assert(sizeof(struct vring_inflight_desc) == 16, "inflight entry");
_Static_assert(sizeof(struct vring_inflight) == 16, "inflight header");

#define VRING_INFLIGHT_VERSION 1u
#define VRING_INFLIGHT_ALIGN 64u

static inline uint64_t vring_inflight_size(unsigned num)
{
	uint64_t n = sizeof(struct vring_inflight) + num * (uint64_t)sizeof(struct vring_inflight_desc);

	return (n + VRING_INFLIGHT_ALIGN - 1) & ~(uint64_t)(VRING_INFLIGHT_ALIGN - 1);
}

/* One buffer of a chain: host memory inside the guest's, or NULL when bad. */
struct vring_seg {
	uint8_t *p;
	uint32_t len;
	bool wr;           /* device-writable */
};

/* A popped chain: readable segments first, then writable ones. */
struct vring_chain {
	uint16_t head;     /* for vring_push() */
	bool bad;          /* a buffer outside guest memory, or > 4 GiB in one direction */
	unsigned nseg, nrd;   /* segments; the first nrd are readable */
	uint64_t rd_len, wr_len;
	struct vring_seg seg[VRING_CHAIN_MAX];
};

struct vring_queue {
	/* configuration (vring_setup) */
	const struct gmem *mem;
	unsigned num;                /* power of 2, <= VRING_MAX_SIZE */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	bool indirect, event_idx;    /* negotiated VIRTIO_F_RING_INDIRECT_DESC / EVENT_IDX */
	/*
	 * Device state. 0 after vring_setup(); a vhost-user backend resuming a ring sets them
	 * (VHOST_USER_SET_VRING_BASE; used_idx from the used ring) before the first pop.
	 */
	uint16_t last_avail_idx;     /* next avail ring entry to pop */
	uint16_t used_idx;           /* next used ring entry to fill */
	uint16_t signalled_used;     /* used_idx at the last notification decision */
	bool signalled_used_valid;
	/* host views of the rings (checked once by vring_setup) */
	struct virtq_desc *desc;
	struct virtq_avail *avail;
	struct virtq_used *used;
	/* in-flight tracking (NULL: none; vring_inflight_attach()) */
	struct vring_inflight *inflight;
	uint64_t inflight_counter;   /* the next pop's counter */
};

/*
 * Check and map a ring: num a power of 2 in 1..VRING_MAX_SIZE, the three areas aligned
 * (16, 2, 4) and wholly inside guest memory (event fields included). -EINVAL otherwise.
 */
int vring_setup(struct vring_queue *vq, const struct gmem *mem, unsigned num, uint64_t desc,
		uint64_t avail, uint64_t used, bool indirect, bool event_idx);

/*
 * Next available chain into *c: 1, or 0 when the ring is empty, or -EPROTO when the queue
 * is broken (see above; last_avail_idx is not advanced then).
 */
int vring_pop(struct vring_queue *vq, struct vring_chain *c);

/*
 * Walk the chain at head again without touching the available ring: a chain popped by an
 * earlier instance of the device and still in flight (resubmitted). 1, or -EPROTO.
 */
int vring_pop_head(struct vring_queue *vq, uint16_t head, struct vring_chain *c);

/*
 * Return chain head to the driver with written bytes (release-publishes used->idx). With
 * in-flight tracking, vring_pop() marks a chain in flight before it is returned, and
 * vring_push() records the head as the last batch, publishes used->idx, then clears it.
 */
void vring_push(struct vring_queue *vq, uint16_t head, uint32_t written);

/*
 * Track vq's chains in region r (vring_inflight_size(vq->num) bytes, shared), vq set up
 * with used_idx at used->idx. A fresh region (version 0) is initialised: 0. One left by a
 * previous device instance is recovered as the spec says (a last batch whose used->idx was
 * published is no longer in flight) and the number of chains still in flight is returned:
 * last_avail_idx is then used_idx plus that number (chains are popped in ring order), and
 * vring_inflight_heads() lists them for resubmission. -EINVAL: r does not describe a queue
 * of this size (not attached).
 */
int vring_inflight_attach(struct vring_queue *vq, struct vring_inflight *r);

/* Forget every chain in flight (a broken queue: nothing is to be resubmitted). */
void vring_inflight_drop(struct vring_queue *vq);

/*
 * The heads in flight, in the order they were popped, in *heads (malloc()ed, the caller
 * frees it; NULL when none): how many, or -ENOMEM.
 */
int vring_inflight_heads(const struct vring_queue *vq, uint16_t **heads);

/* Whether the driver has made buffers available that were not popped yet. */
bool vring_pending(struct vring_queue *vq);

/*
 * Kick suppression around a drain: vring_disable_notify() before popping (sets
 * VIRTQ_USED_F_NO_NOTIFY without event idx; nothing with it), vring_enable_notify() when
 * the ring looks empty (clears the flag, or publishes avail_event = last_avail_idx), with
 * a full fence; it returns true when buffers arrived meanwhile: pop again.
 */
void vring_disable_notify(struct vring_queue *vq);
bool vring_enable_notify(struct vring_queue *vq);

/*
 * After pushing: whether the driver wants an interrupt for the entries used since the
 * last call (event idx: vring_event_needed() on used_event; else unless
 * VIRTQ_AVAIL_F_NO_INTERRUPT). False when nothing was pushed since.
 */
bool vring_need_notify(struct vring_queue *vq);

/*
 * virtio's vring_need_event(): is event_idx in [old, new) mod 2^16, i.e. did the device
 * just publish the entry the driver asked to hear about?
 */
static inline bool vring_event_needed(uint16_t event_idx, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event_idx - 1) < (uint16_t)(new_idx - old);
}

#endif
