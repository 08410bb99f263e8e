/* SPDX-License-Identifier: MIT */
/*
 * lazyblk push: publish a store's chunks (all of them, or a given set) to a remote. Each
 * chunk is read once, verified in memory against its sha256 (a corrupt chunk is never
 * pushed) and uploaded unless the remote has it (remote_put); several at once, on a
 * common/workq of the remote's concurrency. For an OCI remote the chunk index is published
 * at the end (remote_publish), only if every chunk went up; a chunk-only push never
 * replaces an image (or anything but a chunk index) under the tag. On an http(s) store the
 * push holds a lease from before its first HEAD until after its name is written, and waits
 * first while a gc of the store runs (lease.h); a lease lost on the way (not written for
 * three quarters of its lifetime) stops it before it publishes anything.
 */
#ifndef LZ_CAS_PUSH_H
#define LZ_CAS_PUSH_H

#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"
#include "../../common/why.h"
#include "lease.h"
#include "remote.h"

struct cas_push_opts {
	const char *store_dir;
	struct remote_opts remote;           /* push is forced */
	const uint8_t (*chunks)[SHA256_LEN]; /* NULL: every chunk of the store */
	size_t n_chunks;
	/*
	 * May be NULL. Called from the uploading threads (any of them, concurrently) after each
	 * chunk: chunks done so far (pushed, found there, or failed) of total. Keep it cheap.
	 */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/*
	 * May be NULL. When *cancel becomes non-zero (read atomically, from any thread: a
	 * signal's flag), the push stops after the uploads under way (each chunk is complete
	 * on the remote or absent), publishes nothing, and returns -ECANCELED ("interrupted").
	 */
	const int *cancel;
	/*
	 * May be NULL (then remote_publish). Called once every chunk is on the remote, with
	 * the open remote, instead of remote_publish (lazyblk push by tag publishes an image:
	 * image_ref.h), and the push's lease on an http(s) store (NULL: none), held so far:
	 * before each write that names what a gc could delete, it checks lease_check. 0, or
	 * -errno with one line in why (why_len bytes; left empty: strerror is said).
	 */
	int (*publish)(void *arg, struct remote *r, struct lease *lease, char *why,
		       size_t why_len);
	void *publish_arg;
	/* Where a notice goes ("waiting for a gc of the store to finish"); may be empty. */
	struct note_sink notes;
};

struct cas_push_stats {
	uint64_t chunks;                     /* in the set: each verified, then uploaded or there */
	uint64_t uploaded, uploaded_bytes;   /* sent now (stored frame bytes) */
	uint64_t present;                    /* the remote had them */
	double seconds;
};

/*
 * 0, or -errno with one line in why (why_len bytes, may be 0), e.g. "chunk <hex> is corrupt
 * in the store (...): not pushed", "chunk <hex>: PUT URL: HTTP 500" (a request that failed
 * after its retries). It stops at the first failure; the uploading threads fail at once,
 * and the first failure's reason is the one kept. why is empty only for a plain errno.
 * Prints nothing.
 */
int cas_push(const struct cas_push_opts *o, struct cas_push_stats *st, char *why,
	     size_t why_len);

/*
 * Whether a push's lease (NULL: none) is still held, before it publishes: 0, or -ETIMEDOUT
 * with the push's one line in why ("URL: the push lost its lease on the store (…): …
 * nothing published: push again").
 */
int cas_push_held(struct lease *lease, const char *url, char *why, size_t why_len);

#endif
