/* SPDX-License-Identifier: MIT */
/*
 * A chunk into the cache file (its pages written, then marked filled), pages of the file
 * into the mapping (UFFDIO_CONTINUE) or the zero page (UFFDIO_ZEROPAGE), and the one line
 * of a page that cannot be had: what the fault handlers and the prefetch share.
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "../../common/fsutil.h"
#include "internal.h"

/* Write the pages of chunk c that are not filled yet, each run of pages in one pwrite. */
static int write_pages(struct lazyram *lr, uint32_t c, const uint8_t *data)
{
	const struct rammap *m = lr->m;
	const uint32_t *u = m->users + m->user_off[c];
	size_t n = m->user_off[c + 1] - m->user_off[c];

	for (size_t i = 0; i < n;) {
		uint64_t p = u[i], slot = m->pages[p].slot;
		size_t run = 1;
		int ret;

		if (lr_bit(lr->c.filled, p)) {
			i++;
			continue;
		}
		while (i + run < n && run < LR_RUN_PAGES && u[i + run] == p + run &&
		       m->pages[p + run].slot == slot + run && !lr_bit(lr->c.filled, p + run))
			run++;
		ret = fs_pwrite_full(lr->c.fd, data + slot * LAZYRAM_PAGE, run * LAZYRAM_PAGE,
				     (off_t)(p * LAZYRAM_PAGE));
		if (ret)
			return ret;
		/* only now: the bytes are whole in the file's page cache */
		for (size_t k = 0; k < run; k++)
			if (lr_bit_set(lr->c.filled, p + k))
				atomic_fetch_add(&lr->st.filled, 1);
		i += run;
	}
	return 0;
}

int lr_fill_chunk(struct lazyram *lr, uint32_t c, bool bg, char *why, size_t why_len)
{
	const struct rammap_chunk *ch = &lr->m->chunks[c];
	size_t want = rammap_chunk_bytes(lr->m, c), len = 0, frame = 0;
	void *block = NULL;
	int ret;

	if (bg) {
		ret = cas_source_fetch(lr->o.src, ch->digest, want, true, &frame);
		if (ret < 0)
			return why_set(why, why_len, ret, "cannot be fetched (%s)", strerror(-ret));
		if (ret == 1)
			atomic_fetch_add(&lr->st.pf_bytes, frame);
	}
	ret = cas_source_get(lr->o.src, ch->digest, want, 0, &block, &len, &frame);
	if (ret)
		return why_set(why, why_len, ret, "%s",
			       ret == -ENOENT ? "missing everywhere" :
			       ret == -EIO ? "corrupt or unreadable (digest mismatch)" :
			       strerror(-ret));
	if (len != want) {
		free(block);
		return why_set(why, why_len, -EBADMSG, "%zu bytes, the page map says %u pages",
			       len, ch->npages);
	}
	atomic_fetch_add(&lr->st.chunks, 1);
	atomic_fetch_add(&lr->st.frame, frame);
	atomic_fetch_add(&lr->st.data, len);
	ret = write_pages(lr, c, block);
	free(block);
	if (ret)
		return why_set(why, why_len, ret, "cache file %s: write: %s", lr->c.name,
			       strerror(-ret));
	return 0;
}

static int range_ioctl(struct lazyram *lr, bool zero, uint64_t first, uint64_t n,
		       int64_t *done)
{
	struct uffdio_range r = { .start = (uintptr_t)(lr->base + first * LAZYRAM_PAGE),
				  .len = n * LAZYRAM_PAGE };
	int ret;

	if (zero) {
		struct uffdio_zeropage z = { .range = r };

		ret = ioctl(lr->uffd, UFFDIO_ZEROPAGE, &z);
		*done = z.zeropage;
	} else {
		struct uffdio_continue cu = { .range = r };

		ret = ioctl(lr->uffd, UFFDIO_CONTINUE, &cu);
		*done = cu.mapped;
	}
	return ret < 0 ? -errno : 0;
}

int lr_map_range(struct lazyram *lr, bool zero, uint64_t first, uint64_t n)
{
	int eexist = 0;

	while (n) {
		int64_t done = 0;
		int ret = range_ioctl(lr, zero, first, n, &done);
		uint64_t got = ret == 0 ? n : done > 0 ? (uint64_t)done / LAZYRAM_PAGE : 0;

		for (uint64_t i = 0; i < got; i++)
			lr_bit_set(lr->mapped, first + i);
		atomic_fetch_add(zero ? &lr->st.zeroed : &lr->st.continued, got);
		first += got;
		n -= got;
		if (!ret || got)
			continue; /* done, or again from the page that stopped it */
		if (ret == -EEXIST || done == -EEXIST) {
			lr_bit_set(lr->mapped, first); /* mapped already: here, or written */
			atomic_fetch_add(&lr->st.eexist, 1);
			eexist++;
			first++;
			n--;
			continue;
		}
		if (ret == -EAGAIN)
			atomic_fetch_add(&lr->st.eagain, 1);
		return ret;
	}
	return eexist;
}

void lr_wake(struct lazyram *lr, uint64_t page)
{
	struct uffdio_range r = { .start = (uintptr_t)(lr->base + page * LAZYRAM_PAGE),
				  .len = LAZYRAM_PAGE };

	ioctl(lr->uffd, UFFDIO_WAKE, &r);
}

void lr_fatal(struct lazyram *lr, uint64_t page, uint32_t c, const char *what)
{
	char hex[SHA256_HEX_LEN + 1], line[WHY_MAX];

	lr_bit_set(lr->failed, page);
	atomic_fetch_add(&lr->st.failed, 1);
	if (atomic_exchange(&lr->fatal_said, 1))
		return;
	sha256_to_hex(lr->m->chunks[c].digest, hex);
	snprintf(line, sizeof(line), "RAM page %llu (offset 0x%llx) cannot be had: chunk "
		 "sha256:%s: %s", (unsigned long long)page,
		 (unsigned long long)(page * LAZYRAM_PAGE), hex, what);
	lr->o.fatal(lr->o.fatal_arg, line);
}
