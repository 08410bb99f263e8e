/* SPDX-License-Identifier: MIT */
/*
 * Directory blocks, as the kernel and e2fsck expect them with metadata_csum and dir_index.
 *
 * A directory whose "." / ".." and entries fit one block is linear: the entries in the
 * caller's order, the last one stretched up to the 12-byte checksum tail.
 *
 * Anything larger is an htree (dx directory):
 *
 *   block 0            dx root: "." (12 bytes), ".." stretched over the rest of the block,
 *                      dx_root_info, then count/limit and the index entries, dx_tail
 *   blocks 1..N        interior index nodes (only with indirect_levels 1): an empty
 *                      dirent spanning the whole block, count/limit, entries, dx_tail
 *   blocks N+1..       leaves: entries sorted by (major, minor) hash, packed greedily,
 *                      each leaf with the 12-byte dirent checksum tail
 *
 * An index entry maps the hashes from its own hash up to the next entry's to one block;
 * entry 0 has no hash field (count/limit sit there) and covers everything below entry 1.
 * When a run of equal major hashes is split between two leaves, the second leaf's index
 * hash gets the low bit set, which tells a lookup to continue into it.
 *
 * Without the largedir feature the kernel accepts indirect_levels 0 and 1 only (dx_probe
 * rejects levels >= 2, and so does e2fsck), which bounds a directory at
 * DX_ROOT_LIMIT * DX_NODE_LIMIT leaves; beyond that dir_plan_new() fails with -EFBIG.
 *
 * The index blocks come first so that the whole index of a lazily fetched directory is one
 * contiguous run right after the root.
 */
#include "dir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csum.h"
#include "../common/le.h"
#include "ext4_fs.h"

#define BLK DISK_BLOCK
#define DIRENT_TAIL_SIZE 12u                    /* struct ext4_dir_entry_tail */
#define DX_TAIL_SIZE 8u                         /* struct dx_tail */
#define LEAF_SPACE (BLK - DIRENT_TAIL_SIZE)     /* bytes for entries in a leaf */
#define DOT_REC 12u                             /* "." and ".." records (linear) */
#define DX_ROOT_COUNT_OFF 32u                   /* ".", "..", dx_root_info */
#define DX_NODE_COUNT_OFF 8u                    /* the empty fake dirent */
#define DX_ROOT_LIMIT ((BLK - DX_ROOT_COUNT_OFF - DX_TAIL_SIZE) / 8u)  /* 507 */
#define DX_NODE_LIMIT ((BLK - DX_NODE_COUNT_OFF - DX_TAIL_SIZE) / 8u)  /* 510 */
#define DX_ROOT_INFO_LEN 8u
#define PREFETCH_AHEAD 8

/* One entry in hash order: its hashes, its index in the caller's array, its record size. */
struct dir_hent {
	uint32_t major;
	uint32_t minor;
	uint32_t idx;
	uint32_t rec;
};

struct dir_plan {
	const struct dir_entry_in *ents;
	size_t n;
	struct dir_params p;
	struct dir_hent *sorted;        /* htree only: entries in hash order */
	uint32_t nleaves;               /* htree only */
	uint32_t nnodes;                /* interior index nodes (indirect_levels 1) */
	uint32_t nblocks;
};

/* Size of the record of an entry with a name of len bytes: 8-byte header, 4-aligned. */
static inline uint32_t rec_size(uint32_t len)
{
	return (8u + len + 3u) & ~3u;
}

/* Writes one dirent header + name at p (the padding is already zero). */
static void put_dirent(uint8_t *p, uint32_t ino, uint32_t rec_len, const char *name,
		       uint8_t name_len, uint8_t file_type)
{
	le32_put(p, ino);
	le16_put(p + 4, (uint16_t)rec_len);
	p[6] = name_len;
	p[7] = file_type;
	memcpy(p + 8, name, name_len);
}

/* The 12-byte tail of a leaf (or linear) block and its checksum over everything before. */
static void put_leaf_tail(uint8_t *blk, uint32_t iseed)
{
	uint8_t *t = blk + LEAF_SPACE;

	le32_put(t, 0);
	le16_put(t + 4, DIRENT_TAIL_SIZE);
	t[6] = 0;
	t[7] = EXT4_FT_DIR_CSUM;
	le32_put(t + 8, crc32c(iseed, blk, LEAF_SPACE));
}

