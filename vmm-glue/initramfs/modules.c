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

static int mod_cmp_name(const void *a, const void *b)
{
	const struct mod *const *x = a, *const *y = b;

	return strcmp((*x)->name, (*y)->name);
}

/* Whether module d declares alias in its .modinfo (1, else 0; d read if it was not), or -errno. */
static int mod_declares(const struct initramfs_opts *o, struct mod *d, const char *alias)
{
	const uint8_t *info;
	size_t len;
	int rc = mod_load(o, d);

	if (rc)
		return rc;
	return !elf_section(d->data, d->len, ".modinfo", &info, &len) && info &&
	       modinfo_has((const char *)info, len, "alias", alias);
}

/*
 * A soft dependency named by an alias that no modules.alias lists (depmod has not run, as
 * in a kernel package unpacked as shipped: Debian's ext4 wants "crypto-crc32c"): the
 * modules that declare the alias in their own .modinfo, as depmod would have found them,
 * each visited, in the order of their names whatever the directory's order (one the CPU
 * cannot use fails its insmod, which is only said). Without whole, only the modules whose
 * names begin with the alias less its "crypto-" (crc32c_generic, crc32c_intel) are read;
 * with whole, every module is (the last look before a driver is called missing: one that
 * cannot be read is skipped, and one read for nothing is let go). How many declare the
 * alias, or -errno.
 */
static int softdep_by_modinfo(const struct initramfs_opts *o, struct modset *m,
			      const struct mod *x, const char *alias, int depth, bool whole)
{
	const char *base = strncmp(alias, "crypto-", 7) ? alias : alias + 7;
	struct initramfs_opts quiet = *o;
	struct mod **c;
	char prefix[64];
	size_t pl, n = 0;
	int rc = 0;

	mod_name(base, prefix, sizeof(prefix));
	pl = strlen(prefix);
	if (!pl && !whole)
		return 0;
	c = malloc((m->n + 1) * sizeof(*c));
	if (!c)
		return initramfs_fail(o, -ENOMEM, "out of memory");
	quiet.err = NULL;
	for (size_t i = 0; i < m->n && rc >= 0; i++) {
		struct mod *d = &m->mods[i];
		bool had = d->data != NULL;

		if (d == x || (!whole && strncmp(d->name, prefix, pl)))
			continue;
		rc = mod_declares(whole ? &quiet : o, d, alias);
		if (rc > 0) {
			c[n++] = d;
		} else if (whole) {
			if (!had && d->state == 0) {
				free(d->data);
				d->data = NULL;
			}
			rc = 0;
		}
	}
	qsort(c, n, sizeof(*c), mod_cmp_name);
	for (size_t i = 0; i < n && rc >= 0; i++)
		if (c[i]->state != 1)
			rc = order_visit(o, m, c[i], depth + 1);
	free(c);
	return rc < 0 ? rc : (int)n;
}

/* Note that x wants target, a soft pre-dependency found nowhere (modset_resolve says so). */
static int missing_add(const struct initramfs_opts *o, struct modset *m, const char *target,
		       const char *x)
{
	struct missing *e = NULL, *p;
	size_t n, xl = strlen(x);

	for (size_t i = 0; i < m->n_missing && !e; i++)
		if (!strcmp(m->missing[i].target, target))
			e = &m->missing[i];
	if (!e) {
		p = realloc(m->missing, (m->n_missing + 1) * sizeof(*p));
		if (!p)
			return initramfs_fail(o, -ENOMEM, "out of memory");
		m->missing = p;
		e = &p[m->n_missing];
		e->by[0] = 0;
		e->target = strdup(target);
		if (!e->target)
			return initramfs_fail(o, -ENOMEM, "out of memory");
		m->n_missing++;
	}
	for (const char *b = e->by; *b; b += strcspn(b, ",") + (b[strcspn(b, ",")] ? 2 : 0))
		if (!strncmp(b, x, xl) && (!b[xl] || b[xl] == ','))
			return 0; /* a module that names it twice */
	n = strlen(e->by);
	snprintf(e->by + n, sizeof(e->by) - n, "%s%s", n ? ", " : "", x);
	return 0;
}

