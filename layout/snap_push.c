/* SPDX-License-Identifier: MIT */
/* lazyblk push --remote REF SNAPSHOT: a VM snapshot published under a name (snap_ref.h). */
#include "snap_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/manifest.h"
#include "../cas/store.h"
#include "../vmsnap/snapfile.h"
#include "layout.h"

struct spush {
	const struct snap_push_opts *o;
	struct snap_push_stats *st;
	struct snapfile f;
	struct layout *l;              /* the disk's top layout (NULL: none) */
	char *layout, *manifest;
	const char **paths;            /* the chain's files, top first */
	uint8_t (*digests)[SHA256_LEN];
	struct chunk_refs refs;        /* every chunk: the RAM's, then the disk's */
	size_t n_ram;                  /* refs.d[0 .. n_ram) are the RAM's */
};

/* The chain's files and digests, and its manifest when the one beside is the layout's own. */
static int disk_files(struct spush *x)
{
	unsigned k = x->l->n_layers ? x->l->n_layers : 1;
	struct manifest *m = NULL;
	char mw[WHY_MAX] = "", *beside = NULL;
	size_t n = strlen(x->layout) - 7;  /* "<hex>.layout" */

	x->paths = calloc(k, sizeof(*x->paths));
	x->digests = calloc(k, SHA256_LEN);
	if (!x->paths || !x->digests)
		return -ENOMEM;
	for (unsigned i = 0; i < k; i++) {
		x->paths[i] = x->l->n_layers ? x->l->layers[i].path : x->layout;
		memcpy(x->digests[i], x->l->n_layers ? x->l->layers[i].digest : x->l->digest,
		       SHA256_LEN);
	}
	x->paths[0] = x->layout;
	x->st->layers = k;
	if (asprintf(&beside, "%.*s.manifest", (int)n, x->layout) < 0)
		return -ENOMEM;
	if (access(beside, F_OK) || manifest_load(beside, &m, mw, sizeof(mw)) ||
	    memcmp(m->digest, x->l->hdr.manifest_digest, SHA256_LEN)) {
		free(beside); /* none, or not the layout's own: the disk goes without */
		beside = NULL;
	}
	manifest_free(m);
	x->manifest = beside;
	return 0;
}

/* The first chunk of refs the store lacks, named with what it is (of the RAM, of the disk). */
static int chunks_present(struct spush *x, char *why, size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1];
	struct store *s;
	int ret;

	ret = store_open(x->o->push.store_dir, false, &s);
	if (ret)
		return why_set(why, why_len, ret, "%s: not a lazyblk store", x->o->push.store_dir);
	for (size_t i = 0; i < x->refs.n; i++) {
		ret = store_has(s, x->refs.d[i]);
		if (ret == 1)
			continue;
		if (ret < 0) {
			why_set(why, why_len, ret, "%s: %s", x->o->push.store_dir, strerror(-ret));
			break;
		}
		sha256_to_hex(x->refs.d[i], hex);
		ret = why_set(why, why_len, -ENOENT, "%s chunk sha256:%s is missing in the store "
			      "%s: not pushed", i < x->n_ram ? "a RAM" : "a disk", hex,
			      x->o->push.store_dir);
		break;
	}
	store_close(s);
	return ret < 0 ? ret : 0;
}

/* The snapshot read, its disk found, every chunk it uses collected and checked. */
static int spush_read(struct spush *x, char *why, size_t why_len)
{
	const char *store = x->o->push.store_dir;
	char w[WHY_MAX] = "";
	int ret;

	ret = snapfile_read(x->o->snapshot, &x->f, why, why_len);
	if (ret)
		return ret;
	memcpy(x->st->id, x->f.id, SHA256_LEN);
	ret = snap_ref_layout(store, x->o->snapshot, &x->f.d, &x->layout, w, sizeof(w));
	if (!ret && x->layout) {
		ret = layout_open(x->layout, &x->l, w, sizeof(w));
		if (ret && !w[0])
			why_set(w, sizeof(w), ret, "%s: %s", x->layout, strerror(-ret));
		if (!ret)
			ret = disk_files(x);
	}
	if (!ret)
		ret = snap_ref_ram_chunks(&x->f.d, store, NULL, &x->refs, w, sizeof(w));
	x->n_ram = x->refs.n;
	x->st->ram_chunks = x->refs.n;
	if (!ret && x->layout)
		ret = chunk_refs_add_file(&x->refs, x->layout, w, sizeof(w));
	x->st->disk_chunks = x->refs.n - x->n_ram;
	if (!ret)
		ret = chunks_present(x, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", x->o->snapshot,
			       w[0] ? w : strerror(-ret));
	chunk_refs_finish(&x->refs);
	return 0;
}

int snap_push(const struct snap_push_opts *o, struct snap_push_stats *st, char *why,
	      size_t why_len)
{
	struct spush x = { .o = o, .st = st };
	struct image_push_opts io = { .push = o->push, .created = o->created };
	int ret;

	memset(st, 0, sizeof(*st));
	if (why_len)
		why[0] = '\0';
	ret = spush_read(&x, why, why_len);
	if (ret)
		goto out;
	st->has_disk = x.f.d.has_disk;
	memcpy(st->layout, x.f.d.layout, SHA256_LEN);
	io.push.chunks = (const uint8_t (*)[SHA256_LEN])x.refs.d;
	io.push.n_chunks = x.refs.n;
	io.layouts = x.paths;
	io.layout_digests = (const uint8_t (*)[SHA256_LEN])x.digests;
	io.n_layouts = x.layout ? st->layers : 0;
	io.manifest = x.manifest;
	io.disk_size = x.f.d.has_disk ? x.f.d.disk_size : 0;
	io.snapdoc = x.f.json;
	io.snapdoc_len = x.f.len;
	ret = image_push(&io, &st->img, why, why_len);
out:
	if (ret == -ENOMEM && why_len && !why[0])
		why_set(why, why_len, ret, "out of memory");
	layout_close(x.l);
	chunk_refs_free(&x.refs);
	free(x.paths);
	free(x.digests);
	free(x.layout);
	free(x.manifest);
	snapfile_free(&x.f);
	return ret;
}
