/* SPDX-License-Identifier: MIT */
/*
 * A registry client for pulling container images (lazyblk import docker://…): the oci://
 * remote's requests (token auth, LAZYBLK_REMOTE_USER / _PASSWORD, redirects that never carry
 * credentials to another host, retries with backoff) without its chunk index. Manifests are
 * read into memory, blobs streamed to a file while their sha256 is checked.
 */
#ifndef LZ_CAS_REGISTRY_H
#define LZ_CAS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"

struct remote;

/* Accept of a manifest GET: OCI index and manifest, docker manifest list and schema2. */
#define REGISTRY_ACCEPT                                                                   \
	"application/vnd.oci.image.index.v1+json, "                                       \
	"application/vnd.oci.image.manifest.v1+json, "                                    \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                     \
	"application/vnd.docker.distribution.manifest.v2+json"

/*
 * A client of repository repo at host ("HOST[:PORT]"), https, or plain http when insecure.
 * 0, or -errno with one line in why (-EINVAL: a bad host or repository name).
 */
int registry_open(const char *host, const char *repo, bool insecure, struct remote **out,
		  char *why, size_t why_len);

/*
 * GET manifest ref (a tag or "sha256:<hex>") into *body (malloc'ed, *len bytes, at most
 * max). 0; -ENOENT when the registry does not have it (404: why empty, the caller names the
 * tag); -EIO, -EACCES, -EFBIG, -ENOMEM with one line in why naming the registry (a plain-HTTP
 * registry asked over https: the line suggests --insecure).
 */
int registry_get_manifest(struct remote *r, const char *ref, size_t max, uint8_t **body,
			  size_t *len, char *why, size_t why_len);

/* Where a blob goes, and how far it is. */
struct registry_blob {
	const uint8_t *digest;   /* sha256 the bytes must have */
	uint64_t size;           /* the bytes the descriptor declares */
	int fd;                  /* written from offset 0 (truncated on a retry) */
	uint64_t *fetched;       /* NULL, or bytes received, added to atomically */
	const int *cancel;       /* NULL, or stop (-ECANCELED) when it becomes non-zero */
};

/*
 * GET blob b->digest into b->fd, hashing the bytes as they arrive: 0 when exactly b->size
 * bytes with that digest arrived (a failed attempt is retried from the start); -EBADMSG
 * ("blob sha256:…: digest mismatch…", or a size mismatch), -ENOENT (404), -EIO, -EACCES,
 * -ECANCELED, -errno of the write, each with one line in why. Thread-safe.
 */
int registry_get_blob(struct remote *r, const struct registry_blob *b, char *why,
		      size_t why_len);

#endif
