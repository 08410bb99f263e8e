/* SPDX-License-Identifier: MIT */
/* Unit tests for cas/tree: the in-memory import tree, layers, hardlinks, tree_write. */
#include "../helpers.h"

#include "../../../cas/manifest.h"
#include "../../../cas/import/tree.h"

static struct tree_node *put(struct tree *t, struct tree_node *dir, const char *name,
			     uint32_t layer, uint8_t type)
{
	struct tree_inode *ino = tree_inode_new(t, type);
	struct tree_node *n;

	assert_non_null(ino);
	n = tree_put(t, dir, name, strlen(name), layer, ino);
	assert_non_null(n);
	return n;
}

static struct tree_node *look(struct tree *t, struct tree_node *dir, const char *name)
{
	return tree_lookup(t, dir, name, strlen(name));
}

/* tree_write into a fresh writer, serialize, and parse (which must succeed). */
static struct manifest *to_manifest(struct tree *t, uint8_t **bytes, size_t *n_bytes)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	struct manifest *m = NULL;
	char why[WHY_MAX] = "";
	uint8_t *buf;
	size_t len;
	int ret;

	assert_non_null(w);
	assert_int_equal(tree_write(t, w), 0);
	char wwhy[WHY_MAX] = "";

	ret = manifest_writer_serialize(w, &buf, &len, wwhy, sizeof(wwhy));
	if (ret)
		fail_msg("serialize: %d %s", ret, wwhy);
	manifest_writer_free(w);
	if (bytes) {
		*bytes = malloc(len);
		memcpy(*bytes, buf, len);
		*n_bytes = len;
	}
	ret = manifest_parse(buf, len, &m, why, sizeof(why));
	if (ret)
		fail_msg("parse: %d %s", ret, why[0] ? why : "");
	return m;
}

static void expect_paths(const struct manifest *m, const char *const *paths, size_t n)
{
	for (size_t i = 0; i < m->n_entries && i < n; i++) {
		const char *p = manifest_path(m, &m->entries[i]);

		if (strcmp(p, paths[i]))
			fail_msg("entry %zu: \"%s\", want \"%s\"", i, p, paths[i]);
	}
	assert_int_equal(m->n_entries, n);
}

static const struct mf_entry *find(const struct manifest *m, const char *path)
{
	const struct mf_entry *e = manifest_find(m, path);

	if (!e)
		fail_msg("%s missing from the manifest", path);
	return e;
}

/* ------------------------------------------------------------------ basics */

static void test_new_and_alloc(void **state)
{
	struct tree *t = tree_new();
	struct tree_node *root;
	uint8_t *p, *big;
	char *s;

	(void)state;
	assert_non_null(t);
	root = tree_root(t);
	assert_non_null(root);
	assert_non_null(root->ino);
	assert_int_equal(root->ino->type, MF_DIR);
	assert_null(root->parent);
	assert_null(root->first_child);
	assert_int_equal(tree_node_count(t), 1);

	p = tree_alloc(t, 100);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 8, 0); /* enough for every struct the tree stores */
	for (int i = 0; i < 100; i++)
		assert_int_equal(p[i], 0);
	big = tree_alloc(t, 3u << 20); /* larger than an arena block */
	assert_non_null(big);
	assert_int_equal(big[(3u << 20) - 1], 0);
	memset(big, 0xff, 3u << 20);
	s = tree_strdup(t, "hello world", 5);
	assert_string_equal(s, "hello");
	s = tree_strdup(t, NULL, 0);
	assert_string_equal(s, "");
	{
		struct tree_inode *f = tree_inode_new(t, MF_REG), *d = tree_inode_new(t, MF_DIR);

		assert_int_equal(f->type, MF_REG);
		assert_int_equal(f->mode, 0644);
		assert_int_equal(d->mode, 0755);
		assert_int_equal(f->refs, 0);
		assert_int_equal(f->chunk_count, 0);
	}
	tree_free(t);
	tree_free(NULL);
}

