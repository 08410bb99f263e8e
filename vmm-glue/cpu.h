/* SPDX-License-Identifier: MIT */
/*
 * vCPUs: CPUID (KVM_GET_SUPPORTED_CPUID with the APIC ids, the hypervisor bit and the
 * hypervisor leaves: KVM's signature and features, 0x40000010 = TSC and APIC bus kHz), boot
 * MSRs, FPU, LAPIC LINT0/LINT1, the boot register state (64-bit Linux boot protocol or PVH),
 * and one thread per vCPU running KVM_RUN and dispatching port and MMIO exits to a bus.
 *
 * With the in-kernel irqchip a HLT never leaves KVM, so "halted for good" is found by
 * asking: cpu_kick() interrupts KVM_RUN, and the vCPU thread records whether it is halted
 * with interrupts disabled (or was never started by the BSP); see cpu_dead().
 */
#ifndef LZ_VMM_CPU_H
#define LZ_VMM_CPU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/why.h"
#include "boot.h"
#include "kvm.h"

#define CPU_BOOT_STACK 0x8ff0u
#define CPU_MAX 64

enum cpu_end {
	CPU_END_RESET,     /* KVM_SYSTEM_EVENT_RESET */
	CPU_END_POWEROFF,  /* KVM_SYSTEM_EVENT_SHUTDOWN */
	CPU_END_TRIPLE,    /* KVM_EXIT_SHUTDOWN: triple fault */
	CPU_END_CRASH,     /* KVM_SYSTEM_EVENT_CRASH */
	CPU_END_ERROR,     /* a KVM failure; the vCPU thread logged one line */
};

/* What ended a KVM_RUN, as counted in struct vcpu's exits (cpu_exit_name(): the stats key). */
enum cpu_exit {
	CPU_EXIT_IO,            /* KVM_EXIT_IO: a port access */
	CPU_EXIT_MMIO,          /* KVM_EXIT_MMIO */
	CPU_EXIT_INTR,          /* KVM_EXIT_INTR */
	CPU_EXIT_KICK,          /* KVM_RUN returned EINTR: a kick (halt check, pause, stop) */
	CPU_EXIT_HLT,
	CPU_EXIT_SHUTDOWN,      /* a triple fault */
	CPU_EXIT_SYSTEM_EVENT,  /* reset, power-off, crash */
	CPU_EXIT_OTHER,         /* every other reason (failures) */
	CPU_EXIT_NR
};

struct cpu_bus {
	void *ctx;
	void (*pio)(void *ctx, uint16_t port, uint8_t *data, uint32_t size, bool is_write);
	void (*mmio)(void *ctx, uint64_t addr, uint8_t *data, uint32_t len, bool is_write);
	void (*end)(void *ctx, unsigned cpu, enum cpu_end why);
	void (*report)(void *ctx);  /* a vCPU answered a kick: halted for good (see cpu_dead) */
};

struct vcpu {
	unsigned id;
	int fd;
	struct kvm_run *run;
	int run_size;
	bool hw_virt;           /* for the wording of emulation failures */
	const struct cpu_bus *bus;
	pthread_t thread;
	bool started;
	int stop;               /* atomic */
	unsigned kick_gen;      /* atomic: the last kick */
	unsigned dead_gen;      /* atomic: the kick this vCPU answered "halted for good" to */
	uint64_t exits[CPU_EXIT_NR];  /* atomic: KVM_RUN exits by reason */
	uint64_t first_exit_ns;       /* atomic: CLOCK_MONOTONIC of the first exit (the guest ran) */
	/* pausing (cpu_pause): the thread parks out of KVM_RUN while pause is set */
	pthread_mutex_t park_lock;
	pthread_cond_t park_cond;
	int pause;              /* atomic */
	bool parked;            /* under park_lock */
};

/*
 * The set-up, on the caller's thread: nothing printed; 0, or -errno with one line in why
 * (why_len bytes, may be 0), e.g. "vCPU 0: KVM_SET_CPUID2: Invalid argument".
 * cpu_create: KVM_CREATE_VCPU + CPUID, MSRs, FPU, LAPIC (an MSR KVM refuses: a debug note);
 * with state_follows (a restore, a live upgrade: vm_state.h sets them all) only the CPUID.
 * cpu_boot_regs: the BSP's registers for proto, entering at entry. cpu_start: starts the vCPU
 * thread (signals: the kick signal is unblocked only there), which logs what fails on it.
 */
int cpu_create(struct kvm_vm *vm, unsigned id, unsigned ncpus, bool hw_virt, bool state_follows,
	       struct vcpu *c, const struct note_sink *notes, char *why, size_t why_len);
int cpu_boot_regs(struct vcpu *c, enum boot_proto proto, uint64_t entry, char *why,
		  size_t why_len);
int cpu_start(struct vcpu *c, const struct cpu_bus *bus, char *why, size_t why_len);
/* Interrupt KVM_RUN; the thread answers by setting dead_gen = gen when halted for good. */
void cpu_kick(struct vcpu *c, unsigned gen);
bool cpu_dead(const struct vcpu *c, unsigned gen);
/*
 * Pausing: cpu_pause() returns once the vCPU's thread is out of KVM_RUN (at an instruction
 * boundary: a pending port or MMIO exit completed by KVM first) and parked; it stays there
 * until cpu_resume(). A vCPU whose thread ended (or never started) counts as parked.
 * Neither prints; the caller serializes them.
 */
void cpu_pause(struct vcpu *c);
void cpu_resume(struct vcpu *c);
/* The exit counts' names in the stats ("io", "mmio", ...). */
const char *cpu_exit_name(enum cpu_exit e);
/* Stop and join the thread, then close. */
void cpu_destroy(struct vcpu *c);

#endif
