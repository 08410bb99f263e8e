/* SPDX-License-Identifier: MIT */
/* Import a directory tree: everything lstat(2) and listxattr(2) see, hardlinks, holes. */
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
	char path[PATH_MAX];
	char *xbuf;
	size_t xcap;
};

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

static int read_xattrs(struct walk *w, struct tree_inode *ino)
{
	struct tree *t = w->ic->tree;
	ssize_t len;
	uint32_t n = 0;

	for (;;) {
		len = llistxattr(w->path, NULL, 0);
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
		len = llistxattr(w->path, w->xbuf, w->xcap);
		if (len >= 0)
			break;
		if (errno != ERANGE) /* ERANGE: a name was added meanwhile, ask again */
			return -errno;
	}
	if (len == 0)
		return 0;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(w->xbuf + i) + 1)
		n++;
	ino->xattrs = tree_alloc(t, n * sizeof(*ino->xattrs));
	if (!ino->xattrs)
		return -ENOMEM;
	for (ssize_t i = 0; i < len; i += (ssize_t)strlen(w->xbuf + i) + 1) {
		const char *name = w->xbuf + i;
		struct mf_xattr_in *x = &ino->xattrs[ino->xattr_count];
		ssize_t vlen = lgetxattr(w->path, name, NULL, 0);
		char *val;

		if (vlen < 0) {
			if (errno == ENODATA)
				continue; /* removed meanwhile */
			return -errno;
		}
		val = tree_alloc(t, (size_t)vlen + 1);
		if (!val)
			return -ENOMEM;
		vlen = lgetxattr(w->path, name, val, (size_t)vlen);
		if (vlen < 0)
			return -errno;
		x->name = tree_strdup(t, name, strlen(name));
		if (!x->name)
			return -ENOMEM;
		x->name_len = (uint32_t)strlen(name);
		x->value = val;
		x->value_len = (uint32_t)vlen;
		ino->xattr_count++;
	}
	import_sort_xattrs(ino->xattrs, ino->xattr_count);
	return 0;
}

static int walk_dir(struct walk *w, int dfd, struct tree_node *dir, size_t plen);

static int walk_entry(struct walk *w, int dfd, struct tree_node *dir, const char *name,
		      size_t plen)
{
	struct import_ctx *ic = w->ic;
	struct tree_inode *ino, **slot = NULL;
	size_t nlen = strlen(name);
	struct stat st;
	uint8_t type;
	int ret = 0;

	if (plen + 1 + nlen >= sizeof(w->path))
		return import_fail(ic, -ENAMETOOLONG, "%s/%s: path too long", w->path, name);
	w->path[plen] = '/';
	memcpy(w->path + plen + 1, name, nlen + 1);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = -errno;
		return import_fail(ic, ret, "%s: %s", w->path, strerror(-ret));
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: type = MF_REG; break;
	case S_IFDIR: type = MF_DIR; break;
	case S_IFLNK: type = MF_SYMLINK; break;
	case S_IFCHR: type = MF_CHR; break;
	case S_IFBLK: type = MF_BLK; break;
	case S_IFIFO: type = MF_FIFO; break;
	case S_IFSOCK: type = MF_SOCK; break;
	default:
		import_warn(ic, "%s: unknown file type, skipped", w->path);
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
	ino = tree_inode_new(ic->tree, type);
	if (!ino)
		return -ENOMEM;
	fill_attrs(ino, &st);
	ret = read_xattrs(w, ino);
	if (ret)
		return import_fail(ic, ret, "%s: reading xattrs: %s", w->path, strerror(-ret));
	if (slot)
		*slot = ino;
	struct tree_node *node = tree_put(ic->tree, dir, name, nlen, 0, ino);
	if (!node)
		return -ENOMEM;
	ic->files++;
	if (type == MF_SYMLINK) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target));

		if (n < 0 || n >= (ssize_t)sizeof(target)) {
			ret = n < 0 ? -errno : -ENAMETOOLONG;
			return import_fail(ic, ret, "%s: readlink: %s", w->path, strerror(-ret));
		}
		ino->link = tree_strdup(ic->tree, target, (size_t)n);
		if (!ino->link)
			return -ENOMEM;
		ino->link_len = (uint32_t)n;
		ino->size = (uint64_t)n;
	} else if (type == MF_REG) {
		int fd = open_noatime(dfd, name, O_NOFOLLOW);

		if (fd < 0) {
			ret = -errno;
			return import_fail(ic, ret, "%s: %s", w->path, strerror(-ret));
		}
		ret = import_file_data(ic, ino, fd, (uint64_t)st.st_size,
				       (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size);
		close(fd);
		if (ret)
			return import_fail(ic, ret, "%s: %s", w->path,
					   ret == -EIO ? "file shrank while being imported" :
							 strerror(-ret));
		import_progress(ic);
	} else if (type == MF_DIR) {
		int sub = open_noatime(dfd, name, O_DIRECTORY | O_NOFOLLOW);

		if (sub < 0) {
			ret = -errno;
			return import_fail(ic, ret, "%s: %s", w->path, strerror(-ret));
		}
		ret = walk_dir(w, sub, node, plen + 1 + nlen);
		/* walk_dir closed sub */
	}
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
static int walk_dir(struct walk *w, int dfd, struct tree_node *dir, size_t plen)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;

	if (!d) {
		ret = -errno;
		close(dfd);
		return import_fail(w->ic, ret, "%s: %s", w->path, strerror(-ret));
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				ret = -errno;
				w->path[plen] = '\0';
				import_fail(w->ic, ret, "%s: %s", w->path, strerror(-ret));
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
			ret = walk_entry(w, dirfd(d), dir, names[i] + 1, plen);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return ret;
}

int import_dir(struct import_ctx *ic, const char *src)
{
	struct walk w = { .ic = ic };
	struct tree_inode *root = tree_root(ic->tree)->ino;
	struct stat st;
	size_t plen = strlen(src);
	int dfd, ret;

	while (plen > 1 && src[plen - 1] == '/')
		plen--;
	if (plen >= sizeof(w.path))
		return import_fail(ic, -ENAMETOOLONG, "%s: %s", src, strerror(ENAMETOOLONG));
	memcpy(w.path, src, plen);
	w.path[plen] = '\0';
	dfd = open_noatime(AT_FDCWD, w.path, O_DIRECTORY);
	if (dfd < 0 || fstat(dfd, &st) < 0) {
		ret = -errno;
		if (dfd >= 0)
			close(dfd);
		return import_fail(ic, ret, "%s: %s", src, strerror(-ret));
	}
	fill_attrs(root, &st);
	ret = read_xattrs(&w, root);
	if (ret) {
		close(dfd);
		return import_fail(ic, ret, "%s: reading xattrs: %s", src, strerror(-ret));
	}
	if (plen == 1 && w.path[0] == '/')
		plen = 0; /* importing "/": children are "/x", not "//x" */
	ret = walk_dir(&w, dfd, tree_root(ic->tree), plen);
	free(w.links.slots);
	free(w.xbuf);
	return ret;
}