static void test_put_lookup(void **state)
{
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *a, *b, *c, *bin;

	(void)state;
	a = put(t, root, "a", 0, MF_REG);
	b = put(t, root, "b", 0, MF_DIR);
	c = put(t, b, "c", 0, MF_REG);
	bin = tree_put(t, root, "x\0y\xff", 4, 0, tree_inode_new(t, MF_FIFO));
	assert_non_null(bin);
	assert_int_equal(tree_node_count(t), 5);

	assert_ptr_equal(look(t, root, "a"), a);
	assert_ptr_equal(look(t, root, "b"), b);
	assert_ptr_equal(look(t, b, "c"), c);
	assert_ptr_equal(tree_lookup(t, root, "x\0y\xff", 4), bin);
	assert_null(tree_lookup(t, root, "x", 1));
	assert_null(tree_lookup(t, root, "x\0y", 3));
	assert_ptr_equal(tree_lookup(t, root, "abc", 1), a); /* the length delimits */
	assert_null(look(t, root, "c"));                     /* only in b */
	assert_null(look(t, b, "a"));
	assert_null(look(t, root, "ab"));
	assert_null(look(t, root, ""));

	assert_ptr_equal(a->parent, root);
	assert_ptr_equal(c->parent, b);
	assert_int_equal(a->name_len, 1);
	assert_memory_equal(a->name, "a", 2);
	assert_int_equal(a->ino->refs, 1);
	/* siblings in insertion order */
	assert_ptr_equal(root->first_child, a);
	assert_ptr_equal(a->next, b);
	assert_ptr_equal(b->prev, a);
	assert_ptr_equal(root->last_child, bin);
	tree_free(t);
}

static void test_many_nodes(void **state)
{
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *sub;
	char name[32];

	(void)state;
	sub = put(t, root, "sub", 0, MF_DIR);
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		put(t, root, name, 0, MF_REG);
		snprintf(name, sizeof(name), "g%d", i);
		put(t, sub, name, 0, i % 2 ? MF_REG : MF_DIR);
	}
	assert_int_equal(tree_node_count(t), 1 + 1 + 10000);
	for (int i = 0; i < 5000; i++) {
		struct tree_node *n;

		snprintf(name, sizeof(name), "f%d", i);
		n = look(t, root, name);
		assert_non_null(n);
		assert_int_equal(n->name_len, strlen(name));
		assert_memory_equal(n->name, name, n->name_len);
		assert_null(look(t, sub, name));
		snprintf(name, sizeof(name), "g%d", i);
		n = look(t, sub, name);
		assert_non_null(n);
		assert_ptr_equal(n->parent, sub);
	}
	{
		struct manifest *m = to_manifest(t, NULL, NULL);

		assert_int_equal(m->n_entries, 10002);
		manifest_free(m);
	}
	tree_free(t);
}

/* ------------------------------------------------------------------ replacement */

static void test_dir_over_dir(void **state)
{
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *d, *x, *y, *z, *d2;
	struct tree_inode *old, *fresh;
	struct manifest *m;

	(void)state;
	d = put(t, root, "d", 0, MF_DIR);
	d->ino->mode = 0700;
	d->ino->uid = 1;
	x = put(t, d, "x", 0, MF_REG);
	y = put(t, d, "y", 0, MF_DIR);
	z = put(t, y, "z", 0, MF_REG);
	old = d->ino;
	assert_int_equal(tree_node_count(t), 5);

	fresh = tree_inode_new(t, MF_DIR);
	fresh->mode = 01777;
	fresh->uid = 2;
	d2 = tree_put(t, root, "d", 1, 1, fresh);
	assert_ptr_equal(d2, d);
	assert_ptr_equal(d->ino, fresh);
	assert_int_equal(d->layer, 1);
	assert_int_equal(fresh->refs, 1);
	assert_int_equal(old->refs, 0);
	assert_int_equal(tree_node_count(t), 5);
	assert_ptr_equal(look(t, d, "x"), x);
	assert_ptr_equal(look(t, d, "y"), y);
	assert_ptr_equal(look(t, y, "z"), z);
	assert_int_equal(x->layer, 0);

	m = to_manifest(t, NULL, NULL);
	{
		static const char *const want[] = { "/", "/d", "/d/x", "/d/y", "/d/y/z" };

		expect_paths(m, want, 5);
	}
	assert_int_equal(find(m, "/d")->mode, 01777);
	assert_int_equal(find(m, "/d")->uid, 2);
	manifest_free(m);
	tree_free(t);
}

