/* SPDX-License-Identifier: MIT */
/*
 * The virtio device model's view of a guest's memory: up to GMEM_MAX_REGIONS regions, each
 * a range of guest-physical addresses mapped at a host address. Rings and buffers live in
 * guest memory, and every access to it goes through gmem_ptr(), which refuses any range
 * that is not wholly inside one region: a guest address never turns into a host pointer
 * outside the guest's memory.
 *
 * A view owns nothing. Whoever owns the memory builds the view for the device: the
 * built-in VMM from its RAM and KVM slots (vmm-glue/ram.h, vm_ram_view()), the vhost-user
 * export from the regions its master passes (transport/vhost_user_mem.c, which maps them).
 */
#ifndef LZ_BLKD_GMEM_H
#define LZ_BLKD_GMEM_H

#include <stddef.h>
#include <stdint.h>

#define GMEM_MAX_REGIONS 8

struct gmem_region {
	uint64_t gpa;     /* first guest-physical address */
	uint64_t size;    /* bytes */
	uint8_t *host;    /* where gpa is mapped in this process */
};

struct gmem {
	struct gmem_region r[GMEM_MAX_REGIONS];
	unsigned n;
};

/* Host pointer for [gpa, gpa + len), or NULL when any byte is outside every region (or the
 * range wraps, or len is 0 and gpa is outside). A range may not straddle two regions. */
static inline void *gmem_ptr(const struct gmem *m, uint64_t gpa, uint64_t len)
{
	for (unsigned i = 0; i < m->n; i++) {
		const struct gmem_region *r = &m->r[i];

		if (gpa >= r->gpa && gpa - r->gpa <= r->size && len <= r->size - (gpa - r->gpa) &&
		    (len || gpa - r->gpa < r->size))
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}

#endif
