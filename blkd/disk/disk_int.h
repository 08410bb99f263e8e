/* SPDX-License-Identifier: MIT */
/*
 * The disk module's own constructors, behind disk_open() (disk_open.c); unit tests use them
 * too. Every other caller opens a disk with disk_open() (disk.h).
 */
#ifndef LZ_BLKD_DISK_INT_H
#define LZ_BLKD_DISK_INT_H

#include "../../common/test_hook.h"
#include "disk.h"

struct blkd_engine;
/* The lazy image as a disk (disk_engine.c); the disk owns e: disk_close() closes it. */
void disk_engine(struct blkd_engine *e, struct disk *out);

/*
 * A raw disk file or block device (disk_raw.c), opened read-write or read-only. Its size
 * is the file's, rounded down to DISK_SECTOR (-EINVAL for anything but a regular file or
 * a block device, and for a size under one sector). I/O through io_uring (common/uring.h);
 * flush is fdatasync; discard punches a hole; write_zeroes punches a hole (may_unmap) or
 * zeroes the range in place (FALLOC_FL_ZERO_RANGE), writing zeros where the file system
 * can do neither; block status (allocation) from SEEK_DATA/SEEK_HOLE. -errno; prints
 * nothing.
 */
int disk_raw_open(const char *path, bool read_only, struct disk *out);

#endif
