/* SPDX-License-Identifier: MIT */
/*
 * HTTP requests for the remote tiers: one thread drives a curl multi handle (connections
 * reused between requests, HTTP/2 multiplexing where the server offers it), at most
 * `concurrency` transfers at a time; callers block on their own request, from any thread.
 * No retries here: remote.c decides what is worth retrying.
 */
#ifndef LZ_CAS_HTTP_H
#define LZ_CAS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http;

enum { HTTP_PRIO_NOW = 0, HTTP_PRIO_BG = 1 };

struct http_req {
	/* in */
	const char *method;        /* "GET", "HEAD", "PUT", "POST", "DELETE" */
	const char *url;
	const void *body;          /* PUT/POST payload */
	size_t body_len;
	const char *content_type;  /* of the payload (NULL: application/octet-stream) */
	const char *accept;        /* Accept header, or NULL */
	const char *bearer;        /* "Authorization: Bearer <bearer>", or NULL */
	const char *user;          /* HTTP basic credentials, or NULL */
	const char *password;
	size_t max_body;           /* a longer response body fails the request */
	bool follow;               /* follow redirects (credentials stay with the first host) */
	/*
	 * NULL or *prio == HTTP_PRIO_NOW: started as soon as a connection is free. HTTP_PRIO_BG:
	 * only while no foreground request waits, and on at most half the connections. Read
	 * each time the queue is looked at, so a caller may raise a queued request (http_kick).
	 */
	const int *prio;
	/*
	 * NULL, or where the body of a 2xx response goes instead of body_out (a blob streamed
	 * to a file): called on the loop thread with each piece; non-zero aborts the transfer
	 * (curl_code CURLE_WRITE_ERROR). sink_restart (may be NULL) is called by http_do before
	 * each attempt, so that a retried request starts its output afresh. Bodies of other
	 * statuses still go to body_out (within max_body).
	 */
	int (*sink)(void *arg, const void *data, size_t len);
	void (*sink_restart)(void *arg);
	void *sink_arg;
	/* NULL, or the transfer is aborted (CURLE_ABORTED_BY_CALLBACK) once *cancel != 0 */
	const int *cancel;
	/* out */
	long status;               /* HTTP status, 0 if no response */
	int curl_code;             /* CURLcode, 0 on a complete response */
	char err[256];             /* the transport error, when curl_code != 0 */
	uint8_t *body_out;         /* response body (malloc'ed; NULL when empty) */
	size_t body_out_len;
	char *www_authenticate;    /* the last WWW-Authenticate header, or NULL */
	char *location;            /* the last Location header, or NULL */
	bool elsewhere;            /* the answer came from another origin than url's (redirected) */
	char *date;                /* the last Date header (the server's clock), or NULL */
	char *link;                /* every Link header, joined by ", " (RFC 8288), or NULL */
	uint64_t usec;             /* time taken */
};

/*
 * Starts the loop thread, which first loads libcurl (common/dl_curl.h) while the caller goes
 * on; if that fails (one line printed), every request fails with -EIO ("libcurl cannot be
 * loaded", CURLE_FAILED_INIT).
 */
int http_open(unsigned concurrency, unsigned timeout_ms, struct http **out);
/* Callers must have no request in flight. */
void http_close(struct http *h);
/*
 * Run rq to completion (or until the per-request timeout). 0 when a whole response arrived
 * (any status: check rq->status), -EIO on a transport failure (timeout, reset, refused,
 * truncated body, body over max_body: rq->curl_code and rq->err say which), -ENOMEM.
 * Release the outputs with http_req_clear() before reusing rq.
 */
int http_do(struct http *h, struct http_req *rq);
void http_req_clear(struct http_req *rq);
/* Look at the queue again (a queued request's *prio was raised). */
void http_kick(struct http *h);
/* A failure worth retrying: transport errors (timeouts, resets, refused), 408, 429, 5xx. */
bool http_req_transient(const struct http_req *rq);
/* The curl transfer failed with a timeout. */
bool http_req_timed_out(const struct http_req *rq);

/*
 * An HTTP date in the preferred form of RFC 9110 (IMF-fixdate: "Sun, 06 Nov 1994 08:49:37
 * GMT", what nginx sends in Date, Last-Modified and its JSON directory listings) as seconds
 * since the epoch; -1 when s is NULL or not of that form.
 */
int64_t http_date_parse(const char *s);

/*
 * URLs, parsed by libcurl's URL API (http_url.c; loads libcurl if need be). ref resolved
 * against base (ref absolute, or a path relative to base), with query appended to its query
 * when not NULL, into *out (malloc'ed). -EINVAL with why when the result is not an http(s)
 * URL or carries credentials (user[:password]@host), -ENOMEM, -ELIBACC.
 */
int http_url_resolve(const char *base, const char *ref, const char *query, char **out,
		     char *why, size_t why_len);
/*
 * The target of the link whose rel is "next" in a Link header's value (RFC 8288: <URI>; rel="next",
 * links separated by commas; a registry's next page of a list), into *ref (malloc'ed, as
 * written: resolve it with http_url_resolve). 0; -ENOENT no such link (or link NULL);
 * -EBADMSG the value does not parse; -ENOMEM.
 */
int http_link_next(const char *link, char **ref);
/*
 * Whether absolute URLs a and b have the same origin: scheme, host (without regard to case)
 * and port (the scheme's default when none is given). False when either cannot be parsed.
 */
bool http_same_origin(const char *a, const char *b);

#endif
