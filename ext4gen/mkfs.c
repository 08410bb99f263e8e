/* SPDX-License-Identifier: MIT */
/*
 * mkfs: plan (inode numbers, sizes), place (one allocation pass in placement order),
 * emit (metadata blocks and data runs, in disk order, into the layout).
 */
#include "mkfs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../cas/trace.h"
#include "../common/crc32c.h"
#include "../common/grow.h"
#include "../common/log.h"
#include "csum.h"
#include "dir.h"
#include "ext4_fs.h"
#include "extent.h"
#include "geom.h"
#include "inode.h"
#include "layout.h"
#include "super.h"
#include "xattr.h"

#define NONE UINT32_MAX
#define LPF_INO 11
#define FIRST_FILE_INO 12
#define SLACK_BYTES (1ull << 30)
#define DEFAULT_JOURNAL (64ull << 20)
#define DIR_NLINK_MAX 65000

/* Per manifest entry; the whole plan for a file lives here (about 56 bytes). */
struct ent {
	uint64_t phys;          /* first block of its data / directory / symlink blocks */
	uint64_t tree;          /* first extent tree block */
	uint64_t xblk;          /* xattr block, 0 if none */
	uint32_t nblocks;       /* blocks of data / directory / symlink */
	uint32_t tree_blocks;
	uint32_t ino;
	uint32_t parent;        /* entry index */
	uint32_t first_child;   /* directories: entry index of the first child */
	uint32_t next_sib;
	uint32_t links;
	uint8_t htree;
	uint8_t placed;
};

struct mkfs {
	const struct manifest *m;
	const struct mkfs_opts *o;
	struct ent *e;
	size_t n;
	uint32_t lpf;           /* entry index of /lost+found, or NONE when we add our own */
	uint32_t last_ino;
	struct geom g;
	struct fs_info fs;
	struct alloc a;
	uint64_t lpf_block;     /* our lost+found's block */
	uint64_t journal_first;
	uint64_t *used;         /* allocated ranges: start, len pairs (merged) */
	size_t n_used, cap_used;
	struct layout_writer *lw;
	uint64_t meta_blocks, data_runs;
	uint32_t next_backup;   /* next group whose superblock copy is still to be emitted */
	uint64_t *bbitmap_at, *ibitmap_at, *itable_at; /* per group */
	struct ext_list ext;
	struct lrange *ranges;
	size_t cap_ranges;
	uint8_t *buf;           /* scratch, grown as needed */
	size_t cap_buf;
	struct dir_entry_in *dents;
	size_t cap_dents;
	struct mf_xattr_in *xin;
	size_t cap_xin;
	struct xattr_layout *xl;
	uint32_t *order;        /* entry indexes in placement order */
	size_t n_order;
};

static const char *name_of(const struct manifest *m, const struct mf_entry *e, uint32_t *len)
{
	const char *p = manifest_path(m, e);
	const char *s = strrchr(p, '/');

	*len = (uint32_t)(e->path_len - (size_t)(s + 1 - p));
	return s + 1;
}

/* The entry a hardlink points at (validated by the manifest loader). */
static size_t link_target(const struct mkfs *k, const struct mf_entry *e)
{
	const struct mf_entry *t = manifest_find(k->m, manifest_str(k->m, e->link_off));

	return (size_t)(t - k->m->entries);
}

static uint8_t file_type(uint8_t t)
{
	switch (t) {
	case MF_REG: return EXT4_FT_REG_FILE;
	case MF_DIR: return EXT4_FT_DIR;
	case MF_SYMLINK: return EXT4_FT_SYMLINK;
	case MF_CHR: return EXT4_FT_CHRDEV;
	case MF_BLK: return EXT4_FT_BLKDEV;
	case MF_FIFO: return EXT4_FT_FIFO;
	case MF_SOCK: return EXT4_FT_SOCK;
	}
	return EXT4_FT_UNKNOWN;
}

static uint16_t mode_bits(uint8_t t)
{
	switch (t) {
	case MF_REG: return S_IFREG;
	case MF_DIR: return S_IFDIR;
	case MF_SYMLINK: return S_IFLNK;
	case MF_CHR: return S_IFCHR;
	case MF_BLK: return S_IFBLK;
	case MF_FIFO: return S_IFIFO;
	case MF_SOCK: return S_IFSOCK;
	}
	return 0;
}

