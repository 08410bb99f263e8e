/* SPDX-License-Identifier: MIT */
/*
 * initramfs_build (initramfs.h): the inputs checked and digested, the cached cpio found by
 * its content key — or, before any of that, by its recipe (memo.h) — else written.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/digest_memo.h"
#include "../../common/fsutil.h"
#include "../../common/sha256.h"
#include "../boot.h"
#include "internal.h"
#include "memo.h"

/*
 * v2: soft dependencies also through the aliases modules declare (no modules.alias);
 * v3: a kernel whose soft pre-dependencies are found nowhere is refused, so no recipe of an
 * earlier resolution may stand for the initramfs of one
 */
#define FORMAT_TAG "lazyblk-initramfs-v3"

/* What one initramfs_build works with. */
struct build {
	const struct initramfs_opts *o;
	const char *busybox;
	char dir[PATH_MAX];               /* the cache directory ("": not used) */
	char memo[PATH_MAX];              /* its digest memos (common/digest_memo.h), or "" */
	struct fs_map bb;                 /* busybox */
	uint8_t kd[SHA256_LEN], bd[SHA256_LEN];    /* the kernel's and busybox's digests */
	struct modset m;
	struct guest_files f;
	bool have_recipe;                 /* remember the result under recipe */
	uint8_t recipe[SHA256_LEN];
	uint8_t rkd[SHA256_LEN], rbd[SHA256_LEN]; /* the digests the recipe used */
};

/* ------------------------------------------------------------------ keys */

static void key_add(struct sha256_ctx *c, const char *tag, const void *d, size_t len)
{
	uint64_t l = len;

	sha256_update(c, tag, strlen(tag) + 1);
	sha256_update(c, &l, sizeof(l));
	sha256_update(c, d, len);
}

/* The built-in files (embed.S). */
static void key_add_builtin(struct sha256_ctx *c)
{
	key_add(c, "init", initramfs_init_sh, initramfs_init_sh_len);
	key_add(c, "stage2", initramfs_stage2_sh, initramfs_stage2_sh_len);
	key_add(c, "outb", initramfs_outb_elf, initramfs_outb_elf_len);
	key_add(c, "exec", initramfs_exec_elf, initramfs_exec_elf_len);
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
 * The recipe (memo.h): everything the initramfs is made from, known without reading the
 * modules — the kernel and busybox by digest, the built-in files, the options, and the
 * files made from them with the kernel-dependent parts (its release, its modules) left out,
 * since the kernel's digest stands for those. -errno with o->err set when the options are
 * unusable (the same errors the full path reports). b->rkd and b->rbd: the digests it used.
 */
static int recipe_digest(struct build *b)
{
	const struct initramfs_opts *o = b->o;
	struct modset none = { 0 };
	struct guest_files f = { 0 };
	struct sha256_ctx *c = NULL;
	int rc;

	rc = file_digest(b->memo, o->kernel, b->rkd);
	if (!rc)
		rc = file_digest(b->memo, b->busybox, b->rbd);
	if (!rc)
		rc = guest_files_make(o, &none, &f);
	if (!rc && !(c = sha256_new()))
		rc = -ENOMEM;
	if (!rc) {
		key_add(c, "recipe", FORMAT_TAG, sizeof(FORMAT_TAG));
		key_add(c, "kernel", b->rkd, SHA256_LEN);
		key_add(c, "busybox", b->rbd, SHA256_LEN);
		key_add(c, "modules-dir", o->modules_dir ? o->modules_dir : "",
			o->modules_dir ? strlen(o->modules_dir) : 0);
		key_add_builtin(c);
		key_add(c, "config", f.config.p, f.config.len);
		key_add(c, "cmd", f.cmd.p, f.cmd.len);
		key_add(c, "env", f.env.p, f.env.len);
		key_add(c, "gzip", o->gzip ? "1" : "0", 1);
		rc = sha256_final(c, b->recipe);
	}
	sha256_free(c);
	guest_files_free(&f);
	return rc;
}

/*
 * Remember the recipe's result: the cpio at path, made from the modules in b->m after a
 * resolution that looked at b->m.watch.
 */
static void recipe_remember(const struct build *b, const char *path)
{
	const struct modset *m = &b->m;
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
		initramfs_memo_store(b->dir, b->recipe, base + 1, paths, ids, n);
	}
	free(paths);
	free(ids);
}

/* The content key: the digest of everything the cpio holds. */
static int content_key(struct build *b, uint8_t key[SHA256_LEN])
{
	const struct modset *m = &b->m;
	struct sha256_ctx *c = sha256_new();
	int rc;

	if (!c)
		return initramfs_fail(b->o, -ENOMEM, "out of memory");
	key_add(c, "format", FORMAT_TAG, sizeof(FORMAT_TAG));
	key_add(c, "kernel", b->kd, SHA256_LEN);
	key_add(c, "busybox", b->bd, SHA256_LEN);
	for (size_t i = 0; i < m->n_order; i++) {
		key_add(c, "module", m->order[i]->name, strlen(m->order[i]->name));
		key_add(c, "module-data", m->order[i]->data, m->order[i]->len);
	}
	key_add_builtin(c);
	key_add(c, "config", b->f.config.p, b->f.config.len);
	key_add(c, "cmd", b->f.cmd.p, b->f.cmd.len);
	key_add(c, "env", b->f.env.p, b->f.env.len);
	key_add(c, "modules", b->f.modules.p, b->f.modules.len);
	key_add(c, "gzip", b->o->gzip ? "1" : "0", 1);
	rc = sha256_final(c, key);
	sha256_free(c);
	if (rc)
		return initramfs_fail(b->o, rc, "sha256: %s", strerror(-rc));
	return 0;
}

