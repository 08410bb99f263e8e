/* SPDX-License-Identifier: MIT */
/*
 * Import a directory tree: everything lstat(2) and listxattr(2) see, hardlinks, holes.
 *
 * The walk goes by descriptors, never by path: each entry is found with fstatat() in its
 * directory's descriptor, then opened there (O_NOFOLLOW) and checked to be the inode found;
 * its attributes, xattrs, data, target or children come from that descriptor. Regular files
 * and directories are opened for reading (O_NONBLOCK: a FIFO swapped in meanwhile does not
 * block the open, and is refused as a replaced entry); symlinks, FIFOs, sockets and devices
 * only with O_PATH, which never opens the device or the FIFO itself, and their xattrs are
 * read through /proc/self/fd/N (f*xattr() refuses O_PATH descriptors). Without /proc, their
 * xattrs are read by path after checking it still leads to the same inode. The path is kept
 * for messages only, and the depth is bounded by IMPORT_MAX_DEPTH (which also bounds the
 * recursion and the descriptors held: one per level).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../../common/hash.h"
#include "../../common/grow.h"
#include "../../common/fsutil.h"
#include "import.h"

/* (st_dev, st_ino) → inode, for files with more than one link */
struct link_map {
	struct link_slot {
		dev_t dev;
		ino_t ino;
		struct tree_inode *node;
	} *slots;
	size_t cap, n;
};

static struct tree_inode **link_find(struct link_map *m, dev_t dev, ino_t ino, int *err)
{
	uint64_t key[2] = { (uint64_t)dev, (uint64_t)ino };

	if ((m->n + 1) * 2 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 256;
		struct link_slot *ns = calloc(ncap, sizeof(*ns));

		if (!ns) {
			*err = -ENOMEM;
			return NULL;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->slots[i].node)
				continue;
			uint64_t k[2] = { (uint64_t)m->slots[i].dev, (uint64_t)m->slots[i].ino };
			size_t h = hash_bytes(k, sizeof(k), 0) & (ncap - 1);

			while (ns[h].node)
				h = (h + 1) & (ncap - 1);
			ns[h] = m->slots[i];
		}
		free(m->slots);
		m->slots = ns;
		m->cap = ncap;
	}
	size_t h = hash_bytes(key, sizeof(key), 0) & (m->cap - 1);

	while (m->slots[h].node) {
		if (m->slots[h].dev == dev && m->slots[h].ino == ino)
			return &m->slots[h].node;
		h = (h + 1) & (m->cap - 1);
	}
	m->slots[h].dev = dev;
	m->slots[h].ino = ino;
	m->n++;
	return &m->slots[h].node; /* NULL inside: caller fills it */
}

struct walk {
	struct import_ctx *ic;
	struct link_map links;
	char *path;            /* SRC/… of the entry at hand: for messages (no length limit) */
	size_t path_cap;
	char brief[IMPORT_BRIEF_MAX];
	char *xbuf;
	size_t xcap;
	char *lbuf;            /* a symlink's target: PATH_MAX bytes */
	bool proc;             /* /proc/self/fd is there */
};

/* w->path abbreviated, for a message. */
static const char *wpath(struct walk *w)
{
	return import_brief(w->path, w->brief);
}

/* w->path becomes its first plen bytes, '/', name. */
static int path_set(struct walk *w, size_t plen, const char *name, size_t nlen)
{
	if (!grow_from((void **)&w->path, &w->path_cap, plen + nlen + 2, 1, PATH_MAX))
		return -ENOMEM;
	w->path[plen] = '/';
	memcpy(w->path + plen + 1, name, nlen + 1);
	return 0;
}

/*
 * Read without moving atimes (O_NOATIME, for files and directories alike), so importing
 * a tree twice gives the same manifest; falls back when we do not own the file.
 * Reading a symlink's target still moves its atime: the kernel offers no way around it.
 */
static int open_noatime(int dfd, const char *name, int flags)
{
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOATIME | flags);

	if (fd < 0 && errno == EPERM)
		fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | flags);
	return fd;
}

static void fill_attrs(struct tree_inode *ino, const struct stat *st)
{
	ino->mode = st->st_mode & 07777;
	ino->uid = st->st_uid;
	ino->gid = st->st_gid;
	ino->atime = st->st_atim.tv_sec;
	ino->atime_ns = (uint32_t)st->st_atim.tv_nsec;
	ino->mtime = st->st_mtim.tv_sec;
	ino->mtime_ns = (uint32_t)st->st_mtim.tv_nsec;
	ino->ctime = st->st_ctim.tv_sec;
	ino->ctime_ns = (uint32_t)st->st_ctim.tv_nsec;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
		ino->rdev_major = major(st->st_rdev);
		ino->rdev_minor = minor(st->st_rdev);
	}
}

