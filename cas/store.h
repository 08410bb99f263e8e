/* SPDX-License-Identifier: MIT */
/*
 * The local chunk store: STORE/chunks/<2 hex>/<64 hex>, one zstd frame per file.
 * STORE/plain/<2 hex>/<64 hex> may hold a chunk's verified uncompressed bytes (the plain
 * tier, cas/plain.h); removing a chunk removes its plain copy.
 * A plain HTTP server can serve the directory as-is. Writes are staged in STORE/tmp and
 * made visible in batches: the batch is made durable with syncfs(2), then each chunk is
 * renamed into place and the touched chunk directories are fsynced, so a chunk that is
 * visible under its name is always complete.
 */
#ifndef LZ_CAS_STORE_H
#define LZ_CAS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"

struct store;

struct store_stats {
	uint64_t chunks;
	uint64_t raw_bytes;     /* uncompressed, from the frame headers */
	uint64_t stored_bytes;  /* file sizes */
	uint64_t bad_headers;   /* files whose frame header cannot be read, or not regular files */
	uint64_t plain_files;   /* plain copies (STORE/plain), with or without their chunk */
	uint64_t plain_bytes;   /* their file sizes */
};

/*
 * STORE/lazyblk-store, one line "lazyblk-store 1": the marker of a store and its format,
 * written when a store is made (docs/formats.md). A directory without it is made a store
 * (the marker written) only when it is empty or holds nothing but what an older lazyblk's
 * store does (chunks/ and plain/ with fan-out directories xx/, tmp/, cache.state,
 * cache.lock, lost+found/).
 */
#define STORE_MARKER "lazyblk-store"
#define STORE_FORMAT 1

/*
 * create: make the directory and STORE/{chunks,tmp} if missing, under the marker rule above:
 * -ENOTEMPTY for a directory that is not a store. Otherwise the store must exist (-ENOENT:
 * no chunks/). Either way, a marker of another format is -EPROTONOSUPPORT.
 */
int store_open(const char *dir, bool create, struct store **out);
/*
 * Make dir a store whatever it holds (import --init): the directory (made if missing) gets
 * the marker unless it has one; -EPROTONOSUPPORT if it has one of another format.
 */
int store_init(const char *dir);
/* For store.c: the marker rule on an open directory; adopt: any directory (store_init). */
int store_marker_check(const char *dir, int dirfd, bool create, bool adopt);
/*
 * The one line for store_open's -ENOTEMPTY and -EPROTONOSUPPORT, "store DIR: …" (init_hint:
 * the command has --init); false, nothing written, for any other err.
 */
bool store_open_why(int err, const char *dir, bool init_hint, char *why, size_t why_len);
/*
 * A store to be a cache in front of a remote, made if missing: chunks/ and tmp/ only — the
 * fan-out directories appear as chunks arrive (store_put_cached), which keeps them off the
 * start-up path of `serve`/`run` with an empty cache (256 mkdirs: half its start-up).
 */
int store_create_cache(const char *dir, struct store **out);
void store_close(struct store *s);
const char *store_dir(const struct store *s);

/* Full path of a chunk file (buf of at least PATH_MAX). */
void store_chunk_path(const struct store *s, const uint8_t d[SHA256_LEN], char *buf, size_t len);
/* 1 if present (committed), 0 if not, -errno. */
int store_has(struct store *s, const uint8_t d[SHA256_LEN]);
/*
 * Stage a compressed chunk. Thread-safe. Becomes visible at the next store_commit()
 * (called automatically when the staged batch grows large).
 */
int store_put(struct store *s, const uint8_t d[SHA256_LEN], const void *frame, size_t len);
/* Make every staged chunk durable and visible. Thread-safe. */
int store_commit(struct store *s);
/*
 * Read a chunk's compressed bytes into a malloc'ed buffer. -ENOENT if absent; -EBADMSG if
 * what is there is not a regular file (a FIFO, a device, a directory, a symbolic link: never
 * opened), which is a corrupt chunk.
 */
int store_read(struct store *s, const uint8_t d[SHA256_LEN], uint8_t **frame, size_t *len);

/*
 * Add a chunk fetched from a remote: written under tmp/ and renamed into place only if no
 * chunk of that name is there (renameat2 RENAME_NOREPLACE, so two processes adding one chunk
 * never both count it). Not fsynced: after a host crash a torn file fails verification and is
 * fetched again. Thread-safe, and safe between processes. Works on a store opened with
 * create or not (tmp/ is made if missing). Returns 1 if added, 0 if it was already present,
 * -errno.
 */
