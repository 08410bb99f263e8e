/* SPDX-License-Identifier: MIT */
/*
 * The pages a restore wrote (lazyram_written), for a second snapshot that stores only what
 * changed: /proc/self/pagemap of the mapping (the kernel's
 * Documentation/admin-guide/mm/pagemap.rst). Pages of the cache file mapped by UFFDIO_CONTINUE
 * are "file-page"; a page the guest wrote is a private anonymous copy (present, or swapped);
 * a zero page of the map UFFDIO_ZEROPAGE mapped is present and not of a file either, and is
 * told apart from a written one by its page frame when the kernel shows frames (CAP_SYS_ADMIN:
 * the zero page's frame is learnt by reading a fresh anonymous page), else by "exclusively
 * mapped" (bit 56), which the shared zero page never is — and a private copy is, unless a
 * fork shares it (the VMM keeps guest RAM MADV_DONTFORK).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "internal.h"

#define PM_PFN(e) ((e) & ((1ull << 55) - 1))
#define PM_EXCLUSIVE (1ull << 56)
#define PM_FILE (1ull << 61)
#define PM_SWAP (1ull << 62)
#define PM_PRESENT (1ull << 63)
#define BATCH 4096u

/* The zero page's frame, or 0 when the kernel hides frames. */
static uint64_t zero_pfn(int pm)
{
	volatile uint8_t *p = mmap(NULL, LAZYRAM_PAGE, PROT_READ,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t e = 0;

	if (p == MAP_FAILED)
		return 0;
	(void)p[0]; /* a read fault: the zero page */
	if (fs_pread_full(pm, &e, sizeof(e), (off_t)((uintptr_t)p / LAZYRAM_PAGE * 8)))
		e = 0;
	munmap((void *)p, LAZYRAM_PAGE);
	return e & PM_PRESENT ? PM_PFN(e) : 0;
}

static bool written(const struct rammap *m, uint64_t p, uint64_t e, uint64_t zpfn)
{
	if (!(e & (PM_PRESENT | PM_SWAP)) || (e & PM_FILE))
		return false;
	if (m->pages[p].chunk || (e & PM_SWAP))
		return true; /* a copy: the file's pages are never mapped any other way */
	if (zpfn)
		return PM_PFN(e) != zpfn;
	return e & PM_EXCLUSIVE;
}

int lazyram_written(struct lazyram *lr, uint64_t *bitmap, uint64_t *n, char *why,
		    size_t why_len)
{
	const struct rammap *m = lr->m;
	uint64_t e[BATCH], zpfn;
	int pm, ret = 0;

	if (why_len)
		why[0] = '\0';
	if (!lr->base)
		return why_set(why, why_len, -EINVAL, "lazy RAM: not started");
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return why_set(why, why_len, -errno, "/proc/self/pagemap: %s", strerror(errno));
	zpfn = zero_pfn(pm);
	memset(bitmap, 0, lr_bitmap_words(m->npages) * sizeof(uint64_t));
	*n = 0;
	for (uint64_t p = 0; p < m->npages && !ret; p += BATCH) {
		uint64_t k = m->npages - p < BATCH ? m->npages - p : BATCH;
		off_t off = (off_t)(((uintptr_t)lr->base / LAZYRAM_PAGE + p) * 8);

		ret = fs_pread_full(pm, e, k * 8, off);
		if (ret) {
			why_set(why, why_len, ret, "/proc/self/pagemap: %s", strerror(-ret));
			break;
		}
		for (uint64_t i = 0; i < k; i++) {
			if (!written(m, p + i, e[i], zpfn))
				continue;
			bitmap[(p + i) / 64] |= 1ull << ((p + i) % 64);
			(*n)++;
		}
	}
	close(pm);
	return ret;
}
