/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for vmm-glue/initramfs/: a fake kernel (synthetic bzImage setup header) with a
 * fake lib/modules/VER next to it (dummy ELF modules with .modinfo, some .ko.xz / .ko.zst),
 * built into a cpio that is read back with libarchive: entries, modes, module order,
 * decompression, the command's quoting, the cache, and the errors for bad inputs.
 */
#include "../helpers.h"

#include <dirent.h>
#include <elf.h>
#include <sys/wait.h>
#include <archive.h>
#include <archive_entry.h>
#include <zstd.h>

#include "../../../common/fsutil.h"
#include "../../../common/le.h"
#include "../../../vmm-glue/initramfs.h"

#define VER "6.1.0-99-test-amd64"

struct fx {
	char dir[PATH_MAX];
	char kernel[PATH_MAX];   /* DIR/root/boot/vmlinuz-VER */
	char mods[PATH_MAX];     /* DIR/root/lib/modules/VER */
	char busybox[PATH_MAX];
	char cache[PATH_MAX];
	char err[512];
	char out[PATH_MAX];
};

/* ------------------------------------------------------------------ fixtures */

/*
 * A relocatable ELF64 with sections: null, .text (a marker), .modinfo, .shstrtab. softdep:
 * one softdep= entry, or several separated by '|' (as btrfs declares them).
 */
static size_t fake_module(uint8_t *out, const char *name, const char *depends,
			  const char *softdep, const char *alias)
{
	char info[512];
	size_t il = 0, off;
	static const char shstr[] = "\0.text\0.modinfo\0.shstrtab";
	char text[64] = { 0 };

	il += (size_t)snprintf(info + il, sizeof(info) - il, "license=GPL") + 1;
	for (const char *sd = softdep; sd && *sd; sd += strcspn(sd, "|") + !!sd[strcspn(sd, "|")])
		il += (size_t)snprintf(info + il, sizeof(info) - il, "softdep=%.*s",
				       (int)strcspn(sd, "|"), sd) + 1;
	if (alias) { /* as a kernel module declares them: another alias first, then this one */
		il += (size_t)snprintf(info + il, sizeof(info) - il, "alias=%s-x", alias) + 1;
		il += (size_t)snprintf(info + il, sizeof(info) - il, "alias=%s", alias) + 1;
	}
	il += (size_t)snprintf(info + il, sizeof(info) - il, "depends=%s", depends) + 1;
	il += (size_t)snprintf(info + il, sizeof(info) - il, "name=%s", name) + 1;
	snprintf(text, sizeof(text), "module body of %s", name);

	memset(out, 0, 4096);
	memcpy(out, "\x7f" "ELF\x02\x01\x01", 7);
	le16_put(out + 16, 1);           /* ET_REL */
	le16_put(out + 18, 62);
	le32_put(out + 20, 1);
	le16_put(out + 52, 64);
	le16_put(out + 58, 64);          /* e_shentsize */
	le16_put(out + 60, 4);           /* e_shnum */
	le16_put(out + 62, 3);           /* e_shstrndx */
	off = 64;
	memcpy(out + off, text, sizeof(text));
	size_t text_off = off;
	off += sizeof(text);
	memcpy(out + off, info, il);
	size_t info_off = off;
	off += il;
	memcpy(out + off, shstr, sizeof(shstr));
	size_t str_off = off;
	off += sizeof(shstr);
	off = (off + 7) & ~(size_t)7;
	le64_put(out + 40, off);         /* e_shoff */
	uint8_t *sh = out + off;
	/* [1] .text */
	le32_put(sh + 64 + 0, 1);
	le32_put(sh + 64 + 4, 1);
	le64_put(sh + 64 + 24, text_off);
	le64_put(sh + 64 + 32, sizeof(text));
	/* [2] .modinfo */
	le32_put(sh + 128 + 0, 7);
	le32_put(sh + 128 + 4, 1);
	le64_put(sh + 128 + 24, info_off);
	le64_put(sh + 128 + 32, il);
	/* [3] .shstrtab */
	le32_put(sh + 192 + 0, 16);
	le32_put(sh + 192 + 4, 3);
	le64_put(sh + 192 + 24, str_off);
	le64_put(sh + 192 + 32, sizeof(shstr));
	return off + 4 * 64;
}

static size_t xz_compress(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	size_t used = 0;

	assert_non_null(a);
	assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
	assert_int_equal(archive_write_add_filter_xz(a), ARCHIVE_OK);
	assert_int_equal(archive_write_set_bytes_per_block(a, 0), ARCHIVE_OK);
	assert_int_equal(archive_write_open_memory(a, out, cap, &used), ARCHIVE_OK);
	archive_entry_set_pathname(e, "m");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_size(e, (la_int64_t)len);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(a, in, len), (la_ssize_t)len);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	archive_entry_free(e);
	return used;
}

struct fmod {
	const char *file;      /* relative to the modules dir */
	const char *name, *depends, *softdep;
	const char *alias;     /* declared in its .modinfo */
};

/* The fake kernel's modules: deliberately listed in an order that is not the load order. */
static const struct fmod fmods[] = {
	{ "kernel/drivers/block/virtio_blk.ko", "virtio_blk", "virtio,virtio_ring",
	  "pre: crc-thing crypto-crcx post: crypto-crcy", NULL },
	{ "kernel/drivers/virtio/virtio_pci.ko.zst", "virtio_pci", "virtio_pci_modern_dev,virtio,virtio_ring", NULL, NULL },
	{ "kernel/drivers/virtio/virtio_mmio.ko", "virtio_mmio", "virtio,virtio_ring", NULL, NULL },
	{ "kernel/drivers/virtio/virtio_pci_modern_dev.ko.xz", "virtio_pci_modern_dev", "", NULL, NULL },
	{ "kernel/drivers/virtio/virtio.ko.xz", "virtio", "virtio_ring", NULL, NULL },
	{ "kernel/drivers/virtio/virtio_ring.ko", "virtio_ring", "", NULL, NULL },
	{ "kernel/lib/crc-thing.ko.zst", "crc_thing", "", NULL, NULL },
	{ "kernel/net/unrelated.ko", "unrelated", "virtio", NULL, NULL },
	/* virtio_blk's soft dependency by alias, with no modules.alias (depmod has not run):
	 * the modules that declare it come in, not the one named alike that does not, nor
	 * those of a "post:" one */
	{ "kernel/arch/x86/crypto/crcx-intel.ko", "crcx_intel", "", NULL, "crypto-crcx" },
	{ "kernel/crypto/crcx_generic.ko.xz", "crcx_generic", "", NULL, "crypto-crcx" },
	{ "kernel/crypto/crcx_other.ko", "crcx_other", "", NULL, "crypto-crcxother" },
	{ "kernel/crypto/crcy_generic.ko", "crcy_generic", "", NULL, "crypto-crcy" },
};
#define N_FMODS (sizeof(fmods) / sizeof(fmods[0]))

