/* SPDX-License-Identifier: MIT */
/*
 * mkfs, planning (inode numbers, the directory tree, sizes, the geometry) and placement
 * (one allocation pass in placement order: fixed metadata, the --order files, then every
 * directory followed by its files). mkfs_int.h.
 */
#include "mkfs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/trace.h"
#include "../common/fsutil.h"
#include "../common/grow.h"
#include "ext4_fs.h"
#include "inode.h"

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
			b0 = pos / DISK_BLOCK;
			b1 = (end + DISK_BLOCK - 1) / DISK_BLOCK;
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
int mkfs_dir_entries(struct mkfs *k, size_t i, size_t *n)
{
	size_t c = 0;

	for (uint32_t ch = k->e[i].first_child; ch != NONE; ch = k->e[ch].next_sib) {
		const struct mf_entry *me = &k->m->entries[ch];
		uint8_t t = me->type == MF_HARDLINK ? k->m->entries[mkfs_link_target(k, me)].type : me->type;
		uint32_t len;
		const char *name = mkfs_name_of(k->m, me, &len);

		if (!grow((void **)&k->dents, &k->cap_dents, c + 2, sizeof(*k->dents)))
			return -ENOMEM;
		k->dents[c++] = (struct dir_entry_in){ name, (uint8_t)len, mkfs_file_type(t), k->e[ch].ino };
	}
	if (i == 0 && k->lpf == NONE) {
		if (!grow((void **)&k->dents, &k->cap_dents, c + 1, sizeof(*k->dents)))
			return -ENOMEM;
		k->dents[c++] = (struct dir_entry_in){ "lost+found", 10, EXT4_FT_DIR, LPF_INO };
	}
	*n = c;
	return 0;
}

void mkfs_dir_params(const struct mkfs *k, size_t i, struct dir_params *p)
{
	memset(p, 0, sizeof(*p));
	p->ino = k->e[i].ino;
	p->parent_ino = i == 0 ? EXT4_ROOT_INO : k->e[k->e[i].parent].ino;
	p->csum_seed = k->fs.csum_seed;
	memcpy(p->hash_seed, k->fs.hash_seed, sizeof(p->hash_seed));
	p->hash_version = EXT4_HASH_HALF_MD4;
	p->unsigned_hash = false;
}

/*
 * Only a directory's link count may overflow to 1 (dir_nlink): a file with more than
 * DIR_NLINK_MAX names would get a count e2fsck and the kernel take for wrong.
 */
static int check_links(struct mkfs *k)
{
	for (size_t i = 0; i < k->n; i++) {
		const struct mf_entry *me = &k->m->entries[i];

		if (me->type != MF_DIR && me->type != MF_HARDLINK && k->e[i].links > DIR_NLINK_MAX)
			return mkfs_fail(k, -EMLINK, "%s: %u hard links, more than ext4's limit of "
					 "%u for a file", manifest_path(k->m, me), k->e[i].links,
					 DIR_NLINK_MAX);
	}
	return 0;
}

int mkfs_plan_tree(struct mkfs *k)
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
		const char *name = mkfs_name_of(m, me, &nlen);
		if (nlen > EXT4_NAME_LEN) {
			ret = mkfs_fail(k, -ENAMETOOLONG, "%s: name longer than 255 bytes", p);
			goto out;
		}
		if (e->parent == 0 && nlen == 10 && !memcmp(name, "lost+found", 10)) {
			if (me->type != MF_DIR) {
				ret = mkfs_fail(k, -EINVAL, "/lost+found is not a directory (ext4 "
						"needs it for recovery)");
				goto out;
			}
			k->lpf = (uint32_t)i;
		}
		if (me->type == MF_HARDLINK) {
			size_t t = mkfs_link_target(k, me);

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
	ret = check_links(k);
out:
	free(stack);
	free(last_child);
	return ret;
}

/* Lay out entry i's xattrs into k->xl; says why on failure (mkfs_fail). */
int mkfs_xattrs_of(struct mkfs *k, size_t i, bool warn)
{
	const struct mf_entry *me = &k->m->entries[i];
	char why[WHY_MAX];
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
				mkfs_warn(k, "%s: %s does not apply to this file type, dropped",
					  manifest_path(k->m, me), name);
			continue;
		}
		k->xin[n++] = (struct mf_xattr_in){ name, manifest_str(k->m, mx->value_off),
						    mx->name_len, mx->value_len };
	}
	why[0] = '\0';
	ret = xattr_build(k->xin, n, k->xl, why, sizeof(why));
	if (ret)
		mkfs_fail(k, ret, "%s: xattrs: %s", manifest_path(k->m, me),
			  why[0] ? why : strerror(-ret));
	return ret;
}

