/* SPDX-License-Identifier: MIT */
/*
 * The virtio-blk device's request logic, shared by every virtio transport (the built-in
 * VMM's virtio-mmio, and the vhost-user-blk export): features, the config space, split
 * virtqueues (indirect descriptors, event idx) read from guest memory with every address
 * and length checked, and requests (IN, OUT, FLUSH, GET_ID, DISCARD, WRITE_ZEROES) executed
 * on a disk (blkd/disk/disk.h: the lazy image or a raw file). The transport only moves
 * bytes of its registers and wakes queues.
 */
#ifndef LZ_BLKD_VIRTIO_BLK_H
#define LZ_BLKD_VIRTIO_BLK_H

#include <stdbool.h>
#include <stdint.h>

#include "../../common/block.h"
#include "../disk/disk.h"
#include "gmem.h"
#include "vring.h"

/*
 * The device, shared by the transports. A transport owns one struct vblk_dev per disk and
 * one struct vring_queue per virtqueue:
 *   vblk_dev_init()            offered features (d->features) and the config space;
 *   vblk_config_read()         the guest's config-space reads (writes are ignored);
 *   vblk_dev_ack_features()    at FEATURES_OK (refused: features not offered, no VERSION_1);
 *   vring_setup()              per queue, with the negotiated VIRTQ_F_INDIRECT_DESC and
 *                              VIRTQ_F_EVENT_IDX bits (vblk_ring_setup() does that);
 *   vblk_queue_process()       on every kick: pops, executes and completes every available
 *                              request; *notify says whether to interrupt the driver;
 *                              -EPROTO means the queue is broken (DEVICE_NEEDS_RESET).
 * Requests on different queues may run concurrently (a disk is thread-safe); one queue is
 * processed by one thread at a time. No allocation per request: the data moves directly
 * between the disk and guest memory. Offered: DISCARD and WRITE_ZEROES when the disk can
 * (and is writable), RO when it is read-only; FLUSH always (a no-op on a disk with nothing
 * to flush).
 *
 * Disk geometry offered: 512-byte logical sectors (blk_size 512) with 4096-byte physical
 * blocks (VIRTIO_BLK_F_TOPOLOGY: physical_block_exp 3, min_io_size 8), matching the
 * engine's 4 KiB blocks without forcing 4 KiB logical sectors on guests.
 */
#define VBLK_SEG_MAX 254u            /* data segments per request (queue size 256 - 2) */
#define VBLK_DISCARD_SEG_MAX 32u
#define VBLK_MAX_DISCARD_SECTORS (1u << 22)  /* 2 GiB per segment */
#define VBLK_CONFIG_SIZE 60u         /* struct virtio_blk_config up to write_zeroes_may_unmap */
#define VBLK_ID_BYTES 20u

struct vblk_stats {
	uint64_t requests, reads, writes, flushes, discards, write_zeroes, get_ids;
	uint64_t read_bytes, write_bytes;
	uint64_t ioerr, unsupp;      /* requests completed with S_IOERR / S_UNSUPP */
	uint64_t bad_chains;         /* buffers outside guest memory and similar */
};

struct vblk_dev {
	const struct disk *disk;           /* borrowed */
	uint64_t features;                 /* offered */
	uint64_t acked;                    /* negotiated (0 until FEATURES_OK) */
	unsigned num_queues;
	uint8_t config[VBLK_CONFIG_SIZE];  /* struct virtio_blk_config, little-endian */
	char serial[VBLK_ID_BYTES];        /* zero-padded */
	struct vblk_stats st;              /* updated atomically; vblk_get_stats() */
};

/* -EINVAL for a bad disk (disk_check()) or num_queues 0 / > 256. */
int vblk_dev_init(struct vblk_dev *d, const struct disk *disk, unsigned num_queues,
		  const char *serial);
/* Record the driver's features: -EINVAL when not a subset of d->features or no VERSION_1. */
int vblk_dev_ack_features(struct vblk_dev *d, uint64_t driver);
/* Config space bytes [off, off+len) (any width; zeros past the end). */
void vblk_config_read(const struct vblk_dev *d, uint32_t off, void *buf, uint32_t len);
/* vring_setup() with the negotiated ring features. -EINVAL as vring_setup(). */
int vblk_ring_setup(const struct vblk_dev *d, struct vring_queue *vq, const struct gmem *mem,
		    unsigned num, uint64_t desc, uint64_t avail, uint64_t used);
/*
 * Steps of one drain at most: requests completed plus passes over the ring. A guest may lay
 * its available ring under the used ring or under a read's buffer, so that the device's own
 * writes (the used index, the notification flag, the data) make requests appear, or the
 * ring look non-empty, as fast as it drains it: unbounded, such a drain would never end
 * (and its runner would hold the queue against a stop). The runner drains again, after
 * looking for a stop, while the ring has requests (vq_runner.c).
 */
#define VBLK_DRAIN_MAX 1024u
/*
 * Drain vq: every available request is executed and completed, within VBLK_DRAIN_MAX steps
 * (then more may be available: vring_pending(), drain again); kicks are re-enabled (with
 * event idx: avail_event) before returning. Returns the number of requests completed, or
 * -EPROTO when the queue is broken (a malformed chain, a request without a status byte).
 */
int vblk_queue_process(struct vblk_dev *d, struct vring_queue *vq, bool *notify);
/*
 * Execute and complete again the chains at heads[0..n) (in flight when an earlier device
 * instance stopped: vring_inflight_heads()), in that order, before vblk_queue_process().
 * Returns the number completed, or -EPROTO when a chain is malformed (the queue is broken).
 */
int vblk_queue_resubmit(struct vblk_dev *d, struct vring_queue *vq, const uint16_t *heads,
			unsigned n, bool *notify);
void vblk_get_stats(const struct vblk_dev *d, struct vblk_stats *st);

#endif
