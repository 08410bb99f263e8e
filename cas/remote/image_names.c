/* SPDX-License-Identifier: MIT */
/*
 * The names of an http(s) store's images (image_ref.h): images/NAME/image.json is the image;
 * images/index.json lists the names for servers that cannot list a directory. A push writes
 * image.json, then index.json read, merged and written again, which two pushes at once may
 * each do from the same old copy: so the names are those of index.json and, where the server
 * lists directories, every images/NAME/ as well (and each push writes back both).
 */
#include "image_ref.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../oci_json.h"
#include "../../common/why.h"

struct names {
	char **v;
	size_t n;
};

static int names_add(struct names *x, const char *name)
{
	char **v;

	for (size_t i = 0; i < x->n; i++)
		if (!strcmp(x->v[i], name))
			return 0;
	v = realloc(x->v, (x->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	x->v = v;
	if (!(x->v[x->n] = strdup(name)))
		return -ENOMEM;
	x->n++;
	return 0;
}

static int listed_one(void *arg, const struct remote_dirent *e)
{
	return e->dir && image_name_valid(e->name) ? names_add(arg, e->name) : 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int image_names_http(struct remote *r, const char *also, char ***names, size_t *n,
		     bool *listed, char *why, size_t why_len)
{
	struct names x = { 0 };
	char jw[WHY_MAX] = "";
	uint8_t *buf = NULL;
	char **v = NULL;
	size_t len, k = 0;
	int ret;

	*names = NULL;
	*n = 0;
	if (listed)
		*listed = false;
	ret = remote_obj_get(r, "images/index.json", "application/json", OCI_JSON_INDEX_MAX, &buf,
			     &len, why, why_len);
	if (ret == -ENOENT)
		ret = 0;
	else if (!ret && (ret = image_names_parse((const char *)buf, len, &v, &k, jw, sizeof(jw))))
		snprintf(why, why_len, "%simages/index.json: %s", remote_url(r), jw);
	free(buf);
	for (size_t i = 0; !ret && i < k; i++)
		ret = names_add(&x, v[i]);
	image_names_free(v, k);
	if (!ret && also)
		ret = names_add(&x, also);
	if (!ret) {
		ret = remote_list(r, "images/", listed_one, &x, NULL, why, why_len);
		if (!ret && listed)
			*listed = true;
		if (ret == -ENOENT || ret == -EOPNOTSUPP)
			ret = 0; /* no image yet, or a server that lists nothing: index.json it is */
	}
	if (ret == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	if (ret) {
		image_names_free(x.v, x.n);
		return ret;
	}
	if (x.n)
		qsort(x.v, x.n, sizeof(*x.v), name_cmp);
	*names = x.v;
	*n = x.n;
	return 0;
}