/*
 * Where an inode's xattrs are read from: its descriptor (a regular file or a directory
 * opened for reading), or a path: /proc/self/fd/N of an O_PATH descriptor (followed, to the
 * inode itself), or without /proc the entry's own path (not followed).
 */
struct xsrc {
	int fd;
	const char *path;
	bool follow;
};

static ssize_t xs_list(const struct xsrc *x, char *buf, size_t len)
{
	if (!x->path)
		return flistxattr(x->fd, buf, len);
	return x->follow ? listxattr(x->path, buf, len) : llistxattr(x->path, buf, len);
}

static ssize_t xs_get(const struct xsrc *x, const char *name, void *buf, size_t len)
{
	if (!x->path)
		return fgetxattr(x->fd, name, buf, len);
	return x->follow ? getxattr(x->path, name, buf, len) : lgetxattr(x->path, name, buf, len);
}

/* The names of the xattrs into w->xbuf: their length, or -errno. */
static ssize_t list_xattrs(struct walk *w, const struct xsrc *x)
{
	for (;;) {
		ssize_t len = xs_list(x, NULL, 0);

		if (len < 0)
			return (errno == ENOTSUP || errno == ENOSYS) ? 0 : -errno;
		if (len == 0)
			return 0;
		if ((size_t)len > w->xcap) {
			char *nb = realloc(w->xbuf, (size_t)len);

			if (!nb)
				return -ENOMEM;
			w->xbuf = nb;
			w->xcap = (size_t)len;
		}
		len = xs_list(x, w->xbuf, w->xcap);
		if (len >= 0)
			return len;
		if (errno != ERANGE) /* ERANGE: a name was added meanwhile, ask again */
			return -errno;
	}
}

static int read_xattrs(struct walk *w, struct tree_inode *ino, const struct xsrc *x)
{
	struct tree *t = w->ic->tree;
	ssize_t len = list_xattrs(w, x);
	uint32_t n = 0;

	if (len <= 0)
		return (int)len;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(w->xbuf + i) + 1)
		n++;
	ino->xattrs = tree_alloc(t, n * sizeof(*ino->xattrs));
	if (!ino->xattrs)
		return -ENOMEM;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(w->xbuf + i) + 1) {
		const char *name = w->xbuf + i;
		struct mf_xattr_in *xa = &ino->xattrs[ino->xattr_count];
		ssize_t vlen = xs_get(x, name, NULL, 0);
		char *val;

		if (vlen < 0) {
			if (errno == ENODATA)
				continue; /* removed meanwhile */
			return -errno;
		}
		val = tree_alloc(t, (size_t)vlen + 1);
		if (!val)
			return -ENOMEM;
		vlen = xs_get(x, name, val, (size_t)vlen);
		if (vlen < 0)
			return -errno;
		xa->name = tree_strdup(t, name, strlen(name));
		if (!xa->name)
			return -ENOMEM;
		xa->name_len = (uint32_t)strlen(name);
		xa->value = val;
		xa->value_len = (uint32_t)vlen;
		ino->xattr_count++;
	}
	import_sort_xattrs(ino->xattrs, ino->xattr_count);
	return 0;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       (a->st_mode & S_IFMT) == (b->st_mode & S_IFMT);
}

/* The xattrs of the entry open as fd (O_PATH unless a regular file or a directory). */
static int entry_xattrs(struct walk *w, struct tree_inode *ino, int fd, const struct stat *st)
{
	struct xsrc x = { .fd = fd };
	char proc[32];
	struct stat now;

	if (ino->type != MF_REG && ino->type != MF_DIR) {
		if (w->proc) {
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
			x.path = proc;
			x.follow = true; /* the magic link leads to the inode itself */
		} else {
			x.path = w->path;
			if (lstat(w->path, &now) < 0)
				return -errno;
			if (!same_inode(&now, st))
				return -ESTALE;
		}
	}
	return read_xattrs(w, ino, &x);
}

/*
 * A descriptor for the entry fstatat() found as *st, opened the same way whatever is there
 * now (see the top of the file), which must be that inode; *st becomes its fstat().
 */
