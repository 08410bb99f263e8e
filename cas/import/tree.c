/* SPDX-License-Identifier: MIT */
#include "tree.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/hash.h"
#include "../../common/grow.h"

#define ARENA_BLOCK (1u << 20)
#define CHUNK_SEG 65536u

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	_Alignas(16) uint8_t data[];
};

struct tree {
	struct arena_block *arena;
	struct tree_node *root;
	struct tree_node **buckets;   /* hash of (parent, name) */
	size_t n_buckets, n_nodes;
	struct mf_chunk **chunk_segs; /* segments never move: slots keep their address */
	size_t n_segs, cap_segs;
	uint64_t n_chunks;
	struct mf_hole *holes;
	uint64_t n_holes;
	size_t cap_holes;
	uint32_t write_gen;           /* tree_write() calls so far */
};

void *tree_alloc(struct tree *t, size_t len)
{
	struct arena_block *b = t->arena;

	len = (len + 15) & ~(size_t)15;
	if (!b || b->cap - b->used < len) {
		size_t cap = len > ARENA_BLOCK ? len : ARENA_BLOCK;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = t->arena;
		t->arena = b;
	}
	void *p = b->data + b->used;
	b->used += len;
	memset(p, 0, len);
	return p;
}

char *tree_strdup(struct tree *t, const char *s, size_t len)
{
	char *p = tree_alloc(t, len + 1);

	if (p && len)
		memcpy(p, s, len);
	return p;
}

struct tree_inode *tree_inode_new(struct tree *t, uint8_t type)
{
	struct tree_inode *ino = tree_alloc(t, sizeof(*ino));

	if (ino) {
		ino->type = type;
		ino->mode = type == MF_DIR ? 0755 : 0644;
	}
	return ino;
}

struct tree *tree_new(void)
{
	struct tree *t = calloc(1, sizeof(*t));
	struct tree_inode *ino;

	if (!t)
		return NULL;
	t->n_buckets = 1024;
	t->buckets = calloc(t->n_buckets, sizeof(*t->buckets));
	ino = t->buckets ? tree_inode_new(t, MF_DIR) : NULL;
	t->root = ino ? tree_alloc(t, sizeof(*t->root)) : NULL;
	if (!t->root) {
		tree_free(t);
		return NULL;
	}
	t->root->ino = ino;
	t->root->name = tree_strdup(t, "", 0);
	ino->refs = 1;
	return t;
}

void tree_free(struct tree *t)
{
	if (!t)
		return;
	while (t->arena) {
		struct arena_block *n = t->arena->next;

		free(t->arena);
		t->arena = n;
	}
	for (size_t i = 0; i < t->n_segs; i++)
		free(t->chunk_segs[i]);
	free(t->chunk_segs);
	free(t->holes);
	free(t->buckets);
	free(t);
}

struct tree_node *tree_root(struct tree *t) { return t->root; }
size_t tree_node_count(const struct tree *t) { return t->n_nodes + 1; }

static size_t bucket_of(const struct tree *t, const struct tree_node *dir, const char *name,
			size_t len)
{
	return hash_bytes(name, len, (uint64_t)(uintptr_t)dir) & (t->n_buckets - 1);
}

struct tree_node *tree_lookup(struct tree *t, struct tree_node *dir, const char *name, size_t len)
{
	struct tree_node *n = t->buckets[bucket_of(t, dir, name, len)];

	for (; n; n = n->hnext)
		if (n->parent == dir && n->name_len == len && !memcmp(n->name, name, len))
			return n;
	return NULL;
}

