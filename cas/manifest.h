/* SPDX-License-Identifier: MIT */
/*
 * The lazyblk manifest: a binary, versioned description of an image's file tree
 * (docs/formats.md). One contiguous little-endian file:
 *
 *   header | entries[] | chunks[] | holes[] | xattrs[] | strings | sha256(all before)
 *
 * Entries are sorted in depth-first order (a directory, then its subtree, children by
 * byte order of their names), so every parent precedes its children.
 * A loaded manifest points straight into the file's bytes: loading is one read,
 * one hash and one validation pass, with no per-entry allocation.
 */
#ifndef LZ_CAS_MANIFEST_H
#define LZ_CAS_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define MF_MAGIC "LZBKMANI"
#define MF_VERSION 1
#define MF_SYMLINK_MAX 4095

enum mf_type {
	MF_REG = 1,
	MF_DIR = 2,
	MF_SYMLINK = 3,
	MF_HARDLINK = 4, /* link names the path of an earlier MF_REG (or other non-dir) entry */
	MF_CHR = 5,
	MF_BLK = 6,
	MF_FIFO = 7,
	MF_SOCK = 8,
};

struct mf_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;     /* sizeof(struct mf_header) */
	uint64_t entry_count;
	uint64_t chunk_count;
	uint64_t hole_count;
	uint64_t xattr_count;
	uint64_t strings_size;
	uint64_t config_off;      /* image config JSON in strings (OCI config), 0 len if none */
	uint32_t config_len;
	uint32_t chunk_size;      /* largest chunk the importer produced (bytes) */
	uint32_t flags;
	uint32_t reserved[5];
};

struct mf_entry {
	uint64_t path_off;        /* into strings, NUL-terminated; "/" is the root */
	uint32_t path_len;
	uint8_t type;             /* enum mf_type */
	uint8_t pad0[3];
	uint32_t mode;            /* permission bits incl. setuid/setgid/sticky (07777) */
	uint32_t uid, gid;
	uint32_t rdev_major, rdev_minor;
	uint32_t pad1;
	int64_t atime, mtime, ctime;  /* seconds since the epoch, may be negative */
	uint32_t atime_ns, mtime_ns, ctime_ns;
	uint32_t pad2;
	uint64_t size;            /* regular: logical size incl. holes; symlink: target length */
	uint64_t link_off;        /* symlink target or hardlink target path, NUL-terminated */
	uint32_t link_len;
	uint32_t xattr_count;
	uint64_t chunk_first;     /* index into chunks[] */
	uint32_t chunk_count;
	uint32_t hole_count;
	uint64_t hole_first;      /* index into holes[] */
	uint64_t xattr_first;     /* index into xattrs[] */
};

/*
 * A piece of file data: len bytes at byte off of the chunk's uncompressed content.
 * File data, holes removed, is the concatenation of an entry's pieces in order. Large
 * files own their chunks (off 0); small files are packed, several to one chunk.
 */
struct mf_chunk {
	uint8_t digest[SHA256_LEN]; /* sha256 of the chunk's uncompressed bytes */
	uint32_t len;               /* bytes of this file in the chunk */
	uint32_t off;               /* where they start in the chunk */
};

struct mf_hole {
	uint64_t off, len;          /* sorted, disjoint, within size */
};

struct mf_xattr {
	uint64_t name_off;          /* full name incl. namespace ("user.foo"), NUL-terminated */
	uint64_t value_off;         /* binary value (a NUL follows for convenience) */
	uint32_t name_len;
	uint32_t value_len;
};

struct manifest {
	uint8_t *buf;               /* owned: the whole file, in private memory (malloc'ed) */
	size_t buf_len;
	const struct mf_header *hdr;
	const struct mf_entry *entries;
	const struct mf_chunk *chunks;
	const struct mf_hole *holes;
	const struct mf_xattr *xattrs;
	const char *strings;
	size_t n_entries, n_chunks, n_holes, n_xattrs;
	uint8_t digest[SHA256_LEN]; /* the trailing checksum: identifies this manifest */
};

/*
 * Load and fully validate. On a format problem returns -EBADMSG with why (common/why.h;
 * cleared on entry) saying what ("bad magic (not a lazyblk manifest)"); on I/O errors -errno.
 */
