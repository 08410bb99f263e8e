/* SPDX-License-Identifier: MIT */
/*
 * The guest side of `lazyblk run`: build (and cache) an initramfs from a static busybox and
 * the kernel's virtio modules. See initramfs.h for the contents and the /init design.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/dl_archive.h"
#include "../common/digest_memo.h"
#include "../common/fsutil.h"
#include "../common/sha256.h"
#include "initramfs.h"
#include "initramfs_memo.h"

#define FORMAT_TAG "lazyblk-initramfs-v1"
#define MAX_MODULE (256u << 20)   /* a decompressed module larger than this is refused */
#define MAX_DEPTH 64

/* ------------------------------------------------------------------ errors, buffers */

static int fail(const struct initramfs_opts *o, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(const struct initramfs_opts *o, int rc, const char *fmt, ...)
{
	va_list ap;

	if (o->err && o->err_len) {
		va_start(ap, fmt);
		vsnprintf(o->err, o->err_len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

static void buf_add(struct buf *b, const void *data, size_t len)
{
	if (b->oom)
		return;
	if (b->len + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *p;

		while (cap < b->len + len + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = 0;
}

static void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* A word for sh, single-quoted: ' becomes '\'' */
static void buf_quote(struct buf *b, const char *s)
{
	buf_str(b, "'");
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			buf_str(b, "'\\''");
		else
			buf_add(b, p, 1);
	}
	buf_str(b, "'");
}

/* ------------------------------------------------------------------ ELF helpers */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static bool elf64_le(const uint8_t *d, size_t len)
{
	return len >= 64 && !memcmp(d, "\x7f" "ELF", 4) && d[4] == 2 && d[5] == 1;
}

/* 1 static, 0 dynamic (has PT_INTERP), -1 not an x86-64 ELF executable. */
static int elf_is_static(const uint8_t *d, size_t len)
{
	uint64_t phoff;
	uint16_t phentsize, phnum;

	if (!elf64_le(d, len) || rd16(d + 18) != 62 /* EM_X86_64 */)
		return -1;
	phoff = rd64(d + 32);
	phentsize = rd16(d + 54);
	phnum = rd16(d + 56);
	if (phentsize < 56 || phoff > len || (uint64_t)phnum * phentsize > len - phoff)
		return -1;
	for (uint16_t i = 0; i < phnum; i++)
		if (rd32(d + phoff + (uint64_t)i * phentsize) == 3 /* PT_INTERP */)
			return 0;
	return 1;
}

/* The .modinfo section of a kernel module: NUL-separated "key=value" strings. */
static int elf_modinfo(const uint8_t *d, size_t len, const char **info, size_t *info_len)
{
	uint64_t shoff, str_off, str_size;
	uint16_t shentsize, shnum, shstrndx;
	const uint8_t *sh;

	if (!elf64_le(d, len))
		return -ENOEXEC;
	shoff = rd64(d + 40);
	shentsize = rd16(d + 58);
	shnum = rd16(d + 60);
	shstrndx = rd16(d + 62);
	if (shentsize < 64 || shoff > len || (uint64_t)shnum * shentsize > len - shoff ||
	    shstrndx >= shnum)
		return -ENOEXEC;
	sh = d + shoff + (uint64_t)shstrndx * shentsize;
	str_off = rd64(sh + 24);
	str_size = rd64(sh + 32);
	if (str_off > len || str_size > len - str_off)
		return -ENOEXEC;
	for (uint16_t i = 0; i < shnum; i++) {
		const uint8_t *s = d + shoff + (uint64_t)i * shentsize;
		uint32_t name = rd32(s);
		uint64_t off = rd64(s + 24), size = rd64(s + 32);

		if (name >= str_size || str_size - name < sizeof(".modinfo") ||
		    memcmp(d + str_off + name, ".modinfo", sizeof(".modinfo")))
			continue;
		if (off > len || size > len - off)
			return -ENOEXEC;
		*info = (const char *)d + off;
		*info_len = size;
		return 0;
	}
	*info = NULL;
	*info_len = 0;
	return 0;
}

/* The value of key in a .modinfo blob (first occurrence), copied to out; 0 if absent. */
static bool modinfo_get(const char *info, size_t len, const char *key, char *out, size_t out_len)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i < len;) {
		const char *s = info + i;
		size_t n = strnlen(s, len - i);

		if (n > klen && s[klen] == '=' && !memcmp(s, key, klen)) {
			size_t v = n - klen - 1;

			if (v >= out_len)
				v = out_len - 1;
			memcpy(out, s + klen + 1, v);
			out[v] = 0;
			return true;
		}
		i += n + 1;
	}
	return false;
}

/* ------------------------------------------------------------------ kernel version */

static int version_from_image(const uint8_t *d, size_t len, char *ver, size_t vlen,
			      const char **why)
{
	const char *s = NULL;
	size_t max = 0, n;

	if (len >= 0x210 && !memcmp(d + 0x202, "HdrS", 4)) {
		uint16_t proto = rd16(d + 0x206), off = rd16(d + 0x20e);

		if (proto < 0x0200 || !off || (size_t)off + 0x200 >= len) {
			*why = "bzImage has no kernel_version string in its setup header";
			return -ENOEXEC;
		}
		s = (const char *)d + off + 0x200;
		max = len - off - 0x200;
	} else if (elf64_le(d, len)) {
		static const char banner[] = "Linux version ";
		const char *p = memmem(d, len, banner, sizeof(banner) - 1);

		if (!p) {
			*why = "vmlinux has no 'Linux version' banner";
			return -ENOEXEC;
		}
		s = p + sizeof(banner) - 1;
		max = len - (size_t)((const uint8_t *)s - d);
	} else {
		*why = "not a Linux kernel (no bzImage setup header, not an ELF vmlinux)";
		return -ENOEXEC;
	}
	for (n = 0; n < max && n < 128 && s[n] > ' ' && s[n] < 0x7f; n++)
		;
	if (!n || n >= vlen || s[0] == '.' || memchr(s, '/', n)) {
		*why = "kernel version string is empty or malformed";
		return -ENOEXEC;
	}
	memcpy(ver, s, n);
	ver[n] = 0;
	return 0;
}

int initramfs_kernel_version(const char *kernel, char *ver, size_t len, const char **why)
{
	uint8_t *d;
	size_t n;
	int rc = fs_read_file(kernel, &d, &n);

	if (rc) {
		*why = strerror(-rc);
		return rc;
	}
	rc = version_from_image(d, n, ver, len, why);
	free(d);
	return rc;
}

/* ------------------------------------------------------------------ image config */

static int json_strv(struct json_object *o, char ***out, size_t *n)
{
	size_t len;

	*out = NULL;
	*n = 0;
	if (!o || json_object_is_type(o, json_type_null))
		return 0;
	if (json_object_is_type(o, json_type_string)) { /* tolerated: one word */
		*out = calloc(1, sizeof(char *));
		if (!*out || !((*out)[0] = strdup(json_object_get_string(o))))
			return -ENOMEM;
		*n = 1;
		return 0;
	}
	if (!json_object_is_type(o, json_type_array))
		return -EINVAL;
	len = json_object_array_length(o);
	*out = calloc(len + 1, sizeof(char *));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		struct json_object *e = json_object_array_get_idx(o, i);

		if (!json_object_is_type(e, json_type_string))
			return -EINVAL;
		(*out)[i] = strdup(json_object_get_string(e));
		if (!(*out)[i])
			return -ENOMEM;
		*n = i + 1;
	}
	return 0;
}

static int json_str(struct json_object *o, const char *key, char **out)
{
	struct json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -EINVAL;
	if (!json_object_get_string_len(v))
		return 0;
	*out = strdup(json_object_get_string(v));
	return *out ? 0 : -ENOMEM;
}

void initramfs_config_free(struct initramfs_image_config *c)
{
	char **v[] = { c->entrypoint, c->cmd, c->env };
	size_t n[] = { c->n_entrypoint, c->n_cmd, c->n_env };

	for (int k = 0; k < 3; k++) {
		for (size_t i = 0; v[k] && i < n[k]; i++)
			free(v[k][i]);
		free(v[k]);
	}
	free(c->workdir);
	free(c->user);
	memset(c, 0, sizeof(*c));
}

int initramfs_config_parse(const char *json, size_t len, struct initramfs_image_config *out,
			   const char **why)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *root, *cfg, *v;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!tok)
		return -ENOMEM;
	root = json_tokener_parse_ex(tok, json, (int)len);
	json_tokener_free(tok);
	if (!root || !json_object_is_type(root, json_type_object)) {
		json_object_put(root);
		*why = "image config is not a JSON object";
		return -EINVAL;
	}
	cfg = root;
	if (json_object_object_get_ex(root, "config", &v) && json_object_is_type(v, json_type_object))
		cfg = v;
	else if (json_object_object_get_ex(root, "Config", &v) &&
		 json_object_is_type(v, json_type_object))
		cfg = v; /* docker's container config spelling */
	if (!rc && json_object_object_get_ex(cfg, "Entrypoint", &v))
		rc = json_strv(v, &out->entrypoint, &out->n_entrypoint);
	if (!rc && json_object_object_get_ex(cfg, "Cmd", &v))
		rc = json_strv(v, &out->cmd, &out->n_cmd);
	if (!rc && json_object_object_get_ex(cfg, "Env", &v))
		rc = json_strv(v, &out->env, &out->n_env);
	if (!rc)
		rc = json_str(cfg, "WorkingDir", &out->workdir);
	if (!rc)
		rc = json_str(cfg, "User", &out->user);
	json_object_put(root);
	if (rc) {
		*why = rc == -ENOMEM ? "out of memory"
				     : "image config: Entrypoint/Cmd/Env/WorkingDir/User has the wrong type";
		initramfs_config_free(out);
	}
	return rc;
}