static void test_replace_subtree(void **state)
{
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *d, *y, *f, *g;
	struct tree_inode *dino;
	struct manifest *m;

	(void)state;
	put(t, root, "a", 0, MF_REG);
	d = put(t, root, "d", 0, MF_DIR);
	put(t, d, "x", 0, MF_REG);
	y = put(t, d, "y", 0, MF_DIR);
	put(t, y, "z", 0, MF_REG);
	put(t, root, "e", 0, MF_REG);
	dino = d->ino;
	assert_int_equal(tree_node_count(t), 7);

	/* a file over a directory replaces the whole subtree */
	f = put(t, root, "d", 1, MF_REG);
	assert_ptr_equal(look(t, root, "d"), f);
	assert_int_equal(f->ino->type, MF_REG);
	assert_null(f->first_child);
	assert_int_equal(tree_node_count(t), 4);
	assert_int_equal(dino->refs, 0);
	assert_null(look(t, d, "x"));  /* the old children are gone from the index */
	assert_null(look(t, d, "y"));
	assert_null(look(t, y, "z"));
	m = to_manifest(t, NULL, NULL);
	{
		static const char *const want[] = { "/", "/a", "/d", "/e" };

		expect_paths(m, want, 4);
	}
	assert_int_equal(find(m, "/d")->type, MF_REG);
	manifest_free(m);

	/* a directory over a file, then a symlink over that directory */
	g = put(t, root, "d", 2, MF_DIR);
	assert_ptr_equal(look(t, root, "d"), g);
	put(t, g, "new", 2, MF_REG);
	assert_int_equal(tree_node_count(t), 5);
	{
		struct tree_inode *l = tree_inode_new(t, MF_SYMLINK);

		l->link = tree_strdup(t, "/a", 2);
		l->link_len = 2;
		assert_non_null(tree_put(t, root, "d", 1, 3, l));
	}
	assert_int_equal(tree_node_count(t), 4);
	assert_null(look(t, g, "new"));
	m = to_manifest(t, NULL, NULL);
	assert_int_equal(find(m, "/d")->type, MF_SYMLINK);
	assert_int_equal(find(m, "/d")->size, 2);
	assert_null(manifest_find(m, "/d/new"));
	manifest_free(m);

	/* removing the root does nothing */
	tree_remove(t, root);
	assert_int_equal(tree_node_count(t), 4);
	tree_free(t);
}

static void test_remove_deep(void **state)
{
	const int depth = 10000;
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *n = root, *top = NULL, *mid = NULL;

	(void)state;
	for (int i = 0; i < depth; i++) {
		n = put(t, n, i % 2 ? "b" : "a", 0, MF_DIR);
		if (i == 0)
			top = n;
		if (i == depth / 2)
			mid = n;
		/* some siblings along the way */
		if (i % 1000 == 0)
			put(t, n->parent, "sib", 0, MF_REG);
	}
	put(t, n, "leaf", 0, MF_REG);
	assert_int_equal(tree_node_count(t), 1 + depth + 10 + 1);

	/* cut in the middle first, then the whole chain */
	tree_remove(t, mid);
	/* the root, depths 1..5000, and the "sib" files of i = 0, 1000, ..., 5000 */
	assert_int_equal(tree_node_count(t), 1 + depth / 2 + 6);
	assert_ptr_not_equal(mid->parent->first_child, mid);
	assert_null(look(t, mid->parent, "a"));
	assert_non_null(look(t, mid->parent, "sib"));
	tree_remove(t, top);
	assert_int_equal(tree_node_count(t), 2); /* the root and its "sib" */
	assert_null(look(t, root, "a"));
	assert_non_null(look(t, root, "sib"));
	assert_ptr_equal(root->first_child, root->last_child);
	{
		struct manifest *m = to_manifest(t, NULL, NULL);
		static const char *const want[] = { "/", "/sib" };

		expect_paths(m, want, 2);
		manifest_free(m);
	}
	tree_free(t);
}

/* A deep tree can also be written (hostile archives nest deeply). */
static void test_write_deep(void **state)
{
	const int depth = 4000;
	struct tree *t = tree_new();
	struct tree_node *n = tree_root(t);
	struct manifest *m;

	(void)state;
	for (int i = 0; i < depth; i++)
		n = put(t, n, "d", 0, MF_DIR);
	put(t, n, "f", 0, MF_REG);
	m = to_manifest(t, NULL, NULL);
	assert_int_equal(m->n_entries, depth + 2);
	assert_int_equal(m->entries[depth + 1].path_len, 2 * depth + 2);
	manifest_free(m);
	tree_free(t);
}

/* ------------------------------------------------------------------ opaque directories */

