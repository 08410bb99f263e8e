/* SPDX-License-Identifier: MIT */
/*
 * Media types, diff_ids, archive paths and verified blob/layer reading for OCI layouts and
 * docker-archive tarballs.
 *
 * A layer is read through two libarchive readers chained by callbacks:
 *
 *   blob file --pread--> [raw format + decompression filter] --data--> [tar format]
 *        sha256 of the blob ^                     sha256 of the tar ^   → import_tar_archive
 *
 * so one pass over the blob checks both its descriptor digest and the config's diff_id,
 * and nothing is skipped unhashed (neither reader has a skip callback).
 */
#include "oci_blob.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "../../common/dl_archive.h"
#include "../../common/esc.h"
#include "../../common/fsutil.h"

#define LAYER_BUF_SIZE (1u << 20)

static const struct {
	const char *type;
	enum oci_compression comp;
} layer_types[] = {
	{ "application/vnd.oci.image.layer.v1.tar", OCI_COMP_NONE },
	{ "application/vnd.oci.image.layer.v1.tar+gzip", OCI_COMP_GZIP },
	{ "application/vnd.oci.image.layer.v1.tar+zstd", OCI_COMP_ZSTD },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_COMP_NONE },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_COMP_GZIP },
	{ "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_COMP_ZSTD },
	{ "application/vnd.docker.image.rootfs.diff.tar", OCI_COMP_NONE },
	{ "application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_COMP_GZIP },
	{ "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", OCI_COMP_GZIP },
};

int oci_layer_media_type(const char *media_type, enum oci_compression *comp)
{
	for (size_t i = 0; media_type && i < sizeof(layer_types) / sizeof(layer_types[0]); i++) {
		if (!strcmp(media_type, layer_types[i].type)) {
			*comp = layer_types[i].comp;
			return 0;
		}
	}
	return -ENOTSUP;
}

int oci_config_diff_ids(struct import_ctx *ic, struct json_object *config, size_t n,
			uint8_t (*diff_ids)[SHA256_LEN], bool *have, const char *label)
{
	struct json_object *rootfs = oci_json_get(config, "rootfs", json_type_object), *list;
	char pb[160];

	*have = false;
	if (!rootfs || !json_object_object_get_ex(rootfs, "diff_ids", &list))
		return 0;
	if (!json_object_is_type(list, json_type_array) || json_object_array_length(list) != n)
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: config lists %zu diff_ids for %zu layers",
				 label, json_object_is_type(list, json_type_array) ?
						json_object_array_length(list) : 0, n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *d = json_object_array_get_idx(list, i);
		const char *s = json_object_get_string(d);

		if (!json_object_is_type(d, json_type_string) || oci_digest_parse(s, diff_ids[i]))
			return why_first(ic->why, ic->why_len, -EBADMSG,
					 "%s: config: bad diff_id %zu '%s'", label,
					 i + 1, esc_str(s, pb, sizeof(pb)));
	}
	*have = true;
	return 0;
}

/* Append the components of p to out[0..*n), resolving "." and "..". */
static int path_push(const char *p, char *out, size_t len, size_t *n)
{
	while (*p) {
		const char *s = p;
		size_t clen;

		while (*p && *p != '/')
			p++;
		clen = (size_t)(p - s);
		while (*p == '/')
			p++;
		if (clen == 0 || (clen == 1 && s[0] == '.'))
			continue;
		if (clen == 2 && s[0] == '.' && s[1] == '.') {
			if (*n == 0)
				return -EINVAL;
			while (*n > 0 && out[*n - 1] != '/')
				(*n)--;
			if (*n > 0)
				(*n)--; /* the '/' before the popped component */
			out[*n] = '\0';
			continue;
		}
		if (*n + (*n ? 1 : 0) + clen + 1 > len)
			return -ENAMETOOLONG;
		if (*n)
			out[(*n)++] = '/';
		memcpy(out + *n, s, clen);
		*n += clen;
		out[*n] = '\0';
	}
	return 0;
}

int oci_path_normalize(const char *base, const char *path, char *out, size_t len)
{
	size_t n = 0;
	int ret;

	if (!len)
		return -ENAMETOOLONG;
	out[0] = '\0';
	if (base && path[0] != '/') {
		ret = path_push(base, out, len, &n);
		if (ret)
			return ret;
	}
	return path_push(path, out, len, &n);
}

/* fstat a blob that must be a regular file; a reason naming `what` otherwise. */
static int blob_stat(struct import_ctx *ic, int fd, struct stat *st, const char *what)
{
	int ret;

	if (fstat(fd, st) < 0) {
		ret = -errno;
		return why_first(ic->why, ic->why_len, ret, "%s: %s", what, strerror(-ret));
	}
	if (!S_ISREG(st->st_mode))
		return why_first(ic->why, ic->why_len, -EINVAL, "%s: not a regular file", what);
	return 0;
}