/* ------------------------------------------------------------------ inputs */

/*
 * The cache directory, if it is safe to read back from: this user's, made 0700, that nobody
 * else may write (fs_mkdir_private). Another local user who made it first (a shared
 * /var/tmp/lazyblk-initramfs-UID) could read the env of every cpio in it and replace a cpio
 * or a recipe memo, so that the next run boots their /init: then b->dir stays "" (the build
 * is uncached) after one warning. -EPERM with o->err set when o->uncached_fd is NULL (the
 * caller cannot take an uncached build).
 */
static int cache_dir(struct build *b)
{
	const struct initramfs_opts *o = b->o;
	const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
	char dir[PATH_MAX], why[WHY_MAX] = "";
	int rc;

	if (o->cache_dir)
		snprintf(dir, sizeof(dir), "%s", o->cache_dir);
	else if (x && x[0] == '/')
		snprintf(dir, sizeof(dir), "%s/lazyblk/initramfs", x);
	else if (h && h[0] == '/')
		snprintf(dir, sizeof(dir), "%s/.cache/lazyblk/initramfs", h);
	else
		snprintf(dir, sizeof(dir), "/var/tmp/lazyblk-initramfs-%u", (unsigned)geteuid());
	rc = fs_mkdir_private(dir, why, sizeof(why));
	if (!rc)
		rc = digest_memo_dir(dir, b->memo, sizeof(b->memo));
	if (!rc) {
		snprintf(b->dir, sizeof(b->dir), "%s", dir);
		return 0;
	}
	b->memo[0] = '\0';
	if (!o->uncached_fd) /* -EPERM whatever the cause: initramfs.h */
		return initramfs_fail(o, -EPERM, "cache directory %s: %s (not used)", dir,
				      why[0] ? why : strerror(-rc));
	note_emit(&o->notes, NOTE_WARN, "initramfs cache directory %s not used (%s): building "
		  "without a cache", dir, why[0] ? why : strerror(-rc));
	return 0;
}

/* The kernel: its release (b->m.ver) and its digest (b->kd). */
static int kernel_read(struct build *b)
{
	const struct initramfs_opts *o = b->o;
	struct fs_map kern;
	char why[WHY_MAX] = "";
	int rc = fs_map_file(o->kernel, &kern);

	if (rc)
		return initramfs_fail(o, rc, "%s: %s", o->kernel, strerror(-rc));
	rc = kernel_release(kern.data, kern.len, b->m.ver, sizeof(b->m.ver), why, sizeof(why));
	if (rc) {
		initramfs_fail(o, rc, "%s: %s", o->kernel, why);
	} else {
		rc = digest_memo_sha256(b->memo, &kern, b->kd);
		if (rc)
			initramfs_fail(o, rc, "sha256: %s", strerror(-rc));
	}
	fs_unmap(&kern);
	return rc;
}

/* busybox: mapped (b->bb), a static x86-64 executable, its digest (b->bd). */
static int busybox_read(struct build *b)
{
	const struct initramfs_opts *o = b->o;
	int rc = fs_map_file(b->busybox, &b->bb);

	if (rc)
		return initramfs_fail(o, rc, "%s: %s (install busybox-static)", b->busybox,
				      strerror(-rc));
	switch (elf_is_static(b->bb.data, b->bb.len)) {
	case 1:
		break;
	case 0:
		return initramfs_fail(o, -EINVAL, "%s is dynamically linked: the initramfs needs "
				      "a static busybox (install busybox-static)", b->busybox);
	default:
		return initramfs_fail(o, -ENOEXEC, "%s is not an x86-64 ELF executable",
				      b->busybox);
	}
	rc = digest_memo_sha256(b->memo, &b->bb, b->bd);
	if (rc)
		return initramfs_fail(o, rc, "sha256: %s", strerror(-rc));
	return 0;
}

/* ------------------------------------------------------------------ building */

/* Write the cpio to path (a temporary file first, renamed into place once complete). */
static int cpio_store(struct build *b, const char *path)
{
	const struct initramfs_opts *o = b->o;
	char tmp[PATH_MAX + 16];
	int rc, fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
	fd = fs_mkstemp(tmp, 0, INITRAMFS_CACHE_MODE);
	if (fd < 0)
		return initramfs_fail(o, fd, "%s: %s", tmp, strerror(-fd));
	rc = image_write(o, fd, &b->m, b->bb.data, b->bb.len, &b->f);
	if (!rc && fsync(fd))
		rc = initramfs_fail(o, -errno, "%s: %s", tmp, strerror(errno));
	if (!rc) {
		int e = fs_rename_output(tmp, path);

		if (e)
			rc = initramfs_fail(o, e, "%s: %s", path, strerror(-e));
	}
	if (rc)
		unlink(tmp);
	close(fd);
	return rc;
}

