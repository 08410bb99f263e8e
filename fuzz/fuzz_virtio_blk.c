/* SPDX-License-Identifier: MIT */
/*
 * virtio-blk requests (blkd/virtio/virtio_blk.c, as the built-in VMM and the vhost-user
 * export run them) on a guest's memory (fuzz_guest.h): features negotiated from the
 * input, the queue set up, in-flight requests resubmitted, then every available request
 * executed against a disk in memory (reads, writes, flushes, get-id, discard and
 * write-zeroes segments, unknown types) and completed, the config space read.
 */
#include "fuzz_disk.h"
#include "fuzz_guest.h"
#include "../blkd/virtio/virtio_blk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct disk disk;
	struct vblk_dev d;
	struct vring_queue vq;
	struct guest g;
	uint16_t *heads = NULL;
	uint8_t cfg[VBLK_CONFIG_SIZE + 8];
	bool notify;
	int n;

	if (!disk.ops)
		fuzz_disk(&disk);
	if (!guest_from_input(&g, data, size))
		return 0;
	if (vblk_dev_init(&d, &disk, 1, "fuzz"))
		abort();
	vblk_config_read(&d, g.cfg.inflight % 64, cfg, sizeof(cfg) - g.cfg.inflight % 64 % 8);
	if (vblk_dev_ack_features(&d, (d.features & (0xffffffffull << 32)) |
				      (d.features & g.cfg.features)))
		return 0;
	if (fuzz_result("vblk_ring_setup",
			vblk_ring_setup(&d, &vq, &g.mem, g.num, g.desc, g.avail, g.used), NULL))
		return 0;
	n = guest_resume(&g, &vq);
	if (n > 0 && vring_inflight_heads(&vq, &heads) == n)
		n = vblk_queue_resubmit(&d, &vq, heads, (unsigned)n, &notify);
	free(heads);
	if (n >= 0)
		fuzz_result("vblk_queue_process", vblk_queue_process(&d, &vq, &notify), NULL);
	guest_free(&g, &vq);
	return 0;
}
