/* SPDX-License-Identifier: MIT */
/*
 * VM snapshots (docs/formats.md "VM snapshots", docs/run.md "Snapshots and restore"): a
 * directory with
 *   vm.state    a 512-byte header (magic, version, the machine: RAM size, vCPUs, disks,
 *               the CPU signature; the kernel's sha256, the image layout's digest; the
 *               sha256 of the state and of the disk delta, the XXH3-128 of the RAM pages
 *               (corruption, not forgery: guest RAM is untrusted anyway); the header's own
 *               sha256), then the state records (vm_state.h): KVM's VM and vCPU state and
 *               the devices' (UART, virtio-mmio registers and queue indices, exit status);
 *   ram         the guest's RAM, as big as it, written sparse: only the pages that are not
 *               all zeros (the others are holes);
 *   disk.delta  the image disk's overlay as a delta (blkd/overlay/delta.h), when it has one.
 * Saving needs the VM paused (vCPUs parked, queues quiesced). Restoring is in two steps: the
 * caller opens the snapshot (everything checked that can be without a VM), builds the VM
 * with RAM mapped privately from the ram file (kvm_ram_opts.fd), verifies the RAM, then
 * applies the state to the new vCPUs and devices before starting them. Nothing here prints;
 * every refusal is one line in why.
 */
#ifndef LZ_VMM_VM_SNAPSHOT_H
#define LZ_VMM_VM_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/why.h"
#include "cpu.h"
#include "kvm.h"

struct disk;
struct serial;
struct virtio_mmio;

#define VMSNAP_STATE "vm.state"
#define VMSNAP_RAM "ram"
#define VMSNAP_DELTA "disk.delta"
#define VMSNAP_SIG 16u   /* the CPU signature's bytes */

/* The pieces of a VM a snapshot reads or writes (vmm.c fills it in). */
struct vm_parts {
	struct kvm_vm *kvm;
	struct vcpu *cpus;
	unsigned ncpus;
	struct virtio_mmio *const *vdev;
	unsigned ndev;
	struct serial *serial;
	int *exit_status;                /* port 0x441's value, -1: none yet */
	const char *kernel;              /* its sha256 names it (NULL: no check on restore) */
	const uint8_t *kernel_sha;       /* without kernel: the sha256 to record (a restored VM) */
	/*
	 * The first disk (NULL: none): when it is the lazy image, its layout names it
	 * (disk_layout_digest) and its overlay becomes disk.delta (disk_snapshot).
	 */
	const struct disk *disk;
	const struct note_sink *notes;
};

/* Write a snapshot of a paused VM into dir, which must not exist. */
int vm_snapshot_write(const struct vm_parts *p, const char *dir, char *why, size_t why_len);

struct vm_snapshot_info {
	uint64_t mem_size;
	unsigned ncpus, ndisks;
	bool has_delta;                  /* dir/disk.delta belongs to it */
	bool has_layout;                 /* the first disk was an image: layout_digest */
	uint8_t layout_digest[SHA256_LEN];
	uint8_t kernel_sha[SHA256_LEN];  /* the kernel it booted */
	uint64_t ram_pages;              /* pages written (not all zeros) */
	bool in_store;                   /* vm_snapshot_open_blob's: RAM in a store */
	bool disk_rw;                    /* the image disk had an overlay */
	uint8_t cpu_sig[VMSNAP_SIG];     /* the CPU it was taken on (XXH3-128 of features) */
	char cpu_model[64];
};

struct vm_snapshot;

/*
 * A snapshot whose RAM goes to a store (vm_snapshot_store.h): the whole vm.state (header
 * and records) of the paused VM in memory (*out malloc'd, the caller's), its header
 * flagged "RAM in a store" (no ram file, no RAM digest: every page is a verified chunk)
 * and, disk_rw, "the image disk had an overlay". 0 or -errno with why.
 */
int vm_snapshot_blob(const struct vm_parts *p, bool disk_rw, uint8_t **out, size_t *len,
		     char *why, size_t why_len);
/*
 * Open such a vm.state (state: len bytes, malloc'd; taken over, freed even on error) for
 * a restore, checked as vm_snapshot_open checks a directory's; name is what messages call
 * it. Its RAM comes from elsewhere (vmm_opts.lazy): vm_snapshot_ram_fd is -1 and
 * vm_snapshot_ram_verify only says yes.
 */
int vm_snapshot_open_blob(const char *name, uint8_t *state, size_t len,
			  struct vm_snapshot **out, char *why, size_t why_len);

/*
 * Open dir for a restore: vm.state read and checked (header digest, version, state digest,
 * the CPUID record), the ram file's size against the header, the delta's digest. The ram
 * file stays open (vm_snapshot_ram_fd).
 */
int vm_snapshot_open(const char *dir, struct vm_snapshot **out, char *why, size_t why_len);
const struct vm_snapshot_info *vm_snapshot_info(const struct vm_snapshot *s);
int vm_snapshot_ram_fd(const struct vm_snapshot *s);
/*
 * The CPUID table KVM offered when the snapshot was taken (kvm_vm_create takes it instead of
 * asking: the vCPUs get the CPUID they had). That this host's KVM offers the same CPU is
 * vm_snapshot_cpu_verify's to check, while the restored guest runs held (vmm.c).
 */
const struct kvm_cpuid2 *vm_snapshot_cpuid(const struct vm_snapshot *s);
/*
 * The header's CPU signature against the CPUID this host's KVM offers (asked on vm's
 * /dev/kvm): 0, -EXDEV ("taken on another CPU model or KVM (...)"), or another -errno with
 * one line in why.
 */
int vm_snapshot_cpu_verify(const struct vm_snapshot *s, const struct kvm_vm *vm, char *why,
			   size_t why_len);
/*
 * After a failure of the restore (why says it; KVM may refuse the CPUID or XSAVE area of
 * another CPU): when the CPU differs, why says that instead.
 */
void vm_snapshot_cpu_explain(const struct vm_snapshot *s, const struct kvm_vm *vm, char *why,
			     size_t why_len);
/*
 * The RAM pages against the header's digest: the ram file hashed on threads, this one
 * helping. Once, before anything the guest does is let out (vmm.c runs the restored guest
 * held meanwhile: the check does not delay its first instruction).
 */
int vm_snapshot_ram_verify(struct vm_snapshot *s, char *why, size_t why_len);
/* vm_snapshot_ram_verify matched (false for NULL): the restored guest may have been let out. */
bool vm_snapshot_ram_ok(const struct vm_snapshot *s);
/*
 * Put the state into the new VM p describes (same machine: vCPUs made, devices made, not
 * started): the kernel's digest (when p->kernel), then KVM's VM state, every vCPU's, the
 * devices'.
 */
int vm_snapshot_apply(const struct vm_snapshot *s, const struct vm_parts *p, char *why,
		      size_t why_len);
void vm_snapshot_close(struct vm_snapshot *s);

struct vm_state_buf;
/*
 * The state records alone (what vm.state holds after its header) of a paused VM, and
 * back into a new one (what: the name in messages). Live upgrade (vm_upgrade.c) hands them
 * over in a memfd.
 */
int vm_snapshot_state_save(const struct vm_parts *p, struct vm_state_buf *b, char *why,
			   size_t why_len);
int vm_snapshot_state_load(const uint8_t *state, size_t len, const struct vm_parts *p,
			   const char *what, char *why, size_t why_len);

#endif