/*
 * The dx_tail after `limit` index entries starting at count_off: crc32c over the block up
 * to the last used entry, then over the tail itself with its checksum field taken as zero
 * (the kernel's ext4_dx_csum()).
 */
static void put_dx_tail(uint8_t *blk, uint32_t count_off, uint32_t limit, uint32_t count,
			uint32_t iseed)
{
	uint8_t *t = blk + count_off + limit * 8u;
	uint32_t c;

	le32_put(t, 0);
	le32_put(t + 4, 0);
	c = crc32c(iseed, blk, count_off + count * 8u);
	c = crc32c(c, t, DX_TAIL_SIZE);
	le32_put(t + 4, c);
}

static void put_countlimit(uint8_t *p, uint32_t limit, uint32_t count)
{
	le16_put(p, (uint16_t)limit);
	le16_put(p + 2, (uint16_t)count);
}

/* Index entry i of an index whose count/limit starts at ents (entry 0 has no hash). */
static void put_dx_entry(uint8_t *ents, uint32_t i, uint32_t hash, uint32_t block)
{
	if (i)
		le32_put(ents + i * 8u, hash);
	le32_put(ents + i * 8u + 4, block);
}

static bool hent_before(const struct dir_hent *x, const struct dir_hent *y)
{
	if (x->major != y->major)
		return x->major < y->major;
	if (x->minor != y->minor)
		return x->minor < y->minor;
	return x->idx < y->idx;
}

/*
 * Sorts by (major, minor, idx). A stable LSD radix sort on the major hash (byte-wide
 * passes, skipping those where every entry has the same digit) keeps entries with equal
 * major hashes in input order; those rare runs are then put in (minor, idx) order by
 * insertion. tmp has room for n entries; the result ends up in a.
 */
static void hent_sort(struct dir_hent *a, struct dir_hent *tmp, size_t n)
{
	size_t count[4][256] = { { 0 } };
	struct dir_hent *src = a, *dst = tmp;

	for (size_t i = 0; i < n; i++)
		for (unsigned int p = 0; p < 4; p++)
			count[p][(a[i].major >> (8 * p)) & 0xff]++;
	for (unsigned int p = 0; p < 4; p++) {
		unsigned int sh = 8 * p;
		size_t pos = 0;
		struct dir_hent *t;

		if (count[p][(a[0].major >> sh) & 0xff] == n)
			continue;       /* one digit value for all: nothing to reorder */
		for (unsigned int b = 0; b < 256; b++) {
			size_t c = count[p][b];

			count[p][b] = pos;
			pos += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[p][(src[i].major >> sh) & 0xff]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof(*a));

	for (size_t i = 1; i < n; i++) {
		struct dir_hent h = a[i];
		size_t j = i;

		if (a[i - 1].major != h.major)
			continue;
		while (j > 0 && hent_before(&h, &a[j - 1])) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = h;
	}
}

static bool name_ok(const struct dir_entry_in *e)
{
	if (!e->name || e->name_len == 0 || e->ino == 0)
		return false;
	if (e->name[0] == '.' && (e->name_len == 1 || (e->name_len == 2 && e->name[1] == '.')))
		return false;
	return !memchr(e->name, '/', e->name_len) && !memchr(e->name, '\0', e->name_len);
}

/* Leaves are packed greedily in hash order: how many does the sorted array need? */
static uint32_t count_leaves(const struct dir_plan *d)
{
	uint32_t leaves = 1, used = 0;

	for (size_t i = 0; i < d->n; i++) {
		uint32_t r = d->sorted[i].rec;

		if (used + r > LEAF_SPACE) {
			leaves++;
			used = 0;
		}
		used += r;
	}
	return leaves;
}

static int plan_htree(struct dir_plan *d)
{
	const struct dir_params *p = &d->p;
	struct dir_hent *tmp;

	d->sorted = malloc(d->n * sizeof(*d->sorted));
	tmp = malloc(d->n * sizeof(*tmp));
	if (!d->sorted || !tmp) {
		free(tmp);
		return -ENOMEM;
	}
	for (size_t i = 0; i < d->n; i++) {
		const struct dir_entry_in *e = &d->ents[i];
		struct dir_hent *h = &d->sorted[i];

		h->major = dir_name_hash(e->name, e->name_len, p->hash_version, p->unsigned_hash,
					 p->hash_seed, &h->minor);
		h->idx = (uint32_t)i;
		h->rec = rec_size(e->name_len);
	}
	hent_sort(d->sorted, tmp, d->n);
	free(tmp);

	d->nleaves = count_leaves(d);
	if (d->nleaves > DX_ROOT_LIMIT) {
		d->nnodes = (d->nleaves + DX_NODE_LIMIT - 1) / DX_NODE_LIMIT;
		if (d->nnodes > DX_ROOT_LIMIT)
			return -EFBIG;
	}
	d->nblocks = 1 + d->nnodes + d->nleaves;
	return 0;
}

int dir_plan_new(const struct dir_entry_in *ents, size_t n, const struct dir_params *p,
		 struct dir_plan **out)
{
	struct dir_plan *d;
	uint64_t bytes = 2 * DOT_REC;
	int ret;

	if (!p || !out || (n && !ents) || n > UINT32_MAX || p->hash_version > EXT4_HASH_TEA ||
	    !p->ino || !p->parent_ino)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!name_ok(&ents[i]))
			return -EINVAL;
		bytes += rec_size(ents[i].name_len);
	}

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ents = ents;
	d->n = n;
	d->p = *p;
	if (bytes <= LEAF_SPACE) {
		d->nblocks = 1;
	} else {
		ret = plan_htree(d);
		if (ret) {
			dir_plan_free(d);
			return ret;
		}
	}
	*out = d;
	return 0;
}

