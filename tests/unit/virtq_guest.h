/* SPDX-License-Identifier: MIT */
/*
 * The driver side of a split virtqueue for the virtio unit tests: a fake guest memory (one
 * malloc'd region at a guest-physical address), a bump allocator in it, descriptor chains
 * (direct or indirect) and the available/used rings, written as a driver (Linux's
 * virtio_ring) does, and virtio-blk request headers. Header-only, like helpers.h.
 */
#ifndef LZ_TESTS_UNIT_VIRTQ_GUEST_H
#define LZ_TESTS_UNIT_VIRTQ_GUEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../blkd/virtio/gmem.h"
#include "../../blkd/virtio/vring.h"
#include "../../common/le.h"

#define TG_GPA 0x40000000ull
#define TG_SIZE (4u << 20)

struct tg_buf {
	uint64_t gpa;
	uint32_t len;
	bool wr;
};

struct tguest {
	uint8_t *ram;
	struct gmem mem;
	uint64_t brk;              /* next free gpa for tg_alloc */
	unsigned num;
	uint64_t desc, avail, used;
	uint16_t next_desc;        /* descriptors are handed out round-robin */
	uint16_t avail_idx, last_used;
};

static inline void *tg_ptr(struct tguest *g, uint64_t gpa)
{
	return g->ram + (gpa - TG_GPA);
}

static inline uint64_t tg_alloc(struct tguest *g, uint64_t size, uint64_t align)
{
	uint64_t a = (g->brk + align - 1) & ~(align - 1);

	g->brk = a + size;
	if (g->brk > TG_GPA + TG_SIZE)
		abort();
	memset(tg_ptr(g, a), 0, size);
	return a;
}

/* Fresh memory with a ring of num entries (rings at page-aligned addresses). */
static inline void tg_init(struct tguest *g, unsigned num)
{
	memset(g, 0, sizeof(*g));
	g->ram = aligned_alloc(4096, TG_SIZE);
	if (!g->ram)
		abort();
	memset(g->ram, 0, TG_SIZE);
	g->mem.n = 1;
	g->mem.r[0] = (struct gmem_region){ .gpa = TG_GPA, .size = TG_SIZE, .host = g->ram };
	g->brk = TG_GPA;
	g->num = num;
	g->desc = tg_alloc(g, 16ull * num, 4096);
	g->avail = tg_alloc(g, 6 + 2ull * num, 4096);
	g->used = tg_alloc(g, 6 + 8ull * num, 4096);
}

static inline void tg_free(struct tguest *g)
{
	free(g->ram);
	g->ram = NULL;
}

static inline struct virtq_desc *tg_desc(struct tguest *g, unsigned i)
{
	return (struct virtq_desc *)tg_ptr(g, g->desc) + i;
}

static inline void tg_set_desc(struct virtq_desc *d, uint64_t addr, uint32_t len,
			       uint16_t flags, uint16_t next)
{
	d->addr = addr;
	d->len = len;
	d->flags = flags;
	d->next = next;
}

/* A direct chain over n buffers in fresh descriptors; returns the head. */
static inline uint16_t tg_chain(struct tguest *g, const struct tg_buf *b, unsigned n)
{
	uint16_t head = g->next_desc;

	for (unsigned i = 0; i < n; i++) {
		uint16_t cur = g->next_desc, nxt = (uint16_t)((cur + 1) % g->num);

		tg_set_desc(tg_desc(g, cur), b[i].gpa, b[i].len,
			    (uint16_t)((b[i].wr ? VIRTQ_DESC_F_WRITE : 0) |
				       (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0)), nxt);
		g->next_desc = nxt;
	}
	return head;
}

/* One descriptor pointing at a fresh indirect table holding the n buffers. */
static inline uint16_t tg_chain_indirect(struct tguest *g, const struct tg_buf *b, unsigned n)
{
	uint64_t t = tg_alloc(g, 16ull * n, 16);
	struct virtq_desc *tab = tg_ptr(g, t);
	uint16_t head = g->next_desc;

	for (unsigned i = 0; i < n; i++)
		tg_set_desc(&tab[i], b[i].gpa, b[i].len,
			    (uint16_t)((b[i].wr ? VIRTQ_DESC_F_WRITE : 0) |
				       (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0)), (uint16_t)(i + 1));
	tg_set_desc(tg_desc(g, head), t, 16 * n, VIRTQ_DESC_F_INDIRECT, 0);
	g->next_desc = (uint16_t)((head + 1) % g->num);
	return head;
}

static inline struct virtq_avail *tg_avail(struct tguest *g)
{
	return tg_ptr(g, g->avail);
}

static inline struct virtq_used *tg_used(struct tguest *g)
{
	return tg_ptr(g, g->used);
}

/* A virtio-blk request header at gpa h: le32 type, le32 reserved (0), le64 sector. */
static inline void tg_blk_hdr_at(struct tguest *g, uint64_t h, uint32_t type, uint64_t sector)
{
	uint8_t *p = tg_ptr(g, h);

	le32_put(p, type);
	le32_put(p + 4, 0);
	le64_put(p + 8, sector);
}

/* The same in 16 fresh bytes; returns their gpa. */
static inline uint64_t tg_blk_hdr(struct tguest *g, uint32_t type, uint64_t sector)
{
	uint64_t h = tg_alloc(g, 16, 8);

	tg_blk_hdr_at(g, h, type, sector);
	return h;
}

/* Make head available (publishing avail->idx with release semantics). */
static inline void tg_submit(struct tguest *g, uint16_t head)
{
	tg_avail(g)->ring[g->avail_idx % g->num] = head;
	g->avail_idx++;
	__atomic_store_n(&tg_avail(g)->idx, g->avail_idx, __ATOMIC_RELEASE);
}

/* Next used element into id and len: true, or false when there is none. */
static inline bool tg_get_used(struct tguest *g, uint32_t *id, uint32_t *len)
{
	struct virtq_used *u = tg_used(g);

	if (__atomic_load_n(&u->idx, __ATOMIC_ACQUIRE) == g->last_used)
		return false;
	*id = u->ring[g->last_used % g->num].id;
	*len = u->ring[g->last_used % g->num].len;
	g->last_used++;
	return true;
}

static inline uint16_t *tg_used_event(struct tguest *g)
{
	return &tg_avail(g)->ring[g->num];
}

static inline uint16_t *tg_avail_event(struct tguest *g)
{
	return (uint16_t *)&tg_used(g)->ring[g->num];
}

#endif
