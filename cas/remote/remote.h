/* SPDX-License-Identifier: MIT */
/*
 * Remote chunk tiers over libcurl.
 *
 *   http(s)://HOST[:PORT]/PATH/   the store layout as static files: GET PATH/chunks/xx/<hex>
 *                                 (push: PUT to the same name, for servers that accept it)
 *   oci://HOST[:PORT]/REPO[:TAG]  chunks as blobs of an OCI registry repository, found through
 *                                 the index published under TAG (default lazyblk-chunks; see
 *                                 oci_index.h). https, except for loopback hosts (localhost,
 *                                 127.0.0.0/8, [::1]) which use plain http, as docker does;
 *                                 oci+http:// and oci+https:// choose explicitly.
 *
 * Credentials come from LAZYBLK_REMOTE_USER / LAZYBLK_REMOTE_PASSWORD (HTTP basic for http
 * remotes and for a registry's token endpoint). Registry token auth follows the distribution
 * spec (a 401 with a Bearer challenge, a token from its realm, retried). Redirects are
 * followed; credentials are never sent to another host.
 *
 * Requests run in one thread driving a curl multi handle (connections reused, HTTP/2 where
 * offered), at most `concurrency` at a time; callers block on their own request. A request
 * that times out, is reset, or gets a 5xx (or 429) is retried after an exponential backoff
 * with jitter, at most `retries` times.
 */
#ifndef LZ_CAS_REMOTE_H
#define LZ_CAS_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/sha256.h"
#include "../../common/test_hook.h"
#include "../../common/why.h"

#define REMOTE_CONCURRENCY_DEFAULT 16
#define REMOTE_TIMEOUT_MS_DEFAULT 30000
#define REMOTE_RETRIES_DEFAULT 4
#define REMOTE_OCI_TAG_DEFAULT "lazyblk-chunks"

struct remote;

/* Fetch priorities: demand reads, and prefetch (background). */
enum { REMOTE_PRIO_NOW = 0, REMOTE_PRIO_BG = 1 };

struct remote_opts {
	const char *url;
	unsigned concurrency;  /* 0: default */
	unsigned timeout_ms;   /* per request attempt; 0: default */
	int retries;           /* 0: default, < 0: none */
	bool push;             /* will upload (oci: ask for a push token) */
	bool registry;         /* oci: a plain registry client (registry.h): no chunk index */
};

struct remote_stats {
	uint64_t requests;      /* HTTP requests sent, retries and auth included */
	uint64_t fetches;       /* chunks fetched (successful GETs of a chunk) */
	uint64_t fetched_bytes; /* their bytes as transferred (compressed frames) */
	uint64_t retries;
	uint64_t failures;      /* chunk fetches that failed after all retries */
	uint64_t not_found;
	uint64_t uploads, uploaded_bytes;
	/* latency of successful chunk fetches, retries included, in microseconds */
	uint64_t lat_p50_us, lat_p90_us, lat_p99_us, lat_max_us;
};

/*
 * Parse the URL and start the request thread. For oci, also authenticates and loads the
 * chunk index (a missing tag is an empty index). On failure prints nothing: the reason in
 * why, or why empty (then strerror of the result).
 */
int remote_open(const struct remote_opts *o, struct remote **out, char *why, size_t why_len);
void remote_close(struct remote *r);
/* The URL as given, for messages. */
const char *remote_url(const struct remote *r);
bool remote_is_oci(const struct remote *r);

/*
 * Fetch chunk d's stored frame into a malloc'ed buffer. Blocking, thread-safe. -ENOENT: the
 * remote does not have it (404, or not in the OCI index); -EIO (or -ETIMEDOUT) after the
 * retries, with one log_error line naming the chunk and the last failure; -ENOMEM.
 * For oci the frame's sha256 is checked against the blob digest before it is returned.
 * At a priority: NULL or *prio REMOTE_PRIO_NOW, or REMOTE_PRIO_BG for prefetch (after every
 * waiting demand fetch, on at most half the connections). *prio may be raised while the
 * fetch waits; then call remote_kick().
 */
int remote_get_prio(struct remote *r, const uint8_t d[SHA256_LEN], const int *prio,
		    uint8_t **frame, size_t *len);
void remote_kick(struct remote *r);

/*
 * Whether the remote answers for chunk d, cheaply (a server's start): oci: the tag exists
 * and its index lists d; then a HEAD of d (with the retries) answers 200. d NULL: only the
 * first step. 0, or -errno with one line in why (why_len bytes) naming the remote: -ENOENT
 * it lacks d or the tag, -EIO no answer (the transport error) or another status, -EACCES.
 * Prints nothing.
 */
int remote_probe(struct remote *r, const uint8_t d[SHA256_LEN], char *why, size_t why_len);

/*
 * Upload chunk d's frame unless the remote has it already. Blocking, thread-safe.
 * 1 uploaded, 0 already there, -errno with one line in why (why_len bytes) naming the
 * chunk. Prints nothing. For oci the chunk is recorded for remote_publish().
 */
