/* SPDX-License-Identifier: MIT */
/*
 * Import tar streams (plain, gzip, zstd, ... via libarchive): PAX headers with nanosecond
 * times and xattrs, GNU long names, sparse entries. Used for .tar files and for every
 * layer of OCI and docker-archive images (with whiteouts).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/dl_archive.h"
#include "../../common/fsutil.h"
#include "import.h"
#include "tar_acl.h"

#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"
#define TRUNCATED "Truncated input file" /* libarchive's words for input that ran out */
#define TAR_ENDED 1

/* A path split into components, after refusing what could escape the root. */
struct comps {
	const char *c[IMPORT_MAX_DEPTH];
	size_t len[IMPORT_MAX_DEPTH];
	size_t n;
};

/*
 * Split an archive path, cleaned the way docker and containerd clean layer members: the
 * name is relative to the root whatever it starts with ("/", "./", "//": "/etc/x" is
 * etc/x, "/" and "./" are the root itself), "." and empty components go, and ".." takes
 * back the component before it. A ".." with nothing left to take back would climb out of
 * the root: refused, a layer must not name anything outside its root.
 */
static int split_path(const char *p, struct comps *out, char *why, size_t why_len)
{
	out->n = 0;
	while (*p) {
		const char *s = p;

		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - s);

		while (*p == '/')
			p++;
		if (len == 0 || (len == 1 && s[0] == '.'))
			continue;
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			if (out->n == 0) {
				return why_set(why, why_len, -EINVAL,
					       "'..' climbs out of the root");
			}
			out->n--;
			continue;
		}
		if (out->n == IMPORT_MAX_DEPTH) {
			return why_set(why, why_len, -EINVAL, "%s", IMPORT_TOO_DEEP);
		}
		out->c[out->n] = s;
		out->len[out->n] = len;
		out->n++;
	}
	return 0;
}

/*
 * Walk to the directory that holds the last component, creating missing directories
 * (as a tar extractor would). Refuses to pass through a symlink or a non-directory.
 */
static int walk_parent(struct import_ctx *ic, const struct comps *c, uint32_t layer, bool create,
		       struct tree_node **out, char *why, size_t why_len)
{
	struct tree_node *dir = tree_root(ic->tree);

	for (size_t i = 0; i + 1 < c->n; i++) {
		struct tree_node *n = tree_lookup(ic->tree, dir, c->c[i], c->len[i]);

		if (!n) {
			struct tree_inode *ino;

			if (!create) {
				*out = NULL;
				return 0;
			}
			ino = tree_inode_new(ic->tree, MF_DIR);
			if (!ino)
				return -ENOMEM;
			n = tree_put(ic->tree, dir, c->c[i], c->len[i], layer, ino);
			if (!n)
				return -ENOMEM;
		} else if (n->ino->type == MF_SYMLINK) {
			return why_set(why, why_len, -ELOOP,
				       "climbs through a symlinked parent directory");
		} else if (n->ino->type != MF_DIR) {
			return why_set(why, why_len, -ENOTDIR, "a parent is not a directory");
		}
		dir = n;
	}
	*out = dir;
	return 0;
}

/*
 * libarchive's pax writer (bsdtar) writes each xattr twice, as LIBARCHIVE.xattr.NAME and
 * SCHILY.xattr.NAME, and its reader hands over both: keep one of each name (sorted).
 */
static void xattrs_dedup(struct tree_inode *ino)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < ino->xattr_count; i++) {
		const struct mf_xattr_in *x = &ino->xattrs[i];

		if (n && ino->xattrs[n - 1].name_len == x->name_len &&
		    !memcmp(ino->xattrs[n - 1].name, x->name, x->name_len))
			continue;
		ino->xattrs[n++] = *x;
	}
	ino->xattr_count = n;
}

/* The member's xattrs, its ACLs among them; after entry_attrs(): ACLs set mode bits. */
static int entry_xattrs(struct import_ctx *ic, struct archive_entry *e, struct tree_inode *ino,
			const char **warn)
{
	int n = sym_archive_entry_xattr_reset(e), acls = tar_acl_count(e), ret;
	const char *name;
	const void *value;
	size_t size;

	if (n < 0)
		n = 0;
	if (n + acls == 0)
		return 0;
	ino->xattrs = tree_alloc(ic->tree, (size_t)(n + acls) * sizeof(*ino->xattrs));
	if (!ino->xattrs)
		return -ENOMEM;
	while (n && sym_archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		struct mf_xattr_in *x = &ino->xattrs[ino->xattr_count];
		size_t nlen = strlen(name);

		if (ino->xattr_count == (uint32_t)n || !nlen)
			break;
		x->name = tree_strdup(ic->tree, name, nlen);
		x->value = tree_strdup(ic->tree, value, size);
		if (!x->name || !x->value)
			return -ENOMEM;
		x->name_len = (uint32_t)nlen;
		x->value_len = (uint32_t)size;
		ino->xattr_count++;
	}
	ret = tar_acl_apply(ic->tree, e, ino, warn);
	import_sort_xattrs(ino->xattrs, ino->xattr_count);
	xattrs_dedup(ino);
	return ret;
}