static int entry_open(struct walk *w, int dfd, const char *name, uint8_t type, struct stat *st)
{
	struct stat now;
	int fd, ret;

	if (type == MF_REG) {
		fd = fs_open_regular(dfd, name, O_NOFOLLOW | O_NOATIME, &now);
		if (fd == -EPERM) /* O_NOATIME on a file we do not own */
			fd = fs_open_regular(dfd, name, O_NOFOLLOW, &now);
		if (fd == -EINVAL || fd == -EISDIR) /* no longer a regular file */
			return why_first(w->ic->why, w->ic->why_len, -ESTALE,
					 "%s: replaced while being imported",
					 wpath(w));
		ret = fd < 0 ? fd : 0;
	} else {
		if (type == MF_DIR)
			fd = open_noatime(dfd, name, O_DIRECTORY | O_NOFOLLOW);
		else
			fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		ret = fd < 0 || fstat(fd, &now) < 0 ? -errno : 0;
	}
	if (ret) {
		if (fd >= 0)
			close(fd);
		return why_first(w->ic->why, w->ic->why_len, ret, "%s: %s", wpath(w),
				 strerror(-ret));
	}
	if (!same_inode(&now, st)) {
		close(fd);
		return why_first(w->ic->why, w->ic->why_len, -ESTALE,
				 "%s: replaced while being imported", wpath(w));
	}
	*st = now;
	return fd;
}

static int walk_dir(struct walk *w, int dfd, struct tree_node *dir, size_t plen,
		    unsigned int depth);

static uint8_t mode_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return MF_REG;
	case S_IFDIR: return MF_DIR;
	case S_IFLNK: return MF_SYMLINK;
	case S_IFCHR: return MF_CHR;
	case S_IFBLK: return MF_BLK;
	case S_IFIFO: return MF_FIFO;
	case S_IFSOCK: return MF_SOCK;
	default: return 0;
	}
}

/* What the entry open as fd holds besides its inode: a symlink's target, a file's data. */
static int entry_content(struct walk *w, int fd, struct tree_inode *ino, const struct stat *st)
{
	struct import_ctx *ic = w->ic;
	ssize_t n;
	int ret = 0;

	switch (ino->type) {
	case MF_SYMLINK:
		n = readlinkat(fd, "", w->lbuf, PATH_MAX); /* the O_PATH symlink itself */
		if (n < 0 || n >= PATH_MAX) {
			ret = n < 0 ? -errno : -ENAMETOOLONG;
			return why_first(ic->why, ic->why_len, ret, "%s: readlink: %s", wpath(w),
					 strerror(-ret));
		}
		ino->link = tree_strdup(ic->tree, w->lbuf, (size_t)n);
		if (!ino->link)
			return -ENOMEM;
		ino->link_len = (uint32_t)n;
		ino->size = (uint64_t)n;
		return 0;
	case MF_REG:
		ret = import_file_data(ic, ino, fd, (uint64_t)st->st_size,
				       (uint64_t)st->st_blocks * 512 < (uint64_t)st->st_size);
		if (ret)
			return why_first(ic->why, ic->why_len, ret, "%s: %s", wpath(w),
					 ret == -EIO ? "file shrank while being imported" :
						       strerror(-ret));
		import_progress(ic);
		return 0;
	default:
		return 0;
	}
}