static void write_module(struct fx *f, const struct fmod *m)
{
	uint8_t elf[4096], z[8192];
	size_t n = fake_module(elf, m->name, m->depends, m->softdep, m->alias), zn;
	size_t l = strlen(m->file);
	char p[PATH_MAX], d[PATH_MAX];

	path_fmt(p, "%s/%s", f->mods, m->file);
	snprintf(d, sizeof(d), "%s", p);
	*strrchr(d, '/') = 0;
	assert_int_equal(fs_mkdir_p(d, 0755), 0);
	if (!strcmp(m->file + l - 3, ".xz")) {
		zn = xz_compress(elf, n, z, sizeof(z));
		write_file(p, z, zn);
	} else if (!strcmp(m->file + l - 4, ".zst")) {
		zn = ZSTD_compress(z, sizeof(z), elf, n, 3);
		assert_false(ZSTD_isError(zn));
		write_file(p, z, zn);
	} else {
		write_file(p, elf, n);
	}
}

static void write_kernel(const char *path, const char *ver)
{
	uint8_t k[0x2000];

	memset(k, 0x90, sizeof(k));
	k[0x1f1] = 4;
	memcpy(k + 0x202, "HdrS", 4);
	le16_put(k + 0x206, 0x020f);
	le16_put(k + 0x20e, 0x400);
	snprintf((char *)k + 0x600, 200, "%s (builder@example) #1 SMP Debian", ver);
	write_file(path, k, sizeof(k));
}

/* A static (no PT_INTERP) or dynamic ELF executable standing in for busybox. */
static void write_busybox(const char *path, bool dynamic)
{
	uint8_t b[4096];

	memset(b, 0, sizeof(b));
	memcpy(b, "\x7f" "ELF\x02\x01\x01", 7);
	le16_put(b + 16, 2);
	le16_put(b + 18, 62);
	le64_put(b + 32, 64);
	le16_put(b + 54, 56);
	le16_put(b + 56, 2);
	le32_put(b + 64, 1);                        /* PT_LOAD */
	le32_put(b + 64 + 56, dynamic ? 3 : 4);     /* PT_INTERP or PT_NOTE */
	memcpy(b + 1024, "fake busybox", 12);
	write_file(path, b, sizeof(b));
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	char p[PATH_MAX];

	assert_non_null(f);
	tmpdir_make(f->dir);
	path_fmt(p, "%s/root/boot", f->dir);
	assert_int_equal(fs_mkdir_p(p, 0755), 0);
	path_fmt(f->kernel, "%s/root/boot/vmlinuz-" VER, f->dir);
	path_fmt(f->mods, "%s/root/lib/modules/" VER, f->dir);
	path_fmt(f->busybox, "%s/busybox", f->dir);
	path_fmt(f->cache, "%s/cache", f->dir);
	assert_int_equal(fs_mkdir_p(f->mods, 0755), 0);
	write_kernel(f->kernel, VER);
	write_busybox(f->busybox, false);
	for (size_t i = 0; i < N_FMODS; i++)
		write_module(f, &fmods[i]);
	path_fmt(p, "%s/modules.builtin", f->mods);
	write_file(p, "kernel/fs/ext4/ext4.ko\nkernel/fs/jbd2/jbd2.ko\n", 45);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	rm_rf(f->dir);
	free(f);
	return 0;
}

static struct initramfs_opts base_opts(struct fx *f, const char *const *argv, size_t argc)
{
	struct initramfs_opts o = {
		.kernel = f->kernel,
		.busybox = f->busybox,
		.cache_dir = f->cache,
		.argv = argv,
		.argc = argc,
		.err = f->err,
		.err_len = sizeof(f->err),
	};
	return o;
}

/* ------------------------------------------------------------------ reading back */

struct ent {
	char path[256];
	mode_t type, perm;
	char link[64];
	unsigned rmaj, rmin;
	uint8_t *data;
	size_t len;
};

struct cpio_rd {
	struct ent e[128];
	size_t n;
};

static void read_cpio(const char *path, struct cpio_rd *r, bool gz)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;

	memset(r, 0, sizeof(*r));
	archive_read_support_format_cpio(a);
	archive_read_support_filter_all(a);
	assert_int_equal(archive_read_open_filename(a, path, 65536), ARCHIVE_OK);
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		struct ent *x = &r->e[r->n++];
		la_int64_t size = archive_entry_filetype(e) == AE_IFREG ? archive_entry_size(e) : 0;

		assert_true(r->n < 128);
		snprintf(x->path, sizeof(x->path), "%s", archive_entry_pathname(e));
		x->type = archive_entry_filetype(e);
		x->perm = archive_entry_perm(e);
		if (archive_entry_symlink(e))
			snprintf(x->link, sizeof(x->link), "%s", archive_entry_symlink(e));
		x->rmaj = archive_entry_rdevmajor(e);
		x->rmin = archive_entry_rdevminor(e);
		assert_int_equal(archive_entry_uid(e), 0);
		x->data = malloc((size_t)size + 1);
		assert_non_null(x->data);
		if (size)
			assert_int_equal(archive_read_data(a, x->data, (size_t)size), size);
		x->data[size] = 0;
		x->len = (size_t)size;
	}
	assert_int_equal(archive_filter_count(a), gz ? 2 : 1);
	if (gz)
		assert_int_equal(archive_filter_code(a, 0), ARCHIVE_FILTER_GZIP);
	archive_read_free(a);
}