/* ------------------------------------------------------------------ modules */

struct mod {
	char name[64];        /* normalized: '-' → '_' */
	char *path;           /* absolute */
	char id[128];         /* identity of the file when it was read (initramfs_memo.h) */
	uint8_t *data;        /* decompressed, once needed */
	size_t len;
	int state;            /* 0 new, 1 visiting, 2 ordered */
};

/* A file or directory the module resolution looked at, and its identity then ("-": absent). */
struct watch {
	char *path;
	char id[128];
};

struct modset {
	char dir[PATH_MAX];
	char ver[128];
	struct mod *mods;
	size_t n, cap;
	char **builtin;       /* normalized names */
	size_t n_builtin, cap_builtin;
	char **alias;         /* pairs: alias, module (from modules.alias, if any) */
	size_t n_alias;
	struct mod **order;   /* load order */
	size_t n_order;
	struct watch *watch;  /* what a recipe memo must find unchanged (initramfs_memo.h) */
	size_t n_watch, cap_watch;
};

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

static void modset_free(struct modset *m)
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

static int walk(struct modset *m, const char *dir, int depth)
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
			rc = walk(m, p, depth + 1);
		else if (S_ISREG(st.st_mode) && is_module_file(e->d_name))
			rc = mod_add(m, p);
	}
	closedir(d);
	return rc;
}

/* Lines of a text file in the modules directory; absent → 0 with *data NULL. */
static int read_text(struct modset *m, const char *name, char **data)
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

