/* SPDX-License-Identifier: MIT */
/*
 * The kernel modules the guest needs (internal.h, modset_resolve): over the index of
 * modindex.c, a depth-first walk of their .modinfo dependencies (depends=, and softdep=pre:
 * named directly or by an alias — from modules.alias, else the aliases modules declare in
 * their own .modinfo), each module read and decompressed (.ko.xz, .ko.zst, .ko.gz) on the way.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/digest_memo.h"
#include "../../common/dl_archive.h"
#include "../../common/fsutil.h"
#include "../boot.h"
#include "internal.h"

#define MAX_MODULE (256u << 20)   /* a decompressed module larger than this is refused */
#define MAX_DEPTH 64

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

	rc = modset_open(o, m);
	if (rc)
		return rc;
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
