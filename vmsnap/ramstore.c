/* SPDX-License-Identifier: MIT */
/*
 * A snapshot's pieces into the store (the page map's bytes, vm.state) and back out through a
 * cas_source, and the chunks a snapshot uses (ramstore.h). The RAM itself: ramstore_write.c.
 */
#include "ramstore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/chunk.h"
#include "../cas/source.h"
#include "../cas/store.h"
#include "../common/grow.h"
#include "ramstore_int.h"

int ramstore_put_chunk(struct store *s, struct chunk_codec *codec, const void *data, size_t len,
		       const uint8_t d[SHA256_LEN], void *zbuf, size_t zcap, size_t *written)
{
	size_t zlen;
	int ret;

	*written = 0;
	ret = store_has(s, d);
	if (ret < 0)
		return ret;
	if (ret) {
		store_touch(s, d);
		return 0;
	}
	ret = chunk_compress(codec, data, len, zbuf, zcap, &zlen);
	if (!ret)
		ret = store_put(s, d, zbuf, zlen);
	if (!ret)
		*written = zlen;
	return ret;
}

/* One chunk of len bytes (1 .. CHUNK_SIZE_MAX) named into d, and committed. */
static int put_one(struct store *s, struct chunk_codec *codec, const void *p, size_t len,
		   uint8_t d[SHA256_LEN], char *why, size_t why_len)
{
	size_t zcap = chunk_compress_bound(len), written;
	void *zbuf = malloc(zcap);
	int ret = zbuf ? sha256_buf(p, len, d) : -ENOMEM;

	if (!ret)
		ret = ramstore_put_chunk(s, codec, p, len, d, zbuf, zcap, &written);
	free(zbuf);
	if (ret)
		return why_set(why, why_len, ret, "store %s: %s", store_dir(s), strerror(-ret));
	return 0;
}

static int commit(struct store *s, char *why, size_t why_len)
{
	int ret = store_commit(s);

	if (ret)
		return why_set(why, why_len, ret, "store %s: %s", store_dir(s), strerror(-ret));
	return 0;
}

int ramstore_put_blob(struct store *s, const void *p, size_t len, struct snapdoc_blob *b,
		      char *why, size_t why_len)
{
	struct chunk_codec *codec;
	int ret;

	if (!len || len > SNAPDOC_STATE_MAX || len > CHUNK_SIZE_MAX)
		return why_set(why, why_len, -EINVAL, "a blob of %zu bytes (1 to %u)", len,
			       SNAPDOC_STATE_MAX);
	codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	if (!codec)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	ret = put_one(s, codec, p, len, b->digest, why, why_len);
	chunk_codec_free(codec);
	if (!ret)
		ret = commit(s, why, why_len);
	if (!ret)
		b->size = len;
	return ret;
}

