/* SPDX-License-Identifier: MIT */
/*
 * mkfs: plan (inode numbers, sizes), place (one allocation pass in placement order),
 * emit (metadata blocks and data runs, in disk order, into the layout). This file is the
 * driver (mkfs_run); mkfs_plan.c plans and places, mkfs_emit.c emits, mkfs_entry.c has
 * what both ask of a manifest entry (mkfs_int.h).
 */
#include "mkfs_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "csum.h"
#include "ext4_fs.h"

static void derive(const uint8_t digest[SHA256_LEN], const char *what, uint8_t *out, size_t len)
{
	uint8_t buf[SHA256_LEN + 32], h[SHA256_LEN];
	size_t wl = strlen(what);

	memcpy(buf, digest, SHA256_LEN);
	memcpy(buf + SHA256_LEN, what, wl);
	sha256_buf(buf, SHA256_LEN + wl, h);
	memcpy(out, h, len);
}

static int setup_fs(struct mkfs *k, uint32_t journal_blocks)
{
	const struct manifest *m = k->m;

	k->fs.g = &k->g;
	if (k->o->uuid) {
		memcpy(k->fs.uuid, k->o->uuid, 16);
	} else {
		derive(m->digest, "lazyblk fs uuid", k->fs.uuid, 16);
		k->fs.uuid[6] = (k->fs.uuid[6] & 0x0f) | 0x40;
		k->fs.uuid[8] = (k->fs.uuid[8] & 0x3f) | 0x80;
	}
	derive(m->digest, "lazyblk hash seed", (uint8_t *)k->fs.hash_seed, 16);
	k->fs.csum_seed = ext4_csum_seed(k->fs.uuid);
	if (k->o->label)
		memcpy(k->fs.label, k->o->label, strnlen(k->o->label, sizeof(k->fs.label)));
	/*
	 * Superblock times: fixed unless given, so the layout depends on the manifest only
	 * (0 is "never" for e2fsck; a newest file time could lie in the future).
	 */
	k->fs.timestamp = k->o->timestamp;
	k->fs.journal_blocks = journal_blocks;
	return 0;
}

static int journal_inode_blocks(struct mkfs *k)
{
	struct lrange r = { 0, k->fs.journal_blocks };
	uint32_t i_block[15];
	int ret = extent_build(&k->g, k->journal_first, &r, 1, &k->ext);

	if (ret)
		return ret;
	if (k->ext.n > 4)
		return -EFBIG; /* cannot happen for journals below a few GiB */
	extent_render(&k->ext, 0, i_block, NULL, 0);
	memcpy(k->fs.jnl_blocks, i_block, sizeof(i_block));
	k->fs.jnl_blocks[15] = 0;
	k->fs.jnl_blocks[16] = k->fs.journal_blocks * DISK_BLOCK;
	return 0;
}

static void mkfs_free(struct mkfs *k)
{
	geom_free(&k->g);
	free(k->e);
	free(k->used);
	free(k->bbitmap_at);
	free(k->ibitmap_at);
	free(k->itable_at);
	free(k->ext.e);
	free(k->ranges);
	free(k->buf);
	free(k->dents);
	free(k->xin);
	free(k->xl);
	free(k->order);
	layout_writer_free(k->lw);
}

/* Placement, the journal's blocks and the layout's writer; says why on failure. */
static int mkfs_place(struct mkfs *k, uint32_t journal_blocks, const char *out_path)
{
	int ret;

	k->bbitmap_at = calloc(k->g.groups, sizeof(uint64_t));
	k->ibitmap_at = calloc(k->g.groups, sizeof(uint64_t));
	k->itable_at = calloc(k->g.groups, sizeof(uint64_t));
	if (!k->bbitmap_at || !k->ibitmap_at || !k->itable_at)
		return mkfs_fail(k, -ENOMEM, "out of memory");
	ret = mkfs_place_all(k, journal_blocks);
	if (ret == -ENOSPC)
		return mkfs_fail(k, ret, "the image does not fit in %llu bytes (try a larger --size)",
				 (unsigned long long)k->g.blocks * DISK_BLOCK);
	if (ret && k->why_len && k->why[0])
		return ret; /* --order: it said why */
	if (!ret)
		ret = journal_inode_blocks(k);
	if (!ret)
		ret = layout_writer_new(out_path, k->g.blocks, &k->lw);
	if (ret)
		return mkfs_fail(k, ret, "%s: %s", out_path, strerror(-ret));
	return 0;
}

int mkfs_run(const struct manifest *m, const struct mkfs_opts *o, const char *out_path,
	     struct mkfs_result *res, char *why, size_t why_len)
{
	struct mkfs k = { .m = m, .o = o, .n = m->n_entries, .why = why, .why_len = why_len };
	uint32_t journal_blocks = 0;
	uint64_t need = 0;
	int ret;

	memset(res, 0, sizeof(*res));
	if (why_len)
		why[0] = '\0';
	k.e = calloc(k.n, sizeof(*k.e));
	k.order = malloc(k.n * sizeof(*k.order));
	k.xl = malloc(sizeof(*k.xl));
	if (!k.e || !k.order || !k.xl) {
		ret = mkfs_fail(&k, -ENOMEM, "out of memory");
		goto out;
	}
	ret = mkfs_plan_tree(&k);
	if (!ret)
		ret = setup_fs(&k, 0);
	if (!ret)
		ret = mkfs_plan_sizes(&k, &need);
	if (!ret)
		ret = mkfs_plan_geometry(&k, need, &journal_blocks);
	if (ret)
		goto out;
	k.fs.journal_blocks = journal_blocks;
	ret = mkfs_place(&k, journal_blocks, out_path);
	if (ret)
		goto out;
	ret = mkfs_emit_all(&k);
	if (!ret)
		ret = layout_writer_finish(k.lw, m->digest, k.fs.uuid, m->hdr->chunk_size,
					   res->digest);
	if (ret) {
		if (!why_len || !why[0])
			mkfs_fail(&k, ret, "%s: writing the layout: %s", out_path, strerror(-ret));
		goto out;
	}
	res->blocks = k.g.blocks;
	res->inodes = k.g.inodes;
	res->groups = k.g.groups;
	res->used_blocks = k.g.blocks - k.fs.free_blocks;
	res->meta_blocks = k.meta_blocks;
	res->data_runs = k.data_runs;
	memcpy(res->uuid, k.fs.uuid, 16);
out:
	if (ret && why_len && !why[0])
		mkfs_fail(&k, ret, "%s", strerror(-ret)); /* nothing below says why */
	mkfs_free(&k);
	return ret;
}
