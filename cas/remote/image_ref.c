/* SPDX-License-Identifier: MIT */
/* Images by reference (image_ref.h): parsing a reference, fetching an image's layouts. */
#include "image_ref.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/sha256.h"
#include "../../common/why.h"
#include "../oci_json.h"
#include "remote_int.h"

bool image_ref_is(const char *arg)
{
	static const char *const schemes[] = { "oci://", "oci+http://", "oci+https://",
					       "http://", "https://" };

	for (size_t i = 0; i < sizeof(schemes) / sizeof(*schemes); i++)
		if (!strncmp(arg, schemes[i], strlen(schemes[i])))
			return true;
	return false;
}

void image_ref_free(struct image_ref *ref)
{
	free(ref->chunk_url);
	free(ref->name);
	memset(ref, 0, sizeof(*ref));
}

static int ref_parse_oci(const char *url, struct image_ref *ref, char *why, size_t why_len)
{
	const char *path = strstr(url, "://") + 3, *at, *colon;

	path = strchr(path, '/');
	at = path ? strchr(path, '@') : NULL;
	colon = path ? strrchr(path, ':') : NULL;
	if (at && at[1]) {
		ref->name = strdup(at + 1);
	} else if (!at && colon && colon[1] && !strchr(colon, '/')) {
		ref->name = strdup(colon + 1);
	} else {
		return why_set(why, why_len, -EINVAL, "an OCI image reference is oci://HOST[:PORT]/REPO:TAG or "
			"REPO@sha256:<hex>");
	}
	ref->chunk_url = strdup(url);
	if (!ref->name || !ref->chunk_url)
		return -ENOMEM;
	return 0;
}

static int ref_parse_http(const char *url, struct image_ref *ref, char *why, size_t why_len)
{
	const char *p = strstr(url, "/images/"), *next;

	/* the last "/images/" of the URL */
	while (p && (next = strstr(p + 1, "/images/")))
		p = next;
	if (!p || strchr(p + 8, '/') || strpbrk(url, "?#") || !image_name_valid(p + 8) ||
	    p < strstr(url, "://") + 3 || !strchr(strstr(url, "://") + 3, '/') ||
	    strchr(strstr(url, "://") + 3, '/') > p)
		return why_set(why, why_len, -EINVAL, "an HTTP image reference is "
			"http(s)://HOST[:PORT]/PATH/images/NAME "
		       "(NAME: [a-z0-9][a-z0-9._-]*)");
	ref->name = strdup(p + 8);
	ref->chunk_url = strndup(url, (size_t)(p - url) + 1);
	if (!ref->name || !ref->chunk_url)
		return -ENOMEM;
	return 0;
}

int image_ref_parse(const char *url, struct image_ref *ref, char *why, size_t why_len)
{
	int ret;

	memset(ref, 0, sizeof(*ref));
	if (!image_ref_is(url))
		return why_set(why, why_len, -EINVAL, "not an image reference (oci://HOST/REPO:TAG "
			       "or http(s)://HOST/PATH/images/NAME)");
	ref->oci = !strncmp(url, "oci", 3);
	ret = ref->oci ? ref_parse_oci(url, ref, why, why_len)
		       : ref_parse_http(url, ref, why, why_len);
	if (ret)
		image_ref_free(ref);
	return ret;
}

/* ------------------------------------------------------------------ fetching */

struct fetch_ctx {
	struct remote *r;
	const char *dir;           /* STORE/layouts */
	const struct image_ref *ref;
	const char *repo;          /* oci */
	char *why;
	size_t why_len;
};

