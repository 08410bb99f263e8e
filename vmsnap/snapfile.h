/* SPDX-License-Identifier: MIT */
/*
 * A VM snapshot's document as files (docs/formats.md, "VM snapshot document"): a snapshot
 * taken into a store is STORE/snapshots/<sha256 hex of the document>.json, and, for the
 * user, DIR/snapshot.json, the same bytes. Both are written atomically (a temporary file,
 * fsync, rename, fsync of the directory). Read back, a file named by its digest must have
 * that digest, and every document is parsed strictly (snapdoc_parse). A snapshot given on
 * the command line is a directory holding snapshot.json, or the document's file itself.
 * Nothing here prints; refusals are one line in why.
 */
#ifndef LZ_VMSNAP_SNAPFILE_H
#define LZ_VMSNAP_SNAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"
#include "doc.h"

#define SNAPFILE_NAME "snapshot.json"
#define SNAPFILE_DIR "snapshots"

struct snapfile {
	char *json;                    /* the document's bytes (malloc'd, NUL-terminated) */
	size_t len;
	uint8_t id[SHA256_LEN];        /* their sha256: the snapshot's id */
	struct snapdoc d;              /* parsed */
};

/*
 * The document json (len bytes) as store_dir/snapshots/<hex>.json (store_dir NULL: not) and
 * dir/snapshot.json (dir NULL: not); its sha256 into id (may be NULL). 0, or -errno with one
 * line in why naming the file.
 */
int snapfile_write(const char *store_dir, const char *dir, const void *json, size_t len,
		   uint8_t id[SHA256_LEN], char *why, size_t why_len);
/*
 * Read and parse the snapshot at path: a directory (its snapshot.json) or a file; a file
 * named <64 hex>.json must have that sha256 (-EBADMSG otherwise). 0, or -errno with one line
 * in why: -ENOENT no such file, -EFBIG larger than SNAPDOC_MAX, -EBADMSG, -EPROTONOSUPPORT
 * (snapdoc_parse's).
 */
int snapfile_read(const char *path, struct snapfile *f, char *why, size_t why_len);
/*
 * The snapshot id of store_dir: snapfile_read of store_dir/snapshots/<hex>.json (for a
 * restore by reference; TEST_HOOK until it calls it).
 */
TEST_HOOK
int snapfile_load(const char *store_dir, const uint8_t id[SHA256_LEN], struct snapfile *f,
		  char *why, size_t why_len);
void snapfile_free(struct snapfile *f);
/*
 * Whether path names a snapshot rather than an image file: a directory, or a file whose
 * name ends in ".json" (what snapfile_read takes).
 */
bool snapfile_is(const char *path);

#endif