static void grow_buckets(struct tree *t)
{
	size_t nb = t->n_buckets * 2;
	struct tree_node **b = calloc(nb, sizeof(*b));

	if (!b)
		return; /* keep the smaller table: slower, still correct */
	for (size_t i = 0; i < t->n_buckets; i++) {
		struct tree_node *n = t->buckets[i], *next;

		for (; n; n = next) {
			size_t h = hash_bytes(n->name, n->name_len, (uint64_t)(uintptr_t)n->parent) &
				   (nb - 1);

			next = n->hnext;
			n->hnext = b[h];
			b[h] = n;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->n_buckets = nb;
}

static void unhash(struct tree *t, struct tree_node *n)
{
	struct tree_node **pp = &t->buckets[bucket_of(t, n->parent, n->name, n->name_len)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == n) {
			*pp = n->hnext;
			break;
		}
	}
}

static void detach(struct tree *t, struct tree_node *n)
{
	struct tree_node *p = n->parent;

	unhash(t, n);
	if (n->prev)
		n->prev->next = n->next;
	else
		p->first_child = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		p->last_child = n->prev;
	n->prev = n->next = NULL;
}

/* Post-order, iterative (hostile archives can nest deeply): detach every descendant. */
static void drop_subtree(struct tree *t, struct tree_node *n)
{
	struct tree_node *cur = n;

	for (;;) {
		if (cur->first_child) {
			cur = cur->first_child;
			continue;
		}
		cur->ino->refs--;
		t->n_nodes--;
		if (cur == n)
			break;
		struct tree_node *parent = cur->parent;

		detach(t, cur);
		cur = parent;
	}
}

void tree_remove(struct tree *t, struct tree_node *node)
{
	if (node == t->root)
		return;
	drop_subtree(t, node);
	detach(t, node);
}

void tree_remove_lower(struct tree *t, struct tree_node *dir, uint32_t layer)
{
	struct tree_node *c = dir->first_child, *next;

	/*
	 * The opaque directory keeps only what this layer put in it, at any depth: a
	 * subdirectory this layer re-declared keeps its own entries from this layer only.
	 */
	for (; c; c = next) {
		next = c->next;
		if (c->layer < layer)
			tree_remove(t, c);
		else if (c->ino->type == MF_DIR)
			tree_remove_lower(t, c, layer);
	}
}

struct tree_node *tree_put(struct tree *t, struct tree_node *dir, const char *name, size_t len,
			   uint32_t layer, struct tree_inode *ino)
{
	struct tree_node *old = tree_lookup(t, dir, name, len), *n;

	if (old && old->ino->type == MF_DIR && ino->type == MF_DIR) {
		/* a directory over a directory: new attributes, children kept */
		old->ino->refs--;
		old->ino = ino;
		ino->refs++;
		old->layer = layer;
		return old;
	}
	if (old)
		tree_remove(t, old);
	n = tree_alloc(t, sizeof(*n));
	if (!n)
		return NULL;
	n->name = tree_strdup(t, name, len);
	if (!n->name)
		return NULL;
	n->name_len = (uint32_t)len;
	n->parent = dir;
	n->layer = layer;
	n->ino = ino;
	ino->refs++;
	n->prev = dir->last_child;
	if (dir->last_child)
		dir->last_child->next = n;
	else
		dir->first_child = n;
	dir->last_child = n;
	if (t->n_nodes + 1 > t->n_buckets)
		grow_buckets(t);
	size_t h = bucket_of(t, dir, name, len);
	n->hnext = t->buckets[h];
	t->buckets[h] = n;
	t->n_nodes++;
	return n;
}

struct mf_chunk *tree_chunk_new(struct tree *t, uint64_t *index)
{
	uint64_t i = t->n_chunks;
	size_t seg = i / CHUNK_SEG;

	if (seg >= t->n_segs) {
		if (!grow_from((void **)&t->chunk_segs, &t->cap_segs, t->n_segs + 1,
			       sizeof(*t->chunk_segs), 16))
			return NULL;
		t->chunk_segs[t->n_segs] = calloc(CHUNK_SEG, sizeof(struct mf_chunk));
		if (!t->chunk_segs[t->n_segs])
			return NULL;
		t->n_segs++;
	}
	t->n_chunks++;
	*index = i;
	return &t->chunk_segs[seg][i % CHUNK_SEG];
}

struct mf_chunk *tree_chunk_at(struct tree *t, uint64_t index)
{
	return &t->chunk_segs[index / CHUNK_SEG][index % CHUNK_SEG];
}

int tree_hole_add(struct tree *t, struct tree_inode *ino, uint64_t off, uint64_t len)
{
	if (ino->hole_count) {
		struct mf_hole *last = &t->holes[ino->hole_first + ino->hole_count - 1];

		if (last->off + last->len == off) { /* merge adjacent holes */
			last->len += len;
			return 0;
		}
	}
	if (!grow_from((void **)&t->holes, &t->cap_holes, t->n_holes + 1, sizeof(*t->holes), 256))
		return -ENOMEM;
	if (!ino->hole_count)
		ino->hole_first = t->n_holes;
	else if (ino->hole_first + ino->hole_count != t->n_holes)
		return -EINVAL; /* holes of one inode must be added together */
	t->holes[t->n_holes++] = (struct mf_hole){ off, len };
	ino->hole_count++;
	return 0;
}

struct mf_hole *tree_hole_at(struct tree *t, uint64_t index) { return &t->holes[index]; }

/* ---------------------------------------------------------------- writing */

static int name_cmp(const void *a, const void *b)
{
	const struct tree_node *x = *(struct tree_node *const *)a, *y = *(struct tree_node *const *)b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, n);

	if (c)
		return c;
	return x->name_len < y->name_len ? -1 : x->name_len > y->name_len;
}

