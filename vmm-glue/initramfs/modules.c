/* SPDX-License-Identifier: MIT */
/*
 * The kernel modules the guest needs (internal.h, modset_resolve): where the kernel's
 * modules are, an index of them (modules.dep when depmod ran, else a walk of the tree;
 * modules.builtin; modules.alias, else the aliases modules declare in their own .modinfo),
 * and a depth-first walk of their .modinfo dependencies, each module read and decompressed
 * (.ko.xz, .ko.zst, .ko.gz) on the way.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/digest_memo.h"
#include "../../common/dl_archive.h"
#include "../../common/fsutil.h"
#include "../boot.h"
#include "internal.h"

#define MAX_MODULE (256u << 20)   /* a decompressed module larger than this is refused */
#define MAX_DEPTH 64

/* ------------------------------------------------------------------ the index */

static void mod_name(const char *path, char *name, size_t len)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	n = strcspn(b, ".");
	if (n >= len)
		n = len - 1;
	for (size_t i = 0; i < n; i++)
		name[i] = b[i] == '-' ? '_' : b[i];
	name[n] = 0;
}

static bool is_module_file(const char *name)
{
	static const char *const sfx[] = { ".ko", ".ko.xz", ".ko.zst", ".ko.gz" };
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		size_t s = strlen(sfx[i]);

		if (n > s && !strcmp(name + n - s, sfx[i]))
			return true;
	}
	return false;
}

void modset_free(struct modset *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->mods[i].path);
		free(m->mods[i].data);
	}
	free(m->mods);
	for (size_t i = 0; i < m->n_builtin; i++)
		free(m->builtin[i]);
	free(m->builtin);
	for (size_t i = 0; i < m->n_alias * 2; i++)
		free(m->alias[i]);
	free(m->alias);
	free(m->order);
	for (size_t i = 0; i < m->n_watch; i++)
		free(m->watch[i].path);
	free(m->watch);
	memset(m, 0, sizeof(*m));
}

/*
 * Note path's state before the resolution reads it: a recipe memo is valid only while every
 * noted path is as it was (a change after the note fails that check; none goes unseen).
 */
static int watch_add(struct modset *m, const char *path)
{
	struct watch *w;
	struct stat st;

	if (m->n_watch == m->cap_watch) {
		size_t cap = m->cap_watch ? m->cap_watch * 2 : 64;
		struct watch *p = realloc(m->watch, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		m->watch = p;
		m->cap_watch = cap;
	}
	w = &m->watch[m->n_watch];
	w->path = strdup(path);
	if (!w->path)
		return -ENOMEM;
	if (stat(path, &st) || digest_memo_identity(&st, w->id, sizeof(w->id)))
		snprintf(w->id, sizeof(w->id), "-");
	m->n_watch++;
	return 0;
}

static struct mod *mod_find(struct modset *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->mods[i].name, name))
			return &m->mods[i];
	return NULL;
}

static bool mod_builtin(const struct modset *m, const char *name)
{
	for (size_t i = 0; i < m->n_builtin; i++)
		if (!strcmp(m->builtin[i], name))
			return true;
	return false;
}

static int mod_add(struct modset *m, const char *path)
{
	char name[64];
	struct mod *x;

	mod_name(path, name, sizeof(name));
	if (!name[0] || mod_find(m, name))
		return 0; /* first one wins (modules.dep order, or the first found) */
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct mod *p = realloc(m->mods, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		m->mods = p;
		m->cap = cap;
	}
	x = &m->mods[m->n];
	memset(x, 0, sizeof(*x));
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->path = strdup(path);
	if (!x->path)
		return -ENOMEM;
	m->n++;
	return 0;
}

/* Every module file under dir (16 levels deep at most), each directory noted. */
static int index_walk(struct modset *m, const char *dir, int depth)
{
	DIR *d;
	struct dirent *e;
	int rc = 0;

	if (depth > 16)
		return 0;
	rc = watch_add(m, dir);
	if (rc)
		return rc;
	d = opendir(dir);
	if (!d)
		return depth ? 0 : -errno;
	while (!rc && (e = readdir(d))) {
		char p[PATH_MAX];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p))
			continue;
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			rc = index_walk(m, p, depth + 1);
		else if (S_ISREG(st.st_mode) && is_module_file(e->d_name))
			rc = mod_add(m, p);
	}
	closedir(d);
	return rc;
}

