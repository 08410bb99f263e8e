/* SPDX-License-Identifier: MIT */
/*
 * mkfs, emission: superblocks and their backups, group descriptors, bitmaps, inode tables,
 * directories, extent trees, xattr blocks and symlinks as metadata blocks, and file data as
 * runs of chunks, in disk order, into the layout. mkfs_int.h.
 */
#include "mkfs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/crc32c.h"
#include "../common/grow.h"
#include "csum.h"
#include "ext4_fs.h"
#include "inode.h"

/* ------------------------------------------------------------ emission */

static int emit_raw(struct mkfs *k, uint64_t lba, const void *blocks, uint32_t count)
{
	int ret = layout_add_meta(k->lw, lba, blocks, count);

	if (!ret)
		k->meta_blocks += count;
	return ret;
}

static int emit_super_copy(struct mkfs *k, uint32_t grp, struct ext4_group_desc *gdt)
{
	uint32_t nb = 1 + k->g.gdt_blocks;
	uint8_t *buf = calloc(nb, DISK_BLOCK);
	int ret;

	if (!buf)
		return -ENOMEM;
	super_build(&k->fs, grp, (struct ext4_super_block *)(buf + (grp == 0 ? 1024 : 0)));
	memcpy(buf + DISK_BLOCK, gdt, (size_t)k->g.groups * sizeof(*gdt));
	ret = emit_raw(k, (uint64_t)grp * EXT4_BLOCKS_PER_GROUP, buf, nb);
	free(buf);
	return ret;
}

/* Emit the superblock copies of groups that start below lba. */
static int flush_backups(struct mkfs *k, uint64_t lba, struct ext4_group_desc *gdt)
{
	while (k->next_backup < k->g.groups &&
	       (uint64_t)k->next_backup * EXT4_BLOCKS_PER_GROUP < lba) {
		uint32_t grp = k->next_backup++;
		int ret;

		if (grp == 0 || !geom_group_has_super(grp))
			continue;
		ret = emit_super_copy(k, grp, gdt);
		if (ret)
			return ret;
	}
	return 0;
}

struct emit_ctx {
	struct mkfs *k;
	struct ext4_group_desc *gdt;
	const uint8_t *data;
};

static int emit_piece(void *arg, uint64_t phys, uint64_t count)
{
	struct emit_ctx *c = arg;
	int ret = flush_backups(c->k, phys, c->gdt);

	if (!ret)
		ret = emit_raw(c->k, phys, c->data, (uint32_t)count);
	c->data += count * DISK_BLOCK;
	return ret;
}

/* Blocks allocated by alloc_run() at first: emitted piece by piece. */
static int emit_run(struct mkfs *k, struct ext4_group_desc *gdt, uint64_t first, uint64_t n,
		    const uint8_t *data)
{
	struct emit_ctx c = { k, gdt, data };

	return geom_walk_run(&k->g, first, n, emit_piece, &c);
}

static uint8_t *scratch(struct mkfs *k, size_t len)
{
	if (!grow((void **)&k->buf, &k->cap_buf, len, 1))
		return NULL;
	memset(k->buf, 0, len);
	return k->buf;
}

static void bit_set(uint8_t *bm, uint64_t bit) { bm[bit >> 3] |= (uint8_t)(1u << (bit & 7)); }

static void bit_range(uint8_t *bm, uint64_t from, uint64_t to)
{
	for (uint64_t b = from; b < to; b++)
		bit_set(bm, b);
}

/* Block bitmap of grp into bm (4096 bytes); returns the blocks in use. */
static uint32_t block_bitmap(struct mkfs *k, uint32_t grp, uint8_t *bm, size_t *cursor)
{
	uint64_t gs = (uint64_t)grp * EXT4_BLOCKS_PER_GROUP, ge = gs + EXT4_BLOCKS_PER_GROUP;
	uint32_t used = 0;

	memset(bm, 0, DISK_BLOCK);
	bit_range(bm, 0, geom_super_blocks(&k->g, grp));
	used += geom_super_blocks(&k->g, grp);
	if (grp == 0)
		used = 0; /* group 0's superblock area is in the used ranges */
	while (*cursor < k->n_used && k->used[2 * *cursor] + k->used[2 * *cursor + 1] <= gs)
		(*cursor)++;
	for (size_t r = *cursor; r < k->n_used && k->used[2 * r] < ge; r++) {
		uint64_t s = k->used[2 * r], e = s + k->used[2 * r + 1];

		if (s < gs)
			s = gs;
		if (e > ge)
			e = ge;
		bit_range(bm, s - gs, e - gs);
		used += (uint32_t)(e - s);
	}
	if (ge > k->g.blocks)
		bit_range(bm, k->g.blocks - gs, EXT4_BLOCKS_PER_GROUP); /* past the end */
	return used;
}

