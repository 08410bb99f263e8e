/* SPDX-License-Identifier: MIT */
/* Remote chunk tiers: a static HTTP tree of the store, or an OCI registry repository. */
#include "remote.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../../common/dl_curl.h"
#include "../../common/log.h"
#include "../chunk.h"
#include "http.h"
#include "oci_index.h"

#define LAT_RING 8192
#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 5000
#define DOC_MAX (64u << 20)
#define INDEX_RELOAD_SECS 5

struct remote {
	char *url;              /* as given */
	char *base;             /* http: ".../PATH/" (with the slash); oci: "scheme://host[:port]" */
	char *repo, *tag;       /* oci */
	bool oci, push;
	struct http *http;
	int retries;
	char *user, *password;  /* LAZYBLK_REMOTE_USER / _PASSWORD, or NULL */

	pthread_mutex_t lock;   /* everything below */
	char *token;            /* registry bearer token */
	bool basic;             /* the registry asked for HTTP basic */
	struct oci_refs index;  /* sorted: chunk -> blob, as published under the tag */
	struct oci_refs pushed; /* what remote_put uploaded or found */
	time_t index_loaded;
	uint64_t rng;
	uint32_t lat[LAT_RING]; /* fetch latencies, microseconds (ring) */
	uint64_t lat_n;
	struct remote_stats st;
};

#define STAT_ADD(r, f, v) __atomic_add_fetch(&(r)->st.f, (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------ URLs */

static bool host_is_loopback(const char *h, size_t n)
{
	if ((n == 9 && !strncmp(h, "localhost", 9)) || (n == 5 && !strncmp(h, "[::1]", 5)))
		return true;
	return n >= 4 && !strncmp(h, "127.", 4);
}

/* Lowercase path components of [a-z0-9]+([._-][a-z0-9]+)* (the distribution spec). */
static bool repo_valid(const char *s)
{
	bool start = true;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (islower((unsigned char)*s) || isdigit((unsigned char)*s)) {
			start = false;
			continue;
		}
		if (start || !s[1])
			return false;
		if (*s != '/' && *s != '.' && *s != '_' && *s != '-')
			return false;
		start = true;
	}
	return true;
}