static void free_cpio(struct cpio_rd *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->e[i].data);
}

static const struct ent *find(const struct cpio_rd *r, const char *path)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->e[i].path, path))
			return &r->e[i];
	fail_msg("no %s in the cpio", path);
	return NULL;
}

static bool has(const struct cpio_rd *r, const char *path)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->e[i].path, path))
			return true;
	return false;
}

/* ------------------------------------------------------------------ tests */

static void test_kernel_version(void **state)
{
	struct fx *f = *state;
	char ver[128], p[PATH_MAX];
	char why[WHY_MAX] = "";
	uint8_t elf[8192];

	assert_int_equal(initramfs_kernel_version(f->kernel, ver, sizeof(ver), why, sizeof(why)), 0);
	assert_string_equal(ver, VER);

	/* a vmlinux: the "Linux version" banner */
	memset(elf, 0, sizeof(elf));
	memcpy(elf, "\x7f" "ELF\x02\x01\x01", 7);
	memcpy(elf + 3000, "Linux version 6.9.1-custom (me@host) #2", 39);
	path_fmt(p, "%s/vmlinux", f->dir);
	write_file(p, elf, sizeof(elf));
	assert_int_equal(initramfs_kernel_version(p, ver, sizeof(ver), why, sizeof(why)), 0);
	assert_string_equal(ver, "6.9.1-custom");

	/* not a kernel */
	path_fmt(p, "%s/junk", f->dir);
	write_file(p, "hello, this is not a kernel at all", 34);
	assert_int_equal(initramfs_kernel_version(p, ver, sizeof(ver), why, sizeof(why)), -ENOEXEC);
	assert_non_null(strstr(why, "not a Linux kernel"));
}

static void test_build_contents(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "/bin/sh", "-c", "echo 'hi there'; exit 7", "it's" };
	struct initramfs_opts o = base_opts(f, argv, 4);
	struct cpio_rd r;
	const struct ent *e;
	static const char *const order[] = { "virtio_pci_modern_dev", "virtio_ring", "virtio",
					     "virtio_pci", "virtio_mmio", "crc_thing", "crcx_generic",
					     "crcx_intel", "virtio_blk" };
	char want[512] = "";
	size_t pos;

	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build: %s", f->err);
	assert_non_null(strstr(f->out, f->cache));
	read_cpio(f->out, &r, false);

	e = find(&r, "init");
	assert_int_equal(e->type, AE_IFREG);
	assert_int_equal(e->perm, 0755);
	assert_memory_equal(e->data, "#!/bin/sh\n", 10);
	assert_non_null(strstr((char *)e->data, "lazyblk-exit: $rc"));
	e = find(&r, "bin/busybox");
	assert_int_equal(e->perm, 0755);
	assert_int_equal(e->len, 4096);
	assert_memory_equal(e->data + 1024, "fake busybox", 12);
	for (const char *const *a = (const char *const[]){ "bin/sh", "bin/mount", "bin/insmod",
							     "bin/chroot", "bin/reboot", NULL };
	     *a; a++) {
		e = find(&r, *a);
		assert_int_equal(e->type, AE_IFLNK);
		assert_string_equal(e->link, "busybox");
	}
	e = find(&r, "dev/console");
	assert_int_equal(e->type, AE_IFCHR);
	assert_int_equal(e->rmaj, 5);
	assert_int_equal(e->rmin, 1);
	for (const char *const *d = (const char *const[]){ "proc", "sys", "dev", "newroot", NULL };
	     *d; d++)
		assert_int_equal(find(&r, *d)->type, AE_IFDIR);
	/* the helpers: tiny static ELF executables */
	e = find(&r, "bin/lazyblk-outb");
	assert_int_equal(e->perm, 0755);
	assert_memory_equal(e->data, "\x7f" "ELF\x02\x01\x01", 7);
	assert_true(e->len < 512);
	assert_memory_equal(find(&r, "bin/lazyblk-exec")->data, "\x7f" "ELF", 4);
	/* whole files (vmm-glue/initramfs/tiny_elf.h): one PT_LOAD maps all of it */
	for (const char *const *h = (const char *const[]){ "bin/lazyblk-outb",
							     "bin/lazyblk-exec", NULL };
	     *h; h++) {
		Elf64_Ehdr eh;
		Elf64_Phdr ph;

		e = find(&r, *h);
		assert_true(e->len > sizeof(eh) + sizeof(ph));
		memcpy(&eh, e->data, sizeof(eh));
		memcpy(&ph, e->data + sizeof(eh), sizeof(ph));
		assert_int_equal(eh.e_type, ET_EXEC);
		assert_int_equal(eh.e_machine, EM_X86_64);
		assert_int_equal(eh.e_entry, 0x400000 + sizeof(eh) + sizeof(ph));
		assert_int_equal(eh.e_phoff, sizeof(eh));
		assert_int_equal(eh.e_phnum, 1);
		assert_int_equal(eh.e_shnum, 0);
		assert_int_equal(ph.p_type, PT_LOAD);
		assert_int_equal(ph.p_flags, PF_R | PF_X);
		assert_int_equal(ph.p_offset, 0);
		assert_int_equal(ph.p_vaddr, 0x400000);
		assert_int_equal(ph.p_filesz, e->len);
		assert_int_equal(ph.p_memsz, e->len);
	}

	/* load order: dependencies (and soft pre-dependencies) first; nothing unneeded */
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		strcat(want, order[i]);
		strcat(want, "\n");
	}
	e = find(&r, "etc/lazyblk/modules");
	assert_string_equal((char *)e->data, want);
	assert_false(has(&r, "lib/modules/" VER "/unrelated.ko"));
	assert_false(has(&r, "lib/modules/" VER "/crcx_other.ko")); /* not that alias */
	assert_false(has(&r, "lib/modules/" VER "/crcy_generic.ko")); /* a post: one */
	assert_false(has(&r, "lib/modules/" VER "/ext4.ko")); /* built in */

	/* modules are stored decompressed: .xz and .zst gave the original ELF back */
	for (size_t i = 0; i < N_FMODS; i++) {
		uint8_t elf[4096];
		size_t n;
		char p[PATH_MAX];

		if (!strcmp(fmods[i].name, "unrelated") || !strcmp(fmods[i].name, "crcx_other") ||
		    !strcmp(fmods[i].name, "crcy_generic"))
			continue;
		n = fake_module(elf, fmods[i].name, fmods[i].depends, fmods[i].softdep,
				fmods[i].alias);
		path_fmt(p, "lib/modules/" VER "/%s.ko", fmods[i].name);
		e = find(&r, p);
		assert_int_equal(e->len, n);
		assert_memory_equal(e->data, elf, n);
	}

	/* the command, single-quoted for sh */
	e = find(&r, "etc/lazyblk/cmd");
	assert_string_equal((char *)e->data,
			    "set -- '/bin/sh' '-c' 'echo '\\''hi there'\\''; exit 7' 'it'\\''s'\n");
	e = find(&r, "etc/lazyblk/config");
	assert_non_null(strstr((char *)e->data, "LZ_KVER='" VER "'\n"));
	assert_non_null(strstr((char *)e->data, "LZ_ROOT='vda'\n"));
	assert_non_null(strstr((char *)e->data, "LZ_CONSOLE='ttyS0'\n"));
	assert_non_null(find(&r, "etc/lazyblk/stage2"));
	/* the modules directory is listed before its files */
	pos = 0;
	for (size_t i = 0; i < r.n; i++) {
		if (!strcmp(r.e[i].path, "lib/modules/" VER))
			pos = i + 1;
		else if (!strncmp(r.e[i].path, "lib/modules/" VER "/", strlen("lib/modules/" VER "/")))
			assert_true(pos > 0);
	}
	assert_true(pos > 0);
	free_cpio(&r);
}