static void test_remove_lower(void **state)
{
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *o, *sub, *deep, *old, *same;
	struct manifest *m;

	(void)state;
	/* layer 0 */
	o = put(t, root, "o", 0, MF_DIR);
	put(t, o, "a", 0, MF_REG);
	sub = put(t, o, "sub", 0, MF_DIR);
	put(t, sub, "x", 0, MF_REG);
	deep = put(t, sub, "deep", 0, MF_DIR);
	put(t, deep, "z", 0, MF_REG);
	old = put(t, o, "old", 0, MF_DIR);
	put(t, old, "q", 0, MF_REG);
	put(t, root, "keep", 0, MF_REG);      /* outside the opaque directory */
	/* layer 1 */
	assert_ptr_equal(put(t, root, "o", 1, MF_DIR), o);
	put(t, o, "b", 1, MF_REG);
	assert_ptr_equal(put(t, o, "sub", 1, MF_DIR), sub);
	put(t, sub, "y", 1, MF_REG);
	same = put(t, sub, "samedir", 1, MF_DIR);
	put(t, same, "s", 1, MF_REG);
	put(t, old, "fresh", 1, MF_REG);      /* under a directory only layer 0 declared */
	assert_int_equal(tree_node_count(t), 15);

	tree_remove_lower(t, o, 1);
	m = to_manifest(t, NULL, NULL);
	{
		static const char *const want[] = {
			"/", "/keep", "/o", "/o/b", "/o/sub", "/o/sub/samedir", "/o/sub/samedir/s",
			"/o/sub/y",
		};

		expect_paths(m, want, sizeof(want) / sizeof(want[0]));
	}
	assert_int_equal(tree_node_count(t), 8);
	assert_null(look(t, o, "a"));
	assert_null(look(t, o, "old"));
	assert_null(look(t, sub, "x"));
	assert_null(look(t, sub, "deep"));
	assert_null(look(t, deep, "z"));
	manifest_free(m);

	/* the same layer again removes nothing more; a higher layer removes everything */
	tree_remove_lower(t, o, 1);
	assert_int_equal(tree_node_count(t), 8);
	tree_remove_lower(t, o, 2);
	assert_int_equal(tree_node_count(t), 3);
	assert_null(o->first_child);
	assert_non_null(look(t, root, "keep"));
	tree_free(t);
}

/* ------------------------------------------------------------------ hardlinks */

static struct tree_inode *file_with_chunks(struct tree *t, uint32_t n, uint8_t tag)
{
	struct tree_inode *ino = tree_inode_new(t, MF_REG);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t idx;
		struct mf_chunk *c = tree_chunk_new(t, &idx);

		assert_non_null(c);
		if (i == 0)
			ino->chunk_first = idx;
		memset(c->digest, tag + (int)i, SHA256_LEN);
		c->len = 1000;
		c->off = 0;
		ino->chunk_count++;
	}
	ino->size = 1000ull * n;
	ino->mode = 04711;
	ino->uid = 7;
	return ino;
}

static void link_in(struct tree *t, struct tree_node *dir, const char *name,
		    struct tree_inode *ino)
{
	assert_non_null(tree_put(t, dir, name, strlen(name), 0, ino));
}

/*
 * Inserted in the order /zdir/second, /a-b/third, /a/first: in depth-first order /a/first
 * comes first ("/a/..." < "/a-b/..." because '/' sorts lowest), so it is the file.
 */
static struct tree *hardlink_tree(struct tree_inode **ino_out, struct tree_node **first)
{
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t), *a, *ab, *z;
	struct tree_inode *ino;

	z = put(t, root, "zdir", 0, MF_DIR);
	ab = put(t, root, "a-b", 0, MF_DIR);
	a = put(t, root, "a", 0, MF_DIR);
	ino = file_with_chunks(t, 2, 0x10);
	link_in(t, z, "second", ino);
	link_in(t, ab, "third", ino);
	link_in(t, a, "first", ino);
	assert_int_equal(ino->refs, 3);
	/* a hardlinked fifo too */
	{
		struct tree_inode *fifo = tree_inode_new(t, MF_FIFO);

		link_in(t, z, "p2", fifo);
		link_in(t, a, "p1", fifo);
	}
	*ino_out = ino;
	*first = look(t, a, "first");
	return t;
}