int manifest_load(const char *path, struct manifest **out, char *why, size_t why_len);
/* Same over a caller-provided buffer, which the manifest takes ownership of. */
TEST_HOOK
int manifest_parse(uint8_t *buf, size_t len, struct manifest **out, char *why,
		   size_t why_len);
void manifest_free(struct manifest *m);

static inline const char *manifest_str(const struct manifest *m, uint64_t off)
{
	return m->strings + off;
}
static inline const char *manifest_path(const struct manifest *m, const struct mf_entry *e)
{
	return m->strings + e->path_off;
}
/*
 * A regular file's data is its pieces' bytes concatenated: its bytes with the holes left
 * out. Data offset of file offset f of e (f in a hole or past the end: where the next data
 * byte would be).
 */
uint64_t manifest_file_to_data(const struct manifest *m, const struct mf_entry *e, uint64_t f);
/* File offset of data offset d of e; *room: data bytes from there to the next hole. */
uint64_t manifest_data_to_file(const struct manifest *m, const struct mf_entry *e, uint64_t d,
			       uint64_t *room);
/*
 * The pieces of e that overlap its data bytes [a, b), in order: cb(arg, piece, data offset
 * of the piece's first byte). cb returns 0 to go on; anything else ends the walk, returned.
 */
typedef int (*mf_piece_fn)(void *arg, const struct mf_chunk *c, uint64_t data_off);
int manifest_pieces_in(const struct manifest *m, const struct mf_entry *e, uint64_t a,
		       uint64_t b, mf_piece_fn cb, void *arg);

/* What an image holds, summed over its entries (manifest show --summary, import's summary). */
struct manifest_totals {
	uint64_t by_type[MF_SOCK + 1];  /* entries of each type */
	uint64_t file_bytes;            /* regular files' sizes, holes included */
	uint64_t hole_bytes;
	uint64_t xattrs;
	uint64_t chunks;                /* distinct chunks the pieces refer to */
};
/* 0, or -ENOMEM (counting distinct chunks needs a copy of the digests). */
int manifest_totals(const struct manifest *m, struct manifest_totals *t);
/* Binary search by path; NULL if absent. */
const struct mf_entry *manifest_find(const struct manifest *m, const char *path);
/* Depth-first path order used for entries: '/' sorts before every other byte. */
int manifest_path_cmp(const char *a, size_t alen, const char *b, size_t blen);
const char *manifest_type_name(uint8_t type);

/* ---- writing ---- */

struct mf_xattr_in {
	const char *name;
	const void *value;
	uint32_t name_len, value_len;
};

struct mf_entry_in {
	const char *path;           /* absolute, no trailing slash, "/" for the root */
	uint32_t path_len;
	uint8_t type;
	uint32_t mode, uid, gid, rdev_major, rdev_minor;
	int64_t atime, mtime, ctime;
	uint32_t atime_ns, mtime_ns, ctime_ns;
	uint64_t size;
	const char *link;
	uint32_t link_len;
	const struct mf_chunk *chunks;
	uint32_t chunk_count;
	const struct mf_hole *holes;
	uint32_t hole_count;
	const struct mf_xattr_in *xattrs;
	uint32_t xattr_count;
};

struct manifest_writer;

struct manifest_writer *manifest_writer_new(uint32_t chunk_size);
void manifest_writer_free(struct manifest_writer *w);
/* Copies everything; entries may come in any order (the writer sorts). */
int manifest_writer_add(struct manifest_writer *w, const struct mf_entry_in *e);
int manifest_writer_set_config(struct manifest_writer *w, const char *json, size_t len);
/*
 * Sort, check (duplicate paths give -EEXIST with why: common/why.h), and write atomically.
 * digest_out (may be NULL) receives the manifest's checksum.
 */
int manifest_writer_write(struct manifest_writer *w, const char *path,
			  uint8_t digest_out[SHA256_LEN], char *why, size_t why_len);
/* Serialize to a malloc'ed buffer instead of a file. */
TEST_HOOK
int manifest_writer_serialize(struct manifest_writer *w, uint8_t **buf, size_t *len,
			      char *why, size_t why_len);

#endif