/* Run path with argv and stdin from in (len bytes): its exit status, or -1 if it cannot run. */
static int run_helper(const char *path, const char *const *argv, const void *in, size_t len)
{
	int pfd[2], st;
	pid_t pid;

	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		dup2(pfd[0], 0);
		close(pfd[0]);
		close(pfd[1]);
		execv(path, (char *const *)argv);
		_exit(errno == EACCES || errno == EPERM ? 200 : 201);
	}
	close(pfd[0]);
	assert_int_equal(write(pfd[1], in, len), (ssize_t)len);
	close(pfd[1]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st) == 200 ? -1 : WEXITSTATUS(st);
}

/*
 * The helpers run on the host (x86-64 Linux, as the guest): lazyblk-exec's argument checks
 * and, as root, its exec; lazyblk-outb only where it writes no port (a short stdin).
 */
static void test_helpers(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "/bin/true" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char outb[PATH_MAX], exec[PATH_MAX];
	struct cpio_rd r;
	const struct ent *e;
	int rc;

	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build: %s", f->err);
	read_cpio(f->out, &r, false);
	path_fmt(outb, "%s/lazyblk-outb", f->dir);
	path_fmt(exec, "%s/lazyblk-exec", f->dir);
	e = find(&r, "bin/lazyblk-outb");
	write_file(outb, e->data, e->len);
	e = find(&r, "bin/lazyblk-exec");
	write_file(exec, e->data, e->len);
	free_cpio(&r);
	assert_int_equal(chmod(outb, 0755), 0);
	assert_int_equal(chmod(exec, 0755), 0);

	/* lazyblk-outb: fewer than 3 bytes on stdin: 1, no port touched */
	rc = run_helper(outb, (const char *const[]){ "lazyblk-outb", NULL }, "\x41\x04", 2);
	if (rc < 0)
		skip(); /* a noexec temporary directory */
	assert_int_equal(rc, 1);
	/* lazyblk-exec: too few arguments, a bad UID or GID: 126 */
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0", "0", "/bin/true", NULL },
				    "", 0), 126);
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0x1", "0", "/bin/true",
								 "true", NULL }, "", 0), 126);
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0", "4294967295",
								 "/bin/true", "true", NULL }, "", 0),
			 126);
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "", "0", "/bin/true", "true",
								 NULL }, "", 0), 126);
	if (geteuid() != 0)
		return; /* setgroups needs CAP_SETGID: 126 from here on */
	/* as root, to root: the program runs with its argv[0] and arguments; 127: no program */
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0", "0", "/bin/sh", "sh",
								 "-c", "exit 7", NULL }, "", 0), 7);
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0", "0", "/bin/sh", "sh",
								 "-c", "[ \"$0\" = a ] && [ \"$1\" = b ]",
								 "a", "b", NULL }, "", 0), 0);
	if (!access("/bin/busybox", X_OK)) /* argv[0] picks busybox's applet */
		assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0", "0",
									 "/bin/busybox", "false",
									 NULL }, "", 0), 1);
	assert_int_equal(run_helper(exec, (const char *const[]){ "x", "0", "0", "/nonexistent",
								 "x", NULL }, "", 0), 127);
}

