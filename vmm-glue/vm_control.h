/* SPDX-License-Identifier: MIT */
/*
 * The control socket of lazyblk run (vmm_opts.control): serve --control's line protocol
 * (blkd/transport/control.h: one parser, the same rules for lines and clients) with the VM's
 * requests added:
 *
 *   pause            → "ok paused" (every vCPU parked, the disk queues quiesced), or
 *                      "error already paused"
 *   resume           → "ok running", or "error not paused"
 *   stats            → the VM's statistics, one JSON object on one line (vmm_stats_json)
 *   snapshot DIR     → "ok DIR": the VM snapshot (paused for it; resumed after unless it was
 *                      paused before); "error ..." when it cannot be taken
 *   upgrade [BINARY] → live upgrade (vm_upgrade.h): this process execs BINARY (absolute;
 *                      default /proc/self/exe) and the new one answers "ok upgraded:
 *                      paused N ms"; "error upgrade: ..." when refused or when the exec
 *                      failed (the VM goes on here)
 *   snapshot-disk DELTA_PATH, flush, trace stop → as serve --control, on the first disk
 *
 * It runs on its own thread and logs where it fails (a server's rule).
 */
#ifndef LZ_VMM_VM_CONTROL_H
#define LZ_VMM_VM_CONTROL_H

struct vm;
struct vm_control;

/*
 * Listen on path and answer for vm (with vmm_opts.resume: on the listening socket the
 * process before handed over). -errno (logged).
 */
int vm_control_start(struct vm *vm, const char *path, struct vm_control **out);
/* Finish the request in progress, stop, remove the socket. NULL: nothing. */
void vm_control_stop(struct vm_control *c);

#endif
