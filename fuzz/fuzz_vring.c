/* SPDX-License-Identifier: MIT */
/*
 * The virtqueue walker (blkd/virtio/vring.c) on a guest's memory (fuzz_guest.h): ring
 * setup, popping every available chain (direct and indirect descriptors, loops, lengths,
 * buffers outside the memory), touching each segment's first and last byte, returning it
 * with a length, the notification decisions with and without event idx, and the
 * in-flight region a restarted device recovers (its heads walked again).
 */
#include "fuzz_guest.h"

#define POPS_MAX 1024 /* chains popped per input */

static void touch(const struct vring_chain *c)
{
	volatile uint8_t sink = 0;

	if (c->bad)
		return;
	for (unsigned i = 0; i < c->nseg; i++) {
		const struct vring_seg *s = &c->seg[i];

		if (!s->len)
			continue;
		sink += s->p[0] + s->p[s->len - 1];
		if (s->wr)
			s->p[s->len - 1] = 0xa5;
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vring_chain c;
	struct vring_queue vq;
	struct guest g;
	uint16_t *heads = NULL;
	int n;

	if (!guest_from_input(&g, data, size))
		return 0;
	if (fuzz_result("vring_setup", vring_setup(&vq, &g.mem, g.num, g.desc, g.avail, g.used,
						   g.cfg.flags & GCFG_INDIRECT,
						   g.cfg.flags & GCFG_EVENT_IDX), NULL))
		return 0;
	n = guest_resume(&g, &vq);
	if (n > 0 && vring_inflight_heads(&vq, &heads) == n) {
		for (int i = 0; i < n; i++)
			if (vring_pop_head(&vq, heads[i], &c) == 1) {
				touch(&c);
				vring_push(&vq, c.head, (uint32_t)c.wr_len);
			}
	}
	free(heads);
	if (n >= 0) {
		vring_disable_notify(&vq);
		for (unsigned i = 0; i < POPS_MAX &&
				     fuzz_result("vring_pop", vring_pop(&vq, &c), NULL) == 1; i++) {
			touch(&c);
			vring_push(&vq, c.head, (uint32_t)(c.wr_len / 2));
		}
		vring_enable_notify(&vq);
		vring_need_notify(&vq);
		vring_pending(&vq);
	}
	guest_free(&g, &vq);
	return 0;
}
