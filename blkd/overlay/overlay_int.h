/* SPDX-License-Identifier: MIT */
/*
 * Inside the overlay: shared by overlay.c (opening, I/O), ov_state.c (the state bits and
 * files, which the others use), ov_live.c and ov_flush.c (OVERLAY.live, flushes),
 * ov_snapshot.c (point-in-time deltas with copy-before-write) and delta.c (the delta file,
 * applying one). Not for other modules; they use overlay.h.
 *
 * State file (OVERLAY.state): a 4096-byte header block, then 2 bits per block, 32 blocks
 * per little-endian 64-bit word (block i: bits 2*(i%32) of word i/32), the last word
 * padded with clean (0) blocks. The in-memory bitmap is the same array of words, so a
 * state change is written back as the few bytes it touched, and loading is one pread.
 *
 * Live state file (OVERLAY.live, ov_live.c): the same bitmap behind a header that names
 * the kernel's boot id. A writer writes every state change there at once and into
 * OVERLAY.state only at a flush, after the data's fdatasync: OVERLAY.state is the state
 * as of the last flush (what a host crash keeps), OVERLAY.live the state now (what a
 * killed server leaves), believed only by an open in the same boot (docs/reliability.md).
 */
#ifndef LZ_BLKD_OVERLAY_INT_H
#define LZ_BLKD_OVERLAY_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../common/test_hook.h"
#include "overlay.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "the state bitmap is read and written as little-endian words in place");

#define OV_STATE_MAGIC "LZBKOVST"
#define OV_STATE_VERSION 2                  /* 1: before OVERLAY.live; read, and upgraded */
#define OV_STATE_HDR 4096u                  /* header block; the bitmap follows */
#define OV_MAX_BLOCKS ((uint64_t)INT64_MAX / DISK_BLOCK)
#define OV_LO 0x5555555555555555ULL         /* the low bit of every 2-bit state */

struct ov_state_header {
	char magic[8];                      /* LZBKOVST */
	uint32_t version;                   /* 2 (or 1) */
	uint32_t block_size;                /* 4096 */
	uint64_t disk_bytes;
	uint64_t block_count;               /* disk_bytes / 4096 */
	uint8_t layout_digest[SHA256_LEN];
	uint32_t flags;                     /* 0 */
	uint32_t header_crc;                /* crc32c(~0, header with this field 0) */
	uint64_t instance;                  /* random, drawn at creation (v1: 0) */
	uint8_t reserved[48];
};
_Static_assert(sizeof(struct ov_state_header) == 128, "state header is 128 bytes");

#define OV_LIVE_MAGIC "LZBKOVLV"
#define OV_LIVE_VERSION 1

struct ov_live_header {
	char magic[8];                      /* LZBKOVLV */
	uint32_t version;                   /* 1 */
	uint32_t flags;                     /* 0 */
	uint64_t block_count;               /* as the state file's */
	uint64_t instance;                  /* the state file's */
	uint8_t boot_id[16];                /* the boot that started this file */
	uint32_t header_crc;                /* crc32c(~0, header with this field 0) */
	uint8_t reserved[12];
};
_Static_assert(sizeof(struct ov_live_header) == 64, "live header is 64 bytes");

/* Words of the 2-bit bitmap for n blocks (its bytes are 8 times that). */
static inline size_t ov_words(uint64_t blocks)
{
	return (size_t)((blocks + 31) / 32);
}

/* Words of a 1-bit-per-block bitmap. */
static inline size_t ov_bitwords(uint64_t blocks)
{
	return (size_t)((blocks + 63) / 64);
}

static inline enum ov_state ov_get(const uint64_t *words, uint64_t b)
{
	return (enum ov_state)((words[b / 32] >> (2 * (b % 32))) & 3);
}

static inline bool bit_test(const uint64_t *w, uint64_t b)
{
	return (w[b / 64] >> (b % 64)) & 1;
}

static inline void bit_set(uint64_t *w, uint64_t b)
{
	w[b / 64] |= 1ULL << (b % 64);
}

static inline void bit_clear(uint64_t *w, uint64_t b)
{
	w[b / 64] &= ~(1ULL << (b % 64));
}

