/* SPDX-License-Identifier: MIT */
/*
 * cas/remote/remote_oci: the oci:// backend. Chunks are blobs of a registry repository (a
 * frame's blob digest is the sha256 of its compressed bytes, checked on every fetch), found
 * through the chunk index published under a tag (oci_index.h): loaded at open, reloaded
 * (at most every INDEX_RELOAD_SECS, one reload at a time) when a chunk is not in it, each
 * document and the whole within the limits of oci_index.h, extended by push and
 * published by remote_publish(). Registry token auth as the distribution spec says: a 401
 * with a Bearer challenge, a token from its realm, the request retried; or HTTP basic when
 * the challenge asks for it.
 */
#include "remote_int.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../../common/dl_curl.h"
#include "../../common/esc.h"
#include "../../common/log.h"
#include "../../common/why.h"
#include "../oci_json.h"
#include "image_doc.h"
#include "oci_index.h"

#define INDEX_RELOAD_SECS 5

/* Under r->lock, but for repo and tag (set at open). */
struct remote_oci {
	char *repo, *tag;
	struct oci_refs index;  /* sorted: chunk -> blob, as published under the tag */
	struct oci_refs pushed; /* what remote_put uploaded or found */
	time_t index_loaded;
	bool tagged;            /* the tag was found (not: nothing published under it yet) */
	enum image_tag_kind kind; /* what the tag holds, when tagged */
	bool loading;           /* a miss is reloading the index; the others wait for it */
	pthread_cond_t loaded;  /* signalled when that reload ends */
};

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

static bool oci_match(const char *url)
{
	return !strncmp(url, "oci://", 6) || !strncmp(url, "oci+http://", 11) ||
	       !strncmp(url, "oci+https://", 12);
}

static int oci_parse(struct remote *r, const char *url, char *why, size_t why_len)
{
	struct remote_oci *o;
	const char *rest, *slash, *scheme;
	char *path, *colon;
	size_t hl;

	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	pthread_cond_init(&o->loaded, NULL);
	r->be = o;
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
	if (!slash || slash == rest || !slash[1])
		return why_set(why, why_len, -EINVAL,
			       "an OCI remote is oci://HOST[:PORT]/REPO[:TAG]");
	hl = (size_t)(slash - rest);
	if (strpbrk(url, "?# \t\r\n") || memchr(rest, '@', hl))
		return why_set(why, why_len, -EINVAL,
			       "the remote URL must not have a query, a fragment, credentials or spaces");
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
	if (!strncmp(path + strcspn(path, "@"), "@sha256:", 8)) {
		/* REPO@sha256:<hex>: a document by digest (read only) */
		colon = path + strcspn(path, "@");
		*colon = '\0';
		o->tag = strdup(colon + 1);
		o->repo = path;
		if (!o->tag)
			return -ENOMEM;
		if (oci_digest_parse(o->tag, (uint8_t[SHA256_LEN]){ 0 }) || r->push)
			return why_set(why, why_len, -EINVAL, "%s", r->push
				       ? "cannot push to a digest: name a tag"
				       : "bad digest in the OCI remote (sha256:<64 lowercase hex>)");
		if (!repo_valid(o->repo))
			return why_set(why, why_len, -EINVAL,
				       "bad repository name in the OCI remote");
		return 0;
	} else if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		o->tag = strdup(colon + 1);
	} else {
		o->tag = strdup(REMOTE_OCI_TAG_DEFAULT);
	}
	o->repo = path;
	if (!o->tag)
		return -ENOMEM;
	if (!repo_valid(o->repo))
		return why_set(why, why_len, -EINVAL,
			       "bad repository name in the OCI remote (lowercase letters, digits, "
		       "separators . _ - /)");
	if (!oci_tag_valid(o->tag))
		return why_set(why, why_len, -EINVAL, "bad tag in the OCI remote");
	return 0;
}

const char *remote_oci_repo(const struct remote *r)
{
	return ((const struct remote_oci *)r->be)->repo;
}