/* ------------------------------------------------------------ planning */

/* Logical block ranges of a regular file (holes left out), into k->ranges. */
static int file_ranges(struct mkfs *k, const struct mf_entry *e, size_t *nr, uint64_t *blocks)
{
	uint64_t pos = 0, total = 0;
	size_t n = 0;

	*nr = 0;
	*blocks = 0;
	for (uint32_t h = 0; h <= e->hole_count; h++) {
		uint64_t end = h < e->hole_count ? k->m->holes[e->hole_first + h].off : e->size;
		uint64_t b0, b1;

		if (end > pos) {
			b0 = pos / EXT4_BLOCK_SIZE;
			b1 = (end + EXT4_BLOCK_SIZE - 1) / EXT4_BLOCK_SIZE;
			if (n && k->ranges[n - 1].start + k->ranges[n - 1].len >= b0) {
				uint64_t s = k->ranges[n - 1].start;

				if (b1 > s + k->ranges[n - 1].len)
					total += b1 - (s + k->ranges[n - 1].len);
				if (b1 > s + k->ranges[n - 1].len)
					k->ranges[n - 1].len = b1 - s;
			} else {
				if (!grow((void **)&k->ranges, &k->cap_ranges, n + 1, sizeof(*k->ranges)))
					return -ENOMEM;
				k->ranges[n++] = (struct lrange){ b0, b1 - b0 };
				total += b1 - b0;
			}
		}
		if (h < e->hole_count)
			pos = end + k->m->holes[e->hole_first + h].len;
	}
	if ((total >> 32) != 0)
		return -EFBIG;
	*nr = n;
	*blocks = total;
	return 0;
}

/* Directory entries of entry i (plus lost+found for the root), into k->dents. */
static int dir_entries(struct mkfs *k, size_t i, size_t *n)
{
	size_t c = 0;

	for (uint32_t ch = k->e[i].first_child; ch != NONE; ch = k->e[ch].next_sib) {
		const struct mf_entry *me = &k->m->entries[ch];
		uint8_t t = me->type == MF_HARDLINK ? k->m->entries[link_target(k, me)].type : me->type;
		uint32_t len;
		const char *name = name_of(k->m, me, &len);

		if (!grow((void **)&k->dents, &k->cap_dents, c + 2, sizeof(*k->dents)))
			return -ENOMEM;
		k->dents[c++] = (struct dir_entry_in){ name, (uint8_t)len, file_type(t), k->e[ch].ino };
	}
	if (i == 0 && k->lpf == NONE) {
		if (!grow((void **)&k->dents, &k->cap_dents, c + 1, sizeof(*k->dents)))
			return -ENOMEM;
		k->dents[c++] = (struct dir_entry_in){ "lost+found", 10, EXT4_FT_DIR, LPF_INO };
	}
	*n = c;
	return 0;
}

static void dir_params_of(const struct mkfs *k, size_t i, struct dir_params *p)
{
	memset(p, 0, sizeof(*p));
	p->ino = k->e[i].ino;
	p->parent_ino = i == 0 ? EXT4_ROOT_INO : k->e[k->e[i].parent].ino;
	p->csum_seed = k->fs.csum_seed;
	memcpy(p->hash_seed, k->fs.hash_seed, sizeof(p->hash_seed));
	p->hash_version = EXT4_HASH_HALF_MD4;
	p->unsigned_hash = false;
}