static bool inode_used(const struct mkfs *k, uint64_t ino)
{
	if (ino < EXT4_FIRST_INO)
		return true;
	if (ino == LPF_INO)
		return k->lpf == NONE;
	return ino <= k->last_ino;
}

static uint32_t inode_bitmap(const struct mkfs *k, uint32_t grp, uint8_t *bm, uint32_t *last)
{
	uint32_t ipg = k->g.inodes_per_group, used = 0;

	memset(bm, 0, DISK_BLOCK);
	*last = 0;
	for (uint32_t i = 0; i < ipg; i++) {
		uint64_t ino = (uint64_t)grp * ipg + i + 1;

		if (ino > k->last_ino && ino > LPF_INO)
			break;
		if (inode_used(k, ino)) {
			bit_set(bm, i);
			used++;
			*last = i + 1;
		}
	}
	bit_range(bm, ipg, DISK_BLOCK * 8); /* padding */
	return used;
}

static int build_gdt(struct mkfs *k, struct ext4_group_desc *gdt, uint32_t *dirs)
{
	uint8_t *bb = malloc(DISK_BLOCK), *ib = malloc(DISK_BLOCK);
	uint64_t free_blocks = 0, free_inodes = 0;
	size_t cursor = 0;

	if (!bb || !ib) {
		free(bb);
		free(ib);
		return -ENOMEM;
	}
	for (uint32_t grp = 0; grp < k->g.groups; grp++) {
		struct ext4_group_desc *d = &gdt[grp];
		uint64_t gsize = EXT4_BLOCKS_PER_GROUP, last_ino_idx;
		uint32_t used_b, used_i, last;

		if ((uint64_t)(grp + 1) * EXT4_BLOCKS_PER_GROUP > k->g.blocks)
			gsize = k->g.blocks - (uint64_t)grp * EXT4_BLOCKS_PER_GROUP;
		used_b = block_bitmap(k, grp, bb, &cursor);
		used_i = inode_bitmap(k, grp, ib, &last);
		last_ino_idx = last;
		memset(d, 0, sizeof(*d));
		d->bg_block_bitmap_lo = (uint32_t)k->bbitmap_at[grp];
		d->bg_block_bitmap_hi = (uint32_t)(k->bbitmap_at[grp] >> 32);
		d->bg_inode_bitmap_lo = (uint32_t)k->ibitmap_at[grp];
		d->bg_inode_bitmap_hi = (uint32_t)(k->ibitmap_at[grp] >> 32);
		d->bg_inode_table_lo = (uint32_t)k->itable_at[grp];
		d->bg_inode_table_hi = (uint32_t)(k->itable_at[grp] >> 32);
		d->bg_free_blocks_count_lo = (uint16_t)(gsize - used_b);
		d->bg_free_blocks_count_hi = (uint16_t)((gsize - used_b) >> 16);
		d->bg_free_inodes_count_lo = (uint16_t)(k->g.inodes_per_group - used_i);
		d->bg_free_inodes_count_hi = (uint16_t)((k->g.inodes_per_group - used_i) >> 16);
		d->bg_used_dirs_count_lo = (uint16_t)dirs[grp];
		d->bg_used_dirs_count_hi = (uint16_t)(dirs[grp] >> 16);
		d->bg_itable_unused_lo = (uint16_t)(k->g.inodes_per_group - last_ino_idx);
		d->bg_itable_unused_hi = (uint16_t)((k->g.inodes_per_group - last_ino_idx) >> 16);
		d->bg_flags = EXT4_BG_INODE_ZEROED;
		bitmap_csums(d, bb, ib, k->g.inodes_per_group, k->fs.csum_seed);
		gdt_csum(d, grp, k->fs.csum_seed);
		free_blocks += gsize - used_b;
		free_inodes += k->g.inodes_per_group - used_i;
	}
	k->fs.free_blocks = free_blocks;
	k->fs.free_inodes = free_inodes;
	free(bb);
	free(ib);
	return 0;
}

static void times_of(const struct mf_entry *me, struct inode_in *in)
{
	in->atime = me->atime;
	in->atime_ns = me->atime_ns;
	in->mtime = me->mtime;
	in->mtime_ns = me->mtime_ns;
	in->ctime = me->ctime;
	in->ctime_ns = me->ctime_ns;
	in->crtime = me->ctime;
	in->crtime_ns = me->ctime_ns;
}

