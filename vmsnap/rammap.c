/* SPDX-License-Identifier: MIT */
/* The page map of a VM snapshot's RAM (rammap.h): built, made canonical, encoded, parsed. */
#include "rammap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/grow.h"
#include "../common/hash.h"
#include "../common/le.h"

#define HDR_MAGIC 0
#define HDR_VERSION 8
#define HDR_SIZE 12
#define HDR_MEM 16
#define HDR_PAGE 24
#define HDR_NCHUNKS 28
#define HDR_NONZERO 32
#define HDR_FLAGS 40
#define HDR_RESERVED 44
#define NO_CHUNK UINT32_MAX

int rammap_new(uint64_t mem_size, struct rammap **out)
{
	struct rammap *m;

	*out = NULL;
	if (!mem_size || mem_size % RAMMAP_PAGE || mem_size > RAMMAP_MEM_MAX)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->mem_size = mem_size;
	m->npages = mem_size / RAMMAP_PAGE;
	m->pages = calloc(m->npages, sizeof(*m->pages));
	if (!m->pages) {
		free(m);
		return -ENOMEM;
	}
	*out = m;
	return 0;
}

void rammap_free(struct rammap *m)
{
	if (!m)
		return;
	free(m->chunks);
	free(m->pages);
	free(m->user_off);
	free(m->users);
	free(m);
}

int rammap_add_chunk(struct rammap *m, const uint8_t digest[SHA256_LEN], uint32_t npages,
		     uint32_t *ref)
{
	if (m->nchunks >= UINT32_MAX - 1)
		return -E2BIG;
	if (!grow((void **)&m->chunks, &m->chunks_cap, (size_t)m->nchunks + 1,
		  sizeof(*m->chunks)))
		return -ENOMEM;
	memcpy(m->chunks[m->nchunks].digest, digest, SHA256_LEN);
	m->chunks[m->nchunks].npages = npages;
	*ref = ++m->nchunks;
	return 0;
}

static void index_drop(struct rammap *m)
{
	free(m->user_off);
	free(m->users);
	m->user_off = NULL;
	m->users = NULL;
}

int rammap_index(struct rammap *m)
{
	uint64_t nz = 0;

	index_drop(m);
	for (uint64_t p = 0; p < m->npages; p++)
		nz += m->pages[p].chunk != 0;
	m->user_off = calloc((size_t)m->nchunks + 1, sizeof(*m->user_off));
	m->users = malloc((nz ? nz : 1) * sizeof(*m->users));
	if (!m->user_off || !m->users) {
		index_drop(m);
		return -ENOMEM;
	}
	/* counting sort by chunk: pages ascending within each */
	for (uint64_t p = 0; p < m->npages; p++)
		if (m->pages[p].chunk)
			m->user_off[m->pages[p].chunk]++;
	for (uint32_t c = 0; c < m->nchunks; c++)
		m->user_off[c + 1] += m->user_off[c];
	for (uint64_t p = 0; p < m->npages; p++) {
		uint32_t r = m->pages[p].chunk;

		if (r)
			m->users[m->user_off[r - 1]++] = (uint32_t)p;
	}
	/* each start moved to the next one's: shift back */
	for (uint32_t c = m->nchunks; c > 0; c--)
		m->user_off[c] = m->user_off[c - 1];
	m->user_off[0] = 0;
	return 0;
}

/*
 * A table of the chunks kept so far (indices into kept[]), by digest and size: two chunks
 * of one name are one chunk.
 */
struct chunk_set {
	uint32_t *slot;   /* NO_CHUNK: empty */
	size_t mask;
};

static int set_init(struct chunk_set *s, uint32_t n)
{
	size_t cap = 16;

	while (cap < (size_t)n * 2)
		cap *= 2;
	s->slot = malloc(cap * sizeof(*s->slot));
	if (!s->slot)
		return -ENOMEM;
	memset(s->slot, 0xff, cap * sizeof(*s->slot));
	s->mask = cap - 1;
	return 0;
}

