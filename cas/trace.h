/* SPDX-License-Identifier: MIT */
/*
 * Boot traces: what a guest read first, in the order it read it (docs/formats.md, "trace").
 *
 *   header | records[] | strings | sha256(all before)
 *
 * A record is one first touch of disk bytes: when (µs since the server started), which disk
 * range, and, for file data, the manifest path and the byte range within the file. Paths let
 * a trace outlive its layout: replayed against another layout, or a newer manifest of the
 * same image, every path that still exists still counts (trace_plan.h).
 *
 * Recording is the block engine's (blkd/coldstart/trace_record.h); replaying plans chunks from a
 * trace (blkd/coldstart/trace_plan.h); repacking (repack.h) and mkfs --order read it too.
 */
#ifndef LZ_CAS_TRACE_H
#define LZ_CAS_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define TRACE_MAGIC "LZBKTRAC"
/*
 * Version 2 adds RAM records and the snapshot id; trace_write writes version 1 when a trace
 * has neither (so that a disk trace stays readable by a lazyblk that reads only version 1).
 * Both are read.
 */
#define TRACE_VERSION 2
#define TRACE_VERSION_DISK 1
/*
 * A RAM record (version 2): a first touch of guest RAM on a lazy restore of a VM snapshot.
 * disk_off is the RAM byte offset and len the bytes, both whole pages (TRACE_RAM_PAGE);
 * file_off is 0. Disk users of a trace skip these records (trace_record_is_ram).
 */
#define TRACE_PATH_RAM 0xffffffffu
#define TRACE_RAM_PAGE 4096u
#define TRACE_RECORDS_MAX (1u << 24)        /* 16 Mi records, 512 MiB: refused beyond */
#define TRACE_STRINGS_MAX (64u << 20)
/* The recorder kept only the first TRACE_RAW_MAX first-touch ranges: a prefix of the boot. */
#define TRACE_F_TRUNCATED 1u
#define TRACE_RAW_MAX (1u << 20)
/* Latest creation time a trace may carry: 9999-12-31 23:59:59 UTC (a 4-digit year). */
#define TRACE_CREATED_MAX 253402300799ull

struct trace_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;        /* sizeof(struct trace_header) */
	uint64_t record_count;
	uint64_t strings_size;       /* starts with a NUL: string offset 0 is "" */
	uint8_t manifest_digest[32]; /* the image the trace was recorded on */
	uint8_t layout_digest[32];   /* and its layout */
	uint64_t created;            /* seconds since the epoch, <= TRACE_CREATED_MAX */
	uint64_t duration_us;        /* from the server's start to the end of recording */
	uint32_t flags;              /* TRACE_F_* */
	uint8_t snapshot_id[32];     /* v2: the VM snapshot whose RAM records are (0: none) */
	uint32_t reserved[3];
};

/*
 * path == 0: metadata (or any non-file) disk bytes; TRACE_PATH_RAM: guest RAM (version 2);
 * else file data of strings + path.
 */
struct trace_record {
	uint64_t t_us;               /* since the server started */
	uint64_t disk_off;           /* bytes */
	uint64_t file_off;           /* file data: byte offset within the file */
	uint32_t len;                /* bytes (disk and file alike) */
	uint32_t path;               /* offset into strings */
};

_Static_assert(sizeof(struct trace_header) == 160, "trace header");
_Static_assert(sizeof(struct trace_record) == 32, "trace record");

/* A loaded trace: points into its file's bytes (one read, one hash, one validation pass). */
struct trace {
	uint8_t *buf;
	size_t buf_len;
	const struct trace_header *hdr;
	const struct trace_record *records;
	const char *strings;
	size_t n_records;
	uint8_t digest[SHA256_LEN];  /* the trailing checksum */
};

/* -EBADMSG with *why set on a format problem ("bad magic (not a lazyblk trace)"), -errno. */
int trace_load(const char *path, struct trace **out, char *why, size_t why_len);
TEST_HOOK
int trace_parse(uint8_t *buf, size_t len, struct trace **out, char *why, size_t why_len);
void trace_free(struct trace *t);

static inline bool trace_record_is_ram(const struct trace_record *r)
{
	return r->path == TRACE_PATH_RAM;
}

/* The record's file path ("" for metadata and RAM records). */
static inline const char *trace_path(const struct trace *t, const struct trace_record *r)
{
	return trace_record_is_ram(r) ? "" : t->strings + r->path;
}

/*
 * True when r names a file that no record before it named: paths are interned in first-use
 * order, so a new file's path offset is larger than every earlier one (*last, from 0). RAM
 * records name no file.
 */
static inline bool trace_record_new_file(const struct trace_record *r, uint32_t *last)
{
	if (r->path <= *last || trace_record_is_ram(r))
		return false;
	*last = r->path;
	return true;
}

/*
 * The file records of t against manifest m (which may be of another version of the image):
 * cb(arg, e, file_off, len) for each record naming a regular file of m, in trace order; cb
 * returns 0 to go on, anything else ends the walk and is returned. *files gets the number of
 * distinct files the trace read, *found how many of them are regular files of m.
 */
struct manifest;
struct mf_entry;
typedef int (*trace_range_fn)(void *arg, const struct mf_entry *e, uint64_t file_off,
			      uint32_t len);
int trace_for_each_file(const struct trace *t, const struct manifest *m, trace_range_fn cb,
			void *arg, uint64_t *files, uint64_t *found);

/*
 * Write a trace atomically: the header's magic, version, header_size, record_count and
 * strings_size are filled in here (version 2 when a record is a RAM record or the snapshot
 * id is set, else 1); records must be valid (see trace_parse). -errno.
 */
int trace_write(const char *path, struct trace_header *h, const struct trace_record *records,
		size_t n, const char *strings, size_t strings_size);

#endif
