/* SPDX-License-Identifier: MIT */
/* The images of a remote (image_ref.h, lazyblk images ls). */
#include "image_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "../../common/grow.h"
#include "../../common/why.h"
#include "../oci_json.h"
#include "remote_int.h"

struct lister {
	struct remote *r;
	const char *repo;
	struct image_entry *v;
	size_t n, cap;
	struct remote_tags tags; /* what of the tag list was not seen */
	char *why;
	size_t why_len;
};

static int add_entry(struct lister *x, const char *name, const struct image_desc *d)
{
	if (!grow((void **)&x->v, &x->cap, x->n + 1, sizeof(*x->v)))
		return -ENOMEM;
	x->v[x->n].name = strdup(name);
	if (!x->v[x->n].name)
		return -ENOMEM;
	x->v[x->n++].d = *d;
	return 0;
}

/* One tag: added when it is a lazyblk image, skipped when it is something else. */
static int list_tag(void *arg, const char *tag)
{
	struct lister *x = arg;
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t *buf = NULL, man[SHA256_LEN], sum[SHA256_LEN];
	struct image_desc d;
	char jw[WHY_MAX] = "";
	uint64_t size;
	size_t len;
	int ret;

	snprintf(rel, sizeof(rel), "v2/%s/manifests/%s", x->repo, tag);
	ret = remote_obj_get(x->r, rel, OCI_MT_INDEX ", " OCI_MT_MANIFEST, OCI_JSON_INDEX_MAX,
			     &buf, &len, x->why, x->why_len);
	if (ret)
		return ret == -ENOENT ? 0 : ret; /* deleted meanwhile */
	ret = image_oci_index_parse((const char *)buf, len, man, &size, jw, sizeof(jw));
	free(buf);
	buf = NULL;
	if (ret)
		return ret == -ENOENT || ret == -EBADMSG ? 0 : ret; /* not ours */
	sha256_to_hex(man, hex);
	snprintf(rel, sizeof(rel), "v2/%s/manifests/sha256:%s", x->repo, hex);
	ret = remote_obj_get(x->r, rel, OCI_MT_MANIFEST, OCI_JSON_MANIFEST_MAX, &buf, &len,
			     x->why, x->why_len);
	if (!ret && (len != size || sha256_buf(buf, len, sum) || memcmp(sum, man, SHA256_LEN))) {
		snprintf(x->why, x->why_len, "%s: tag %s: the image manifest does not match its "
			 "digest", remote_url(x->r), tag);
		ret = -EBADMSG;
	}
	if (!ret && image_oci_manifest_parse((const char *)buf, len, &d, jw, sizeof(jw))) {
		snprintf(x->why, x->why_len, "%s: tag %s: %s", remote_url(x->r), tag, jw);
		ret = -EBADMSG;
	}
	free(buf);
	return ret ? ret : add_entry(x, tag, &d);
}

static int list_oci(struct lister *x)
{
	return remote_obj_tags(x->r, x->repo, list_tag, x, &x->tags, x->why, x->why_len);
}

static int list_http(struct lister *x)
{
	char rel[PATH_MAX], **names = NULL;
	char jw[WHY_MAX] = "";
	uint8_t *buf = NULL;
	size_t len, n = 0;
	int ret;

	ret = image_names_http(x->r, NULL, &names, &n, NULL, x->why, x->why_len);
	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < n; i++) {
		struct image_desc d;

		snprintf(rel, sizeof(rel), "images/%s/image.json", names[i]);
		ret = remote_obj_get(x->r, rel, "application/json", OCI_JSON_MANIFEST_MAX, &buf,
				     &len, x->why, x->why_len);
		if (ret == -ENOENT) {
			ret = 0; /* listed, not (or no longer) there */
			continue;
		}
		if (!ret && image_json_parse((const char *)buf, len, &d, jw, sizeof(jw))) {
			snprintf(x->why, x->why_len, "%s%s: %s", remote_url(x->r), rel, jw);
			ret = -EBADMSG;
		}
		free(buf);
		buf = NULL;
		if (!ret)
			ret = add_entry(x, names[i], &d);
	}
	image_names_free(names, n);
	return ret;
}

int image_list(const struct remote_opts *o, struct image_entry **out, size_t *n,
	       struct remote_tags *tags, char *why, size_t why_len)
{
	struct lister x = { .why = why, .why_len = why_len };
	struct remote_opts ro = *o;
	char w[WHY_MAX] = "";
	int ret;

	*out = NULL;
	*n = 0;
	memset(tags, 0, sizeof(*tags));
	if (why_len)
		why[0] = '\0';
	ro.push = false;
	ret = remote_open(&ro, &x.r, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", o->url, w[0] ? w : strerror(-ret));
		return ret;
	}
	x.repo = remote_is_oci(x.r) ? remote_oci_repo(x.r) : NULL;
	ret = x.repo ? list_oci(&x) : list_http(&x);
	remote_close(x.r);
	if (ret == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	if (ret) {
		image_list_free(x.v, x.n);
		return ret;
	}
	*out = x.v;
	*n = x.n;
	*tags = x.tags;
	return 0;
}

void image_list_free(struct image_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}
