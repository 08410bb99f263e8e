/* SPDX-License-Identifier: MIT */
#include "refs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/manifest.h"
#include "../common/grow.h"
#include "layout.h"

static int refs_add(struct chunk_refs *r, const uint8_t d[SHA256_LEN])
{
	if (!grow_from((void **)&r->d, &r->cap, r->n + 1, sizeof(*r->d), 1024))
		return -ENOMEM;
	memcpy(r->d[r->n++], d, SHA256_LEN);
	return 0;
}

int chunk_refs_add_file(struct chunk_refs *r, const char *path, const char **why)
{
	char magic[8];
	ssize_t n;
	int fd, ret;

	*why = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, magic, sizeof(magic), 0);
	ret = n < 0 ? -errno : 0;
	close(fd);
	if (ret)
		return ret;
	if (n == (ssize_t)sizeof(magic) && !memcmp(magic, LAYOUT_MAGIC, sizeof(magic))) {
		struct layout *l;

		ret = layout_open(path, &l, why);
		if (ret)
			return ret;
		/* every layer's chunks: each file of a chain is an image of its own */
		for (unsigned k = 0; k < l->n_layers && !ret; k++)
			for (uint64_t i = 0; i < l->layers[k].hdr.chunk_count && !ret; i++)
				ret = refs_add(r, l->layers[k].chunks[i]);
		layout_close(l);
		return ret;
	}
	if (n == (ssize_t)sizeof(magic) && !memcmp(magic, MF_MAGIC, sizeof(magic))) {
		struct manifest *m;

		ret = manifest_load(path, &m, why);
		if (ret)
			return ret;
		for (size_t i = 0; i < m->n_chunks && !ret; i++)
			ret = refs_add(r, m->chunks[i].digest);
		manifest_free(m);
		return ret;
	}
	*why = n < (ssize_t)sizeof(magic) ? "file too short (not a lazyblk layout or manifest)"
					  : "bad magic (not a lazyblk layout or manifest)";
	return -EBADMSG;
}

static int digest_cmp(const void *a, const void *b) { return memcmp(a, b, SHA256_LEN); }

void chunk_refs_finish(struct chunk_refs *r)
{
	size_t out = 0;

	if (r->n)
		qsort(r->d, r->n, SHA256_LEN, digest_cmp);
	for (size_t i = 0; i < r->n; i++)
		if (!out || memcmp(r->d[out - 1], r->d[i], SHA256_LEN))
			memmove(r->d[out++], r->d[i], SHA256_LEN);
	r->n = out;
}

void chunk_refs_free(struct chunk_refs *r)
{
	free(r->d);
	r->d = NULL;
	r->n = r->cap = 0;
}
