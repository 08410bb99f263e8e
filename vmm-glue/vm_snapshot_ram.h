/* SPDX-License-Identifier: MIT */
/*
 * The RAM of a VM snapshot (vm_snapshot.c; docs/formats.md "VM snapshots"): the sparse ram
 * file and its digest, XXH3-128 over the XXH3-128 digests of the 2 MiB regions, each over
 * (le64 page index, page) of its non-zero pages. A check of corruption, not of forgery:
 * guest RAM is the guest's own data, which nothing trusts.
 */
#ifndef LZ_VMM_VM_SNAPSHOT_RAM_H
#define LZ_VMM_VM_SNAPSHOT_RAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ram.h"

#define VMSNAP_PAGE 4096u
#define VMSNAP_XXH 16u   /* an XXH3-128 digest, canonical (big-endian) */

struct ram_digest;

/* fd (empty): ram's non-zero pages, holes elsewhere; their digest, *written pages (+=). */
int vmsnap_ram_write(const struct vm_ram *ram, int fd, uint8_t digest[VMSNAP_XXH],
		     uint64_t *written);
/* Start checking the ram file fd of size bytes, on threads (*out: free it, even on error). */
int vmsnap_ram_check_start(int fd, uint64_t size, struct ram_digest **out);
/* Finish the check (this thread helps) or, stop, abandon it: its digest, *pages hashed. */
int vmsnap_ram_check_end(struct ram_digest *d, bool stop, uint8_t out[VMSNAP_XXH],
			 uint64_t *pages);
void vmsnap_ram_check_free(struct ram_digest *d);
/* XXH3-128 of len bytes at p, canonical: vm.state's header, state and CPU signature. */
void vmsnap_xxh128(const void *p, size_t len, uint8_t out[VMSNAP_XXH]);

#endif
