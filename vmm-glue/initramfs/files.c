/* SPDX-License-Identifier: MIT */
/*
 * The generated files of /etc/lazyblk (initramfs.h): config (the settings as sh
 * assignments), cmd (the command as `set -- 'word' ...`), env (`export 'K=V'` lines) and
 * modules (the load order) — and the text buffer they are built in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../cas/oci_config.h"
#include "internal.h"

/* ------------------------------------------------------------------ text */

void buf_add(struct buf *b, const void *data, size_t len)
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

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

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

/* ------------------------------------------------------------------ the files */

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

/* config: the settings /init and stage 2 source (sh assignments). */
static void config_make(const struct initramfs_opts *o, const char *ver, struct buf *b)
{
	const struct oci_config *img = o->image;
	const char *workdir = o->workdir ? o->workdir : img ? img->workdir : NULL;
	const char *user = o->user ? o->user : img ? img->user : NULL;

	buf_str(b, "# lazyblk initramfs settings\nLZ_KVER=");
	buf_quote(b, ver);
	buf_str(b, "\nLZ_ROOT=");
	buf_quote(b, o->root_dev ? o->root_dev : "vda");
	buf_str(b, "\nLZ_FSTYPE=");
	buf_quote(b, o->root_fstype ? o->root_fstype : "ext4");
	buf_str(b, "\nLZ_CONSOLE=");
	buf_quote(b, o->console ? o->console : "ttyS0");
	buf_str(b, "\nLZ_ROOT_WAIT=10\nLZ_WORKDIR=");
	buf_quote(b, workdir ? workdir : "/");
	buf_str(b, "\nLZ_USER=");
	buf_quote(b, user ? user : "");
	buf_str(b, "\n");
}

/* cmd: the command (o's, else the image's Entrypoint + Cmd) as `set -- 'word' ...`. */
static int cmd_make(const struct initramfs_opts *o, struct buf *b)
{
	const struct oci_config *img = o->image;
	size_t n = 0;

	buf_str(b, "set --");
	if (o->argc) {
		for (size_t i = 0; i < o->argc; i++, n++) {
			buf_str(b, " ");
			buf_quote(b, o->argv[i]);
		}
	} else if (img) {
		for (size_t i = 0; i < img->n_entrypoint; i++, n++) {
			buf_str(b, " ");
			buf_quote(b, img->entrypoint[i]);
		}
		for (size_t i = 0; i < img->n_cmd; i++, n++) {
			buf_str(b, " ");
			buf_quote(b, img->cmd[i]);
		}
	}
	buf_str(b, "\n");
	if (!n)
		return initramfs_fail(o, -EINVAL, "no command given, and the image config has "
				      "no Entrypoint or Cmd");
	if (!*(o->argc ? o->argv[0] : img->n_entrypoint ? img->entrypoint[0] : img->cmd[0]))
		return initramfs_fail(o, -EINVAL, "the command's program name is empty");
	return 0;
}

/* env: the image's Env, then o's (a later K wins), as `export 'K=V'` lines. */
static int env_make(const struct initramfs_opts *o, struct buf *b)
{
	const struct oci_config *img = o->image;

	for (int pass = 0; pass < 2; pass++) {
		const char *const *v = pass ? o->env : (img ? (const char *const *)img->env : NULL);
		size_t cnt = pass ? o->n_env : (img ? img->n_env : 0);

		for (size_t i = 0; v && i < cnt; i++) {
			if (!env_name_ok(v[i])) {
				if (pass)
					return initramfs_fail(o, -EINVAL, "bad environment "
							      "entry '%s' (want NAME=VALUE)",
							      v[i]);
				continue; /* an image's odd entry: not expressible in sh, skipped */
			}
			buf_str(b, "export ");
			buf_quote(b, v[i]);
			buf_str(b, "\n");
		}
	}
	buf_str(b, "");
	return 0;
}

int guest_files_make(const struct initramfs_opts *o, const struct modset *m,
		     struct guest_files *f)
{
	int rc;

	config_make(o, m->ver, &f->config);
	rc = cmd_make(o, &f->cmd);
	if (!rc)
		rc = env_make(o, &f->env);
	if (rc)
		return rc;
	for (size_t i = 0; i < m->n_order; i++) {
		buf_str(&f->modules, m->order[i]->name);
		buf_str(&f->modules, "\n");
	}
	buf_str(&f->modules, "");
	if (f->config.oom || f->cmd.oom || f->env.oom || f->modules.oom)
		return initramfs_fail(o, -ENOMEM, "out of memory");
	return 0;
}

void guest_files_free(struct guest_files *f)
{
	free(f->config.p);
	free(f->cmd.p);
	free(f->env.p);
	free(f->modules.p);
	memset(f, 0, sizeof(*f));
}