static int modset_index(struct modset *m)
{
	char *dep, *builtin, *alias, *save, *line;
	int rc;

	/* Where each module is: modules.dep when depmod ran, else a walk of the tree. */
	rc = read_text(m, "modules.dep", &dep);
	if (rc)
		return rc;
	if (dep) {
		for (line = strtok_r(dep, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
			char *colon = strchr(line, ':'), p[PATH_MAX];

			if (!colon)
				continue;
			*colon = 0;
			if (snprintf(p, sizeof(p), "%s/%s", m->dir, line) < (int)sizeof(p) &&
			    !access(p, R_OK))
				rc = mod_add(m, p);
		}
		free(dep);
	}
	if (!rc && !m->n)
		rc = walk(m, m->dir, 0);
	if (rc)
		return rc;

	rc = read_text(m, "modules.builtin", &builtin);
	if (rc)
		return rc;
	for (line = builtin ? strtok_r(builtin, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (m->n_builtin == m->cap_builtin) {
			size_t cap = m->cap_builtin ? m->cap_builtin * 2 : 256;
			char **p = realloc(m->builtin, cap * sizeof(*p));

			if (!p) {
				free(builtin);
				return -ENOMEM;
			}
			m->builtin = p;
			m->cap_builtin = cap;
		}
		m->builtin[m->n_builtin] = malloc(64);
		if (!m->builtin[m->n_builtin]) {
			free(builtin);
			return -ENOMEM;
		}
		mod_name(line, m->builtin[m->n_builtin++], 64);
	}
	free(builtin);

	/* modules.alias (depmod output) resolves soft dependencies named by alias. */
	rc = read_text(m, "modules.alias", &alias);
	if (rc)
		return rc;
	for (line = alias ? strtok_r(alias, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char a[128], mod[64], **p;

		if (sscanf(line, "alias %127s %63s", a, mod) != 2 || strchr(a, '*'))
			continue;
		p = realloc(m->alias, (m->n_alias + 1) * 2 * sizeof(*p));
		if (!p) {
			free(alias);
			return -ENOMEM;
		}
		m->alias = p;
		p[m->n_alias * 2] = strdup(a);
		p[m->n_alias * 2 + 1] = strdup(mod);
		m->n_alias++;
		if (!p[m->n_alias * 2 - 2] || !p[m->n_alias * 2 - 1]) {
			free(alias);
			return -ENOMEM;
		}
	}
	free(alias);
	return 0;
}

/* Decompress .xz / .zst / .gz (libarchive's raw format with every filter). */
static int decompress(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len)
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

static int mod_load(const struct initramfs_opts *o, struct mod *x)
{
	struct fs_map raw;
	int rc;
	size_t plen = strlen(x->path);

	if (x->data)
		return 0;
	rc = fs_map_file(x->path, &raw);
	if (rc)
		return fail(o, rc, "%s: %s", x->path, strerror(-rc));
	if (digest_memo_identity(&raw.st, x->id, sizeof(x->id)))
		x->id[0] = '\0';
	if (plen > 3 && !strcmp(x->path + plen - 3, ".ko")) {
		x->data = malloc(raw.len ? raw.len : 1);
		x->len = raw.len;
		if (x->data)
			memcpy(x->data, raw.data, raw.len);
		fs_unmap(&raw);
		if (!x->data)
			return fail(o, -ENOMEM, "out of memory");
	} else {
		rc = decompress(raw.data, raw.len, &x->data, &x->len);
		fs_unmap(&raw);
		if (rc)
			return fail(o, rc, "%s: cannot decompress (%s)", x->path,
				    rc == -EILSEQ ? "corrupt or unknown compression" : strerror(-rc));
	}
	if (!elf64_le(x->data, x->len))
		return fail(o, -ENOEXEC, "%s: not a kernel module (no ELF header)", x->path);
	return 0;
}

static const char *alias_target(const struct modset *m, const char *name)
{
	for (size_t i = 0; i < m->n_alias; i++)
		if (!strcmp(m->alias[i * 2], name))
			return m->alias[i * 2 + 1];
	return NULL;
}

/* Depth-first: soft pre-dependencies and hard dependencies first, then the module. */
static int visit(const struct initramfs_opts *o, struct modset *m, struct mod *x, int depth)
{
	const char *info;
	size_t info_len;
	char deps[1024], soft[1024];
	int rc;

	if (x->state == 2)
		return 0;
	if (x->state == 1 || depth > MAX_DEPTH)
		return fail(o, -ELOOP, "module %s: dependency cycle", x->name);
	x->state = 1;
	rc = mod_load(o, x);
	if (rc)
		return rc;
	rc = elf_modinfo(x->data, x->len, &info, &info_len);
	if (rc)
		return fail(o, rc, "%s: malformed ELF section table", x->path);

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
			if (!d && (t = alias_target(m, w)))
				d = mod_find(m, t);
			if (d && d != x && d->state != 1) {
				rc = visit(o, m, d, depth + 1);
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
				return fail(o, -ENOENT, "module %s needs %s, which is not in %s",
					    x->name, name, m->dir);
			}
			rc = visit(o, m, d, depth + 1);
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

static int find_modules(const struct initramfs_opts *o, struct modset *m)
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
		return fail(o, -ENOENT, "%s: no kernel modules for %s there", o->modules_dir,
			    m->ver);
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
	return fail(o, -ENOENT,
		    "no modules for kernel %s next to %s or in /lib/modules: pass --modules DIR",
		    m->ver, o->kernel);
}

/*
 * The modules the guest needs, in load order: virtio_blk, the virtio transports the
 * kernel has (virtio_pci for QEMU -M pc, virtio_mmio for the built-in VMM), the root
 * filesystem — each skipped when built in, with all their dependencies.
 */
static int resolve_modules(const struct initramfs_opts *o, struct modset *m, const char *fstype)
{
	const char *want[] = { "virtio_pci", "virtio_mmio", "virtio_blk", fstype };
	bool required[] = { false, false, true, true };
	int transports = 0, rc;

	rc = find_modules(o, m);
	if (rc)
		return rc;
	rc = modset_index(m);
	if (rc)
		return fail(o, rc, "%s: %s", m->dir, strerror(-rc));
	m->order = calloc(m->n + 1, sizeof(*m->order));
	if (!m->order)
		return fail(o, -ENOMEM, "out of memory");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		char name[64];
		struct mod *x;

		mod_name(want[i], name, sizeof(name));
		x = mod_find(m, name);
		if (x || mod_builtin(m, name))
			transports += i < 2;
		if (!x) {
			if (required[i] && !mod_builtin(m, name))
				return fail(o, -ENOENT,
					    "kernel %s has no %s (neither a module in %s nor built in)",
					    m->ver, name, m->dir);
			continue;
		}
		rc = visit(o, m, x, 0);
		if (rc)
			return rc;
	}
	if (!transports)
		return fail(o, -ENOENT, "kernel %s has neither virtio_pci nor virtio_mmio (in %s)",
			    m->ver, m->dir);
	return 0;
}

/* ------------------------------------------------------------------ guest helpers */

/*
 * Two tiny static x86-64 programs, written out as minimal ELF files (one PT_LOAD). Their
 * code is position-independent; the source is in the comments (GNU as, AT&T syntax).
 *
 * lazyblk-outb: reads 3 bytes from stdin (port, little-endian u16; value) and does
 * ioperm(port, 1, 1); outb(value, port). Exit 0, or 1 if the read or ioperm failed.
 *	sub $16,%rsp; xor %edi,%edi; mov %rsp,%rsi; mov $3,%edx; xor %eax,%eax; syscall
 *	cmp $3,%rax; jne 1f
 *	movzwl (%rsp),%edi; mov $1,%esi; mov $1,%edx; mov $173,%eax; syscall   # ioperm
 *	test %rax,%rax; jnz 1f
 *	movzwl (%rsp),%edx; movb 2(%rsp),%al; outb %al,(%dx); xor %edi,%edi; jmp 2f
 *	1: mov $1,%edi
 *	2: mov $60,%eax; syscall                                               # exit
 */
static const uint8_t outb_code[] = {
	0x48, 0x83, 0xec, 0x10, 0x31, 0xff, 0x48, 0x89, 0xe6, 0xba, 0x03, 0x00,
	0x00, 0x00, 0x31, 0xc0, 0x0f, 0x05, 0x48, 0x83, 0xf8, 0x03, 0x75, 0x27,
	0x0f, 0xb7, 0x3c, 0x24, 0xbe, 0x01, 0x00, 0x00, 0x00, 0xba, 0x01, 0x00,
	0x00, 0x00, 0xb8, 0xad, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x48, 0x85, 0xc0,
	0x75, 0x0d, 0x0f, 0xb7, 0x14, 0x24, 0x8a, 0x44, 0x24, 0x02, 0xee, 0x31,
	0xff, 0xeb, 0x05, 0xbf, 0x01, 0x00, 0x00, 0x00, 0xb8, 0x3c, 0x00, 0x00,
	0x00, 0x0f, 0x05,
};

/*
 * lazyblk-exec UID GID PATH ARGV0 [ARGS...]: setgroups(0, NULL), setgid(GID), setuid(UID),
 * execve(PATH, [ARGV0, ARGS...], envp). Exit 126 on bad arguments or a failed set*id, 127
 * if execve fails. UID/GID: decimal, at most 4294967294.
 *	mov (%rsp),%rcx; cmp $5,%rcx; jb fail
 *	mov 16(%rsp),%rdi; call atou; mov %rax,%r12
 *	mov 24(%rsp),%rdi; call atou; mov %rax,%r13
 *	xor %edi,%edi; xor %esi,%esi; mov $116,%eax; syscall; test %rax,%rax; jnz fail
 *	mov %r13,%rdi; mov $106,%eax; syscall; test %rax,%rax; jnz fail          # setgid
 *	mov %r12,%rdi; mov $105,%eax; syscall; test %rax,%rax; jnz fail          # setuid
 *	mov (%rsp),%rcx; mov 32(%rsp),%rdi; lea 40(%rsp),%rsi
 *	lea 16(%rsp,%rcx,8),%rdx; mov $59,%eax; syscall                          # execve
 *	mov $127,%edi; jmp out
 *	fail: mov $126,%edi
 *	out: mov $60,%eax; syscall
 *	atou: xor %eax,%eax; cmpb $0,(%rdi); je bad
 *	2: movzbl (%rdi),%ecx; test %ecx,%ecx; jz 3f; sub $48,%ecx; cmp $9,%ecx; ja bad
 *	   imul $10,%rax,%rax; add %rcx,%rax; mov $0xfffffffe,%edx; cmp %rdx,%rax; ja bad
 *	   inc %rdi; jmp 2b
 *	3: ret
 *	bad: add $8,%rsp; jmp fail
 */
static const uint8_t exec_code[] = {
	0x48, 0x8b, 0x0c, 0x24, 0x48, 0x83, 0xf9, 0x05, 0x72, 0x69, 0x48, 0x8b,
	0x7c, 0x24, 0x10, 0xe8, 0x6b, 0x00, 0x00, 0x00, 0x49, 0x89, 0xc4, 0x48,
	0x8b, 0x7c, 0x24, 0x18, 0xe8, 0x5e, 0x00, 0x00, 0x00, 0x49, 0x89, 0xc5,
	0x31, 0xff, 0x31, 0xf6, 0xb8, 0x74, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x48,
	0x85, 0xc0, 0x75, 0x3f, 0x4c, 0x89, 0xef, 0xb8, 0x6a, 0x00, 0x00, 0x00,
	0x0f, 0x05, 0x48, 0x85, 0xc0, 0x75, 0x30, 0x4c, 0x89, 0xe7, 0xb8, 0x69,
	0x00, 0x00, 0x00, 0x0f, 0x05, 0x48, 0x85, 0xc0, 0x75, 0x21, 0x48, 0x8b,
	0x0c, 0x24, 0x48, 0x8b, 0x7c, 0x24, 0x20, 0x48, 0x8d, 0x74, 0x24, 0x28,
	0x48, 0x8d, 0x54, 0xcc, 0x10, 0xb8, 0x3b, 0x00, 0x00, 0x00, 0x0f, 0x05,
	0xbf, 0x7f, 0x00, 0x00, 0x00, 0xeb, 0x05, 0xbf, 0x7e, 0x00, 0x00, 0x00,
	0xb8, 0x3c, 0x00, 0x00, 0x00, 0x0f, 0x05, 0x31, 0xc0, 0x80, 0x3f, 0x00,
	0x74, 0x26, 0x0f, 0xb6, 0x0f, 0x85, 0xc9, 0x74, 0x1e, 0x83, 0xe9, 0x30,
	0x83, 0xf9, 0x09, 0x77, 0x17, 0x48, 0x6b, 0xc0, 0x0a, 0x48, 0x01, 0xc8,
	0xba, 0xfe, 0xff, 0xff, 0xff, 0x48, 0x39, 0xd0, 0x77, 0x06, 0x48, 0xff,
	0xc7, 0xeb, 0xdb, 0xc3, 0x48, 0x83, 0xc4, 0x08, 0xeb, 0xc1,
};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }

/* ELF64 header + one PT_LOAD (RX) mapping the whole file at 0x400000; entry after them. */
static size_t mini_elf(const uint8_t *code, size_t len, uint8_t *out)
{
	const uint64_t base = 0x400000, hdr = 64 + 56;

	memset(out, 0, hdr);
	memcpy(out, "\x7f" "ELF\x02\x01\x01", 7);
	put16(out + 16, 2);                  /* ET_EXEC */
	put16(out + 18, 62);                 /* EM_X86_64 */
	put32(out + 20, 1);
	put64(out + 24, base + hdr);         /* e_entry */
	put64(out + 32, 64);                 /* e_phoff */
	put16(out + 52, 64);                 /* e_ehsize */
	put16(out + 54, 56);                 /* e_phentsize */
	put16(out + 56, 1);                  /* e_phnum */
	put32(out + 64, 1);                  /* PT_LOAD */
	put32(out + 68, 5);                  /* PF_R | PF_X */
	put64(out + 80, base);               /* p_vaddr */
	put64(out + 88, base);               /* p_paddr */
	put64(out + 96, hdr + len);          /* p_filesz */
	put64(out + 104, hdr + len);         /* p_memsz */
	put64(out + 112, 0x1000);            /* p_align */
	memcpy(out + hdr, code, len);
	return hdr + len;
}

/* ------------------------------------------------------------------ scripts */

static const char init_script[] =
	"#!/bin/sh\n"
	"# lazyblk initramfs /init (generated by lazyblk, vmm-glue/initramfs.c): load the virtio\n"
	"# modules, mount the image disk, run one command in it, report its exit status, end the VM.\n"
	"export PATH=/bin HOME=/\n"
	"say() { echo \"lazyblk-init: $*\"; }\n"
	"outb() { printf \"\\\\$(printf %o $(($1 & 255)))\\\\$(printf %o $(($1 >> 8)))\\\\$(printf %o $(($2 & 255)))\" | lazyblk-outb 2>/dev/null; }\n"
	"mount -t proc proc /proc\n"
	"mount -t sysfs sysfs /sys\n"
	"grep -q ' /dev ' /proc/mounts || mount -t devtmpfs devtmpfs /dev\n"
	"outb 0x440 1   # boot timer: user space reached\n"
	". /etc/lazyblk/config\n"
	"finish() {\n"
	"\trc=$1\n"
	"\tkill -KILL -1 2>/dev/null\n"
	"\tsync\n"
	"\tfor m in dev/.lazyblk dev/shm dev/pts dev sys proc; do\n"
	"\t\tgrep -q \" /newroot/$m \" /proc/mounts && umount \"/newroot/$m\" 2>/dev/null\n"
	"\tdone\n"
	"\tif grep -q ' /newroot ' /proc/mounts; then\n"
	"\t\tumount /newroot 2>/dev/null || mount -o remount,ro /newroot 2>/dev/null ||\n"
	"\t\t\tsay \"cannot unmount the root filesystem\"\n"
	"\tfi\n"
	"\tsync\n"
	"\techo \"lazyblk-exit: $rc\"\n"
	"\toutb 0x441 \"$rc\" || { [ -c /dev/port ] && printf \"\\\\$(printf %o $((rc & 255)))\" |\n"
	"\t\tdd of=/dev/port bs=1 seek=1089 count=1 2>/dev/null; }\n"
	"\treboot -f\n"
	"\tsleep 3\n"
	"\tpoweroff -f\n"
	"\texit \"$rc\"\n"
	"}\n"
	"while read -r m; do\n"
	"\t[ -n \"$m\" ] && { insmod \"/lib/modules/$LZ_KVER/$m.ko\" || say \"insmod $m failed\"; }\n"
	"done < /etc/lazyblk/modules\n"
	"rm -rf /lib/modules\n"
	"i=0\n"
	"while [ ! -b \"/dev/$LZ_ROOT\" ]; do\n"
	"\ti=$((i + 1))\n"
	"\tif [ $i -gt $((LZ_ROOT_WAIT * 100)) ]; then\n"
	"\t\tsay \"no /dev/$LZ_ROOT after $LZ_ROOT_WAIT s (is the virtio-blk disk attached?)\"\n"
	"\t\tfinish 125\n"
	"\tfi\n"
	"\tusleep 10000\n"
	"done\n"
	"mkdir -p /newroot\n"
	"mount -t \"$LZ_FSTYPE\" -o rw \"/dev/$LZ_ROOT\" /newroot ||\n"
	"\t{ say \"cannot mount /dev/$LZ_ROOT ($LZ_FSTYPE) read-write\"; finish 125; }\n"
	"for d in proc sys dev; do\n"
	"\t[ -d \"/newroot/$d\" ] || mkdir -p \"/newroot/$d\" || { say \"no /$d in the image\"; finish 125; }\n"
	"done\n"
	"mount -t proc proc /newroot/proc && mount -t sysfs sysfs /newroot/sys &&\n"
	"\tmount -t devtmpfs devtmpfs /newroot/dev || { say \"cannot mount proc/sys/dev in the image\"; finish 125; }\n"
	"mkdir -p /newroot/dev/pts /newroot/dev/shm /newroot/dev/.lazyblk\n"
	"mount -t devpts -o ptmxmode=0666,mode=0620 devpts /newroot/dev/pts\n"
	"mount -t tmpfs -o mode=1777,nosuid,nodev shm /newroot/dev/shm\n"
	"mount -t tmpfs -o mode=0755,size=8m lazyblk /newroot/dev/.lazyblk &&\n"
	"\tcp /bin/busybox /bin/lazyblk-exec /etc/lazyblk/stage2 /etc/lazyblk/config \\\n"
	"\t\t/etc/lazyblk/cmd /etc/lazyblk/env /newroot/dev/.lazyblk/ ||\n"
	"\t{ say \"cannot set up /dev/.lazyblk\"; finish 125; }\n"
	"tty=/dev/console\n"
	"[ -c \"/dev/$LZ_CONSOLE\" ] && tty=\"/dev/$LZ_CONSOLE\"\n"
	"outb 0x440 2   # boot timer: the command starts\n"
	"env -i /bin/busybox setsid -c /bin/busybox chroot /newroot /dev/.lazyblk/busybox sh \\\n"
	"\t/dev/.lazyblk/stage2 <\"$tty\" >\"$tty\" 2>&1\n"
	"finish $?\n";

static const char stage2_script[] =
	"# lazyblk stage 2 (generated by lazyblk, vmm-glue/initramfs.c): runs inside the image's\n"
	"# root with the initramfs's busybox; sets the command's environment, user and directory\n"
	"# and execs it. No program of the image runs except the command itself.\n"
	"L=/dev/.lazyblk\n"
	"BB=$L/busybox\n"
	"set -f\n"
	"die() { echo \"lazyblk: $1\" >&2; exit \"${2:-125}\"; }\n"
	"unset PATH HOME SHLVL OLDPWD\n"
	". $L/config\n"
	". $L/env\n"
	"[ -n \"${PATH+x}\" ] || export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
	". $L/cmd\n"
	"[ $# -gt 0 ] || die \"no command to run\"\n"
	"u=${LZ_USER:-0}\n"
	"g=\n"
	"case $u in *:*) g=${u#*:}; u=${u%%:*};; esac\n"
	"uid= gid= home=\n"
	"if [ -r /etc/passwd ]; then\n"
	"\twhile IFS=: read -r pn px pu pg pc ph ps; do\n"
	"\t\tif [ \"$pn\" = \"$u\" ] || [ \"$pu\" = \"$u\" ]; then uid=$pu gid=$pg home=$ph; break; fi\n"
	"\tdone < /etc/passwd\n"
	"fi\n"
	"if [ -z \"$uid\" ]; then\n"
	"\tcase $u in ''|*[!0-9]*) die \"unable to find user $u: no matching entries in /etc/passwd\";; esac\n"
	"\tuid=$u gid=0\n"
	"fi\n"
	"if [ -n \"$g\" ]; then\n"
	"\tcase $g in\n"
	"\t*[!0-9]*)\n"
	"\t\tgid=\n"
	"\t\tif [ -r /etc/group ]; then\n"
	"\t\t\twhile IFS=: read -r gn gx gg gr; do\n"
	"\t\t\t\t[ \"$gn\" = \"$g\" ] && { gid=$gg; break; }\n"
	"\t\t\tdone < /etc/group\n"
	"\t\tfi\n"
	"\t\t[ -n \"$gid\" ] || die \"unable to find group $g: no matching entries in /etc/group\";;\n"
	"\t*) gid=$g;;\n"
	"\tesac\n"
	"fi\n"
	"[ -n \"${HOME+x}\" ] || { [ \"$uid\" = 0 ] && export HOME=${home:-/root} || export HOME=${home:-/}; }\n"
	"wd=${LZ_WORKDIR:-/}\n"
	"[ -d \"$wd\" ] || $BB mkdir -p \"$wd\" || die \"cannot create the working directory $wd\"\n"
	"cd \"$wd\" || die \"cannot enter the working directory $wd\"\n"
	"c=$1\n"
	"case $c in\n"
	"*/*) p=$c;;\n"
	"*)\n"
	"\tp=\n"
	"\toifs=$IFS\n"
	"\tIFS=:\n"
	"\tfor d in $PATH; do\n"
	"\t\t[ -n \"$d\" ] || d=.\n"
	"\t\tif [ -f \"$d/$c\" ] && [ -x \"$d/$c\" ]; then p=$d/$c; break; fi\n"
	"\tdone\n"
	"\tIFS=$oifs;;\n"
	"esac\n"
	"[ -n \"$p\" ] && [ -e \"$p\" ] || die \"$c: command not found\" 127\n"
	"[ -f \"$p\" ] && [ -x \"$p\" ] || die \"$c: permission denied (not an executable file)\" 126\n"
	"exec $L/lazyblk-exec \"$uid\" \"$gid\" \"$p\" \"$@\"\n";

/* Applets /init and stage 2 call by name (stage 2 calls them through $BB). */
static const char *const applets[] = {
	"sh", "mount", "umount", "insmod", "mkdir", "usleep", "sleep", "cat", "echo", "printf",
	"chroot", "sync", "reboot", "poweroff", "cp", "rm", "kill", "setsid", "env", "grep",
	"dd", "ls", "ln", "test", "[",
};

/* ------------------------------------------------------------------ building */

struct files {
	struct buf config, cmd, env, modules;
};

static bool env_name_ok(const char *kv)
{
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv || (kv[0] >= '0' && kv[0] <= '9'))
		return false;
	for (const char *p = kv; p < eq; p++)
		if (!(*p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

static int make_files(const struct initramfs_opts *o, const struct modset *m, struct files *f)
{
	const struct initramfs_image_config *img = o->image;
	const char *workdir = o->workdir ? o->workdir : img ? img->workdir : NULL;
	const char *user = o->user ? o->user : img ? img->user : NULL;
	size_t n = 0;

	buf_str(&f->config, "# lazyblk initramfs settings\nLZ_KVER=");
	buf_quote(&f->config, m->ver);
	buf_str(&f->config, "\nLZ_ROOT=");
	buf_quote(&f->config, o->root_dev ? o->root_dev : "vda");
	buf_str(&f->config, "\nLZ_FSTYPE=");
	buf_quote(&f->config, o->root_fstype ? o->root_fstype : "ext4");
	buf_str(&f->config, "\nLZ_CONSOLE=");
	buf_quote(&f->config, o->console ? o->console : "ttyS0");
	buf_str(&f->config, "\nLZ_ROOT_WAIT=10\nLZ_WORKDIR=");
	buf_quote(&f->config, workdir ? workdir : "/");
	buf_str(&f->config, "\nLZ_USER=");
	buf_quote(&f->config, user ? user : "");
	buf_str(&f->config, "\n");

	buf_str(&f->cmd, "set --");
	if (o->argc) {
		for (size_t i = 0; i < o->argc; i++, n++) {
			buf_str(&f->cmd, " ");
			buf_quote(&f->cmd, o->argv[i]);
		}
	} else if (img) {
		for (size_t i = 0; i < img->n_entrypoint; i++, n++) {
			buf_str(&f->cmd, " ");
			buf_quote(&f->cmd, img->entrypoint[i]);
		}
		for (size_t i = 0; i < img->n_cmd; i++, n++) {
			buf_str(&f->cmd, " ");
			buf_quote(&f->cmd, img->cmd[i]);
		}
	}
	buf_str(&f->cmd, "\n");
	if (!n)
		return fail(o, -EINVAL, "no command given, and the image config has no "
					"Entrypoint or Cmd");
	if (!*(o->argc ? o->argv[0] : img->n_entrypoint ? img->entrypoint[0] : img->cmd[0]))
		return fail(o, -EINVAL, "the command's program name is empty");

	for (int pass = 0; pass < 2; pass++) {
		const char *const *v = pass ? o->env : (img ? (const char *const *)img->env : NULL);
		size_t cnt = pass ? o->n_env : (img ? img->n_env : 0);

		for (size_t i = 0; v && i < cnt; i++) {
			if (!env_name_ok(v[i])) {
				if (pass)
					return fail(o, -EINVAL, "bad environment entry '%s' (want "
								"NAME=VALUE)", v[i]);
				continue; /* an image's odd entry: not expressible in sh, skipped */
			}
			buf_str(&f->env, "export ");
			buf_quote(&f->env, v[i]);
			buf_str(&f->env, "\n");
		}
	}
	buf_str(&f->env, "");

	for (size_t i = 0; i < m->n_order; i++) {
		buf_str(&f->modules, m->order[i]->name);
		buf_str(&f->modules, "\n");
	}
	buf_str(&f->modules, "");
	if (f->config.oom || f->cmd.oom || f->env.oom || f->modules.oom)
		return fail(o, -ENOMEM, "out of memory");
	return 0;
}

static void key_add(struct sha256_ctx *c, const char *tag, const void *d, size_t len)
{
	uint64_t l = len;

	sha256_update(c, tag, strlen(tag) + 1);
	sha256_update(c, &l, sizeof(l));
	sha256_update(c, d, len);
}

struct cpio {
	struct archive *a;
	unsigned ino;
};

static int cpio_add(struct cpio *w, const char *path, mode_t type, mode_t perm, const void *data,
		    size_t len, const char *link, unsigned rmaj, unsigned rmin)
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

static int write_cpio(const struct initramfs_opts *o, int fd, const struct modset *m,
		      const uint8_t *bb, size_t bb_len, const struct files *f)
{
	struct cpio w = { 0 };
	uint8_t elf[512];
	char p[PATH_MAX];
	int rc = 0;
	static const char *const dirs[] = { "bin", "dev", "etc", "etc/lazyblk", "lib",
					    "lib/modules", "newroot", "proc", "sys", "tmp" };

	if (dl_archive_load())
		return -ELIBACC;
	w.a = sym_archive_write_new();
	if (!w.a)
		return -ENOMEM;
	if (sym_archive_write_set_format_cpio_newc(w.a) != ARCHIVE_OK ||
	    (o->gzip && (sym_archive_write_add_filter_gzip(w.a) != ARCHIVE_OK ||
			 sym_archive_write_set_filter_option(w.a, "gzip", "timestamp", NULL) < ARCHIVE_WARN)) ||
	    sym_archive_write_set_bytes_in_last_block(w.a, 1) != ARCHIVE_OK ||
	    sym_archive_write_open_fd(w.a, fd) != ARCHIVE_OK) {
		rc = fail(o, -EIO, "libarchive: %s", sym_archive_error_string(w.a));
		sym_archive_write_free(w.a);
		return rc;
	}
	for (size_t i = 0; !rc && i < sizeof(dirs) / sizeof(dirs[0]); i++)
		rc = cpio_add(&w, dirs[i], AE_IFDIR, 0755, NULL, 0, NULL, 0, 0);
	if (!rc && m->ver[0] && m->n_order) {
		snprintf(p, sizeof(p), "lib/modules/%s", m->ver);
		rc = cpio_add(&w, p, AE_IFDIR, 0755, NULL, 0, NULL, 0, 0);
	}
	if (!rc)
		rc = cpio_add(&w, "dev/console", AE_IFCHR, 0600, NULL, 0, NULL, 5, 1);
	if (!rc)
		rc = cpio_add(&w, "dev/null", AE_IFCHR, 0666, NULL, 0, NULL, 1, 3);
	if (!rc)
		rc = cpio_add(&w, "init", AE_IFREG, 0755, init_script, strlen(init_script), NULL, 0, 0);
	if (!rc)
		rc = cpio_add(&w, "bin/busybox", AE_IFREG, 0755, bb, bb_len, NULL, 0, 0);
	for (size_t i = 0; !rc && i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(p, sizeof(p), "bin/%s", applets[i]);
		rc = cpio_add(&w, p, AE_IFLNK, 0777, NULL, 0, "busybox", 0, 0);
	}
	if (!rc)
		rc = cpio_add(&w, "bin/lazyblk-outb", AE_IFREG, 0755, elf,
			      mini_elf(outb_code, sizeof(outb_code), elf), NULL, 0, 0);
	if (!rc)
		rc = cpio_add(&w, "bin/lazyblk-exec", AE_IFREG, 0755, elf,
			      mini_elf(exec_code, sizeof(exec_code), elf), NULL, 0, 0);
	for (size_t i = 0; !rc && i < m->n_order; i++) {
		snprintf(p, sizeof(p), "lib/modules/%s/%s.ko", m->ver, m->order[i]->name);
		rc = cpio_add(&w, p, AE_IFREG, 0644, m->order[i]->data, m->order[i]->len, NULL, 0, 0);
	}
	if (!rc)
		rc = cpio_add(&w, "etc/lazyblk/modules", AE_IFREG, 0644, f->modules.p, f->modules.len,
			      NULL, 0, 0);
	if (!rc)
		rc = cpio_add(&w, "etc/lazyblk/config", AE_IFREG, 0644, f->config.p, f->config.len,
			      NULL, 0, 0);
	if (!rc)
		rc = cpio_add(&w, "etc/lazyblk/cmd", AE_IFREG, 0644, f->cmd.p, f->cmd.len, NULL, 0, 0);
	if (!rc)
		rc = cpio_add(&w, "etc/lazyblk/env", AE_IFREG, 0644, f->env.p, f->env.len, NULL, 0, 0);
	if (!rc)
		rc = cpio_add(&w, "etc/lazyblk/stage2", AE_IFREG, 0644, stage2_script,
			      strlen(stage2_script), NULL, 0, 0);
	if (rc) {
		fail(o, rc, "writing the initramfs: %s", sym_archive_error_string(w.a) ?
			    sym_archive_error_string(w.a) : strerror(-rc));
		sym_archive_write_free(w.a);
		return rc;
	}
	if (sym_archive_write_close(w.a) != ARCHIVE_OK)
		rc = fail(o, -EIO, "writing the initramfs: %s", sym_archive_error_string(w.a));
	sym_archive_write_free(w.a);
	return rc;
}

static int cache_dir(const struct initramfs_opts *o, char *dir, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");

	if (o->cache_dir)
		snprintf(dir, len, "%s", o->cache_dir);
	else if (x && x[0] == '/')
		snprintf(dir, len, "%s/lazyblk/initramfs", x);
	else if (h && h[0] == '/')
		snprintf(dir, len, "%s/.cache/lazyblk/initramfs", h);
	else
		snprintf(dir, len, "/var/tmp/lazyblk-initramfs-%u", (unsigned)getuid());
	return fs_mkdir_p(dir, 0755);
}

/* sha256 of a file, remembered by its identity in memo_dir (common/digest_memo.h). */
static int file_digest(const char *memo_dir, const char *path, uint8_t d[SHA256_LEN])
{
	struct fs_map m;
	int rc = fs_map_file(path, &m);

	if (rc)
		return rc;
	rc = digest_memo_sha256(memo_dir, &m, d);
	fs_unmap(&m);
	return rc;
}

/*
 * The recipe (initramfs_memo.h): everything the initramfs is made from, known without
 * reading the modules — the kernel and busybox by digest, the init programs, the options, and
 * the files made from them with the kernel-dependent parts (its release, its modules) left
 * out, since the kernel's digest stands for those. -errno with o->err set when the options
 * are unusable (the same errors the full path reports). kd and bd: the digests it used,
 * remembered in the memo directory memo.
 */
static int recipe_digest(const struct initramfs_opts *o, const char *memo, const char *busybox,
			 uint8_t out[SHA256_LEN], uint8_t kd[SHA256_LEN], uint8_t bd[SHA256_LEN])
{
	struct modset none = { 0 };
	struct files f = { 0 };
	struct sha256_ctx *c = NULL;
	int rc;

	rc = file_digest(memo, o->kernel, kd);
	if (!rc)
		rc = file_digest(memo, busybox, bd);
	if (!rc)
		rc = make_files(o, &none, &f);
	if (!rc && !(c = sha256_new()))
		rc = -ENOMEM;
	if (!rc) {
		key_add(c, "recipe", FORMAT_TAG, sizeof(FORMAT_TAG));
		key_add(c, "kernel", kd, SHA256_LEN);
		key_add(c, "busybox", bd, SHA256_LEN);
		key_add(c, "modules-dir", o->modules_dir ? o->modules_dir : "",
			o->modules_dir ? strlen(o->modules_dir) : 0);
		key_add(c, "init", init_script, sizeof(init_script));
		key_add(c, "stage2", stage2_script, sizeof(stage2_script));
		key_add(c, "outb", outb_code, sizeof(outb_code));
		key_add(c, "exec", exec_code, sizeof(exec_code));
		key_add(c, "config", f.config.p, f.config.len);
		key_add(c, "cmd", f.cmd.p, f.cmd.len);
		key_add(c, "env", f.env.p, f.env.len);
		key_add(c, "gzip", o->gzip ? "1" : "0", 1);
		rc = sha256_final(c, out);
	}
	sha256_free(c);
	free(f.config.p);
	free(f.cmd.p);
	free(f.env.p);
	free(f.modules.p);
	return rc;
}

/*
 * Remember the recipe's result: the cpio at path, made from the modules in m after a
 * resolution that looked at m->watch.
 */
static void recipe_remember(const char *dir, const uint8_t recipe[SHA256_LEN], const char *path,
			    const struct modset *m)
{
	size_t n = m->n_watch + m->n_order;
	const char **paths = calloc(n + 1, sizeof(*paths));
	const char **ids = calloc(n + 1, sizeof(*ids));
	const char *base = strrchr(path, '/');

	if (paths && ids && base) {
		for (size_t i = 0; i < m->n_watch; i++) {
			paths[i] = m->watch[i].path;
			ids[i] = m->watch[i].id;
		}
		for (size_t i = 0; i < m->n_order; i++) {
			paths[m->n_watch + i] = m->order[i]->path;
			ids[m->n_watch + i] = m->order[i]->id;
		}
		initramfs_memo_store(dir, recipe, base + 1, paths, ids, n);
	}
	free(paths);
	free(ids);
}

int initramfs_build(const struct initramfs_opts *o, char *out_path, size_t out_len)
{
	struct modset m = { 0 };
	struct files f = { 0 };
	struct sha256_ctx *c = NULL;
	struct fs_map kern = { 0 }, bb = { 0 };
	uint8_t key[SHA256_LEN], kd[SHA256_LEN], bd[SHA256_LEN];
	char dir[PATH_MAX], memo[PATH_MAX], hex[SHA256_HEX_LEN + 1], path[PATH_MAX];
	char tmp[PATH_MAX + 16];
	const char *why = NULL, *busybox = o->busybox ? o->busybox : "/bin/busybox";
	const char *fstype = o->root_fstype ? o->root_fstype : "ext4";
	uint8_t recipe[SHA256_LEN], rkd[SHA256_LEN], rbd[SHA256_LEN];
	bool have_recipe = false;
	int rc, fd = -1;
	struct stat st;

	if (o->err && o->err_len)
		o->err[0] = 0;
	if (!o->kernel)
		return fail(o, -EINVAL, "no kernel given");
	rc = cache_dir(o, dir, sizeof(dir));
	if (!rc)
		rc = digest_memo_dir(dir, memo, sizeof(memo));
	if (rc)
		return fail(o, rc, "cache directory %s: %s", dir, strerror(-rc));
	/* the fast path: a recipe seen before whose inputs are all unchanged */
	if (!recipe_digest(o, memo, busybox, recipe, rkd, rbd)) {
		have_recipe = true;
		if (!initramfs_memo_lookup(dir, recipe, path, sizeof(path))) {
			if (strlen(path) >= out_len)
				return fail(o, -ENAMETOOLONG, "output path buffer too small");
			snprintf(out_path, out_len, "%s", path);
			return 0;
		}
	}
	if (o->err && o->err_len)
		o->err[0] = 0; /* the full path says what is wrong, if anything */
	rc = fs_map_file(o->kernel, &kern);
	if (rc)
		return fail(o, rc, "%s: %s", o->kernel, strerror(-rc));
	rc = version_from_image(kern.data, kern.len, m.ver, sizeof(m.ver), &why);
	if (rc) {
		fail(o, rc, "%s: %s", o->kernel, why);
		goto out;
	}
	rc = digest_memo_sha256(memo, &kern, kd);
	fs_unmap(&kern);
	if (rc) {
		fail(o, rc, "sha256: %s", strerror(-rc));
		goto out;
	}

	rc = fs_map_file(busybox, &bb);
	if (rc) {
		fail(o, rc, "%s: %s (install busybox-static)", busybox, strerror(-rc));
		goto out;
	}
	switch (elf_is_static(bb.data, bb.len)) {
	case 1:
		break;
	case 0:
		rc = fail(o, -EINVAL, "%s is dynamically linked: the initramfs needs a static "
				      "busybox (install busybox-static)", busybox);
		goto out;
	default:
		rc = fail(o, -ENOEXEC, "%s is not an x86-64 ELF executable", busybox);
		goto out;
	}
	rc = digest_memo_sha256(memo, &bb, bd);
	if (rc) {
		fail(o, rc, "sha256: %s", strerror(-rc));
		goto out;
	}
	/* a kernel or busybox replaced since the recipe was made: do not remember it */
	if (memcmp(kd, rkd, SHA256_LEN) || memcmp(bd, rbd, SHA256_LEN))
		have_recipe = false;

	if (!o->modules_dir || strcmp(o->modules_dir, "none")) {
		rc = resolve_modules(o, &m, fstype);
		if (rc)
			goto out;
	}
	rc = make_files(o, &m, &f);
	if (rc)
		goto out;

	c = sha256_new();
	if (!c) {
		rc = fail(o, -ENOMEM, "out of memory");
		goto out;
	}
	key_add(c, "format", FORMAT_TAG, sizeof(FORMAT_TAG));
	key_add(c, "kernel", kd, sizeof(kd));
	key_add(c, "busybox", bd, sizeof(bd));
	for (size_t i = 0; i < m.n_order; i++) {
		key_add(c, "module", m.order[i]->name, strlen(m.order[i]->name));
		key_add(c, "module-data", m.order[i]->data, m.order[i]->len);
	}
	key_add(c, "init", init_script, sizeof(init_script));
	key_add(c, "stage2", stage2_script, sizeof(stage2_script));
	key_add(c, "outb", outb_code, sizeof(outb_code));
	key_add(c, "exec", exec_code, sizeof(exec_code));
	key_add(c, "config", f.config.p, f.config.len);
	key_add(c, "cmd", f.cmd.p, f.cmd.len);
	key_add(c, "env", f.env.p, f.env.len);
	key_add(c, "modules", f.modules.p, f.modules.len);
	key_add(c, "gzip", o->gzip ? "1" : "0", 1);
	rc = sha256_final(c, key);
	if (rc) {
		fail(o, rc, "sha256: %s", strerror(-rc));
		goto out;
	}
	sha256_to_hex(key, hex);

	if (snprintf(path, sizeof(path), "%s/%s.cpio%s", dir, hex, o->gzip ? ".gz" : "") >=
	    (int)sizeof(path)) {
		rc = fail(o, -ENAMETOOLONG, "cache directory name too long");
		goto out;
	}
	if (strlen(path) >= out_len) {
		rc = fail(o, -ENAMETOOLONG, "output path buffer too small");
		goto out;
	}
	if (!stat(path, &st) && S_ISREG(st.st_mode) && st.st_size > 0) {
		snprintf(out_path, out_len, "%s", path); /* cache hit */
		if (have_recipe)
			recipe_remember(dir, recipe, path, &m);
		goto out;
	}

	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = fail(o, -errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = write_cpio(o, fd, &m, bb.data, bb.len, &f);
	if (!rc && (fchmod(fd, 0644) || fsync(fd)))
		rc = fail(o, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = fail(o, -errno, "%s: %s", path, strerror(errno));
	if (rc) {
		unlink(tmp);
	} else {
		snprintf(out_path, out_len, "%s", path);
		if (have_recipe)
			recipe_remember(dir, recipe, path, &m);
	}
out:
	if (fd >= 0)
		close(fd);
	sha256_free(c);
	fs_unmap(&kern);
	fs_unmap(&bb);
	free(f.config.p);
	free(f.cmd.p);
	free(f.env.p);
	free(f.modules.p);
	modset_free(&m);
	return rc;
}
