/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cas/manifest.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../vmm-glue/initramfs.h"
#include "cli.h"

static const char initramfs_usage[] =
	"usage: lazyblk initramfs --kernel VMLINUZ [options] [-- CMD [ARGS...]]\n"
	"\n"
	"Build the initramfs `lazyblk run` boots with (also usable with QEMU -initrd): a static\n"
	"busybox, the kernel's virtio modules (virtio_blk, virtio_pci, virtio_mmio and the root\n"
	"filesystem when they are modules, with their dependencies, decompressed; a kernel that\n"
	"lacks virtio_blk, the filesystem or a module's (soft) dependency is refused) and an /init\n"
	"that mounts /dev/vda (ext4, read-write), runs CMD inside it (chroot; the image needs no\n"
	"shell) with its output on the console, then syncs, unmounts, prints\n"
	"`lazyblk-exit: N`, writes N to I/O port 0x441 and reboots (boot with `reboot=k`; under\n"
	"QEMU add -no-reboot). Without CMD, the image config's Entrypoint + Cmd run. The result\n"
	"is cached by the digest of everything in it; its path is printed unless -o is given.\n"
	"\n"
	"options:\n"
	"      --kernel FILE     the kernel (bzImage or vmlinux); its version names the modules\n"
	"      --modules DIR     the modules directory (default: ../lib/modules/VERSION next to\n"
	"                        the kernel, as `dpkg-deb -x` of its package leaves it, or\n"
	"                        /lib/modules/VERSION); 'none' if the drivers are built in\n"
	"      --busybox FILE    a statically linked busybox (default /bin/busybox)\n"
	"      --manifest FILE   take Entrypoint, Cmd, Env, WorkingDir, User from this image\n"
	"                        manifest's config\n"
	"  -e, --env K=V         add to the command's environment (repeatable)\n"
	"  -w, --workdir DIR     working directory (default: the image's, or /)\n"
	"  -u, --user USER[:GROUP]  user to run as (default: the image's, or root)\n"
	"      --console NAME    the command's terminal (default ttyS0)\n"
	"      --root DEV        the root disk in /dev (default vda)\n"
	"      --gzip            gzip the cpio (default: uncompressed, quickest to unpack)\n"
	"      --cache-dir DIR   default $XDG_CACHE_HOME/lazyblk/initramfs (~/.cache/...,\n"
	"                        else /var/tmp/lazyblk-initramfs-UID); used only if it is\n"
	"                        yours and nobody else may write it (made 0700)\n"
	"  -o, --output FILE     copy the result to FILE\n"
	"  -h, --help            this text\n";

enum { O_KERNEL = 0x100, O_MODULES, O_BUSYBOX, O_MANIFEST, O_CONSOLE, O_ROOT, O_GZIP, O_CACHE };

static const struct option initramfs_options[] = {
	{ "kernel", required_argument, NULL, O_KERNEL },
	{ "modules", required_argument, NULL, O_MODULES },
	{ "busybox", required_argument, NULL, O_BUSYBOX },
	{ "manifest", required_argument, NULL, O_MANIFEST },
	{ "env", required_argument, NULL, 'e' },
	{ "workdir", required_argument, NULL, 'w' },
	{ "user", required_argument, NULL, 'u' },
	{ "console", required_argument, NULL, O_CONSOLE },
	{ "root", required_argument, NULL, O_ROOT },
	{ "gzip", no_argument, NULL, O_GZIP },
	{ "cache-dir", required_argument, NULL, O_CACHE },
	{ "output", required_argument, NULL, 'o' },
	CLI_LOG_OPTIONS,
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* The options into o, *manifest, *out, env: -1 when they are all good, else the exit status. */
static int initramfs_parse(int argc, char **argv, struct initramfs_opts *o, const char **manifest,
			   const char **out, const char **env, size_t *n_env)
{
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":e:w:u:o:hvqp", initramfs_options, NULL)) != -1) {
		switch (c) {
		case O_KERNEL: o->kernel = optarg; break;
		case O_MODULES: o->modules_dir = optarg; break;
		case O_BUSYBOX: o->busybox = optarg; break;
		case O_MANIFEST: *manifest = optarg; break;
		case 'e': env[(*n_env)++] = optarg; break;
		case 'w': o->workdir = optarg; break;
		case 'u': o->user = optarg; break;
		case O_CONSOLE: o->console = optarg; break;
		case O_ROOT: o->root_dev = optarg; break;
		case O_GZIP: o->gzip = true; break;
		case O_CACHE: o->cache_dir = optarg; break;
		case 'o':
			if (cli_output_check(optarg))
				return 1;
			*out = optarg;
			break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h':
			fputs(initramfs_usage, stdout);
			return 0;
		default:
			return cli_bad_option("initramfs", argv, c);
		}
	}
	if (!o->kernel)
		return cli_usage_error("--kernel is required (see lazyblk initramfs --help)");
	return -1;
}

/* The built initramfs at path: copied to out, or its path printed. 0, or 1 (said). */
static int initramfs_deliver(const char *path, const char *out)
{
	uint8_t *d;
	size_t len;
	int r;

	if (!out) {
		printf("%s\n", path);
		return 0;
	}
	r = fs_read_file(path, &d, &len);
	if (!r) {
		r = fs_write_file_atomic(out, d, len, 0644);
		free(d);
	}
	if (r) {
		log_error("%s: %s", out, strerror(-r));
		return 1;
	}
	return 0;
}

int cmd_initramfs(int argc, char **argv)
{
	struct initramfs_opts o = { 0 };
	struct oci_config img = { 0 };
	const char *manifest = NULL, *out = NULL, **env = NULL;
	char path[PATH_MAX], err[PATH_MAX + 128];
	int rc = 1, ret, uncached_fd = -1;
	size_t n_env = 0;

	env = calloc((size_t)argc + 1, sizeof(*env));
	if (!env) {
		log_error("out of memory");
		return 1;
	}
	ret = initramfs_parse(argc, argv, &o, &manifest, &out, env, &n_env);
	if (ret >= 0) {
		free(env);
		return ret;
	}
	o.argv = (const char *const *)(argv + optind);
	o.argc = (size_t)(argc - optind);
	o.env = env;
	o.n_env = n_env;
	o.err = err;
	o.err_len = sizeof(err);
	o.notes = CLI_NOTES;
	if (out)
		o.uncached_fd = &uncached_fd; /* a path to print must stay: only a cache's */

	if (manifest) {
		bool found;

		if (cli_image_config_load(manifest, &img, &found))
			goto out;
		if (found)
			o.image = &img;
	}

	ret = initramfs_build(&o, path, sizeof(path));
	if (ret) { /* -EPERM without -o: the cache directory cannot be used (initramfs.h) */
		log_error("%s%s", err[0] ? err : strerror(-ret),
			  ret == -EPERM && !out ? ": give a private --cache-dir, or -o FILE" : "");
		goto out;
	}
	rc = initramfs_deliver(path, out);
out:
	if (uncached_fd >= 0)
		close(uncached_fd);
	oci_config_free(&img);
	free(env);
	return rc;
}
