/* SPDX-License-Identifier: MIT */
/*
 * The layout: what `lazyblk mkfs` writes and every reader of the disk serves from.
 * A disk of block_count 4 KiB blocks where
 *   - metadata blocks (everything ext4gen synthesized) are stored in the layout file,
 *   - data runs map byte ranges of the disk to byte ranges of chunks in the store,
 *   - everything else reads as zeros.
 * File format (little-endian), see docs/formats.md:
 *   header (4096 bytes) | metadata blocks | meta_runs[] | data_runs[] | chunks[]
 * The header holds the sha256 of everything after it; the layout's digest is the
 * sha256 of the header.
 *
 * A layout with LAYOUT_F_PARENT is a layer over a parent layout (lazyblk commit): the
 * header also names the parent's layout digest, the body ends with a hint (the parent's
 * path, relative to the child's directory or absolute), every run covers whole blocks, and
 * data runs may be zero runs (LAYOUT_RUN_ZERO). A block the child's runs cover is the
 * child's; every other block is the parent's. layout_open resolves the chain (chain.c).
 *
 * Versions: 3 is written (the flag says whether it has a parent; a metadata run's `layer`
 * is a layer index, 0 the file itself). 1 (no parent) and 2 (with a parent, the flag set)
 * are still read: there the field was reserved, and must be 0.
 */
#ifndef LZ_LAYOUT_LAYOUT_H
#define LZ_LAYOUT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/block.h"
#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define LAYOUT_MAGIC "LZBKLAYT"
#define LAYOUT_VERSION 3              /* what the writer writes */
#define LAYOUT_VERSION_V1 1           /* older: no parent, metadata runs' layer 0 */
#define LAYOUT_VERSION_V2 2           /* older: a layer with a parent, layer 0 */
#define LAYOUT_F_PARENT 1u            /* header flag: a layer over a parent */
#define LAYOUT_RUN_ZERO 1u            /* data run flag (with a parent): reads as zeros */
#define LAYOUT_HINT_MAX 4095u         /* longest parent hint */
#define LAYOUT_CHAIN_MAX 64u          /* most layers in a chain */
/* Largest disk: its size in bytes fits an off_t. */
#define LAYOUT_MAX_BLOCKS ((uint64_t)INT64_MAX / DISK_BLOCK)

struct layout_header {
	char magic[8];
	uint32_t version;
	uint32_t block_size;          /* 4096 */
	uint64_t block_count;         /* disk size / 4096 */
	uint64_t meta_blocks;         /* blocks stored after the header */
	uint64_t meta_run_count;
	uint64_t data_run_count;
	uint64_t chunk_count;
	uint32_t chunk_size;          /* largest chunk (from the manifest) */
	uint32_t flags;
	uint8_t manifest_digest[32];  /* the manifest this layout was made from */
	uint8_t fs_uuid[16];
	uint8_t body_sha256[32];      /* of every byte after the header */
	uint32_t header_crc;          /* crc32c of the header with this field 0 */
	uint32_t reserved[5];
};

/*
 * With LAYOUT_F_PARENT: right after struct layout_header in the header block (zeros
 * without); header_crc then covers both.
 */
struct layout_parent {
	uint8_t digest[32];           /* the parent's layout digest */
	uint32_t hint_len;            /* bytes of the hint at the end of the body */
	uint32_t reserved;
};

/*
 * Disk blocks [lba, lba + count) are stored at layout blocks [first, first + count) of the
 * metadata area of layer `layer` of the chain. In a file, counted from the file: 0 its own
 * area, k its k-th parent's (only a version 3 layer with a parent may hold k > 0; lazyblk
 * writes 0). In the merged view of a chain (struct layout), counted from the top.
 */
struct layout_meta_run {
	uint64_t lba;
	uint64_t first;               /* 0-based index into that layer's metadata area */
	uint32_t count;
	uint32_t layer;
};

/*
 * Disk bytes [lba * 4096 + blk_off, + len) are chunk `chunk`'s uncompressed bytes
 * [chunk_off, chunk_off + len). Sorted by (lba, blk_off), never overlapping. The rest of
 * a block that a run covers only in part reads as zeros.
 */
struct layout_data_run {
	uint64_t lba;
	uint32_t len;
	uint32_t chunk;               /* index into the chunk table */
	uint32_t chunk_off;
	uint16_t blk_off;
	uint16_t flags;
};

/* First disk byte a data run covers. */
static inline uint64_t layout_data_run_pos(const struct layout_data_run *r)
{
	return r->lba * DISK_BLOCK + r->blk_off;
}

_Static_assert(sizeof(struct layout_header) == 168, "layout header: 168 bytes");
_Static_assert(sizeof(struct layout_parent) == 40, "layout parent: 40 bytes");
_Static_assert(sizeof(struct layout_data_run) == 24, "data run: 24 bytes");
_Static_assert(sizeof(struct layout_meta_run) == 24, "meta run");

/* ---- writing (ext4gen) ---- */

struct layout_writer;

/* Writes to path.tmp; layout_writer_finish() renames it into place. */
int layout_writer_new(const char *path, uint64_t block_count, struct layout_writer **out);
/* Metadata blocks must be added in increasing, non-overlapping lba order. */
int layout_add_meta(struct layout_writer *w, uint64_t lba, const void *blocks, uint32_t count);
/* Chunk digests are interned: the same digest always gets the same index. */
int layout_add_data(struct layout_writer *w, uint64_t disk_byte, uint32_t len,
		    const uint8_t digest[SHA256_LEN], uint32_t chunk_off);