/*
 * A pax time "-X.F" means -(X + 0.F) seconds, but libarchive hands it over as seconds -X
 * and a positive fraction F, i.e. -X + 0.F. Normalize to seconds rounded down and
 * nanoseconds in [0, 1e9), the way stat(2) and the manifest count.
 */
static void pax_negative_time_fix(int64_t *sec, uint32_t *nsec)
{
	if (*sec < 0 && *nsec > 0) {
		*sec -= 1;
		*nsec = 1000000000u - *nsec;
	}
}

static void entry_attrs(struct archive_entry *e, struct tree_inode *ino)
{
	ino->mode = sym_archive_entry_perm(e) & 07777;
	ino->uid = (uint32_t)sym_archive_entry_uid(e);
	ino->gid = (uint32_t)sym_archive_entry_gid(e);
	ino->mtime = sym_archive_entry_mtime(e);
	ino->mtime_ns = (uint32_t)sym_archive_entry_mtime_nsec(e);
	if (sym_archive_entry_atime_is_set(e)) {
		ino->atime = sym_archive_entry_atime(e);
		ino->atime_ns = (uint32_t)sym_archive_entry_atime_nsec(e);
	} else {
		ino->atime = ino->mtime;
		ino->atime_ns = ino->mtime_ns;
	}
	if (sym_archive_entry_ctime_is_set(e)) {
		ino->ctime = sym_archive_entry_ctime(e);
		ino->ctime_ns = (uint32_t)sym_archive_entry_ctime_nsec(e);
	} else {
		ino->ctime = ino->mtime;
		ino->ctime_ns = ino->mtime_ns;
	}
	pax_negative_time_fix(&ino->mtime, &ino->mtime_ns);
	if (sym_archive_entry_atime_is_set(e))
		pax_negative_time_fix(&ino->atime, &ino->atime_ns);
	if (sym_archive_entry_ctime_is_set(e))
		pax_negative_time_fix(&ino->ctime, &ino->ctime_ns);
	if (ino->type == MF_CHR || ino->type == MF_BLK) {
		ino->rdev_major = (uint32_t)sym_archive_entry_rdevmajor(e);
		ino->rdev_minor = (uint32_t)sym_archive_entry_rdevminor(e);
	}
}

/*
 * The input ran out while the tar reader skipped the padding after a member's data
 * (umoci 0.4's insert writes such layers: no padding, no end-of-archive blocks). Go's
 * archive/tar, and so docker, containerd and umoci, take that for the end of the archive;
 * so does import, once the member's data is all there. A damaged compressed stream or a
 * failed read says something else and stays an error.
 */
static bool ends_in_padding(struct archive *a)
{
	const char *msg = sym_archive_error_string(a);

	return msg && !strncmp(msg, TRUNCATED, strlen(TRUNCATED));
}

/* 0, -errno, or TAR_ENDED: the member is complete and the archive ends with it. */
static int read_data(struct import_ctx *ic, struct archive *a, struct archive_entry *e,
		     struct tree_inode *ino, uint64_t size, char *why, size_t why_len)
{
	bool sparse = sym_archive_entry_sparse_count(e) > 0, ended = false;
	struct import_stream st;
	int ret;

	ret = import_stream_begin(ic, &st, ino, size, sparse);
	if (ret)
		return ret;
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = sym_archive_read_data_block(a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN && st.pos >= size && !sparse && ends_in_padding(a)) {
			ended = true; /* the data is all here: the end of the archive */
			break;
		}
		if (r < ARCHIVE_WARN) {
			import_stream_abort(&st);
			return why_set(why, why_len, -EIO, "%s", sym_archive_error_string(a) ?
				       sym_archive_error_string(a) : strerror(EIO));
		}
		if (off < 0 || (uint64_t)off < st.pos) {
			import_stream_abort(&st);
			return why_set(why, why_len, -EINVAL, "sparse map goes backwards");
		}
		ret = import_stream_hole(&st, (uint64_t)off - st.pos);
		if (!ret && len)
			ret = import_stream_write(&st, buf, len);
		if (ret) {
			import_stream_abort(&st);
			return ret;
		}
	}
	if (st.pos > size)
		size = st.pos;
	ret = import_stream_end(&st, size);
	if (ret == -EIO)
		why_set(why, why_len, ret, "archive ends inside the file's data");
	ic->files++;
	import_progress(ic);
	return ret ? ret : ended ? TAR_ENDED : 0;
}

