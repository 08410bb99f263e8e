/* SPDX-License-Identifier: MIT */
/*
 * The lazy restore of a VM snapshot's RAM (issue 27, item 3): guest RAM is a private mapping
 * of a page cache file shared by every restore of one snapshot on this host, filled on first
 * touch through userfaultfd from the snapshot's chunks (vmsnap/rammap.h, cas/source.h).
 *
 *   the cache      DIR/HEX.ram: a sparse tmpfs file of mem_size bytes, HEX the snapshot id;
 *                  DIR/HEX.filled: one bit per page, mapped shared, set (atomically) only
 *                  once the page's verified bytes are written whole into HEX.ram. Users hold
 *                  flock(LOCK_SH) on HEX.ram; the last to close removes both. DIR is
 *                  /dev/shm/lazyblk-UID unless given, 0700, ours, on tmpfs (lazyram_cache.c)
 *   the mapping    the caller maps lazyram_fd() MAP_PRIVATE as guest RAM: clones share the
 *                  pages none of them wrote, a guest write copies the page (never reaches the
 *                  file)
 *   a fault        (lazyram_fault.c) on page p, registered MISSING|MINOR: a zero page of the
 *                  map → UFFDIO_ZEROPAGE (with the unmapped zero pages around it); a filled
 *                  page → UFFDIO_CONTINUE (with its filled neighbours of the same chunk);
 *                  else its chunk is fetched (cas_source_get, verified), every page of the
 *                  map it holds written into the file and marked filled, then CONTINUE
 *   a failure      a chunk that cannot be had (missing, corrupt, of the wrong length) is
 *                  never mapped: opts.fatal gets one line naming the chunk and the page, and
 *                  the fault stays unresolved (the VMM stops the VM); lazyram_close then
 *                  fences the pages that failed (see there)
 *   prefetch       (lazyram_prefetch.c) the RAM records of a trace replayed ahead of the
 *                  guest, one chunk at a time at background priority; demand faults join
 *                  the chain's single flight and raise it
 *   the trace      (lazyram_trace.c) the first touches of this process's faults, written as
 *                  the RAM records of a trace (cas/trace.h, version 2)
 *
 * The handler threads never touch the registered mapping. Nothing here prints: the chunk
 * layers log a failed chunk once (docs/conventions.md); the rest is returned or handed to
 * opts.fatal. Needs userfaultfd with UFFD_FEATURE_MISSING_SHMEM and UFFD_FEATURE_MINOR_SHMEM
 * (Linux 5.14+): the userfaultfd(2) system call, else /dev/userfaultfd.
 */
#ifndef LZ_VMM_LAZYRAM_H
#define LZ_VMM_LAZYRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../../cas/source.h"
#include "../../common/test_hook.h"
#include "../../cas/trace.h"
#include "../../vmsnap/rammap.h"

#define LAZYRAM_ID_LEN 32
#define LAZYRAM_PAGE RAMMAP_PAGE

struct lazyram;

/* One line: why a page cannot be had. Called on a handler or prefetch thread, once. */
typedef void (*lazyram_fatal_fn)(void *arg, const char *reason);

struct lazyram_opts {
	const struct rammap *map;          /* the snapshot's page map, indexed (kept by the
					    * caller until lazyram_close) */
	struct cas_source *src;            /* where its chunks come from (the caller's) */
	uint8_t id[LAZYRAM_ID_LEN];        /* the snapshot's id: names the cache files */
	const char *cache_dir;             /* NULL: /dev/shm/lazyblk-UID */
	lazyram_fatal_fn fatal;            /* required by lazyram_start (or lazyram_set_fatal) */
	void *fatal_arg;
	unsigned threads;                  /* fault handler threads (0: 1) */
	bool record;                       /* keep the first touches for lazyram_trace_write */
	const struct trace *prefetch;      /* replay its RAM records ahead of the guest (the
					    * caller's, kept until lazyram_close); NULL: none */
};

