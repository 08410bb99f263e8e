/* SPDX-License-Identifier: MIT */
/*
 * lazyblk run --restore (run_restore.h): a snapshot directory, a snapshot in a store, or
 * one by reference, opened for vmm_run.
 */
#include "run_restore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../blkd/overlay/overlay.h"
#include "../cas/remote/image_ref.h"
#include "../layout/snap_ref.h"
#include "../cas/source.h"
#include "../cas/trace.h"
#include "../common/block.h"
#include "../common/log.h"
#include "../layout/layout.h"
#include "../vmm-glue/lazyram/lazyram.h"
#include "../vmm-glue/vm_snapshot.h"
#include "../vmm-glue/vm_snapshot_store.h"
#include "../vmm-glue/vmm.h"
#include "../vmsnap/ramstore.h"
#include "../vmsnap/snapfile.h"

/* SNAPDIR/snapshot.json, read and parsed. 0, 1 (said why), or -ENOENT: not there. */
static int restore_local(struct run_restore *r, const char *store_dir)
{
	char path[PATH_MAX + 32], why[WHY_MAX + PATH_MAX] = "";
	struct snapfile f = { 0 };
	int ret;

	snprintf(path, sizeof(path), "%s/%s", r->arg, SNAPFILE_NAME);
	if (access(path, F_OK))
		return -ENOENT;   /* a snapshot directory (vm.state), or nothing: restore_dir */
	ret = snapfile_read(r->arg, &f, why, sizeof(why));
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		return 1;
	}
	r->doc = f.d;
	memcpy(r->id, f.id, SHA256_LEN);
	r->in_store = true;
	snapfile_free(&f);
	if (!store_dir) {
		log_error("%s: a snapshot in a store: give --store DIR (the store it was taken "
			  "into, or a cache of its remote)", r->arg);
		return 1;
	}
	return 0;
}

/* A reference: the document and the image's layouts fetched into the store. */
static int restore_fetch(struct run_restore *r, const char *store_dir, struct cli_remote *rem)
{
	struct remote_opts ro = { .url = r->arg, .concurrency = rem->concurrency,
				  .timeout_ms = rem->timeout_ms, .retries = rem->retries };
	char why[WHY_MAX + PATH_MAX] = "";
	int ret;

	if (!store_dir) {
		log_error("%s: a snapshot by reference needs --store DIR (a cache: its files are "
			  "fetched there)", r->arg);
		return 1;
	}
	r->fetched = calloc(1, sizeof(*r->fetched));
	if (!r->fetched) {
		log_error("out of memory");
		return 1;
	}
	ret = snap_fetch(&ro, store_dir, r->fetched, why, sizeof(why));
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		return 1;
	}
	if (r->fetched->fetched)
		log_info("%s: fetched %u file%s into %s", r->arg, r->fetched->fetched,
			 r->fetched->fetched == 1 ? "" : "s", store_dir);
	if (!rem->url)
		rem->url = r->fetched->chunk_url;
	r->doc = r->fetched->d;
	memcpy(r->id, r->fetched->id, SHA256_LEN);
	r->in_store = true;
	return 0;
}

int run_restore_resolve(struct run_restore *r, const char *store_dir, struct cli_remote *rem,
			const char **layout)
{
	char hex[SHA256_HEX_LEN + 1];
	int ret;

	if (image_ref_is(r->arg))
		ret = restore_fetch(r, store_dir, rem);
	else if ((ret = restore_local(r, store_dir)) == -ENOENT)
		return 0;   /* a snapshot directory (vm.state): run_restore_open */
	if (ret)
		return 1;
	if (*layout) {
		log_error("%s names its image: drop %s", r->arg, *layout);
		return 1;
	}
	if (r->doc.has_disk) {
		sha256_to_hex(r->doc.layout, hex);
		snprintf(r->layout, sizeof(r->layout), "%s/layouts/%s.layout", store_dir, hex);
		*layout = r->layout;
	}
	return 0;
}

/*
 * A snapshot directory: opened and checked; its disk delta becomes the new overlay (for
 * the same layout) before the image is opened. 0, or 1 (said why).
 */
static int restore_dir(struct run_restore *r, const char *layout, bool fetched,
		       const char *overlay)
{
	const struct vm_snapshot_info *si;
	char why[PATH_MAX + 256], delta[PATH_MAX + 16];
	char lwhy[WHY_MAX] = "";
	struct layout *l = NULL;
	int ret;

	if (vm_snapshot_open(r->arg, &r->snap, why, sizeof(why)))
		return cli_fail(-EINVAL, why), 1;
	si = vm_snapshot_info(r->snap);
	if (!layout)
		return 0;   /* vmm_run refuses a snapshot that had an image */
	ret = layout_open_flags(layout, fetched ? LAYOUT_OPEN_FETCHED : 0, &l, lwhy,
				sizeof(lwhy));
	if (ret) {
		log_error("%s: %s", layout, lwhy[0] ? lwhy : strerror(-ret));
		return 1;
	}
	ret = 1;
	if (!si->has_layout || memcmp(l->digest, si->layout_digest, SHA256_LEN))
		log_error("%s: taken with another image layout than %s", r->arg, layout);
	else if (si->has_delta && !overlay)
		log_error("%s holds the disk's writes (disk.delta): give --overlay NEW, a new "
			  "file", r->arg);
	else if (si->has_delta && access(overlay, F_OK) == 0)
		log_error("--overlay %s exists: a restore starts a new overlay from the "
			  "snapshot's disk delta", overlay);
	else
		ret = 0;
	if (!ret && si->has_delta) {
		snprintf(delta, sizeof(delta), "%s/%s", r->arg, VMSNAP_DELTA);
		if (overlay_apply_delta(delta, overlay, l->digest,
					l->hdr.block_count * DISK_BLOCK, lwhy, sizeof(lwhy))) {
			log_error("%s: %s", delta, lwhy[0] ? lwhy : "cannot apply");
			ret = 1;
		}
	}
	layout_close(l);
	return ret;
}

