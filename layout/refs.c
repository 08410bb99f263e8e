/* SPDX-License-Identifier: MIT */
#include "refs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/manifest.h"
#include "../common/fsutil.h"
#include "../common/grow.h"
#include "layout.h"

static int refs_add(struct chunk_refs *r, const uint8_t d[SHA256_LEN])
{
	if (!grow_from((void **)&r->d, &r->cap, r->n + 1, sizeof(*r->d), 1024))
		return -ENOMEM;
	memcpy(r->d[r->n++], d, SHA256_LEN);
	return 0;
}

static int layouts_add(struct chunk_refs *r, const uint8_t d[SHA256_LEN])
{
	if (!grow((void **)&r->layouts, &r->cap_layouts, r->n_layouts + 1, sizeof(*r->layouts)))
		return -ENOMEM;
	memcpy(r->layouts[r->n_layouts++], d, SHA256_LEN);
	return 0;
}

static int refs_add_layout(struct chunk_refs *r, const char *path, unsigned flags,
			   char *why, size_t why_len)
{
	struct layout *l;
	int ret = layout_open_flags(path, flags, &l, why, why_len);

	if (ret)
		return ret;
	/* every layer's chunks: each file of a chain is an image of its own */
	for (unsigned k = 0; k < l->n_layers && !ret; k++) {
		ret = layouts_add(r, l->layers[k].digest);
		for (uint64_t i = 0; i < l->layers[k].hdr.chunk_count && !ret; i++)
			ret = refs_add(r, l->layers[k].chunks[i]);
	}
	layout_close(l);
	return ret;
}

static int refs_add_path(struct chunk_refs *r, const char *path, unsigned flags,
			 char *why, size_t why_len)
{
	char magic[8];
	ssize_t n;
	int fd, ret;

	if (why_len)
		why[0] = '\0';
	fd = fs_open_regular(AT_FDCWD, path, flags & LAYOUT_OPEN_FETCHED ? O_NOFOLLOW : 0, NULL);
	if (fd < 0)
		return fd;
	n = pread(fd, magic, sizeof(magic), 0);
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (ret)
		return ret;
	if (n == (ssize_t)sizeof(magic) && !memcmp(magic, LAYOUT_MAGIC, sizeof(magic)))
		return refs_add_layout(r, path, flags, why, why_len);
	if (n == (ssize_t)sizeof(magic) && !memcmp(magic, MF_MAGIC, sizeof(magic))) {
		struct manifest *m;

		ret = manifest_load(path, &m, why, why_len);
		if (ret)
			return ret;
		for (size_t i = 0; i < m->n_chunks && !ret; i++)
			ret = refs_add(r, m->chunks[i].digest);
		manifest_free(m);
		return ret;
	}
	return why_set(why, why_len, -EBADMSG, "%s",
		       n < (ssize_t)sizeof(magic) ? "file too short (not a lazyblk layout or manifest)"
						  : "bad magic (not a lazyblk layout or manifest)");
}

int chunk_refs_add_file(struct chunk_refs *r, const char *path, char *why, size_t why_len)
{
	return refs_add_path(r, path, 0, why, why_len);
}

int chunk_refs_add_fetched(struct chunk_refs *r, const char *path, char *why, size_t why_len)
{
	return refs_add_path(r, path, LAYOUT_OPEN_FETCHED, why, why_len);
}

static int digest_cmp(const void *a, const void *b) { return memcmp(a, b, SHA256_LEN); }

/* Sort and drop duplicates of n digests at v; the count left. */
static size_t digests_finish(uint8_t (*v)[SHA256_LEN], size_t n)
{
	size_t out = 0;

	if (n)
		qsort(v, n, SHA256_LEN, digest_cmp);
	for (size_t i = 0; i < n; i++)
		if (!out || memcmp(v[out - 1], v[i], SHA256_LEN))
			memmove(v[out++], v[i], SHA256_LEN);
	return out;
}

void chunk_refs_finish(struct chunk_refs *r)
{
	r->n = digests_finish(r->d, r->n);
	r->n_layouts = digests_finish(r->layouts, r->n_layouts);
}

void chunk_refs_free(struct chunk_refs *r)
{
	free(r->d);
	free(r->layouts);
	memset(r, 0, sizeof(*r));
}
