/* SPDX-License-Identifier: MIT */
/* The lazy RAM restore's life (lazyram.h): open, start, stop, close, statistics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/json_out.h"
#include "internal.h"

static _Atomic uint64_t *bitmap_new(uint64_t npages)
{
	return calloc(lr_bitmap_words(npages), sizeof(uint64_t));
}

int lazyram_open(const struct lazyram_opts *opts, struct lazyram **out, int *fd, char *why,
		 size_t why_len)
{
	const struct rammap *m = opts->map;
	struct lazyram *lr;
	int ret;

	if (why_len)
		why[0] = '\0';
	if (!m || !opts->src || !m->npages || !m->user_off ||
	    m->mem_size != m->npages * LAZYRAM_PAGE)
		return why_set(why, why_len, -EINVAL, "lazy RAM: no page map or source, or a map "
			       "not indexed");
	ret = lr_trace_check(opts, why, why_len);
	if (ret)
		return ret;
	lr = calloc(1, sizeof(*lr));
	if (!lr)
		return -ENOMEM;
	lr->o = *opts;
	lr->m = m;
	lr->uffd = lr->stopfd = -1;
	lr->c.dirfd = lr->c.fd = -1;
	pthread_mutex_init(&lr->lock, NULL);
	clock_gettime(CLOCK_MONOTONIC, &lr->t0);
	lr->mapped = bitmap_new(m->npages);
	lr->failed = bitmap_new(m->npages);
	lr->touched = opts->record ? bitmap_new(m->npages) : NULL;
	if (!lr->mapped || !lr->failed || (opts->record && !lr->touched))
		ret = -ENOMEM;
	if (!ret)
		ret = lr_cache_open(lr, why, why_len);
	if (ret) {
		lazyram_close(lr);
		return ret;
	}
	*fd = lr->c.fd;
	*out = lr;
	return 0;
}

void lazyram_set_fatal(struct lazyram *lr, lazyram_fatal_fn fatal, void *arg)
{
	lr->o.fatal = fatal;
	lr->o.fatal_arg = arg;
}

int lazyram_fd(const struct lazyram *lr)
{
	return lr->c.fd;
}

int lazyram_start(struct lazyram *lr, void *map, size_t size, char *why, size_t why_len)
{
	int ret;

	if (why_len)
		why[0] = '\0';
	if (lr->base || size != lr->m->mem_size || (uintptr_t)map % LAZYRAM_PAGE ||
	    !lr->o.fatal)
		return why_set(why, why_len, -EINVAL, "lazy RAM: started twice or without a "
			       "fatal callback, or a mapping of %zu bytes for %llu", size,
			       (unsigned long long)lr->m->mem_size);
	lr->base = map;
	clock_gettime(CLOCK_MONOTONIC, &lr->t0);
	ret = lr_uffd_open(lr, why, why_len);
	if (ret)
		return ret;
	lr->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (lr->stopfd < 0)
		return why_set(why, why_len, -errno, "eventfd: %s", strerror(errno));
	ret = lr_handlers_start(lr, why, why_len);
	if (!ret && lr->o.prefetch) {
		ret = lr_prefetch_start(lr);
		if (ret)
			why_set(why, why_len, ret, "prefetch thread: %s", strerror(-ret));
	}
	if (ret)
		lazyram_stop(lr);
	return ret;
}

void lazyram_stop(struct lazyram *lr)
{
	uint64_t one = 1;

	if (!lr || lr->stopped)
		return;
	lr->stopped = true;
	atomic_store(&lr->pf_stop, true);
	if (lr->stopfd >= 0 && write(lr->stopfd, &one, sizeof(one)) < 0)
		abort(); /* an eventfd that cannot count to 1: the threads would never end */
	for (unsigned i = 0; i < lr->nth; i++)
		pthread_join(lr->th[i], NULL);
	lr->nth = 0;
	if (lr->pf_running)
		pthread_join(lr->pf, NULL);
	lr->pf_running = false;
}