/*
 * A soft pre-dependency w of x: the modules it names — by name, by an alias modules.alias
 * lists, else by the aliases modules declare — visited. Found nowhere, and nothing built in
 * is named so or declares it as an alias (modules.builtin, modules.builtin.modinfo), it is
 * noted as missing: the module would fail once loaded (ext4: "Cannot load crc32c driver").
 */
static int softdep_visit(const struct initramfs_opts *o, struct modset *m, struct mod *x,
			 const char *w, int depth)
{
	char name[64];
	const char *t;
	struct mod *d;
	size_t i = 0;
	int found = 0, rc;

	mod_name(w, name, sizeof(name));
	d = mod_find(m, name);
	if (d)
		return d == x || d->state == 1 ? 0 : order_visit(o, m, d, depth + 1);
	while ((t = alias_next(m, w, &i))) {
		d = mod_find(m, t);
		if (!d)
			continue; /* listed, but not there */
		found++;
		if (d != x && d->state != 1) {
			rc = order_visit(o, m, d, depth + 1);
			if (rc)
				return rc;
		}
	}
	if (!found && !m->n_alias)
		found = softdep_by_modinfo(o, m, x, w, depth, false);
	if (found)
		return found < 0 ? found : 0;
	if (mod_builtin(m, name) || mod_builtin_alias(m, w))
		return 0;
	if (!m->n_alias)
		found = softdep_by_modinfo(o, m, x, w, depth, true);
	if (found)
		return found < 0 ? found : 0;
	return missing_add(o, m, w, x->name);
}

/* Depth-first: soft pre-dependencies and hard dependencies first, then the module. */
static int order_visit(const struct initramfs_opts *o, struct modset *m, struct mod *x, int depth)
{
	const uint8_t *modinfo;
	const char *info, *v;
	size_t info_len, pos = 0, vlen;
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

	/* softdep=pre: a b post: c, as many as the module declares: the "pre" ones */
	while (info && (v = modinfo_next(info, info_len, "softdep", &pos, &vlen))) {
		bool pre = false;
		char *save, *w;

		if (vlen >= sizeof(soft))
			vlen = sizeof(soft) - 1;
		memcpy(soft, v, vlen);
		soft[vlen] = 0;
		for (w = strtok_r(soft, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
			if (!strcmp(w, "pre:") || !strcmp(w, "post:")) {
				pre = !strcmp(w, "pre:");
				continue;
			}
			if (!pre)
				continue;
			rc = softdep_visit(o, m, x, w, depth);
			if (rc)
				return rc;
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
 * The kernel refused: one line naming every soft pre-dependency found nowhere and the
 * modules that want it ("kernel V has no crc32c driver (crypto-crc32c, wanted by ext4,
 * jbd2: softdep pre), neither built in nor a module in DIR").
 */
static int missing_fail(const struct initramfs_opts *o, const struct modset *m)
{
	char line[1024];
	size_t n = 0;

	for (size_t i = 0; i < m->n_missing && n < sizeof(line); i++) {
		const char *t = m->missing[i].target;
		const char *drv = strncmp(t, "crypto-", 7) || !t[7] ? t : t + 7;

		n += (size_t)snprintf(line + n, sizeof(line) - n, "%s%s driver (%s%swanted by %s: "
				      "softdep pre)", i ? ", no " : "", drv, drv == t ? "" : t,
				      drv == t ? "" : ", ", m->missing[i].by);
	}
	return initramfs_fail(o, -ENOENT, "kernel %s has no %s, neither built in nor a module "
			      "in %s", m->ver, line, m->dir);
}

/*
 * The modules the guest needs, in load order: virtio_blk, the virtio transports the
 * kernel has (virtio_pci for QEMU -M pc, virtio_mmio for the built-in VMM), the root
 * filesystem — each skipped when built in, with all their dependencies. /init loads every
 * one of them, so a soft pre-dependency of any of them that is found nowhere refuses the
 * kernel (missing_fail), after the walk, so that the line names them all.
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
	if (m->n_missing)
		return missing_fail(o, m);
	if (!transports)
		return initramfs_fail(o, -ENOENT, "kernel %s has neither virtio_pci nor "
				      "virtio_mmio (in %s)", m->ver, m->dir);
	return 0;
}