/* The index in kept[] of a chunk like c, or NO_CHUNK after adding c as kept[*n] (n + 1). */
static uint32_t set_find_add(struct chunk_set *s, struct rammap_chunk *kept, uint32_t *n,
			     const struct rammap_chunk *c)
{
	size_t h = hash_bytes(c->digest, SHA256_LEN, c->npages) & s->mask;

	for (; s->slot[h] != NO_CHUNK; h = (h + 1) & s->mask) {
		const struct rammap_chunk *k = &kept[s->slot[h]];

		if (k->npages == c->npages && !memcmp(k->digest, c->digest, SHA256_LEN))
			return s->slot[h];
	}
	s->slot[h] = *n;
	kept[(*n)++] = *c;
	return NO_CHUNK;
}

int rammap_finish(struct rammap *m)
{
	struct rammap_chunk *kept = NULL;
	uint32_t *renum = NULL, nkept = 0;
	struct chunk_set set = { 0 };
	uint64_t nz = 0;
	int ret = -ENOMEM;

	index_drop(m);
	renum = malloc(((size_t)m->nchunks + 1) * sizeof(*renum));
	kept = malloc(((size_t)m->nchunks + 1) * sizeof(*kept));
	if (!renum || !kept || set_init(&set, m->nchunks))
		goto out;
	memset(renum, 0xff, ((size_t)m->nchunks + 1) * sizeof(*renum));
	/* chunks in the order of their first page, one per name, unused ones dropped */
	for (uint64_t p = 0; p < m->npages; p++) {
		struct rammap_page *pg = &m->pages[p];
		uint32_t r = pg->chunk, k;

		if (!r) {
			pg->slot = 0;
			continue;
		}
		if (r > m->nchunks || pg->slot >= m->chunks[r - 1].npages) {
			ret = -EINVAL;
			goto out;
		}
		if (renum[r] == NO_CHUNK) {
			k = set_find_add(&set, kept, &nkept, &m->chunks[r - 1]);
			renum[r] = k == NO_CHUNK ? nkept : k + 1;
		}
		pg->chunk = renum[r];
		nz++;
	}
	free(m->chunks);
	m->chunks = kept;
	m->chunks_cap = (size_t)m->nchunks + 1;
	m->nchunks = nkept;
	m->nonzero = nz;
	kept = NULL;
	ret = rammap_index(m);
out:
	free(set.slot);
	free(renum);
	free(kept);
	return ret;
}

int rammap_encode(const struct rammap *m, uint8_t **buf, size_t *len)
{
	uint64_t n = RAMMAP_HEADER + (uint64_t)m->nchunks * RAMMAP_CHUNK_REC +
		     m->npages * RAMMAP_PAGE_REC;
	uint8_t *b, *p;

	*buf = NULL;
	*len = 0;
	if (n > SIZE_MAX)
		return -E2BIG;
	b = calloc(1, (size_t)n);
	if (!b)
		return -ENOMEM;
	memcpy(b + HDR_MAGIC, RAMMAP_MAGIC, 8);
	le32_put(b + HDR_VERSION, RAMMAP_VERSION);
	le32_put(b + HDR_SIZE, RAMMAP_HEADER);
	le64_put(b + HDR_MEM, m->mem_size);
	le32_put(b + HDR_PAGE, RAMMAP_PAGE);
	le32_put(b + HDR_NCHUNKS, m->nchunks);
	le64_put(b + HDR_NONZERO, m->nonzero);
	p = b + RAMMAP_HEADER;
	for (uint32_t c = 0; c < m->nchunks; c++, p += RAMMAP_CHUNK_REC) {
		memcpy(p, m->chunks[c].digest, SHA256_LEN);
		le32_put(p + SHA256_LEN, m->chunks[c].npages);
	}
	for (uint64_t i = 0; i < m->npages; i++, p += RAMMAP_PAGE_REC) {
		le32_put(p, m->pages[i].chunk);
		le32_put(p + 4, m->pages[i].slot);
	}
	*buf = b;
	*len = (size_t)n;
	return 0;
}

