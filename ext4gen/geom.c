/* SPDX-License-Identifier: MIT */
#include "geom.h"

#include <errno.h>
#include <stdlib.h>

#include "ext4_fs.h"

static bool is_power_of(uint32_t n, uint32_t base)
{
	while (n > 1 && n % base == 0)
		n /= base;
	return n == 1;
}

bool geom_group_has_super(uint32_t group)
{
	return group <= 1 || is_power_of(group, 3) || is_power_of(group, 5) ||
	       is_power_of(group, 7);
}

uint32_t geom_super_blocks(const struct geom *g, uint32_t group)
{
	if (group > g->groups)
		return 0;
	return g->has_super[group] ? 1 + g->gdt_blocks : 0;
}

void geom_free(struct geom *g)
{
	free(g->has_super);
	g->has_super = NULL;
}

int geom_init(struct geom *g, uint64_t blocks, uint64_t inodes)
{
	uint64_t ipg;

	if (blocks < 1024)
		return -EINVAL;
	g->blocks = blocks;
	g->groups = (uint32_t)((blocks + EXT4_BLOCKS_PER_GROUP - 1) / EXT4_BLOCKS_PER_GROUP);
	uint64_t gdt = ((uint64_t)g->groups * EXT4_DESC_SIZE + DISK_BLOCK - 1) / DISK_BLOCK;

	if (1 + gdt >= EXT4_BLOCKS_PER_GROUP)
		return -E2BIG; /* a superblock copy would not fit in its group */
	g->gdt_blocks = (uint32_t)gdt;
	ipg = (inodes + g->groups - 1) / g->groups;
	/* whole inode table blocks (16 inodes each), whole bitmap bytes, at most one bitmap */
	ipg = (ipg + 15) & ~(uint64_t)15;
	if (ipg < 16)
		ipg = 16;
	if (ipg > EXT4_BLOCKS_PER_GROUP)
		return -E2BIG;
	g->inodes_per_group = (uint32_t)ipg;
	g->itable_blocks = (uint32_t)(ipg * EXT4_INODE_SIZE / DISK_BLOCK);
	g->inodes = ipg * g->groups;
	if (g->inodes > UINT32_MAX)
		return -E2BIG;
	free(g->has_super);
	g->has_super = calloc((size_t)g->groups + 1, 1);
	if (!g->has_super)
		return -ENOMEM;
	for (uint32_t i = 0; i <= g->groups; i++)
		g->has_super[i] = geom_group_has_super(i);
	return 0;
}

/* If [b, b + n) touches a superblock copy, the first block past it; else b. */
static uint64_t skip_super(const struct geom *g, uint64_t b, uint64_t n)
{
restart:
	for (;;) {
		uint32_t grp = (uint32_t)(b / EXT4_BLOCKS_PER_GROUP);
		uint64_t start = (uint64_t)grp * EXT4_BLOCKS_PER_GROUP;
		uint32_t sb = geom_super_blocks(g, grp);
		uint64_t last = b + (n ? n : 1) - 1;

		if (b < start + sb) {
			b = start + sb;
			continue;
		}
		/* every later group the run reaches must start without a copy */
		for (uint64_t gg = (uint64_t)grp + 1; gg <= last / EXT4_BLOCKS_PER_GROUP &&
						      gg * EXT4_BLOCKS_PER_GROUP < g->blocks; gg++) {
			uint32_t s = geom_super_blocks(g, (uint32_t)gg);

			if (s) {
				b = gg * EXT4_BLOCKS_PER_GROUP + s;
				goto restart;
			}
		}
		return b;
	}
}

bool geom_run_is_contiguous(const struct geom *g, uint64_t first, uint64_t n)
{
	return skip_super(g, first, n) == first;
}

uint64_t alloc_peek(struct alloc *a)
{
	return skip_super(a->g, a->next, 1);
}

int64_t alloc_contig(struct alloc *a, uint64_t n)
{
	uint64_t b = skip_super(a->g, a->next, n);

	if (b + n > a->g->blocks)
		return -1;
	a->next = b + n;
	return (int64_t)b;
}

struct count_end {
	uint64_t end;
};

static int note_end(void *arg, uint64_t phys, uint64_t count)
{
	((struct count_end *)arg)->end = phys + count;
	return 0;
}

int geom_walk_run(const struct geom *g, uint64_t first, uint64_t n, geom_piece_fn cb, void *arg)
{
	uint64_t b = first;

	while (n) {
		uint32_t grp;
		uint64_t gend, piece;
		int ret;

		b = skip_super(g, b, 1);
		grp = (uint32_t)(b / EXT4_BLOCKS_PER_GROUP);
		gend = (uint64_t)(grp + 1) * EXT4_BLOCKS_PER_GROUP;
		piece = gend - b;
		/* pieces stop where the next group's superblock copy starts */
		if (!geom_super_blocks(g, grp + 1) || gend >= g->blocks) {
			uint64_t nb = gend;

			while (nb < g->blocks && !geom_super_blocks(g, (uint32_t)(nb / EXT4_BLOCKS_PER_GROUP)))
				nb += EXT4_BLOCKS_PER_GROUP;
			piece = nb - b;
		}
		if (piece > n)
			piece = n;
		ret = cb(arg, b, piece);
		if (ret)
			return ret;
		b += piece;
		n -= piece;
	}
	return 0;
}

int64_t alloc_run(struct alloc *a, uint64_t n)
{
	struct count_end ce = { 0 };
	uint64_t first = alloc_peek(a);

	if (n == 0)
		return (int64_t)first;
	geom_walk_run(a->g, first, n, note_end, &ce);
	if (ce.end > a->g->blocks)
		return -1;
	a->next = ce.end;
	return (int64_t)first;
}
