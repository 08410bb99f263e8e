/* SPDX-License-Identifier: MIT */
/*
 * Chunks published in an OCI registry, and the documents that index them.
 *
 * A registry names a blob by the sha256 of its bytes; a chunk is stored as its zstd frame and
 * named by the sha256 of its *uncompressed* bytes. So `lazyblk push` uploads each frame as a
 * blob and publishes, under a tag, an OCI image index whose manifests list the frames as
 * layers, each annotated with the chunk's name:
 *
 *   TAG -> image index (application/vnd.oci.image.index.v1+json)
 *            manifests[]: image manifests (application/vnd.oci.image.manifest.v1+json),
 *                         artifactType application/vnd.lazyblk.chunks.v1, empty config,
 *                         at most OCI_INDEX_MAX_LAYERS layers each:
 *              layers[]: { mediaType application/vnd.lazyblk.chunk.v1+zstd,
 *                          digest sha256:<frame>, size,
 *                          annotations { "org.lazyblk.chunk": "<64 hex>" } }
 *
 * The layers keep every frame referenced (a registry's garbage collection keeps them), and a
 * reader maps chunk -> blob with 2 + (number of manifests) requests when it starts.
 */
#ifndef LZ_CAS_OCI_INDEX_H
#define LZ_CAS_OCI_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"
#include "../../common/why.h"

#define OCI_INDEX_MAX_LAYERS 4000
/*
 * What a reader takes from a registry (and push publishes): at most 2^20 chunks (1 TiB at
 * the default chunk size; 72 MiB of map) in at most OCI_INDEX_MAX_MANIFESTS manifests, each
 * document within the limits of cas/oci_json.h (4 MiB, 65536 values).
 */
#define OCI_INDEX_MAX_CHUNKS (1u << 20)
#define OCI_INDEX_MAX_MANIFESTS (OCI_INDEX_MAX_CHUNKS / OCI_INDEX_MAX_LAYERS + 1)
#define OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_EMPTY "application/vnd.oci.empty.v1+json"
#define OCI_MT_CHUNK "application/vnd.lazyblk.chunk.v1+zstd"
#define OCI_ARTIFACT_CHUNKS "application/vnd.lazyblk.chunks.v1"
#define OCI_ANNOT_CHUNK "org.lazyblk.chunk"
/* The empty config blob: the two bytes "{}". */
#define OCI_EMPTY_JSON "{}"

struct oci_chunk_ref {
	uint8_t chunk[SHA256_LEN];  /* sha256 of the uncompressed bytes (the chunk's name) */
	uint8_t blob[SHA256_LEN];   /* sha256 of the stored frame (the blob's digest) */
	uint64_t size;              /* the frame's length */
};

struct oci_refs {
	struct oci_chunk_ref *v;
	size_t n, cap;
};

void oci_refs_free(struct oci_refs *r);
int oci_refs_add(struct oci_refs *r, const struct oci_chunk_ref *ref);
/* Sort by chunk name; of several refs with one chunk name, the first added is kept. */
void oci_refs_sort(struct oci_refs *r);
/* Binary search in sorted refs; NULL if absent. */
const struct oci_chunk_ref *oci_refs_find(const struct oci_refs *r, const uint8_t chunk[SHA256_LEN]);

/* One JSON document to upload: its bytes, their sha256, its media type. */
struct oci_doc {
	char *json;
	size_t len;
	uint8_t digest[SHA256_LEN];
	const char *media_type;  /* static string */
};

/*
 * Build the documents for sorted refs: docs[0 .. n-2] the image manifests (upload first, by
 * digest), docs[n-1] the image index (upload last, under the tag). With no refs: one manifest
 * with no layers, and the index. Deterministic: the same refs give the same bytes. -ENOMEM.
 */
int oci_index_build(const struct oci_refs *r, struct oci_doc **docs, size_t *n);
void oci_docs_free(struct oci_doc *docs, size_t n);
/*
 * The image index over n manifests (already built): its artifactType and that of manifests[0]
 * are `artifact`, the others' OCI_ARTIFACT_CHUNKS (chunk manifests). -ENOMEM.
 */
int oci_index_doc(const struct oci_doc *manifests, size_t n, const char *artifact,
		  struct oci_doc *doc);
/* Hash the document in b and hand its bytes to doc (b is left empty). b's error, -ENOMEM. */
struct json_buf;
int oci_doc_finish(struct json_buf *b, struct oci_doc *doc, const char *media_type);

/*
 * Parse a fetched document. An image index: the digests of its manifests are appended to
 * *manifests (malloc'ed array of *n_manifests digests). An image manifest: each layer that
 * has the chunk annotation is appended to refs (other layers are ignored). Anything else,
 * malformed JSON, a digest that is not sha256:<64 lowercase hex>, a negative or missing size:
 * -EBADMSG and why. Over a limit (the JSON limits of oci_json.h, more than
 * OCI_INDEX_MAX_MANIFESTS manifests, refs growing past OCI_INDEX_MAX_CHUNKS): -EFBIG and
 * why naming it. -ENOMEM.
 */
int oci_index_parse(const char *json, size_t len, struct oci_refs *refs,
		    uint8_t (**manifests)[SHA256_LEN], size_t *n_manifests, char *why,
		    size_t why_len);

/*
 * Parse a WWW-Authenticate header value of the Bearer scheme (RFC 6750 / the distribution
 * token spec): Bearer realm="https://auth/token",service="registry",scope="repository:r:pull".
 * Parameter names are case-insensitive, values quoted (with \" escapes) or tokens; realm is
 * required, service and scope optional (NULL). Strings are malloc'ed. -EINVAL if not Bearer or
 * no realm, -ENOMEM.
 */
int oci_parse_bearer(const char *header, char **realm, char **service, char **scope);

#endif