static void encode_dev(uint32_t major, uint32_t minor, uint32_t i_block[15])
{
	if (major < 256 && minor < 256)
		i_block[0] = major << 8 | minor;
	else
		i_block[1] = (minor & 0xff) | (major << 8) | ((minor & ~0xffu) << 12);
}

/* The inode of entry i. */
static int make_inode(struct mkfs *k, size_t i, uint8_t *raw)
{
	const struct mf_entry *me = &k->m->entries[i];
	struct ent *e = &k->e[i];
	struct inode_in in;
	int ret;

	memset(&in, 0, sizeof(in));
	in.mode = (uint16_t)(mkfs_mode_bits(me->type) | me->mode);
	in.uid = me->uid;
	in.gid = me->gid;
	in.links = (uint16_t)(e->links > DIR_NLINK_MAX ? 1 : e->links);
	times_of(me, &in);
	in.file_acl = e->xblk;
	in.blocks512 = ((uint64_t)e->nblocks + e->tree_blocks + (e->xblk ? 1 : 0)) *
		       (DISK_BLOCK / 512);
	if (me->xattr_count) {
		ret = mkfs_xattrs_of(k, i, false);
		if (ret)
			return ret;
		if (k->xl->has_ibody)
			in.ibody = k->xl->ibody;
	}
	switch (me->type) {
	case MF_REG:
	case MF_DIR:
		in.size = me->type == MF_REG ? me->size : (uint64_t)e->nblocks * DISK_BLOCK;
		in.flags = EXT4_EXTENTS_FL | (e->htree ? EXT4_INDEX_FL : 0);
		if (!e->nblocks) {
			extent_empty_root(in.i_block);
			break;
		}
		ret = mkfs_entry_extents(k, i);
		if (ret)
			return ret;
		{
			uint8_t *tree = e->tree_blocks ? scratch(k, (size_t)e->tree_blocks * DISK_BLOCK)
						       : NULL;

			if (e->tree_blocks && !tree)
				return -ENOMEM;
			extent_render(&k->ext, e->tree, in.i_block, tree,
				      ext4_inode_csum_seed(k->fs.csum_seed, e->ino, 0));
		}
		break;
	case MF_SYMLINK:
		in.size = me->link_len;
		if (e->nblocks) {
			struct lrange one = { 0, 1 };

			ret = extent_build(&k->g, e->phys, &one, 1, &k->ext);
			if (ret)
				return ret;
			in.flags = EXT4_EXTENTS_FL;
			extent_render(&k->ext, 0, in.i_block, NULL, 0);
		} else {
			memcpy(in.i_block, manifest_str(k->m, me->link_off), me->link_len);
		}
		break;
	case MF_CHR:
	case MF_BLK:
		encode_dev(me->rdev_major, me->rdev_minor, in.i_block);
		break;
	default:
		break;
	}
	if (inode_encode(&in, e->ino, k->fs.csum_seed, raw))
		mkfs_warn(k, "%s: a timestamp outside ext4's range (1901..2446) was clamped",
			  manifest_path(k->m, me));
	return 0;
}

static void make_special_inode(struct mkfs *k, uint32_t ino, uint8_t *raw)
{
	struct inode_in in;

	memset(&in, 0, sizeof(in));
	in.atime = in.mtime = in.ctime = in.crtime = k->fs.timestamp;
	if (ino == EXT4_JOURNAL_INO) {
		in.mode = S_IFREG | 0600;
		in.links = 1;
		in.size = (uint64_t)k->fs.journal_blocks * DISK_BLOCK;
		in.flags = EXT4_EXTENTS_FL;
		in.blocks512 = (uint64_t)k->fs.journal_blocks * (DISK_BLOCK / 512);
		memcpy(in.i_block, k->fs.jnl_blocks, sizeof(in.i_block));
	} else if (ino == LPF_INO) {
		struct lrange one = { 0, 1 };

		in.mode = S_IFDIR | 0700;
		in.links = 2;
		in.size = DISK_BLOCK;
		in.flags = EXT4_EXTENTS_FL;
		in.blocks512 = DISK_BLOCK / 512;
		extent_build(&k->g, k->lpf_block, &one, 1, &k->ext);
		extent_render(&k->ext, 0, in.i_block, NULL, 0);
	} else {
		memset(raw, 0, EXT4_INODE_SIZE);
		((struct ext4_inode *)raw)->i_extra_isize = EXT4_EXTRA_ISIZE;
		inode_csum(raw, ino, 0, k->fs.csum_seed);
		return;
	}
	inode_encode(&in, ino, k->fs.csum_seed, raw);
}

