/* SPDX-License-Identifier: MIT */
/*
 * A cpio (newc) writer over libarchive (loaded at first use, common/dl_archive.h): what the
 * kernel unpacks as an initramfs. Entries are owned by root with mtime 0 and numbered
 * inodes, so the same entries give the same bytes.
 */
#include <errno.h>

#include "../../common/dl_archive.h"
#include "internal.h"

int cpio_open(struct cpio *w, int fd, bool gzip)
{
	w->ino = 0;
	w->a = NULL;
	if (dl_archive_load())
		return -ELIBACC;
	w->a = sym_archive_write_new();
	if (!w->a)
		return -ENOMEM;
	if (sym_archive_write_set_format_cpio_newc(w->a) != ARCHIVE_OK ||
	    (gzip && (sym_archive_write_add_filter_gzip(w->a) != ARCHIVE_OK ||
		      sym_archive_write_set_filter_option(w->a, "gzip", "timestamp", NULL) <
			      ARCHIVE_WARN)) ||
	    sym_archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
	    sym_archive_write_open_fd(w->a, fd) != ARCHIVE_OK)
		return -EIO;
	return 0;
}

static int cpio_add(struct cpio *w, const char *path, unsigned type, unsigned perm,
		    const void *data, size_t len, const char *link, unsigned rmaj, unsigned rmin)
{
	struct archive_entry *e = sym_archive_entry_new();
	int rc = 0;

	if (!e)
		return -ENOMEM;
	sym_archive_entry_set_pathname(e, path);
	sym_archive_entry_set_filetype(e, type);
	sym_archive_entry_set_perm(e, perm);
	sym_archive_entry_set_uid(e, 0);
	sym_archive_entry_set_gid(e, 0);
	sym_archive_entry_set_mtime(e, 0, 0);
	sym_archive_entry_set_ino(e, ++w->ino);
	sym_archive_entry_set_nlink(e, type == AE_IFDIR ? 2 : 1);
	sym_archive_entry_set_size(e, type == AE_IFREG ? (la_int64_t)len : 0);
	if (link)
		sym_archive_entry_set_symlink(e, link);
	if (type == AE_IFCHR) {
		sym_archive_entry_set_rdevmajor(e, rmaj);
		sym_archive_entry_set_rdevminor(e, rmin);
	}
	if (sym_archive_write_header(w->a, e) != ARCHIVE_OK)
		rc = -EIO;
	else if (type == AE_IFREG && len && sym_archive_write_data(w->a, data, len) != (la_ssize_t)len)
		rc = -EIO;
	sym_archive_entry_free(e);
	return rc;
}

int cpio_add_dir(struct cpio *w, const char *path, unsigned perm)
{
	return cpio_add(w, path, AE_IFDIR, perm, NULL, 0, NULL, 0, 0);
}

int cpio_add_file(struct cpio *w, const char *path, unsigned perm, const void *data, size_t len)
{
	return cpio_add(w, path, AE_IFREG, perm, data, len, NULL, 0, 0);
}

int cpio_add_symlink(struct cpio *w, const char *path, const char *target)
{
	return cpio_add(w, path, AE_IFLNK, 0777, NULL, 0, target, 0, 0);
}

int cpio_add_chr(struct cpio *w, const char *path, unsigned perm, unsigned major, unsigned minor)
{
	return cpio_add(w, path, AE_IFCHR, perm, NULL, 0, NULL, major, minor);
}

int cpio_close(struct cpio *w)
{
	return sym_archive_write_close(w->a) == ARCHIVE_OK ? 0 : -EIO;
}

const char *cpio_error(const struct cpio *w)
{
	return w->a ? sym_archive_error_string(w->a) : NULL;
}

void cpio_free(struct cpio *w)
{
	if (w->a)
		sym_archive_write_free(w->a);
	w->a = NULL;
}