/* Sizes of every entry: data, directory and symlink blocks, and xattr blocks. */
int mkfs_plan_sizes(struct mkfs *k, uint64_t *need)
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

			if (me->size > FILE_SIZE_MAX)
				return mkfs_fail(k, -EFBIG, "%s: %llu bytes, larger than ext4's "
						 "largest file (%llu bytes: block numbers are "
						 "32-bit)", manifest_path(m, me),
						 (unsigned long long)me->size, FILE_SIZE_MAX);
			ret = file_ranges(k, me, &nr, &blocks);
			if (ret)
				return mkfs_fail(k, ret, "%s: file too large for ext4",
						 manifest_path(m, me));
			/* extent tree blocks: estimated here, exact at placement */
			uint64_t ext = 0;
			for (size_t r = 0; r < nr; r++)
				ext += (k->ranges[r].len + EXT4_EXT_MAX_LEN - 1) / EXT4_EXT_MAX_LEN + 1;
			total += extent_tree_blocks(ext);
		} else if (me->type == MF_DIR) {
			struct dir_params p;
			struct dir_plan *d;
			size_t n;

			ret = mkfs_dir_entries(k, i, &n);
			if (ret)
				return ret;
			mkfs_dir_params(k, i, &p);
			ret = dir_plan_new(k->dents, n, &p, &d);
			if (ret)
				return mkfs_fail(k, ret, "%s: cannot build the directory: %s",
						 manifest_path(m, me), strerror(-ret));
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
			ret = mkfs_xattrs_of(k, i, true);
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

int mkfs_plan_geometry(struct mkfs *k, uint64_t need, uint32_t *journal_blocks)
{
	const struct mkfs_opts *o = k->o;
	uint64_t jb = (o->journal_size ? o->journal_size : DEFAULT_JOURNAL) / DISK_BLOCK;
	uint64_t inodes_min = k->last_ino + 1, blocks, data;
	int ret;

	if (jb < 1024 || jb > (1u << 20))
		return mkfs_fail(k, -EINVAL, "--journal must be between 4M and 4G");
	data = need + jb + 1 /* lost+found */ + 64 /* extents split around copies */;
	blocks = o->size ? o->size / DISK_BLOCK : data + SLACK_BYTES / DISK_BLOCK;
	if (o->size && blocks % EXT4_BLOCKS_PER_GROUP && blocks % EXT4_BLOCKS_PER_GROUP < 1024 &&
	    blocks > EXT4_BLOCKS_PER_GROUP)
		blocks -= blocks % EXT4_BLOCKS_PER_GROUP; /* no uselessly tiny last group */
	for (int iter = 0; iter < 16; iter++) {
		uint64_t inodes = o->inodes;

		if (!inodes) {
			inodes = blocks * DISK_BLOCK / 16384;
			if (inodes < inodes_min + inodes_min / 4 + 16)
				inodes = inodes_min + inodes_min / 4 + 16;
		}
		if (inodes < inodes_min)
			return mkfs_fail(k, -EINVAL, "--inodes %llu is too few: the image has %llu",
					 (unsigned long long)inodes, (unsigned long long)inodes_min);
		ret = geom_init(&k->g, blocks, inodes);
		if (ret)
			return mkfs_fail(k, ret, "cannot lay out %llu blocks with %llu inodes",
					 (unsigned long long)blocks, (unsigned long long)inodes);
		uint64_t want = data + overhead_blocks(&k->g);

		if (o->size) {
			if (want > blocks)
				return mkfs_fail(k, -ENOSPC, "--size %llu is too small: the image "
						 "needs at least %llu bytes",
						 (unsigned long long)o->size,
						 (unsigned long long)want * DISK_BLOCK);
			break;
		}
		want += SLACK_BYTES / DISK_BLOCK;
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
int mkfs_entry_extents(struct mkfs *k, size_t i)
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
			ret = mkfs_entry_extents(k, i);
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
		me = &k->m->entries[mkfs_link_target(k, me)];
	return me->type == MF_REG ? place_entry(k, (size_t)(me - k->m->entries)) : 0;
}

/* --order TRACE: the files a recorded trace read, in the order it first read them. */
static int place_order_trace(struct mkfs *k)
{
	char why[WHY_MAX] = "";
	struct trace *t;
	uint32_t last = 0;
	uint64_t missing = 0, files = 0;
	int ret = trace_load(k->o->order_file, &t, why, sizeof(why));

	if (ret)
		return mkfs_fail(k, ret, "--order %s: %s", k->o->order_file,
				 why[0] ? why : strerror(-ret));
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
		mkfs_warn(k, "--order %s: %llu of the %llu files it read are not in the image, "
			  "ignored", k->o->order_file, (unsigned long long)missing,
			  (unsigned long long)files);
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
	ret = fs_open_regular(AT_FDCWD, k->o->order_file, 0, NULL); /* a FIFO: never opened */
	f = ret >= 0 ? fdopen(ret, "r") : NULL;
	if (!f) {
		if (ret >= 0) {
			int err = errno;

			close(ret);
			ret = -err;
		}
		return mkfs_fail(k, ret, "--order %s: %s", k->o->order_file, fs_open_why(ret));
	}
	ret = 0;
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
			mkfs_warn(k, "--order: %s is not in the image, ignored", line);
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
int mkfs_place_all(struct mkfs *k, uint32_t journal_blocks)
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
