/* SPDX-License-Identifier: MIT */
/*
 * The registry client of docker:// imports (registry.h) over the oci:// remote's requests:
 * remote_open() with .registry set (no chunk index), then manifests and blobs of the
 * repository by the distribution spec's URLs.
 */
#include "registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/dl_curl.h"
#include "../../common/fsutil.h"
#include "../../common/why.h"
#include "remote_int.h"

#define REGISTRY_TIMEOUT_MS (30u * 60 * 1000) /* a whole blob, however large */

static const char *repo_of(const struct remote *r)
{
	return remote_oci_repo(r);
}

/* "HOST[:PORT]" of the registry, for messages. */
static const char *host_of(const struct remote *r)
{
	const char *h = strstr(r->base, "://");

	return h ? h + 3 : r->base;
}

int registry_open(const char *host, const char *repo, bool insecure, struct remote **out,
		  char *why, size_t why_len)
{
	struct remote_opts o = { .concurrency = 8, .timeout_ms = REGISTRY_TIMEOUT_MS,
				 .registry = true };
	char w[WHY_MAX] = "";
	char *url;
	int ret;

	if (!*host || strpbrk(host, "/@?# \t\r\n"))
		return why_set(why, why_len, -EINVAL, "bad registry host '%s'", host);
	if (asprintf(&url, "oci+%s://%s/%s", insecure ? "http" : "https", host, repo) < 0)
		return -ENOMEM;
	o.url = url;
	ret = remote_open(&o, out, w, sizeof(w));
	free(url);
	if (ret)
		why_set(why, why_len, ret, "%s/%s: %s", host, repo, w[0] ? w : strerror(-ret));
	return ret;
}

/* Why a request failed, one line naming the registry. */
static int request_why(struct remote *r, const struct http_req *rq, int ret, const char *aw,
		       const char *what, char *why, size_t why_len)
{
	if (ret == -ENOMEM)
		return why_set(why, why_len, ret, "out of memory");
	if (ret == -EACCES)
		return why_set(why, why_len, ret, "registry %s: %s", host_of(r), aw);
	if (ret && rq->curl_code == CURLE_SSL_CONNECT_ERROR && !strncmp(r->base, "https:", 6))
		return why_set(why, why_len, -EIO, "registry %s: TLS handshake failed (%s); a "
			       "plain-HTTP registry needs --insecure", host_of(r), rq->err);
	if (ret == -EIO && rq->curl_code == CURLE_FILESIZE_EXCEEDED)
		return why_set(why, why_len, -EFBIG, "registry %s: %s: %s", host_of(r), what,
			       rq->err);
	if (ret)
		return why_set(why, why_len, -EIO, "registry %s unreachable: %s", host_of(r),
			       rq->err);
	return why_set(why, why_len, -EIO, "registry %s: %s: HTTP %ld", host_of(r), what,
		       rq->status);
}

int registry_get_manifest(struct remote *r, const char *ref, size_t max, uint8_t **body,
			  size_t *len, char *why, size_t why_len)
{
	struct http_req rq = { 0 };
	char aw[WHY_MAX] = "";
	char *url, what[160];
	int ret;

	if (asprintf(&url, "%s/v2/%s/manifests/%s", r->base, repo_of(r), ref) < 0)
		return -ENOMEM;
	snprintf(what, sizeof(what), "manifest %s", ref);
	rq.method = "GET";
	rq.url = url;
	rq.accept = REGISTRY_ACCEPT;
	rq.max_body = max;
	rq.follow = true;
	ret = remote_do(r, &rq, r->retries, aw, sizeof(aw));
	if (!ret && (rq.status == 404 || rq.status == 410)) {
		ret = -ENOENT;
		if (why_len)
			why[0] = '\0';
	} else if (ret || rq.status != 200) {
		ret = request_why(r, &rq, ret, aw, what, why, why_len);
	} else {
		*body = rq.body_out;
		*len = rq.body_out_len;
		rq.body_out = NULL;
	}
	http_req_clear(&rq);
	free(url);
	return ret;
}

/* A blob on its way to its file. */
struct blob_sink {
	const struct registry_blob *b;
	struct sha256_ctx *sha;
	uint64_t got;
	int err;           /* what stopped it: -EBADMSG (too long), -ECANCELED, a write's */
};

