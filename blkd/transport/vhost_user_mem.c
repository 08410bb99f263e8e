/* SPDX-License-Identifier: MIT */
/*
 * blkd/transport/vhost_user_mem: the master's memory table. Each region is a file descriptor
 * mapped here; guest buffers are translated by guest physical address (struct gmem), ring
 * addresses from SET_VRING_ADDR by the master's user address (vu_uva_to_gpa,
 * vhost_user_tables.c).
 *
 * The master keeps its descriptors: were it to truncate a file after it is mapped here,
 * the next access to the ring or a buffer would SIGBUS the whole server. So a region's file
 * must be sealed against shrinking (F_SEAL_SHRINK: a memfd, as QEMU's memory-backend-memfd
 * makes with its default seal=on, also with hugetlb=on); an unsealed one (a plain file,
 * memory-backend-file, seal=off) is refused.
 */
#include "vhost_user_int.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"

static bool overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

/* NULL when the region can be mapped (sizes without overflow, inside its sealed file). */
static const char *region_check(const struct vu_region *r, int fd)
{
	struct stat st;

	if (!r->size || r->gpa + r->size < r->gpa || r->uva + r->size < r->uva ||
	    r->mmap_offset + r->size < r->mmap_offset)
		return "bad size or address";
	/* sealed first: then the size checked below cannot change */
	if (!vu_fd_no_shrink(fd))
		return "its file is not sealed against shrinking (F_SEAL_SHRINK; QEMU: "
		       "memory-backend-memfd with seal=on)";
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return "not a memory file";
	/* a mapping past the end of the file would SIGBUS on access */
	if ((uint64_t)st.st_size < r->mmap_offset + r->size)
		return "beyond the end of its file";
	return NULL;
}

static int table_check(const struct vu_mem_table *t, const int *fds)
{
	for (unsigned i = 0; i < t->nregions; i++) {
		const struct vu_region *a = &t->r[i];
		const char *why = region_check(a, fds[i]);

		if (why) {
			log_warn("vhost-user: SET_MEM_TABLE refused: memory region %u: %s", i, why);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++) {
			const struct vu_region *b = &t->r[j];

			if (overlap(a->gpa, a->size, b->gpa, b->size) ||
			    overlap(a->uva, a->size, b->uva, b->size)) {
				log_warn("vhost-user: SET_MEM_TABLE refused: memory regions %u and "
					 "%u overlap", j, i);
				return -EINVAL;
			}
		}
	}
	return 0;
}

static void maps_free(struct vu_map *m, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (m[i].base)
			munmap(m[i].base, m[i].len);
}

void vu_mem_unmap(struct vhost_user_dev *d)
{
	maps_free(d->map, d->mem.n);
	memset(d->map, 0, sizeof(d->map));
	memset(&d->mem, 0, sizeof(d->mem));
}

int vu_mem_set(struct vhost_user_dev *d, const struct vu_mem_table *t, int *fds)
{
	struct vu_map map[GMEM_MAX_REGIONS] = { 0 };
	struct gmem mem = { .n = t->nregions };
	int ret;

	if (!t->nregions || t->nregions > GMEM_MAX_REGIONS) {
		log_warn("vhost-user: SET_MEM_TABLE refused: %u regions", t->nregions);
		return -EINVAL;
	}
	ret = table_check(t, fds);
	if (ret < 0)
		return ret;
	for (unsigned i = 0; i < t->nregions; i++) {
		const struct vu_region *r = &t->r[i];
		/* from offset 0, as the offset need not be page (or huge page) aligned */
		size_t len = r->mmap_offset + r->size;
		void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
			       fds[i], 0);

		if (p == MAP_FAILED) {
			ret = -errno;
			log_warn("vhost-user: SET_MEM_TABLE refused: memory region %u: mmap: %s", i,
				 strerror(-ret));
			maps_free(map, i);
			return ret;
		}
		map[i] = (struct vu_map){ .base = p, .len = len, .uva = r->uva };
		mem.r[i] = (struct gmem_region){
			.gpa = r->gpa, .size = r->size, .host = (uint8_t *)p + r->mmap_offset,
		};
	}
	/* the I/O threads use the old mappings until they are stopped */
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_stop(&d->q[i]);
	vu_mem_unmap(d);
	memcpy(d->map, map, sizeof(map));
	d->mem = mem;
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_update(&d->q[i]);   /* a failure marks that queue broken */
	for (unsigned i = 0; i < t->nregions; i++) {
		close(fds[i]);               /* the mappings stay */
		fds[i] = -1;
	}
	return 0;
}
