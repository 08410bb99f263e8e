/* SPDX-License-Identifier: MIT */
/* The lazy RAM restore's parts (lazyram.h): one struct, the files' entry points. */
#ifndef LZ_VMM_LAZYRAM_INTERNAL_H
#define LZ_VMM_LAZYRAM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "lazyram.h"

#define LR_THREADS_MAX 8
/* Most pages one resolution maps besides the faulting one: a 2 MiB window around it. */
#define LR_RUN_PAGES 512u

/* The shared cache of one snapshot (lazyram_cache.c). */
struct lr_cache {
	int dirfd;
	int fd;                          /* HEX.ram, flock(LOCK_SH) held */
	char name[2 * LAZYRAM_ID_LEN + 8];
	_Atomic uint64_t *filled;        /* HEX.filled, mapped shared */
	size_t filled_len;
};

/* A first touch (lazyram_trace.c). */
struct lr_touch {
	uint64_t page;
	uint64_t t_us;
};

struct lazyram {
	struct lazyram_opts o;
	const struct rammap *m;
	struct lr_cache c;
	_Atomic uint64_t *mapped;        /* this process: pages mapped (a hint for runs) */
	_Atomic uint64_t *failed;        /* pages whose fault was left unresolved */
	_Atomic uint64_t *touched;       /* opts.record: pages recorded */
	_Atomic int fatal_said;
	uint8_t *base;                   /* the registered mapping (never read here) */
	int uffd, stopfd;
	struct timespec t0;              /* lazyram_start */
	pthread_t th[LR_THREADS_MAX];
	unsigned nth;
	pthread_t pf;
	bool pf_running, stopped;
	_Atomic bool pf_stop;
	pthread_mutex_t lock;            /* the touches */
	struct lr_touch *touch;
	size_t ntouch, cap_touch;
	bool touch_truncated;
	struct {
		_Atomic uint64_t missing, minor, zero, zeroed, continued, filled, chunks;
		_Atomic uint64_t frame, data, fetch_us, eexist, eagain, failed;
		_Atomic uint64_t first_us, last_us;
		_Atomic uint64_t pf_chunks, pf_pages, pf_bytes;
		_Atomic bool pf_done;
	} st;
};

static inline bool lr_bit(_Atomic uint64_t *bm, uint64_t i)
{
	return atomic_load_explicit(&bm[i / 64], memory_order_acquire) >> (i % 64) & 1;
}

/* Sets bit i; true when it was clear. */
static inline bool lr_bit_set(_Atomic uint64_t *bm, uint64_t i)
{
	uint64_t b = 1ull << (i % 64);

	return !(atomic_fetch_or_explicit(&bm[i / 64], b, memory_order_release) & b);
}

static inline uint64_t lr_bitmap_words(uint64_t npages)
{
	return (npages + 63) / 64;
}

/* µs since lazyram_start. */
static inline uint64_t lr_now_us(const struct lazyram *lr)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (uint64_t)((now.tv_sec - lr->t0.tv_sec) * 1000000 +
			  (now.tv_nsec - lr->t0.tv_nsec) / 1000);
}

/* lazyram_cache.c */
int lr_cache_open(struct lazyram *lr, char *why, size_t why_len);
void lr_cache_close(struct lr_cache *c);

/* lazyram_fill.c: chunk c (index) fetched, verified, its pages written and marked filled. */
int lr_fill_chunk(struct lazyram *lr, uint32_t c, bool bg, char *why, size_t why_len);
/*
 * Map pages [first, first + n): the zero page (UFFDIO_ZEROPAGE) or the file's (UFFDIO_
 * CONTINUE), waking who waits on them. A page mapped already (EEXIST) is skipped and not
 * woken. The count of those, or -errno (-EAGAIN: the mapping is changing, wake and retry).
 */
int lr_map_range(struct lazyram *lr, bool zero, uint64_t first, uint64_t n);
void lr_wake(struct lazyram *lr, uint64_t page);
void lr_fatal(struct lazyram *lr, uint64_t page, uint32_t c, const char *what);

/* lazyram_fault.c */
int lr_uffd_open(struct lazyram *lr, char *why, size_t why_len);
int lr_handlers_start(struct lazyram *lr, char *why, size_t why_len);

/* lazyram_prefetch.c */
int lr_prefetch_start(struct lazyram *lr);

/* lazyram_trace.c */
void lr_touch_note(struct lazyram *lr, uint64_t page, uint64_t t_us);
int lr_trace_check(const struct lazyram_opts *o, char *why, size_t why_len);

#endif