int oci_blob_read(struct import_ctx *ic, int fd, uint64_t size, const uint8_t *digest,
		  size_t max, char **out, size_t *out_len, const char *what)
{
	uint8_t got[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1];
	struct stat st;
	char *buf;
	int ret;

	ret = blob_stat(ic, fd, &st, what);
	if (ret)
		return ret;
	if (size != OCI_SIZE_UNKNOWN && (uint64_t)st.st_size != size)
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: size mismatch: blob is %lld bytes, descriptor says %llu",
				 what, (long long)st.st_size, (unsigned long long)size);
	if ((uint64_t)st.st_size > max)
		return why_first(ic->why, ic->why_len, -EFBIG,
				 "%s: %lld bytes, more than the %zu allowed", what,
				 (long long)st.st_size, max);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM; /* import_run reports it */
	ret = fs_pread_full(fd, buf, (size_t)st.st_size, 0);
	if (!ret)
		ret = sha256_buf(buf, (size_t)st.st_size, got);
	if (ret) {
		free(buf);
		return why_first(ic->why, ic->why_len, ret, "%s: %s", what,
				 ret == -EIO ? "read error or file shrank" : strerror(-ret));
	}
	if (digest && memcmp(got, digest, SHA256_LEN)) {
		sha256_to_hex(got, hex);
		free(buf);
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: digest mismatch: content is sha256:%s", what,
				 hex);
	}
	buf[st.st_size] = '\0';
	*out = buf;
	*out_len = (size_t)st.st_size;
	return 0;
}

/* ---------------------------------------------------------------- layers */

struct layer_io {
	const struct oci_layer_src *src;
	uint8_t *buf;
	uint64_t off;                 /* blob bytes read and hashed */
	struct sha256_ctx *blob_sha;
	struct archive *raw;          /* decompressed view of the blob */
	uint64_t raw_off;             /* decompressed bytes handed to the tar reader */
	struct sha256_ctx *diff_sha;  /* NULL: not compressed, the tar is the blob itself */
	bool raw_eof;
};

/* Next piece of the blob, hashed. 0 at EOF, -1 with an error set on a. */
static la_ssize_t blob_read(struct archive *a, void *p, const void **out)
{
	struct layer_io *io = p;
	uint64_t limit = io->src->size;
	ssize_t n;

	do
		n = pread(io->src->fd, io->buf, LAYER_BUF_SIZE, (off_t)io->off);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		sym_archive_set_error(a, errno, "reading the blob: %s", strerror(errno));
		return -1;
	}
	if (limit != OCI_SIZE_UNKNOWN && io->off + (uint64_t)n > limit) {
		sym_archive_set_error(a, EFBIG, "size mismatch: blob is larger than the %llu bytes "
				  "its descriptor says", (unsigned long long)limit);
		return -1;
	}
	if (n && sha256_update(io->blob_sha, io->buf, (size_t)n)) {
		sym_archive_set_error(a, EIO, "sha256 failed");
		return -1;
	}
	io->off += (uint64_t)n;
	*out = io->buf;
	return n;
}

/* Next piece of the uncompressed tar, hashed. */
static la_ssize_t tar_read(struct archive *a, void *p, const void **out)
{
	struct layer_io *io = p;

	while (!io->raw_eof) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = sym_archive_read_data_block(io->raw, &buf, &len, &off);

		if (r == ARCHIVE_EOF) {
			io->raw_eof = true;
			break;
		}
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			const char *msg = sym_archive_error_string(io->raw);
			int err = sym_archive_errno(io->raw);

			sym_archive_set_error(a, err > 0 ? err : EIO, "%s",
					  msg ? msg : "cannot decompress the blob");
			return -1;
		}
		if (off < 0 || (uint64_t)off != io->raw_off) {
			sym_archive_set_error(a, EIO, "decompressed stream has a gap");
			return -1;
		}
		if (!len)
			continue;
		if (io->diff_sha && sha256_update(io->diff_sha, buf, len)) {
			sym_archive_set_error(a, EIO, "sha256 failed");
			return -1;
		}
		io->raw_off += len;
		*out = buf;
		return (la_ssize_t)len;
	}
	return 0;
}

static int raw_filters(struct archive *raw, enum oci_compression comp)
{
	int r = ARCHIVE_OK;

	switch (comp) {
	case OCI_COMP_NONE:
		break;
	case OCI_COMP_GZIP:
		r = sym_archive_read_support_filter_gzip(raw);
		break;
	case OCI_COMP_ZSTD:
		r = sym_archive_read_support_filter_zstd(raw);
		break;
	case OCI_COMP_DETECT:
		r = sym_archive_read_support_filter_gzip(raw);
		if (r >= ARCHIVE_WARN)
			r = sym_archive_read_support_filter_zstd(raw);
		if (r >= ARCHIVE_WARN)
			r = sym_archive_read_support_filter_xz(raw);
		if (r >= ARCHIVE_WARN)
			r = sym_archive_read_support_filter_bzip2(raw);
		break;
	}
	if (r >= ARCHIVE_WARN)
		r = sym_archive_read_support_format_raw(raw);
	return r >= ARCHIVE_WARN ? 0 : -ENOTSUP;
}

