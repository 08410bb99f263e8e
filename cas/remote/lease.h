/* SPDX-License-Identifier: MIT */
/*
 * Leases on an http(s) store (docs/images.md#pushes-and-gc-of-an-http-store): how a push and
 * `cas gc --remote` of one store keep out of each other's way without any lock the server
 * would have to offer. Each writes a small file, PATH/leases/push.<16 hex> or gc.<16 hex>,
 * before it looks at anything, then lists PATH/leases/ for the other kind:
 *
 *   push: lease written -> while a live gc lease is there, wait -> HEAD/PUT the chunks,
 *         the files, the name -> lease removed
 *   gc:   lease written -> a live push lease is there: stop, nothing deleted -> read the
 *         images -> delete what none uses (and is older than the grace period) -> lease
 *         removed
 *
 * Each writes before it reads, so of a push and a gc at least one sees the other: a gc never
 * deletes a chunk that a push has found on the store (and so does not upload) before the
 * push's name is written, and a push never trusts a HEAD made while a gc is deleting. A
 * lease is live while the server's clock says it was written (or written again: holders do
 * so every LEASE_REFRESH_SECS) less than LEASE_TTL_SECS ago; an older one is a crashed
 * holder's, which gc removes. A store that cannot be listed (no JSON index) cannot be
 * collected by lazyblk, so nothing is written there.
 */
#ifndef LZ_CAS_LEASE_H
#define LZ_CAS_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remote.h"

#define LEASE_TTL_SECS 600
#define LEASE_REFRESH_SECS 60

enum lease_kind { LEASE_PUSH, LEASE_GC };

struct lease;

/*
 * Take a lease of kind on the http(s) store o->url (its own connection; o's timeouts and
 * retries). 0 with *out NULL when o->url is not an http(s) store or the store is not listed
 * as JSON (nothing to tell there); 0 with the lease; or -errno with one line in why, or
 * with why empty when the lease's PUT failed (remote_obj_put logged why).
 */
int lease_take(const struct remote_opts *o, enum lease_kind kind, struct lease **out,
	       char *why, size_t why_len);
/* Write it again if LEASE_REFRESH_SECS have passed (else nothing); thread-safe; l may be NULL. */
void lease_refresh(struct lease *l);
/* Remove it (a failure is left to expire) and free it; NULL: nothing. */
void lease_drop(struct lease *l);

struct lease_seen {
	unsigned live;         /* live leases of the kind asked, other than our own */
	char name[40];         /* one of them: "push.0123456789abcdef" */
	int64_t age;           /* its age, seconds */
	unsigned reaped;       /* expired leases (any kind) removed */
};

/*
 * The live leases of kind on l's store other than l itself, into *seen. With reap, the
 * expired ones (any kind) are deleted. 0, or -errno with one line in why.
 */
int lease_others(struct lease *l, enum lease_kind kind, bool reap, struct lease_seen *seen,
		 char *why, size_t why_len);

#endif
