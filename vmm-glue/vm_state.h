/* SPDX-License-Identifier: MIT */
/*
 * The KVM state of a paused VM as a list of records (the body of a snapshot's vm.state,
 * docs/formats.md "VM snapshots"): per vCPU its registers, special registers, XSAVE area,
 * XCRs, LAPIC, MSRs (every one KVM_GET_MSR_INDEX_LIST names that this vCPU reads),
 * debug registers, MP state and pending events; per VM the CPUID table KVM offered (the
 * first record: a restore gives its vCPUs the CPUID they had), the PIC master and slave,
 * the IOAPIC, the PIT and kvmclock. A record is {u32 tag, u32 index, u32 len, u32 0} and len
 * bytes, padded to 8. Loading is strict: the records come in the order saving writes them,
 * each of the size its structure has; anything else, and every KVM_SET_* that fails, is
 * refused with one line. Used by vm_snapshot.c; independent of the CLI (live upgrade
 * reuses it). Nothing here prints.
 */
#ifndef LZ_VMM_VM_STATE_H
#define LZ_VMM_VM_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/why.h"
#include "cpu.h"

enum vm_state_tag {
	VMST_REGS = 1, VMST_SREGS, VMST_XSAVE, VMST_XCRS, VMST_LAPIC, VMST_MSRS, VMST_DEBUGREGS,
	VMST_MP_STATE, VMST_EVENTS,
	VMST_IRQCHIP = 32, VMST_PIT2, VMST_CLOCK, VMST_KVM_CPUID,
	VMST_SERIAL = 64, VMST_VIRTIO_MMIO, VMST_EXIT_STATUS,
	VMST_END = 0x454e44,   /* "END" */
};

#define VMST_MSRS_MAX 4096u
#define VMST_RECORD_MAX (1u << 20)

struct vm_state_buf {
	uint8_t *p;
	size_t len, cap;
};

struct vm_state_rd {
	const uint8_t *p;
	size_t len, off;
};

/* Append a record. -ENOMEM. */
int vm_state_put(struct vm_state_buf *b, uint32_t tag, uint32_t index, const void *data,
		 size_t len);
/*
 * Take the next record, which must be tag/index with min..max bytes: 0 with *data, *len;
 * -EINVAL with one line in why ("vm.state: record 12: ..."), naming what.
 */
int vm_state_take(struct vm_state_rd *r, uint32_t tag, uint32_t index, size_t min,
		  size_t max, const void **data, size_t *len, const char *what, char *why,
		  size_t why_len);

/* A parked (or not started) vCPU's state; sys_fd is /dev/kvm. */
int vm_state_cpu_save(const struct vcpu *c, int sys_fd, struct vm_state_buf *b, char *why,
		      size_t why_len);
/* Put it back into a new vCPU (cpu_create done, thread not started). */
int vm_state_cpu_load(const struct vcpu *c, struct vm_state_rd *r, const struct note_sink *notes,
		      char *why, size_t why_len);
/*
 * The VM's KVM_GET_SUPPORTED_CPUID table (kvm.h: vm->cpuid) as a record, and back: *out
 * (malloc'd, the caller's; NULL: checked and passed over) checked for size (1 to
 * KVM_CPUID_MAX entries, the record's length exactly).
 */
int vm_state_cpuid_save(const struct kvm_cpuid2 *cp, struct vm_state_buf *b, char *why,
			size_t why_len);
int vm_state_cpuid_take(struct vm_state_rd *r, struct kvm_cpuid2 **out, char *why,
			size_t why_len);
/* The in-kernel irqchip, PIT2 and kvmclock of a paused VM, and back. */
int vm_state_vm_save(int vm_fd, struct vm_state_buf *b, char *why, size_t why_len);
int vm_state_vm_load(int vm_fd, struct vm_state_rd *r, char *why, size_t why_len);

#endif
