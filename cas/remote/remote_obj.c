/* SPDX-License-Identifier: MIT */
/* Objects other than chunks on a remote (remote.h): GET, PUT, DELETE by path; OCI blobs. */
#include "remote_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/dl_curl.h"
#include "../../common/why.h"
#include "../oci_json.h"

char *remote_obj_url(const struct remote *r, const char *rel)
{
	char *url;
	size_t n = strlen(r->base);

	if (asprintf(&url, "%s%s%s", r->base, n && r->base[n - 1] == '/' ? "" : "/", rel) < 0)
		return NULL;
	return url;
}

int remote_obj_fetch(struct remote *r, struct http_req *rq, const char *url, size_t max,
		     char *why, size_t why_len)
{
	char aw[WHY_MAX] = "";
	int ret;

	rq->method = "GET";
	rq->url = url;
	rq->max_body = max;
	rq->follow = true;
	ret = remote_do(r, rq, r->retries, aw, sizeof(aw));
	if (ret == -EIO && rq->curl_code == CURLE_FILESIZE_EXCEEDED) {
		snprintf(why, why_len, "%s: larger than %zu bytes", url, max);
		ret = -EFBIG;
	} else if (ret == -EACCES) {
		snprintf(why, why_len, "%s: %s", url, aw[0] ? aw : "access refused");
	} else if (ret == -EIO) {
		snprintf(why, why_len, "%s: %s", url, rq->err[0] ? rq->err : "no answer");
	}
	return ret;
}

static int obj_get(struct remote *r, const char *rel, const char *accept, size_t max,
		   const struct remote_sink *sink, uint8_t **buf, size_t *len, char *why,
		   size_t why_len)
{
	struct http_req rq = { 0 };
	char *url = remote_obj_url(r, rel);
	int ret;

	if (!url)
		return -ENOMEM;
	rq.accept = accept;
	if (sink) {
		rq.sink = sink->sink;
		rq.sink_restart = sink->restart;
		rq.sink_arg = sink->arg;
	}
	ret = remote_obj_fetch(r, &rq, url, max, why, why_len);
	if (!ret && rq.status == 404) {
		snprintf(why, why_len, "%s: not found", url);
		ret = -ENOENT;
	} else if (!ret && rq.status != 200) {
		snprintf(why, why_len, "%s: HTTP status %ld", url, rq.status);
		ret = rq.status == 401 || rq.status == 403 ? -EACCES : -EIO;
	} else if (!ret && buf) {
		*buf = rq.body_out;
		*len = rq.body_out_len;
		rq.body_out = NULL;
	}
	http_req_clear(&rq);
	free(url);
	return ret;
}

int remote_obj_get(struct remote *r, const char *rel, const char *accept, size_t max,
		   uint8_t **buf, size_t *len, char *why, size_t why_len)
{
	*buf = NULL;
	*len = 0;
	return obj_get(r, rel, accept, max, NULL, buf, len, why, why_len);
}

int remote_obj_stream(struct remote *r, const char *rel, const struct remote_sink *sink,
		      char *why, size_t why_len)
{
	return obj_get(r, rel, NULL, 0, sink, NULL, NULL, why, why_len);
}

/* One page of a tag list: each valid tag to fn, the others counted. */
static int tags_page(struct remote *r, const uint8_t *buf, size_t len,
		     int (*fn)(void *arg, const char *tag), void *arg, struct remote_tags *seen,
		     char *why, size_t why_len)
{
	struct json_object *root, *tags;
	char jw[WHY_MAX] = "";
	int ret = 0;

	oci_json_parse((const char *)buf, len, OCI_JSON_INDEX, &root, jw, sizeof(jw));
	if (!root || !json_object_is_type(root, json_type_object)) {
		snprintf(why, why_len, "%s: the registry's tag list is not a JSON object%s%s",
			 remote_url(r), jw[0] ? ": " : "", jw[0] ? jw : "");
		json_object_put(root);
		return -EBADMSG;
	}
	tags = oci_json_get(root, "tags", json_type_array);
	for (size_t i = 0; !ret && tags && i < json_object_array_length(tags); i++) {
		struct json_object *t = json_object_array_get_idx(tags, i);

		/* one odd entry neither reaches a URL or a terminal nor stops the others */
		if (json_object_is_type(t, json_type_string) &&
		    strlen(json_object_get_string(t)) == (size_t)json_object_get_string_len(t) &&
		    oci_tag_valid(json_object_get_string(t)))
			ret = fn(arg, json_object_get_string(t));
		else
			seen->skipped++;
	}
	json_object_put(root);
	return ret;
}