/* Blocks of the given state among the 2-bit states of x (bits outside them 0). */
static inline uint64_t ov_count_dirty(uint64_t x)
{
	return (uint64_t)__builtin_popcountll(x & OV_LO & ~(x >> 1));
}

static inline uint64_t ov_count_zero(uint64_t x)
{
	return (uint64_t)__builtin_popcountll((x >> 1) & OV_LO & ~x);
}

/* Length of the run of equal state starting at b (< blocks) in a 2-bit bitmap. */
uint64_t ov_bits_run(const uint64_t *words, uint64_t blocks, uint64_t b, enum ov_state *st);
/* Set [b, b + n) to st in a 2-bit bitmap; adds the changes to *dirty and *zero. */
bool ov_bits_set(uint64_t *words, uint64_t b, uint64_t n, enum ov_state st, uint64_t *dirty,
		 uint64_t *zero);

/*
 * Write a complete state file into the empty fd: the header block (a new instance) and the
 * bitmap (words, or all clean when NULL, as a hole), then fsync it.
 */
int ov_state_fill(int fd, uint64_t disk_bytes, const uint8_t digest[SHA256_LEN],
		  const uint64_t *words);
/* "PATH.state" into buf; -ENAMETOOLONG. */
int ov_state_path(const char *path, char *buf, size_t len);
/* "PATH.live" into buf; -ENAMETOOLONG. */
int ov_live_path(const char *path, char *buf, size_t len);
/* open(2) of one of the overlay's files: O_NOFOLLOW, and O_NONBLOCK cleared at once. */
int ov_open_file(const char *path, int flags, mode_t mode);
/* Every 2-bit state of words valid (no 3), the padding clean; the dirty and zeroed counts. */
bool ov_bits_valid(const uint64_t *words, uint64_t blocks, uint64_t *dirty, uint64_t *zero);

/*
 * The overlay's no-room episodes: one starts when a write fails with -ENOSPC or -EDQUOT
 * and ends when a write that took new room (grew: it made blocks dirty that were not)
 * succeeds. A rewrite of blocks already dirty needs no room, so it ends nothing.
 * ov_room_update takes one write's result: OV_ROOM_FULL for the failure that starts an
 * episode, OV_ROOM_BACK (*failed: the writes that failed in it) for the success that ends
 * one, OV_ROOM_SAME otherwise. The caller holds the overlay's lock.
 */
struct ov_room {
	bool full;
	uint64_t failed;
};
enum ov_room_event { OV_ROOM_SAME, OV_ROOM_FULL, OV_ROOM_BACK };
TEST_HOOK
enum ov_room_event ov_room_update(struct ov_room *r, int ret, bool grew, uint64_t *failed);

struct ov_flush;
struct ov_flush_buf;

struct overlay {
	char *path;
	int fd;                             /* OVERLAY: block i at i * 4096 */
	int state_fd;                       /* OVERLAY.state, flock'ed */
	bool read_only;
	uint64_t blocks, disk_bytes;
	uint8_t digest[SHA256_LEN];
	/*
	 * Writes and zeroes hold io_lock shared for their whole length (copy-before-write,
	 * data, state); a snapshot holds it exclusive only to capture the state and to let
	 * go of the overlay. It prefers the exclusive side, so writers cannot starve it.
	 */
	pthread_rwlock_t io_lock;
	pthread_mutex_t lock;               /* everything below */
	pthread_cond_t cow_done;            /* a block a snapshot copies is no longer busy */
	uint64_t *words;                    /* the 2-bit states now, as in OVERLAY.live */
	uint64_t dirty, zero;
	uint64_t instance;                  /* the state file's */
	/*
	 * Writers only (ov_live.c, ov_flush.c). live_fd: OVERLAY.live. Under lock: touched, a
	 * bit per word of words changed since a flush last took it, n_touched of them, and
	 * touched_sum, a bit per word of touched that is not 0; flush_seq, the flush turns
	 * that took their words; flush_bufs, the buffers of flushes, free. Under flush_lock:
	 * durable, the words as OVERLAY.state (its page cache) holds them; flush_put and
	 * flush_done, the newest turn that wrote its words there and that completed (both in
	 * order, flush_cond); flush_failed, the newest that failed; data_err, a failed sync of
	 * the data (for good); syncing ... syncing_last, the turns whose data sync is under
	 * way, in order.
	 */
	int live_fd;
	uint64_t *touched, *touched_sum, *durable;
	size_t n_touched;
	uint64_t flush_seq, flush_put, flush_done, flush_failed;
	struct ov_flush_buf *flush_bufs;
	int data_err;
	struct ov_flush *syncing, *syncing_last;
	pthread_mutex_t flush_lock;
	pthread_cond_t flush_cond;
	uint64_t writes, flushes, snapshot_copies;
	int state_err;                      /* the first failed state write; flush reports it */
	struct ov_room room;                /* running out of room, said once an episode */
	struct note_sink notes;
	struct overlay_snapshot *snap;      /* the running snapshot, if any */
};