/* Inode tables: only the blocks that hold inodes in use are stored. */
static int emit_itables(struct mkfs *k, struct ext4_group_desc *gdt)
{
	uint32_t ipg = k->g.inodes_per_group;
	size_t cursor = 1; /* next manifest entry to get an inode (entry 0 is the root) */
	uint8_t *tbl = malloc((size_t)ipg * EXT4_INODE_SIZE);
	int ret = 0;

	if (!tbl)
		return -ENOMEM;
	for (uint32_t grp = 0; grp < k->g.groups && !ret; grp++) {
		uint64_t first = (uint64_t)grp * ipg + 1, n = 0;

		for (uint32_t x = 0; x < ipg && !ret; x++) {
			uint64_t ino = first + x;
			uint8_t *raw = tbl + (size_t)x * EXT4_INODE_SIZE;

			if (ino > k->last_ino && ino > LPF_INO)
				break;
			n = x + 1;
			if (ino == EXT4_ROOT_INO) {
				ret = make_inode(k, 0, raw);
			} else if (ino < FIRST_FILE_INO) {
				if (ino == LPF_INO && k->lpf != NONE)
					memset(raw, 0, EXT4_INODE_SIZE);
				else
					make_special_inode(k, (uint32_t)ino, raw);
			} else {
				while (k->m->entries[cursor].type == MF_HARDLINK)
					cursor++;
				ret = make_inode(k, cursor++, raw);
			}
		}
		if (!n || ret)
			continue;
		uint32_t blocks = (uint32_t)((n * EXT4_INODE_SIZE + DISK_BLOCK - 1) /
					     DISK_BLOCK);

		memset(tbl + n * EXT4_INODE_SIZE, 0, (size_t)blocks * DISK_BLOCK - n * EXT4_INODE_SIZE);
		ret = flush_backups(k, k->itable_at[grp], gdt);
		if (!ret)
			ret = emit_raw(k, k->itable_at[grp], tbl, blocks);
	}
	free(tbl);
	return ret;
}

/* Data runs of a regular file: every piece, mapped through the file's extents. */
static int emit_data(struct mkfs *k, size_t i)
{
	const struct mf_entry *me = &k->m->entries[i];
	uint64_t pos = 0;
	uint32_t h = 0;
	size_t x = 0;
	int ret;

	if (!me->chunk_count)
		return 0;
	ret = mkfs_entry_extents(k, i);
	if (ret)
		return ret;
	for (uint32_t c = 0; c < me->chunk_count; c++) {
		const struct mf_chunk *ch = &k->m->chunks[me->chunk_first + c];
		uint64_t left = ch->len, coff = ch->off;

		while (h < me->hole_count && k->m->holes[me->hole_first + h].off == pos)
			pos += k->m->holes[me->hole_first + h++].len;
		while (left) {
			uint64_t lblk = pos / DISK_BLOCK, ext_end, phys_byte, seg;
			const struct ext4_extent *ex;

			while (x < k->ext.n &&
			       (uint64_t)k->ext.e[x].ee_block + k->ext.e[x].ee_len <= lblk)
				x++;
			if (x == k->ext.n || k->ext.e[x].ee_block > lblk)
				return -EIO; /* a piece outside the file's blocks: a bug */
			ex = &k->ext.e[x];
			ext_end = ((uint64_t)ex->ee_block + ex->ee_len) * DISK_BLOCK;
			phys_byte = (((uint64_t)ex->ee_start_hi << 32 | ex->ee_start_lo) +
				     (lblk - ex->ee_block)) * DISK_BLOCK + pos % DISK_BLOCK;
			seg = ext_end - pos < left ? ext_end - pos : left;
			ret = layout_add_data(k->lw, phys_byte, (uint32_t)seg, ch->digest,
					      (uint32_t)coff);
			if (ret)
				return ret;
			k->data_runs++;
			pos += seg;
			coff += seg;
			left -= seg;
		}
	}
	return 0;
}

