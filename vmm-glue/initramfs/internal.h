/* SPDX-License-Identifier: MIT */
/*
 * Inside the initramfs builder (../initramfs.h has the contents and the /init design):
 *
 *   build.c      initramfs_build: the inputs, the cache, the content key and the recipe
 *   image.c      the entries of the cpio
 *   kernel.c     the kernel's release string (initramfs_kernel_version)
 *   modindex.c   the index of the kernel's modules: where they are, built in, aliases
 *   modules.c    the modules the guest needs, in load order, read and decompressed
 *   files.c      /etc/lazyblk/{config,cmd,env,modules}: the options as sh text
 *   cpio.c       a cpio (newc) writer over libarchive
 *   memo.c       recipe memos (memo.h)
 *   embed.S      the fixed files, built in: init.sh, stage2.sh, and the helpers assembled
 *                from helper_outb.S and helper_exec.S (tiny_elf.h)
 *
 * Nothing here prints: a failure returns -errno with a one-line reason in
 * initramfs_opts.err (initramfs_fail).
 */
#ifndef LZ_VMM_GLUE_INITRAMFS_INTERNAL_H
#define LZ_VMM_GLUE_INITRAMFS_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/why.h"
#include "../initramfs.h"

/* The reason (when o->err is set) formatted into o->err (common/why.h); returns rc. */
#define initramfs_fail(o, rc, ...) \
	why_set((o)->err, (o)->err ? (o)->err_len : 0, (rc), __VA_ARGS__)

/* ------------------------------------------------------------------ embed.S */

extern const unsigned char initramfs_init_sh[];    /* /init */
extern const size_t initramfs_init_sh_len;
extern const unsigned char initramfs_stage2_sh[];  /* /etc/lazyblk/stage2 */
extern const size_t initramfs_stage2_sh_len;
extern const unsigned char initramfs_outb_elf[];   /* /bin/lazyblk-outb */
extern const size_t initramfs_outb_elf_len;
extern const unsigned char initramfs_exec_elf[];   /* /bin/lazyblk-exec */
extern const size_t initramfs_exec_elf_len;

/* ------------------------------------------------------------------ files.c: text */

/* A growing NUL-terminated buffer; oom is set (and sticks) when an append fails. */
struct buf {
	char *p;
	size_t len, cap;
	bool oom;
};

void buf_add(struct buf *b, const void *data, size_t len);

/* ------------------------------------------------------------------ modules.c */

struct mod {
	char name[64];        /* normalized: '-' → '_' */
	char *path;           /* absolute */
	char id[128];         /* identity of the file when it was read (memo.h) */
	uint8_t *data;        /* decompressed, once needed */
	size_t len;
	int state;            /* 0 new, 1 visiting, 2 ordered */
};

/* A file or directory the module resolution looked at, and its identity then ("-": absent). */
struct watch {
	char *path;
	char id[128];
};

/* A soft pre-dependency neither built in nor a module, and the modules that want it. */
struct missing {
	char *target;         /* as the softdep names it: "crypto-crc32c" */
	char by[256];         /* "ext4, jbd2" */
};

struct modset {
	char dir[PATH_MAX];
	char ver[128];        /* the kernel's release: set before modset_resolve */
	struct mod *mods;
	size_t n, cap;
	char **builtin;       /* normalized names */
	size_t n_builtin, cap_builtin;
	char *builtin_info;   /* modules.builtin.modinfo (NUL-separated module.key=value), or NULL */
	size_t builtin_info_len;
	char **alias;         /* pairs: alias, module (from modules.alias, if any) */
	size_t n_alias;
	struct mod **order;   /* load order */
	size_t n_order;
	struct watch *watch;  /* what a recipe memo must find unchanged (memo.h) */
	size_t n_watch, cap_watch;
	struct missing *missing;  /* soft pre-dependencies found nowhere */
	size_t n_missing;
};