/* The entry name of directory dfd, depth components below the root. */
static int walk_entry(struct walk *w, int dfd, struct tree_node *dir, const char *name,
		      size_t plen, unsigned int depth)
{
	struct import_ctx *ic = w->ic;
	struct tree_inode *ino, **slot = NULL;
	struct tree_node *node;
	size_t nlen = strlen(name);
	struct stat st;
	uint8_t type;
	int fd, ret = path_set(w, plen, name, nlen);

	if (ret)
		return ret;
	if (depth > IMPORT_MAX_DEPTH)
		return why_first(ic->why, ic->why_len, -EINVAL, "%s: %s", wpath(w),
				 IMPORT_TOO_DEEP);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = -errno;
		return why_first(ic->why, ic->why_len, ret, "%s: %s", wpath(w), strerror(-ret));
	}
	type = mode_type(st.st_mode);
	if (!type) {
		import_warn(ic, "%s: unknown file type, skipped", wpath(w));
		return 0;
	}
	if (type != MF_DIR && st.st_nlink > 1) {
		slot = link_find(&w->links, st.st_dev, st.st_ino, &ret);
		if (!slot)
			return ret;
		if (*slot) {
			if (!tree_put(ic->tree, dir, name, nlen, 0, *slot))
				return -ENOMEM;
			return 0;
		}
	}
	fd = entry_open(w, dfd, name, type, &st);
	if (fd < 0)
		return fd;
	ino = tree_inode_new(ic->tree, type);
	node = ino ? tree_put(ic->tree, dir, name, nlen, 0, ino) : NULL;
	if (!node) {
		close(fd);
		return -ENOMEM;
	}
	fill_attrs(ino, &st);
	ret = entry_xattrs(w, ino, fd, &st);
	if (ret) {
		close(fd);
		return why_first(ic->why, ic->why_len, ret, "%s: reading xattrs: %s", wpath(w),
				 ret == -ESTALE ? "replaced while being imported" : strerror(-ret));
	}
	if (slot)
		*slot = ino;
	ic->files++;
	if (type == MF_DIR)
		return walk_dir(w, fd, node, plen + 1 + nlen, depth); /* it closes fd */
	ret = entry_content(w, fd, ino, &st);
	close(fd);
	return ret;
}

/* names[i][0] is '1' for a directory, '0' otherwise; the name follows. */
static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool entry_is_dir(int dfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_DIR;
	return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/*
 * A directory's files come first, then its subdirectories, each in byte order of their
 * names, not readdir order: the same tree packs small files into the same chunks
 * wherever it is imported, and a directory's small files share chunks, in the order
 * mkfs places them on disk.
 */
static int walk_dir(struct walk *w, int dfd, struct tree_node *dir, size_t plen,
		    unsigned int depth)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	if (!d) {
		ret = -errno;
		close(dfd);
		return why_first(w->ic->why, w->ic->why_len, ret, "%s: %s", wpath(w),
				 strerror(-ret));
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				ret = -errno;
				w->path[plen] = '\0';
				why_first(w->ic->why, w->ic->why_len, ret, "%s: %s", wpath(w),
					  strerror(-ret));
			}
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!grow((void **)&names, &cap, n + 1, sizeof(*names))) {
			ret = -ENOMEM;
			break;
		}
		size_t len = strlen(de->d_name);

		names[n] = malloc(len + 2);
		if (!names[n]) {
			ret = -ENOMEM;
			break;
		}
		names[n][0] = entry_is_dir(dirfd(d), de) ? '1' : '0';
		memcpy(names[n] + 1, de->d_name, len + 1);
		n++;
	}
	if (!ret) {
		if (n > 1)
			qsort(names, n, sizeof(*names), name_cmp);
		for (size_t i = 0; i < n && !ret; i++)
			ret = walk_entry(w, dirfd(d), dir, names[i] + 1, plen, depth + 1);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return ret;
}

int import_dir(struct import_ctx *ic, const char *src)
{
	struct walk w = { .ic = ic, .proc = access("/proc/self/fd", X_OK) == 0 };
	struct tree_inode *root = tree_root(ic->tree)->ino;
	struct stat st;
	size_t plen = strlen(src);
	int dfd, ret;

	while (plen > 1 && src[plen - 1] == '/')
		plen--;
	w.lbuf = malloc(PATH_MAX);
	if (!w.lbuf || !grow_from((void **)&w.path, &w.path_cap, plen + 1, 1, PATH_MAX)) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(w.path, src, plen);
	w.path[plen] = '\0';
	dfd = open_noatime(AT_FDCWD, w.path, O_DIRECTORY);
	if (dfd < 0 || fstat(dfd, &st) < 0) {
		ret = -errno;
		if (dfd >= 0)
			close(dfd);
		ret = why_first(ic->why, ic->why_len, ret, "%s: %s", src, strerror(-ret));
		goto out;
	}
	fill_attrs(root, &st);
	ret = read_xattrs(&w, root, &(struct xsrc){ .fd = dfd });
	if (ret) {
		close(dfd);
		ret = why_first(ic->why, ic->why_len, ret, "%s: reading xattrs: %s", src,
				strerror(-ret));
		goto out;
	}
	if (plen == 1 && w.path[0] == '/')
		plen = 0; /* importing "/": children are "/x", not "//x" */
	ret = walk_dir(&w, dfd, tree_root(ic->tree), plen, 0);
out:
	free(w.links.slots);
	free(w.xbuf);
	free(w.lbuf);
	free(w.path);
	return ret;
}
