/* SPDX-License-Identifier: MIT */
/*
 * A request to the remote (remote_int.h): retried with jittered exponential backoff on
 * what can pass, authenticated by the backend, its failure said in one line in the caller's
 * buffer (common/why.h). Used by remote.c and by the backends; calls neither.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/why.h"
#include "remote_int.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 5000

static unsigned rand_below(struct remote *r, unsigned n)
{
	uint64_t x;

	pthread_mutex_lock(&r->lock);
	x = r->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	r->rng = x;
	pthread_mutex_unlock(&r->lock);
	return n ? (unsigned)(x % n) : 0;
}

/* Exponential backoff with jitter: a random time in [d/2, d], d = base * 2^attempt. */
static void backoff(struct remote *r, int attempt)
{
	unsigned d = BACKOFF_BASE_MS;
	struct timespec ts;

	for (int i = 0; i < attempt && d < BACKOFF_CAP_MS; i++)
		d *= 2;
	if (d > BACKOFF_CAP_MS)
		d = BACKOFF_CAP_MS;
	d = d / 2 + rand_below(r, d / 2 + 1);
	ts.tv_sec = d / 1000;
	ts.tv_nsec = (long)(d % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int remote_do(struct remote *r, struct http_req *rq, int retries, char *why, size_t why_len)
{
	bool auth_tried = false;
	char bearer[8192];

	for (int attempt = 0;; attempt++) {
		int ret;

		rq->bearer = NULL;
		rq->user = rq->password = NULL;
		pthread_mutex_lock(&r->lock);
		if (r->token && strlen(r->token) < sizeof(bearer)) {
			strcpy(bearer, r->token);
			rq->bearer = bearer;
		}
		if (r->basic) {
			rq->user = r->user;
			rq->password = r->password;
		}
		pthread_mutex_unlock(&r->lock);

		REMOTE_STAT_ADD(r, requests, 1);
		ret = http_do(r->http, rq);
		if (ret == -ENOMEM)
			return ret;
		if (!ret && rq->status == 401 && r->ops->auth && rq->elsewhere) {
			/* a host the registry sent us to: its challenge would take the credentials
			 * (or a token of its choosing) where the registry never named */
			return why_set(why, why_len, -EACCES, "a host the registry redirected to "
				       "asks for credentials: refused (credentials go to the registry "
				       "and the token realm it names only)");
		}
		if (!ret && rq->status == 401 && r->ops->auth && !auth_tried) {
			auth_tried = true;
			ret = r->ops->auth(r, rq->www_authenticate, why, why_len);
			http_req_clear(rq);
			if (ret)
				return ret;
			attempt--; /* not a retry */
			continue;
		}
		if (!http_req_transient(rq) || attempt >= retries)
			return ret;
		REMOTE_STAT_ADD(r, retries, 1);
		http_req_clear(rq);
		backoff(r, attempt);
	}
}

const char *remote_failure(const struct http_req *rq, char *buf, size_t len)
{
	if (rq->curl_code)
		return rq->err;
	snprintf(buf, len, "HTTP %ld", rq->status);
	return buf;
}

int remote_send(struct remote *r, const char *method, const char *url, const void *body,
		size_t len, const char *ctype, long ok1, long ok2, const char *what,
		char **location, char *why, size_t why_len)
{
	struct http_req rq = { 0 };
	char aw[WHY_MAX] = "";
	char fb[32];
	int ret;

	rq.method = method;
	rq.url = url;
	rq.body = body;
	rq.body_len = len;
	rq.content_type = ctype;
	rq.max_body = 1u << 20;
	ret = remote_do(r, &rq, r->retries, aw, sizeof(aw));
	if (ret == -EACCES) {
		why_set(why, why_len, ret, "%s: %s", what, aw);
	} else if (ret == -ENOMEM) {
		why_set(why, why_len, ret, "%s: out of memory", what);
	} else if (ret || rq.status < 200 || rq.status > 299 ||
		   (ok1 && rq.status != ok1 && rq.status != ok2)) {
		ret = why_set(why, why_len, -EIO, "%s: %s %s: %s", what, method, url,
			      remote_failure(&rq, fb, sizeof(fb)));
	} else if (location) {
		*location = rq.location;
		rq.location = NULL;
	}
	http_req_clear(&rq);
	return ret;
}

int remote_head(struct remote *r, const char *url, const char *what, char *why, size_t why_len)
{
	struct http_req rq = { 0 };
	char aw[WHY_MAX] = "";
	char fb[32];
	int ret;

	rq.method = "HEAD";
	rq.url = url;
	rq.follow = true;
	ret = remote_do(r, &rq, r->retries, aw, sizeof(aw));
	if (ret == -EACCES)
		why_set(why, why_len, ret, "%s: %s", what, aw);
	else if (ret)
		why_set(why, why_len, ret, "%s: HEAD %s: %s", what, url,
			remote_failure(&rq, fb, sizeof(fb)));
	else if (rq.status == 200)
		ret = 1;
	else if (rq.status == 404)
		ret = 0;
	else
		ret = why_set(why, why_len, -EIO, "%s: HEAD %s: %s", what, url,
			      remote_failure(&rq, fb, sizeof(fb)));
	http_req_clear(&rq);
	return ret;
}

/* ------------------------------------------------------------------ open / close */
