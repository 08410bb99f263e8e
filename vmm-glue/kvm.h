/* SPDX-License-Identifier: MIT */
/*
 * /dev/kvm and the VM: API version and required capabilities, the in-kernel irqchip and
 * PIT, the TSS address, guest RAM (one memfd, mapped shared, split into KVM memory slots
 * around the 3–4 GiB MMIO hole), interrupt lines, and hardware-virtualization detection.
 * Nothing here prints: a call that fails returns -errno, with one line in why when it takes
 * one.
 */
#ifndef LZ_VMM_KVM_H
#define LZ_VMM_KVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ram.h"

struct kvm_cpuid2;

#define KVM_TSS_ADDR 0xfffbd000u
#define KVM_MMIO_HOLE_START 0xc0000000ull   /* 3 GiB */
#define KVM_MMIO_HOLE_END 0x100000000ull    /* 4 GiB: RAM above the hole continues here */

struct kvm_ram_opts {
	uint64_t size;    /* bytes, a multiple of 4 KiB (2 MiB with hugepages) */
	bool hugepages;   /* MAP_HUGETLB (2 MiB pages from the reserved pool) */
	bool populate;    /* MAP_POPULATE: fault everything in now */
	/*
	 * map_file: RAM is fd (size bytes, a VM snapshot's ram file) mapped MAP_PRIVATE:
	 * copy-on-write, so that VMs restored from one file share the pages none of them
	 * wrote (no hugepages).
	 */
	bool map_file;
	/*
	 * adopt_fd: RAM is fd, a guest RAM memfd of size bytes handed over by the process
	 * before (lazyblk run's live upgrade), mapped MAP_SHARED and owned from now on.
	 */
	bool adopt_fd;
	int fd;
};

struct kvm_vm {
	int sys_fd;          /* /dev/kvm */
	int vm_fd;
	int vcpu_mmap_size;  /* KVM_GET_VCPU_MMAP_SIZE */
	bool immediate_exit; /* KVM_CAP_IMMEDIATE_EXIT */
	struct vm_ram ram;   /* slot 0 at 0 (below 3 GiB), slot 1 at 4 GiB (the rest) */
	int reaper_fd;       /* kvm_vm_reaper()'s pipe (-1: none) */
	/*
	 * KVM_GET_SUPPORTED_CPUID, asked once (every vCPU's CPUID derives from it, a snapshot
	 * records it), or the one a restored snapshot recorded
	 */
	struct kvm_cpuid2 *cpuid;
};

#define KVM_CPUID_MAX 8192u   /* entries of a kvm_cpuid2 we ask for or take */

/*
 * Opens /dev/kvm, checks the API and capabilities, asks KVM_GET_SUPPORTED_CPUID (unless
 * cpuid gives the table: a restore's, copied), creates the VM, maps RAM and registers it
 * (slots 0 and 1), then creates the irqchip and PIT2. 0, or -errno with one line in why
 * (why_len bytes, may be 0): "/dev/kvm: Permission denied (add yourself to the kvm group)",
 * "KVM_CREATE_VM: ...". The caller destroys vm either way.
 */
int kvm_vm_create(struct kvm_vm *vm, const struct kvm_ram_opts *ram,
		  const struct kvm_cpuid2 *cpuid, char *why, size_t why_len);
/* KVM_GET_SUPPORTED_CPUID on /dev/kvm's sys_fd into *out (freed first; the caller's). */
int kvm_cpuid_supported(int sys_fd, struct kvm_cpuid2 **out, char *why, size_t why_len);
/* Bytes of a struct kvm_cpuid2 with nent entries. */
size_t kvm_cpuid_size(uint32_t nent);
void kvm_vm_destroy(struct kvm_vm *vm);
/*
 * Fork the reaper: a child process that holds the VM fd until kvm_vm_destroy() or this
 * process's exit, and then closes it, so that KVM's teardown of the VM (milliseconds of
 * SRCU grace periods) happens there, not on this process's way out. Before any confinement
 * (the child keeps this process's credentials; it only waits and exits). -errno when it
 * cannot fork (the teardown then stays here).
 */
int kvm_vm_reaper(struct kvm_vm *vm);
/* Level of an interrupt line (KVM_IRQ_LINE). -errno, prints nothing. */
int kvm_irq_line(int vm_fd, uint32_t gsi, int level);
/* vmx or svm in /proc/cpuinfo. */
bool kvm_hw_virt_present(void);

#endif