/*
 * Without a cache: the cpio written to a file that has no name (made 0600 in $TMPDIR or /tmp
 * and unlinked at once); out_path becomes /proc/self/fd/N and *o->uncached_fd N.
 */
static int cpio_store_unnamed(struct build *b, char *out_path, size_t out_len)
{
	const struct initramfs_opts *o = b->o;
	const char *t = getenv("TMPDIR");
	char tmp[PATH_MAX];
	int rc, fd;

	if (snprintf(tmp, sizeof(tmp), "%s/lazyblk-initramfs.XXXXXX",
		     t && t[0] == '/' ? t : "/tmp") >= (int)sizeof(tmp))
		return initramfs_fail(o, -ENAMETOOLONG, "$TMPDIR too long");
	fd = fs_mkstemp(tmp, 0, 0600);
	if (fd < 0)
		return initramfs_fail(o, fd, "%s: %s", tmp, strerror(-fd));
	unlink(tmp);
	rc = image_write(o, fd, &b->m, b->bb.data, b->bb.len, &b->f);
	if (!rc && snprintf(out_path, out_len, "/proc/self/fd/%d", fd) >= (int)out_len)
		rc = initramfs_fail(o, -ENAMETOOLONG, "output path buffer too small");
	if (rc) {
		close(fd);
		return rc;
	}
	*o->uncached_fd = fd;
	return 0;
}

/* The full path: read everything, find the cpio by its content key or write it. */
static int build_full(struct build *b, char *out_path, size_t out_len)
{
	const struct initramfs_opts *o = b->o;
	uint8_t key[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1], path[PATH_MAX];
	struct stat st;
	int rc;

	rc = kernel_read(b);
	if (!rc)
		rc = busybox_read(b);
	if (rc)
		return rc;
	/* a kernel or busybox replaced since the recipe was made: do not remember it */
	if (memcmp(b->kd, b->rkd, SHA256_LEN) || memcmp(b->bd, b->rbd, SHA256_LEN))
		b->have_recipe = false;
	if (!o->modules_dir || strcmp(o->modules_dir, "none")) {
		rc = modset_resolve(o, &b->m, o->root_fstype ? o->root_fstype : "ext4");
		if (rc)
			return rc;
	}
	rc = guest_files_make(o, &b->m, &b->f);
	if (!rc && !b->dir[0])
		return cpio_store_unnamed(b, out_path, out_len);
	if (!rc)
		rc = content_key(b, key);
	if (rc)
		return rc;
	sha256_to_hex(key, hex);
	if (snprintf(path, sizeof(path), "%s/%s.cpio%s", b->dir, hex, o->gzip ? ".gz" : "") >=
	    (int)sizeof(path))
		return initramfs_fail(o, -ENAMETOOLONG, "cache directory name too long");
	if (strlen(path) >= out_len)
		return initramfs_fail(o, -ENAMETOOLONG, "output path buffer too small");
	/* not there yet (or empty): write it */
	if (stat(path, &st) || !S_ISREG(st.st_mode) || st.st_size <= 0) {
		rc = cpio_store(b, path);
		if (rc)
			return rc;
	}
	snprintf(out_path, out_len, "%s", path);
	if (b->have_recipe)
		recipe_remember(b, path);
	return 0;
}

int initramfs_build(const struct initramfs_opts *o, char *out_path, size_t out_len)
{
	struct build *b;
	char path[PATH_MAX];
	int rc;

	if (o->err && o->err_len)
		o->err[0] = 0;
	if (!o->kernel)
		return initramfs_fail(o, -EINVAL, "no kernel given");
	b = calloc(1, sizeof(*b));
	if (!b)
		return initramfs_fail(o, -ENOMEM, "out of memory");
	b->o = o;
	b->busybox = o->busybox ? o->busybox : "/bin/busybox";
	rc = cache_dir(b);
	if (rc)
		goto out;
	/* the fast path: a recipe seen before whose inputs are all unchanged */
	if (b->dir[0] && !recipe_digest(b)) {
		b->have_recipe = true;
		if (!initramfs_memo_lookup(b->dir, b->recipe, path, sizeof(path))) {
			if (strlen(path) >= out_len)
				rc = initramfs_fail(o, -ENAMETOOLONG, "output path buffer too small");
			else
				snprintf(out_path, out_len, "%s", path);
			goto out;
		}
	}
	if (o->err && o->err_len)
		o->err[0] = 0; /* the full path says what is wrong, if anything */
	rc = build_full(b, out_path, out_len);
out:
	fs_unmap(&b->bb);
	guest_files_free(&b->f);
	modset_free(&b->m);
	free(b);
	return rc;
}