int store_put_cached(struct store *s, const uint8_t d[SHA256_LEN], const void *frame, size_t len);
/*
 * Remove a committed chunk (e.g. one that failed verification) and its plain copy, if any.
 * 0, -ENOENT (no chunk file; a plain copy is removed all the same), -errno.
 * store_remove_sized also gives the st_size of the plain copy it removed (0: none).
 */
int store_remove(struct store *s, const uint8_t d[SHA256_LEN]);
int store_remove_sized(struct store *s, const uint8_t d[SHA256_LEN], uint64_t *plain_bytes);

/*
 * For the plain tier (cas/plain.c). store_plain_dir: a descriptor of STORE/plain (owned by
 * the store), made if missing when create; -ENOENT if missing and !create, -errno.
 * store_plain_size: st_size of chunk d's plain copy, 0 if none. store_tmp_dir: STORE/tmp
 * (owned by the store, made if missing). store_tmp_name: a staging name for d unique among
 * this store's writers (the gc's tmp clean-up knows its form).
 */
int store_plain_dir(struct store *s, bool create);
uint64_t store_plain_size(struct store *s, const uint8_t d[SHA256_LEN]);
int store_tmp_dir(struct store *s);
void store_tmp_name(struct store *s, const uint8_t d[SHA256_LEN], char *buf, size_t len);
/*
 * Staging files (names of store_tmp_name's form) in STORE/tmp left by writers that died (a
 * SIGKILL, a crash): those whose mtime is grace_secs or more ago are removed (counted only,
 * with STORE_SWEEP_DRY_RUN), the younger ones counted as young. STORE_SWEEP_SKIP_LIVE also
 * leaves a file whose writer (the pid in its name) is alive on this host. Other names in
 * tmp/ are never touched. 0, or -errno (c then holds what was done so far); a store without
 * tmp/ has nothing to sweep. A store opened for writing (create) sweeps what is older than
 * STORE_TMP_GRACE_SECS, skipping live writers, and ignores the errors.
 */
#define STORE_TMP_GRACE_SECS 600
#define STORE_SWEEP_DRY_RUN 1u
#define STORE_SWEEP_SKIP_LIVE 2u
struct store_tmp_count {
	uint64_t stale, stale_bytes;  /* removed (dry run: would be) */
	uint64_t young, young_bytes;  /* within the grace period (or a live writer's): left */
};
int store_tmp_sweep(struct store *s, uint64_t grace_secs, unsigned flags,
		    struct store_tmp_count *c);
/*
 * Commit the file tmp/name (tmpfd: store_tmp_dir) as topfd/rel, a fan-out name under
 * chunks/ or plain/ (the fan-out directory is made if missing), unless rel exists: 1
 * committed, 0 it existed (tmp/name removed), -errno (tmp/name left to the caller).
 */
int store_commit_tmp(int tmpfd, const char *name, int topfd, const char *rel);
/* "xx/<64 hex>": a chunk's name under chunks/ and plain/. */
#define STORE_REL_LEN (3 + SHA256_HEX_LEN + 1)
void store_rel_path(const uint8_t d[SHA256_LEN], char rel[STORE_REL_LEN]);
/*
 * Put frame (already verified as chunk d) in place of chunk d's file, whatever that holds
 * (cas verify --repair): written to tmp/, fsync'ed, renamed over it, the rename made durable.
 * The store's file is untouched unless the whole frame got there. 0 or -errno.
 */
int store_replace_chunk(struct store *s, const uint8_t d[SHA256_LEN], const void *frame,
			size_t len);
/*
 * Note that a chunk was just used, for least-recently-used eviction: sets its mtime to now
 * when it is more than STORE_TOUCH_SECS older (so a hot chunk costs one syscall a minute).
 * Errors are ignored (the chunk may have been evicted meanwhile).
 */
#define STORE_TOUCH_SECS 60
void store_touch(struct store *s, const uint8_t d[SHA256_LEN]);

/* Iterate over committed chunks; cb returns non-zero to stop (returned as is). */
typedef int (*store_iter_fn)(void *arg, const uint8_t d[SHA256_LEN], const char *path);
int store_foreach(struct store *s, store_iter_fn cb, void *arg);
/* The same over the plain copies (STORE/plain; none if it does not exist). */
int store_foreach_plain(struct store *s, store_iter_fn cb, void *arg);
int store_stats(struct store *s, struct store_stats *st);

#endif