/*
 * The modules the guest needs, in load order (m->order): virtio_blk, the virtio transports
 * the kernel has (virtio_pci for QEMU -M pc, virtio_mmio for the built-in VMM), the root
 * filesystem fstype — each skipped when built in, with all their dependencies and soft
 * pre-dependencies — found from o->modules_dir or next to o->kernel (initramfs.h), read and
 * decompressed. m->watch: every file and directory the resolution looked at. -ENOENT with
 * one line naming them when virtio_blk or fstype, a dependency, or a soft pre-dependency of
 * a module the guest loads is neither built in nor a module.
 */
int modset_resolve(const struct initramfs_opts *o, struct modset *m, const char *fstype);
void modset_free(struct modset *m);

/* ------------------------------------------------------------------ modindex.c */

/*
 * m->dir, the kernel's modules directory (from o->modules_dir or next to o->kernel, for the
 * release m->ver), and its index: m->mods (modules.dep when depmod ran, else a walk of the
 * tree), m->builtin (modules.builtin), m->alias (modules.alias); each file and directory
 * looked at noted in m->watch. 0, or -errno with the reason (initramfs_fail).
 */
int modset_open(const struct initramfs_opts *o, struct modset *m);
/* A module's name from its path or any spelling: the file name to its first '.', '-' → '_'. */
void mod_name(const char *path, char *name, size_t len);
/* The indexed module of that (normalized) name, or NULL. */
struct mod *mod_find(struct modset *m, const char *name);
/* Whether the module of that (normalized) name is built into the kernel. */
bool mod_builtin(const struct modset *m, const char *name);
/* The next module modules.alias lists for alias, from its entry *i on (start at 0), or NULL. */
const char *alias_next(const struct modset *m, const char *alias, size_t *i);
/* Whether built-in code declares alias (modules.builtin.modinfo: "crc32c_generic.alias=crc32c"). */
bool mod_builtin_alias(const struct modset *m, const char *alias);

/* ------------------------------------------------------------------ files.c */

/* The files of /etc/lazyblk the builder writes (initramfs.h). */
struct guest_files {
	struct buf config, cmd, env, modules;
};

/*
 * The files for the options o and the modules m (m->ver: the release, "" for a recipe that
 * leaves it out). -EINVAL with the reason when the command or the environment is unusable.
 */
int guest_files_make(const struct initramfs_opts *o, const struct modset *m,
		     struct guest_files *f);
void guest_files_free(struct guest_files *f);

/* ------------------------------------------------------------------ image.c */

/*
 * Write the initramfs as a cpio to fd (gzipped if o->gzip): busybox bb, the modules of m in
 * load order, the files f and the built-in files. 0, or -errno with the reason.
 */
int image_write(const struct initramfs_opts *o, int fd, const struct modset *m,
		const uint8_t *bb, size_t bb_len, const struct guest_files *f);

/* ------------------------------------------------------------------ kernel.c */

/*
 * The release string of a bzImage (setup header kernel_version) or a vmlinux ELF ("Linux
 * version ..." banner) in d: 0, or -ENOEXEC with *why (a static text).
 */
int kernel_release(const uint8_t *d, size_t len, char *ver, size_t vlen, char *why, size_t why_len);

/* ------------------------------------------------------------------ cpio.c */

struct archive;

/* A cpio (newc) being written; every entry is owned by root, mtime 0, numbered inodes. */
struct cpio {
	struct archive *a;
	unsigned ino;
};

/*
 * Start a cpio on fd, gzipped (no timestamp) if gzip. -ELIBACC libarchive cannot be loaded,
 * -ENOMEM, -EIO (cpio_error says why; cpio_free it).
 */
int cpio_open(struct cpio *w, int fd, bool gzip);
/* Entries; 0, -ENOMEM or -EIO (cpio_error). */
int cpio_add_dir(struct cpio *w, const char *path, unsigned perm);
int cpio_add_file(struct cpio *w, const char *path, unsigned perm, const void *data,
		  size_t len);
int cpio_add_symlink(struct cpio *w, const char *path, const char *target);
int cpio_add_chr(struct cpio *w, const char *path, unsigned perm, unsigned major,
		 unsigned minor);
/* The trailer, and the last block flushed: 0 or -EIO (cpio_error). */
int cpio_close(struct cpio *w);
/* libarchive's text for the last failure, or NULL. */
const char *cpio_error(const struct cpio *w);
void cpio_free(struct cpio *w);

#endif