static void test_cache(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "/bin/true" };
	const char *argv2[] = { "/bin/false" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char first[PATH_MAX], other[PATH_MAX];
	struct stat st1, st2;
	struct cpio_rd r;

	assert_int_equal(initramfs_build(&o, first, sizeof(first)), 0);
	assert_int_equal(stat(first, &st1), 0);
	usleep(20000);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_equal(first, f->out);
	assert_int_equal(stat(f->out, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);            /* reused, not rewritten */
	assert_int_equal(st1.st_mtim.tv_nsec, st2.st_mtim.tv_nsec);

	/* another command, another entry */
	o.argv = argv2;
	assert_int_equal(initramfs_build(&o, other, sizeof(other)), 0);
	assert_string_not_equal(first, other);
	/* a changed module changes the key */
	o.argv = argv;
	write_module(f, &(struct fmod){ "kernel/drivers/virtio/virtio_ring.ko", "virtio_ring",
					"", "post: nothing", NULL });
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_not_equal(first, f->out);
	/* gzip */
	o.gzip = true;
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_non_null(strstr(f->out, ".cpio.gz"));
	read_cpio(f->out, &r, true);
	assert_non_null(find(&r, "init"));
	free_cpio(&r);
}

static void test_modules_dep_and_override(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "x" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char p[PATH_MAX], moved[PATH_MAX];
	struct cpio_rd r;
	static const char dep[] =
		"kernel/drivers/virtio/virtio_ring.ko:\n"
		"kernel/drivers/virtio/virtio.ko.xz: kernel/drivers/virtio/virtio_ring.ko\n"
		"kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko.xz "
		"kernel/drivers/virtio/virtio_ring.ko\n"
		"kernel/drivers/virtio/virtio_mmio.ko: kernel/drivers/virtio/virtio.ko.xz "
		"kernel/drivers/virtio/virtio_ring.ko\n"
		"kernel/lib/crc-thing.ko.zst:\n"
		"kernel/crypto/crcx_generic.ko.xz:\n";

	/* modules.dep (depmod ran) names the files: virtio_pci is not listed, so not used (nor
	 * crcx_intel; virtio_blk's soft pre-dependencies are listed: without them the kernel
	 * is refused, see test_missing_drivers) */
	path_fmt(p, "%s/modules.dep", f->mods);
	write_file(p, dep, strlen(dep));
	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build: %s", f->err);
	read_cpio(f->out, &r, false);
	assert_string_equal((char *)find(&r, "etc/lazyblk/modules")->data,
			    "virtio_ring\nvirtio\nvirtio_mmio\ncrc_thing\ncrcx_generic\nvirtio_blk\n");
	free_cpio(&r);
	unlink(p);

	/* --modules DIR: the VER directory itself, or its parent */
	path_fmt(moved, "%s/elsewhere", f->dir);
	assert_int_equal(fs_mkdir_p(moved, 0755), 0);
	path_fmt(p, "%s/" VER, moved);
	assert_int_equal(rename(f->mods, p), 0);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -ENOENT);
	assert_non_null(strstr(f->err, "no modules for kernel " VER " next to"));
	assert_non_null(strstr(f->err, "pass --modules DIR"));
	o.modules_dir = moved;
	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build with --modules parent: %s", f->err);
	o.modules_dir = p;
	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build with --modules VER dir: %s", f->err);
	/* none: drivers built in, no modules at all */
	o.modules_dir = "none";
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	read_cpio(f->out, &r, false);
	assert_string_equal((char *)find(&r, "etc/lazyblk/modules")->data, "");
	free_cpio(&r);
	o.modules_dir = f->dir; /* no VER below, not a modules dir itself */
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -ENOENT);
	assert_non_null(strstr(f->err, "no kernel modules for " VER));
	assert_int_equal(rename(p, f->mods), 0);
}

static void test_bad_inputs(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "x" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char p[PATH_MAX], keep[PATH_MAX];

	/* a dependency that is neither a module nor built in */
	path_fmt(p, "%s/kernel/drivers/virtio/virtio_ring.ko", f->mods);
	path_fmt(keep, "%s/ring.keep", f->dir);
	assert_int_equal(rename(p, keep), 0);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -ENOENT);
	assert_non_null(strstr(f->err, "module virtio needs virtio_ring, which is not in"));
	/* ... unless it is built in */
	path_fmt(p, "%s/modules.builtin", f->mods);
	write_file(p, "kernel/fs/ext4/ext4.ko\nkernel/drivers/virtio/virtio_ring.ko\n", 60);
	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build with virtio_ring built in: %s", f->err);
	path_fmt(p, "%s/kernel/drivers/virtio/virtio_ring.ko", f->mods);
	assert_int_equal(rename(keep, p), 0);
	path_fmt(p, "%s/modules.builtin", f->mods);
	write_file(p, "kernel/fs/ext4/ext4.ko\n", 23);

	/* ext4 neither built in nor a module */
	path_fmt(p, "%s/modules.builtin", f->mods);
	write_file(p, "kernel/fs/jbd2/jbd2.ko\n", 23);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -ENOENT);
	assert_non_null(strstr(f->err, "kernel " VER " has no ext4"));
	write_file(p, "kernel/fs/ext4/ext4.ko\n", 23);

	/* a corrupt compressed module */
	path_fmt(p, "%s/kernel/drivers/virtio/virtio.ko.xz", f->mods);
	path_fmt(keep, "%s/virtio.keep", f->dir);
	assert_int_equal(rename(p, keep), 0);
	write_file(p, "\xfd" "7zXZ\0garbage garbage garbage", 28);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -EILSEQ);
	assert_non_null(strstr(f->err, "virtio.ko.xz: cannot decompress"));
	assert_int_equal(rename(keep, p), 0);

	/* not a bzImage */
	path_fmt(p, "%s/notakernel", f->dir);
	write_file(p, "MZ this is a PE file, or something", 34);
	o.kernel = p;
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -ENOEXEC);
	assert_non_null(strstr(f->err, "not a Linux kernel"));
	o.kernel = "/nonexistent/vmlinuz";
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -ENOENT);
	assert_non_null(strstr(f->err, "/nonexistent/vmlinuz: No such file"));
	o.kernel = f->kernel;

	/* a dynamically linked busybox */
	path_fmt(p, "%s/busybox-dyn", f->dir);
	write_busybox(p, true);
	o.busybox = p;
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -EINVAL);
	assert_non_null(strstr(f->err, "is dynamically linked"));
	o.busybox = f->busybox;

	/* no command and no image config; a bad extra environment entry */
	o.argc = 0;
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -EINVAL);
	assert_non_null(strstr(f->err, "no command given"));
	o.argc = 1;
	o.env = (const char *const[]){ "1BAD=x" };
	o.n_env = 1;
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -EINVAL);
	assert_non_null(strstr(f->err, "bad environment entry '1BAD=x'"));
}