static uint8_t entry_type(struct archive_entry *e)
{
	switch (sym_archive_entry_filetype(e)) {
	case AE_IFREG: return MF_REG;
	case AE_IFDIR: return MF_DIR;
	case AE_IFLNK: return MF_SYMLINK;
	case AE_IFCHR: return MF_CHR;
	case AE_IFBLK: return MF_BLK;
	case AE_IFIFO: return MF_FIFO;
	case AE_IFSOCK: return MF_SOCK;
	}
	return 0;
}

static int whiteout(struct import_ctx *ic, struct tree_node *dir, const struct comps *c,
		    uint32_t layer)
{
	const char *name = c->c[c->n - 1];
	size_t len = c->len[c->n - 1];

	if (!dir)
		return 0; /* the parent does not exist: nothing to delete */
	if (len == strlen(WH_OPAQUE) && !memcmp(name, WH_OPAQUE, len)) {
		tree_remove_lower(ic->tree, dir, layer);
		return 0;
	}
	struct tree_node *victim = tree_lookup(ic->tree, dir, name + 4, len - 4);

	if (victim && victim->layer < layer)
		tree_remove(ic->tree, victim);
	return 0;
}

static bool is_whiteout(const struct comps *c)
{
	return c->n && c->len[c->n - 1] >= 4 && !memcmp(c->c[c->n - 1], WH_PREFIX, 4);
}

static int apply_entry(struct import_ctx *ic, struct archive *a, struct archive_entry *e,
		       uint32_t layer, bool whiteouts, char *why, size_t why_len,
		       const char **warn)
{
	const char *path = sym_archive_entry_pathname(e);
	const char *hl = sym_archive_entry_hardlink(e);
	struct tree_node *dir, *n;
	struct tree_inode *ino;
	struct comps c, hc;
	uint8_t type;
	int ret;

	if (!path) {
		return why_set(why, why_len, -EINVAL, "entry without a usable path name");
	}
	ret = split_path(path, &c, why, why_len);
	if (ret)
		return ret;
	if (whiteouts && is_whiteout(&c)) {
		ret = walk_parent(ic, &c, layer, false, &dir, why, why_len);
		return ret ? ret : whiteout(ic, dir, &c, layer);
	}
	if (hl) {
		ret = split_path(hl, &hc, why, why_len);
		if (ret)
			return ret;
		if (hc.n == 0) {
			return why_set(why, why_len, -EINVAL, "hardlink to the root directory");
		}
		ret = walk_parent(ic, &hc, layer, false, &dir, why, why_len);
		if (ret)
			return ret;
		n = dir ? tree_lookup(ic->tree, dir, hc.c[hc.n - 1], hc.len[hc.n - 1]) : NULL;
		if (!n) {
			return why_set(why, why_len, -ENOENT, "hardlink to a missing target");
		}
		if (n->ino->type == MF_DIR) {
			return why_set(why, why_len, -EINVAL, "hardlink to a directory");
		}
		if (c.n == 0) {
			return why_set(why, why_len, -EINVAL, "hardlink over the root directory");
		}
		ino = n->ino;
		ret = walk_parent(ic, &c, layer, true, &dir, why, why_len);
		if (ret)
			return ret;
		n = tree_lookup(ic->tree, dir, c.c[c.n - 1], c.len[c.n - 1]);
		if (n && n->ino == ino)
			return 0; /* a link to itself: nothing changes */
		return tree_put(ic->tree, dir, c.c[c.n - 1], c.len[c.n - 1], layer, ino) ? 0
											  : -ENOMEM;
	}
	type = entry_type(e);
	if (!type) {
		return why_set(why, why_len, -EINVAL, "unsupported entry type");
	}
	if (c.n == 0) { /* "/", "./": the root directory's own attributes */
		if (type != MF_DIR) {
			return why_set(why, why_len, -EINVAL, "the root is not a directory");
		}
		ino = tree_root(ic->tree)->ino;
		entry_attrs(e, ino);
		ino->xattr_count = 0;
		return entry_xattrs(ic, e, ino, warn);
	}
	ret = walk_parent(ic, &c, layer, true, &dir, why, why_len);
	if (ret)
		return ret;
	ino = tree_inode_new(ic->tree, type);
	if (!ino)
		return -ENOMEM;
	entry_attrs(e, ino);
	ret = entry_xattrs(ic, e, ino, warn);
	if (ret)
		return ret;
	if (type == MF_SYMLINK) {
		const char *target = sym_archive_entry_symlink(e);
		size_t tlen = target ? strlen(target) : 0;

		if (!tlen) {
			return why_set(why, why_len, -EINVAL, "symlink without a target");
		}
		if (tlen > 4095) {
			return why_set(why, why_len, -ENAMETOOLONG,
				       "symlink target longer than 4095 bytes");
		}
		ino->link = tree_strdup(ic->tree, target, tlen);
		if (!ino->link)
			return -ENOMEM;
		ino->link_len = (uint32_t)tlen;
		ino->size = tlen;
	}
	if (type == MF_REG) {
		la_int64_t size = sym_archive_entry_size_is_set(e) ? sym_archive_entry_size(e) : 0;

		ret = read_data(ic, a, e, ino, size > 0 ? (uint64_t)size : 0, why, why_len);
		if (ret < 0)
			return ret;
	}
	n = tree_put(ic->tree, dir, c.c[c.n - 1], c.len[c.n - 1], layer, ino);
	return n ? ret : -ENOMEM;
}