/* ------------------------------------------------------------------ parsing */

struct map_hdr {
	uint64_t mem_size, npages, nonzero;
	uint32_t nchunks;
};

static int parse_header(const uint8_t *b, size_t len, struct map_hdr *h, char *why,
			size_t why_len)
{
	uint64_t want;

	if (len < RAMMAP_HEADER)
		return why_set(why, why_len, -EBADMSG, "page map: truncated (%zu bytes, the header "
			       "alone is %u)", len, RAMMAP_HEADER);
	if (memcmp(b + HDR_MAGIC, RAMMAP_MAGIC, 8))
		return why_set(why, why_len, -EBADMSG, "page map: bad magic (not a page map)");
	if (le32_get(b + HDR_VERSION) != RAMMAP_VERSION)
		return why_set(why, why_len, -EPROTONOSUPPORT, "page map: version %u (this lazyblk "
			       "reads version %u)", le32_get(b + HDR_VERSION), RAMMAP_VERSION);
	if (le32_get(b + HDR_SIZE) != RAMMAP_HEADER || le32_get(b + HDR_PAGE) != RAMMAP_PAGE)
		return why_set(why, why_len, -EBADMSG, "page map: header size %u, page size %u "
			       "(%u and %u expected)", le32_get(b + HDR_SIZE),
			       le32_get(b + HDR_PAGE), RAMMAP_HEADER, RAMMAP_PAGE);
	for (unsigned off = HDR_FLAGS; off < RAMMAP_HEADER; off += 4)
		if (le32_get(b + off))
			return why_set(why, why_len, -EBADMSG, "page map: %s not 0",
				       off == HDR_FLAGS ? "flags" : "reserved header field");
	h->mem_size = le64_get(b + HDR_MEM);
	h->nchunks = le32_get(b + HDR_NCHUNKS);
	h->nonzero = le64_get(b + HDR_NONZERO);
	if (!h->mem_size || h->mem_size % RAMMAP_PAGE)
		return why_set(why, why_len, -EBADMSG, "page map: memory size %llu is not a "
			       "positive multiple of %u", (unsigned long long)h->mem_size,
			       RAMMAP_PAGE);
	if (h->mem_size > RAMMAP_MEM_MAX)
		return why_set(why, why_len, -EFBIG, "page map: memory size %llu beyond %llu",
			       (unsigned long long)h->mem_size, RAMMAP_MEM_MAX);
	h->npages = h->mem_size / RAMMAP_PAGE;
	if (h->nonzero > h->npages || h->nchunks > h->nonzero)
		return why_set(why, why_len, -EBADMSG, "page map: %llu non-zero pages and %u chunks "
			       "for %llu pages", (unsigned long long)h->nonzero, h->nchunks,
			       (unsigned long long)h->npages);
	want = RAMMAP_HEADER + (uint64_t)h->nchunks * RAMMAP_CHUNK_REC +
	       h->npages * RAMMAP_PAGE_REC;
	if (len != want)
		return why_set(why, why_len, -EBADMSG, "page map: %zu bytes, its header says %llu%s",
			       len, (unsigned long long)want, len < want ? " (truncated)" : "");
	return 0;
}