uint32_t dir_nblocks(const struct dir_plan *d)
{
	return d->nblocks;
}

bool dir_is_htree(const struct dir_plan *d)
{
	return d->sorted != NULL;
}

void dir_plan_free(struct dir_plan *d)
{
	if (!d)
		return;
	free(d->sorted);
	free(d);
}

static uint32_t dir_iseed(const struct dir_plan *d)
{
	return ext4_inode_csum_seed(d->p.csum_seed, d->p.ino, d->p.generation);
}

static void render_linear(const struct dir_plan *d, uint8_t *blk)
{
	uint32_t off = 2 * DOT_REC;

	put_dirent(blk, d->p.ino, DOT_REC, ".", 1, EXT4_FT_DIR);
	put_dirent(blk + DOT_REC, d->p.parent_ino, d->n ? DOT_REC : LEAF_SPACE - DOT_REC,
		   "..", 2, EXT4_FT_DIR);
	for (size_t i = 0; i < d->n; i++) {
		const struct dir_entry_in *e = &d->ents[i];
		uint32_t r = rec_size(e->name_len);

		if (i + 1 == d->n)
			r = LEAF_SPACE - off;
		put_dirent(blk + off, e->ino, r, e->name, e->name_len, e->file_type);
		off += r;
	}
	put_leaf_tail(blk, dir_iseed(d));
}

/* With interior nodes: the node that the leaves being written belong to. */
struct dx_cursor {
	uint32_t node;          /* current interior node (indirect_levels 1) */
	uint32_t node_first;    /* first leaf of that node */
	uint32_t node_end;      /* one past its last leaf */
};

/* Interior node j owns leaves [j * L / N, (j + 1) * L / N): as even as it gets. */
static uint32_t node_first_leaf(const struct dir_plan *d, uint32_t j)
{
	return (uint32_t)((uint64_t)j * d->nleaves / d->nnodes);
}

static uint32_t node_leaves(const struct dir_plan *d, uint32_t j)
{
	return node_first_leaf(d, j + 1) - node_first_leaf(d, j);
}

static void render_index_heads(const struct dir_plan *d, uint8_t *out)
{
	uint8_t *root = out;
	uint8_t info[DX_ROOT_INFO_LEN] = { 0 };

	put_dirent(root, d->p.ino, DOT_REC, ".", 1, EXT4_FT_DIR);
	put_dirent(root + DOT_REC, d->p.parent_ino, BLK - DOT_REC, "..", 2, EXT4_FT_DIR);
	info[4] = d->p.hash_version;
	info[5] = DX_ROOT_INFO_LEN;
	info[6] = d->nnodes ? 1 : 0;
	memcpy(root + 2 * DOT_REC, info, sizeof(info));
	put_countlimit(root + DX_ROOT_COUNT_OFF, DX_ROOT_LIMIT,
		       d->nnodes ? d->nnodes : d->nleaves);

	for (uint32_t j = 0; j < d->nnodes; j++) {
		uint8_t *node = out + (size_t)(1 + j) * BLK;

		le32_put(node, 0);      /* inode 0, name_len 0, file_type 0 */
		le16_put(node + 4, (uint16_t)BLK);
		put_countlimit(node + DX_NODE_COUNT_OFF, DX_NODE_LIMIT, node_leaves(d, j));
	}
}