int remote_put(struct remote *r, const uint8_t d[SHA256_LEN], const void *frame, size_t len,
	       char *why, size_t why_len);
/*
 * Whether remote_publish() may write: oci: the tag holds nothing or a lazyblk chunk index
 * (never an image, nor anything else, which a chunk index would replace); http: yes. Call
 * it before uploading. 0, or -EEXIST with one line in why (why_len bytes) saying what to do.
 */
int remote_publish_check(struct remote *r, char *why, size_t why_len);
/*
 * oci: publish the index (the tag's entries, read again now, plus every remote_put); -EEXIST
 * when the tag has meanwhile become an image or anything else; each failure with one line
 * in why (why_len bytes; prints nothing). http: no-op.
 */
int remote_publish(struct remote *r, char *why, size_t why_len);

void remote_get_stats(struct remote *r, struct remote_stats *st);

/*
 * Objects other than chunks (remote_obj.c; image documents and layout files, image_ref.h).
 * rel is relative to the remote's base: for http(s) the store's PATH/ ("layouts/<hex>.layout"),
 * for oci the registry ("v2/REPO/manifests/TAG").
 */
/*
 * GET rel into a malloc'ed *buf: 0; -ENOENT on a 404; -EFBIG over max bytes; -EIO (or
 * -EACCES) with one line in why (why_len bytes) naming the URL. Prints nothing.
 */
int remote_obj_get(struct remote *r, const char *rel, const char *accept, size_t max,
		   uint8_t **buf, size_t *len, char *why, size_t why_len);
/*
 * As remote_obj_get, but a 2xx answer's body goes to sink as it arrives (http_req's sink:
 * restart is called before each attempt; sink bounds the size itself: non-zero stops).
 */
struct remote_sink {
	int (*sink)(void *arg, const void *data, size_t len);
	void (*restart)(void *arg);
	void *arg;
};
int remote_obj_stream(struct remote *r, const char *rel, const struct remote_sink *sink,
		      char *why, size_t why_len);
/*
 * oci: each tag of the registry's repository repo (GET v2/REPO/tags/list, then each next
 * page its Link header names, at most REMOTE_TAG_PAGES_MAX pages) to fn, in the registry's
 * order. What was not seen is said in *seen (zeroed first): an entry that is not a string
 * or fails the tag rule (oci_tag_valid) is skipped and counted; more pages than the bound
 * set truncated; a 404 for the list (a repository the registry does not know, or one that
 * lists no tags) is no tag, with no_list set. -EBADMSG with one line in why when a page is
 * not a JSON object or its Link header does not parse, or the next page is on another
 * origin (never asked: the credentials stay with the registry); fn's non-zero return stops
 * and is returned.
 */
#define REMOTE_TAG_PAGES_MAX 1000
struct remote_tags {
	uint64_t skipped;      /* entries that fail the tag rule */
	bool truncated;        /* pages past REMOTE_TAG_PAGES_MAX (or a page naming itself) */
	bool no_list;          /* tags/list answered 404 */
	unsigned pages;        /* pages read */
};
int remote_obj_tags(struct remote *r, const char *repo,
		    int (*fn)(void *arg, const char *tag), void *arg, struct remote_tags *seen,
		    char *why, size_t why_len);
/*
 * http(s): the directory rel (relative to the store's PATH/, ending in '/'; "" the store
 * itself) through the server's JSON index (nginx: autoindex on; autoindex_format json;):
 * fn for each file and directory in it (non-zero stops and is returned; fn may be NULL).
 * *now (may be NULL; set before fn is first called): the server's clock when it answered
 * (its Date header; the local clock when it sent none), to compare mtimes with. 0; -ENOENT
 * no such directory; -EOPNOTSUPP the server does not list it as JSON; -EACCES, -EIO,
 * -EFBIG: each with one line in why. Prints nothing.
 */
struct remote_dirent {
	const char *name;
	bool dir;
	int64_t mtime;   /* seconds since the epoch, by the server's clock; -1 not known */
	int64_t size;    /* bytes (files); -1 not known */
};
int remote_list(struct remote *r, const char *rel,
		int (*fn)(void *arg, const struct remote_dirent *e), void *arg, int64_t *now,
		char *why, size_t why_len);
/*
 * The writes: each failure comes with one line in why (why_len bytes) that begins with what.
 * They print nothing.
 * PUT body to rel (any 2xx). 0, or -errno.
 */
int remote_obj_put(struct remote *r, const char *rel, const void *body, size_t len,
		   const char *ctype, const char *what, char *why, size_t why_len);
/* DELETE rel: 0 (2xx or 404), or -errno. */
int remote_obj_delete(struct remote *r, const char *rel, const char *what, char *why,
		      size_t why_len);
/* oci: upload a blob of the repository unless it is there. 1 uploaded, 0 there, -errno. */
int remote_blob_put(struct remote *r, const uint8_t digest[SHA256_LEN], const void *data,
		    size_t len, const char *what, char *why, size_t why_len);

#endif