struct emit_state {
	struct tree *t;
	struct manifest_writer *w;
	char *path;
	size_t path_cap;
	struct mf_chunk *chunks;
	size_t chunks_cap;
};

static int emit_one(struct emit_state *s, struct tree_node *n, size_t path_len)
{
	struct tree_inode *ino = n->ino;
	struct mf_entry_in e;

	memset(&e, 0, sizeof(e));
	e.path = s->path;
	e.path_len = (uint32_t)path_len;
	e.type = ino->type;
	e.mode = ino->mode;
	e.uid = ino->uid;
	e.gid = ino->gid;
	e.rdev_major = ino->rdev_major;
	e.rdev_minor = ino->rdev_minor;
	e.atime = ino->atime;
	e.mtime = ino->mtime;
	e.ctime = ino->ctime;
	e.atime_ns = ino->atime_ns;
	e.mtime_ns = ino->mtime_ns;
	e.ctime_ns = ino->ctime_ns;
	e.size = ino->size;
	if (ino->type != MF_DIR && ino->emitted_gen == s->t->write_gen) {
		e.type = MF_HARDLINK;
		e.link = ino->emitted_path;
		e.link_len = ino->emitted_len;
		return manifest_writer_add(s->w, &e);
	}
	if (ino->type == MF_SYMLINK) {
		e.link = ino->link;
		e.link_len = ino->link_len;
		e.size = ino->link_len;
	}
	if (ino->chunk_count) {
		if (ino->chunk_count > s->chunks_cap) {
			struct mf_chunk *c = realloc(s->chunks, ino->chunk_count * sizeof(*c));

			if (!c)
				return -ENOMEM;
			s->chunks = c;
			s->chunks_cap = ino->chunk_count;
		}
		for (uint32_t i = 0; i < ino->chunk_count; i++)
			s->chunks[i] = *tree_chunk_at(s->t, ino->chunk_first + i);
		e.chunks = s->chunks;
		e.chunk_count = ino->chunk_count;
	}
	if (ino->hole_count) {
		e.holes = &s->t->holes[ino->hole_first];
		e.hole_count = ino->hole_count;
	}
	e.xattrs = ino->xattrs;
	e.xattr_count = ino->xattr_count;
	if (ino->type != MF_DIR && ino->refs > 1) {
		ino->emitted_path = tree_strdup(s->t, s->path, path_len);
		if (!ino->emitted_path)
			return -ENOMEM;
		ino->emitted_len = (uint32_t)path_len;
		ino->emitted_gen = s->t->write_gen;
	}
	return manifest_writer_add(s->w, &e);
}

static int path_reserve(struct emit_state *s, size_t need)
{
	return grow_from((void **)&s->path, &s->path_cap, need, 1, 256) ? 0 : -ENOMEM;
}

/* Depth-first, children in byte order of their names. */
static int emit_dir(struct emit_state *s, struct tree_node *dir, size_t path_len)
{
	struct tree_node **kids;
	size_t n = 0;
	int ret = 0;

	for (struct tree_node *c = dir->first_child; c; c = c->next)
		n++;
	if (!n)
		return 0;
	kids = malloc(n * sizeof(*kids));
	if (!kids)
		return -ENOMEM;
	n = 0;
	for (struct tree_node *c = dir->first_child; c; c = c->next)
		kids[n++] = c;
	qsort(kids, n, sizeof(*kids), name_cmp);
	for (size_t i = 0; i < n && !ret; i++) {
		struct tree_node *c = kids[i];
		size_t base = path_len == 1 ? 1 : path_len + 1; /* "/" or "/a/" */
		size_t len = base + c->name_len;

		ret = path_reserve(s, len + 1);
		if (ret)
			break;
		if (path_len != 1)
			s->path[path_len] = '/';
		memcpy(s->path + base, c->name, c->name_len);
		s->path[len] = '\0';
		ret = emit_one(s, c, len);
		if (!ret && c->ino->type == MF_DIR)
			ret = emit_dir(s, c, len);
	}
	free(kids);
	return ret;
}

int tree_write(struct tree *t, struct manifest_writer *w)
{
	struct emit_state s = { .t = t, .w = w };
	int ret;

	t->write_gen++; /* forget what an earlier write emitted */
	ret = path_reserve(&s, 4096);
	if (!ret) {
		s.path[0] = '/';
		s.path[1] = '\0';
		ret = emit_one(&s, t->root, 1);
	}
	if (!ret)
		ret = emit_dir(&s, t->root, 1);
	free(s.path);
	free(s.chunks);
	return ret;
}