static void test_hardlinks(void **state)
{
	struct tree_inode *ino;
	struct tree_node *first;
	struct tree *t = hardlink_tree(&ino, &first);
	struct manifest *m = to_manifest(t, NULL, NULL);
	const struct mf_entry *e;

	(void)state;
	{
		static const char *const want[] = {
			"/", "/a", "/a/first", "/a/p1", "/a-b", "/a-b/third", "/zdir", "/zdir/p2",
			"/zdir/second",
		};

		expect_paths(m, want, sizeof(want) / sizeof(want[0]));
	}
	e = find(m, "/a/first");
	assert_int_equal(e->type, MF_REG);
	assert_int_equal(e->chunk_count, 2);
	assert_int_equal(e->size, 2000);
	assert_int_equal(e->mode, 04711);
	assert_int_equal(m->chunks[e->chunk_first].digest[0], 0x10);
	assert_int_equal(m->chunks[e->chunk_first + 1].digest[0], 0x11);
	for (int i = 0; i < 2; i++) {
		e = find(m, i ? "/zdir/second" : "/a-b/third");
		assert_int_equal(e->type, MF_HARDLINK);
		assert_int_equal(e->chunk_count, 0);
		assert_int_equal(e->hole_count, 0);
		assert_int_equal(e->link_len, 8);
		assert_string_equal(manifest_str(m, e->link_off), "/a/first");
	}
	assert_int_equal(find(m, "/a/p1")->type, MF_FIFO);
	e = find(m, "/zdir/p2");
	assert_int_equal(e->type, MF_HARDLINK);
	assert_string_equal(manifest_str(m, e->link_off), "/a/p1");
	manifest_free(m);
	tree_free(t);
}

static void test_hardlink_first_removed(void **state)
{
	struct tree_inode *ino;
	struct tree_node *first;
	struct tree *t = hardlink_tree(&ino, &first);
	struct manifest *m;
	const struct mf_entry *e;

	(void)state;
	tree_remove(t, first);
	assert_int_equal(ino->refs, 2);
	m = to_manifest(t, NULL, NULL);
	assert_null(manifest_find(m, "/a/first"));
	e = find(m, "/a-b/third");
	assert_int_equal(e->type, MF_REG);
	assert_int_equal(e->chunk_count, 2);
	e = find(m, "/zdir/second");
	assert_int_equal(e->type, MF_HARDLINK);
	assert_string_equal(manifest_str(m, e->link_off), "/a-b/third");
	manifest_free(m);

	/* with one name left it is a plain file */
	tree_free(t);
	t = hardlink_tree(&ino, &first);
	tree_remove(t, first);
	tree_remove(t, look(t, look(t, tree_root(t), "a-b"), "third"));
	assert_int_equal(ino->refs, 1);
	m = to_manifest(t, NULL, NULL);
	e = find(m, "/zdir/second");
	assert_int_equal(e->type, MF_REG);
	assert_int_equal(e->chunk_count, 2);
	assert_int_equal(e->link_len, 0);
	manifest_free(m);

	/* removing a whole directory drops its links too */
	tree_free(t);
	t = hardlink_tree(&ino, &first);
	tree_remove(t, look(t, tree_root(t), "a"));
	assert_int_equal(ino->refs, 2);
	m = to_manifest(t, NULL, NULL);
	assert_int_equal(find(m, "/a-b/third")->type, MF_REG);
	assert_int_equal(find(m, "/zdir/p2")->type, MF_FIFO);
	manifest_free(m);
	tree_free(t);
}

/* tree_write twice gives the same manifest, and reflects removals made in between. */
static void test_write_is_repeatable(void **state)
{
	struct tree_inode *ino;
	struct tree_node *first;
	struct tree *t = hardlink_tree(&ino, &first);
	struct manifest *m1, *m2, *m3;
	uint8_t *b1, *b2;
	size_t l1, l2;
	bool same, first_is_file, third_is_file;

	(void)state;
	m1 = to_manifest(t, &b1, &l1);
	m2 = to_manifest(t, &b2, &l2);
	first_is_file = find(m2, "/a/first")->type == MF_REG;
	same = l1 == l2 && !memcmp(b1, b2, l1);
	tree_remove(t, first);
	m3 = to_manifest(t, NULL, NULL);
	/* the remaining first name must now be the file, not a link to a removed path */
	third_is_file = find(m3, "/a-b/third")->type == MF_REG;
	manifest_free(m1);
	manifest_free(m2);
	manifest_free(m3);
	free(b1);
	free(b2);
	tree_free(t);
	if (!first_is_file || !same || !third_is_file)
		fail_msg("second tree_write: /a/first %s, output %s; after removing /a/first, "
			 "/a-b/third is %s",
			 first_is_file ? "a file" : "a hardlink (to itself)",
			 same ? "identical" : "different",
			 third_is_file ? "a file" : "a hardlink to the removed /a/first");
}