static void oci_free(struct remote *r)
{
	struct remote_oci *o = r->be;

	if (!o)
		return;
	oci_refs_free(&o->index);
	oci_refs_free(&o->pushed);
	free(o->repo);
	free(o->tag);
	pthread_cond_destroy(&o->loaded);
	free(o);
	r->be = NULL;
}

/* ------------------------------------------------------------------ authentication */

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
static int oci_auth(struct remote *r, const char *challenge, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	char *realm = NULL, *service = NULL, *scope = NULL, *url = NULL, *es = NULL, *esc = NULL;
	char want[1024], *query = NULL;
	bool withheld;
	struct http_req rq = { 0 };
	struct json_object *root = NULL, *tok;
	int ret;

	if (challenge && !strncasecmp(challenge, "Basic", 5)) {
		if (!r->user)
			return why_set(why, why_len, -EACCES, "the registry wants credentials (set "
				       "LAZYBLK_REMOTE_USER and LAZYBLK_REMOTE_PASSWORD)");
		pthread_mutex_lock(&r->lock);
		r->basic = true;
		pthread_mutex_unlock(&r->lock);
		return 0;
	}
	if (!challenge || oci_parse_bearer(challenge, &realm, &service, &scope))
		return why_set(why, why_len, -EACCES,
			       "the registry refused access without a usable "
			       "authentication challenge");
	snprintf(want, sizeof(want), "repository:%s:%s", o->repo, r->push ? "pull,push" : "pull");
	es = service ? url_escape(service) : strdup("");
	esc = url_escape(want);
	if (!es || !esc || asprintf(&query, "service=%s&scope=%s", es, esc) < 0) {
		query = NULL;
		ret = -ENOMEM;
		goto out;
	}
	ret = http_url_resolve(r->base, realm, query, &url, why, why_len);
	if (ret == -EINVAL)
		ret = why_set(why, why_len, -EACCES, "the registry's token realm is not an http(s) "
			      "URL without credentials");
	if (ret)
		goto out;
	/* the credentials go to the registry itself, or over https: never in clear elsewhere */
	withheld = r->user && strncasecmp(url, "https://", 8) && !http_same_origin(url, r->base);
	rq.method = "GET";
	rq.url = url;
	if (!withheld) {
		rq.user = r->user;
		rq.password = r->password;
	}
	rq.follow = true;
	rq.max_body = OCI_JSON_TOKEN_MAX;
	rq.accept = "application/json";
	REMOTE_STAT_ADD(r, requests, 1);
	ret = http_do(r->http, &rq);
	if (ret) {
		why_set(why, why_len, 0, "the registry's token endpoint did not answer");
		goto out;
	}
	if (rq.status == 401 || rq.status == 403) {
		ret = why_set(why, why_len, -EACCES, "%s",
			      withheld ? "the registry's token realm is another host over plain "
					 "http: credentials withheld (see docs/remote.md)"
			      : r->user ? "the registry's token endpoint refused the credentials"
					: "the registry wants credentials (set LAZYBLK_REMOTE_USER "
					  "and LAZYBLK_REMOTE_PASSWORD)");
		goto out;
	}
	if (rq.status != 200 || !rq.body_out_len) {
		ret = why_set(why, why_len, -EACCES, "the registry's token endpoint failed");
		goto out;
	}
	/* over the limits: why names the limit */
	if (oci_json_parse((const char *)rq.body_out, rq.body_out_len, OCI_JSON_TOKEN, &root, why,
			   why_len) != -EFBIG)
		why_set(why, why_len, 0, "the registry's token endpoint sent no token");
	ret = -EACCES;
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
	free(query);
	free(url);
	return ret;
}

/* ------------------------------------------------------------------ the chunk index */

/*
 * GET a document of the chunk index (kind: its limits). -EFBIG with why (naming the limit)
 * when it is larger than they allow, else as remote_do().
 */