/* The image's document into *d. */
static int fetch_desc(struct fetch_ctx *x, struct image_desc *d)
{
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t *buf = NULL, man[SHA256_LEN], sum[SHA256_LEN], want[SHA256_LEN];
	char jw[WHY_MAX] = "";
	uint64_t msize;
	size_t len;
	int ret;

	if (!x->ref->oci) {
		snprintf(rel, sizeof(rel), "images/%s/image.json", x->ref->name);
		ret = remote_obj_get(x->r, rel, "application/json", OCI_JSON_MANIFEST_MAX, &buf,
				     &len, x->why, x->why_len);
		if (ret == -ENOENT)
			snprintf(x->why, x->why_len, "no image %s at %s (no %s)", x->ref->name,
				 x->ref->chunk_url, rel);
		if (ret)
			return ret;
		ret = image_json_parse((const char *)buf, len, d, jw, sizeof(jw));
		if (ret)
			snprintf(x->why, x->why_len, "%s%s: %s", x->ref->chunk_url, rel, jw);
		free(buf);
		return ret;
	}
	snprintf(rel, sizeof(rel), "v2/%s/manifests/%s", x->repo, x->ref->name);
	ret = remote_obj_get(x->r, rel, OCI_MT_INDEX ", " OCI_MT_MANIFEST, OCI_JSON_INDEX_MAX,
			     &buf, &len, x->why, x->why_len);
	if (ret == -ENOENT)
		snprintf(x->why, x->why_len, "%s: no such %s in the registry", x->ref->chunk_url,
			 strncmp(x->ref->name, "sha256:", 7) ? "tag" : "digest");
	if (ret)
		return ret;
	ret = -EBADMSG;
	if (!oci_digest_parse(x->ref->name, want) &&
	    (sha256_buf(buf, len, sum) || memcmp(sum, want, SHA256_LEN))) {
		snprintf(x->why, x->why_len, "%s: the registry sent a document that is not %s",
			 x->ref->chunk_url, x->ref->name);
		goto out;
	}
	ret = image_oci_index_parse((const char *)buf, len, man, &msize, jw, sizeof(jw));
	if (ret) {
		snprintf(x->why, x->why_len, "%s: %s", x->ref->chunk_url, jw);
		goto out;
	}
	free(buf);
	buf = NULL;
	sha256_to_hex(man, hex);
	snprintf(rel, sizeof(rel), "v2/%s/manifests/sha256:%s", x->repo, hex);
	ret = remote_obj_get(x->r, rel, OCI_MT_MANIFEST, OCI_JSON_MANIFEST_MAX, &buf, &len,
			     x->why, x->why_len);
	if (ret)
		goto out;
	ret = -EBADMSG;
	if (len != msize || sha256_buf(buf, len, sum) || memcmp(sum, man, SHA256_LEN)) {
		snprintf(x->why, x->why_len, "%s: the image manifest sha256:%s does not match its "
			 "digest", x->ref->chunk_url, hex);
		goto out;
	}
	ret = image_oci_manifest_parse((const char *)buf, len, d, jw, sizeof(jw));
	if (ret)
		snprintf(x->why, x->why_len, "%s: image manifest sha256:%s: %s", x->ref->chunk_url,
			 hex, jw);
out:
	free(buf);
	return ret;
}

/* A file being fetched: written as it arrives, hashed as it arrives. */
struct stream {
	int fd;
	struct sha256_ctx *sha;
	uint64_t len, max;           /* bytes so far, and the most there may be */
	uint8_t head[4096];          /* the layout's header block, for its layout digest */
	bool too_big;
	int err;
};

/* Before each attempt: start over. */
static void stream_restart(void *arg)
{
	struct stream *s = arg;
	uint8_t junk[SHA256_LEN];

	if (s->len && (ftruncate(s->fd, 0) < 0 || sha256_final(s->sha, junk)))
		s->err = -EIO;
	s->len = 0;
	s->too_big = false;
}

static int stream_sink(void *arg, const void *p, size_t len)
{
	struct stream *s = arg;

	if (s->err)
		return 1;
	if (len > s->max - s->len) {
		s->too_big = true;
		return 1;
	}
	if (s->len < sizeof(s->head))
		memcpy(s->head + s->len, p,
		       len < sizeof(s->head) - s->len ? len : sizeof(s->head) - s->len);
	s->err = fs_pwrite_full(s->fd, p, len, (off_t)s->len);
	if (!s->err)
		s->err = sha256_update(s->sha, p, len);
	s->len += len;
	return s->err ? 1 : 0;
}