int import_tar_archive(struct import_ctx *ic, struct archive *a, uint32_t layer, bool whiteouts,
		       const char *what)
{
	struct archive_entry *e;
	uint64_t count = 0;
	char why[WHY_MAX];

	for (;;) {
		const char *warn = NULL;
		int r = sym_archive_read_next_header(a, &e), ret;

		why[0] = '\0';
		if (r == ARCHIVE_EOF)
			break;
		if (r == ARCHIVE_WARN) {
			import_warn(ic, "%s: %s", what, sym_archive_error_string(a));
		} else if (r != ARCHIVE_OK) {
			const char *msg = sym_archive_error_string(a);

			return why_first(ic->why, ic->why_len, -EIO, "%s: %s", what,
					 msg ? msg : "corrupt archive");
		}
		ret = apply_entry(ic, a, e, layer, whiteouts, why, sizeof(why), &warn);
		if (warn && ret >= 0) {
			const char *p = sym_archive_entry_pathname(e);

			import_warn(ic, "%s: %s: %s", what, p ? p : "?", warn);
		}
		if (ret == -ENOMEM)
			return ret; /* import_run says it */
		if (ret == TAR_ENDED) {
			import_warn(ic, "%s: the archive ends without the padding after its last "
				    "member's data (taken as its end, as docker does)", what);
			count++;
			break;
		}
		if (ret) {
			const char *p = sym_archive_entry_pathname(e);
			char brief[IMPORT_BRIEF_MAX];

			return why_first(ic->why, ic->why_len, ret, "%s: %s: %s", what,
					 p ? import_brief(p, brief) : "?",
					 why[0] ? why : strerror(-ret));
		}
		count++;
	}
	if (count == 0 && layer == 0)
		import_warn(ic, "%s: empty archive", what);
	return 0;
}

int import_tar_file(struct import_ctx *ic, const char *path)
{
	struct archive *a;
	struct stat st;
	int fd, ret = dl_archive_load();

	if (ret)
		return ret;
	fd = fs_open_regular(AT_FDCWD, path, 0, &st); /* a FIFO put there: refused */
	if (fd < 0)
		return why_first(ic->why, ic->why_len, fd, "%s: %s", path,
				 fd == -EINVAL ? "not a regular file" : strerror(-fd));
	a = sym_archive_read_new();
	if (!a) {
		close(fd);
		return -ENOMEM;
	}
	sym_archive_read_support_filter_all(a);
	sym_archive_read_support_format_tar(a);
	if (sym_archive_read_open_fd(a, fd, 1 << 20) != ARCHIVE_OK) {
		const char *msg = sym_archive_error_string(a);

		why_first(ic->why, ic->why_len, -EIO, "%s: %s", path, msg ? msg : "cannot open");
		sym_archive_read_free(a);
		close(fd);
		return -EIO;
	}
	ic->src_archive = a; /* the share read: a percentage */
	ic->src_size = (uint64_t)st.st_size;
	ret = import_tar_archive(ic, a, 0, false, path);
	ic->src_archive = NULL;
	sym_archive_read_free(a);
	close(fd);
	return ret;
}