static int fetch_doc(struct remote *r, const char *ref, enum oci_json_kind kind,
		     struct http_req *rq, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	char *url;
	int ret;

	if (asprintf(&url, "%s/v2/%s/manifests/%s", r->base, o->repo, ref) < 0)
		return -ENOMEM;
	memset(rq, 0, sizeof(*rq));
	rq->method = "GET";
	rq->url = url;
	rq->accept = OCI_MT_INDEX ", " OCI_MT_MANIFEST;
	rq->max_body = oci_json_limits(kind)->max_bytes;
	rq->follow = true;
	ret = remote_do(r, rq, r->retries, why, why_len);
	rq->url = NULL;
	free(url);
	if (ret == -EIO && rq->curl_code == CURLE_FILESIZE_EXCEEDED)
		ret = why_set(why, why_len, -EFBIG, "%s", oci_json_limits(kind)->too_big);
	return ret;
}

/* Load the chunk index under the tag into o->index (empty if the tag does not exist). */
static int index_load(struct remote *r, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	struct oci_refs refs = { 0 };
	uint8_t (*mans)[SHA256_LEN] = NULL;
	size_t n_mans = 0;
	enum image_tag_kind kind;
	struct http_req rq;
	int ret;

	ret = fetch_doc(r, o->tag, OCI_JSON_INDEX, &rq, why, why_len);
	if (ret == -EIO) {
		why_set(why, why_len, 0, "the registry did not answer");
		goto out;
	}
	if (ret)
		goto out;
	if (rq.status == 404) {
		pthread_mutex_lock(&r->lock);
		o->kind = IMAGE_TAG_CHUNKS; /* nothing there (any more) to keep */
		pthread_mutex_unlock(&r->lock);
		ret = 0; /* nothing published yet */
		goto out;
	}
	pthread_mutex_lock(&r->lock);
	o->tagged = true;
	pthread_mutex_unlock(&r->lock);
	if (rq.status != 200) {
		ret = why_set(why, why_len, -EIO, "%s",
			      rq.status == 401 || rq.status == 403
			      ? "the registry refused access"
			      : "the registry failed to send the chunk index");
		goto out;
	}
	kind = image_tag_kind((const char *)rq.body_out, rq.body_out_len);
	pthread_mutex_lock(&r->lock);
	o->kind = kind;
	pthread_mutex_unlock(&r->lock);
	if (kind == IMAGE_TAG_OTHER && r->push)
		goto out; /* not ours: nothing to merge (and a chunk-only push refuses to replace it) */
	ret = oci_index_parse((const char *)rq.body_out, rq.body_out_len, &refs, &mans, &n_mans,
			      why, why_len);
	for (size_t i = 0; !ret && i < n_mans; i++) {
		char hex[SHA256_HEX_LEN + 1], ref[8 + SHA256_HEX_LEN];
		uint8_t sum[SHA256_LEN];
		uint8_t (*more)[SHA256_LEN] = NULL;
		size_t n_more = 0;

		sha256_to_hex(mans[i], hex);
		snprintf(ref, sizeof(ref), "sha256:%s", hex);
		http_req_clear(&rq);
		ret = fetch_doc(r, ref, OCI_JSON_MANIFEST, &rq, why, why_len);
		if (ret)
			break;
		if (rq.status != 200) {
			ret = why_set(why, why_len, -EIO, "the registry failed to send a manifest "
				      "of the chunk index");
			break;
		}
		if (sha256_buf(rq.body_out, rq.body_out_len, sum) || memcmp(sum, mans[i], SHA256_LEN)) {
			ret = why_set(why, why_len, -EIO, "a manifest of the chunk index does not "
				      "match its digest");
			break;
		}
		ret = oci_index_parse((const char *)rq.body_out, rq.body_out_len, &refs, &more,
				      &n_more, why, why_len);
		free(more);
		if (!ret && n_more)
			ret = why_set(why, why_len, -EBADMSG,
				      "the chunk index nests image indexes");
	}
	if (!ret) {
		oci_refs_sort(&refs);
		pthread_mutex_lock(&r->lock);
		oci_refs_free(&o->index);
		o->index = refs;
		memset(&refs, 0, sizeof(refs));
		pthread_mutex_unlock(&r->lock);
	}
out:
	if (!ret) {
		pthread_mutex_lock(&r->lock);
		o->index_loaded = time(NULL);
		pthread_mutex_unlock(&r->lock);
	}
	http_req_clear(&rq);
	oci_refs_free(&refs);
	free(mans);
	return ret;
}

