/* SPDX-License-Identifier: MIT */
/*
 * A running VM, inside vmm-glue/: what vmm.c assembles (RAM, devices, vCPUs) and what the
 * code working on a running VM reads — pausing and the statistics (vm_pause.c), the control
 * socket (vm_control.c), snapshots. Outside vmm-glue/ a struct vm is opaque (vmm.h).
 */
#ifndef LZ_VMM_VM_H
#define LZ_VMM_VM_H

#include <pthread.h>
#include <stdbool.h>

#include "boot.h"
#include "cpu.h"
#include "kvm.h"
#include "pio.h"
#include "serial.h"
#include "virtio_mmio.h"
#include "vm_snapshot_store.h"
#include "vmm.h"

struct vm_control;
struct vm_parts;
struct vm_upgrade_in;

struct vm {
	const struct vmm_opts *o;
	struct kvm_vm vm;
	struct gmem ram_view;       /* vm.ram as the virtio devices see it (vm_ram_view) */
	struct boot_kernel kernel;
	struct serial *serial;
	struct pio_devs pio;
	struct virtio_mmio *vdev[VMM_MAX_DISKS];
	unsigned ndev;
	struct vcpu cpus[CPU_MAX];
	unsigned ncpus;
	struct cpu_bus bus;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ended;
	enum cpu_end why;
	bool halted;                /* every vCPU halted with interrupts off */
	int status;                 /* from port 0x441; -1: none */
	char *reason;               /* vmm_run's why (reason_len bytes) */
	size_t reason_len;

	/* vmm_pause / vmm_resume (vm_pause.c): pause_lock serializes them */
	pthread_mutex_t pause_lock;
	bool paused;                /* under pause_lock; read by vmm_wait under lock too */
	bool running;               /* atomic: every vCPU thread started (pausing works) */
	struct vm_control *ctl;     /* --control (NULL: none) */
	struct vm_upgrade_in *up;   /* vmm_opts.resume: the hand-over being applied */
	struct vm_snapstore snapstore;  /* what the next snapshot to a store leans on */
	bool lazy_failed;           /* under lock: a page of the lazy RAM cannot be had */
	/* the guest's first console byte written out: when (CLOCK_MONOTONIC ns), and the lazy
	 * RAM's compressed bytes fetched by then (demand and prefetch); atomic */
	uint64_t first_output_ns, first_output_ram_bytes;
};

/* The pieces of vm a snapshot or a live upgrade reads and writes (vm_snapshot.h). */
void vmm_parts(struct vm *vm, struct vm_parts *p);

/*
 * Write a snapshot of vm, paused by the caller (vmm_pause), into dir (which must not
 * exist): vm_snapshot.h. 0, or -errno with one line in why.
 */
int vm_snapshot_save(struct vm *vm, const char *dir, char *why, size_t why_len);
/*
 * A snapshot into a store (vm_snapshot_store.h): _take with vm paused by the caller,
 * _finish once it runs again. 0, or -errno with one line in why.
 */
int vm_snapshot_store_take(struct vm *vm, const char *dir, const char *store,
			   struct vm_snapstore_job **job, char *why, size_t why_len);
int vm_snapshot_store_finish(struct vm *vm, struct vm_snapstore_job *job,
			     struct vm_snapstore_result *res, char *why, size_t why_len);

#endif
