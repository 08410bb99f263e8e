/* SPDX-License-Identifier: MIT */
/*
 * The guest side of `lazyblk run`: an initramfs (cpio newc) that loads the kernel's virtio
 * modules, mounts the image disk, runs one command in it and ends the VM with the
 * command's exit status. Also used by the QEMU TCG end-to-end tests.
 *
 * Contents:
 *   /init                  busybox sh script (the supervisor, stays PID 1; see below)
 *   /bin/busybox + applet symlinks       a static busybox (default /bin/busybox of
 *                          busybox-static; a dynamically linked one is refused)
 *   /bin/lazyblk-outb      tiny static helper: stdin's 3 bytes (port, le16; value) →
 *                          outb: the boot timer (0x440) and the exit status (0x441);
 *                          Debian kernels have no /dev/port
 *   /bin/lazyblk-exec      tiny static helper: UID GID PATH ARGV0 ARGS... →
 *                          setgroups(0), setgid, setuid, execve(PATH, [ARGV0, ARGS...])
 *   /lib/modules/VER/name.ko   the virtio modules (+ their dependencies and soft
 *                          pre-dependencies, + ext4 when it is a module), decompressed;
 *                          /etc/lazyblk/modules lists them in load order; a kernel that
 *                          lacks one (neither a module nor built in) is refused
 *   /etc/lazyblk/config    root device, fstype, console, workdir, user (sh assignments)
 *   /etc/lazyblk/cmd       the command as `set -- 'arg' ...` (single-quoted words)
 *   /etc/lazyblk/env       the environment as `export 'K=V'` lines
 *   /etc/lazyblk/stage2    sh script run inside the image root (see below)
 *
 * /init: mounts proc/sys/devtmpfs, insmods the modules in order, waits for /dev/vda,
 * mounts it (rw) on /newroot, mounts proc/sys/dev(+pts, shm) inside it, copies busybox
 * and stage2 to /dev/.lazyblk (devtmpfs: memory, never the image) and runs
 *   env -i chroot /newroot /dev/.lazyblk/busybox sh /dev/.lazyblk/stage2
 * Stage 2 (inside the image root): sets the environment, cd WORKDIR, resolves the
 * user against the image's /etc/passwd and /etc/group and the program against the
 * image's PATH, and execs it through lazyblk-exec — so an image without a shell
 * (distroless) works, and nothing is written into the image. When the command ends, /init
 * kills what is left, syncs, unmounts the root (ext4 clean), prints
 * `lazyblk-exit: N` on the console, writes N to port 0x441, and `reboot -f` (the kernel
 * command line should carry `reboot=k`: the VMM ends the VM on the i8042 reset; QEMU needs
 * -no-reboot). If /init fails before the command runs, N is 125.
 *
 * The sources are in vmm-glue/initramfs/ (internal.h lists them): /init and stage 2 are
 * init.sh and stage2.sh there, the helpers helper_outb.S and helper_exec.S, all built into
 * lazyblk.
 */
#ifndef LZ_VMM_INITRAMFS_H
#define LZ_VMM_INITRAMFS_H

#include <stdbool.h>
#include <stddef.h>

#include "../cas/oci_config.h"
#include "../common/test_hook.h"
#include "../common/why.h"

struct initramfs_opts {
	const char *kernel;       /* bzImage or vmlinux ELF (required): names the modules */
	/*
	 * NULL: <dir of kernel>/../lib/modules/VER, <dir>/../usr/lib/modules/VER,
	 * /lib/modules/VER, /usr/lib/modules/VER. Else the VER directory itself or a
	 * directory holding VER/. "none": the kernel has its drivers built in.
	 */
	const char *modules_dir;
	const char *busybox;      /* NULL: /bin/busybox (must be statically linked) */
	/*
	 * NULL: $XDG_CACHE_HOME/lazyblk/initramfs, else ~/.cache/lazyblk/initramfs, else
	 * /var/tmp/lazyblk-initramfs-EUID. Used only if it is this user's and nobody else may
	 * write it (made 0700; its files 0600): see uncached_fd.
	 */
	const char *cache_dir;
	const char *console;      /* NULL: "ttyS0" (the command's controlling terminal) */
	const char *root_dev;     /* NULL: "vda" */
	const char *root_fstype;  /* NULL: "ext4" */
	/* The command: argc > 0 replaces the image's Entrypoint + Cmd (like --entrypoint). */
	const char *const *argv;
	size_t argc;
	const struct oci_config *image;  /* may be NULL (cas/oci_config.h) */
	const char *const *env;   /* "K=V", after the image's Env (a later K wins) */
	size_t n_env;
	const char *workdir;      /* NULL: the image's */
	const char *user;         /* NULL: the image's */
	bool gzip;                /* gzip the cpio (default: uncompressed, fastest to unpack) */
	/*
	 * A cache directory that cannot be used (another user's, writable by others, a link,
	 * cannot be made): with uncached_fd, the cpio is written to a file without a name (0600
	 * in $TMPDIR or /tmp, unlinked at once), out_path is /proc/self/fd/N and *uncached_fd N,
	 * the caller's to close after use, after one warning to notes; without, -EPERM whatever
	 * the cause, and err says why (so a caller can tell this failure from the others).
	 * Untouched by a cached build.
	 */
	int *uncached_fd;
	struct note_sink notes;
	/* Where a one-line reason for a failure goes (may be NULL). */
	char *err;
	size_t err_len;
};

/*
 * Build (or find in the cache) the initramfs; its path goes to out_path.
 * The cache key is the sha256 of the kernel file, busybox, every module's bytes, the
 * init scripts and the command/config files. Returns 0 or -errno with o->err set: -ENOENT
 * with one line naming them when the kernel lacks a driver the guest needs — virtio_blk or
 * the root filesystem, a module's dependency, or a soft pre-dependency of a module /init
 * loads ("kernel V has no crc32c driver (crypto-crc32c, wanted by ext4, jbd2: softdep pre),
 * neither built in nor a module in DIR").
 */
int initramfs_build(const struct initramfs_opts *o, char *out_path, size_t out_len);

/*
 * The kernel release string ("6.1.0-27-cloud-amd64") of a bzImage (setup header
 * kernel_version) or a vmlinux ELF ("Linux version ..." banner). 0 or -errno, why set.
 */
TEST_HOOK
int initramfs_kernel_version(const char *kernel, char *ver, size_t len, char *why, size_t why_len);

/* The status /init reports when it fails before the command runs. */
#define INITRAMFS_INIT_FAILED 125

#endif