/* The build with o refused (-ENOENT) with exactly the line "kernel VER has no WHAT,
 * neither built in nor a module in MODS". */
static void expect_missing(struct fx *f, struct initramfs_opts *o, const char *what)
{
	char want[PATH_MAX + 512];

	snprintf(want, sizeof(want), "kernel " VER " has no %s, neither built in nor a module in %s",
		 what, f->mods);
	assert_int_equal(initramfs_build(o, f->out, sizeof(f->out)), -ENOENT);
	assert_string_equal(f->err, want);
}

static void expect_order(struct fx *f, struct initramfs_opts *o, const char *order)
{
	struct cpio_rd r;

	if (initramfs_build(o, f->out, sizeof(f->out)))
		fail_msg("build: %s", f->err);
	read_cpio(f->out, &r, false);
	assert_string_equal((char *)find(&r, "etc/lazyblk/modules")->data, order);
	assert_false(has(&r, "lib/modules/" VER "/unrelated.ko"));
	free_cpio(&r);
}

/*
 * A soft pre-dependency of a module the guest loads that is neither a module (by name or by
 * alias) nor built in (modules.builtin by name, modules.builtin.modinfo by alias): the
 * kernel is refused with one line naming each and who wants it, as Debian's generic kernel
 * without its crc32c modules is (its ext4 would stop with "Cannot load crc32c driver").
 */
static void test_missing_drivers(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "x" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char p[PATH_MAX], builtin[PATH_MAX], binfo[PATH_MAX], alias[PATH_MAX];
	static const char head[] = "virtio_pci_modern_dev\nvirtio_ring\nvirtio\nvirtio_pci\n"
				   "virtio_mmio\ncrcx_generic\ncrcx_intel\nvirtio_blk\n";
	static const char bi_crc32c[] = "crc32c_generic.alias=crypto-crc32c-generic\0"
					"crc32c_generic.alias=crypto-crc32c\0";
	static const char bi_decoys[] = "crc32c_generic.alias=crypto-crc32c-generic\0"
					"crc32c_generic.description=crypto-crc32c\0";
	static const char bi_sha9[] = "sha9_generic.license=GPL\0sha9_generic.alias=crypto-sha9";
	char order[512];
	const char *t;

	/* ext4 and jbd2 are modules that want crc32c (ext4 in two softdep= entries, as btrfs
	 * declares its own); crc-thing, which virtio_blk wants, is gone; nothing built in */
	path_fmt(builtin, "%s/modules.builtin", f->mods);
	path_fmt(binfo, "%s/modules.builtin.modinfo", f->mods);
	path_fmt(alias, "%s/modules.alias", f->mods);
	write_file(builtin, "", 0);
	write_module(f, &(struct fmod){ "kernel/fs/ext4/ext4.ko", "ext4", "jbd2",
					"pre: crypto-crc32c|pre: crypto-sha9 post: crypto-gone",
					NULL });
	write_module(f, &(struct fmod){ "kernel/fs/jbd2/jbd2.ko.xz", "jbd2", "",
					"pre: crypto-crc32c", NULL });
	path_fmt(p, "%s/kernel/lib/crc-thing.ko.zst", f->mods);
	assert_int_equal(unlink(p), 0);
	expect_missing(f, &o, "crc-thing driver (wanted by virtio_blk: softdep pre), "
			      "no crc32c driver (crypto-crc32c, wanted by ext4, jbd2: softdep pre), "
			      "no sha9 driver (crypto-sha9, wanted by ext4: softdep pre)");

	/* built in by name (modules.builtin): crc-thing is no longer missing */
	write_file(builtin, "kernel/lib/crc-thing.ko\n", 24);
	expect_missing(f, &o, "crc32c driver (crypto-crc32c, wanted by ext4, jbd2: softdep pre), "
			      "no sha9 driver (crypto-sha9, wanted by ext4: softdep pre)");
	/* modules.builtin.modinfo: only an entry that declares that very alias counts (a blob
	 * without its last NUL, as a truncated file would be, is read to its end) */
	write_file(binfo, bi_decoys, sizeof(bi_decoys) - 1);
	expect_missing(f, &o, "crc32c driver (crypto-crc32c, wanted by ext4, jbd2: softdep pre), "
			      "no sha9 driver (crypto-sha9, wanted by ext4: softdep pre)");
	write_file(binfo, bi_sha9, sizeof(bi_sha9) - 1);
	expect_missing(f, &o, "crc32c driver (crypto-crc32c, wanted by ext4, jbd2: softdep pre)");
	/* built in by alias (modules.builtin.modinfo, as Debian's cloud kernel has crc32c) */
	{
		char both[256];
		size_t n = sizeof(bi_crc32c) - 1;

		memcpy(both, bi_crc32c, n);
		memcpy(both + n, bi_sha9, sizeof(bi_sha9) - 1);
		write_file(binfo, both, n + sizeof(bi_sha9) - 1);
	}
	snprintf(order, sizeof(order), "%sjbd2\next4\n", head);
	expect_order(f, &o, order);

	/* a module whose name does not begin like the alias but declares it: found by reading
	 * every module before the kernel is refused (unrelated.ko read, not taken) */
	write_file(binfo, bi_sha9, sizeof(bi_sha9) - 1);
	write_module(f, &(struct fmod){ "kernel/lib/checksum-fast.ko", "checksum_fast", "", NULL,
					"crypto-crc32c" });
	snprintf(order, sizeof(order), "%schecksum_fast\njbd2\next4\n", head);
	expect_order(f, &o, order);

	/* depmod ran: modules.alias decides; every module it lists for the alias is taken,
	 * one listed but not there skipped; listed nowhere → missing */
	t = "alias crypto-crc32c crc32c_gone\nalias crypto-crc32c checksum_fast\n"
	    "alias crypto-crcx crcx_generic\n";
	write_file(alias, t, strlen(t));
	snprintf(order, sizeof(order), "virtio_pci_modern_dev\nvirtio_ring\nvirtio\nvirtio_pci\n"
		 "virtio_mmio\ncrcx_generic\nvirtio_blk\nchecksum_fast\njbd2\next4\n");
	expect_order(f, &o, order);
	t = "alias crypto-crc32c crc32c_gone\nalias crypto-crcx crcx_generic\n";
	write_file(alias, t, strlen(t));
	expect_missing(f, &o, "crc32c driver (crypto-crc32c, wanted by ext4, jbd2: softdep pre)");
}

