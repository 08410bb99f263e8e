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

/* Return chain head to the driver with written bytes (release-publishes used->idx). */
void vring_push(struct vring_queue *vq, uint16_t head, uint32_t written);

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