static bool tag_valid(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 128 || !(isalnum((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

static int parse_http(struct remote *r, const char *url, const char **why)
{
	const char *host = strstr(url, "://") + 3;
	size_t n = strlen(url);

	if (!*host || *host == '/') {
		*why = "no host in the remote URL";
		return -EINVAL;
	}
	if (strpbrk(url, "?# \t\r\n")) {
		*why = "the remote URL must not have a query, a fragment or spaces";
		return -EINVAL;
	}
	r->base = malloc(n + 2);
	if (!r->base)
		return -ENOMEM;
	memcpy(r->base, url, n + 1);
	if (!strchr(host, '/') || url[n - 1] != '/')
		strcat(r->base, "/");
	return 0;
}

static int parse_oci(struct remote *r, const char *url, const char **why)
{
	const char *rest, *slash, *scheme;
	char *path, *colon;
	size_t hl;

	if (!strncmp(url, "oci+http://", 11)) {
		rest = url + 11;
		scheme = "http";
	} else if (!strncmp(url, "oci+https://", 12)) {
		rest = url + 12;
		scheme = "https";
	} else {
		rest = url + 6;
		scheme = NULL;
	}
	slash = strchr(rest, '/');
	if (!slash || slash == rest || !slash[1]) {
		*why = "an OCI remote is oci://HOST[:PORT]/REPO[:TAG]";
		return -EINVAL;
	}
	hl = (size_t)(slash - rest);
	if (strpbrk(url, "?#@ \t\r\n")) {
		*why = "the remote URL must not have a query, a fragment, credentials or spaces";
		return -EINVAL;
	}
	if (!scheme)
		scheme = host_is_loopback(rest, hl) ? "http" : "https";
	if (asprintf(&r->base, "%s://%.*s", scheme, (int)hl, rest) < 0) {
		r->base = NULL;
		return -ENOMEM;
	}
	path = strdup(slash + 1);
	if (!path)
		return -ENOMEM;
	colon = strrchr(path, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		r->tag = strdup(colon + 1);
	} else {
		r->tag = strdup(REMOTE_OCI_TAG_DEFAULT);
	}
	r->repo = path;
	if (!r->tag)
		return -ENOMEM;
	if (!repo_valid(r->repo)) {
		*why = "bad repository name in the OCI remote (lowercase letters, digits, "
		       "separators . _ - /)";
		return -EINVAL;
	}
	if (!tag_valid(r->tag)) {
		*why = "bad tag in the OCI remote";
		return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------------ requests */

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

static char *url_escape(const char *s)
{
	char *e = sym_curl_easy_escape(NULL, s, 0), *c;

	if (!e)
		return NULL;
	c = strdup(e);
	sym_curl_free(e);
	return c;
}

/* Get a registry token for the challenge (Bearer), or switch to basic auth (Basic). */
static int oci_auth(struct remote *r, const char *challenge, const char **why)
{
	char *realm = NULL, *service = NULL, *scope = NULL, *url = NULL, *es = NULL, *esc = NULL;
	char want[1024];
	struct http_req rq = { 0 };
	struct json_object *root = NULL, *tok;
	int ret;

	if (challenge && !strncasecmp(challenge, "Basic", 5)) {
		if (!r->user) {
			*why = "the registry wants credentials (set LAZYBLK_REMOTE_USER and "
			       "LAZYBLK_REMOTE_PASSWORD)";
			return -EACCES;
		}
		pthread_mutex_lock(&r->lock);
		r->basic = true;
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	if (!challenge || oci_parse_bearer(challenge, &realm, &service, &scope)) {
		*why = "the registry refused access without a usable authentication challenge";
		return -EACCES;
	}
	snprintf(want, sizeof(want), "repository:%s:%s", r->repo, r->push ? "pull,push" : "pull");
	es = service ? url_escape(service) : strdup("");
	esc = url_escape(want);
	if (!es || !esc || asprintf(&url, "%s%sservice=%s&scope=%s", realm,
				    strchr(realm, '?') ? "&" : "?", es, esc) < 0) {
		url = NULL;
		ret = -ENOMEM;
		goto out;
	}
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		*why = "the registry's token realm is not an http(s) URL";
		ret = -EACCES;
		goto out;
	}
	rq.method = "GET";
	rq.url = url;
	rq.user = r->user;
	rq.password = r->password;
	rq.follow = true;
	rq.max_body = 1u << 20;
	rq.accept = "application/json";
	STAT_ADD(r, requests, 1);
	ret = http_do(r->http, &rq);
	if (ret) {
		*why = "the registry's token endpoint did not answer";
		goto out;
	}
	if (rq.status == 401 || rq.status == 403) {
		*why = r->user ? "the registry's token endpoint refused the credentials"
			       : "the registry wants credentials (set LAZYBLK_REMOTE_USER and "
				 "LAZYBLK_REMOTE_PASSWORD)";
		ret = -EACCES;
		goto out;
	}
	if (rq.status != 200 || !rq.body_out_len) {
		*why = "the registry's token endpoint failed";
		ret = -EACCES;
		goto out;
	}
	{
		struct json_tokener *tk = json_tokener_new();

		if (!tk) {
			ret = -ENOMEM;
			goto out;
		}
		root = json_tokener_parse_ex(tk, (const char *)rq.body_out, (int)rq.body_out_len);
		json_tokener_free(tk);
	}
	ret = -EACCES;
	*why = "the registry's token endpoint sent no token";
	if (root && (json_object_object_get_ex(root, "token", &tok) ||
		     json_object_object_get_ex(root, "access_token", &tok)) &&
	    json_object_is_type(tok, json_type_string) && json_object_get_string_len(tok) > 0 &&
	    json_object_get_string_len(tok) < 8192) {
		const char *t = json_object_get_string(tok);
		bool clean = true;

		for (const char *p = t; *p; p++)
			if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
				clean = false;
		if (clean) {
			char *copy = strdup(t);

			if (!copy) {
				ret = -ENOMEM;
				goto out;
			}
			pthread_mutex_lock(&r->lock);
			free(r->token);
			r->token = copy;
			pthread_mutex_unlock(&r->lock);
			ret = 0;
		}
	}
out:
	json_object_put(root);
	http_req_clear(&rq);
	free(realm);
	free(service);
	free(scope);
	free(es);
	free(esc);
	free(url);
	return ret;
}

/*
 * Run rq with authentication and retries. Returns 0 with a response whose status the caller
 * judges (possibly a 5xx after the last retry), -EIO after the last transport failure,
 * -EACCES (with *why) when authentication failed, -ENOMEM. On return rq holds the last
 * attempt's outputs (clear them with http_req_clear).
 */
static int remote_do(struct remote *r, struct http_req *rq, int retries, const char **why)
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
		if (!r->oci || r->basic) {
			rq->user = r->user;
			rq->password = r->password;
		}
		pthread_mutex_unlock(&r->lock);

		STAT_ADD(r, requests, 1);
		ret = http_do(r->http, rq);
		if (ret == -ENOMEM)
			return ret;
		if (!ret && rq->status == 401 && r->oci && !auth_tried) {
			auth_tried = true;
			ret = oci_auth(r, rq->www_authenticate, why);
			http_req_clear(rq);
			if (ret)
				return ret;
			attempt--; /* not a retry */
			continue;
		}
		if (!http_req_transient(rq) || attempt >= retries)
			return ret;
		STAT_ADD(r, retries, 1);
		http_req_clear(rq);
		backoff(r, attempt);
	}
}

/* "HTTP 503" or the transport error, for messages. */
static const char *req_failure(const struct http_req *rq, char *buf, size_t len)
{
	if (rq->curl_code)
		return rq->err;
	snprintf(buf, len, "HTTP %ld", rq->status);
	return buf;
}

/* ------------------------------------------------------------------ OCI index */

static int fetch_doc(struct remote *r, const char *ref, struct http_req *rq, const char **why)
{
	char *url;
	int ret;

	if (asprintf(&url, "%s/v2/%s/manifests/%s", r->base, r->repo, ref) < 0)
		return -ENOMEM;
	memset(rq, 0, sizeof(*rq));
	rq->method = "GET";
	rq->url = url;
	rq->accept = OCI_MT_INDEX ", " OCI_MT_MANIFEST;
	rq->max_body = DOC_MAX;
	rq->follow = true;
	ret = remote_do(r, rq, r->retries, why);
	rq->url = NULL;
	free(url);
	return ret;
}

/* Load the chunk index under the tag into r->index (empty if the tag does not exist). */
static int index_load(struct remote *r, const char **why)
{
	struct oci_refs refs = { 0 };
	uint8_t (*mans)[SHA256_LEN] = NULL;
	size_t n_mans = 0;
	struct http_req rq;
	int ret;

	ret = fetch_doc(r, r->tag, &rq, why);
	if (ret == -EIO) {
		*why = "the registry did not answer";
		goto out;
	}
	if (ret)
		goto out;
	if (rq.status == 404) {
		ret = 0; /* nothing published yet */
		goto out;
	}
	if (rq.status != 200) {
		*why = rq.status == 401 || rq.status == 403 ? "the registry refused access"
							    : "the registry failed to send the chunk index";
		ret = -EIO;
		goto out;
	}
	ret = oci_index_parse((const char *)rq.body_out, rq.body_out_len, &refs, &mans, &n_mans,
			      why);
	for (size_t i = 0; !ret && i < n_mans; i++) {
		char hex[SHA256_HEX_LEN + 1], ref[8 + SHA256_HEX_LEN];
		uint8_t sum[SHA256_LEN];
		uint8_t (*more)[SHA256_LEN] = NULL;
		size_t n_more = 0;

		sha256_to_hex(mans[i], hex);
		snprintf(ref, sizeof(ref), "sha256:%s", hex);
		http_req_clear(&rq);
		ret = fetch_doc(r, ref, &rq, why);
		if (ret)
			break;
		if (rq.status != 200) {
			*why = "the registry failed to send a manifest of the chunk index";
			ret = -EIO;
			break;
		}
		if (sha256_buf(rq.body_out, rq.body_out_len, sum) || memcmp(sum, mans[i], SHA256_LEN)) {
			*why = "a manifest of the chunk index does not match its digest";
			ret = -EIO;
			break;
		}
		ret = oci_index_parse((const char *)rq.body_out, rq.body_out_len, &refs, &more,
				      &n_more, why);
		free(more);
		if (!ret && n_more) {
			*why = "the chunk index nests image indexes";
			ret = -EBADMSG;
		}
	}
	if (!ret) {
		oci_refs_sort(&refs);
		pthread_mutex_lock(&r->lock);
		oci_refs_free(&r->index);
		r->index = refs;
		memset(&refs, 0, sizeof(refs));
		pthread_mutex_unlock(&r->lock);
	}
out:
	if (!ret) {
		pthread_mutex_lock(&r->lock);
		r->index_loaded = time(NULL);
		pthread_mutex_unlock(&r->lock);
	}
	http_req_clear(&rq);
	oci_refs_free(&refs);
	free(mans);
	return ret;
}

/* ------------------------------------------------------------------ open / close */

int remote_open(const struct remote_opts *o, struct remote **out, const char **why)
{
	struct remote *r;
	const char *u, *p;
	int ret;

	*why = NULL;
	if (!o->url || !*o->url) {
		*why = "empty remote URL";
		return -EINVAL;
	}
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
	if (!strncmp(o->url, "http://", 7) || !strncmp(o->url, "https://", 8)) {
		ret = parse_http(r, o->url, why);
	} else if (!strncmp(o->url, "oci://", 6) || !strncmp(o->url, "oci+http://", 11) ||
		   !strncmp(o->url, "oci+https://", 12)) {
		r->oci = true;
		ret = parse_oci(r, o->url, why);
	} else {
		*why = "unsupported remote (want http(s)://HOST/PATH/ or oci://HOST/REPO)";
		ret = -EINVAL;
	}
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
	if (r->oci) {
		ret = index_load(r, why);
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
	oci_refs_free(&r->index);
	oci_refs_free(&r->pushed);
	free(r->token);
	free(r->user);
	free(r->password);
	free(r->repo);
	free(r->tag);
	free(r->base);
	free(r->url);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

const char *remote_url(const struct remote *r) { return r->url; }
bool remote_is_oci(const struct remote *r) { return r->oci; }

/* ------------------------------------------------------------------ chunks */

static void lat_record(struct remote *r, uint64_t usec)
{
	pthread_mutex_lock(&r->lock);
	r->lat[r->lat_n++ % LAT_RING] = usec > UINT32_MAX ? UINT32_MAX : (uint32_t)usec;
	pthread_mutex_unlock(&r->lock);
}

/* The blob of chunk d in the OCI index; reloads the index (at most every few seconds) once. */
static int oci_lookup(struct remote *r, const uint8_t d[SHA256_LEN], struct oci_chunk_ref *ref)
{
	for (int pass = 0; pass < 2; pass++) {
		const struct oci_chunk_ref *f;
		const char *why = NULL;
		bool reload;

		pthread_mutex_lock(&r->lock);
		f = oci_refs_find(&r->index, d);
		if (f)
			*ref = *f;
		reload = !f && pass == 0 && time(NULL) - r->index_loaded >= INDEX_RELOAD_SECS;
		pthread_mutex_unlock(&r->lock);
		if (f)
			return 0;
		if (!reload || index_load(r, &why))
			break;
	}
	return -ENOENT;
}

int remote_get(struct remote *r, const uint8_t d[SHA256_LEN], uint8_t **frame, size_t *len)
{
	return remote_get_prio(r, d, NULL, frame, len);
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
	char hex[SHA256_HEX_LEN + 1], fb[32], *url = NULL;
	struct oci_chunk_ref ref;
	struct http_req rq = { 0 };
	const char *why = NULL;
	struct timespec t0, t1;
	int ret;

	sha256_to_hex(d, hex);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (r->oci) {
		char bhex[SHA256_HEX_LEN + 1];

		if (oci_lookup(r, d, &ref)) {
			STAT_ADD(r, not_found, 1);
			log_error("chunk %s is not in the chunk index of %s", hex, r->url);
			return -ENOENT;
		}
		sha256_to_hex(ref.blob, bhex);
		ret = asprintf(&url, "%s/v2/%s/blobs/sha256:%s", r->base, r->repo, bhex);
	} else {
		ret = asprintf(&url, "%schunks/%.2s/%s", r->base, hex, hex);
	}
	if (ret < 0)
		return -ENOMEM;
	rq.method = "GET";
	rq.url = url;
	rq.follow = true;
	rq.prio = prio;
	rq.max_body = chunk_compress_bound(CHUNK_SIZE_MAX);
	ret = remote_do(r, &rq, r->retries, &why);
	if (ret == -ENOMEM)
		goto out;
	if (ret == -EACCES) {
		log_error("chunk %s: %s: %s", hex, r->url, why);
		STAT_ADD(r, failures, 1);
		ret = -EIO;
		goto out;
	}
	if (!ret && (rq.status == 404 || rq.status == 410)) {
		STAT_ADD(r, not_found, 1);
		log_error("chunk %s: not found at %s", hex, url);
		ret = -ENOENT;
		goto out;
	}
	if (ret || rq.status != 200) {
		bool timeout = ret && http_req_timed_out(&rq);

		STAT_ADD(r, failures, 1);
		log_error("chunk %s: %s: %s%s", hex, url, req_failure(&rq, fb, sizeof(fb)),
			  r->retries && http_req_transient(&rq) ? " (retries exhausted)" : "");
		ret = timeout ? -ETIMEDOUT : -EIO;
		goto out;
	}
	if (r->oci) {
		uint8_t sum[SHA256_LEN];

		if (rq.body_out_len != ref.size || sha256_buf(rq.body_out, rq.body_out_len, sum) ||
		    memcmp(sum, ref.blob, SHA256_LEN)) {
			log_warn("chunk %s: the registry sent a blob that does not match its digest",
				 hex);
			ret = -EBADMSG;
			goto out;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	lat_record(r, (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000u +
			      (uint64_t)((t1.tv_nsec - t0.tv_nsec) / 1000));
	STAT_ADD(r, fetches, 1);
	STAT_ADD(r, fetched_bytes, rq.body_out_len);
	*frame = rq.body_out ? rq.body_out : malloc(1);
	*len = rq.body_out_len;
	rq.body_out = NULL;
	ret = *frame ? 0 : -ENOMEM;
out:
	http_req_clear(&rq);
	free(url);
	return ret;
}

/* PUT/POST body to url; 0 if the status is ok1 or ok2 (0: any 2xx), else -EIO, logged. */
static int put_simple(struct remote *r, const char *method, const char *url, const void *body,
		      size_t len, const char *ctype, long ok1, long ok2, const char *what,
		      char **location)
{
	struct http_req rq = { 0 };
	const char *why = NULL;
	char fb[32];
	int ret;

	rq.method = method;
	rq.url = url;
	rq.body = body;
	rq.body_len = len;
	rq.content_type = ctype;
	rq.max_body = 1u << 20;
	ret = remote_do(r, &rq, r->retries, &why);
	if (ret == -EACCES) {
		log_error("%s: %s", what, why);
	} else if (ret == -ENOMEM) {
		log_error("%s: out of memory", what);
	} else if (ret || rq.status < 200 || rq.status > 299 ||
		   (ok1 && rq.status != ok1 && rq.status != ok2)) {
		log_error("%s: %s %s: %s", what, method, url, req_failure(&rq, fb, sizeof(fb)));
		ret = -EIO;
	} else if (location) {
		*location = rq.location;
		rq.location = NULL;
	}
	http_req_clear(&rq);
	return ret;
}

/* 1 present, 0 absent, -errno (logged). */
static int head_exists(struct remote *r, const char *url, const char *what)
{
	struct http_req rq = { 0 };
	const char *why = NULL;
	char fb[32];
	int ret;

	rq.method = "HEAD";
	rq.url = url;
	rq.follow = true;
	ret = remote_do(r, &rq, r->retries, &why);
	if (ret == -EACCES)
		log_error("%s: %s", what, why);
	else if (ret)
		log_error("%s: HEAD %s: %s", what, url, req_failure(&rq, fb, sizeof(fb)));
	else if (rq.status == 200)
		ret = 1;
	else if (rq.status == 404)
		ret = 0;
	else {
		log_error("%s: HEAD %s: %s", what, url, req_failure(&rq, fb, sizeof(fb)));
		ret = -EIO;
	}
	http_req_clear(&rq);
	return ret;
}

/* Upload one blob (monolithic: POST then PUT with the digest) unless present. 1/0/-errno. */
static int oci_blob_put(struct remote *r, const uint8_t digest[SHA256_LEN], const void *data,
			size_t len, const char *what)
{
	char hex[SHA256_HEX_LEN + 1], *url = NULL, *loc = NULL, *put = NULL;
	int ret;

	sha256_to_hex(digest, hex);
	if (asprintf(&url, "%s/v2/%s/blobs/sha256:%s", r->base, r->repo, hex) < 0)
		return -ENOMEM;
	ret = head_exists(r, url, what);
	free(url);
	if (ret)
		return ret < 0 ? ret : 0;
	if (asprintf(&url, "%s/v2/%s/blobs/uploads/", r->base, r->repo) < 0)
		return -ENOMEM;
	ret = put_simple(r, "POST", url, NULL, 0, NULL, 202, 202, what, &loc);
	free(url);
	if (ret)
		return ret;
	if (!loc || !*loc) {
		log_error("%s: the registry gave no upload location", what);
		free(loc);
		return -EIO;
	}
	/* the location may be absolute or a path on the registry */
	if (asprintf(&put, "%s%s%sdigest=sha256:%s", loc[0] == '/' ? r->base : "", loc,
		     strchr(loc, '?') ? "&" : "?", hex) < 0) {
		free(loc);
		return -ENOMEM;
	}
	free(loc);
	if (strncmp(put, r->base, strlen(r->base))) {
		log_error("%s: the registry's upload location is on another host", what);
		free(put);
		return -EIO;
	}
	ret = put_simple(r, "PUT", put, data, len, NULL, 201, 201, what, NULL);
	free(put);
	return ret ? ret : 1;
}

int remote_put(struct remote *r, const uint8_t d[SHA256_LEN], const void *frame, size_t len)
{
	char hex[SHA256_HEX_LEN + 1], what[80], *url = NULL;
	int ret;

	sha256_to_hex(d, hex);
	snprintf(what, sizeof(what), "chunk %s", hex);
	if (r->oci) {
		struct oci_chunk_ref ref = { .size = len };

		memcpy(ref.chunk, d, SHA256_LEN);
		ret = sha256_buf(frame, len, ref.blob);
		if (ret)
			return ret;
		ret = oci_blob_put(r, ref.blob, frame, len, what);
		if (ret >= 0) {
			int a;

			pthread_mutex_lock(&r->lock);
			a = oci_refs_add(&r->pushed, &ref);
			pthread_mutex_unlock(&r->lock);
			if (a)
				return a;
		}
	} else {
		if (asprintf(&url, "%schunks/%.2s/%s", r->base, hex, hex) < 0)
			return -ENOMEM;
		ret = head_exists(r, url, what);
		if (ret == 0) {
			ret = put_simple(r, "PUT", url, frame, len, NULL, 0, 0, what, NULL);
			if (!ret)
				ret = 1;
		} else if (ret == 1) {
			ret = 0;
		}
		free(url);
	}
	if (ret == 1) {
		STAT_ADD(r, uploads, 1);
		STAT_ADD(r, uploaded_bytes, len);
	}
	return ret;
}

int remote_publish(struct remote *r)
{
	static const char empty[] = OCI_EMPTY_JSON;
	struct oci_refs all = { 0 };
	struct oci_doc *docs = NULL;
	uint8_t ed[SHA256_LEN];
	bool news = false;
	size_t nd = 0;
	int ret = 0;

	if (!r->oci)
		return 0;
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->pushed.n && !ret; i++) {
		const struct oci_chunk_ref *f = oci_refs_find(&r->index, r->pushed.v[i].chunk);

		if (!f || memcmp(f->blob, r->pushed.v[i].blob, SHA256_LEN))
			news = true;
	}
	for (size_t i = 0; i < r->index.n && !ret; i++)
		ret = oci_refs_add(&all, &r->index.v[i]);
	for (size_t i = 0; i < r->pushed.n && !ret; i++)
		ret = oci_refs_add(&all, &r->pushed.v[i]);
	pthread_mutex_unlock(&r->lock);
	if (ret || (!news && r->index_loaded && r->index.n))
		goto out; /* nothing new: the published index already covers it */
	oci_refs_sort(&all);
	ret = sha256_buf(empty, 2, ed);
	if (!ret)
		ret = oci_blob_put(r, ed, empty, 2, "the empty config blob");
	if (ret < 0)
		goto out;
	ret = oci_index_build(&all, &docs, &nd);
	for (size_t i = 0; !ret && i < nd; i++) {
		char hex[SHA256_HEX_LEN + 1], *url;
		bool last = i + 1 == nd;

		sha256_to_hex(docs[i].digest, hex);
		if (last)
			ret = asprintf(&url, "%s/v2/%s/manifests/%s", r->base, r->repo, r->tag);
		else
			ret = asprintf(&url, "%s/v2/%s/manifests/sha256:%s", r->base, r->repo, hex);
		if (ret < 0) {
			ret = -ENOMEM;
			break;
		}
		ret = put_simple(r, "PUT", url, docs[i].json, docs[i].len, docs[i].media_type, 201,
				 201, last ? "the chunk index" : "a manifest of the chunk index",
				 NULL);
		free(url);
	}
	if (!ret) {
		oci_refs_sort(&all);
		pthread_mutex_lock(&r->lock);
		oci_refs_free(&r->index);
		r->index = all;
		memset(&all, 0, sizeof(all));
		pthread_mutex_unlock(&r->lock);
	}
out:
	oci_docs_free(docs, nd);
	oci_refs_free(&all);
	return ret < 0 ? ret : 0;
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
	n = r->lat_n < LAT_RING ? r->lat_n : LAT_RING;
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