/*
 * The live state file (ov_live.c). ov_live_open, on an open whose state file is loaded
 * (ov->words): a live file of this boot and this state file replaces ov->words (read_only
 * too); a writer then keeps it, or starts a new one from ov->words. ov_live_mark: the
 * words [first, last] changed (under lock): written to OVERLAY.live, touched.
 * ov_live_flush (ov_flush.c): the touched words into OVERLAY.state after the data's
 * fdatasync (overlay_flush).
 */
int ov_live_open(struct overlay *ov, char *why, size_t why_len);
int ov_live_mark(struct overlay *ov, size_t first, size_t last);
int ov_live_flush(struct overlay *ov);
/* The buffers of flushes freed (ov_live_free). */
void ov_flush_free(struct overlay *ov);
/* Words [a, b) of words to their places in a bitmap file (a state or live file). */
int ov_put_words(int fd, const uint64_t *words, size_t a, size_t b);

/*
 * Words of a bitmap written at once may span fewer than this many words that need no
 * writing (they hold what the file has): a 4 KiB page's worth, so one pwrite covers the
 * words of neighbouring pages, and no page is written that has no word to write.
 */
#define OV_RUN_GAP (4096u / sizeof(uint64_t))

/* Under lock: word w of the bitmap changed since a flush last took it. */
static inline void ov_touch(struct overlay *ov, size_t w)
{
	if (bit_test(ov->touched, w))
		return;
	bit_set(ov->touched, w);
	bit_set(ov->touched_sum, w / 64);
	ov->n_touched++;
}

/* The writer's memory and OVERLAY.live closed (ov_free; then ov_flush_free). */
void ov_live_free(struct overlay *ov);
/*
 * ov_state.c: load OVERLAY.state into ov (ov->words, dirty, zero, instance), checked
 * against the disk size and layout digest wanted (0 / NULL: any). -errno with why.
 */
int ov_state_load(struct overlay *ov, uint64_t want_bytes, const uint8_t *want_digest,
		  char *why, size_t why_len);
/* A new state file's instance: random, never 0 (a version 1 file's). */
int ov_instance_new(uint64_t *out);
/*
 * A version 1 state file made version 2 with instance (its OVERLAY.live already started
 * with it): the data made durable, then the header block written again and made durable.
 */
int ov_state_upgrade(struct overlay *ov, uint64_t instance);

/*
 * fdatasync of one of the overlay's files (through io_uring): every sync of a writer goes
 * through it, so that tests see each one and its result. ov_set_sync_hook (tests only):
 * hook(ov, which, ret) runs after each, and what it returns is the sync's result (a copy
 * of what is now durable, an injected failure); NULL, none.
 */
enum ov_file { OV_DATA, OV_STATE };
int ov_sync(struct overlay *ov, enum ov_file which);
TEST_HOOK
void ov_set_sync_hook(int (*hook)(struct overlay *ov, enum ov_file which, int ret));

/* Copy-before-write (ov_snapshot.c): called by writers holding io_lock shared, before
 * they change the data of [b, b + n). Never fails the write; a failed copy fails the
 * snapshot instead. */
void ov_snapshot_cow(struct overlay *ov, uint64_t b, uint64_t n);

#endif
