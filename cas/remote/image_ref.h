/* SPDX-License-Identifier: MIT */
/*
 * Images by reference (docs/images.md): a chain of layout files (top first) and maybe its
 * manifest, published under a name next to the chunks they use, and fetched back.
 *
 *   oci://HOST[:PORT]/REPO:TAG (or REPO@sha256:<hex>): an OCI artifact, image_doc.h; the
 *       tag is also the chunk index of exactly the image's chunks.
 *   http(s)://HOST[:PORT]/PATH/images/NAME: PATH/images/NAME/image.json, the layouts at
 *       PATH/layouts/<layout digest hex>.layout, the manifest at
 *       PATH/manifests/<sha256 hex>.manifest, the chunks at PATH/chunks/ as always, the
 *       names in PATH/images/index.json.
 */
#ifndef LZ_CAS_IMAGE_REF_H
#define LZ_CAS_IMAGE_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image_doc.h"
#include "lease.h"
#include "push.h"
#include "remote.h"

struct image_ref {
	bool oci;
	char *chunk_url;   /* the remote of the image's chunks (http: ".../PATH/") */
	char *name;        /* oci: the tag or sha256:<hex>; http: NAME */
};

/* Whether arg is written as a reference (oci://, oci+http(s)://, http(s)://), not a file. */
bool image_ref_is(const char *arg);
/*
 * Parse a reference. -EINVAL with why: an oci reference without a tag or digest,
 * an http one not ending in /images/NAME. -ENOMEM.
 */
int image_ref_parse(const char *url, struct image_ref *ref, char *why, size_t why_len);
void image_ref_free(struct image_ref *ref);

/* ---- fetching (serve, run, export, warm) ---- */

struct image_fetched {
	struct image_desc d;
	char *layout;          /* STORE/layouts/<top hex>.layout */
	char *manifest;        /* STORE/layouts/<top hex>.manifest, or NULL */
	char *chunk_url;       /* the image's chunk remote */
	unsigned fetched;      /* files downloaded (the others were in the store already) */
	uint64_t fetched_bytes;
	/* a VM snapshot (d.has_snapshot): its document's bytes, checked (malloc'd) */
	uint8_t *snapdoc;
	size_t snapdoc_len;
};

/* What a fetch by reference wants: a disk image, a VM snapshot, or either (gc). */
enum image_want { IMAGE_WANT_IMAGE, IMAGE_WANT_SNAPSHOT, IMAGE_WANT_ANY };

/*
 * Fetch the image's document and every layout file (and its manifest) into
 * STORE/layouts/ (created; each file checked against its size, its sha256 and, for a layout,
 * its layout digest before an atomic rename; a file there already is reused when it checks
 * out, fetched again when not). o->url is the reference; its timeouts and retries apply.
 * 0, or -errno with one line in why: -ENOENT an unknown tag or name, -EBADMSG a corrupt,
 * truncated or mismatching file or document, -EIO, -EACCES. Prints nothing.
 */
int image_fetch(const struct remote_opts *o, const char *store_dir, struct image_fetched *out,
		char *why, size_t why_len);
/*
 * image_fetch of what want says: a VM snapshot's document is fetched too (into out->snapdoc,
 * checked against its size and sha256; its layouts, if any, into STORE/layouts/ as an
 * image's). The other kind is refused before any file is fetched, -EMEDIUMTYPE with one
 * line: "REF is a VM snapshot, not a disk image: resume it with lazyblk run --restore REF",
 * "REF is a disk image, not a VM snapshot: serve it with lazyblk serve REF". (image_fetch
 * wants an image.)
 */
int image_fetch_as(const struct remote_opts *o, const char *store_dir, enum image_want want,
		   struct image_fetched *out, char *why, size_t why_len);
void image_fetched_free(struct image_fetched *f);

/* ---- publishing (push) ---- */

struct image_push_opts {
	struct cas_push_opts push;     /* store, remote (the reference), chunks, progress, cancel */
	const char *const *layouts;    /* the chain's files, top first */
	const uint8_t (*layout_digests)[SHA256_LEN];
	unsigned n_layouts;
	const char *manifest;          /* NULL: none */
	uint64_t disk_size;
	const char *created;           /* RFC 3339, for image.json */
	/*
	 * A VM snapshot (vmsnap/doc.h): its document's bytes, published as the first file
	 * (NULL: an image). Its layouts may then be none (a VM without an image disk).
	 */
	const void *snapdoc;
	size_t snapdoc_len;
};

struct image_push_stats {
	struct cas_push_stats chunks;
	uint64_t layout_bytes, manifest_bytes;  /* uploaded now */
	uint64_t snapdoc_bytes;                 /* the snapshot document, uploaded now */
	uint8_t digest[SHA256_LEN];             /* oci: the image index's; http: image.json's */
};

/*
 * Push the chunks (cas_push), then the layout files, the manifest and the documents; the
 * name is replaced, never merged. 0, or -errno with one line in why (as cas_push's: the
 * first failure's; empty only for a plain errno). Prints nothing.
 */
int image_push(const struct image_push_opts *o, struct image_push_stats *st, char *why,
	       size_t why_len);