/* Whether what arrived is f: its size, its sha256 and, for a layout, its layout digest. */
static bool stream_matches(struct stream *s, const struct image_file *f, bool layout)
{
	uint8_t sum[SHA256_LEN];

	if (s->len != f->size || sha256_final(s->sha, sum) || memcmp(sum, f->sha, SHA256_LEN))
		return false;
	return !layout || (s->len >= sizeof(s->head) && !sha256_buf(s->head, sizeof(s->head), sum) &&
			   !memcmp(sum, f->digest, SHA256_LEN));
}

/*
 * Whether the file at path is f already (read through the same checks as a fetch). A FIFO
 * or a device there is not opened (it is replaced by the fetch). A file reused has its mtime
 * set to now, so that cas gc's grace period keeps it as it keeps a file just fetched.
 */
static bool file_present(const char *path, const struct image_file *f, bool layout)
{
	struct stream s = { .fd = -1 };
	uint8_t buf[1 << 16];
	struct stat st;
	bool ok = false;
	ssize_t n;
	int fd = fs_open_regular(AT_FDCWD, path, O_NOFOLLOW, &st);

	if (fd < 0)
		return false;
	if ((uint64_t)st.st_size != f->size || !(s.sha = sha256_new()))
		goto out;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		if (s.len < sizeof(s.head))
			memcpy(s.head + s.len, buf, (size_t)n < sizeof(s.head) - s.len
						    ? (size_t)n : sizeof(s.head) - s.len);
		if (sha256_update(s.sha, buf, (size_t)n))
			goto out;
		s.len += (uint64_t)n;
	}
	ok = !n && stream_matches(&s, f, layout);
	if (ok)
		futimens(fd, NULL); /* in use now (as a chunk's store_touch); best effort */
out:
	sha256_free(s.sha);
	close(fd);
	return ok;
}

/*
 * One file of the image into dest: streamed into a temporary file beside it, checked, made
 * durable, renamed into place.
 */
static int fetch_file(struct fetch_ctx *x, const struct image_file *f, bool layout,
		      const char *dest, struct image_fetched *out)
{
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1], shex[SHA256_HEX_LEN + 1], tmp[PATH_MAX + 16];
	const char *what = layout ? "layout" : "manifest";
	struct stream s = { .fd = -1, .max = f->size };
	struct remote_sink sink = { stream_sink, stream_restart, &s };
	int ret;

	if (file_present(dest, f, layout))
		return 0;
	sha256_to_hex(f->digest, hex);
	sha256_to_hex(f->sha, shex);
	if (f->size > IMAGE_FILE_MAX) {
		snprintf(x->why, x->why_len, "%s %s: %llu bytes, more than lazyblk fetches", what,
			 hex, (unsigned long long)f->size);
		return -EFBIG;
	}
	if (x->ref->oci)
		snprintf(rel, sizeof(rel), "v2/%s/blobs/sha256:%s", x->repo, shex);
	else if (layout)
		snprintf(rel, sizeof(rel), "layouts/%s.layout", hex);
	else
		snprintf(rel, sizeof(rel), "manifests/%s.manifest", hex);
	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", dest);
	s.fd = fs_mkstemp(tmp, 0, FS_DATA_MODE);
	s.sha = sha256_new();
	if (s.fd < 0 || !s.sha) {
		ret = s.fd < 0 ? s.fd : -ENOMEM;
		snprintf(x->why, x->why_len, "%s: %s", s.fd < 0 ? tmp : "sha256", strerror(-ret));
		goto out;
	}
	/* at most the promised size: a longer file is refused, not cut */
	ret = remote_obj_stream(x->r, rel, &sink, x->why, x->why_len);
	if (s.too_big) {
		ret = -EBADMSG;
	} else if (s.err) {
		ret = s.err;
		snprintf(x->why, x->why_len, "%s: %s", tmp, strerror(-ret));
	}
	if (!ret && !stream_matches(&s, f, layout)) {
		snprintf(x->why, x->why_len, "%s%s: the %s is corrupt or truncated (%llu bytes, "
			 "want %llu with sha256:%s%s%s): refused", x->ref->oci ? "" : x->ref->chunk_url,
			 x->ref->oci ? x->ref->chunk_url : rel, what, (unsigned long long)s.len,
			 (unsigned long long)f->size, shex, layout ? ", layout digest sha256:" : "",
			 layout ? hex : "");
		ret = -EBADMSG;
	} else if (ret == -EBADMSG) {
		snprintf(x->why, x->why_len, "%s%s: the %s is larger than its %llu bytes: refused",
			 x->ref->oci ? "" : x->ref->chunk_url, x->ref->oci ? x->ref->chunk_url : rel,
			 what, (unsigned long long)f->size);
	}
	if (!ret && (fsync(s.fd) < 0 || rename(tmp, dest) < 0)) {
		ret = -errno;
		snprintf(x->why, x->why_len, "%s: %s", dest, strerror(-ret));
	}
	if (!ret) {
		fs_fsync_dir(x->dir);
		out->fetched++;
		out->fetched_bytes += s.len;
	}