static int oci_start(struct remote *r, char *why, size_t why_len)
{
	return index_load(r, why, why_len);
}

/* ------------------------------------------------------------------ chunks */

/*
 * The blob of chunk d in the OCI index. A miss reloads the index (at most every
 * INDEX_RELOAD_SECS), one reload at a time: misses meanwhile wait for it and look again,
 * so that concurrent misses fetch the index once, not once each.
 */
static int oci_lookup(struct remote *r, const uint8_t d[SHA256_LEN], struct oci_chunk_ref *ref)
{
	struct remote_oci *o = r->be;
	const struct oci_chunk_ref *f;
	bool reloaded = false;
	int ret = -ENOENT;

	pthread_mutex_lock(&r->lock);
	for (;;) {
		f = oci_refs_find(&o->index, d);
		if (f) {
			*ref = *f;
			ret = 0;
			break;
		}
		if (o->loading) {
			pthread_cond_wait(&o->loaded, &r->lock);
			reloaded = true;
			continue;
		}
		if (reloaded || time(NULL) - o->index_loaded < INDEX_RELOAD_SECS)
			break;
		o->loading = true;
		pthread_mutex_unlock(&r->lock);
		index_load(r, NULL, 0); /* a reason is for remote_open only */
		pthread_mutex_lock(&r->lock);
		o->loading = false;
		pthread_cond_broadcast(&o->loaded);
		reloaded = true;
	}
	pthread_mutex_unlock(&r->lock);
	return ret;
}

static int oci_probe(struct remote *r, const uint8_t d[SHA256_LEN], char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	struct oci_chunk_ref ref;
	bool tagged;

	pthread_mutex_lock(&r->lock);
	tagged = o->tagged;
	pthread_mutex_unlock(&r->lock);
	if (!tagged)
		return why_set(why, why_len, -ENOENT,
			       "no such tag in the repository (nothing was pushed under it)");
	if (d && oci_lookup(r, d, &ref))
		return why_set(why, why_len, -ENOENT,
			       "its chunk index does not list the image's chunks (pushed from another store?)");
	return 0;
}

static int oci_locate(struct remote *r, const uint8_t d[SHA256_LEN], const char *hex,
		      struct remote_loc *loc)
{
	struct remote_oci *o = r->be;
	char bhex[SHA256_HEX_LEN + 1];
	struct oci_chunk_ref ref;

