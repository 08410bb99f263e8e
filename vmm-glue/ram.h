/* SPDX-License-Identifier: MIT */
/*
 * The VM's RAM, owned by the VMM: one memfd mapped MAP_SHARED (kvm.c makes, maps and unmaps
 * it; the memfd can outlive the process's mapping: a snapshot reads it, a live upgrade passes
 * it on), split
 * around the 3–4 GiB MMIO hole into KVM memory slots, slot i at slot[i]. The kernel loader
 * and the boot tables write into it through vm_ram_ptr(); the virtio-blk device model sees
 * it through a struct gmem (blkd/virtio/gmem.h), a view vm_ram_view() builds (vmm.c keeps
 * it for as long as the devices live): the view names the same bytes and owns nothing.
 */
#ifndef LZ_VMM_RAM_H
#define LZ_VMM_RAM_H

#include <stdint.h>

#include "../blkd/virtio/gmem.h"

#define VM_RAM_SLOTS 2   /* below the MMIO hole, and above 4 GiB */

struct vm_ram_slot {
	uint64_t gpa;     /* first guest-physical address */
	uint64_t size;    /* bytes */
	uint8_t *host;    /* inside the mapping */
};

struct vm_ram {
	int fd;           /* the memfd holding every guest page (-1: none) */
	uint8_t *map;     /* the whole mapping of fd (NULL: none) */
	uint64_t size;    /* its bytes: the guest's RAM */
	struct vm_ram_slot slot[VM_RAM_SLOTS];
	unsigned nslots;
};

/* The device model's view of r: one region per slot. */
static inline void vm_ram_view(const struct vm_ram *r, struct gmem *view)
{
	_Static_assert(VM_RAM_SLOTS <= GMEM_MAX_REGIONS, "a view holds every slot");
	view->n = r->nslots;
	for (unsigned i = 0; i < r->nslots; i++)
		view->r[i] = (struct gmem_region){
			.gpa = r->slot[i].gpa, .size = r->slot[i].size, .host = r->slot[i].host,
		};
}

/*
 * Host pointer for [gpa, gpa + len) inside one slot, or NULL (gmem_ptr()'s rules: the
 * bounds check every guest access goes through, device model and loaders alike).
 */
static inline void *vm_ram_ptr(const struct vm_ram *r, uint64_t gpa, uint64_t len)
{
	struct gmem view;

	vm_ram_view(r, &view);
	return gmem_ptr(&view, gpa, len);
}

#endif
