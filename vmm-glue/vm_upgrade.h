/* SPDX-License-Identifier: MIT */
/*
 * Live upgrade of a running VM (lazyblk run --control's `upgrade [BINARY]`, docs/run.md
 * "Live upgrade"): the VM is paused (vmm_pause: no disk request in flight), its state
 * records (vm_snapshot_state_save: KVM's, the vCPUs', the devices') go into a memfd after a
 * small header, every disk is flushed, and this process execs BINARY with the fds it must
 * keep — that memfd, guest RAM's memfd, the control socket's listening socket and the
 * connection that asked — open across the exec (vmm_opts.upgrade_exec builds the command
 * line: the same run, plus the fds). The new process (vmm_opts.resume) maps the same RAM
 * MAP_SHARED, builds a new KVM VM and devices, applies the records, listens on the same
 * socket, starts the vCPUs and answers the request: "ok upgraded: paused N ms". Same PID,
 * same disks (reopened from the same options), same console. Nothing here prints.
 */
#ifndef LZ_VMM_VM_UPGRADE_H
#define LZ_VMM_VM_UPGRADE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct vm;
struct note_sink;

/* A live upgrade's hand-over: fds the process before the exec left open. */
struct vmm_handover {
	int state_fd;    /* memfd: a header and the VM's state records */
	int ram_fd;      /* guest RAM's memfd */
	int listen_fd;   /* the control socket, listening */
	int client_fd;   /* the connection that asked (answered once the VM runs again) */
};

/*
 * The old process's side: refused at once (VM untouched) when BINARY is no executable
 * file, the run cannot be upgraded (vmm_opts.upgrade_exec NULL; a restored VM, whose RAM is
 * a private mapping of its snapshot), or the VM is paused or starting; else the VM is
 * paused and handed over, with client_fd (the connection that asked) and listen_fd (the
 * control socket's listening socket). Returns only when that failed, the VM resumed:
 * -errno, one line in why ("upgrade: ...").
 */
int vm_upgrade(struct vm *v, const char *binary, int client_fd, int listen_fd, char *why,
	       size_t why_len);

/* The new process's side: what the hand-over holds. */
struct vm_upgrade_in {
	uint64_t mem_size;
	unsigned ncpus, ndisks;
	struct timespec t0;          /* CLOCK_MONOTONIC when the old process paused */
	uint8_t *state;              /* the records (vm_snapshot_state_load) */
	size_t state_len;
};

/* Read and check h's state memfd (closed then). -errno, one line in why. */
int vm_upgrade_open(const struct vmm_handover *h, struct vm_upgrade_in *in, char *why,
		    size_t why_len);
/*
 * The VM runs again: answer the request on h->client_fd ("ok upgraded: paused N ms", or
 * with ret != 0 "error upgrade: why") and close it; the pause as a notice
 * ("upgrade: paused N ms"). Frees in.
 */
void vm_upgrade_done(const struct vmm_handover *h, struct vm_upgrade_in *in, int ret,
		     const char *why, const struct note_sink *notes);

#endif
