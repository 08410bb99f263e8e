/* SPDX-License-Identifier: MIT */
/*
 * The initramfs's entries (initramfs.h, "Contents"), in the order the kernel unpacks them:
 * the directories, the device nodes, /init, busybox and its applet links, the helpers, the
 * modules, and /etc/lazyblk.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Applets /init and stage 2 call by name (stage 2 calls them through $BB). */
static const char *const applets[] = {
	"sh", "mount", "umount", "insmod", "mkdir", "usleep", "sleep", "cat", "echo", "printf",
	"chroot", "sync", "reboot", "poweroff", "cp", "rm", "kill", "setsid", "env", "grep",
	"dd", "ls", "ln", "test", "[",
};

/* The directories, the device nodes, /init, busybox, its applets and the helpers. */
static int image_base(struct cpio *w, const struct modset *m, const uint8_t *bb, size_t bb_len)
{
	static const char *const dirs[] = { "bin", "dev", "etc", "etc/lazyblk", "lib",
					    "lib/modules", "newroot", "proc", "sys", "tmp" };
	char p[PATH_MAX];
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(dirs) / sizeof(dirs[0]); i++)
		rc = cpio_add_dir(w, dirs[i], 0755);
	if (!rc && m->ver[0] && m->n_order) {
		snprintf(p, sizeof(p), "lib/modules/%s", m->ver);
		rc = cpio_add_dir(w, p, 0755);
	}
	if (!rc)
		rc = cpio_add_chr(w, "dev/console", 0600, 5, 1);
	if (!rc)
		rc = cpio_add_chr(w, "dev/null", 0666, 1, 3);
	if (!rc)
		rc = cpio_add_file(w, "init", 0755, initramfs_init_sh, initramfs_init_sh_len);
	if (!rc)
		rc = cpio_add_file(w, "bin/busybox", 0755, bb, bb_len);
	for (size_t i = 0; !rc && i < sizeof(applets) / sizeof(applets[0]); i++) {
		snprintf(p, sizeof(p), "bin/%s", applets[i]);
		rc = cpio_add_symlink(w, p, "busybox");
	}
	if (!rc)
		rc = cpio_add_file(w, "bin/lazyblk-outb", 0755, initramfs_outb_elf,
				   initramfs_outb_elf_len);
	if (!rc)
		rc = cpio_add_file(w, "bin/lazyblk-exec", 0755, initramfs_exec_elf,
				   initramfs_exec_elf_len);
	return rc;
}

/* The modules, in load order, and the files of /etc/lazyblk. */
static int image_rest(struct cpio *w, const struct modset *m, const struct guest_files *f)
{
	char p[PATH_MAX];
	int rc = 0;

	for (size_t i = 0; !rc && i < m->n_order; i++) {
		snprintf(p, sizeof(p), "lib/modules/%s/%s.ko", m->ver, m->order[i]->name);
		rc = cpio_add_file(w, p, 0644, m->order[i]->data, m->order[i]->len);
	}
	if (!rc)
		rc = cpio_add_file(w, "etc/lazyblk/modules", 0644, f->modules.p, f->modules.len);
	if (!rc)
		rc = cpio_add_file(w, "etc/lazyblk/config", 0644, f->config.p, f->config.len);
	if (!rc)
		rc = cpio_add_file(w, "etc/lazyblk/cmd", 0644, f->cmd.p, f->cmd.len);
	if (!rc)
		rc = cpio_add_file(w, "etc/lazyblk/env", 0644, f->env.p, f->env.len);
	if (!rc)
		rc = cpio_add_file(w, "etc/lazyblk/stage2", 0644, initramfs_stage2_sh,
				   initramfs_stage2_sh_len);
	return rc;
}

int image_write(const struct initramfs_opts *o, int fd, const struct modset *m,
		const uint8_t *bb, size_t bb_len, const struct guest_files *f)
{
	struct cpio w;
	const char *why;
	int rc = cpio_open(&w, fd, o->gzip);

	if (rc) {
		/* -ELIBACC: common/dl.h has printed which library is missing */
		if (rc == -EIO)
			initramfs_fail(o, rc, "libarchive: %s", cpio_error(&w));
		else if (rc != -ELIBACC)
			initramfs_fail(o, rc, "libarchive: %s", strerror(-rc));
		cpio_free(&w);
		return rc;
	}
	rc = image_base(&w, m, bb, bb_len);
	if (!rc)
		rc = image_rest(&w, m, f);
	if (!rc)
		rc = cpio_close(&w);
	if (rc) {
		why = cpio_error(&w);
		initramfs_fail(o, rc, "writing the initramfs: %s", why ? why : strerror(-rc));
	}
	cpio_free(&w);
	return rc;
}