/* ------------------------------------------------------------------ chunks, holes, fields */

static void test_chunk_slots_stable(void **state)
{
	struct tree *t = tree_new();
	const uint64_t n = 200000; /* several segments */
	struct mf_chunk **ptrs = malloc(n * sizeof(*ptrs));

	(void)state;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t idx = ~0ull;

		ptrs[i] = tree_chunk_new(t, &idx);
		assert_non_null(ptrs[i]);
		assert_true(idx == i);
		memcpy(ptrs[i]->digest, &i, sizeof(i));
		ptrs[i]->len = (uint32_t)i;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t got;

		assert_ptr_equal(tree_chunk_at(t, i), ptrs[i]);
		memcpy(&got, ptrs[i]->digest, sizeof(got));
		assert_true(got == i);
		assert_int_equal(ptrs[i]->len, (uint32_t)i);
	}
	free(ptrs);
	tree_free(t);
}

static void test_holes(void **state)
{
	struct tree *t = tree_new();
	struct tree_inode *a = tree_inode_new(t, MF_REG), *b = tree_inode_new(t, MF_REG);

	(void)state;
	assert_int_equal(tree_hole_add(t, a, 0, 4096), 0);
	assert_int_equal(tree_hole_add(t, a, 4096, 4096), 0);   /* adjacent: merged */
	assert_int_equal(a->hole_count, 1);
	assert_true(tree_hole_at(t, a->hole_first)->len == 8192);
	assert_int_equal(tree_hole_add(t, a, 16384, 100), 0);   /* separate */
	assert_int_equal(a->hole_count, 2);
	assert_int_equal(tree_hole_add(t, b, 0, 10), 0);
	assert_int_equal(b->hole_first, 2);
	/* a's holes must stay contiguous: adding after b's is refused */
	assert_int_equal(tree_hole_add(t, a, 1 << 20, 100), -EINVAL);
	assert_int_equal(a->hole_count, 2);
	/* ...unless it merges into a's last hole */
	assert_int_equal(tree_hole_add(t, a, 16484, 50), 0);
	assert_true(tree_hole_at(t, a->hole_first + 1)->off == 16384);
	assert_true(tree_hole_at(t, a->hole_first + 1)->len == 150);
	/* many holes: the array grows */
	for (int i = 0; i < 1000; i++)
		assert_int_equal(tree_hole_add(t, b, 100 + (uint64_t)i * 20, 10), 0);
	assert_int_equal(b->hole_count, 1001);
	assert_true(tree_hole_at(t, b->hole_first + 1000)->off == 100 + 999 * 20);
	tree_free(t);
}