static int plan_tree(struct mkfs *k)
{
	const struct manifest *m = k->m;
	uint32_t *stack, *last_child;
	size_t sp = 0;
	uint32_t ino = FIRST_FILE_INO;
	int ret = 0;

	stack = malloc(sizeof(*stack) * (m->n_entries + 1));
	last_child = malloc(sizeof(*last_child) * m->n_entries);
	if (!stack || !last_child) {
		ret = -ENOMEM;
		goto out;
	}
	k->lpf = NONE;
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *me = &m->entries[i];
		struct ent *e = &k->e[i];
		const char *p = manifest_path(m, me);

		e->first_child = e->next_sib = NONE;
		last_child[i] = NONE;
		if (i == 0) {
			e->ino = EXT4_ROOT_INO;
			e->parent = 0;
			e->links = 2;
			stack[sp++] = 0;
			continue;
		}
		/* the parent is the deepest directory on the stack that prefixes this path */
		while (sp > 1) {
			const struct mf_entry *d = &m->entries[stack[sp - 1]];

			if (me->path_len > d->path_len && p[d->path_len] == '/' &&
			    !memcmp(p, manifest_path(m, d), d->path_len))
				break;
			sp--;
		}
		e->parent = stack[sp - 1];
		if (last_child[e->parent] == NONE)
			k->e[e->parent].first_child = (uint32_t)i;
		else
			k->e[last_child[e->parent]].next_sib = (uint32_t)i;
		last_child[e->parent] = (uint32_t)i;

		uint32_t nlen;
		const char *name = name_of(m, me, &nlen);
		if (nlen > EXT4_NAME_LEN) {
			log_error("%s: name longer than 255 bytes", p);
			ret = -ENAMETOOLONG;
			goto out;
		}
		if (e->parent == 0 && nlen == 10 && !memcmp(name, "lost+found", 10)) {
			if (me->type != MF_DIR) {
				log_error("/lost+found is not a directory (ext4 needs it for recovery)");
				ret = -EINVAL;
				goto out;
			}
			k->lpf = (uint32_t)i;
		}
		if (me->type == MF_HARDLINK) {
			size_t t = link_target(k, me);

			e->ino = k->e[t].ino;
			k->e[t].links++;
		} else {
			e->ino = ino++;
			e->links = me->type == MF_DIR ? 2 : 1;
		}
		if (me->type == MF_DIR) {
			stack[sp++] = (uint32_t)i;
			k->e[e->parent].links++; /* its ".." */
		}
	}
	k->last_ino = ino - 1;
	if (k->lpf == NONE)
		k->e[0].links++; /* our lost+found's ".." */
out:
	free(stack);
	free(last_child);
	return ret;
}

/* Lay out entry i's xattrs into k->xl; one error line on failure. */
static int xattrs_of(struct mkfs *k, size_t i, bool warn)
{
	const struct mf_entry *me = &k->m->entries[i];
	const char *why = NULL;
	int ret;

	uint32_t n = 0;

	if (!grow((void **)&k->xin, &k->cap_xin, me->xattr_count, sizeof(*k->xin)))
		return -ENOMEM;
	for (uint32_t x = 0; x < me->xattr_count; x++) {
		const struct mf_xattr *mx = &k->m->xattrs[me->xattr_first + x];
		const char *name = manifest_str(k->m, mx->name_off);

		/*
		 * Linux keeps no ACL on a symlink and no default ACL on anything but a
		 * directory; such attributes (only a hand-made archive has them) are dropped.
		 */
		if ((me->type == MF_SYMLINK && !strncmp(name, "system.posix_acl_", 17)) ||
		    (me->type != MF_DIR && !strcmp(name, "system.posix_acl_default"))) {
			if (warn)
				log_warn("%s: %s does not apply to this file type, dropped",
					 manifest_path(k->m, me), name);
			continue;
		}
		k->xin[n++] = (struct mf_xattr_in){ name, manifest_str(k->m, mx->value_off),
						    mx->name_len, mx->value_len };
	}
	ret = xattr_build(k->xin, n, k->xl, &why);
	if (ret)
		log_error("%s: xattrs: %s", manifest_path(k->m, me), why ? why : strerror(-ret));
	return ret;
}