/* The pages that failed: inaccessible before the userfaultfd goes (lazyram_close). */
static void fence_failed(struct lazyram *lr)
{
	if (!lr->base || !atomic_load(&lr->st.failed))
		return;
	for (uint64_t p = 0; p < lr->m->npages; p++)
		if (lr_bit(lr->failed, p) &&
		    mmap(lr->base + p * LAZYRAM_PAGE, LAZYRAM_PAGE, PROT_NONE,
			 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) == MAP_FAILED)
			abort(); /* never let a waiting thread read the hole as zeros */
}

void lazyram_close(struct lazyram *lr)
{
	if (!lr)
		return;
	lazyram_stop(lr);
	fence_failed(lr);
	if (lr->uffd >= 0)
		close(lr->uffd);
	if (lr->stopfd >= 0)
		close(lr->stopfd);
	lr_cache_close(&lr->c);
	pthread_mutex_destroy(&lr->lock);
	free((void *)lr->mapped);
	free((void *)lr->failed);
	free((void *)lr->touched);
	free(lr->touch);
	free(lr);
}

void lazyram_get_stats(struct lazyram *lr, struct lazyram_stats *st)
{
	*st = (struct lazyram_stats){
		.faults_missing = lr->st.missing, .faults_minor = lr->st.minor,
		.faults_zero = lr->st.zero, .pages_zeroed = lr->st.zeroed,
		.pages_continued = lr->st.continued, .pages_filled = lr->st.filled,
		.chunks_fetched = lr->st.chunks, .bytes_frame = lr->st.frame,
		.bytes_data = lr->st.data, .fetch_us = lr->st.fetch_us,
		.eexist = lr->st.eexist, .eagain = lr->st.eagain, .failed = lr->st.failed,
		.first_fault_us = lr->st.first_us, .last_fault_us = lr->st.last_us,
		.prefetch_chunks = lr->st.pf_chunks, .prefetch_pages = lr->st.pf_pages,
		.prefetch_bytes = lr->st.pf_bytes, .prefetch_done = lr->st.pf_done,
	};
}

void lazyram_prefetch_progress(struct lazyram *lr, uint64_t *pages, uint64_t *bytes)
{
	*pages = atomic_load(&lr->st.pf_pages);
	*bytes = atomic_load(&lr->st.pf_bytes);
}

int lazyram_stats_json(struct lazyram *lr, FILE *f)
{
	struct json_buf b = { 0 };
	struct lazyram_stats s;
	int ret;

	lazyram_get_stats(lr, &s);
	json_buf_puts(&b, "{");
	json_field_u64(&b, "pages", lr->m->npages);
	json_field_u64(&b, "faults_missing", s.faults_missing);
	json_field_u64(&b, "faults_minor", s.faults_minor);
	json_field_u64(&b, "faults_zero", s.faults_zero);
	json_field_u64(&b, "pages_zeroed", s.pages_zeroed);
	json_field_u64(&b, "pages_continued", s.pages_continued);
	json_field_u64(&b, "pages_filled", s.pages_filled);
	json_field_u64(&b, "chunks_fetched", s.chunks_fetched);
	json_field_u64(&b, "bytes_frame", s.bytes_frame);
	json_field_u64(&b, "bytes_data", s.bytes_data);
	json_field_u64(&b, "fetch_us", s.fetch_us);
	json_field_u64(&b, "eexist", s.eexist);
	json_field_u64(&b, "eagain", s.eagain);
	json_field_u64(&b, "failed", s.failed);
	json_field_u64(&b, "first_fault_us", s.first_fault_us);
	json_field_u64(&b, "last_fault_us", s.last_fault_us);
	json_field_u64(&b, "prefetch_chunks", s.prefetch_chunks);
	json_field_u64(&b, "prefetch_pages", s.prefetch_pages);
	json_field_u64(&b, "prefetch_bytes", s.prefetch_bytes);
	json_field_bool(&b, "prefetch_done", s.prefetch_done);
	json_buf_puts(&b, "}");
	if (b.err) {
		ret = b.err;
		json_buf_free(&b);
		return ret;
	}
	ret = fwrite(b.p, 1, b.len, f) == b.len ? 0 : -EIO;
	json_buf_free(&b);
	return ret;
}