/* Lines of a text file in the modules directory; absent → 0 with *data NULL. */
static int index_read(struct modset *m, const char *name, char **data)
{
	char p[PATH_MAX];
	uint8_t *d;
	size_t n;
	int rc;

	*data = NULL;
	if (snprintf(p, sizeof(p), "%s/%s", m->dir, name) >= (int)sizeof(p))
		return -ENAMETOOLONG;
	rc = watch_add(m, p);
	if (rc)
		return rc;
	rc = fs_read_file(p, &d, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	*data = (char *)d;
	return 0;
}

/* modules.dep (depmod ran): where each module it lists is. */
static int index_dep(struct modset *m, char *dep)
{
	char *save, *line;
	int rc = 0;

	for (line = strtok_r(dep, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':'), p[PATH_MAX];

		if (!colon)
			continue;
		*colon = 0;
		if (snprintf(p, sizeof(p), "%s/%s", m->dir, line) < (int)sizeof(p) &&
		    !access(p, R_OK))
			rc = mod_add(m, p);
	}
	return rc;
}

/* modules.builtin: the modules built into the kernel, by normalized name. */
static int index_builtin(struct modset *m, char *builtin)
{
	char *save, *line;

	for (line = strtok_r(builtin, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (m->n_builtin == m->cap_builtin) {
			size_t cap = m->cap_builtin ? m->cap_builtin * 2 : 256;
			char **p = realloc(m->builtin, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			m->builtin = p;
			m->cap_builtin = cap;
		}
		m->builtin[m->n_builtin] = malloc(64);
		if (!m->builtin[m->n_builtin])
			return -ENOMEM;
		mod_name(line, m->builtin[m->n_builtin++], 64);
	}
	return 0;
}

/* modules.alias (depmod output): resolves soft dependencies named by alias. */
static int index_alias(struct modset *m, char *alias)
{
	char *save, *line;

	for (line = strtok_r(alias, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char a[128], mod[64], **p;

		if (sscanf(line, "alias %127s %63s", a, mod) != 2 || strchr(a, '*'))
			continue;
		p = realloc(m->alias, (m->n_alias + 1) * 2 * sizeof(*p));
		if (!p)
			return -ENOMEM;
		m->alias = p;
		p[m->n_alias * 2] = strdup(a);
		p[m->n_alias * 2 + 1] = strdup(mod);
		m->n_alias++;
		if (!p[m->n_alias * 2 - 2] || !p[m->n_alias * 2 - 1])
			return -ENOMEM;
	}
	return 0;
}

/* Where the modules are, which are built in, and the aliases (m->dir is set). */
static int modset_index(struct modset *m)
{
	char *text;
	int rc;

	/* Where each module is: modules.dep when depmod ran, else a walk of the tree. */
	rc = index_read(m, "modules.dep", &text);
	if (!rc && text)
		rc = index_dep(m, text);
	free(text);
	if (!rc && !m->n)
		rc = index_walk(m, m->dir, 0);
	if (rc)
		return rc;
	rc = index_read(m, "modules.builtin", &text);
	if (!rc && text)
		rc = index_builtin(m, text);
	free(text);
	if (rc)
		return rc;
	rc = index_read(m, "modules.alias", &text);
	if (!rc && text)
		rc = index_alias(m, text);
	free(text);
	return rc;
}

/* ------------------------------------------------------------------ reading a module */

/* Decompress .xz / .zst / .gz (libarchive's raw format with every filter). */
static int mod_decompress(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
{
	struct archive *a;
	struct archive_entry *e;
	struct buf b = { 0 };
	int rc = 0;

	if (dl_archive_load())
		return -ELIBACC;
	a = sym_archive_read_new();
	if (!a)
		return -ENOMEM;
	sym_archive_read_support_filter_all(a);
	sym_archive_read_support_format_raw(a);
	if (sym_archive_read_open_memory(a, in, len) != ARCHIVE_OK ||
	    sym_archive_read_next_header(a, &e) != ARCHIVE_OK || sym_archive_filter_count(a) < 2) {
		rc = -EILSEQ;
		goto out;
	}
	for (;;) {
		char tmp[65536];
		la_ssize_t n = sym_archive_read_data(a, tmp, sizeof(tmp));

		if (n < 0) {
			rc = -EILSEQ;
			break;
		}
		if (n == 0)
			break;
		if (b.len + (size_t)n > MAX_MODULE) {
			rc = -EFBIG;
			break;
		}
		buf_add(&b, tmp, (size_t)n);
		if (b.oom) {
			rc = -ENOMEM;
			break;
		}
	}
out:
	sym_archive_read_free(a);
	if (rc) {
		free(b.p);
		return rc;
	}
	*out = (uint8_t *)b.p;
	*out_len = b.len;
	return 0;
}

/* x->data: the module, decompressed; x->id: the identity of the file read. */
static int mod_load(const struct initramfs_opts *o, struct mod *x)
{
	struct fs_map raw;
	int rc;
	size_t plen = strlen(x->path);

	if (x->data)
		return 0;
	rc = fs_map_file(x->path, &raw);
	if (rc)
		return initramfs_fail(o, rc, "%s: %s", x->path, strerror(-rc));
	if (digest_memo_identity(&raw.st, x->id, sizeof(x->id)))
		x->id[0] = '\0';
	if (plen > 3 && !strcmp(x->path + plen - 3, ".ko")) {
		x->data = malloc(raw.len ? raw.len : 1);
		x->len = raw.len;
		if (x->data)
			memcpy(x->data, raw.data, raw.len);
		fs_unmap(&raw);
		if (!x->data)
			return initramfs_fail(o, -ENOMEM, "out of memory");
	} else {
		rc = mod_decompress(raw.data, raw.len, &x->data, &x->len);
		fs_unmap(&raw);
		if (rc)
			return initramfs_fail(o, rc, "%s: cannot decompress (%s)", x->path,
					      rc == -EILSEQ ? "corrupt or unknown compression"
							    : strerror(-rc));
	}
	if (!elf_is_elf64le(x->data, x->len))
		return initramfs_fail(o, -ENOEXEC, "%s: not a kernel module (no ELF header)",
				      x->path);
	return 0;
}

/* ------------------------------------------------------------------ dependencies */

/*
 * The next key=value entry of a .modinfo blob at or after *pos: its value (NUL-terminated
 * within the blob, or at its end: *vlen bytes), *pos moved past it; NULL when none is left.
 */
static const char *modinfo_next(const char *info, size_t len, const char *key, size_t *pos,
				size_t *vlen)
{
	size_t klen = strlen(key);

	while (*pos < len) {
		const char *s = info + *pos;
		size_t n = strnlen(s, len - *pos);

		*pos += n + 1;
		if (n > klen && s[klen] == '=' && !memcmp(s, key, klen)) {
			*vlen = n - klen - 1;
			return s + klen + 1;
		}
	}
	return NULL;
}

/* The value of key in a .modinfo blob (first occurrence), copied to out; 0 if absent. */
static bool modinfo_get(const char *info, size_t len, const char *key, char *out, size_t out_len)
{
	size_t pos = 0, v;
	const char *val = modinfo_next(info, len, key, &pos, &v);

	if (!val)
		return false;
	if (v >= out_len)
		v = out_len - 1;
	memcpy(out, val, v);
	out[v] = 0;
	return true;
}

/* Whether a .modinfo blob has key=val (any of its occurrences). */
static bool modinfo_has(const char *info, size_t len, const char *key, const char *val)
{
	size_t pos = 0, v, n = strlen(val);
	const char *s;

	while ((s = modinfo_next(info, len, key, &pos, &v)))
		if (v == n && !memcmp(s, val, n))
			return true;
	return false;
}

static const char *alias_find(const struct modset *m, const char *name)
{
	for (size_t i = 0; i < m->n_alias; i++)
		if (!strcmp(m->alias[i * 2], name))
			return m->alias[i * 2 + 1];
	return NULL;
}

static int order_visit(const struct initramfs_opts *o, struct modset *m, struct mod *x,
		       int depth);

/*
 * A soft dependency named by an alias that no modules.alias lists (depmod has not run, as
 * in a kernel package unpacked as shipped: Debian's ext4 wants "crypto-crc32c"): the
 * modules whose names begin with the alias less its "crypto-" (crc32c_generic,
 * crc32c_intel) and that declare the alias in their own .modinfo, as depmod would have
 * found them; each is visited (one the CPU cannot use fails its insmod, which is only said).
 * Only those names are read, not the whole tree.
 */
static int softdep_by_modinfo(const struct initramfs_opts *o, struct modset *m,
			      const struct mod *x, const char *alias, int depth)
{
	const char *base = strncmp(alias, "crypto-", 7) ? alias : alias + 7, *last = "";
	char prefix[64];
	size_t pl;

	mod_name(base, prefix, sizeof(prefix));
	pl = strlen(prefix);
	if (!pl)
		return 0;
	for (;;) { /* in the order of their names, whatever the directory's order */
		struct mod *d = NULL;
		const uint8_t *info;
		size_t len;
		int rc;

		for (size_t i = 0; i < m->n; i++) {
			struct mod *c = &m->mods[i];

			if (c != x && !strncmp(c->name, prefix, pl) && strcmp(c->name, last) > 0 &&
			    (!d || strcmp(c->name, d->name) < 0))
				d = c;
		}
		if (!d)
			return 0;
		last = d->name;
		if (d->state == 1)
			continue;
		rc = mod_load(o, d);
		if (rc)
			return rc;
		if (elf_section(d->data, d->len, ".modinfo", &info, &len) || !info ||
		    !modinfo_has((const char *)info, len, "alias", alias))
			continue;
		rc = order_visit(o, m, d, depth + 1);
		if (rc)
			return rc;
	}
}

/* Depth-first: soft pre-dependencies and hard dependencies first, then the module. */
static int order_visit(const struct initramfs_opts *o, struct modset *m, struct mod *x, int depth)
{
	const uint8_t *modinfo;
	const char *info;
	size_t info_len;
	char deps[1024], soft[1024];
	int rc;

	if (x->state == 2)
		return 0;
	if (x->state == 1 || depth > MAX_DEPTH)
		return initramfs_fail(o, -ELOOP, "module %s: dependency cycle", x->name);
	x->state = 1;
	rc = mod_load(o, x);
	if (rc)
		return rc;
	rc = elf_section(x->data, x->len, ".modinfo", &modinfo, &info_len);
	if (rc)
		return initramfs_fail(o, rc, "%s: malformed ELF section table", x->path);
	info = (const char *)modinfo;

	/* softdep=pre: a b post: c — only "pre" names that exist as modules; soft. */
	if (info && modinfo_get(info, info_len, "softdep", soft, sizeof(soft))) {
		bool pre = false;
		char *save, *w;

		for (w = strtok_r(soft, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
			char name[64];
			const char *t;
			struct mod *d;

			if (!strcmp(w, "pre:") || !strcmp(w, "post:")) {
				pre = !strcmp(w, "pre:");
				continue;
			}
			if (!pre)
				continue;
			mod_name(w, name, sizeof(name));
			d = mod_find(m, name);
			if (!d && (t = alias_find(m, w)))
				d = mod_find(m, t);
			if (!d && !m->n_alias) {
				rc = softdep_by_modinfo(o, m, x, w, depth);
				if (rc)
					return rc;
				continue;
			}
			if (d && d != x && d->state != 1) {
				rc = order_visit(o, m, d, depth + 1);
				if (rc)
					return rc;
			}
		}
	}
	if (info && modinfo_get(info, info_len, "depends", deps, sizeof(deps))) {
		char *save, *w;

		for (w = strtok_r(deps, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
			char name[64];
			struct mod *d;

			mod_name(w, name, sizeof(name));
			if (!name[0])
				continue;
			d = mod_find(m, name);
			if (!d) {
				if (mod_builtin(m, name))
					continue;
				return initramfs_fail(o, -ENOENT, "module %s needs %s, which is "
						      "not in %s", x->name, name, m->dir);
			}
			rc = order_visit(o, m, d, depth + 1);
			if (rc)
				return rc;
		}
	}
	x->state = 2;
	m->order[m->n_order++] = x;
	return 0;
}

/* Whether dir is a modules directory; noted first (its entries decide, and its identity
 * changes when they do). */
static int dir_is_modules(struct modset *m, const char *dir)
{
	char p[PATH_MAX];
	struct stat st;

	if (watch_add(m, dir))
		return -ENOMEM;
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return 0;
	if (snprintf(p, sizeof(p), "%s/modules.builtin", dir) < (int)sizeof(p) && !access(p, R_OK))
		return 1;
	if (snprintf(p, sizeof(p), "%s/modules.dep", dir) < (int)sizeof(p) && !access(p, R_OK))
		return 1;
	return snprintf(p, sizeof(p), "%s/kernel", dir) < (int)sizeof(p) && !stat(p, &st) &&
	       S_ISDIR(st.st_mode);
}

/* m->dir: the kernel's modules directory (initramfs_opts.modules_dir). */
static int modset_locate(const struct initramfs_opts *o, struct modset *m)
{
	char kdir[PATH_MAX], p[PATH_MAX];

	if (o->modules_dir) {
		if (snprintf(p, sizeof(p), "%s/%s", o->modules_dir, m->ver) < (int)sizeof(p) &&
		    dir_is_modules(m, p) > 0) {
			snprintf(m->dir, sizeof(m->dir), "%s", p);
			return 0;
		}
		if (dir_is_modules(m, o->modules_dir) > 0) {
			snprintf(m->dir, sizeof(m->dir), "%s", o->modules_dir);
			return 0;
		}
		return initramfs_fail(o, -ENOENT, "%s: no kernel modules for %s there",
				      o->modules_dir, m->ver);
	}
	fs_dirname(o->kernel, kdir, sizeof(kdir));
	for (int i = 0; i < 4; i++) {
		static const char *const where[] = { "%s/../lib/modules/%s",
						     "%s/../usr/lib/modules/%s",
						     "%.0s/lib/modules/%s", "%.0s/usr/lib/modules/%s" };

		if (snprintf(p, sizeof(p), where[i], kdir, m->ver) >= (int)sizeof(p))
			continue;
		if (dir_is_modules(m, p) > 0) {
			if (!realpath(p, m->dir))
				snprintf(m->dir, sizeof(m->dir), "%s", p);
			return 0;
		}
	}
	return initramfs_fail(o, -ENOENT, "no modules for kernel %s next to %s or in "
			      "/lib/modules: pass --modules DIR", m->ver, o->kernel);
}

/*
 * The modules the guest needs, in load order: virtio_blk, the virtio transports the
 * kernel has (virtio_pci for QEMU -M pc, virtio_mmio for the built-in VMM), the root
 * filesystem — each skipped when built in, with all their dependencies.
 */
int modset_resolve(const struct initramfs_opts *o, struct modset *m, const char *fstype)
{
	const char *want[] = { "virtio_pci", "virtio_mmio", "virtio_blk", fstype };
	bool required[] = { false, false, true, true };
	int transports = 0, rc;

	rc = modset_locate(o, m);
	if (rc)
		return rc;
	rc = modset_index(m);
	if (rc)
		return initramfs_fail(o, rc, "%s: %s", m->dir, strerror(-rc));
	m->order = calloc(m->n + 1, sizeof(*m->order));
	if (!m->order)
		return initramfs_fail(o, -ENOMEM, "out of memory");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char name[64];
		struct mod *x;

		mod_name(want[i], name, sizeof(name));
		x = mod_find(m, name);
		if (x || mod_builtin(m, name))
			transports += i < 2;
		if (!x) {
			if (required[i] && !mod_builtin(m, name))
				return initramfs_fail(o, -ENOENT, "kernel %s has no %s (neither a "
						      "module in %s nor built in)", m->ver, name,
						      m->dir);
			continue;
		}
		rc = order_visit(o, m, x, 0);
		if (rc)
			return rc;
	}
	if (!transports)
		return initramfs_fail(o, -ENOENT, "kernel %s has neither virtio_pci nor "
				      "virtio_mmio (in %s)", m->ver, m->dir);
	return 0;
}