/* Sizes of every entry: data, directory and symlink blocks, and xattr blocks. */
static int plan_sizes(struct mkfs *k, uint64_t *need)
{
	const struct manifest *m = k->m;
	uint64_t total = 0;
	int ret;

	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *me = &m->entries[i];
		struct ent *e = &k->e[i];
		uint64_t blocks = 0;

		if (me->type == MF_HARDLINK)
			continue;
		if (me->type == MF_REG) {
			size_t nr;

			ret = file_ranges(k, me, &nr, &blocks);
			if (ret) {
				log_error("%s: file too large for ext4", manifest_path(m, me));
				return ret;
			}
			/* extent tree blocks: estimated here, exact at placement */
			uint64_t ext = 0;
			for (size_t r = 0; r < nr; r++)
				ext += (k->ranges[r].len + EXT4_EXT_MAX_LEN - 1) / EXT4_EXT_MAX_LEN + 1;
			total += extent_tree_blocks(ext);
		} else if (me->type == MF_DIR) {
			struct dir_params p;
			struct dir_plan *d;
			size_t n;

			ret = dir_entries(k, i, &n);
			if (ret)
				return ret;
			dir_params_of(k, i, &p);
			ret = dir_plan_new(k->dents, n, &p, &d);
			if (ret) {
				log_error("%s: cannot build the directory: %s", manifest_path(m, me),
					  strerror(-ret));
				return ret;
			}
			blocks = dir_nblocks(d);
			e->htree = dir_is_htree(d);
			dir_plan_free(d);
			total += extent_tree_blocks(blocks / EXT4_EXT_MAX_LEN + 3);
		} else if (me->type == MF_SYMLINK && me->link_len >= 60) {
			blocks = 1;
		}
		e->nblocks = (uint32_t)blocks;
		total += blocks;
		if (me->xattr_count) {
			ret = xattrs_of(k, i, true);
			if (ret)
				return ret;
			if (k->xl->has_block) {
				e->xblk = 1; /* a block is needed: placed later */
				total++;
			}
		}
	}
	*need = total;
	return 0;
}

static uint64_t overhead_blocks(const struct geom *g)
{
	uint64_t o = 2ull * g->groups + (uint64_t)g->groups * g->itable_blocks;

	for (uint32_t grp = 0; grp < g->groups; grp++)
		o += geom_super_blocks(g, grp);
	return o;
}

static int plan_geometry(struct mkfs *k, uint64_t need, uint32_t *journal_blocks)
{
	const struct mkfs_opts *o = k->o;
	uint64_t jb = (o->journal_size ? o->journal_size : DEFAULT_JOURNAL) / EXT4_BLOCK_SIZE;
	uint64_t inodes_min = k->last_ino + 1, blocks, data;
	int ret;

	if (jb < 1024 || jb > (1u << 20)) {
		log_error("--journal must be between 4M and 4G");
		return -EINVAL;
	}
	data = need + jb + 1 /* lost+found */ + 64 /* extents split around copies */;
	blocks = o->size ? o->size / EXT4_BLOCK_SIZE : data + SLACK_BYTES / EXT4_BLOCK_SIZE;
	if (o->size && blocks % EXT4_BLOCKS_PER_GROUP && blocks % EXT4_BLOCKS_PER_GROUP < 1024 &&
	    blocks > EXT4_BLOCKS_PER_GROUP)
		blocks -= blocks % EXT4_BLOCKS_PER_GROUP; /* no uselessly tiny last group */
	for (int iter = 0; iter < 16; iter++) {
		uint64_t inodes = o->inodes;

		if (!inodes) {
			inodes = blocks * EXT4_BLOCK_SIZE / 16384;
			if (inodes < inodes_min + inodes_min / 4 + 16)
				inodes = inodes_min + inodes_min / 4 + 16;
		}
		if (inodes < inodes_min) {
			log_error("--inodes %llu is too few: the image has %llu",
				  (unsigned long long)inodes, (unsigned long long)inodes_min);
			return -EINVAL;
		}
		ret = geom_init(&k->g, blocks, inodes);
		if (ret) {
			log_error("cannot lay out %llu blocks with %llu inodes",
				  (unsigned long long)blocks, (unsigned long long)inodes);
			return ret;
		}
		uint64_t want = data + overhead_blocks(&k->g);

		if (o->size) {
			if (want > blocks) {
				log_error("--size %llu is too small: the image needs at least %llu bytes",
					  (unsigned long long)o->size,
					  (unsigned long long)want * EXT4_BLOCK_SIZE);
				return -ENOSPC;
			}
			break;
		}
		want += SLACK_BYTES / EXT4_BLOCK_SIZE;
		want = (want + EXT4_BLOCKS_PER_GROUP - 1) / EXT4_BLOCKS_PER_GROUP *
		       EXT4_BLOCKS_PER_GROUP;
		if (want == blocks)
			break;
		blocks = want;
	}
	*journal_blocks = (uint32_t)jb;
	return 0;
}

