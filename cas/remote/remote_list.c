/* SPDX-License-Identifier: MIT */
/* A directory of an http(s) store, through the server's JSON index (remote.h: remote_list). */
#include "remote_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../oci_json.h"

/* The entries of a JSON index (nginx: [{"name":..,"type":..,"mtime":..,"size":..}, ...]). */
static int list_entries(struct json_object *root, int (*fn)(void *arg,
			const struct remote_dirent *e), void *arg)
{
	int ret = 0;

	for (size_t i = 0; !ret && i < json_object_array_length(root); i++) {
		struct json_object *o = json_object_array_get_idx(root, i), *sz;
		const char *type = oci_json_str(o, "type");
		struct remote_dirent e = { .name = oci_json_str(o, "name"), .size = -1 };

		if (!e.name || !type || !*e.name || strchr(e.name, '/'))
			continue;
		e.dir = !strcmp(type, "directory");
		if (!e.dir && strcmp(type, "file"))
			continue; /* a link, or something else lazyblk never writes */
		e.mtime = http_date_parse(oci_json_str(o, "mtime"));
		sz = oci_json_get(o, "size", json_type_int);
		if (sz && json_object_get_int64(sz) >= 0)
			e.size = json_object_get_int64(sz);
		ret = fn(arg, &e);
	}
	return ret;
}

int remote_list(struct remote *r, const char *rel,
		int (*fn)(void *arg, const struct remote_dirent *e), void *arg, int64_t *now,
		char *why, size_t why_len)
{
	struct http_req rq = { 0 };
	struct json_object *root = NULL;
	char *url = remote_obj_url(r, rel);
	int64_t date;
	int ret;

	if (!url)
		return -ENOMEM;
	rq.accept = "application/json";
	ret = remote_obj_fetch(r, &rq, url, OCI_JSON_INDEX_MAX, why, why_len);
	if (!ret && rq.status == 404) {
		snprintf(why, why_len, "%s: not found", url);
		ret = -ENOENT;
	} else if (!ret && rq.status == 401) {
		snprintf(why, why_len, "%s: access refused", url);
		ret = -EACCES;
	} else if (!ret && rq.status != 200) {
		snprintf(why, why_len, "%s: HTTP status %ld: the server must list directories as "
			 "JSON (nginx: autoindex on; autoindex_format json;)", url, rq.status);
		ret = -EOPNOTSUPP;
	} else if (!ret) {
		oci_json_parse((const char *)rq.body_out, rq.body_out_len, OCI_JSON_INDEX, &root,
			       NULL, 0);
		if (!root || !json_object_is_type(root, json_type_array)) {
			snprintf(why, why_len, "%s: the server does not list directories as JSON "
				 "(nginx: autoindex on; autoindex_format json;)", url);
			ret = -EOPNOTSUPP;
		}
	}
	date = http_date_parse(rq.date);
	if (now)
		*now = date >= 0 ? date : (int64_t)time(NULL);
	if (!ret && fn)
		ret = list_entries(root, fn, arg);
	json_object_put(root);
	http_req_clear(&rq);
	free(url);
	return ret;
}