out:
	if (s.fd >= 0) {
		close(s.fd);
		if (ret)
			unlink(tmp);
	}
	sha256_free(s.sha);
	return ret;
}

static int fetch_files(struct fetch_ctx *x, const char *store_dir, struct image_fetched *out)
{
	char dir[PATH_MAX], path[PATH_MAX + 80], hex[SHA256_HEX_LEN + 1];
	uint64_t total = 0;
	int ret;

	/*
	 * What one image may put in STORE/layouts, before anything is fetched (no overflow: at
	 * most 65 sizes, each counted as at most IMAGE_FILE_MAX + 1).
	 */
	for (unsigned i = 0; i <= out->d.n_layouts; i++) {
		uint64_t n = i < out->d.n_layouts ? out->d.layouts[i].size
			     : out->d.has_manifest ? out->d.manifest.size : 0;

		total += n < IMAGE_FILE_MAX ? n : IMAGE_FILE_MAX + 1;
	}
	if (total > IMAGE_FILE_MAX) {
		snprintf(x->why, x->why_len, "image %s at %s: its files are more than %llu bytes in "
			 "all, more than lazyblk fetches", x->ref->name, x->ref->chunk_url,
			 (unsigned long long)IMAGE_FILE_MAX);
		return -EFBIG;
	}

	snprintf(dir, sizeof(dir), "%s/layouts", store_dir);
	x->dir = dir;
	ret = fs_mkdir_p(dir, 0755);
	if (ret) {
		snprintf(x->why, x->why_len, "%s: %s", dir, strerror(-ret));
		return ret;
	}
	for (unsigned i = 0; i < out->d.n_layouts; i++) {
		sha256_to_hex(out->d.layouts[i].digest, hex);
		snprintf(path, sizeof(path), "%s/%s.layout", dir, hex);
		ret = fetch_file(x, &out->d.layouts[i], true, path, out);
		if (ret)
			return ret;
		if (!i && !(out->layout = strdup(path)))
			return -ENOMEM;
	}
	if (!out->d.has_manifest)
		return 0;
	sha256_to_hex(out->d.layouts[0].digest, hex);
	snprintf(path, sizeof(path), "%s/%s.manifest", dir, hex);
	ret = fetch_file(x, &out->d.manifest, false, path, out);
	if (!ret && !(out->manifest = strdup(path)))
		ret = -ENOMEM;
	return ret;
}

