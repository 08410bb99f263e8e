/* SPDX-License-Identifier: MIT */
/*
 * Leases on an http(s) store (docs/images.md#pushes-and-gc-of-an-http-store): how a push and
 * `cas gc --remote` of one store keep out of each other's way without any lock the server
 * would have to offer. Each writes a small file, PATH/leases/push.<16 hex> or gc.<16 hex>,
 * before it looks at anything, then lists PATH/leases/ for the other kind:
 *
 *   push: lease written -> while a live gc lease is there, wait -> HEAD/PUT the chunks,
 *         the files -> lease still held? -> the name -> lease removed
 *   gc:   lease written -> a live push lease is there: stop, nothing deleted -> read the
 *         images -> a live push lease is there now: stop -> delete what none uses (and is
 *         older than the grace period), each DELETE only while the lease is held -> lease
 *         removed
 *
 * Each writes before it reads, so of a push and a gc at least one sees the other: a gc never
 * deletes a chunk that a push has found on the store (and so does not upload) before the
 * push's name is written, and a push never trusts a HEAD made while a gc is deleting.
 *
 * A lease is live while the server's clock says it was written less than LEASE_TTL_SECS ago;
 * an older one is a crashed holder's, which gc removes. A holder writes it again from a
 * thread of its own every tenth of that, whatever the command is doing (a 4 GiB upload, a
 * fetch), and takes it as lost once its last successful write was sent more than three
 * quarters of LEASE_TTL_SECS ago (lease_check): by then another may have found it expired,
 * so a push publishes nothing and a gc deletes nothing more. Lost stays lost, even if a late
 * write succeeds. A store whose leases/ (or, before the first lease, the store itself) is
 * not listed as JSON gets no lease: a push does not wait there, and a gc refuses to delete.
 */
#ifndef LZ_CAS_LEASE_H
#define LZ_CAS_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "remote.h"

#define LEASE_TTL_SECS 600
/*
 * Test hook (docs/security.md#test-hooks), inert unless set: SECS (8 to LEASE_TTL_SECS) a
 * holder uses instead of LEASE_TTL_SECS for its own lease (written every SECS/10, lost after
 * 3/4 of SECS). It never makes another's lease expire sooner, so it can only make a command
 * give up earlier.
 */
#define LEASE_TTL_ENV "LAZYBLK_TEST_LEASE_TTL"

enum lease_kind { LEASE_PUSH, LEASE_GC };

struct lease;

/*
 * Take a lease of kind on the http(s) store o->url (its own connection; o's timeouts and
 * retries) and start its writer thread. 0 with *out NULL when o->url is not an http(s) store
 * or the store is not listed as JSON (nothing to tell there); 0 with the lease; or -errno
 * with one line in why.
 */
int lease_take(const struct remote_opts *o, enum lease_kind kind, struct lease **out,
	       char *why, size_t why_len);
/*
 * Whether l is still held: 0 (also for l NULL), or -ETIMEDOUT with one line in why (why_len
 * bytes) saying how long it went unwritten and why ("leases/push.… went 9s without being
 * written (writing it again: PUT …: HTTP status 503), more than the 6s a lease is
 * trusted"). Thread-safe.
 */
int lease_check(struct lease *l, char *why, size_t why_len);
/* Stop its thread, remove it (a failure is left to expire) and free it; NULL: nothing. */
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

/*
 * The rule of lease_check, on a holder's monotonic milliseconds: whether a lease whose last
 * successful write was sent at sent_ms is lost at now_ms, its lifetime ttl_ms. TEST_HOOK
 * for test_remote.c.
 */
TEST_HOOK
bool lease_lost_at(int64_t sent_ms, int64_t now_ms, int64_t ttl_ms);

#endif
