/* SPDX-License-Identifier: MIT */
/*
 * Import an OCI image archive (oci-archive:FILE[:TAG]: a tar of an OCI image layout, as
 * skopeo copy … oci-archive: writes it). Its members are read once, in order: oci-layout and
 * index.json into memory, each blobs/sha256/<hex> into a staging file in STORE/tmp
 * (oci_files.h); then the oci: path imports that layout (every blob checked against its
 * digest there). Only the names of a layout are taken: any other member (an absolute path,
 * "..", a link, a device, another file) is refused, and so is a name given twice or a
 * sparse member.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/dl_archive.h"
#include "../../common/esc.h"
#include "../../common/fsutil.h"
#include "../oci_json.h"
#include "oci_blob.h"
#include "oci_files.h"

#define ARCHIVE_BLOBS "blobs/sha256/"

struct oa {
	struct import_ctx *ic;
	const char *label;
	struct oci_files files;
	struct archive *a;
};

/* The member's name without "./" prefixes; NULL if not a name of a layout. */
static const char *layout_name(const char *name, bool *dir)
{
	size_t n;

	while (name && !strncmp(name, "./", 2))
		name += 2;
	if (!name)
		return NULL;
	n = strlen(name);
	*dir = !n || !strcmp(name, ".") || !strcmp(name, "blobs") || !strcmp(name, "blobs/") ||
	       !strcmp(name, "blobs/sha256") || !strcmp(name, "blobs/sha256/");
	if (*dir || !strcmp(name, "oci-layout") || !strcmp(name, "index.json"))
		return name;
	if (n == strlen(ARCHIVE_BLOBS) + SHA256_HEX_LEN && !strncmp(name, ARCHIVE_BLOBS, 13)) {
		for (size_t i = 13; i < n; i++)
			if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
				return NULL;
		return name;
	}
	return NULL;
}

/* The current member, n bytes of data, into fd (from offset 0). */
static int copy_data(struct oa *oa, const char *name, int fd, uint64_t size)
{
	uint64_t copied = 0;

	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = sym_archive_read_data_block(oa->a, &buf, &len, &off), ret;

		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			const char *msg = sym_archive_error_string(oa->a);

			return why_first(oa->ic->why, oa->ic->why_len, -EIO, "%s: %s: %s",
					 oa->label, name,
					 msg ? msg : "read error");
		}
		if (off < 0 || (uint64_t)off + len > size)
			return why_first(oa->ic->why, oa->ic->why_len, -EBADMSG,
					 "%s: %s: data past the member's size",
					 oa->label, name);
		ret = fs_pwrite_full(fd, buf, len, (off_t)off);
		if (ret)
			return why_first(oa->ic->why, oa->ic->why_len, ret,
					 "%s: %s: writing a temporary copy: %s",
					 oa->label, name, strerror(-ret));
		copied += len;
	}
	if (copied != size)
		return why_first(oa->ic->why, oa->ic->why_len, -EBADMSG,
				 "%s: %s: truncated member (%llu of %llu "
				 "bytes)", oa->label, name, (unsigned long long)copied,
				 (unsigned long long)size);
	return 0;
}

/* A small file of the layout (oci-layout, index.json) into memory. */
static int take_small(struct oa *oa, const char *name, uint64_t size)
{
	int fd, ret;

	if (size > OCI_JSON_INDEX_MAX)
		return why_first(oa->ic->why, oa->ic->why_len, -EFBIG,
				 "%s: %s: larger than %u bytes", oa->label, name,
				 OCI_JSON_INDEX_MAX);
	ret = oci_files_add_mem(&oa->files, name, "", 0);
	if (ret)
		return why_first(oa->ic->why, oa->ic->why_len, ret, "%s: %s: %s", oa->label, name,
				 strerror(-ret));
	fd = oci_files_open(&oa->files, name);
	if (fd < 0)
		return fd;
	ret = copy_data(oa, name, fd, size);
	close(fd);
	return ret;
}

static int take_blob(struct oa *oa, const char *name, uint64_t size)
{
	uint8_t d[SHA256_LEN];
	int fd, ret;

	sha256_from_hex(name + strlen(ARCHIVE_BLOBS), d);
	ret = oci_files_add_blob(&oa->files, d, &fd);
	if (ret)
		return why_first(oa->ic->why, oa->ic->why_len, ret, "%s: %s: %s", oa->label, name,
				 ret == -EEXIST ? "twice in the archive" : strerror(-ret));
	return copy_data(oa, name, fd, size);
}