/* ------------------------------------------------------------ placement */

static int note_used(struct mkfs *k, uint64_t start, uint64_t len)
{
	if (!len)
		return 0;
	if (k->n_used && k->used[2 * (k->n_used - 1)] + k->used[2 * (k->n_used - 1) + 1] == start) {
		k->used[2 * (k->n_used - 1) + 1] += len;
		return 0;
	}
	if (!grow((void **)&k->used, &k->cap_used, 2 * (k->n_used + 1), sizeof(*k->used)))
		return -ENOMEM;
	k->used[2 * k->n_used] = start;
	k->used[2 * k->n_used + 1] = len;
	k->n_used++;
	return 0;
}

static int used_piece(void *arg, uint64_t phys, uint64_t count)
{
	return note_used(arg, phys, count);
}

static int take_run(struct mkfs *k, uint64_t n, uint64_t *first)
{
	int64_t b = alloc_run(&k->a, n);

	if (b < 0)
		return -ENOSPC;
	*first = (uint64_t)b;
	return geom_walk_run(&k->g, (uint64_t)b, n, used_piece, k);
}

static int take_contig(struct mkfs *k, uint64_t n, uint64_t *first)
{
	int64_t b = alloc_contig(&k->a, n);

	if (b < 0)
		return -ENOSPC;
	*first = (uint64_t)b;
	return note_used(k, (uint64_t)b, n);
}

/* The extents of entry i's blocks, into k->ext. */
static int entry_extents(struct mkfs *k, size_t i)
{
	const struct mf_entry *me = &k->m->entries[i];
	struct ent *e = &k->e[i];
	struct lrange one = { 0, e->nblocks };
	size_t nr = 1;
	uint64_t blocks;
	int ret;

	if (me->type == MF_REG) {
		ret = file_ranges(k, me, &nr, &blocks);
		if (ret)
			return ret;
		return extent_build(&k->g, e->phys, k->ranges, nr, &k->ext);
	}
	return extent_build(&k->g, e->phys, &one, e->nblocks ? 1 : 0, &k->ext);
}

static int place_entry(struct mkfs *k, size_t i)
{
	const struct mf_entry *me = &k->m->entries[i];
	struct ent *e = &k->e[i];
	int ret = 0;

	if (e->placed || me->type == MF_HARDLINK)
		return 0;
	e->placed = 1;
	k->order[k->n_order++] = (uint32_t)i;
	if (e->nblocks) {
		ret = take_run(k, e->nblocks, &e->phys);
		if (ret)
			return ret;
		if (me->type != MF_SYMLINK) {
			ret = entry_extents(k, i);
			if (ret)
				return ret;
			e->tree_blocks = extent_tree_blocks(k->ext.n);
			if (e->tree_blocks)
				ret = take_contig(k, e->tree_blocks, &e->tree);
		}
	}
	if (!ret && e->xblk)
		ret = take_contig(k, 1, &e->xblk);
	return ret;
}

/* Place the regular file at path (a hardlink: its target) now. 1: not in the image. */
static int place_path(struct mkfs *k, const char *path)
{
	const struct mf_entry *me = manifest_find(k->m, path);

	if (!me)
		return 1;
	if (me->type == MF_HARDLINK)
		me = &k->m->entries[link_target(k, me)];
	return me->type == MF_REG ? place_entry(k, (size_t)(me - k->m->entries)) : 0;
}