struct lazyram_stats {
	uint64_t faults_missing;           /* faults on pages not in the cache file */
	uint64_t faults_minor;             /* faults on pages in the cache file's page cache */
	uint64_t faults_zero;              /* of them, on zero pages of the map */
	uint64_t pages_zeroed;             /* pages mapped as the zero page (runs included) */
	uint64_t pages_continued;          /* pages mapped from the cache file, by faults */
	uint64_t pages_filled;             /* pages this process wrote into the cache file */
	uint64_t chunks_fetched;           /* chunks taken through the source by this process */
	uint64_t bytes_frame;              /* their compressed bytes (cas_source_get), the
					    * prefetch's chunks included */
	uint64_t bytes_data;               /* their decompressed bytes */
	uint64_t fetch_us;                 /* time the handlers spent fetching and filling */
	uint64_t eexist, eagain;           /* resolutions that found the page mapped, retried */
	uint64_t failed;                   /* faults left unresolved: the page cannot be had */
	uint64_t first_fault_us;           /* from lazyram_start to the first fault (0: none) */
	uint64_t last_fault_us;            /* to the latest */
	uint64_t prefetch_chunks;          /* chunks the prefetch filled (or found filled) */
	uint64_t prefetch_pages;           /* pages it mapped ahead of the guest */
	uint64_t prefetch_bytes;           /* compressed bytes it fetched from the remote
					    * (also in bytes_frame, as it loads them) */
	bool prefetch_done;                /* the prefetch went through its trace */
};

/*
 * Open (creating if needed) the cache of snapshot opts->id and take a share of it. *fd gets
 * the descriptor to map MAP_PRIVATE (PROT_READ|PROT_WRITE, mem_size bytes; lazyram_close
 * closes it). 0, or -errno with one line in why: "cache dir DIR: not on tmpfs",
 * "cache file DIR/HEX.ram: 4096 bytes, not the snapshot's 1073741824", "trace recorded on
 * another snapshot". Prints nothing.
 */
int lazyram_open(const struct lazyram_opts *opts, struct lazyram **out, int *fd, char *why,
		 size_t why_len);
/*
 * The fatal callback, when the one who handles it exists only after lazyram_open (the VMM's
 * VM): before lazyram_start.
 */
void lazyram_set_fatal(struct lazyram *lr, lazyram_fatal_fn fatal, void *arg);
/* The descriptor lazyram_open gave (to map MAP_PRIVATE). */
int lazyram_fd(const struct lazyram *lr);
/*
 * Register map (size == mem_size bytes, the caller's private mapping of the fd) with
 * userfaultfd and start the fault handler threads (and the prefetch). -ENOSYS or -EPERM
 * when userfaultfd cannot be had, -EOPNOTSUPP when it lacks shmem's missing and minor
 * faults; one line in why.
 */
int lazyram_start(struct lazyram *lr, void *map, size_t size, char *why, size_t why_len);
/*
 * Stop the handler and prefetch threads (the registration stays: a fault from now on waits
 * until lazyram_close). Idempotent.
 */
void lazyram_stop(struct lazyram *lr);
/*
 * Stop, then end: every page that failed is first replaced in the mapping by an inaccessible
 * one (a thread blocked on it then faults, SIGSEGV or KVM's -EFAULT, instead of reading the
 * file's hole as zeros when the userfaultfd goes), the userfaultfd is closed, the share of
 * the cache given back (the last user removes its files). The caller unmaps the RAM.
 */
void lazyram_close(struct lazyram *lr);

void lazyram_get_stats(struct lazyram *lr, struct lazyram_stats *st);
/* The statistics as one JSON object (no newline) into f; -EIO when f failed. */
int lazyram_stats_json(struct lazyram *lr, FILE *f);
/* How far the prefetch got: pages mapped ahead, compressed bytes fetched. */
TEST_HOOK
void lazyram_prefetch_progress(struct lazyram *lr, uint64_t *pages, uint64_t *bytes);

/*
 * With the VM paused: set in bitmap (npages bits, the caller's, zeroed here) the pages this
 * process wrote since the restore, from /proc/self/pagemap of the mapping: a page present
 * (or swapped) and not of the file is a private copy or the zero page; the zero pages of the
 * map are counted only when the page is mapped exclusively (bit 56: not the shared zero
 * page). *n gets the count. -errno with one line in why.
 */
int lazyram_written(struct lazyram *lr, uint64_t *bitmap, uint64_t *n, char *why,
		    size_t why_len);

/*
 * Write the first touches recorded (opts.record) as a trace (cas/trace.h, version 2: RAM
 * records, the snapshot id; the manifest and layout digests zero). -EINVAL without
 * opts.record; -errno with one line in why.
 */
int lazyram_trace_write(struct lazyram *lr, const char *path, char *why, size_t why_len);

#endif