/* The chunk records: each in range, each name once. */
static int parse_chunks(const uint8_t *p, struct rammap *m, char *why, size_t why_len)
{
	struct chunk_set set;
	uint32_t n = 0, dup;
	int ret = 0;

	if (set_init(&set, m->nchunks))
		return why_set(why, why_len, -ENOMEM, "page map: out of memory");
	for (uint32_t c = 0; !ret && c < m->nchunks; c++, p += RAMMAP_CHUNK_REC) {
		struct rammap_chunk k;

		memcpy(k.digest, p, SHA256_LEN);
		k.npages = le32_get(p + SHA256_LEN);
		if (!k.npages || k.npages > RAMMAP_CHUNK_PAGES_MAX || le32_get(p + SHA256_LEN + 4))
			ret = why_set(why, why_len, -EBADMSG, "page map: chunk %u: %u pages (1 to "
				      "%u) or a reserved field not 0", c, k.npages,
				      RAMMAP_CHUNK_PAGES_MAX);
		else if ((dup = set_find_add(&set, m->chunks, &n, &k)) != NO_CHUNK)
			ret = why_set(why, why_len, -EBADMSG, "page map: chunk %u: the same as "
				      "chunk %u", c, dup);
	}
	free(set.slot);
	return ret;
}

/* Every page in range; chunks listed in the order of their first page, each used. */
static int parse_pages(const uint8_t *p, struct rammap *m, char *why, size_t why_len)
{
	uint32_t seen = 0;
	uint64_t nz = 0;

	for (uint64_t i = 0; i < m->npages; i++, p += RAMMAP_PAGE_REC) {
		struct rammap_page *pg = &m->pages[i];

		pg->chunk = le32_get(p);
		pg->slot = le32_get(p + 4);
		if (!pg->chunk) {
			if (pg->slot)
				return why_set(why, why_len, -EBADMSG, "page map: page %llu: a zero "
					       "page with slot %u", (unsigned long long)i, pg->slot);
			continue;
		}
		if (pg->chunk > seen + 1 || pg->chunk > m->nchunks)
			return why_set(why, why_len, -EBADMSG, "page map: page %llu: chunk %u %s",
				       (unsigned long long)i, pg->chunk - 1,
				       pg->chunk > m->nchunks ? "beyond the table"
							      : "before its turn (chunks are listed "
								"in the order of their first page)");
		if (pg->chunk > seen)
			seen = pg->chunk;
		if (pg->slot >= m->chunks[pg->chunk - 1].npages)
			return why_set(why, why_len, -EBADMSG, "page map: page %llu: slot %u beyond "
				       "its chunk's %u pages", (unsigned long long)i, pg->slot,
				       m->chunks[pg->chunk - 1].npages);
		nz++;
	}
	if (nz != m->nonzero)
		return why_set(why, why_len, -EBADMSG, "page map: %llu non-zero pages, its header "
			       "says %llu", (unsigned long long)nz, (unsigned long long)m->nonzero);
	if (seen != m->nchunks)
		return why_set(why, why_len, -EBADMSG, "page map: chunk %u is used by no page", seen);
	return 0;
}

int rammap_parse(const void *buf, size_t len, struct rammap **out, char *why, size_t why_len)
{
	const uint8_t *b = buf;
	struct map_hdr h = { 0 };
	struct rammap *m;
	int ret;

	*out = NULL;
	ret = parse_header(b, len, &h, why, why_len);
	if (ret)
		return ret;
	ret = rammap_new(h.mem_size, &m);
	if (ret)
		return why_set(why, why_len, ret, "page map: out of memory");
	m->nchunks = h.nchunks;
	m->nonzero = h.nonzero;
	m->chunks = malloc(((size_t)h.nchunks + 1) * sizeof(*m->chunks));
	if (!m->chunks) {
		rammap_free(m);
		return why_set(why, why_len, -ENOMEM, "page map: out of memory");
	}
	m->chunks_cap = (size_t)h.nchunks + 1;
	ret = parse_chunks(b + RAMMAP_HEADER, m, why, why_len);
	if (!ret)
		ret = parse_pages(b + RAMMAP_HEADER + (size_t)h.nchunks * RAMMAP_CHUNK_REC, m, why,
				  why_len);
	if (!ret && rammap_index(m))
		ret = why_set(why, why_len, -ENOMEM, "page map: out of memory");
	if (ret) {
		rammap_free(m);
		return ret;
	}
	*out = m;
	return 0;
}
