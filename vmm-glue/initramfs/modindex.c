/* SPDX-License-Identifier: MIT */
/*
 * The index of a kernel's modules (internal.h): where its modules directory is, where each
 * module is (modules.dep when depmod ran, else a walk of the tree), which are built in
 * (modules.builtin, and the aliases of built-in code in modules.builtin.modinfo), and the
 * aliases modules.alias lists; every file and directory looked at noted for the recipe memo
 * (memo.h).
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
#include "../../common/fsutil.h"
#include "../../common/grow.h"
#include "internal.h"

void mod_name(const char *path, char *name, size_t len)
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
	free(m->builtin_info);
	for (size_t i = 0; i < m->n_alias * 2; i++)
		free(m->alias[i]);
	free(m->alias);
	free(m->order);
	for (size_t i = 0; i < m->n_watch; i++)
		free(m->watch[i].path);
	free(m->watch);
	for (size_t i = 0; i < m->n_missing; i++)
		free(m->missing[i].target);
	free(m->missing);
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

	if (!grow((void **)&m->watch, &m->cap_watch, m->n_watch + 1, sizeof(*m->watch)))
		return -ENOMEM;
	w = &m->watch[m->n_watch];
	w->path = strdup(path);
	if (!w->path)
		return -ENOMEM;
	if (stat(path, &st) || digest_memo_identity(&st, w->id, sizeof(w->id)))
		snprintf(w->id, sizeof(w->id), "-");
	m->n_watch++;
	return 0;
}

struct mod *mod_find(struct modset *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->mods[i].name, name))
			return &m->mods[i];
	return NULL;
}

bool mod_builtin(const struct modset *m, const char *name)
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
	if (!grow_from((void **)&m->mods, &m->cap, m->n + 1, sizeof(*m->mods), 256))
		return -ENOMEM;
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

/*
 * A file of the modules directory, NUL-terminated, its length in *len (may be NULL); absent
 * → 0 with *data NULL.
 */
static int index_read(struct modset *m, const char *name, char **data, size_t *len)
{
	char p[PATH_MAX];
	uint8_t *d;
	size_t n;
	int rc;

	*data = NULL;
	if (len)
		*len = 0;
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
	if (len)
		*len = n;
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
		if (!grow_from((void **)&m->builtin, &m->cap_builtin, m->n_builtin + 1,
			       sizeof(*m->builtin), 256))
			return -ENOMEM;
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
	rc = index_read(m, "modules.dep", &text, NULL);
	if (!rc && text)
		rc = index_dep(m, text);
	free(text);
	if (!rc && !m->n)
		rc = index_walk(m, m->dir, 0);
	if (rc)
		return rc;
	rc = index_read(m, "modules.builtin", &text, NULL);
	if (!rc && text)
		rc = index_builtin(m, text);
	free(text);
	if (!rc) /* NUL-separated "module.key=value": kept whole, looked up rarely */
		rc = index_read(m, "modules.builtin.modinfo", &m->builtin_info,
				&m->builtin_info_len);
	if (rc)
		return rc;
	rc = index_read(m, "modules.alias", &text, NULL);
	if (!rc && text)
		rc = index_alias(m, text);
	free(text);
	return rc;
}

const char *alias_next(const struct modset *m, const char *alias, size_t *i)
{
	for (; *i < m->n_alias; (*i)++)
		if (!strcmp(m->alias[*i * 2], alias))
			return m->alias[(*i)++ * 2 + 1];
	return NULL;
}

bool mod_builtin_alias(const struct modset *m, const char *alias)
{
	const char *p = m->builtin_info, *end = p + m->builtin_info_len;
	size_t n = strlen(alias);

	for (; p && p < end; p += strnlen(p, (size_t)(end - p)) + 1) {
		size_t len = strnlen(p, (size_t)(end - p));
		const char *dot = memchr(p, '.', len), *eq = memchr(p, '=', len);

		if (dot && eq && eq - dot == 6 && !memcmp(dot + 1, "alias", 5) &&
		    (size_t)(p + len - (eq + 1)) == n && !memcmp(eq + 1, alias, n))
			return true;
	}
	return false;
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

int modset_open(const struct initramfs_opts *o, struct modset *m)
{
	int rc = modset_locate(o, m);

	if (rc)
		return rc;
	rc = modset_index(m);
	if (rc)
		return initramfs_fail(o, rc, "%s: %s", m->dir, strerror(-rc));
	return 0;
}
