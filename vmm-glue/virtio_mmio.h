/* SPDX-License-Identifier: MIT */
/*
 * virtio-mmio transport (virtio 1.2 section 4.2, version 2 registers only) for a virtio-blk
 * device whose request logic is blkd/virtio/virtio_blk.[ch]. The guest's QueueNotify writes are
 * KVM ioeventfds (one per queue, datamatch on the queue index) read by one I/O thread per
 * queue; interrupts are a KVM irqfd on the device's GSI (InterruptStatus bit 0 for used
 * buffers, bit 1 for a configuration change). A vCPU exit for any other register comes in
 * through virtio_mmio_access(). A guest that breaks the rules (rings outside its memory,
 * malformed chains) gets DEVICE_NEEDS_RESET set and the device stops using its queues; the
 * VMM never crashes and never touches memory outside the guest's.
 */
#ifndef LZ_VMM_VIRTIO_MMIO_H
#define LZ_VMM_VIRTIO_MMIO_H

#include <stdbool.h>
#include <stdint.h>

#include "../blkd/virtio/gmem.h"
#include "../blkd/virtio/virtio_blk.h"

#define VIRTIO_MMIO_WINDOW 0x1000u

struct virtio_mmio;

struct virtio_mmio_opts {
	int vm_fd;                      /* KVM_IOEVENTFD, KVM_IRQFD */
	const struct gmem *mem;         /* the view of the guest's memory (borrowed; ram.h) */
	uint64_t base;                  /* guest-physical base of the register window */
	uint32_t gsi;                   /* the device's interrupt line */
	const struct disk *disk;        /* the disk (borrowed; see blkd/disk/disk.h) */
	unsigned num_queues;            /* >= 1: VIRTIO_BLK_F_MQ when > 1 */
	const char *serial;             /* VIRTIO_BLK_T_GET_ID answer (<= 20 bytes), or NULL */
};

/* -errno; prints nothing. */
int virtio_mmio_blk_new(const struct virtio_mmio_opts *o, struct virtio_mmio **out);
/*
 * Stops the I/O threads (requests in progress complete first) and frees d, before the VM
 * is destroyed (the eventfds stay registered with it until then).
 */
void virtio_mmio_free(struct virtio_mmio *d);
/*
 * Quiesce the queues: returns once no request is being processed (the batch in progress
 * completed) and none will be until virtio_mmio_resume(), which serves what the driver made
 * available meanwhile. Kicks that come in between are not lost. The vCPUs are the caller's
 * (register accesses are not blocked).
 */
void virtio_mmio_pause(struct virtio_mmio *d);
void virtio_mmio_resume(struct virtio_mmio *d);
/*
 * A vCPU's access at offset off (< VIRTIO_MMIO_WINDOW) of the window, len 1, 2, 4 or 8;
 * reads fill data. Thread-safe (vCPUs and I/O threads).
 */
void virtio_mmio_access(struct virtio_mmio *d, uint64_t off, uint8_t *data, uint32_t len,
			bool is_write);

/*
 * Device state for VM snapshots (vm_state.c): the registers, and per queue its ring's
 * addresses and the device's indices. At most VIRTIO_MMIO_STATE_QUEUES queues.
 */
#define VIRTIO_MMIO_STATE_QUEUES 64

struct virtio_mmio_qstate {
	uint32_t num, ready;
	uint64_t desc, driver, device;
	uint16_t last_avail_idx, used_idx, signalled_used;
	uint8_t signalled_used_valid, reserved;
};

struct virtio_mmio_state {
	uint32_t status, isr, dev_feat_sel, drv_feat_sel, queue_sel, nq;
	uint64_t drv_features, acked;
	struct virtio_mmio_qstate q[VIRTIO_MMIO_STATE_QUEUES];
};

/*
 * The state of a paused device (virtio_mmio_pause). -EBUSY: a request is in flight (popped, not used: cannot
 * happen between batches); -E2BIG: more queues than a state holds.
 */
int virtio_mmio_state_save(struct virtio_mmio *d, struct virtio_mmio_state *st);
/*
 * Put a saved state back into a new device (same disk, same queue count) before the vCPUs
 * start: features acknowledged again, rings set up again (inside guest memory), indices
 * restored, running queues started and kicked (buffers the driver made available before
 * the snapshot are served). -EINVAL: a state this device cannot have (queue count, queue
 * size, features it does not offer, rings outside guest memory).
 */
int virtio_mmio_state_load(struct virtio_mmio *d, const struct virtio_mmio_state *st);

#endif