/* A snapshot in a store: its state and page map through the tiers, the lazy RAM. */
static int restore_store(struct run_restore *r, const struct cli_remote *rem,
			 const char *store_dir, const char *overlay, const struct cli_trace *t)
{
	struct cas_source_opts so = { .store_dir = store_dir };
	char why[WHY_MAX + PATH_MAX] = "";
	const struct vm_snapshot_info *si;
	struct lazyram_opts lo = { 0 };
	uint8_t *state = NULL;
	size_t len = 0;
	int ret, fd;

	cli_remote_to_source(rem, &so);
	ret = cas_source_open(&so, &r->src, why, sizeof(why));
	if (!ret)
		ret = ramstore_load_state(r->src, &r->doc, &state, &len, why, sizeof(why));
	if (!ret)
		ret = vm_snapshot_open_blob(r->arg, state, len, &r->snap, why, sizeof(why));
	if (!ret)
		ret = ramstore_load_map(r->src, &r->doc, &r->map, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", r->arg, why[0] ? why : strerror(-ret));
		return 1;
	}
	si = vm_snapshot_info(r->snap);
	if (si->mem_size != r->doc.mem_size || si->ncpus != r->doc.ncpus ||
	    si->has_layout != r->doc.has_disk) {
		log_error("%s: the snapshot document and its vm.state do not agree on the machine",
			  r->arg);
		return 1;
	}
	if (si->disk_rw && !overlay) {
		log_error("%s: its disk was written: give --overlay NEW (a new file) for the "
			  "restored VM's writes", r->arg);
		return 1;
	}
	if (si->disk_rw && access(overlay, F_OK) == 0) {
		log_error("--overlay %s exists: a restore starts a new overlay", overlay);
		return 1;
	}
	if (t->prefetch && (ret = trace_load(t->prefetch, &r->prefetch, why, sizeof(why)))) {
		log_error("--prefetch %s: %s", t->prefetch, why[0] ? why : strerror(-ret));
		return 1;
	}
	lo = (struct lazyram_opts){ .map = r->map, .src = r->src, .cache_dir = r->ram_cache,
				    .record = t->record != NULL, .prefetch = r->prefetch };
	memcpy(lo.id, r->id, SHA256_LEN);
	r->record = t->record;
	ret = lazyram_open(&lo, &r->lazy, &fd, why, sizeof(why));
	if (ret) {
		log_error("%s: guest RAM: %s", r->arg, why[0] ? why : strerror(-ret));
		return 1;
	}
	return 0;
}

int run_restore_open(struct run_restore *r, const struct cli_remote *rem,
		     const char *store_dir, const char *layout, bool layout_fetched,
		     const char *overlay, const struct cli_trace *t)
{
	if (!r->in_store)
		return restore_dir(r, layout, layout_fetched, overlay);
	return restore_store(r, rem, store_dir, overlay, t);
}

void run_restore_to_vmm(struct run_restore *r, struct vmm_opts *vo)
{
	vo->restore = r->snap;
	vo->lazy = r->lazy;
	vo->lazy_map = r->map;
	vo->lazy_id = r->in_store ? r->id : NULL;
}

/* What the lazy RAM did, for -v. */
static void run_restore_stats(struct run_restore *r)
{
	struct lazyram_stats st;

	lazyram_get_stats(r->lazy, &st);
	log_info("guest RAM: %llu faults (%llu on zero pages, %llu on pages another restore "
		 "brought in), %llu chunks fetched (%llu bytes), %llu pages prefetched",
		 (unsigned long long)(st.faults_missing + st.faults_minor),
		 (unsigned long long)st.faults_zero, (unsigned long long)st.faults_minor,
		 (unsigned long long)st.chunks_fetched, (unsigned long long)st.bytes_frame,
		 (unsigned long long)st.prefetch_pages);
}

void run_restore_close(struct run_restore *r)
{
	char why[WHY_MAX] = "";
	int ret;

	if (r->lazy && r->record) {
		ret = lazyram_trace_write(r->lazy, r->record, why, sizeof(why));
		if (ret)
			log_error("--trace-record %s: %s", r->record, why[0] ? why : strerror(-ret));
		else
			log_info("RAM working set written to %s", r->record);
	}
	if (r->lazy)
		run_restore_stats(r);
	lazyram_close(r->lazy);
	r->lazy = NULL;
	rammap_free(r->map);
	r->map = NULL;
	vm_snapshot_close(r->snap);
	r->snap = NULL;
	cas_source_close(r->src);
	r->src = NULL;
	trace_free(r->prefetch);
	r->prefetch = NULL;
	if (r->fetched)
		snap_fetched_free(r->fetched);
	free(r->fetched);
	r->fetched = NULL;
}