/* A command from the image config (its parsing: tests/unit/cas/test_oci_config.c). */
static void test_image_config(void **state)
{
	struct fx *f = *state;
	static const char json[] =
		"{\"architecture\":\"amd64\",\"config\":{\"Entrypoint\":[\"/entry\",\"--flag\"],"
		"\"Cmd\":[\"serve\",\"a b\"],\"Env\":[\"PATH=/usr/bin:/bin\",\"A=x'y\",\"bad-name=1\"],"
		"\"WorkingDir\":\"/srv\",\"User\":\"app:staff\"}}";
	struct oci_config c;
	struct initramfs_opts o = base_opts(f, NULL, 0);
	char why[WHY_MAX] = "";
	struct cpio_rd r;
	const char *data;
	mode_t old_mask;
	struct stat st;

	assert_int_equal(oci_config_parse(json, strlen(json), &c, why, sizeof(why)), 0);
	o.image = &c;
	o.env = (const char *const[]){ "EXTRA=1" };
	o.n_env = 1;
	/* the image's environment is in it: the umask decides who may read it (issue 24) */
	old_mask = umask(077);
	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build: %s", f->err);
	umask(old_mask);
	assert_int_equal(stat(f->out, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	read_cpio(f->out, &r, false);
	assert_string_equal((char *)find(&r, "etc/lazyblk/cmd")->data,
			    "set -- '/entry' '--flag' 'serve' 'a b'\n");
	assert_string_equal((char *)find(&r, "etc/lazyblk/env")->data,
			    "export 'PATH=/usr/bin:/bin'\nexport 'A=x'\\''y'\nexport 'EXTRA=1'\n");
	data = (char *)find(&r, "etc/lazyblk/config")->data;
	assert_non_null(strstr(data, "LZ_WORKDIR='/srv'\n"));
	assert_non_null(strstr(data, "LZ_USER='app:staff'\n"));
	free_cpio(&r);

	/* an explicit command replaces Entrypoint + Cmd; --user/--workdir override */
	o.argv = (const char *const[]){ "/bin/sh" };
	o.argc = 1;
	o.user = "0";
	o.workdir = "/";
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	read_cpio(f->out, &r, false);
	assert_string_equal((char *)find(&r, "etc/lazyblk/cmd")->data, "set -- '/bin/sh'\n");
	assert_non_null(strstr((char *)find(&r, "etc/lazyblk/config")->data, "LZ_USER='0'\n"));
	free_cpio(&r);
	oci_config_free(&c);

	/* an empty config and no command: nothing to run */
	assert_int_equal(oci_config_parse("{}", 2, &c, why, sizeof(why)), 0);
	o.image = &c;
	o.argc = 0;
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), -EINVAL);
	assert_non_null(strstr(f->err, "image config has no Entrypoint or Cmd"));
	oci_config_free(&c);
}

/* The one recipe memo in the cache directory (there must be exactly one). */
static void recipe_memo_path(struct fx *f, char out[PATH_MAX])
{
	DIR *d = opendir(f->cache);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "recipe-", 7)) {
			path_fmt(out, "%s/%s", f->cache, e->d_name);
			n++;
		}
	closedir(d);
	assert_int_equal(n, 1);
}

/* Point the recipe memo at the cpio file name `forged` instead of the one it names. */
static void memo_forge(struct fx *f, const char *forged)
{
	char memo[PATH_MAX], buf[8192], *line, *eol;
	uint8_t *text;
	size_t n;
	int k;

	recipe_memo_path(f, memo);
	assert_int_equal(fs_read_file(memo, &text, &n), 0);
	line = strstr((char *)text, "cpio ");
	assert_non_null(line);
	eol = strchr(line, '\n');
	assert_non_null(eol);
	k = snprintf(buf, sizeof(buf), "%.*scpio %s%s", (int)(line - (char *)text), (char *)text,
		     forged, eol);
	assert_true(k > 0 && (size_t)k < sizeof(buf));
	write_file(memo, buf, (size_t)k);
	free(text);
}

/*
 * The recipe memo (vmm-glue/initramfs/memo.h): a second build with the same inputs is
 * answered from it without resolving modules; any change to what the resolution read — a
 * module file, modules.builtin, a directory of the walked tree, the kernel — is a miss; a
 * damaged memo is a miss too.
 */
