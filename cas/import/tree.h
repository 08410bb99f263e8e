/* SPDX-License-Identifier: MIT */
/*
 * The in-memory file tree an import builds before it writes a manifest. Directory entries
 * (tree_node) point at inodes (tree_inode); hardlinks are several nodes sharing one inode.
 * Layers are applied in order: every node remembers the layer that created it, so OCI
 * whiteouts and opaque directories remove only what lower layers put there.
 * All memory belongs to the tree and is released by tree_free().
 */
#ifndef LZ_CAS_TREE_H
#define LZ_CAS_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../manifest.h"
#include "../../common/test_hook.h"

struct tree_inode {
	uint8_t type;                 /* enum mf_type, never MF_HARDLINK */
	uint32_t mode, uid, gid;      /* mode: 07777 bits */
	uint32_t rdev_major, rdev_minor;
	int64_t atime, mtime, ctime;
	uint32_t atime_ns, mtime_ns, ctime_ns;
	uint64_t size;
	char *link;                   /* symlink target */
	uint32_t link_len;
	uint64_t chunk_first;         /* tree_chunk_at() indices, contiguous */
	uint32_t chunk_count;
	uint64_t hole_first;          /* tree_hole_at() indices, contiguous */
	uint32_t hole_count;
	struct mf_xattr_in *xattrs;
	uint32_t xattr_count;
	uint32_t refs;                /* nodes pointing here */
	char *emitted_path;           /* while writing: path of the first node emitted, */
	uint32_t emitted_len;
	uint32_t emitted_gen;         /* valid when this matches the tree's write count */
};

struct tree_node {
	struct tree_node *parent;
	struct tree_node *first_child, *last_child, *prev, *next; /* siblings */
	struct tree_node *hnext;      /* hash chain */
	char *name;
	uint32_t name_len;
	uint32_t layer;
	struct tree_inode *ino;
};

struct tree;

struct tree *tree_new(void);
void tree_free(struct tree *t);
struct tree_node *tree_root(struct tree *t);
size_t tree_node_count(const struct tree *t);

/* Memory that lives as long as the tree. */
void *tree_alloc(struct tree *t, size_t len);
char *tree_strdup(struct tree *t, const char *s, size_t len);

struct tree_inode *tree_inode_new(struct tree *t, uint8_t type);
struct tree_node *tree_lookup(struct tree *t, struct tree_node *dir, const char *name, size_t len);
/*
 * Put ino under dir as name (layer L). If name exists: a directory over a directory keeps
 * the old children and takes the new inode's attributes; anything else replaces the old
 * node (and its subtree). Returns the node, or NULL on allocation failure.
 */
struct tree_node *tree_put(struct tree *t, struct tree_node *dir, const char *name, size_t len,
			   uint32_t layer, struct tree_inode *ino);
/* Remove node and its subtree. */
void tree_remove(struct tree *t, struct tree_node *node);
/* Remove the children of dir that came from layers below `layer` (opaque directory). */
void tree_remove_lower(struct tree *t, struct tree_node *dir, uint32_t layer);

/* Chunk slots: stable addresses (workers fill them asynchronously). */
struct mf_chunk *tree_chunk_new(struct tree *t, uint64_t *index);
TEST_HOOK
struct mf_chunk *tree_chunk_at(struct tree *t, uint64_t index);
int tree_hole_add(struct tree *t, struct tree_inode *ino, uint64_t off, uint64_t len);
TEST_HOOK
struct mf_hole *tree_hole_at(struct tree *t, uint64_t index);

/* Emit every reachable node, depth-first, into w. Optional config JSON. */
int tree_write(struct tree *t, struct manifest_writer *w);

#endif
