/* SPDX-License-Identifier: MIT */
/*
 * lazyblk run --restore: what it names, opened for vmm_run (docs/run.md):
 *   SNAPDIR with vm.state          a snapshot directory: RAM mapped from SNAPDIR/ram, its
 *                                  disk.delta the start of --overlay NEW;
 *   SNAPDIR with snapshot.json     a snapshot in the store (--store): its state and page map
 *                                  loaded from the store, the image it names opened from
 *                                  STORE/layouts/, RAM brought in on first touch (lazyram);
 *   oci://HOST/REPO:TAG, http(s)://HOST/PATH/images/NAME
 *                                  a snapshot by reference: its document and the image's
 *                                  layouts fetched into the store, the rest as above, the
 *                                  chunks from the reference's remote.
 */
#ifndef LZ_CLI_RUN_RESTORE_H
#define LZ_CLI_RUN_RESTORE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../vmsnap/doc.h"
#include "cli.h"

struct vm_snapshot;
struct cas_source;
struct rammap;
struct lazyram;
struct vmm_opts;
struct snap_fetched;
struct trace;

struct run_restore {
	const char *arg;              /* --restore's value */
	bool in_store;                /* a snapshot document's (a store's or a reference's) */
	struct vm_snapshot *snap;
	struct snapdoc doc;
	uint8_t id[SHA256_LEN];       /* sha256 of the document */
	char layout[PATH_MAX];        /* the image it names (STORE/layouts/<hex>.layout) */
	struct cas_source *src;       /* the RAM's chunks */
	struct rammap *map;
	struct lazyram *lazy;
	struct snap_fetched *fetched;  /* by reference */
	const char *ram_cache;        /* --ram-cache DIR (NULL: the default) */
	const char *record;           /* --trace-record: the RAM's first touches written there */
	struct trace *prefetch;       /* --prefetch: replayed ahead of the guest */
};

/*
 * Before the options are checked: a snapshot in a store or by reference is read (fetched:
 * its document and the image's layouts, into store_dir) and *layout set to the image it
 * names (rem->url to the reference's remote, unless --remote gave one). 0, or 1 (said why).
 */
int run_restore_resolve(struct run_restore *r, const char *store_dir, struct cli_remote *rem,
			const char **layout);
/*
 * Open for vmm_run (r->snap, and for a store's: the state, the page map, the lazy RAM
 * with the trace options of t): a directory's disk.delta becomes overlay (a new file). 0,
 * or 1 (said why).
 */
int run_restore_open(struct run_restore *r, const struct cli_remote *rem,
		     const char *store_dir, const char *layout, bool layout_fetched,
		     const char *overlay, const struct cli_trace *t);
/* What vmm_run takes from it. */
void run_restore_to_vmm(struct run_restore *r, struct vmm_opts *vo);
/* After the VM: the RAM's statistics noted, everything closed. */
void run_restore_close(struct run_restore *r);

#endif