	if (oci_lookup(r, d, &ref)) {
		log_error("chunk %s is not in the chunk index of %s", hex, r->url);
		return -ENOENT;
	}
	memcpy(loc->blob, ref.blob, SHA256_LEN);
	loc->size = ref.size;
	sha256_to_hex(ref.blob, bhex);
	if (asprintf(&loc->url, "%s/v2/%s/blobs/sha256:%s", r->base, o->repo, bhex) < 0) {
		loc->url = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int oci_check(struct remote *r, const struct remote_loc *loc, const uint8_t *frame,
		     size_t len, const char *hex)
{
	uint8_t sum[SHA256_LEN];

	(void)r;
	if (len != loc->size || sha256_buf(frame, len, sum) ||
	    memcmp(sum, loc->blob, SHA256_LEN)) {
		log_warn("chunk %s: the registry sent a blob that does not match its digest", hex);
		return -EBADMSG;
	}
	return 0;
}

/* Upload one blob (monolithic: POST then PUT with the digest) unless present. 1/0/-errno. */
int remote_oci_blob_put(struct remote *r, const uint8_t digest[SHA256_LEN], const void *data,
			size_t len, const char *what, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	char hex[SHA256_HEX_LEN + 1], *url = NULL, *loc = NULL, *put = NULL;
	char q[16 + SHA256_HEX_LEN], pb[160];
	char uw[WHY_MAX] = "";
	int ret;

	sha256_to_hex(digest, hex);
	if (asprintf(&url, "%s/v2/%s/blobs/sha256:%s", r->base, o->repo, hex) < 0)
		return -ENOMEM;
	ret = remote_head(r, url, what, why, why_len);
	free(url);
	if (ret)
		return ret < 0 ? ret : 0;
	if (asprintf(&url, "%s/v2/%s/blobs/uploads/", r->base, o->repo) < 0)
		return -ENOMEM;
	ret = remote_send(r, "POST", url, NULL, 0, NULL, 202, 202, what, &loc, why, why_len);
	if (!ret && (!loc || !*loc))
		ret = why_set(why, why_len, -EIO, "%s: the registry gave no upload location", what);
	if (ret) {
		free(url);
		free(loc);
		return ret;
	}
	/*
	 * The location may be absolute or relative to the POST's URL; the blob (with the
	 * credentials) goes to the registry's own scheme, host and port only.
	 */
	snprintf(q, sizeof(q), "digest=sha256:%s", hex);
	ret = http_url_resolve(url, loc, q, &put, uw, sizeof(uw));
	free(url);
	if (ret == -EINVAL || (!ret && !http_same_origin(put, r->base))) {
		why_set(why, why_len, -EIO, "%s: the registry's upload location %s: %s", what,
			esc_str(loc, pb, sizeof(pb)),
			ret ? uw : "on another host than the registry (not followed)");
		free(loc);
		free(put);
		return -EIO;
	}
	free(loc);
	if (ret)
		return ret;
	ret = remote_send(r, "PUT", put, data, len, NULL, 201, 201, what, NULL, why, why_len);
	free(put);
	return ret ? ret : 1;
}

static int oci_put(struct remote *r, const uint8_t d[SHA256_LEN], const void *frame,
		   size_t len, const char *what, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	struct oci_chunk_ref ref = { .size = len };
	int ret, a;

	memcpy(ref.chunk, d, SHA256_LEN);
	ret = sha256_buf(frame, len, ref.blob);
	if (ret)
		return ret;
	ret = remote_oci_blob_put(r, ref.blob, frame, len, what, why, why_len);
	if (ret >= 0) {
		pthread_mutex_lock(&r->lock);
		a = oci_refs_add(&o->pushed, &ref);
		pthread_mutex_unlock(&r->lock);
		if (a)
			return a;
	}
	return ret;
}

/*
 * A chunk-only push writes a chunk index under the tag: never over an image or anything
 * else that is not a chunk index (docs/images.md). 0, or -EEXIST with one line in why.
 */
static int oci_publish_check(struct remote *r, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	enum image_tag_kind kind;
	bool tagged;

	pthread_mutex_lock(&r->lock);
	tagged = o->tagged;
	kind = o->kind;
	pthread_mutex_unlock(&r->lock);
	if (!tagged || kind == IMAGE_TAG_CHUNKS)
		return 0;
	if (kind == IMAGE_TAG_IMAGE)
		snprintf(why, why_len, "%s: tag %s holds a lazyblk image, which pushing chunks alone "
			 "would replace: to replace the image, push its layout to that tag (lazyblk "
			 "push --remote %s IMAGE.layout); to publish chunks, name another tag", r->url,
			 o->tag, r->url);
	else if (kind == IMAGE_TAG_SNAPSHOT)
		snprintf(why, why_len, "%s: tag %s holds a lazyblk VM snapshot, which pushing chunks "
			 "alone would replace: to replace it, push a snapshot to that tag (lazyblk "
			 "push --remote %s SNAPSHOT_DIR); to publish chunks, name another tag", r->url,
			 o->tag, r->url);
	else
		snprintf(why, why_len, "%s: tag %s holds something other than a lazyblk chunk index "
			 "(a container image?), which pushing chunks would replace: name another tag",
			 r->url, o->tag);
	return -EEXIST;
}

static int oci_publish(struct remote *r, char *why, size_t why_len)
{
	struct remote_oci *o = r->be;
	static const char empty[] = OCI_EMPTY_JSON;
	struct oci_refs all = { 0 };
	struct oci_doc *docs = NULL;
	uint8_t ed[SHA256_LEN];
	bool news = false;
	size_t nd = 0;
	char cw[1024];
	char lw[WHY_MAX] = "";
	int ret;

	/*
	 * Read the tag again: what another push published meanwhile is merged, and a tag that
	 * has become an image (or anything else) is not replaced.
	 */
	ret = index_load(r, lw, sizeof(lw));
	if (ret)
		return why_set(why, why_len, ret, "%s: reading the chunk index again: %s", r->url,
			       lw[0] ? lw : strerror(-ret));
	ret = oci_publish_check(r, cw, sizeof(cw));
	if (ret)
		return why_set(why, why_len, ret, "%s; the chunks were uploaded, the tag is left as "
			       "it is", cw);
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < o->pushed.n && !ret; i++) {
		const struct oci_chunk_ref *f = oci_refs_find(&o->index, o->pushed.v[i].chunk);

		if (!f || memcmp(f->blob, o->pushed.v[i].blob, SHA256_LEN))
			news = true;
	}
	for (size_t i = 0; i < o->index.n && !ret; i++)
		ret = oci_refs_add(&all, &o->index.v[i]);
	for (size_t i = 0; i < o->pushed.n && !ret; i++)
		ret = oci_refs_add(&all, &o->pushed.v[i]);
	pthread_mutex_unlock(&r->lock);
	if (ret || (!news && o->index_loaded && o->index.n))
		goto out; /* nothing new: the published index already covers it */
	oci_refs_sort(&all);
	if (all.n > OCI_INDEX_MAX_CHUNKS) {
		ret = why_set(why, why_len, -EFBIG, "%s: the chunk index would list %zu chunks, "
			      "more than the %u a reader takes", r->url, all.n,
			      OCI_INDEX_MAX_CHUNKS);
		goto out;
	}
	ret = sha256_buf(empty, 2, ed);
	if (!ret)
		ret = remote_oci_blob_put(r, ed, empty, 2, "the empty config blob", why,
					  why_len);
	if (ret < 0)
		goto out;
	ret = oci_index_build(&all, &docs, &nd);
	for (size_t i = 0; !ret && i < nd; i++) {
		char hex[SHA256_HEX_LEN + 1], *url;
		bool last = i + 1 == nd;

		sha256_to_hex(docs[i].digest, hex);
		if (last)
			ret = asprintf(&url, "%s/v2/%s/manifests/%s", r->base, o->repo, o->tag);
		else
			ret = asprintf(&url, "%s/v2/%s/manifests/sha256:%s", r->base, o->repo, hex);
		if (ret < 0) {
			ret = -ENOMEM;
			break;
		}
		ret = remote_send(r, "PUT", url, docs[i].json, docs[i].len, docs[i].media_type, 201,
				 201, last ? "the chunk index" : "a manifest of the chunk index",
				 NULL, why, why_len);
		free(url);
	}
	if (!ret) {
		oci_refs_sort(&all);
		pthread_mutex_lock(&r->lock);
		oci_refs_free(&o->index);
		o->index = all;
		memset(&all, 0, sizeof(all));
		pthread_mutex_unlock(&r->lock);
	}
out:
	oci_docs_free(docs, nd);
	oci_refs_free(&all);
	return ret < 0 ? ret : 0;
}

/* The tag (or sha256:<hex>) of an oci remote's URL. */
const char *remote_oci_tag(const struct remote *r)
{
	return ((const struct remote_oci *)r->be)->tag;
}

int remote_oci_pushed(struct remote *r, struct oci_refs *out)
{
	struct remote_oci *o = r->be;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < o->pushed.n && !ret; i++)
		ret = oci_refs_add(out, &o->pushed.v[i]);
	pthread_mutex_unlock(&r->lock);
	if (ret)
		oci_refs_free(out);
	else
		oci_refs_sort(out);
	return ret;
}

const struct remote_ops remote_oci_ops = {
	.match = oci_match,
	.parse = oci_parse,
	.start = oci_start,
	.auth = oci_auth,
	.probe = oci_probe,
	.locate = oci_locate,
	.check = oci_check,
	.put = oci_put,
	.publish_check = oci_publish_check,
	.publish = oci_publish,
	.free = oci_free,
};
