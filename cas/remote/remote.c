/* SPDX-License-Identifier: MIT */
/*
 * Remote chunk tiers: the public API over one backend (remote_int.h): a static HTTP tree of
 * the store (remote_http.c) or an OCI registry repository (remote_oci.c). Here: picking the
 * backend, fetching a chunk, uploading, statistics; requests with retries and
 * authentication are remote_req.c's, which the backends use too.
 */
#include "remote_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/why.h"
#include "../chunk.h"

static const struct remote_ops *const backends[] = { &remote_http_ops, &remote_oci_ops };

int remote_open(const struct remote_opts *o, struct remote **out, char *why, size_t why_len)
{
	struct remote *r;
	const char *u, *p;
	int ret;

	if (why_len)
		why[0] = '\0';
	if (!o->url || !*o->url)
		return why_set(why, why_len, -EINVAL, "empty remote URL");
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	r->rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 17 ^
		 (uint64_t)(uintptr_t)r;
	if (!r->rng)
		r->rng = 1;
	r->push = o->push;
	r->retries = o->retries < 0 ? 0 : o->retries ? o->retries : REMOTE_RETRIES_DEFAULT;
	r->url = strdup(o->url);
	if (!r->url) {
		ret = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; !r->ops && i < sizeof(backends) / sizeof(backends[0]); i++)
		if (backends[i]->match(o->url))
			r->ops = backends[i];
	if (!r->ops) {
		ret = why_set(why, why_len, -EINVAL,
			      "unsupported remote (want http(s)://HOST/PATH/ or oci://HOST/REPO)");
		goto fail;
	}
	ret = r->ops->parse(r, o->url, why, why_len);
	if (ret)
		goto fail;
	u = getenv("LAZYBLK_REMOTE_USER");
	p = getenv("LAZYBLK_REMOTE_PASSWORD");
	if (u && *u) {
		r->user = strdup(u);
		r->password = strdup(p ? p : "");
		if (!r->user || !r->password) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	ret = http_open(o->concurrency ? o->concurrency : REMOTE_CONCURRENCY_DEFAULT,
			o->timeout_ms ? o->timeout_ms : REMOTE_TIMEOUT_MS_DEFAULT, &r->http);
	if (ret)
		goto fail;
	if (r->ops->start && !o->registry) {
		ret = r->ops->start(r, why, why_len);
		if (ret)
			goto fail;
	}
	*out = r;
	return 0;
fail:
	remote_close(r);
	return ret;
}

void remote_close(struct remote *r)
{
	if (!r)
		return;
	http_close(r->http);
	if (r->ops && r->ops->free)
		r->ops->free(r);
	free(r->token);
	free(r->user);
	free(r->password);
	free(r->base);
	free(r->url);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

const char *remote_url(const struct remote *r) { return r->url; }
bool remote_is_oci(const struct remote *r) { return r->ops == &remote_oci_ops; }

/* ------------------------------------------------------------------ chunks */

static void lat_record(struct remote *r, uint64_t usec)
{
	pthread_mutex_lock(&r->lock);
	r->lat[r->lat_n++ % REMOTE_LAT_RING] = usec > UINT32_MAX ? UINT32_MAX : (uint32_t)usec;
	pthread_mutex_unlock(&r->lock);
}

_Static_assert((int)REMOTE_PRIO_NOW == (int)HTTP_PRIO_NOW && (int)REMOTE_PRIO_BG == (int)HTTP_PRIO_BG,
	       "remote and http priorities");

void remote_kick(struct remote *r)
{
	http_kick(r->http);
}

int remote_get_prio(struct remote *r, const uint8_t d[SHA256_LEN], const int *prio,
		    uint8_t **frame, size_t *len)
{
	char hex[SHA256_HEX_LEN + 1], fb[32];
	struct remote_loc loc = { 0 };
	struct http_req rq = { 0 };
	char why[WHY_MAX] = "";
	struct timespec t0, t1;
	int ret;

	sha256_to_hex(d, hex);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = r->ops->locate(r, d, hex, &loc);
	if (ret == -ENOENT)
		REMOTE_STAT_ADD(r, not_found, 1);
	if (ret)
		return ret;
	rq.method = "GET";
	rq.url = loc.url;
	rq.follow = true;
	rq.prio = prio;
	rq.max_body = chunk_compress_bound(CHUNK_SIZE_MAX);
	ret = remote_do(r, &rq, r->retries, why, sizeof(why));
	if (ret == -ENOMEM)
		goto out;
	if (ret == -EACCES) {
		log_error("chunk %s: %s: %s", hex, r->url, why);
		REMOTE_STAT_ADD(r, failures, 1);
		ret = -EIO;
		goto out;
	}
	if (!ret && (rq.status == 404 || rq.status == 410)) {
		REMOTE_STAT_ADD(r, not_found, 1);
		log_error("chunk %s: not found at %s", hex, loc.url);
		ret = -ENOENT;
		goto out;
	}
	if (ret || rq.status != 200) {
		bool timeout = ret && http_req_timed_out(&rq);

		REMOTE_STAT_ADD(r, failures, 1);
		log_error("chunk %s: %s: %s%s", hex, loc.url, remote_failure(&rq, fb, sizeof(fb)),
			  r->retries && http_req_transient(&rq) ? " (retries exhausted)" : "");
		ret = timeout ? -ETIMEDOUT : -EIO;
		goto out;
	}
	if (r->ops->check) {
		ret = r->ops->check(r, &loc, rq.body_out, rq.body_out_len, hex);
		if (ret)
			goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	lat_record(r, (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000u +
			      (uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000));
	REMOTE_STAT_ADD(r, fetches, 1);
	REMOTE_STAT_ADD(r, fetched_bytes, rq.body_out_len);
	*frame = rq.body_out ? rq.body_out : malloc(1);
	*len = rq.body_out_len;
	rq.body_out = NULL;
	ret = *frame ? 0 : -ENOMEM;
out:
	http_req_clear(&rq);
	free(loc.url);
	return ret;
}

int remote_probe(struct remote *r, const uint8_t d[SHA256_LEN], char *why, size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1], fb[32];
	struct remote_loc loc = { 0 };
	struct http_req rq = { 0 };
	char w[WHY_MAX] = "";
	int ret;

	if (r->ops->probe) {
		ret = r->ops->probe(r, d, w, sizeof(w));
		if (ret)
			return why_set(why, why_len, ret, "remote %s: %s", r->url, w);
	}
	if (!d)
		return 0;
	sha256_to_hex(d, hex);
	ret = r->ops->locate(r, d, hex, &loc);
	if (ret)
		return why_set(why, why_len, ret, "remote %s: %s", r->url, strerror(-ret));
	rq.method = "HEAD";
	rq.url = loc.url;
	rq.follow = true;
	ret = remote_do(r, &rq, r->retries, w, sizeof(w));
	if (ret == -EACCES)
		why_set(why, why_len, ret, "remote %s: %s", r->url, w);
	else if (ret == -ENOMEM)
		why_set(why, why_len, ret, "out of memory");
	else if (ret)
		why_set(why, why_len, ret, "remote %s: %s", r->url, rq.err);
	else if (rq.status == 404 || rq.status == 410)
		ret = why_set(why, why_len, -ENOENT, "remote %s does not hold the image's chunks "
			      "(sha256:%s not found); wrong --remote?", r->url, hex);
	else if (rq.status != 200)
		ret = why_set(why, why_len, -EIO, "remote %s: HEAD %s: %s", r->url, loc.url,
			      remote_failure(&rq, fb, sizeof(fb)));
	http_req_clear(&rq);
	free(loc.url);
	return ret;
}

int remote_put(struct remote *r, const uint8_t d[SHA256_LEN], const void *frame, size_t len,
	       char *why, size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1], what[80];
	int ret;

	sha256_to_hex(d, hex);
	snprintf(what, sizeof(what), "chunk %s", hex);
	ret = r->ops->put(r, d, frame, len, what, why, why_len);
	if (ret == 1) {
		REMOTE_STAT_ADD(r, uploads, 1);
		REMOTE_STAT_ADD(r, uploaded_bytes, len);
	}
	return ret;
}

int remote_publish_check(struct remote *r, char *why, size_t why_len)
{
	if (why_len)
		why[0] = '\0';
	return r->ops->publish_check ? r->ops->publish_check(r, why, why_len) : 0;
}

int remote_publish(struct remote *r, char *why, size_t why_len)
{
	return r->ops->publish ? r->ops->publish(r, why, why_len) : 0;
}

/* ------------------------------------------------------------------ stats */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void remote_get_stats(struct remote *r, struct remote_stats *st)
{
	uint32_t *lat = NULL;
	size_t n;

	pthread_mutex_lock(&r->lock);
	*st = r->st;
	n = r->lat_n < REMOTE_LAT_RING ? r->lat_n : REMOTE_LAT_RING;
	if (n && (lat = malloc(n * sizeof(*lat))))
		memcpy(lat, r->lat, n * sizeof(*lat));
	pthread_mutex_unlock(&r->lock);
	st->requests = __atomic_load_n(&r->st.requests, __ATOMIC_RELAXED);
	st->lat_p50_us = st->lat_p90_us = st->lat_p99_us = st->lat_max_us = 0;
	if (lat) {
		qsort(lat, n, sizeof(*lat), cmp_u32);
		st->lat_p50_us = lat[(n - 1) * 50 / 100];
		st->lat_p90_us = lat[(n - 1) * 90 / 100];
		st->lat_p99_us = lat[(n - 1) * 99 / 100];
		st->lat_max_us = lat[n - 1];
		free(lat);
	}
}