/* --order TRACE: the files a recorded trace read, in the order it first read them. */
static int place_order_trace(struct mkfs *k)
{
	const char *why = NULL;
	struct trace *t;
	uint32_t last = 0;
	uint64_t missing = 0, files = 0;
	int ret = trace_load(k->o->order_file, &t, &why);

	if (ret) {
		log_error("--order %s: %s", k->o->order_file, why ? why : strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < t->n_records && !ret; i++) {
		const struct trace_record *r = &t->records[i];

		if (!trace_record_new_file(r, &last))
			continue; /* metadata, or a file placed already */
		files++;
		ret = place_path(k, trace_path(t, r));
		if (ret > 0) {
			missing++;
			ret = 0;
		}
	}
	if (!ret && missing)
		log_warn("--order %s: %llu of the %llu files it read are not in the image, ignored",
			 k->o->order_file, (unsigned long long)missing, (unsigned long long)files);
	trace_free(t);
	return ret;
}

static int place_order_file(struct mkfs *k)
{
	char magic[8] = { 0 };
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int ret = 0;

	if (!k->o->order_file)
		return 0;
	f = fopen(k->o->order_file, "r");
	if (!f) {
		log_error("--order %s: %s", k->o->order_file, strerror(errno));
		return -errno;
	}
	if (fread(magic, 1, sizeof(magic), f) == sizeof(magic) &&
	    !memcmp(magic, TRACE_MAGIC, sizeof(magic))) {
		fclose(f);
		return place_order_trace(k);
	}
	rewind(f);
	while ((len = getline(&line, &cap, f)) > 0 && !ret) {
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (!len || line[0] == '#')
			continue;
		ret = place_path(k, line);
		if (ret > 0) {
			log_warn("--order: %s is not in the image, ignored", line);
			ret = 0;
		}
	}
	free(line);
	fclose(f);
	return ret;
}

/*
 * Fixed metadata first (bitmaps, inode tables, journal, lost+found), then the --order
 * files, then every directory followed by its files, subdirectories after them.
 */
static int place_all(struct mkfs *k, uint32_t journal_blocks)
{
	const struct geom *g = &k->g;
	uint32_t *stack;
	size_t sp = 0;
	int ret;

	k->a.g = g;
	k->a.next = 1 + g->gdt_blocks;
	ret = note_used(k, 0, 1 + g->gdt_blocks);
	for (uint32_t grp = 0; grp < g->groups && !ret; grp++)
		ret = take_contig(k, 1, &k->bbitmap_at[grp]);
	for (uint32_t grp = 0; grp < g->groups && !ret; grp++)
		ret = take_contig(k, 1, &k->ibitmap_at[grp]);
	for (uint32_t grp = 0; grp < g->groups && !ret; grp++)
		ret = take_contig(k, g->itable_blocks, &k->itable_at[grp]);
	if (!ret)
		ret = take_run(k, journal_blocks, &k->journal_first);
	if (!ret && k->lpf == NONE)
		ret = take_run(k, 1, &k->lpf_block);
	if (!ret)
		ret = place_order_file(k);
	if (ret)
		return ret;
	stack = malloc(sizeof(*stack) * (k->n + 1));
	if (!stack)
		return -ENOMEM;
	stack[sp++] = 0;
	while (sp && !ret) {
		size_t d = stack[--sp], first_sub = sp;

		ret = place_entry(k, d);
		for (uint32_t c = k->e[d].first_child; c != NONE && !ret; c = k->e[c].next_sib) {
			if (k->m->entries[c].type == MF_DIR)
				stack[sp++] = c;
			else
				ret = place_entry(k, c);
		}
		/* the first subdirectory is visited first */
		for (size_t a = first_sub, b = sp; b > a + 1; a++, b--) {
			uint32_t t = stack[a];

			stack[a] = stack[b - 1];
			stack[b - 1] = t;
		}
	}
	free(stack);
	return ret;
}

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
	uint8_t *buf = calloc(nb, EXT4_BLOCK_SIZE);
	int ret;

	if (!buf)
		return -ENOMEM;
	super_build(&k->fs, grp, (struct ext4_super_block *)(buf + (grp == 0 ? 1024 : 0)));
	memcpy(buf + EXT4_BLOCK_SIZE, gdt, (size_t)k->g.groups * sizeof(*gdt));
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
	c->data += count * EXT4_BLOCK_SIZE;
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

	memset(bm, 0, EXT4_BLOCK_SIZE);
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

	memset(bm, 0, EXT4_BLOCK_SIZE);
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
	bit_range(bm, ipg, EXT4_BLOCK_SIZE * 8); /* padding */
	return used;
}