static void test_recipe_memo(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "/bin/true" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char first[PATH_MAX], memo[PATH_MAX], forged[PATH_MAX], p[PATH_MAX];
	uint8_t *text;
	size_t n;

	assert_int_equal(initramfs_build(&o, first, sizeof(first)), 0);
	recipe_memo_path(f, memo);
	assert_int_equal(fs_read_file(memo, &text, &n), 0);
	assert_non_null(strstr((char *)text, "lazyblk-initramfs-recipe-1\ncpio "));
	assert_non_null(strstr((char *)text, "/virtio_blk.ko\n"));    /* a module used */
	assert_non_null(strstr((char *)text, "/modules.builtin\n"));  /* a resolution input */
	assert_non_null(strstr((char *)text, "/kernel/drivers\n"));   /* a walked directory */
	free(text);

	/* answered from the memo: point it at another (existing) file and it is believed */
	path_fmt(forged, "%s/forged.cpio", f->cache);
	write_file(forged, "x", 1);
	memo_forge(f, "forged.cpio");
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_equal(f->out, forged);

	/* a resolution input changed in place: a miss, the real answer comes back */
	path_fmt(p, "%s/modules.builtin", f->mods);
	usleep(10000);
	write_file(p, "kernel/fs/ext4/ext4.ko\n", 23);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_equal(f->out, first);

	/* a new directory in the walked tree: a miss */
	memo_forge(f, "forged.cpio");
	path_fmt(p, "%s/kernel/drivers/new", f->mods);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_equal(f->out, first);

	/* a damaged memo: a miss, not an error */
	recipe_memo_path(f, memo);
	write_file(memo, "lazyblk-initramfs-recipe-1\ncpio ../../etc/passwd\n", 50);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_equal(f->out, first);
	write_file(memo, "garbage", 7);
	assert_int_equal(initramfs_build(&o, f->out, sizeof(f->out)), 0);
	assert_string_equal(f->out, first);
}

/* ------------------------------------------------------------------ the cache directory */

struct notes {
	unsigned n;
	enum note_kind kind;
	char last[PATH_MAX + 128];
};

static void note_cb(void *arg, enum note_kind kind, const char *line)
{
	struct notes *n = arg;

	n->n++;
	n->kind = kind;
	snprintf(n->last, sizeof(n->last), "%s", line);
}

static unsigned dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static mode_t perm_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/*
 * o's cache directory is not used: with uncached_fd, the cpio is built into a file without a
 * name (0600), after one warning naming why; without, the build is refused saying why.
 */
static void expect_uncached(struct fx *f, struct initramfs_opts *o, const char *why)
{
	struct notes nt = { 0 };
	char want[64];
	struct stat st;
	struct cpio_rd r;
	int fd = -1;

	o->uncached_fd = &fd;
	o->notes = (struct note_sink){ .fn = note_cb, .arg = &nt };
	if (initramfs_build(o, f->out, sizeof(f->out)))
		fail_msg("uncached build: %s", f->err);
	assert_true(fd >= 0);
	snprintf(want, sizeof(want), "/proc/self/fd/%d", fd);
	assert_string_equal(f->out, want);
	assert_int_equal(nt.n, 1);
	assert_int_equal(nt.kind, NOTE_WARN);
	assert_non_null(strstr(nt.last, o->cache_dir));
	assert_non_null(strstr(nt.last, why));
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_nlink, 0);          /* no name anybody could open */
	assert_int_equal(st.st_mode & 07777, 0600);
	read_cpio(f->out, &r, false);
	assert_string_equal((char *)find(&r, "etc/lazyblk/env")->data, "export 'SECRET=1'\n");
	free_cpio(&r);
	close(fd);

	o->uncached_fd = NULL;
	nt.n = 0;
	assert_int_equal(initramfs_build(o, f->out, sizeof(f->out)), -EPERM);
	assert_non_null(strstr(f->err, o->cache_dir));
	assert_non_null(strstr(f->err, why));
	assert_int_equal(nt.n, 0);
}

/*
 * The cache directory is read back from (a cpio, a recipe memo naming one), so it must be
 * this user's alone (issue 24 follow-up, item 3): with HOME and XDG_CACHE_HOME unset it is
 * /var/tmp/lazyblk-initramfs-UID, which another local user could make first, then read the
 * env (`-e` secrets) of every cpio in it and replace one, or a memo, to boot their /init.
 * A directory of another user, one others may write, or a link is not used; a new one is
 * made 0700 and its files 0600.
 */
static void test_cache_dir_private(void **state)
{
	struct fx *f = *state;
	const char *argv[] = { "/bin/true" };
	struct initramfs_opts o = base_opts(f, argv, 1);
	char shared[PATH_MAX], open_dir[PATH_MAX], link[PATH_MAX], memo[PATH_MAX];
	mode_t old_mask;

	o.env = (const char *const[]){ "SECRET=1" };
	o.n_env = 1;

	/* made 0700, its files 0600, whatever the umask */
	old_mask = umask(022);
	if (initramfs_build(&o, f->out, sizeof(f->out)))
		fail_msg("build: %s", f->err);
	umask(old_mask);
	assert_int_equal(strncmp(f->out, f->cache, strlen(f->cache)), 0);
	assert_int_equal(perm_of(f->cache), 0700);
	assert_int_equal(perm_of(f->out), 0600);
	recipe_memo_path(f, memo);
	assert_int_equal(perm_of(memo), 0600);

	/* a directory another user made first: neither read nor written */
	path_fmt(shared, "%s/shared", f->dir);
	assert_int_equal(mkdir(shared, 0755), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(shared, 65534, 65534), 0);
		o.cache_dir = shared;
		expect_uncached(f, &o, "owned by another user");
		assert_int_equal(dir_entries(shared), 0);
	}
	/* one of ours that others may write */
	path_fmt(open_dir, "%s/open", f->dir);
	assert_int_equal(mkdir(open_dir, 0700), 0);
	assert_int_equal(chmod(open_dir, 0777), 0);
	o.cache_dir = open_dir;
	expect_uncached(f, &o, "writable by its group or others");
	assert_int_equal(dir_entries(open_dir), 0);
	assert_int_equal(chmod(open_dir, 0770), 0);
	expect_uncached(f, &o, "writable by its group or others");
	/* a link, even to our own cache */
	path_fmt(link, "%s/link", f->dir);
	assert_int_equal(symlink(f->cache, link), 0);
	o.cache_dir = link;
	expect_uncached(f, &o, "a symbolic link");
	/* a file where the directory should be */
	o.cache_dir = memo;
	expect_uncached(f, &o, "not a directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kernel_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_build_contents, setup, teardown),
		cmocka_unit_test_setup_teardown(test_helpers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modules_dep_and_override, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_drivers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image_config, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recipe_memo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_dir_private, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
