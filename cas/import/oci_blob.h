/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the OCI layout and docker-archive importers: media type parsing, the
 * config's diff_ids, archive paths, reading small verified blobs, and applying one layer
 * blob while its digest (and the digest of its uncompressed tar, the config's diff_id) is
 * checked on the fly. Digests and strict JSON: ../oci_json.h.
 */
#ifndef LZ_CAS_OCI_BLOB_H
#define LZ_CAS_OCI_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "../../common/sha256.h"
#include "../oci_json.h"
#include "import.h"

#define OCI_JSON_MAX (64u << 20) /* largest index, manifest or config we read */
#define OCI_SIZE_UNKNOWN UINT64_MAX

enum oci_compression {
	OCI_COMP_NONE,
	OCI_COMP_GZIP,
	OCI_COMP_ZSTD,
	OCI_COMP_DETECT, /* docker-archive members: whatever the bytes say */
};

/* Layer media type → compression; -ENOTSUP for a type that is not a tar layer. */
int oci_layer_media_type(const char *media_type, enum oci_compression *comp);

/*
 * The config's rootfs.diff_ids (sha256 of each uncompressed layer tar) into diff_ids[n].
 * *have is false if the config lists none. Diff_ids that do not fit n layers are an
 * error, its reason (in ic->why) prefixed with `label`.
 */
int oci_config_diff_ids(struct import_ctx *ic, struct json_object *config, size_t n,
			uint8_t (*diff_ids)[SHA256_LEN], bool *have, const char *label);

/*
 * Normalize a path inside an archive relative to directory `base` (may be NULL or ""):
 * drops "." and empty components and leading '/', resolves "..". Returns 0, -EINVAL if
 * ".." climbs above the root, -ENAMETOOLONG if out is too small.
 */
int oci_path_normalize(const char *base, const char *path, char *out, size_t len);

/*
 * Read a whole small blob from fd (at most max bytes) into a malloc'ed NUL-terminated
 * buffer, checking its size (unless OCI_SIZE_UNKNOWN) and its digest (unless NULL).
 * On failure returns -errno with a reason naming `what` in ic->why (only ic->why and
 * ic->why_len are used).
 */
int oci_blob_read(struct import_ctx *ic, int fd, uint64_t size, const uint8_t *digest,
		  size_t max, char **out, size_t *out_len, const char *what);

/* One layer blob to apply on top of the tree. */
struct oci_layer_src {
	int fd;                    /* read with pread from offset 0 */
	uint64_t size;             /* expected blob size or OCI_SIZE_UNKNOWN */
	const uint8_t *digest;     /* expected sha256 of the blob, or NULL */
	const uint8_t *diff_id;    /* expected sha256 of the uncompressed tar, or NULL */
	enum oci_compression comp;
};

/*
 * Apply the layer as layer number `layer` (1, 2, ...) with OCI whiteouts. Every byte of
 * the blob is hashed while the tar is read, the rest of the blob is drained after the
 * tar's end, and a size or digest mismatch fails the layer. On failure the reason, prefixed
 * with `what`, is in ic->why.
 */
int oci_layer_apply(struct import_ctx *ic, const struct oci_layer_src *src, uint32_t layer,
		    const char *what);

#endif