static int sink_write(void *arg, const void *data, size_t len)
{
	struct blob_sink *s = arg;
	const struct registry_blob *b = s->b;

	if (b->cancel && __atomic_load_n(b->cancel, __ATOMIC_RELAXED))
		s->err = -ECANCELED;
	else if (len > b->size - s->got)
		s->err = -EBADMSG;
	else if (sha256_update(s->sha, data, len))
		s->err = -ENOMEM;
	else
		s->err = fs_pwrite_full(b->fd, data, len, (off_t)s->got);
	if (s->err)
		return -1;
	s->got += len;
	if (b->fetched)
		__atomic_add_fetch(b->fetched, len, __ATOMIC_RELAXED);
	return 0;
}

static void sink_restart(void *arg)
{
	struct blob_sink *s = arg;
	uint8_t dummy[SHA256_LEN];

	if (s->got && s->b->fetched)
		__atomic_sub_fetch(s->b->fetched, s->got, __ATOMIC_RELAXED);
	s->got = 0;
	s->err = 0;
	sha256_final(s->sha, dummy); /* resets it */
	if (ftruncate(s->b->fd, 0))
		s->err = -errno;
}

/* The bytes that arrived, against what the descriptor promised. */
static int blob_check(struct blob_sink *s, const char *hex, char *why, size_t why_len)
{
	char got[SHA256_HEX_LEN + 1];
	uint8_t sum[SHA256_LEN];

	if (s->got != s->b->size)
		return why_set(why, why_len, -EBADMSG, "blob sha256:%s: the registry sent %llu "
			       "bytes, the manifest says %llu", hex, (unsigned long long)s->got,
			       (unsigned long long)s->b->size);
	if (sha256_final(s->sha, sum))
		return -ENOMEM;
	if (memcmp(sum, s->b->digest, SHA256_LEN)) {
		sha256_to_hex(sum, got);
		return why_set(why, why_len, -EBADMSG, "blob sha256:%s: digest mismatch: the "
			       "registry sent sha256:%s", hex, got);
	}
	return 0;
}

int registry_get_blob(struct remote *r, const struct registry_blob *b, char *why,
		      size_t why_len)
{
	struct blob_sink s = { .b = b };
	char hex[SHA256_HEX_LEN + 1], what[96];
	struct http_req rq = { 0 };
	char aw[WHY_MAX] = "";
	char *url;
	int ret;

	sha256_to_hex(b->digest, hex);
	s.sha = sha256_new();
	if (!s.sha)
		return -ENOMEM;
	if (asprintf(&url, "%s/v2/%s/blobs/sha256:%s", r->base, repo_of(r), hex) < 0) {
		sha256_free(s.sha);
		return -ENOMEM;
	}
	snprintf(what, sizeof(what), "blob sha256:%s", hex);
	rq.method = "GET";
	rq.url = url;
	rq.follow = true;
	rq.max_body = 1u << 20; /* of an error's body */
	rq.sink = sink_write;
	rq.sink_restart = sink_restart;
	rq.sink_arg = &s;
	rq.cancel = b->cancel;
	ret = remote_do(r, &rq, r->retries, aw, sizeof(aw));
	if (b->cancel && __atomic_load_n(b->cancel, __ATOMIC_RELAXED))
		ret = why_set(why, why_len, -ECANCELED, "interrupted");
	else if (s.err == -EBADMSG)
		ret = why_set(why, why_len, -EBADMSG, "blob sha256:%s: the registry sent more "
			      "than the %llu bytes the manifest says", hex,
			      (unsigned long long)b->size);
	else if (s.err == -ECANCELED)
		ret = why_set(why, why_len, -ECANCELED, "interrupted");
	else if (s.err)
		ret = why_set(why, why_len, s.err, "blob sha256:%s: %s", hex, strerror(-s.err));
	else if (!ret && (rq.status == 404 || rq.status == 410))
		ret = why_set(why, why_len, -ENOENT, "registry %s: %s not found in %s",
			      host_of(r), what, repo_of(r));
	else if (ret || rq.status != 200)
		ret = request_why(r, &rq, ret, aw, what, why, why_len);
	else
		ret = blob_check(&s, hex, why, why_len);
	http_req_clear(&rq);
	free(url);
	sha256_free(s.sha);
	return ret;
}
