/* SPDX-License-Identifier: MIT */
/*
 * Assembling and running a VM (README.md has the memory map): RAM, the kernel and initrd,
 * the command line, boot_params or the PVH start info, ACPI tables, COM1, the port devices,
 * one virtio-mmio block device per disk, and the vCPU threads. The run ends when the guest
 * resets (i8042, triple fault, KVM reset event), powers off, or every vCPU is halted with
 * interrupts disabled, or on an error.
 */
#ifndef LZ_VMM_VMM_H
#define LZ_VMM_VMM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "../blkd/virtio/virtio_blk.h"
#include "boot.h"
#include "vm_upgrade.h"

struct vm_snapshot;
struct lazyram;
struct rammap;

#define VMM_MAX_DISKS 19   /* GSIs 5..23 of the IOAPIC */

struct vmm_opts {
	const char *kernel;
	const char *initrd;             /* NULL: none */
	const char *append;             /* NULL: "" */
	const char *cache_dir;          /* vmlinux cache; NULL: the default */
	enum boot_proto boot;
	unsigned ncpus;                 /* 1..CPU_MAX */
	uint64_t mem;                   /* bytes */
	bool hugepages, populate;
	const struct disk *disks;       /* vda, vdb, ... (borrowed; blkd/disk/disk.h) */
	unsigned ndisks;
	int in_fd, out_fd;              /* the serial console (in_fd -1: no input) */
	struct timespec t0;             /* process start, for the boot timer */
	/*
	 * The set-up's notes, before the vCPUs start (on the caller's thread): the kernel
	 * loaded and how, the vCPUs starting (info), no hardware virtualization (notice), and
	 * boot_kernel_load's and cpu_create's (boot.h, cpu.h).
	 */
	struct note_sink notes;
	/*
	 * Called once on the caller's thread when everything is open and set up (RAM, kernel,
	 * devices, vCPUs made) and before the first vCPU starts: lazyblk run's --user and
	 * --seccomp (common/confine.h). Non-zero: the VM does not start (the hook said why).
	 * NULL: none.
	 */
	int (*before_start)(void *arg);
	void *before_start_arg;
	/*
	 * VM snapshots (vm_snapshot.h): disks[0], when it is the lazy image (disk_open), is
	 * named by its layout and its overlay becomes disk.delta (blkd/disk/disk.h).
	 * restore: boot nothing, resume this snapshot (vm_snapshot_open; borrowed): RAM from
	 * its ram file, mem and ncpus from it (0 here, or the same values), kernel NULL or the
	 * same file, the same disks.
	 */
	struct vm_snapshot *restore;
	/*
	 * A restore of a snapshot in a store (vm_snapshot_open_blob): RAM is lazy's file,
	 * mapped copy-on-write, its pages brought in on first touch (vmm-glue/lazyram; its
	 * fatal failures stop the VM); lazy_map and lazy_id the page map and document it was
	 * restored from, what the VM's next snapshot to a store leans on. NULL: none.
	 */
	struct lazyram *lazy;
	const struct rammap *lazy_map;
	const uint8_t *lazy_id;
	/*
	 * A page of lazy that cannot be had: the thread that touched it (a vCPU, a device, or
	 * this one in a KVM call while the VM is set up) waits for good, so the VM cannot be
	 * torn down. Called once, on lazyram's thread, with the reason ("guest RAM: ..."), the
	 * guest's console output dropped: end the process (flush what must be, say why); it
	 * must not return. NULL: vmm_run returns -ENOTRECOVERABLE once the VM has stopped (if
	 * the thread waiting is not this one).
	 */
	void (*lazy_abandon)(void *arg, const char *why);
	void *lazy_abandon_arg;
	/*
	 * The control socket (vm_control.h): a unix socket PATH, listened on before
	 * before_start and the first vCPU, closed before the VM is torn down. Its errors are
	 * logged where they happen (it is a server). NULL: none.
	 */
	const char *control;
	/*
	 * Live upgrade (vm_upgrade.h; needs control). upgrade_exec: called with the VM paused
	 * and h's fds open across exec: exec binary as this same run plus h (lazyblk run's
	 * hidden --upgrade-fds); it returns only when that failed (-errno, one line in why).
	 * NULL: `upgrade` is refused. resume: this process is the new one: the VM is rebuilt
	 * from h (RAM adopted, the state applied, the socket adopted) instead of booted, and
	 * the request is answered. NULL: none.
	 */
	int (*upgrade_exec)(void *arg, const char *binary, const struct vmm_handover *h,
			    char *why, size_t why_len);
	void *upgrade_arg;
	const struct vmm_handover *resume;
};

struct vm;   /* a running VM (vmm-glue/vm.h inside vmm-glue/) */

/*
 * Pause a running VM: every vCPU out of KVM_RUN and parked, the virtio-mmio queues
 * quiesced (the requests being processed complete, no new one starts), the console's input
 * held: guest RAM and device state stay as they are until vmm_resume(). 0, -EALREADY
 * (already paused / not paused), or -EAGAIN (pause: the vCPUs are not all started yet).
 * Thread-safe; prints nothing.
 */
int vmm_pause(struct vm *vm);
int vmm_resume(struct vm *vm);
bool vmm_paused(struct vm *vm);
/*
 * The VM's statistics as one JSON object and a newline: "paused", "vcpus" (per vCPU: "id",
 * "exits" by reason: io, mmio, intr, kick, hlt, shutdown, system_event, other, total) and
 * "disks" (each disk's statistics object, as serve --control's stats). -errno.
 */
int vmm_stats_json(struct vm *vm, FILE *f);

/*
 * Runs the VM to its end. 0 and *status = the exit status the guest wrote to port 0x441
 * (0 when it wrote none and ended cleanly), or -errno with one line in why (why_len bytes,
 * may be 0): the set-up's failure ("kernel PATH: ...", "/dev/kvm: ..."), or how the guest
 * ended (a triple fault, a crash). why is empty when a vCPU thread failed: it logged why
 * (threads log where they run), or when before_start failed (it said why). Prints nothing
 * itself. -ENOTRECOVERABLE: a page of the lazy RAM could not be had (why says which): the
 * VM stopped, but a thread may stay blocked on that page, so nothing was torn down: flush
 * the disks and end the process without closing o->lazy.
 */
int vmm_run(const struct vmm_opts *o, int *status, char *why, size_t why_len);

#endif