/* After the tar's end: hash what is left of the tar stream and of the blob. */
static int layer_drain(struct import_ctx *ic, struct layer_io *io, struct archive *tar,
		       const char *what)
{
	const void *b;
	la_ssize_t n;

	while ((n = tar_read(tar, io, &b)) > 0)
		;
	if (n < 0)
		return why_first(ic->why, ic->why_len, -EIO, "%s: %s", what,
				 sym_archive_error_string(tar));
	while ((n = blob_read(io->raw, io, &b)) > 0)
		;
	if (n < 0)
		return why_first(ic->why, ic->why_len, -EIO, "%s: %s", what,
				 sym_archive_error_string(io->raw));
	return 0;
}

static int layer_check(struct import_ctx *ic, struct layer_io *io, const char *what)
{
	const struct oci_layer_src *src = io->src;
	char hex[SHA256_HEX_LEN + 1], want[SHA256_HEX_LEN + 1];
	uint8_t got[SHA256_LEN];

	if (src->size != OCI_SIZE_UNKNOWN && io->off != src->size)
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: size mismatch: blob is %llu bytes, descriptor says %llu",
				 what, (unsigned long long)io->off, (unsigned long long)src->size);
	if (sha256_final(io->blob_sha, got))
		return why_first(ic->why, ic->why_len, -EIO, "%s: sha256 failed", what);
	if (src->digest && memcmp(got, src->digest, SHA256_LEN)) {
		sha256_to_hex(got, hex);
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: digest mismatch: content is sha256:%s", what,
				 hex);
	}
	/* not compressed: the tar is the blob itself, got already is its digest */
	if (io->diff_sha && sha256_final(io->diff_sha, got))
		return why_first(ic->why, ic->why_len, -EIO, "%s: sha256 failed", what);
	if (src->diff_id && memcmp(got, src->diff_id, SHA256_LEN)) {
		sha256_to_hex(got, hex);
		sha256_to_hex(src->diff_id, want);
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: uncompressed content is sha256:%s, the "
				 "config's diff_id says sha256:%s", what, hex, want);
	}
	return 0;
}

int oci_layer_apply(struct import_ctx *ic, const struct oci_layer_src *src, uint32_t layer,
		    const char *what)
{
	struct layer_io io = { .src = src };
	struct archive *tar = NULL;
	struct archive_entry *e;
	struct stat st;
	int r, ret;

	ret = dl_archive_load();
	if (ret)
		return ret;
	ret = blob_stat(ic, src->fd, &st, what);
	if (ret)
		return ret;
	if (src->size != OCI_SIZE_UNKNOWN && (uint64_t)st.st_size != src->size)
		return why_first(ic->why, ic->why_len, -EBADMSG,
				 "%s: size mismatch: blob is %lld bytes, descriptor says %llu",
				 what, (long long)st.st_size, (unsigned long long)src->size);
	io.buf = malloc(LAYER_BUF_SIZE);
	io.blob_sha = sha256_new();
	io.diff_sha = sha256_new();
	io.raw = sym_archive_read_new();
	tar = sym_archive_read_new();
	if (!io.buf || !io.blob_sha || !io.diff_sha || !io.raw || !tar) {
		ret = -ENOMEM; /* import_run reports it */
		goto out;
	}
	if (raw_filters(io.raw, src->comp)) {
		ret = why_first(ic->why, ic->why_len, -ENOTSUP, "%s: %s", what,
				sym_archive_error_string(io.raw));
		goto out;
	}
	r = sym_archive_read_open2(io.raw, &io, NULL, blob_read, NULL, NULL);
	if (r == ARCHIVE_OK)
		r = sym_archive_read_next_header(io.raw, &e);
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
		const char *msg = sym_archive_error_string(io.raw);

		ret = why_first(ic->why, ic->why_len, -EIO, "%s: %s", what,
				msg ? msg : "cannot read the blob");
		goto out;
	}
	if (sym_archive_filter_code(io.raw, 0) == ARCHIVE_FILTER_NONE) {
		/* not compressed: the tar is the blob itself, one hash serves for both */
		sha256_free(io.diff_sha);
		io.diff_sha = NULL;
	}
	sym_archive_read_support_format_tar(tar);
	sym_archive_read_support_format_empty(tar);
	if (sym_archive_read_open2(tar, &io, NULL, tar_read, NULL, NULL) != ARCHIVE_OK) {
		const char *msg = sym_archive_error_string(tar);

		ret = why_first(ic->why, ic->why_len, -EIO, "%s: %s", what,
				msg ? msg : "not a tar archive");
		goto out;
	}
	ret = import_tar_archive(ic, tar, layer, true, what);
	if (!ret)
		ret = layer_drain(ic, &io, tar, what);
	if (!ret)
		ret = layer_check(ic, &io, what);
out:
	if (tar)
		sym_archive_read_free(tar);
	if (io.raw)
		sym_archive_read_free(io.raw);
	sha256_free(io.diff_sha);
	sha256_free(io.blob_sha);
	free(io.buf);
	return ret;
}
