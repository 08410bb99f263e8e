/* SPDX-License-Identifier: MIT */
/* blkd/vring: the device side of a split virtqueue, every guest access checked. */
#include "vring.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

/* A plain load/store the compiler may not duplicate or elide (guest memory changes). */
#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static uint16_t *used_event(struct vring_queue *vq)
{
	return &vq->avail->ring[vq->num];
}

static uint16_t *avail_event(struct vring_queue *vq)
{
	return (uint16_t *)&vq->used->ring[vq->num];
}

int vring_setup(struct vring_queue *vq, const struct gmem *mem, unsigned num, uint64_t desc,
		uint64_t avail, uint64_t used, bool indirect, bool event_idx)
{
	memset(vq, 0, sizeof(*vq));
	if (!num || num > VRING_MAX_SIZE || (num & (num - 1)))
		return -EINVAL;
	if ((desc & 15) || (avail & 1) || (used & 3))
		return -EINVAL;
	vq->desc = gmem_ptr(mem, desc, 16ull * num);
	vq->avail = gmem_ptr(mem, avail, 6 + 2ull * num);
	vq->used = gmem_ptr(mem, used, 6 + 8ull * num);
	if (!vq->desc || !vq->avail || !vq->used)
		return -EINVAL;
	/* host alignment for the atomic accesses (regions are page-aligned in practice) */
	if (((uintptr_t)vq->desc & 15) || ((uintptr_t)vq->avail & 1) || ((uintptr_t)vq->used & 3))
		return -EINVAL;
	vq->mem = mem;
	vq->num = num;
	vq->desc_gpa = desc;
	vq->avail_gpa = avail;
	vq->used_gpa = used;
	vq->indirect = indirect;
	vq->event_idx = event_idx;
	return 0;
}

static uint16_t avail_idx_acquire(struct vring_queue *vq)
{
	return le16toh(__atomic_load_n(&vq->avail->idx, __ATOMIC_ACQUIRE));
}

bool vring_pending(struct vring_queue *vq)
{
	return avail_idx_acquire(vq) != vq->last_avail_idx;
}

/* One descriptor copied out of guest memory: every field read exactly once. */
static void desc_read(const struct virtq_desc *src, struct virtq_desc *d)
{
	memcpy(d, src, sizeof(*d));
	__asm__ __volatile__("" ::: "memory");
	d->addr = le64toh(d->addr);
	d->len = le32toh(d->len);
	d->flags = le16toh(d->flags);
	d->next = le16toh(d->next);
}

static int chain_walk(struct vring_queue *vq, uint16_t head, struct vring_chain *c)
{
	const struct virtq_desc *table = vq->desc;
	unsigned tsize = vq->num, count = 0, i = head;
	bool in_indirect = false, seen_wr = false;

	for (;;) {
		struct virtq_desc d;

		if (++count > tsize)
			return -EPROTO;         /* a loop (or longer than the table) */
		desc_read(&table[i], &d);
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (!vq->indirect || in_indirect || (d.flags & VIRTQ_DESC_F_NEXT))
				return -EPROTO;
			if (!d.len || d.len % sizeof(struct virtq_desc) ||
			    d.len / sizeof(struct virtq_desc) > VRING_CHAIN_MAX)
				return -EPROTO;
			table = gmem_ptr(vq->mem, d.addr, d.len);
			if (!table)
				return -EPROTO;  /* cannot even walk it */
			tsize = d.len / sizeof(struct virtq_desc);
			in_indirect = true;
			count = 0;
			i = 0;
			continue;
		}
		if (d.flags & VIRTQ_DESC_F_WRITE)
			seen_wr = true;
		else if (seen_wr)
			return -EPROTO;         /* readable after writable */
		if (d.len) {
			struct vring_seg *s;

			if (c->nseg == VRING_CHAIN_MAX)
				return -EPROTO;
			s = &c->seg[c->nseg++];
			s->p = gmem_ptr(vq->mem, d.addr, d.len);
			s->len = d.len;
			s->wr = seen_wr;
			if (!s->p)
				c->bad = true;
			if (seen_wr) {
				c->wr_len += d.len;
			} else {
				c->rd_len += d.len;
				c->nrd++;
			}
		}
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			break;
		i = d.next;
		if (i >= tsize)
			return -EPROTO;
	}
	if (c->rd_len > UINT32_MAX || c->wr_len > UINT32_MAX)
		c->bad = true;
	return 0;
}

int vring_pop(struct vring_queue *vq, struct vring_chain *c)
{
	uint16_t avail = avail_idx_acquire(vq), head;
	int ret;

	if (avail == vq->last_avail_idx)
		return 0;
	if ((uint16_t)(avail - vq->last_avail_idx) > vq->num)
		return -EPROTO;
	head = le16toh(LOAD(&vq->avail->ring[vq->last_avail_idx & (vq->num - 1)]));
	if (head >= vq->num)
		return -EPROTO;
	c->head = head;
	c->bad = false;
	c->nseg = c->nrd = 0;
	c->rd_len = c->wr_len = 0;
	ret = chain_walk(vq, head, c);
	if (ret < 0)
		return ret;
	vq->last_avail_idx++;
	return 1;
}

void vring_push(struct vring_queue *vq, uint16_t head, uint32_t written)
{
	struct virtq_used_elem *e = &vq->used->ring[vq->used_idx & (vq->num - 1)];

	STORE(&e->id, htole32(head));
	STORE(&e->len, htole32(written));
	vq->used_idx++;
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
}

void vring_disable_notify(struct vring_queue *vq)
{
	if (!vq->event_idx)
		STORE(&vq->used->flags, htole16(VIRTQ_USED_F_NO_NOTIFY));
}

bool vring_enable_notify(struct vring_queue *vq)
{
	if (vq->event_idx)
		STORE(avail_event(vq), htole16(vq->last_avail_idx));
	else
		STORE(&vq->used->flags, 0);
	/* the flag/event must be visible before we look at avail->idx again */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return vring_pending(vq);
}

bool vring_need_notify(struct vring_queue *vq)
{
	uint16_t old = vq->signalled_used, new_idx = vq->used_idx;
	bool valid = vq->signalled_used_valid;

	/* used->idx must be visible before we read the driver's suppression fields */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	vq->signalled_used = new_idx;
	vq->signalled_used_valid = true;
	if (valid && old == new_idx)
		return false;
	if (!vq->event_idx)
		return !(le16toh(LOAD(&vq->avail->flags)) & VIRTQ_AVAIL_F_NO_INTERRUPT);
	if (!valid)
		return true;
	return vring_event_needed(le16toh(LOAD(used_event(vq))), new_idx, old);
}