static void test_write_fields(void **state)
{
	static const uint8_t bin[4] = { 0, 1, 0, 2 };
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t);
	struct tree_inode *f = tree_inode_new(t, MF_REG), *l = tree_inode_new(t, MF_SYMLINK);
	struct tree_inode *c = tree_inode_new(t, MF_CHR), *b = tree_inode_new(t, MF_BLK);
	struct mf_xattr_in *x = tree_alloc(t, 2 * sizeof(*x));
	const struct mf_entry *e;
	struct manifest *m;
	uint64_t idx;

	(void)state;
	root->ino->mode = 0700;
	root->ino->mtime = -5;
	/* a sparse file: hole, 1 piece, hole */
	f->mode = 06755;
	f->uid = UINT32_MAX;
	f->gid = 5;
	f->atime = -1;
	f->atime_ns = 999999999;
	f->mtime = 1ll << 33;
	f->ctime_ns = 1;
	{
		struct mf_chunk *ch = tree_chunk_new(t, &idx);

		memset(ch->digest, 0x42, SHA256_LEN);
		ch->len = 100;
		ch->off = 3000;
		f->chunk_first = idx;
		f->chunk_count = 1;
	}
	assert_int_equal(tree_hole_add(t, f, 0, 4096), 0);
	assert_int_equal(tree_hole_add(t, f, 4196, 1ull << 32), 0);
	f->size = 4196 + (1ull << 32);
	x[0] = (struct mf_xattr_in){ "security.capability", bin, 19, 4 };
	x[1] = (struct mf_xattr_in){ "user.a", "b", 6, 1 };
	f->xattrs = x;
	f->xattr_count = 2;
	link_in(t, root, "file", f);
	/* symlink: the size written is the target length, whatever ino->size says */
	l->link = tree_strdup(t, "../target", 9);
	l->link_len = 9;
	l->size = 12345;
	link_in(t, root, "link", l);
	c->rdev_major = 1;
	c->rdev_minor = 3;
	link_in(t, root, "null", c);
	b->rdev_major = 259;
	b->rdev_minor = 1 << 19;
	link_in(t, root, "nvme", b);

	m = to_manifest(t, NULL, NULL);
	e = find(m, "/");
	assert_int_equal(e->mode, 0700);
	assert_true(e->mtime == -5);
	e = find(m, "/file");
	assert_int_equal(e->type, MF_REG);
	assert_int_equal(e->mode, 06755);
	assert_int_equal(e->uid, UINT32_MAX);
	assert_int_equal(e->gid, 5);
	assert_true(e->atime == -1);
	assert_int_equal(e->atime_ns, 999999999);
	assert_true(e->mtime == 1ll << 33);
	assert_int_equal(e->ctime_ns, 1);
	assert_true(e->size == 4196 + (1ull << 32));
	assert_int_equal(e->chunk_count, 1);
	assert_int_equal(m->chunks[e->chunk_first].len, 100);
	assert_int_equal(m->chunks[e->chunk_first].off, 3000);
	assert_int_equal(m->chunks[e->chunk_first].digest[31], 0x42);
	assert_int_equal(e->hole_count, 2);
	assert_true(m->holes[e->hole_first + 1].off == 4196);
	assert_int_equal(e->xattr_count, 2);
	assert_string_equal(manifest_str(m, m->xattrs[e->xattr_first].name_off),
			    "security.capability");
	assert_int_equal(m->xattrs[e->xattr_first].value_len, 4);
	assert_memory_equal(manifest_str(m, m->xattrs[e->xattr_first].value_off), bin, 4);
	e = find(m, "/link");
	assert_int_equal(e->type, MF_SYMLINK);
	assert_int_equal(e->size, 9);
	assert_string_equal(manifest_str(m, e->link_off), "../target");
	e = find(m, "/null");
	assert_int_equal(e->type, MF_CHR);
	assert_int_equal(e->rdev_major, 1);
	assert_int_equal(e->rdev_minor, 3);
	e = find(m, "/nvme");
	assert_int_equal(e->type, MF_BLK);
	assert_int_equal(e->rdev_major, 259);
	assert_int_equal(e->rdev_minor, 1 << 19);
	manifest_free(m);
	tree_free(t);
}

/* Children are written in byte order of their names, whatever the insertion order. */
static void test_write_order(void **state)
{
	static const char *const names[] = { "b", "\xff", "a.b", "a", "A", "a-b", "\x01", "a0" };
	struct tree *t = tree_new();
	struct tree_node *root = tree_root(t);
	struct manifest *m;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct tree_node *n = put(t, root, names[i], 0, MF_DIR);

		put(t, n, "x", 0, MF_REG);
	}
	m = to_manifest(t, NULL, NULL);
	{
		static const char *const want[] = {
			"/", "/\x01", "/\x01/x", "/A", "/A/x", "/a", "/a/x", "/a-b", "/a-b/x",
			"/a.b", "/a.b/x", "/a0", "/a0/x", "/b", "/b/x", "/\xff", "/\xff/x",
		};

		expect_paths(m, want, sizeof(want) / sizeof(want[0]));
	}
	manifest_free(m);
	tree_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_and_alloc),
		cmocka_unit_test(test_put_lookup),
		cmocka_unit_test(test_many_nodes),
		cmocka_unit_test(test_dir_over_dir),
		cmocka_unit_test(test_replace_subtree),
		cmocka_unit_test(test_remove_deep),
		cmocka_unit_test(test_write_deep),
		cmocka_unit_test(test_remove_lower),
		cmocka_unit_test(test_hardlinks),
		cmocka_unit_test(test_hardlink_first_removed),
		cmocka_unit_test(test_write_is_repeatable),
		cmocka_unit_test(test_chunk_slots_stable),
		cmocka_unit_test(test_holes),
		cmocka_unit_test(test_write_fields),
		cmocka_unit_test(test_write_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