/* ---- listing (images ls) ---- */

struct image_entry {
	char *name;                 /* tag or NAME */
	struct image_desc d;
};

/*
 * The images of a remote: oci://HOST/REPO (tags/list and its next pages, then each tag's
 * document; tags that are not lazyblk images are left out, tags that fail the tag rule too,
 * counted in tags->skipped; tags->truncated when the list has more pages than lazyblk reads:
 * remote_obj_tags), http(s)://HOST/PATH/ (images/index.json, each image.json; *tags
 * zeroed). 0, or -errno with one line in why.
 */
int image_list(const struct remote_opts *o, struct image_entry **out, size_t *n,
	       struct remote_tags *tags, char *why, size_t why_len);
void image_list_free(struct image_entry *v, size_t n);
/*
 * The names of the http(s) store r (image_names.c): those of images/index.json, and, where
 * the server lists directories as JSON, every images/NAME/ (*listed then true; may be NULL),
 * and also (may be NULL); sorted, once each. index.json is read first. 0, or -errno with one
 * line in why.
 */
int image_names_http(struct remote *r, const char *also, char ***names, size_t *n,
		     bool *listed, char *why, size_t why_len);

/* ---- registry garbage collection (cas gc --remote oci://…) ---- */

struct image_gc_opts {
	struct remote_opts remote;             /* oci://HOST/REPO[:TAG]: the chunk index to rewrite */
	const uint8_t (*keep)[SHA256_LEN];     /* chunks of kept layouts (sorted or not) */
	size_t n_keep;
	bool dry_run;
	/* each chunk the index drops (dry run: would drop), in chunk order; may be NULL */
	void (*dropped)(void *arg, const struct oci_chunk_ref *ref);
	void *arg;
};

struct image_gc_result {
	uint64_t images;                /* image tags of the repository */
	uint64_t before, after;         /* chunks the index lists */
	uint64_t dropped, dropped_bytes;
	uint64_t missing;               /* kept chunks no index of the repository maps */
	uint64_t manifests_deleted;     /* old chunk manifests no tag references any more */
	struct remote_tags tags;        /* what of the tag list was not seen (remote_obj_tags) */
	uint64_t manifests_left;        /* old manifests not deleted: the list not seen whole */
};

/*
 * Rewrite the chunk index under the remote's tag (default lazyblk-chunks) to the chunks the
 * repository's image tags and the kept layouts use, then delete the manifests of the old
 * index that no tag references (so that the registry's own garbage collection removes the
 * blobs only they held). Only a tag list seen whole can say that no tag references one:
 * when a tag of it was skipped, it had more pages than lazyblk reads, or it answered 404
 * while the tag exists, no manifest is deleted (counted in manifests_left). The tag is read
 * again just before it is written: one that no longer holds the chunk index gc read (an
 * image pushed to it meanwhile) is left as it is (-EBUSY, with why). 0, or -errno with one
 * line in why (may be empty: said already).
 */
int image_gc_oci(const struct image_gc_opts *o, struct image_gc_result *res, char *why,
		 size_t why_len);

/* ---- HTTP store garbage collection (cas gc --remote http(s)://…/PATH/) ---- */

struct image_sweep_opts {
	struct remote_opts remote;              /* http(s)://HOST/PATH/ */
	const uint8_t (*chunks)[SHA256_LEN];    /* chunks to keep, sorted (memcmp order) */
	size_t n_chunks;
	const uint8_t (*files)[SHA256_LEN];     /* layouts (layout digest), manifests and
						   snapshot documents (file sha256) to keep,
						   sorted */
	size_t n_files;
	uint64_t grace_secs;                    /* files uploaded since (server clock) stay */
	bool dry_run;
	struct lease *lease;                    /* the gc's (lease.h); NULL only for a dry run */
	/* each file deleted (dry run: that would be): "chunks/ab/ab…", "layouts/….layout" */
	void (*deleted)(void *arg, const char *rel, uint64_t size);
	void *arg;
};

struct image_sweep_result {
	uint64_t listed, kept, deleted, deleted_bytes;
	uint64_t young, young_bytes;            /* not kept, but within the grace period */
};

/*
 * Delete (HTTP DELETE) every chunk, layout, manifest and snapshot document of the store
 * that is not kept and was uploaded more than grace_secs ago (by the mtime the listing
 * gives, against the server's Date; a file without one stays). The store's directories are
 * listed through the server's JSON directory index (nginx: autoindex on; autoindex_format
 * json;): PATH/chunks/00/ … ff/, PATH/layouts/, PATH/manifests/, PATH/snapshots/; a server
 * that lists nothing is refused (-EOPNOTSUPP, with why). Files whose names are not what
 * lazyblk writes are left alone. Deletes only under the gc's lease: none (not a dry run) is
 * -EPERM, and a lease lost on the way (lease_check, before each DELETE) stops it with
 * -ETIMEDOUT. 0, or -errno with
 * one line in why.
 */
int image_sweep_http(const struct image_sweep_opts *o, struct image_sweep_result *res,
		     char *why, size_t why_len);

#endif
