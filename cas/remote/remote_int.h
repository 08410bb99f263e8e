/* SPDX-License-Identifier: MIT */
/*
 * Internals of the remote tier, shared by its files:
 *   remote.c       the public API (remote.h) over one backend: opening, fetching a chunk
 *                  (the request, retries, status, statistics), uploading, statistics;
 *                  the request helpers the backends use;
 *   remote_http.c  the http(s):// backend: the store's layout as static files;
 *   remote_oci.c   the oci:// backend: blobs of a registry repository, found through the
 *                  chunk index published under a tag (oci_index.h), registry token auth.
 * A backend is a struct remote_ops; remote_open() picks the one whose match() takes the
 * URL. Its state hangs off r->be.
 */
#ifndef LZ_CAS_REMOTE_INT_H
#define LZ_CAS_REMOTE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "remote.h"

#define REMOTE_LAT_RING 8192

/* Where a chunk is fetched from: what a backend's locate() says. */
struct remote_loc {
	char *url;                   /* malloc'ed; the core frees it */
	uint8_t blob[SHA256_LEN];    /* oci: the blob the frame must be (check()) */
	uint64_t size;               /* oci: its size */
};

struct remote_ops {
	/* Whether url is for this backend (by its scheme). */
	bool (*match)(const char *url);
	/* Parse url into r->base and the backend's state. -EINVAL with why, -ENOMEM. */
	int (*parse)(struct remote *r, const char *url, char *why, size_t why_len);
	/* Once requests can run (NULL: nothing). -errno, with why or not (empty: strerror). */
	int (*start)(struct remote *r, char *why, size_t why_len);
	/*
	 * A 401's challenge (WWW-Authenticate, maybe NULL): get what the next attempt needs
	 * (r->token, or r->basic). 0: retry once; -EACCES with why. NULL: a 401 is the answer.
	 */
	int (*auth)(struct remote *r, const char *challenge, char *why, size_t why_len);
	/* Where chunk d (hex: its name) is. 0; -ENOENT not there (logged); -ENOMEM. */
	int (*locate)(struct remote *r, const uint8_t d[SHA256_LEN], const char *hex,
		      struct remote_loc *loc);
	/*
	 * remote_probe's first step (NULL: none): whether the remote can have chunk d (NULL:
	 * any) without a request (oci: the tag exists and its index lists d). 0, or -ENOENT
	 * with why.
	 */
	int (*probe)(struct remote *r, const uint8_t d[SHA256_LEN], char *why, size_t why_len);
	/* Whether the fetched frame is what loc promised (NULL: no check). 0, or -EBADMSG. */
	int (*check)(struct remote *r, const struct remote_loc *loc, const uint8_t *frame,
		     size_t len, const char *hex);
	/* Upload d's frame unless present: 1 uploaded, 0 present, -errno with why. */
	int (*put)(struct remote *r, const uint8_t d[SHA256_LEN], const void *frame, size_t len,
		   const char *what, char *why, size_t why_len);
	/*
	 * Whether publish() may write what it publishes, before anything is uploaded (NULL:
	 * yes). 0, or -EEXIST with one line in why.
	 */
	int (*publish_check)(struct remote *r, char *why, size_t why_len);
	/* Publish what put() uploaded (NULL: nothing to publish). 0, or -errno with why. */
	int (*publish)(struct remote *r, char *why, size_t why_len);
	/* Free the backend's state (NULL: none). Also after a failed parse(). */
	void (*free)(struct remote *r);
};

extern const struct remote_ops remote_http_ops, remote_oci_ops;

/* remote_oci.c: the repository of an oci remote (registry.c). */
const char *remote_oci_repo(const struct remote *r);

struct remote {
	const struct remote_ops *ops;
	void *be;               /* the backend's state */
	char *url;              /* as given */
	char *base;             /* http: ".../PATH/" (with the slash); oci: "scheme://host[:port]" */
	bool push;
	struct http *http;
	int retries;
	char *user, *password;  /* LAZYBLK_REMOTE_USER / _PASSWORD, or NULL */

	pthread_mutex_t lock;   /* everything below, and the backend's state */
	char *token;            /* bearer token (oci: the registry's) */
	bool basic;             /* send user and password (http: always; oci: when asked) */
	uint64_t rng;
	uint32_t lat[REMOTE_LAT_RING]; /* fetch latencies, microseconds (ring) */
	uint64_t lat_n;
	struct remote_stats st;
};

#define REMOTE_STAT_ADD(r, f, v) __atomic_add_fetch(&(r)->st.f, (v), __ATOMIC_RELAXED)

/* remote.c: requests for the backends */
/*
 * Run rq with authentication and retries. Returns 0 with a response whose status the caller
 * judges (possibly a 5xx after the last retry), -EIO after the last transport failure,
 * -EACCES (with why) when authentication failed, or when a 401 comes from a host a redirect
 * led to (a registry's challenge is followed only when the registry itself sent it), -ENOMEM.
 * On return rq holds the last attempt's outputs (clear them with http_req_clear).
 */
int remote_do(struct remote *r, struct http_req *rq, int retries, char *why, size_t why_len);
/* "HTTP 503" or the transport error of rq's last attempt, for messages (buf: len bytes). */
const char *remote_failure(const struct http_req *rq, char *buf, size_t len);
/*
 * remote_obj.c: the URL of rel on the remote (its base, a '/', rel), malloc'ed, or NULL; and
 * a GET of it (rq's method, url and max_body set here; accept and a sink by the caller) with
 * the remote's retries, whose common failures become one line in why: an answer larger
 * than max (-EFBIG), refused (-EACCES), no answer (-EIO). 0 otherwise, with rq->status for
 * the caller to judge; rq is the caller's to clear either way.
 */
char *remote_obj_url(const struct remote *r, const char *rel);
int remote_obj_fetch(struct remote *r, struct http_req *rq, const char *url, size_t max,
		     char *why, size_t why_len);
/*
 * PUT/POST body to url; 0 if the status is ok1 or ok2 (0: any 2xx), else -EIO; -EACCES,
 * -ENOMEM: each failure with one line in why (why_len bytes) that begins with what. Prints
 * nothing. location: the response's Location (malloc'ed), when not NULL.
 */
int remote_send(struct remote *r, const char *method, const char *url, const void *body,
		size_t len, const char *ctype, long ok1, long ok2, const char *what,
		char **location, char *why, size_t why_len);
/* HEAD url: 1 present, 0 absent, -errno with one line in why (as remote_send). */
int remote_head(struct remote *r, const char *url, const char *what, char *why, size_t why_len);
/* remote_oci.c: upload a blob of the repository unless present. 1/0/-errno with why. */
int remote_oci_blob_put(struct remote *r, const uint8_t digest[SHA256_LEN], const void *data,
			size_t len, const char *what, char *why, size_t why_len);
/* remote_oci.c: the tag (or sha256:<hex>) of an oci remote's URL. */
const char *remote_oci_tag(const struct remote *r);
/* The chunk -> blob refs remote_put uploaded or found, sorted (a copy). -ENOMEM. */
struct oci_refs;
int remote_oci_pushed(struct remote *r, struct oci_refs *out);

#endif