static int build_gdt(struct mkfs *k, struct ext4_group_desc *gdt, uint32_t *dirs)
{
	uint8_t *bb = malloc(EXT4_BLOCK_SIZE), *ib = malloc(EXT4_BLOCK_SIZE);
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
	in.mode = (uint16_t)(mode_bits(me->type) | me->mode);
	in.uid = me->uid;
	in.gid = me->gid;
	in.links = (uint16_t)(e->links > DIR_NLINK_MAX ? 1 : e->links);
	times_of(me, &in);
	in.file_acl = e->xblk;
	in.blocks512 = ((uint64_t)e->nblocks + e->tree_blocks + (e->xblk ? 1 : 0)) *
		       (EXT4_BLOCK_SIZE / 512);
	if (me->xattr_count) {
		ret = xattrs_of(k, i, false);
		if (ret)
			return ret;
		if (k->xl->has_ibody)
			in.ibody = k->xl->ibody;
	}
	switch (me->type) {
	case MF_REG:
	case MF_DIR:
		in.size = me->type == MF_REG ? me->size : (uint64_t)e->nblocks * EXT4_BLOCK_SIZE;
		in.flags = EXT4_EXTENTS_FL | (e->htree ? EXT4_INDEX_FL : 0);
		if (!e->nblocks) {
			extent_empty_root(in.i_block);
			break;
		}
		ret = entry_extents(k, i);
		if (ret)
			return ret;
		{
			uint8_t *tree = e->tree_blocks ? scratch(k, (size_t)e->tree_blocks * EXT4_BLOCK_SIZE)
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
		log_warn("%s: a timestamp outside ext4's range (1901..2446) was clamped",
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
		in.size = (uint64_t)k->fs.journal_blocks * EXT4_BLOCK_SIZE;
		in.flags = EXT4_EXTENTS_FL;
		in.blocks512 = (uint64_t)k->fs.journal_blocks * (EXT4_BLOCK_SIZE / 512);
		memcpy(in.i_block, k->fs.jnl_blocks, sizeof(in.i_block));
	} else if (ino == LPF_INO) {
		struct lrange one = { 0, 1 };

		in.mode = S_IFDIR | 0700;
		in.links = 2;
		in.size = EXT4_BLOCK_SIZE;
		in.flags = EXT4_EXTENTS_FL;
		in.blocks512 = EXT4_BLOCK_SIZE / 512;
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
		uint32_t blocks = (uint32_t)((n * EXT4_INODE_SIZE + EXT4_BLOCK_SIZE - 1) /
					     EXT4_BLOCK_SIZE);

		memset(tbl + n * EXT4_INODE_SIZE, 0, (size_t)blocks * EXT4_BLOCK_SIZE - n * EXT4_INODE_SIZE);
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
	ret = entry_extents(k, i);
	if (ret)
		return ret;
	for (uint32_t c = 0; c < me->chunk_count; c++) {
		const struct mf_chunk *ch = &k->m->chunks[me->chunk_first + c];
		uint64_t left = ch->len, coff = ch->off;

		while (h < me->hole_count && k->m->holes[me->hole_first + h].off == pos)
			pos += k->m->holes[me->hole_first + h++].len;
		while (left) {
			uint64_t lblk = pos / EXT4_BLOCK_SIZE, ext_end, phys_byte, seg;
			const struct ext4_extent *ex;

			while (x < k->ext.n &&
			       (uint64_t)k->ext.e[x].ee_block + k->ext.e[x].ee_len <= lblk)
				x++;
			if (x == k->ext.n || k->ext.e[x].ee_block > lblk)
				return -EIO; /* a piece outside the file's blocks: a bug */
			ex = &k->ext.e[x];
			ext_end = ((uint64_t)ex->ee_block + ex->ee_len) * EXT4_BLOCK_SIZE;
			phys_byte = (((uint64_t)ex->ee_start_hi << 32 | ex->ee_start_lo) +
				     (lblk - ex->ee_block)) * EXT4_BLOCK_SIZE + pos % EXT4_BLOCK_SIZE;
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

		ret = dir_entries(k, i, &n);
		if (ret)
			return ret;
		dir_params_of(k, i, &p);
		ret = dir_plan_new(k->dents, n, &p, &d);
		if (ret)
			return ret;
		buf = scratch(k, (size_t)e->nblocks * EXT4_BLOCK_SIZE);
		ret = buf ? dir_render(d, buf) : -ENOMEM;
		dir_plan_free(d);
		if (!ret)
			ret = emit_run(k, gdt, e->phys, e->nblocks, buf);
	} else if (me->type == MF_SYMLINK && e->nblocks) {
		uint8_t *buf = scratch(k, EXT4_BLOCK_SIZE);

		if (!buf)
			return -ENOMEM;
		memcpy(buf, manifest_str(k->m, me->link_off), me->link_len);
		ret = emit_run(k, gdt, e->phys, 1, buf);
	}
	if (!ret && e->tree_blocks) {
		uint32_t i_block[15];
		uint8_t *tree;

		ret = entry_extents(k, i);
		tree = ret ? NULL : scratch(k, (size_t)e->tree_blocks * EXT4_BLOCK_SIZE);
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
		ret = xattrs_of(k, i, false);
		if (!ret) {
			xattr_block_csum(k->xl->block, e->xblk, k->fs.csum_seed);
			ret = flush_backups(k, e->xblk, gdt);
		}
		if (!ret)
			ret = emit_raw(k, e->xblk, k->xl->block, 1);
	}
	return ret;
}

static int emit_all(struct mkfs *k)
{
	struct ext4_group_desc *gdt;
	uint32_t *dirs;
	uint8_t *bm;
	size_t cursor = 0;
	int ret;

	gdt = calloc((size_t)k->g.gdt_blocks * EXT4_BLOCK_SIZE / sizeof(*gdt), sizeof(*gdt));
	dirs = calloc(k->g.groups, sizeof(*dirs));
	bm = malloc(EXT4_BLOCK_SIZE);
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

/* ------------------------------------------------------------ driver */

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
	k->fs.jnl_blocks[16] = k->fs.journal_blocks * EXT4_BLOCK_SIZE;
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

int mkfs_run(const struct manifest *m, const struct mkfs_opts *o, const char *out_path,
	     struct mkfs_result *res)
{
	struct mkfs k = { .m = m, .o = o, .n = m->n_entries };
	uint32_t journal_blocks = 0;
	uint64_t need = 0;
	int ret;

	memset(res, 0, sizeof(*res));
	k.e = calloc(k.n, sizeof(*k.e));
	k.order = malloc(k.n * sizeof(*k.order));
	k.xl = malloc(sizeof(*k.xl));
	if (!k.e || !k.order || !k.xl) {
		ret = -ENOMEM;
		goto out;
	}
	ret = plan_tree(&k);
	if (!ret)
		ret = setup_fs(&k, 0);
	if (!ret)
		ret = plan_sizes(&k, &need);
	if (!ret)
		ret = plan_geometry(&k, need, &journal_blocks);
	if (ret)
		goto out_quiet;
	k.fs.journal_blocks = journal_blocks;
	k.bbitmap_at = calloc(k.g.groups, sizeof(uint64_t));
	k.ibitmap_at = calloc(k.g.groups, sizeof(uint64_t));
	k.itable_at = calloc(k.g.groups, sizeof(uint64_t));
	if (!k.bbitmap_at || !k.ibitmap_at || !k.itable_at) {
		ret = -ENOMEM;
		goto out;
	}
	ret = place_all(&k, journal_blocks);
	if (ret == -ENOSPC) {
		log_error("the image does not fit in %llu bytes (try a larger --size)",
			  (unsigned long long)k.g.blocks * EXT4_BLOCK_SIZE);
		goto out_quiet;
	}
	if (!ret)
		ret = journal_inode_blocks(&k);
	if (!ret)
		ret = layout_writer_new(out_path, k.g.blocks, &k.lw);
	if (ret) {
		log_error("%s: %s", out_path, strerror(-ret));
		goto out_quiet;
	}
	ret = emit_all(&k);
	if (!ret)
		ret = layout_writer_finish(k.lw, m->digest, k.fs.uuid, m->hdr->chunk_size,
					   res->digest);
	if (ret) {
		log_error("%s: writing the layout: %s", out_path, strerror(-ret));
		goto out_quiet;
	}
	res->blocks = k.g.blocks;
	res->inodes = k.g.inodes;
	res->groups = k.g.groups;
	res->used_blocks = k.g.blocks - k.fs.free_blocks;
	res->meta_blocks = k.meta_blocks;
	res->data_runs = k.data_runs;
	memcpy(res->uuid, k.fs.uuid, 16);
out:
	if (ret == -ENOMEM)
		log_error("out of memory");
out_quiet:
	mkfs_free(&k);
	return ret;
}
