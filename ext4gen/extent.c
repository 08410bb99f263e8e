/* SPDX-License-Identifier: MIT */
#include "extent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/crc32c.h"
#include "../common/grow.h"

#define EXT_PER_BLOCK ((DISK_BLOCK - sizeof(struct ext4_extent_header)) / 12)   /* 340 */
#define EXT_IN_INODE 4

struct pieces {
	uint64_t phys[64], len[64];
	size_t n;
};

static int add_piece(void *arg, uint64_t phys, uint64_t count)
{
	struct pieces *p = arg;

	if (p->n == 64)
		return -E2BIG;
	p->phys[p->n] = phys;
	p->len[p->n] = count;
	p->n++;
	return 0;
}

static int push(struct ext_list *l, uint64_t lblk, uint64_t phys, uint32_t len)
{
	if (l->n) {
		struct ext4_extent *last = &l->e[l->n - 1];
		uint64_t lphys = (uint64_t)last->ee_start_hi << 32 | last->ee_start_lo;

		if (last->ee_block + (uint64_t)last->ee_len == lblk && lphys + last->ee_len == phys &&
		    last->ee_len + (uint64_t)len <= EXT4_EXT_MAX_LEN) {
			last->ee_len = (uint16_t)(last->ee_len + len);
			return 0;
		}
	}
	if (!grow_from((void **)&l->e, &l->cap, l->n + 1, sizeof(*l->e), 16))
		return -ENOMEM;
	l->e[l->n++] = (struct ext4_extent){
		.ee_block = (uint32_t)lblk,
		.ee_len = (uint16_t)len,
		.ee_start_hi = (uint16_t)(phys >> 32),
		.ee_start_lo = (uint32_t)phys,
	};
	return 0;
}

int extent_build(const struct geom *g, uint64_t phys, const struct lrange *r, size_t nr,
		 struct ext_list *l)
{
	struct pieces p = { .n = 0 };
	uint64_t total = 0;
	size_t pi = 0;
	uint64_t pused = 0;
	int ret;

	l->n = 0;
	for (size_t i = 0; i < nr; i++)
		total += r[i].len;
	if (!total)
		return 0;
	/* the common case: one range, one piece, one extent */
	if (nr == 1 && total <= EXT4_EXT_MAX_LEN && geom_run_is_contiguous(g, phys, total))
		return push(l, r[0].start, phys, (uint32_t)total);
	ret = geom_walk_run(g, phys, total, add_piece, &p);
	if (ret)
		return ret;
	for (size_t i = 0; i < nr; i++) {
		uint64_t lb = r[i].start, left = r[i].len;

		while (left) {
			uint64_t avail = p.len[pi] - pused, k = left;

			if (k > avail)
				k = avail;
			if (k > EXT4_EXT_MAX_LEN)
				k = EXT4_EXT_MAX_LEN;
			ret = push(l, lb, p.phys[pi] + pused, (uint32_t)k);
			if (ret)
				return ret;
			lb += k;
			left -= k;
			pused += k;
			if (pused == p.len[pi]) {
				pi++;
				pused = 0;
			}
		}
	}
	return 0;
}

/* Blocks per level, leaves first; returns the depth (levels below the root). */
static int levels(size_t n, uint64_t counts[6])
{
	int d = 0;
	uint64_t c = n;

	if (n <= EXT_IN_INODE)
		return 0;
	do {
		c = (c + EXT_PER_BLOCK - 1) / EXT_PER_BLOCK;
		counts[d++] = c;
	} while (c > EXT_IN_INODE && d < 5);
	return d;
}

uint32_t extent_tree_blocks(size_t n)
{
	uint64_t counts[6], sum = 0;
	int d = levels(n, counts);

	for (int i = 0; i < d; i++)
		sum += counts[i];
	return (uint32_t)sum;
}

void extent_empty_root(uint32_t i_block[15])
{
	struct ext4_extent_header *h = (struct ext4_extent_header *)i_block;

	memset(i_block, 0, 60);
	h->eh_magic = EXT4_EXT_MAGIC;
	h->eh_max = EXT_IN_INODE;
}

/* First extent index covered by block c of level lev (leaves: lev 0). */
static uint64_t first_extent(uint64_t c, int lev)
{
	uint64_t span = EXT_PER_BLOCK;

	for (int i = 0; i < lev; i++)
		span *= EXT_PER_BLOCK;
	return c * span;
}

void extent_render(const struct ext_list *l, uint64_t tree_first, uint32_t i_block[15],
		   uint8_t *tree_out, uint32_t inode_seed)
{
	struct ext4_extent_header *root = (struct ext4_extent_header *)i_block;
	uint64_t counts[6], base[6];
	int d = levels(l->n, counts);

	extent_empty_root(i_block);
	if (d == 0) {
		root->eh_entries = (uint16_t)l->n;
		memcpy(root + 1, l->e, l->n * sizeof(struct ext4_extent));
		return;
	}
	/* blocks: top level first, leaves last */
	uint64_t at = 0;
	for (int lev = d - 1; lev >= 0; lev--) {
		base[lev] = at;
		at += counts[lev];
	}
	for (int lev = 0; lev < d; lev++) {
		for (uint64_t c = 0; c < counts[lev]; c++) {
			uint8_t *blk = tree_out + (base[lev] + c) * DISK_BLOCK;
			struct ext4_extent_header *h = (struct ext4_extent_header *)blk;
			uint64_t first = c * EXT_PER_BLOCK, nent;

			memset(blk, 0, DISK_BLOCK);
			h->eh_magic = EXT4_EXT_MAGIC;
			h->eh_max = EXT_PER_BLOCK;
			h->eh_depth = (uint16_t)lev;
			if (lev == 0) {
				nent = l->n - first < EXT_PER_BLOCK ? l->n - first : EXT_PER_BLOCK;
				memcpy(h + 1, &l->e[first], nent * sizeof(struct ext4_extent));
			} else {
				struct ext4_extent_idx *ix = (struct ext4_extent_idx *)(h + 1);

				nent = counts[lev - 1] - first < EXT_PER_BLOCK ? counts[lev - 1] - first
									       : EXT_PER_BLOCK;
				for (uint64_t k = 0; k < nent; k++) {
					uint64_t child = tree_first + base[lev - 1] + first + k;

					ix[k].ei_block = l->e[first_extent(first + k, lev - 1)].ee_block;
					ix[k].ei_leaf_lo = (uint32_t)child;
					ix[k].ei_leaf_hi = (uint16_t)(child >> 32);
				}
			}
			h->eh_entries = (uint16_t)nent;
			uint32_t crc = crc32c(inode_seed, blk, 12 + 12 * EXT_PER_BLOCK);
			memcpy(blk + 12 + 12 * EXT_PER_BLOCK, &crc, 4);
		}
	}
	/* the root indexes the top level */
	struct ext4_extent_idx *ix = (struct ext4_extent_idx *)(root + 1);

	root->eh_depth = (uint16_t)d;
	root->eh_entries = (uint16_t)counts[d - 1];
	for (uint64_t k = 0; k < counts[d - 1]; k++) {
		uint64_t child = tree_first + base[d - 1] + k;

		ix[k].ei_block = l->e[first_extent(k, d - 1)].ee_block;
		ix[k].ei_leaf_lo = (uint32_t)child;
		ix[k].ei_leaf_hi = (uint16_t)(child >> 32);
	}
}