/*
 * Make the layout a layer (LAYOUT_F_PARENT) over the layout whose digest is parent (hint: its path
 * as the child should find it). Then every run must cover whole blocks. Before any add.
 */
int layout_writer_set_parent(struct layout_writer *w, const uint8_t parent[SHA256_LEN],
			     const char *hint);
/* A zero run (a layer with a parent only): blocks [lba, lba + count) read as zeros. */
int layout_add_zero(struct layout_writer *w, uint64_t lba, uint64_t count);
int layout_writer_finish(struct layout_writer *w, const uint8_t manifest_digest[SHA256_LEN],
			 const uint8_t fs_uuid[16], uint32_t chunk_size,
			 uint8_t digest_out[SHA256_LEN]);
/* Drops the temporary file. Safe after finish. */
void layout_writer_free(struct layout_writer *w);

/* ---- reading ---- */

/* One file of a chain: [0] the file opened, [1] its parent, ... */
struct layout_layer {
	char *path;                               /* as opened */
	int fd;                                   /* metadata blocks are pread from it */
	uint64_t meta_offset;                     /* file offset of the metadata area */
	/*
	 * The sha256 of each metadata block, taken in the pass that verified the body: a
	 * block read later is checked against it, so a file changed after it was opened is
	 * never served. 32 bytes a block (0.8% of the area).
	 */
	uint8_t (*meta_sha)[SHA256_LEN];
	struct layout_header hdr;                 /* as in the file */
	struct layout_parent parent;              /* with a parent; else zeros */
	uint8_t digest[SHA256_LEN];               /* this file's layout digest */
	char *hint;                               /* its parent hint (NUL-terminated), or NULL */
	uint8_t (*chunks)[SHA256_LEN];            /* its own chunk table (hdr.chunk_count) */
};

/*
 * The disk a layout (and its parents) describe, as one view: the runs of every layer
 * merged, a child's blocks cut out of its parents' runs, zero runs left out (their blocks
 * are in no run, so they read as zeros). hdr is the top file's header but for the counts
 * (meta_blocks, meta_run_count, data_run_count, chunk_count), which are the view's;
 * chunk_size is the largest of the chain's. A metadata run's layer is the one whose file
 * holds its blocks (first: index into that file's metadata area).
 */
struct layout {
	struct layout_header hdr;
	int fd;                                   /* layers[0].fd */
	uint64_t meta_offset;                     /* layers[0].meta_offset */
	uint8_t (*meta_sha)[SHA256_LEN];          /* layers[0].meta_sha */
	struct layout_meta_run *meta_runs;        /* sorted by lba */
	struct layout_data_run *data_runs;        /* sorted by lba, blk_off */
	uint8_t (*chunks)[SHA256_LEN];            /* each digest once */
	uint8_t digest[SHA256_LEN];               /* sha256 of the top file's header */
	struct layout_layer *layers;
	unsigned n_layers;
};

/*
 * Opens and verifies (header crc, body sha256, every run in range), and for a layout with
 * a parent the whole chain: the parent at its hint, else DIR/<digest hex>.layout beside
 * the child, checked against the digest the child records. Only regular files are opened
 * (fs_open_regular: a FIFO or a device at a hint never is). -errno with why (common/why.h,
 * cleared on entry; it may name files), -EBADMSG for a damaged file.
 */
int layout_open(const char *path, struct layout **out, char *why, size_t why_len);
/*
 * layout_open with flags. LAYOUT_OPEN_FETCHED, for an image fetched by reference into
 * STORE/layouts/ (its files are the remote's, named by lazyblk): path and every parent are
 * opened without following a link, each parent only as DIR/<digest hex>.layout beside its
 * child; a hint is never opened, and a layer whose hint is an absolute path is refused.
 */
#define LAYOUT_OPEN_FETCHED 1u
int layout_open_flags(const char *path, unsigned flags, struct layout **out, char *why,
		      size_t why_len);
void layout_close(struct layout *l);
/*
 * The n metadata blocks [first, first + n) of the top file's area against the digests
 * taken at open: 0, or -EIO with *bad (may be NULL) the first that differs.
 */
TEST_HOOK
int layout_meta_verify(const struct layout *l, uint64_t first, uint64_t n, const void *blocks,
		       uint64_t *bad);
/* If lba is a metadata block, read it (verified) into buf and return 1; 0 if not; -errno. */
TEST_HOOK
int layout_read_meta(const struct layout *l, uint64_t lba, void *buf);
/*
 * Read the n metadata blocks [first, first + n) of the area of m's layer (first as in m)
 * into out, checked against the digests taken at open: 0, -EIO with *bad the block of
 * that area that changed since, -errno.
 */
int layout_read_meta_blocks(const struct layout *l, const struct layout_meta_run *m,
			    uint64_t first, uint64_t n, void *out, uint64_t *bad);
/*
 * Write the view as a layout without a parent at path (no parent: metadata blocks copied from
 * whichever layer holds them, the same chunks). digest_out may be NULL.
 */
int layout_flatten(const struct layout *l, const char *path, uint8_t digest_out[SHA256_LEN]);
/* Index of the first data run that ends after disk byte pos (n_runs if none). */
size_t layout_data_run_at(const struct layout *l, uint64_t pos);
/* Index of the first metadata run that ends after block lba (meta_run_count if none). */
size_t layout_meta_run_at(const struct layout *l, uint64_t lba);

#endif