int ramstore_put_map(struct store *s, const struct rammap *m, struct snapdoc *d, char *why,
		     size_t why_len)
{
	struct chunk_codec *codec = NULL;
	uint8_t *buf;
	size_t len, n;
	int ret;

	ret = rammap_encode(m, &buf, &len);
	if (ret)
		return why_set(why, why_len, ret, "page map: %s", strerror(-ret));
	n = (len + SNAPDOC_MAP_PIECE_MAX - 1) / SNAPDOC_MAP_PIECE_MAX;
	if (n > SNAPDOC_MAP_MAX) {
		ret = why_set(why, why_len, -E2BIG, "page map of %zu bytes: more than %u pieces of "
			      "%u bytes", len, SNAPDOC_MAP_MAX, SNAPDOC_MAP_PIECE_MAX);
		goto out;
	}
	codec = chunk_codec_new(CHUNK_LEVEL_DEFAULT);
	if (!codec) {
		ret = why_set(why, why_len, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; !ret && i < n; i++) {
		size_t off = i * SNAPDOC_MAP_PIECE_MAX;
		size_t plen = len - off < SNAPDOC_MAP_PIECE_MAX ? len - off : SNAPDOC_MAP_PIECE_MAX;

		ret = put_one(s, codec, buf + off, plen, d->map[i].digest, why, why_len);
		d->map[i].size = plen;
	}
	if (!ret)
		ret = commit(s, why, why_len);
	if (!ret) {
		d->nmap = (unsigned)n;
		d->ram_pages = m->nonzero;
		d->ram_chunks = m->nchunks;
		d->ram_bytes = 0;
		for (uint32_t c = 0; c < m->nchunks; c++)
			d->ram_bytes += rammap_chunk_bytes(m, c);
	}
out:
	chunk_codec_free(codec);
	free(buf);
	return ret;
}

/*
 * Chunk b's bytes through src into dst (exactly b->size bytes). The chunk layers said why a
 * chunk could not be had (missing, corrupt): then no reason here.
 */
static int get_blob(struct cas_source *src, const struct snapdoc_blob *b, const char *what,
		    uint8_t *dst, char *why, size_t why_len)
{
	void *block;
	size_t len, flen;
	int ret = cas_source_get(src, b->digest, (size_t)b->size, 0, &block, &len, &flen);

	if (ret)
		return ret;
	if (len != b->size)
		ret = why_set(why, why_len, -EBADMSG, "%s: %zu bytes, the snapshot document says "
			      "%llu", what, len, (unsigned long long)b->size);
	else
		memcpy(dst, block, len);
	free(block);
	return ret;
}

int ramstore_load_map(struct cas_source *src, const struct snapdoc *d, struct rammap **out,
		      char *why, size_t why_len)
{
	uint64_t total = 0;
	size_t off = 0;
	struct rammap *m;
	uint8_t *buf;
	char what[48];
	int ret = 0;

	*out = NULL;
	if (!d->nmap || d->nmap > SNAPDOC_MAP_MAX)
		return why_set(why, why_len, -EINVAL, "page map in %u pieces", d->nmap);
	for (unsigned i = 0; i < d->nmap; i++) {
		if (!d->map[i].size || d->map[i].size > SNAPDOC_MAP_PIECE_MAX)
			return why_set(why, why_len, -EINVAL, "page map piece %u of %llu bytes", i,
				       (unsigned long long)d->map[i].size);
		total += d->map[i].size;
	}
	buf = malloc(total);
	if (!buf)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	for (unsigned i = 0; !ret && i < d->nmap; i++) {
		snprintf(what, sizeof(what), "page map piece %u", i);
		ret = get_blob(src, &d->map[i], what, buf + off, why, why_len);
		off += d->map[i].size;
	}
	if (!ret)
		ret = rammap_parse(buf, total, &m, why, why_len);
	free(buf);
	if (ret)
		return ret;
	if (m->mem_size != d->mem_size || m->nonzero != d->ram_pages ||
	    m->nchunks != d->ram_chunks) {
		ret = why_set(why, why_len, -EBADMSG, "page map of %llu bytes of RAM, %llu pages, "
			      "%u chunks: the snapshot document says %llu, %llu, %llu",
			      (unsigned long long)m->mem_size, (unsigned long long)m->nonzero,
			      m->nchunks, (unsigned long long)d->mem_size,
			      (unsigned long long)d->ram_pages, (unsigned long long)d->ram_chunks);
		rammap_free(m);
		return ret;
	}
	*out = m;
	return 0;
}

int ramstore_load_state(struct cas_source *src, const struct snapdoc *d, uint8_t **buf,
			size_t *len, char *why, size_t why_len)
{
	uint8_t *p;
	int ret;

	*buf = NULL;
	*len = 0;
	if (!d->state.size || d->state.size > SNAPDOC_STATE_MAX)
		return why_set(why, why_len, -EINVAL, "vm.state of %llu bytes",
			       (unsigned long long)d->state.size);
	p = malloc(d->state.size);
	if (!p)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	ret = get_blob(src, &d->state, "vm.state", p, why, why_len);
	if (ret) {
		free(p);
		return ret;
	}
	*buf = p;
	*len = d->state.size;
	return 0;
}

static int refs_add(uint8_t (**v)[SHA256_LEN], size_t *n, size_t *cap,
		    const uint8_t d[SHA256_LEN])
{
	if (!grow((void **)v, cap, *n + 1, SHA256_LEN))
		return -ENOMEM;
	memcpy((*v)[(*n)++], d, SHA256_LEN);
	return 0;
}

int ramstore_refs(const struct snapdoc *d, const struct rammap *m, uint8_t (**v)[SHA256_LEN],
		  size_t *n, size_t *cap)
{
	int ret = refs_add(v, n, cap, d->state.digest);

	for (unsigned i = 0; !ret && i < d->nmap && i < SNAPDOC_MAP_MAX; i++)
		ret = refs_add(v, n, cap, d->map[i].digest);
	for (uint32_t c = 0; !ret && m && c < m->nchunks; c++)
		ret = refs_add(v, n, cap, m->chunks[c].digest);
	return ret;
}
