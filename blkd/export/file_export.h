/* SPDX-License-Identifier: MIT */
/*
 * lazyblk export: every block of a disk (disk_open: the lazy image's read path, metadata from
 * the layout, chunk data verified against its sha256, zeros elsewhere), into a raw disk image
 * of the disk's size. All-zero blocks are not written, so the image is sparse. It is written to
 * an unnamed file in OUT's directory (O_TMPFILE: nothing is left if the process dies), made
 * durable, linked as OUT.tmp.PID and renamed into place: OUT is either complete or untouched.
 * Where the filesystem has no O_TMPFILE the file is OUT.tmp.XXXXXX from the start.
 * The ranges the layout covers are cut into pieces of 4 MiB read
 * through the disk by several threads (a common/workq), so chunk loads and remote fetches
 * overlap.
 */
#ifndef LZ_BLKD_FILE_EXPORT_H
#define LZ_BLKD_FILE_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../disk/disk.h"

/* Decompressed chunks kept in memory while exporting, unless disk.mem_cache says. */
#define BLKD_EXPORT_MEM_CACHE_DEFAULT ((uint64_t)64 << 20)

struct blkd_export_opts {
	/*
	 * The image disk (a raw one is refused: -EINVAL), opened here with disk_open()
	 * read-only, without read-ahead, prefetch or the open's check, and with no plain tier (an artifact gets every chunk verified, and
	 * leaves no plain copies); mem_cache 0: BLKD_EXPORT_MEM_CACHE_DEFAULT.
	 */
	struct disk_spec disk;
	const char *out_path;
	unsigned threads;            /* pieces read at once; 0: the remote's concurrency with a
					  remote, else the CPUs (at most 8); at most 64 */
	/*
	 * May be NULL. Called from the reading threads (any of them, concurrently) after each
	 * piece: bytes read so far of those the layout covers. Keep it cheap.
	 */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/*
	 * May be NULL. When *cancel becomes non-zero (read atomically, from any thread: a
	 * signal's flag), the export stops after the pieces being read, removes its temporary
	 * file and returns -ECANCELED ("interrupted").
	 */
	const int *cancel;
};

struct blkd_export_stats {
	uint64_t disk_bytes;         /* the disk's size: OUT's length */
	uint64_t mapped_bytes;       /* bytes the layout's runs cover: those read */
	uint64_t written_bytes;      /* of them, in blocks that are not all zeros */
	uint64_t chunks;             /* the layout's chunks, each read and verified */
	uint64_t chunk_loads;        /* loads of them: more when one was read again after the
					  memory cache let it go */
	double seconds;
	struct cas_source_stats cas; /* the store (and remote) tiers */
};

/*
 * 0, or -errno with one line in why (why_len bytes, may be 0), e.g. "DISK.raw: No space left
 * on device", "DIR: not a lazyblk store (no chunks/ directory)". why is empty when the chunk
 * tiers below have said why already through the logger (a chunk missing, corrupt or
 * unreachable). Prints nothing.
 */
int blkd_export(const struct blkd_export_opts *o, struct blkd_export_stats *st, char *why,
		size_t why_len);

#endif
