/* SPDX-License-Identifier: MIT */
/* The RAM of a VM snapshot: the sparse ram file written, its XXH3-128 digest checked. */
#include "vm_snapshot_ram.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "../common/fsutil.h"

#define VMSNAP_RUN (256u * VMSNAP_PAGE)   /* RAM written in runs of up to 1 MiB */
#define VMSNAP_REGION (2ull << 20)         /* the RAM digest is made of one per 2 MiB */
#define VMSNAP_THREADS 8u                  /* at most, to hash the regions */

static bool page_zero(const uint8_t *p)
{
	const uint64_t *q = (const uint64_t *)(const void *)p;

	for (unsigned i = 0; i < VMSNAP_PAGE / 8; i++)
		if (q[i])
			return false;
	return true;
}

/*
 * The RAM digest is XXH3-128, not sha256: it guards against corruption (disk, truncation, a
 * bad copy), not forgery — guest RAM is the guest's own data, which nothing trusts.
 */
static int ram_hash_page(XXH3_state_t *st, uint64_t idx, const uint8_t *p)
{
	uint8_t le[8];

	for (unsigned i = 0; i < 8; i++)
		le[i] = (uint8_t)(idx >> (8 * i));
	if (XXH3_128bits_update(st, le, 8) != XXH_OK ||
	    XXH3_128bits_update(st, p, VMSNAP_PAGE) != XXH_OK)
		return -EIO;
	return 0;
}

static void ram_xxh_out(XXH128_hash_t hash, uint8_t out[VMSNAP_XXH])
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, hash);
	memcpy(out, c.digest, VMSNAP_XXH);
}

void vmsnap_xxh128(const void *p, size_t len, uint8_t out[VMSNAP_XXH])
{
	ram_xxh_out(XXH3_128bits(p, len), out);
}

/* The digest of the regions' digests (reg: n of them). */
static void ram_xxh_top(const uint8_t (*reg)[VMSNAP_XXH], uint64_t n, uint8_t out[VMSNAP_XXH])
{
	vmsnap_xxh128(reg, n * VMSNAP_XXH, out);
}

/*
 * Whether page i of the RAM memfd fd may hold data: not in its holes (pages the guest never
 * touched; reading them through the mapping would allocate them, all of RAM). ext: the
 * data extent found last, in pages. fd < 0 (RAM mapped from a snapshot) or no SEEK_DATA:
 * any page may.
 */
static bool ram_page_data(int fd, uint64_t i, uint64_t ext[2])
{
	off_t d, h;

	if (fd < 0)
		return true;
	if (i >= ext[1]) {
		d = lseek(fd, (off_t)(i * VMSNAP_PAGE), SEEK_DATA);
		h = d < 0 ? -1 : lseek(fd, d, SEEK_HOLE);
		ext[0] = d < 0 ? (errno == ENXIO ? UINT64_MAX : i) : (uint64_t)d / VMSNAP_PAGE;
		ext[1] = d < 0 || h < 0 ? UINT64_MAX : ((uint64_t)h + VMSNAP_PAGE - 1) / VMSNAP_PAGE;
	}
	return i >= ext[0];
}

/*
 * dir/ram: the pages that are not all zeros, in runs; holes elsewhere (the memfd's holes
 * are not read). The RAM digest
 * (the check's) on the way, one pass.
 */
int vmsnap_ram_write(const struct vm_ram *ram, int fd, uint8_t digest[VMSNAP_XXH],
		     uint64_t *written)
{
	uint64_t pages = ram->size / VMSNAP_PAGE, run = 0, run_len = 0, ext[2] = { 0, 0 };
	uint64_t ppr = VMSNAP_REGION / VMSNAP_PAGE, nreg = (pages + ppr - 1) / ppr;
	uint8_t (*reg)[VMSNAP_XXH] = malloc(nreg * VMSNAP_XXH);
	XXH3_state_t *st = XXH3_createState();
	int ret = reg && st && XXH3_128bits_reset(st) == XXH_OK ? 0 : -ENOMEM;

	if (!ret && ftruncate(fd, (off_t)ram->size) < 0)
		ret = -errno;
	for (uint64_t i = 0; !ret && i <= pages; i++) {
		const uint8_t *p = ram->map + i * VMSNAP_PAGE;
		bool data = i < pages && ram_page_data(ram->fd, i, ext) && !page_zero(p);

		if (i && (i % ppr == 0 || i == pages)) {
			ram_xxh_out(XXH3_128bits_digest(st), reg[(i - 1) / ppr]);
			if (XXH3_128bits_reset(st) != XXH_OK)
				ret = -EIO;
		}
		if (!ret && data) {
			ret = ram_hash_page(st, i, p);
			(*written)++;
			if (!run_len)
				run = i;
			run_len += VMSNAP_PAGE;
		}
		if (!ret && run_len && (!data || run_len >= VMSNAP_RUN)) {
			ret = fs_pwrite_full(fd, ram->map + run * VMSNAP_PAGE, run_len,
					     (off_t)(run * VMSNAP_PAGE));
			run_len = 0;
		}
	}
	XXH3_freeState(st);
	if (!ret)
		ram_xxh_top((const uint8_t (*)[VMSNAP_XXH])reg, nreg, digest);
	free(reg);
	return ret;
}

