/* SPDX-License-Identifier: MIT */
/*
 * The documents that publish an image (a chain of layout files, top first, and maybe its
 * manifest) under a name: see docs/images.md.
 *
 *   OCI:  TAG -> image index (artifactType application/vnd.lazyblk.image.v1)
 *                  manifests[0]: the image manifest (artifactType ...image.v1, empty
 *                      config; layers: each layout file, top first, mediaType
 *                      application/vnd.lazyblk.layout.v1 with the annotation
 *                      org.lazyblk.layout: <layout digest hex>, then the lazyblk manifest,
 *                      application/vnd.lazyblk.manifest.v1)
 *                  manifests[1..]: the chunk manifests of oci_index.h for the chain's chunks
 *   HTTP: PATH/images/NAME/image.json and PATH/images/index.json (the names).
 *
 * A VM snapshot (vmsnap/doc.h) is published the same way, with its snapshot document as
 * one more file: OCI: the index and its first manifest have artifactType
 * application/vnd.lazyblk.vm-snapshot.v1, the manifest's first layer is the document
 * (mediaType application/vnd.lazyblk.vm-snapshot.v1+json), then the layouts of its disk's
 * chain (none when the VM had no image disk) and their manifest; HTTP: image.json gains
 * "snapshot": {"digest", "size"}, the document stored at PATH/snapshots/<sha256 hex>.json.
 *
 * Built as fixed-order JSON without white space: the same inputs give the same bytes (but
 * for image.json's "created"). The parsers are strict (digests sha256:<64 lowercase hex>,
 * sizes, the chain's length) and take outside input.
 */
#ifndef LZ_CAS_IMAGE_DOC_H
#define LZ_CAS_IMAGE_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"
#include "../../common/why.h"
#include "oci_index.h"

#define IMAGE_ARTIFACT "application/vnd.lazyblk.image.v1"
#define IMAGE_MT_JSON "application/vnd.lazyblk.image.v1+json"
#define IMAGE_MT_LAYOUT "application/vnd.lazyblk.layout.v1"
#define IMAGE_MT_MANIFEST "application/vnd.lazyblk.manifest.v1"
#define IMAGE_ANNOT_LAYOUT "org.lazyblk.layout"
#define IMAGE_ANNOT_DISK_SIZE "org.lazyblk.disk-size"
#define IMAGE_ANNOT_CHUNKS "org.lazyblk.chunks"
/* A VM snapshot: the artifact, and its document's media type (SNAPDOC_MEDIA_TYPE). */
#define IMAGE_ARTIFACT_SNAPSHOT "application/vnd.lazyblk.vm-snapshot.v1"
#define IMAGE_MT_SNAPDOC "application/vnd.lazyblk.vm-snapshot.v1+json"
/* Largest snapshot document fetched (SNAPDOC_MAX). */
#define IMAGE_SNAPDOC_MAX (64u << 10)
/* Longest layout chain an image may have (as layout_open resolves). */
#define IMAGE_LAYERS_MAX 64
/* Largest layout or manifest file fetched by reference. */
#define IMAGE_FILE_MAX (1ull << 32)

struct image_file {
	uint8_t digest[SHA256_LEN];  /* a layout's layout digest; the manifest's file sha256 */
	uint8_t sha[SHA256_LEN];     /* sha256 of the file's bytes (the OCI blob digest) */
	uint64_t size;
};

struct image_desc {
	struct image_file layouts[IMAGE_LAYERS_MAX];  /* top first */
	unsigned n_layouts;                           /* >= 1 (a snapshot: >= 0) */
	bool has_manifest;
	struct image_file manifest;
	/* a VM snapshot: its document (digest and sha: the sha256 of its bytes) */
	bool has_snapshot;
	struct image_file snapshot;
	uint64_t disk_size;                           /* bytes */
	uint64_t chunks;                              /* the chain's distinct chunks */
};

/*
 * docs[0] the image manifest, docs[1 .. n-2] the chunk manifests for sorted refs (exactly
 * the chain's chunks), docs[n-1] the image index to publish under the tag. -ENOMEM.
 */
int image_oci_build(const struct image_desc *d, const struct oci_refs *refs,
		    struct oci_doc **docs, size_t *n);
/*
 * A tag's document: the digest and size of its image manifest (the first manifest whose
 * artifactType is IMAGE_ARTIFACT or IMAGE_ARTIFACT_SNAPSHOT: an image or a VM snapshot;
 * image_oci_manifest_parse says which). -ENOENT (why "not a lazyblk image") for another
 * index or an image manifest; -EBADMSG with why for a malformed one; -EFBIG, -ENOMEM.
 */
int image_oci_index_parse(const char *json, size_t len, uint8_t man[SHA256_LEN],
			  uint64_t *size, char *why, size_t why_len);
/*
 * What a tag's document is, for the commands that write a tag: a lazyblk image (an index
 * with an entry of IMAGE_ARTIFACT, as image_oci_index_parse takes it), a VM snapshot (the
 * same with IMAGE_ARTIFACT_SNAPSHOT), a lazyblk chunk
 * index (an image index of artifactType OCI_ARTIFACT_CHUNKS that is no image), or anything
 * else (a container image, a malformed document). A chunk-only push and cas gc --remote
 * rewrite only a tag that holds nothing or a chunk index (docs/images.md).
 */
enum image_tag_kind { IMAGE_TAG_CHUNKS, IMAGE_TAG_IMAGE, IMAGE_TAG_SNAPSHOT, IMAGE_TAG_OTHER };
enum image_tag_kind image_tag_kind(const char *json, size_t len);
/* For messages: "a lazyblk image", "a lazyblk VM snapshot", "a lazyblk chunk index", ... */
const char *image_tag_what(enum image_tag_kind kind);
/*
 * The image manifest into *d (d->has_snapshot: a VM snapshot's). -EBADMSG/-EFBIG with why,
 * -ENOMEM.
 */
int image_oci_manifest_parse(const char *json, size_t len, struct image_desc *d,
			     char *why, size_t why_len);

/* image.json; created: RFC 3339 UTC ("2026-12-01T22:00:00Z"). -ENOMEM. */
int image_json_build(const struct image_desc *d, const char *created, char **out, size_t *len);
/* As image_oci_manifest_parse, for image.json. */
int image_json_parse(const char *json, size_t len, struct image_desc *d, char *why,
		     size_t why_len);

/* A NAME of an HTTP store's images/: [a-z0-9][a-z0-9._-]*, at most 128 bytes. */
bool image_name_valid(const char *name);
/* images/index.json: {"schemaVersion":1,"images":[names sorted, once each]}. -ENOMEM. */
int image_names_build(char **names, size_t n, char **out, size_t *len);
/* Its names (malloc'ed array of malloc'ed strings). -EBADMSG with why, -ENOMEM. */
int image_names_parse(const char *json, size_t len, char ***names, size_t *n, char *why,
		      size_t why_len);
void image_names_free(char **names, size_t n);

#endif
