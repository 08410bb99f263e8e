/* SPDX-License-Identifier: MIT */
/* blkd/virtio/vring: the device side of a split virtqueue, every guest access checked. */
#include "vring.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
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

static void chain_reset(struct vring_chain *c, uint16_t head)
{
	c->head = head;
	c->bad = false;
	c->nseg = c->nrd = 0;
	c->rd_len = c->wr_len = 0;
}

/*
 * The region is host memory shared with the master (never the guest's); its stores are
 * ordered so that a process killed between any two of them leaves a state the next
 * instance resolves (vring_inflight_attach()).
 */
static void inflight_mark(struct vring_queue *vq, uint16_t head)
{
	struct vring_inflight_desc *e = &vq->inflight->desc[head];

	STORE(&e->counter, vq->inflight_counter++);
	__atomic_store_n(&e->inflight, 1, __ATOMIC_RELEASE);
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
	chain_reset(c, head);
	ret = chain_walk(vq, head, c);
	if (ret < 0)
		return ret;
	if (vq->inflight)
		inflight_mark(vq, head);
	vq->last_avail_idx++;
	return 1;
}

int vring_pop_head(struct vring_queue *vq, uint16_t head, struct vring_chain *c)
{
	int ret;

	if (head >= vq->num)
		return -EPROTO;
	chain_reset(c, head);
	ret = chain_walk(vq, head, c);
	return ret < 0 ? ret : 1;
}

void vring_push(struct vring_queue *vq, uint16_t head, uint32_t written)
{
	struct virtq_used_elem *e = &vq->used->ring[vq->used_idx & (vq->num - 1)];
	struct vring_inflight *r = vq->inflight;

	if (r) {
		/* a batch of one: the list is this head */
		STORE(&r->desc[head].next, LOAD(&r->last_batch_head));
		__atomic_store_n(&r->last_batch_head, head, __ATOMIC_RELEASE);
	}
	STORE(&e->id, htole32(head));
	STORE(&e->len, htole32(written));
	vq->used_idx++;
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
	if (r) {
		__atomic_store_n(&r->desc[head].inflight, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&r->used_idx, vq->used_idx, __ATOMIC_RELEASE);
	}
}

int vring_inflight_attach(struct vring_queue *vq, struct vring_inflight *r)
{
	uint16_t version, batch, h, used = vq->used_idx;
	uint64_t max = 0;
	int n = 0;

	vq->inflight = NULL;
	vq->inflight_counter = 0;
	if (!r)
		return 0;
	version = LOAD(&r->version);
	if (!version) {
		/* a fresh region (zeroed by whoever allocated it) */
		STORE(&r->features, 0);
		STORE(&r->desc_num, (uint16_t)vq->num);
		STORE(&r->last_batch_head, 0);
		STORE(&r->used_idx, used);
		__atomic_store_n(&r->version, VRING_INFLIGHT_VERSION, __ATOMIC_RELEASE);
		vq->inflight = r;
		return 0;
	}
	if (version != VRING_INFLIGHT_VERSION || LOAD(&r->desc_num) != vq->num)
		return -EINVAL;
	/*
	 * used->idx published but the batch not yet cleared (the previous instance died in
	 * between): that batch is complete.
	 */
	batch = used - LOAD(&r->used_idx);
	h = LOAD(&r->last_batch_head);
	for (unsigned i = 0; i < batch && i < vq->num && h < vq->num; i++) {
		STORE(&r->desc[h].inflight, 0);
		h = LOAD(&r->desc[h].next);
	}
	__atomic_store_n(&r->used_idx, used, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < vq->num; i++) {
		uint64_t c = LOAD(&r->desc[i].counter);

		if (LOAD(&r->desc[i].inflight) != 1)
			continue;
		n++;
		if (c >= max)
			max = c + 1;
	}
	vq->inflight = r;
	vq->inflight_counter = max;
	return n;
}

void vring_inflight_drop(struct vring_queue *vq)
{
	struct vring_inflight *r = vq->inflight;

	if (!r)
		return;
	for (unsigned i = 0; i < vq->num; i++)
		__atomic_store_n(&r->desc[i].inflight, 0, __ATOMIC_RELEASE);
}

struct inflight_ent {
	uint64_t counter;
	uint16_t head;
};

static int ent_cmp(const void *a, const void *b)
{
	const struct inflight_ent *x = a, *y = b;

	return x->counter < y->counter ? -1 : x->counter > y->counter;
}

int vring_inflight_heads(const struct vring_queue *vq, uint16_t **heads)
{
	const struct vring_inflight *r = vq->inflight;
	struct inflight_ent *ent;
	unsigned n = 0;

	*heads = NULL;
	if (!r)
		return 0;
	ent = malloc(vq->num * sizeof(*ent));
	if (!ent)
		return -ENOMEM;
	for (unsigned i = 0; i < vq->num; i++)
		if (LOAD(&r->desc[i].inflight) == 1)
			ent[n++] = (struct inflight_ent){ LOAD(&r->desc[i].counter), (uint16_t)i };
	if (n) {
		*heads = malloc(n * sizeof(**heads));
		if (!*heads) {
			free(ent);
			return -ENOMEM;
		}
		qsort(ent, n, sizeof(*ent), ent_cmp);
		for (unsigned i = 0; i < n; i++)
			(*heads)[i] = ent[i].head;
	}
	free(ent);
	return (int)n;
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
