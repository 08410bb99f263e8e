/* SPDX-License-Identifier: MIT */
/*
 * For the virtqueue targets: the input as a guest. Its first GUEST_HDR bytes configure a
 * split ring (struct guest_cfg: queue size, features, where the three areas are, the ring
 * indices a resumed device starts from, an in-flight region); the rest is the guest's
 * memory, GUEST_MEM bytes at guest-physical GUEST_GPA (zero past the input), so
 * descriptors, indirect tables, requests and buffers are all the fuzzer's.
 */
#ifndef LZ_FUZZ_GUEST_H
#define LZ_FUZZ_GUEST_H

#include "fuzz.h"
#include "../blkd/virtio/gmem.h"
#include "../blkd/virtio/vring.h"

#define GUEST_MEM (64u << 10)
#define GUEST_GPA 0x10000u

struct guest_cfg {
	uint8_t num_log2;    /* queue size 1 << (num_log2 % 9): 1 .. 256 */
	uint8_t flags;       /* GCFG_* */
	uint16_t desc, avail, used;   /* offsets into the memory (masked to alignment) */
	uint16_t last_avail, used_idx;   /* the device's indices (GCFG_RESUME) */
	uint16_t inflight;   /* offset of the in-flight region's bytes in the memory */
	uint32_t features;   /* virtio-blk: the driver's features (low 32 bits) */
};
#define GCFG_INDIRECT 1u
#define GCFG_EVENT_IDX 2u
#define GCFG_RESUME 4u    /* start from last_avail / used_idx instead of 0 */
#define GCFG_INFLIGHT 8u  /* attach an in-flight region copied from the memory */
#define GUEST_HDR sizeof(struct guest_cfg)

struct guest {
	struct guest_cfg cfg;
	struct gmem mem;
	uint8_t *ram;         /* GUEST_MEM bytes */
	struct vring_inflight *inflight;
	unsigned num;
	uint64_t desc, avail, used;   /* guest-physical */
};

/* Fill g from the input; false when it is too short to say anything. */
static inline bool guest_from_input(struct guest *g, const uint8_t *data, size_t size)
{
	static uint8_t ram[GUEST_MEM];
	size_t n;

	if (size < GUEST_HDR)
		return false;
	memset(g, 0, sizeof(*g));
	memcpy(&g->cfg, data, GUEST_HDR);
	n = size - GUEST_HDR < GUEST_MEM ? size - GUEST_HDR : GUEST_MEM;
	memset(ram, 0, sizeof(ram));
	memcpy(ram, data + GUEST_HDR, n);
	g->ram = ram;
	g->mem.n = 1;
	g->mem.r[0] = (struct gmem_region){ .gpa = GUEST_GPA, .size = GUEST_MEM, .host = ram };
	g->num = 1u << (g->cfg.num_log2 % 9);
	/* areas may lie past the memory (vring_setup refuses them): offsets are 16-bit */
	g->desc = GUEST_GPA + (g->cfg.desc & ~15u);
	g->avail = GUEST_GPA + (g->cfg.avail & ~1u);
	g->used = GUEST_GPA + (g->cfg.used & ~3u);
	return true;
}

/* The ring state of a resumed device, and its in-flight region; after vring_setup. */
static inline int guest_resume(struct guest *g, struct vring_queue *vq)
{
	uint64_t isz = vring_inflight_size(g->num);

	if (g->cfg.flags & GCFG_RESUME) {
		vq->last_avail_idx = g->cfg.last_avail;
		vq->used_idx = g->cfg.used_idx;
	}
	if (!(g->cfg.flags & GCFG_INFLIGHT))
		return 0;
	g->inflight = aligned_alloc(VRING_INFLIGHT_ALIGN, isz);
	if (!g->inflight)
		abort();
	memset(g->inflight, 0, isz);
	/* a 16-bit offset is inside the 64 KiB memory */
	memcpy(g->inflight, g->ram + g->cfg.inflight,
	       GUEST_MEM - g->cfg.inflight < isz ? GUEST_MEM - g->cfg.inflight : isz);
	return vring_inflight_attach(vq, g->inflight);
}

static inline void guest_free(struct guest *g, struct vring_queue *vq)
{
	if (g->inflight)
		vring_inflight_drop(vq);
	free(g->inflight);
	g->inflight = NULL;
}

#endif