/* The RAM digest: regions hashed by a few threads, then the digest of their digests. */
struct ram_digest {
	const uint8_t *ram;
	uint64_t size, nreg;
	int fd;                       /* the ram file: only its data extents hold pages */
	uint64_t data_end;            /* atomic: no data from here on (SEEK_DATA said ENXIO) */
	uint64_t next;                /* atomic: the next region to take */
	uint8_t (*reg)[VMSNAP_XXH];
	uint64_t pages;               /* atomic: pages hashed */
	int err;                      /* atomic: the first failure */
	pthread_t th[VMSNAP_THREADS];
	unsigned nth;                 /* threads started, not joined */
};

static void ram_data_end(struct ram_digest *d, uint64_t end)
{
	uint64_t cur = __atomic_load_n(&d->data_end, __ATOMIC_RELAXED);

	while (end < cur && !__atomic_compare_exchange_n(&d->data_end, &cur, end, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Region r: XXH3-128 over (le64 page index, page) of its pages that are not all zeros. */
static int ram_region(struct ram_digest *d, uint64_t r, XXH3_state_t *st)
{
	off_t off = (off_t)(r * VMSNAP_REGION), re, end;
	uint64_t pages = 0;
	int ret = XXH3_128bits_reset(st) == XXH_OK ? 0 : -EIO;

	re = (off_t)(d->size < (r + 1) * VMSNAP_REGION ? d->size : (r + 1) * VMSNAP_REGION);
	while (!ret && off < re && (uint64_t)off < __atomic_load_n(&d->data_end, __ATOMIC_RELAXED)) {
		off_t from = off;

		off = lseek(d->fd, off, SEEK_DATA);
		if (off < 0 && errno == ENXIO)   /* no data after from: the later regions neither */
			ram_data_end(d, (uint64_t)from);
		if (off < 0 || off >= re)
			break;
		end = lseek(d->fd, off, SEEK_HOLE);
		if (end < 0 || end > re)
			end = re;
		off &= ~(off_t)(VMSNAP_PAGE - 1);
		for (; !ret && off < end; off += VMSNAP_PAGE) {
			if (page_zero(d->ram + off))
				continue;
			ret = ram_hash_page(st, (uint64_t)off / VMSNAP_PAGE, d->ram + off);
			pages++;
		}
	}
	if (!ret)
		ram_xxh_out(XXH3_128bits_digest(st), d->reg[r]);
	__atomic_fetch_add(&d->pages, pages, __ATOMIC_RELAXED);
	return ret;
}

static void *ram_digest_main(void *arg)
{
	struct ram_digest *d = arg;
	XXH3_state_t *st = XXH3_createState();
	uint64_t r;

	while ((r = __atomic_fetch_add(&d->next, 1, __ATOMIC_RELAXED)) < d->nreg) {
		int ret = st ? ram_region(d, r, st) : -ENOMEM;
		int zero = 0;

		if (ret)
			__atomic_compare_exchange_n(&d->err, &zero, ret, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
	}
	XXH3_freeState(st);
	return NULL;
}

/*
 * Start the RAM check: XXH3-128 over the digests of the 2 MiB regions of the ram file in
 * order (ram_region), the pages outside its data extents skipped (they are zeros). The
 * file is mapped read-only and shared (the page cache's pages, which the guest's private
 * mapping shares until it writes them) and hashed on threads (one fewer than the CPUs: at
 * least one, at most VMSNAP_THREADS) while the restored guest runs held (vmm.c);
 * vmsnap_ram_check_end finishes it, its thread helping. Saving computes the same digest in
 * its one pass over RAM (vmsnap_ram_write).
 */
int vmsnap_ram_check_start(int fd, uint64_t size, struct ram_digest **out)
{
	struct ram_digest *d = calloc(1, sizeof(*d));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cpus < 2 ? 1 : cpus > VMSNAP_THREADS ? VMSNAP_THREADS : (unsigned)cpus - 1;
	void *map;

	if (!d)
		return -ENOMEM;
	*out = d;
	d->size = size;
	d->data_end = size;
	d->fd = fd;
	d->nreg = (d->size + VMSNAP_REGION - 1) / VMSNAP_REGION;
	d->reg = malloc(d->nreg * VMSNAP_XXH);
	if (!d->reg)
		return -ENOMEM;
	map = mmap(NULL, d->size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	d->ram = map;
	for (unsigned i = 0; i < n; i++)
		if (!pthread_create(&d->th[d->nth], NULL, ram_digest_main, d))
			d->nth++;
	return 0;   /* without threads, vmsnap_ram_check_end does it all */
}

/*
 * The check finished (this thread takes the regions left) or, stop, abandoned: the digest
 * into out, *pages those hashed, the file unmapped. Once only.
 */
int vmsnap_ram_check_end(struct ram_digest *d, bool stop, uint8_t out[VMSNAP_XXH],
			 uint64_t *pages)
{
	if (stop)
		__atomic_store_n(&d->next, d->nreg, __ATOMIC_RELAXED);
	ram_digest_main(d);
	for (unsigned i = 0; i < d->nth; i++)
		pthread_join(d->th[i], NULL);
	d->nth = 0;
	if (d->ram)   /* the guest's own mapping is the one that stays */
		munmap((void *)(uintptr_t)d->ram, d->size);
	d->ram = NULL;
	if (!d->err && !stop)
		ram_xxh_top((const uint8_t (*)[VMSNAP_XXH])d->reg, d->nreg, out);
	*pages = d->pages;
	return d->err;
}

void vmsnap_ram_check_free(struct ram_digest *d)
{
	uint8_t out[VMSNAP_XXH];
	uint64_t pages;

	if (!d)
		return;
	if (d->nth)
		vmsnap_ram_check_end(d, true, out, &pages);
	if (d->ram)
		munmap((void *)(uintptr_t)d->ram, d->size);
	free(d->reg);
	free(d);
}
