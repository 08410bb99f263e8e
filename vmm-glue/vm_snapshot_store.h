/* SPDX-License-Identifier: MIT */
/*
 * VM snapshots into a chunk store (docs/run.md, "Snapshots in a store"): the control
 * socket's `snapshot DIR --store STORE`. The VM's vm.state (vm_snapshot_blob) and its RAM
 * (vmsnap/ramstore.h: per window, only the pages to store) become chunks of STORE, the
 * image disk's overlay a committed layer on its base (blkd/overlay/commit.h) in
 * STORE/layouts/ with the base's chain beside it, and one document (vmsnap/doc.h) names
 * them: STORE/snapshots/<id>.json and DIR/snapshot.json.
 *
 * In two steps: vm_snapstore_take with the VM paused (state, RAM, the overlay's delta at
 * that instant), vm_snapstore_finish with it running again (the commit of the delta, the
 * document). A VM keeps what the next snapshot needs in a struct vm_snapstore: the last
 * page map and its pages' hashes, so a second snapshot stores the pages that changed.
 * Nothing here prints.
 */
#ifndef LZ_VMM_VM_SNAPSHOT_STORE_H
#define LZ_VMM_VM_SNAPSHOT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/why.h"
#include "../vmsnap/ramstore.h"

struct vm_parts;

struct vm_snapstore {
	struct rammap *map;            /* the last snapshot's page map (owned; NULL: none) */
	const struct rammap *base_map; /* without map: the one the VM was restored from */
	uint8_t (*hashes)[RAMSTORE_HASH]; /* its pages' hashes (owned; NULL: none) */
	bool has_parent;
	uint8_t parent[SHA256_LEN];    /* its document's id */
	/*
	 * The pages that may have changed since map, as bits (npages of them): a lazily
	 * restored VM's written pages (vmm-glue/lazyram). NULL: those of the RAM memfd's data
	 * extents (a booted VM's), or every page (RAM mapped from a snapshot's ram file).
	 */
	int (*written)(void *arg, uint64_t *bits, uint64_t npages);
	void *written_arg;
};

struct vm_snapstore_result {
	uint8_t id[SHA256_LEN];        /* sha256 of the document */
	struct ramstore_result ram;
	uint64_t disk_blocks, disk_new_chunks;   /* the overlay's blocks committed */
	uint64_t state_bytes;
};

struct vm_snapstore_job;

/* The VM is paused. dir must not exist; store_dir is made a store if missing. */
int vm_snapstore_take(struct vm_snapstore *ss, const struct vm_parts *p, const char *dir,
		      const char *store_dir, struct vm_snapstore_job **job, char *why,
		      size_t why_len);
/* The VM runs again: the disk committed, the document written; job freed either way. */
int vm_snapstore_finish(struct vm_snapstore *ss, struct vm_snapstore_job *job,
			struct vm_snapstore_result *res, char *why, size_t why_len);
void vm_snapstore_release(struct vm_snapstore *ss);

#endif