/* The snapshot document, checked against its size and sha256, into out->snapdoc. */
static int fetch_snapdoc(struct fetch_ctx *x, struct image_fetched *out)
{
	const struct image_file *f = &out->d.snapshot;
	char rel[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t sum[SHA256_LEN];
	int ret;

	sha256_to_hex(f->sha, hex);
	if (x->ref->oci)
		snprintf(rel, sizeof(rel), "v2/%s/blobs/sha256:%s", x->repo, hex);
	else
		snprintf(rel, sizeof(rel), "snapshots/%s.json", hex);
	ret = remote_obj_get(x->r, rel, x->ref->oci ? NULL : "application/json", IMAGE_SNAPDOC_MAX,
			     &out->snapdoc, &out->snapdoc_len, x->why, x->why_len);
	if (ret == -ENOENT || ret == -EFBIG)
		snprintf(x->why, x->why_len, "%s: the snapshot document sha256:%s is %s", x->ref->chunk_url,
			 hex, ret == -ENOENT ? "missing" : "larger than 64 KiB");
	if (ret)
		return ret == -EFBIG ? -EBADMSG : ret;
	if (out->snapdoc_len != f->size || sha256_buf(out->snapdoc, out->snapdoc_len, sum) ||
	    memcmp(sum, f->sha, SHA256_LEN)) {
		snprintf(x->why, x->why_len, "%s: the snapshot document is corrupt or truncated (%zu "
			 "bytes, want %llu with sha256:%s): refused", x->ref->chunk_url,
			 out->snapdoc_len, (unsigned long long)f->size, hex);
		return -EBADMSG;
	}
	out->fetched++;
	out->fetched_bytes += out->snapdoc_len;
	return 0;
}

/* The kind wanted, else -EMEDIUMTYPE with the line that says what to do instead. */
static int fetch_kind(struct fetch_ctx *x, const char *url, enum image_want want,
		      const struct image_desc *d)
{
	if (want == IMAGE_WANT_IMAGE && d->has_snapshot)
		return why_set(x->why, x->why_len, -EMEDIUMTYPE, "%s is a VM snapshot, not a disk "
			       "image: resume it with lazyblk run --restore %s", url, url);
	if (want == IMAGE_WANT_SNAPSHOT && !d->has_snapshot)
		return why_set(x->why, x->why_len, -EMEDIUMTYPE, "%s is a disk image, not a VM "
			       "snapshot: serve it with lazyblk serve %s", url, url);
	return 0;
}

int image_fetch(const struct remote_opts *o, const char *store_dir, struct image_fetched *out,
		char *why, size_t why_len)
{
	return image_fetch_as(o, store_dir, IMAGE_WANT_IMAGE, out, why, why_len);
}

int image_fetch_as(const struct remote_opts *o, const char *store_dir, enum image_want want,
		   struct image_fetched *out, char *why, size_t why_len)
{
	struct image_ref ref;
	struct remote_opts ro = *o;
	struct fetch_ctx x = { .ref = &ref, .why = why, .why_len = why_len };
	char w[WHY_MAX] = "";
	int ret;

	memset(out, 0, sizeof(*out));
	if (why_len)
		why[0] = '\0';
	ret = image_ref_parse(o->url, &ref, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", o->url, w[0] ? w : strerror(-ret));
		return ret;
	}
	ro.url = ref.chunk_url;
	ro.push = false;
	ret = remote_open(&ro, &x.r, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", o->url, w[0] ? w : strerror(-ret));
		goto out;
	}
	x.repo = remote_is_oci(x.r) ? remote_oci_repo(x.r) : NULL;
	ret = fetch_desc(&x, &out->d);
	if (!ret)
		ret = fetch_kind(&x, o->url, want, &out->d);
	if (!ret && out->d.has_snapshot)
		ret = fetch_snapdoc(&x, out);
	if (!ret)
		ret = fetch_files(&x, store_dir, out);
	if (!ret && !(out->chunk_url = strdup(ref.chunk_url)))
		ret = -ENOMEM;
	if (ret == -ENOMEM && why_len)
		snprintf(why, why_len, "out of memory");
out:
	remote_close(x.r);
	image_ref_free(&ref);
	if (ret)
		image_fetched_free(out);
	return ret;
}

void image_fetched_free(struct image_fetched *f)
{
	free(f->layout);
	free(f->manifest);
	free(f->chunk_url);
	free(f->snapdoc);
	memset(f, 0, sizeof(*f));
}
