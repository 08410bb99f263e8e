/* SPDX-License-Identifier: MIT */
/*
 * A running VM's pieces as a snapshot or a live upgrade sees them (vm.h): what vmm.c
 * assembled, handed to vm_snapshot.c, vm_upgrade.c and the control socket.
 */
#include "vm.h"
#include "vm_snapshot.h"

void vmm_parts(struct vm *v, struct vm_parts *p)
{
	*p = (struct vm_parts){
		.kvm = &v->vm, .cpus = v->cpus, .ncpus = v->ncpus, .vdev = v->vdev,
		.ndev = v->ndev, .serial = v->serial, .exit_status = &v->status,
		.kernel = v->o->kernel, .disk = v->o->ndisks ? &v->o->disks[0] : NULL,
		.notes = &v->o->notes,
		.kernel_sha = v->o->restore ? vm_snapshot_info(v->o->restore)->kernel_sha : NULL,
	};
}

/* The control socket's `snapshot DIR` (vm.h): v paused by the caller. */
int vm_snapshot_save(struct vm *v, const char *dir, char *why, size_t why_len)
{
	struct vm_parts p;

	vmm_parts(v, &p);
	return vm_snapshot_write(&p, dir, why, why_len);
}

int vm_snapshot_store_take(struct vm *v, const char *dir, const char *store,
			   struct vm_snapstore_job **job, char *why, size_t why_len)
{
	struct vm_parts p;

	vmm_parts(v, &p);
	return vm_snapstore_take(&v->snapstore, &p, dir, store, job, why, why_len);
}

int vm_snapshot_store_finish(struct vm *v, struct vm_snapstore_job *job,
			     struct vm_snapstore_result *res, char *why, size_t why_len)
{
	return vm_snapstore_finish(&v->snapstore, job, res, why, why_len);
}