/* One member: a directory of the layout (skipped), or one of its files. */
static int take_member(struct oa *oa, struct archive_entry *e)
{
	const char *raw = sym_archive_entry_pathname(e), *name;
	unsigned type = sym_archive_entry_filetype(e);
	la_int64_t size = sym_archive_entry_size(e);
	char pb[160];
	bool dir;

	name = layout_name(raw, &dir);
	if (!name || (dir && type != AE_IFDIR) || (!dir && type != AE_IFREG) ||
	    sym_archive_entry_hardlink(e))
		return why_first(oa->ic->why, oa->ic->why_len, -EBADMSG,
				 "%s: member '%s' is not a file of an OCI "
				 "image layout (refused)", oa->label,
				 esc_str(raw ? raw : "", pb, sizeof(pb)));
	if (dir)
		return 0;
	if (sym_archive_entry_sparse_count(e) > 0 || size < 0)
		return why_first(oa->ic->why, oa->ic->why_len, -EBADMSG,
				 "%s: %s: a sparse member (refused)",
				 oa->label, name);
	if (strncmp(name, ARCHIVE_BLOBS, strlen(ARCHIVE_BLOBS))) {
		if (oci_files_has(&oa->files, name))
			return why_first(oa->ic->why, oa->ic->why_len, -EBADMSG,
					 "%s: %s: twice in the archive",
					 oa->label, name);
		return take_small(oa, name, (uint64_t)size);
	}
	return take_blob(oa, name, (uint64_t)size);
}

static int read_archive(struct oa *oa, int fd)
{
	struct archive_entry *e;
	int r, ret = 0;

	if (dl_archive_load())
		return -ELIBACC;
	oa->a = sym_archive_read_new();
	if (!oa->a)
		return -ENOMEM;
	sym_archive_read_support_format_tar(oa->a);
	sym_archive_read_support_filter_gzip(oa->a);
	sym_archive_read_support_filter_zstd(oa->a);
	sym_archive_read_support_filter_xz(oa->a);
	if (sym_archive_read_open_fd(oa->a, fd, 1 << 20) != ARCHIVE_OK) {
		const char *msg = sym_archive_error_string(oa->a);

		return why_first(oa->ic->why, oa->ic->why_len, -EIO, "%s: %s", oa->label,
				 msg ? msg : "cannot open");
	}
	while (!ret && (r = sym_archive_read_next_header(oa->a, &e)) != ARCHIVE_EOF) {
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			const char *msg = sym_archive_error_string(oa->a);

			return why_first(oa->ic->why, oa->ic->why_len, -EIO, "%s: %s", oa->label,
					 msg ? msg : "corrupt archive");
		}
		ret = take_member(oa, e);
	}
	if (!ret && !oci_files_has(&oa->files, "oci-layout"))
		ret = why_first(oa->ic->why, oa->ic->why_len, -EBADMSG,
				"%s: no oci-layout member (not an OCI image "
				"archive)", oa->label);
	return ret;
}

/*
 * "FILE[:TAG]": FILE may itself contain ':', so the split is at the first ':' whose left
 * side is a file; the whole spec wins if it is one.
 */
static int split_spec(struct oa *oa, const char *spec, char **file, const char **tag)
{
	struct stat st;

	*tag = NULL;
	if (stat(spec, &st) == 0) {
		*file = strdup(spec);
		return *file ? 0 : -ENOMEM;
	}
	for (const char *c = strchr(spec, ':'); c; c = strchr(c + 1, ':')) {
		*file = strndup(spec, (size_t)(c - spec));
		if (!*file)
			return -ENOMEM;
		if (stat(*file, &st) == 0) {
			*tag = c[1] ? c + 1 : NULL;
			return 0;
		}
		free(*file);
	}
	*file = NULL;
	return why_first(oa->ic->why, oa->ic->why_len, -ENOENT, "%s: no such file", oa->label);
}

int import_oci_archive(struct import_ctx *ic, const char *spec)
{
	struct oa oa = { .ic = ic, .label = ic->src_label ? ic->src_label : spec };
	const char *tag;
	struct stat st;
	char *file;
	int fd, ret;

	oa.files.store = ic->store;
	ret = split_spec(&oa, spec, &file, &tag);
	if (ret)
		return ret;
	fd = fs_open_regular(AT_FDCWD, file, 0, &st); /* a FIFO: refused */
	if (fd < 0) {
		ret = why_first(ic->why, ic->why_len, fd, "%s: %s: %s", oa.label, file,
				fd == -EINVAL ? "not a regular file" : strerror(-fd));
		free(file);
		return ret;
	}
	ret = read_archive(&oa, fd);
	if (oa.a)
		sym_archive_read_free(oa.a);
	close(fd);
	free(file);
	if (!ret)
		ret = import_oci_files(ic, &oa.files, tag);
	oci_files_free(&oa.files);
	return ret;
}