static int emit_entry(struct mkfs *k, size_t i, struct ext4_group_desc *gdt)
{
	const struct mf_entry *me = &k->m->entries[i];
	struct ent *e = &k->e[i];
	uint32_t seed = ext4_inode_csum_seed(k->fs.csum_seed, e->ino, 0);
	int ret = 0;

	if (me->type == MF_REG) {
		ret = emit_data(k, i);
	} else if (me->type == MF_DIR) {
		struct dir_params p;
		struct dir_plan *d;
		size_t n;
		uint8_t *buf;

		ret = mkfs_dir_entries(k, i, &n);
		if (ret)
			return ret;
		mkfs_dir_params(k, i, &p);
		ret = dir_plan_new(k->dents, n, &p, &d);
		if (ret)
			return ret;
		buf = scratch(k, (size_t)e->nblocks * DISK_BLOCK);
		ret = buf ? dir_render(d, buf) : -ENOMEM;
		dir_plan_free(d);
		if (!ret)
			ret = emit_run(k, gdt, e->phys, e->nblocks, buf);
	} else if (me->type == MF_SYMLINK && e->nblocks) {
		uint8_t *buf = scratch(k, DISK_BLOCK);

		if (!buf)
			return -ENOMEM;
		memcpy(buf, manifest_str(k->m, me->link_off), me->link_len);
		ret = emit_run(k, gdt, e->phys, 1, buf);
	}
	if (!ret && e->tree_blocks) {
		uint32_t i_block[15];
		uint8_t *tree;

		ret = mkfs_entry_extents(k, i);
		tree = ret ? NULL : scratch(k, (size_t)e->tree_blocks * DISK_BLOCK);
		if (!ret && !tree)
			ret = -ENOMEM;
		if (!ret) {
			extent_render(&k->ext, e->tree, i_block, tree, seed);
			ret = flush_backups(k, e->tree, gdt);
		}
		if (!ret)
			ret = emit_raw(k, e->tree, tree, e->tree_blocks);
	}
	if (!ret && e->xblk) {
		ret = mkfs_xattrs_of(k, i, false);
		if (!ret) {
			xattr_block_csum(k->xl->block, e->xblk, k->fs.csum_seed);
			ret = flush_backups(k, e->xblk, gdt);
		}
		if (!ret)
			ret = emit_raw(k, e->xblk, k->xl->block, 1);
	}
	return ret;
}

int mkfs_emit_all(struct mkfs *k)
{
	struct ext4_group_desc *gdt;
	uint32_t *dirs;
	uint8_t *bm;
	size_t cursor = 0;
	int ret;

	gdt = calloc((size_t)k->g.gdt_blocks * DISK_BLOCK / sizeof(*gdt), sizeof(*gdt));
	dirs = calloc(k->g.groups, sizeof(*dirs));
	bm = malloc(DISK_BLOCK);
	if (!gdt || !dirs || !bm) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < k->n; i++)
		if (k->m->entries[i].type == MF_DIR)
			dirs[(k->e[i].ino - 1) / k->g.inodes_per_group]++;
	if (k->lpf == NONE)
		dirs[(LPF_INO - 1) / k->g.inodes_per_group]++;
	ret = build_gdt(k, gdt, dirs);
	if (ret)
		goto out;
	ret = emit_super_copy(k, 0, gdt);
	k->next_backup = 1;
	for (uint32_t grp = 0; grp < k->g.groups && !ret; grp++) {
		block_bitmap(k, grp, bm, &cursor);
		ret = flush_backups(k, k->bbitmap_at[grp], gdt);
		if (!ret)
			ret = emit_raw(k, k->bbitmap_at[grp], bm, 1);
	}
	for (uint32_t grp = 0; grp < k->g.groups && !ret; grp++) {
		uint32_t last;

		inode_bitmap(k, grp, bm, &last);
		ret = flush_backups(k, k->ibitmap_at[grp], gdt);
		if (!ret)
			ret = emit_raw(k, k->ibitmap_at[grp], bm, 1);
	}
	if (!ret)
		ret = emit_itables(k, gdt);
	if (!ret) {
		journal_super_build(&k->fs, k->fs.journal_blocks, bm);
		ret = flush_backups(k, k->journal_first, gdt);
		if (!ret)
			ret = emit_raw(k, k->journal_first, bm, 1);
	}
	if (!ret && k->lpf == NONE) {
		struct dir_params p;
		struct dir_plan *d;

		memset(&p, 0, sizeof(p));
		p.ino = LPF_INO;
		p.parent_ino = EXT4_ROOT_INO;
		p.csum_seed = k->fs.csum_seed;
		memcpy(p.hash_seed, k->fs.hash_seed, sizeof(p.hash_seed));
		p.hash_version = EXT4_HASH_HALF_MD4;
		ret = dir_plan_new(NULL, 0, &p, &d);
		if (!ret) {
			ret = dir_render(d, bm);
			dir_plan_free(d);
		}
		if (!ret)
			ret = emit_run(k, gdt, k->lpf_block, 1, bm);
	}
	for (size_t o = 0; o < k->n_order && !ret; o++)
		ret = emit_entry(k, k->order[o], gdt);
	if (!ret)
		ret = flush_backups(k, UINT64_MAX, gdt);
out:
	free(gdt);
	free(dirs);
	free(bm);
	return ret;
}