/* The next page a tag list's answer names (*next NULL: none). 0, or -errno with why. */
static int tags_next(struct remote *r, const struct http_req *rq, const char *url, char **next,
		     char *why, size_t why_len)
{
	char uw[WHY_MAX] = "";
	char *ref = NULL;
	int ret;

	*next = NULL;
	ret = http_link_next(rq->link, &ref);
	if (ret == -ENOENT)
		return 0;
	if (ret == -EBADMSG)
		snprintf(why, why_len, "%s: the registry's tag list has a Link header that does not "
			 "parse", url);
	if (!ret)
		ret = http_url_resolve(url, ref, NULL, next, uw, sizeof(uw));
	free(ref);
	if (ret == -EINVAL || (!ret && !http_same_origin(*next, r->base))) {
		snprintf(why, why_len, "%s: the next page of the registry's tag list is %s: not "
			 "asked", url, ret ? uw : "on another host");
		free(*next);
		*next = NULL;
		ret = -EBADMSG;
	}
	return ret;
}

int remote_obj_tags(struct remote *r, const char *repo,
		    int (*fn)(void *arg, const char *tag), void *arg, struct remote_tags *seen,
		    char *why, size_t why_len)
{
	char rel[PATH_MAX], *url, *next = NULL;
	int ret = 0;

	memset(seen, 0, sizeof(*seen));
	snprintf(rel, sizeof(rel), "v2/%s/tags/list", repo);
	url = remote_obj_url(r, rel);
	if (!url)
		return -ENOMEM;
	while (url && !ret) {
		struct http_req rq = { .accept = "application/json" };

		if (seen->pages == REMOTE_TAG_PAGES_MAX) {
			seen->truncated = true;
			break;
		}
		ret = remote_obj_fetch(r, &rq, url, OCI_JSON_INDEX_MAX, why, why_len);
		if (!ret && rq.status == 404 && !seen->pages) {
			seen->no_list = true; /* no such repository, or no tag list: no tags */
		} else if (!ret && rq.status != 200) {
			snprintf(why, why_len, "%s: HTTP status %ld", url, rq.status);
			ret = rq.status == 401 || rq.status == 403 ? -EACCES : -EIO;
		} else if (!ret) {
			seen->pages++;
			ret = tags_page(r, rq.body_out, rq.body_out_len, fn, arg, seen, why, why_len);
			if (!ret)
				ret = tags_next(r, &rq, url, &next, why, why_len);
			if (next && !strcmp(next, url)) { /* a page naming itself: no end */
				seen->truncated = true;
				free(next);
				next = NULL;
			}
		}
		http_req_clear(&rq);
		free(url);
		url = next;
		next = NULL;
	}
	free(url);
	return ret;
}

int remote_obj_put(struct remote *r, const char *rel, const void *body, size_t len,
		   const char *ctype, const char *what, char *why, size_t why_len)
{
	char *url = remote_obj_url(r, rel);
	int ret;

	if (!url)
		return -ENOMEM;
	ret = remote_send(r, "PUT", url, body, len, ctype, 0, 0, what, NULL, why, why_len);
	free(url);
	return ret;
}

int remote_obj_delete(struct remote *r, const char *rel, const char *what, char *why,
		      size_t why_len)
{
	struct http_req rq = { 0 };
	char aw[WHY_MAX] = "";
	char *url = remote_obj_url(r, rel);
	int ret;

	if (!url)
		return -ENOMEM;
	rq.method = "DELETE";
	rq.url = url;
	rq.max_body = 1u << 20;
	ret = remote_do(r, &rq, r->retries, aw, sizeof(aw));
	if (ret == -EACCES)
		why_set(why, why_len, ret, "%s: %s", what, aw);
	else if (ret == -EIO || (!ret && rq.status != 404 &&
				 (rq.status < 200 || rq.status > 299)))
		ret = why_set(why, why_len, -EIO, "%s: DELETE %s: %s", what, url,
			      ret ? (rq.err[0] ? rq.err : "no answer") : "refused");
	http_req_clear(&rq);
	free(url);
	return ret;
}

int remote_blob_put(struct remote *r, const uint8_t digest[SHA256_LEN], const void *data,
		    size_t len, const char *what, char *why, size_t why_len)
{
	if (!remote_is_oci(r))
		return -EINVAL;
	return remote_oci_blob_put(r, digest, data, len, what, why, why_len);
}
