/* SPDX-License-Identifier: MIT */
/*
 * The pages a restore wrote (lazyram_written), for a second snapshot that stores only what
 * changed: /proc/self/pagemap of the mapping (the kernel's
 * Documentation/admin-guide/mm/pagemap.rst). Pages of the cache file mapped by UFFDIO_CONTINUE
 * are "file-page"; a page the guest wrote is a private anonymous copy (present, or swapped);
 * a zero page of the map UFFDIO_ZEROPAGE mapped is present and not of a file either, and is
 * told apart from a written one by "exclusively mapped" (bit 56), which the shared zero page
 * never is and a private copy is, unless a fork shares it: the VMM keeps guest RAM
 * MADV_DONTFORK (or forks nothing after the restore). Page frames are not used (shown only
 * to CAP_SYS_ADMIN; and an anonymous read fault does not always map the zero page).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "internal.h"

#define PM_EXCLUSIVE (1ull << 56)
#define PM_FILE (1ull << 61)
#define PM_SWAP (1ull << 62)
#define PM_PRESENT (1ull << 63)
#define BATCH 4096u

static bool written(const struct rammap *m, uint64_t p, uint64_t e)
{
	if (!(e & (PM_PRESENT | PM_SWAP)) || (e & PM_FILE))
		return false;
	if (m->pages[p].chunk || (e & PM_SWAP))
		return true; /* a copy: the file's pages are never mapped any other way */
	return e & PM_EXCLUSIVE; /* a copy; the shared zero page never is */
}

int lazyram_written(struct lazyram *lr, uint64_t *bitmap, uint64_t *n, char *why,
		    size_t why_len)
{
	const struct rammap *m = lr->m;
	uint64_t e[BATCH];
	int pm, ret = 0;

	if (why_len)
		why[0] = '\0';
	if (!lr->base)
		return why_set(why, why_len, -EINVAL, "lazy RAM: not started");
	pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return why_set(why, why_len, -errno, "/proc/self/pagemap: %s", strerror(errno));
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
			if (!written(m, p + i, e[i]))
				continue;
			bitmap[(p + i) / 64] |= 1ull << ((p + i) % 64);
			(*n)++;
		}
	}
	close(pm);
	return ret;
}