/*
 * Records leaf k (at logical block blk, its range starting at hash h) in the index: in the
 * root, or in its interior node, plus the root entry of that node when it is the node's
 * first leaf (a node's range starts where its first leaf's does).
 */
static void index_leaf(const struct dir_plan *d, uint8_t *out, struct dx_cursor *c,
		       uint32_t k, uint32_t h, uint32_t blk)
{
	if (!d->nnodes) {
		put_dx_entry(out + DX_ROOT_COUNT_OFF, k, h, blk);
		return;
	}
	while (k >= c->node_end) {
		c->node++;
		c->node_first = c->node_end;
		c->node_end = node_first_leaf(d, c->node + 1);
	}
	if (k == c->node_first)
		put_dx_entry(out + DX_ROOT_COUNT_OFF, c->node, h, 1 + c->node);
	put_dx_entry(out + (size_t)(1 + c->node) * BLK + DX_NODE_COUNT_OFF, k - c->node_first,
		     h, blk);
}

static void render_htree(const struct dir_plan *d, uint8_t *out)
{
	uint32_t iseed = dir_iseed(d);
	uint32_t first_leaf_blk = 1 + d->nnodes;
	struct dx_cursor cur = { 0 };
	uint32_t k = 0, used = 0, prev_major = 0;
	uint8_t *leaf = out + (size_t)first_leaf_blk * BLK;
	uint8_t *last = NULL;     /* the previous record in this leaf */

	render_index_heads(d, out);
	if (d->nnodes)
		cur.node_end = node_first_leaf(d, 1);

	for (size_t i = 0; i < d->n; i++) {
		const struct dir_hent *h = &d->sorted[i];
		const struct dir_entry_in *e = &d->ents[h->idx];
		uint32_t r = h->rec;

		/*
		 * Hash order visits the caller's entries and names at random: fetch them a few
		 * iterations ahead (the entry first, its name once the entry has arrived).
		 */
		if (i + 2 * PREFETCH_AHEAD < d->n)
			__builtin_prefetch(&d->ents[d->sorted[i + 2 * PREFETCH_AHEAD].idx]);
		if (i + PREFETCH_AHEAD < d->n)
			__builtin_prefetch(d->ents[d->sorted[i + PREFETCH_AHEAD].idx].name);

		if (i == 0 || used + r > LEAF_SPACE) {
			uint32_t dx_hash = h->major;

			if (i) {
				/* close the previous leaf */
				le16_put(last + 4, (uint16_t)(LEAF_SPACE - (last - leaf)));
				put_leaf_tail(leaf, iseed);
				leaf += BLK;
				k++;
				/* a run of equal hashes continues from the previous leaf */
				if (h->major == prev_major)
					dx_hash |= 1;
			}
			index_leaf(d, out, &cur, k, dx_hash, first_leaf_blk + k);
			used = 0;
		}
		last = leaf + used;
		put_dirent(last, e->ino, r, e->name, e->name_len, e->file_type);
		used += r;
		prev_major = h->major;
	}
	le16_put(last + 4, (uint16_t)(LEAF_SPACE - (last - leaf)));
	put_leaf_tail(leaf, iseed);

	put_dx_tail(out, DX_ROOT_COUNT_OFF, DX_ROOT_LIMIT, d->nnodes ? d->nnodes : d->nleaves,
		    iseed);
	for (uint32_t j = 0; j < d->nnodes; j++)
		put_dx_tail(out + (size_t)(1 + j) * BLK, DX_NODE_COUNT_OFF, DX_NODE_LIMIT,
			    node_leaves(d, j), iseed);
}

int dir_render(const struct dir_plan *d, uint8_t *out)
{
	if (!d || !out)
		return -EINVAL;
	memset(out, 0, (size_t)d->nblocks * BLK);
	if (dir_is_htree(d))
		render_htree(d, out);
	else
		render_linear(d, out);
	return 0;
}
