/* SPDX-License-Identifier: MIT */
/*
 * The page map of a VM snapshot's RAM (docs/formats.md, "RAM page map"): for every 4 KiB
 * page of guest RAM, either "zero" or (chunk, slot): the page is bytes
 * [slot * 4096, (slot + 1) * 4096) of that chunk's verified content. A chunk is an
 * ordinary store chunk (cas/chunk.h: one zstd frame named by the sha256 of its bytes)
 * holding npages pages back to back; different snapshots (and different VMs) refer to the
 * same chunks, so RAM that did not change is stored once.
 *
 *   header (64 bytes, little-endian)
 *     magic "LZRAMMAP" | u32 version (1) | u32 header_size (64) | u64 mem_size
 *     | u32 page_size (4096) | u32 nchunks | u64 nonzero (pages that are not "zero")
 *     | u32 flags (0) | u32 reserved[5] (0)
 *   chunks: nchunks x 40 bytes  { u8 digest[32]; u32 npages; u32 reserved (0) }
 *   pages:  mem_size / 4096 x 8 bytes  { u32 chunk (0: zero page, else index + 1); u32 slot }
 *
 * The map's bytes are stored as one or more chunks of the store themselves (the snapshot
 * document lists them, vmsnap/doc.h), so the map is verified by sha256 like every chunk and
 * the document that names it is verified by its own digest (a tag's manifest digest, end to
 * end). The parser is strict and takes hostile input: exact length, magic, version, sizes,
 * every page's chunk in range and slot < the chunk's npages (a zero page's slot 0), nonzero
 * counted, every chunk referenced, each name once, the chunks listed in the order of their
 * first page (what rammap_finish makes: one map has one encoding, parse then encode gives
 * the same bytes).
 * Nothing here prints; refusals are one line in why.
 */
#ifndef LZ_VMSNAP_RAMMAP_H
#define LZ_VMSNAP_RAMMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define RAMMAP_MAGIC "LZRAMMAP"
#define RAMMAP_VERSION 1u
#define RAMMAP_HEADER 64u
#define RAMMAP_PAGE 4096u
#define RAMMAP_CHUNK_REC 40u
#define RAMMAP_PAGE_REC 8u
/* Largest guest RAM a page map describes (16 Mi pages: a 128 MiB map). */
#define RAMMAP_MEM_MAX (64ull << 30)
/* Most pages one chunk holds (4 MiB of RAM). */
#define RAMMAP_CHUNK_PAGES_MAX 1024u

struct rammap_chunk {
	uint8_t digest[SHA256_LEN];   /* sha256 of its npages * 4096 bytes */
	uint32_t npages;
};

struct rammap_page {
	uint32_t chunk;               /* 0: a zero page; else index into chunks + 1 */
	uint32_t slot;                /* page slot within the chunk's content */
};

struct rammap {
	uint64_t mem_size;            /* bytes, a multiple of RAMMAP_PAGE */
	uint64_t npages;              /* mem_size / RAMMAP_PAGE */
	uint64_t nonzero;             /* pages with chunk != 0 */
	uint32_t nchunks;
	struct rammap_chunk *chunks;  /* nchunks (owned) */
	size_t chunks_cap;            /* room in chunks (rammap_add_chunk's) */
	struct rammap_page *pages;    /* npages (owned) */
	/*
	 * Built by rammap_index (rammap_parse does it): the pages that refer to chunk c, in
	 * ascending order, are users[user_off[c] .. user_off[c + 1]) (owned; NULL before).
	 */
	uint32_t *user_off;           /* nchunks + 1 */
	uint32_t *users;              /* nonzero page indices */
};

/* An empty map of mem_size bytes (every page zero, no chunk). -EINVAL, -ENOMEM. */
int rammap_new(uint64_t mem_size, struct rammap **out);
/*
 * Append a chunk to m's table: its index + 1 (the value a page's .chunk takes) in *ref.
 * -ENOMEM, -E2BIG (more than UINT32_MAX - 1 chunks).
 */
int rammap_add_chunk(struct rammap *m, const uint8_t digest[SHA256_LEN], uint32_t npages,
		     uint32_t *ref);
/*
 * Make m canonical: the chunks in the order of their first page, two entries of one name
 * (digest and npages) made one, those no page refers to dropped (the pages' refs
 * renumbered, zero pages' slots 0); count nonzero; then rammap_index. What a writer calls
 * last. -ENOMEM, -EINVAL (a page's ref or slot beyond its chunk).
 */
int rammap_finish(struct rammap *m);
/* (Re)build the per-chunk user index. -ENOMEM. */
TEST_HOOK
int rammap_index(struct rammap *m);
/* The map's bytes, in the format above (malloc'd, the caller's). -ENOMEM, -E2BIG. */
int rammap_encode(const struct rammap *m, uint8_t **buf, size_t *len);
/*
 * Parse and check a map (buf: len bytes, untrusted) into a new rammap (indexed). -EBADMSG
 * with one line in why ("page map: page 12: slot 70 beyond its chunk's 64 pages"),
 * -EPROTONOSUPPORT (another version: "page map: version 2 (this lazyblk reads version
 * 1)"), -EFBIG (mem_size beyond RAMMAP_MEM_MAX), -ENOMEM.
 */
int rammap_parse(const void *buf, size_t len, struct rammap **out, char *why, size_t why_len);
void rammap_free(struct rammap *m);

/* Bytes of chunk c's content. */
static inline uint64_t rammap_chunk_bytes(const struct rammap *m, uint32_t c)
{
	return (uint64_t)m->chunks[c].npages * RAMMAP_PAGE;
}

#endif
