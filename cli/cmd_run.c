/* SPDX-License-Identifier: MIT */
/*
 * lazyblk run: boot a micro-VM in this process (the built-in KVM VMM, vmm-glue/) with the
 * lazy image as its first virtio-blk disk, the serial console on stdin/stdout, and exit
 * with the status the guest reports.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../blkd/overlay/overlay.h"
#include "../blkd/disk/disk.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../layout/layout.h"
#include "../vmm-glue/cpu.h"
#include "../vmm-glue/initramfs.h"
#include "../vmm-glue/vm_snapshot.h"
#include "../vmm-glue/vmm.h"
#include "cli.h"
#include "confine_opts.h"
#include "run_restore.h"

#define RUN_MEM_MIN_MIB 4u
#define RUN_MEM_MAX_MIB (1u << 20)
#define RUN_MEM_DEFAULT_MIB 256u

static const char run_usage[] =
	"usage: lazyblk run IMAGE.layout|REF --store DIR [--remote URL] [--overlay FILE]\n"
	"            --kernel FILE [--initrd FILE | --modules DIR] [--append ARGS]\n"
	"            [--cpus N] [--mem SIZE] [--disk FILE[,ro]]... [--hugepages]\n"
	"            [--populate] [--boot linux64|pvh] [--cache-dir DIR]\n"
	"            [--manifest IMAGE.manifest] [--stats-json FILE] [--trace-record FILE]\n"
	"            [--prefetch TRACE] [--prefetch-all] [--no-check]\n"
	"            [--user USER[:GROUP]] [--seccomp] [--control SOCK] [-- CMD ...]\n"
	"       lazyblk run --kernel FILE [--disk FILE[,ro]]... [options]   (no image)\n"
	"       lazyblk run [IMAGE.layout --store DIR] [--disk FILE]... --restore SNAPDIR\n"
	"            [--overlay NEW] [--kernel FILE] [options]   (resume a VM snapshot)\n"
	"       lazyblk run --restore SNAPDIR|REF --store DIR [--overlay NEW] [--ram-cache DIR]\n"
	"            [--trace-record FILE | --prefetch FILE] [options]   (one in a store)\n"
	"\n"
	"Boot a micro-VM in this process (KVM): the image is its root disk /dev/vda over\n"
	"virtio-blk, read lazily from the store (and the remote) and written to the overlay;\n"
	"each --disk adds a raw disk file (/dev/vdb, ...). The serial console (ttyS0) is this\n"
	"process's stdin and stdout. lazyblk exits with the status the guest writes to port\n"
	"0x441 (0 if it powers off or resets without one), or 1 on an error.\n"
	"Without IMAGE.layout the VM gets only the --disk files (for test guests).\n"
	"\n"
	"options:\n"
	"  -s, --store DIR         the chunk store holding the image's chunks\n"
	"      --overlay FILE      copy-on-write overlay for the guest's writes (created if\n"
	"                          missing); without it the image disk is read-only\n"
	"  -k, --kernel FILE       a bzImage (its payload is decompressed here and the\n"
	"                          vmlinux cached; gzip, xz, lz4, zstd) or a vmlinux ELF\n"
	"      --initrd FILE       initramfs; with IMAGE.layout and no --initrd one is built\n"
	"                          (busybox + the kernel's virtio modules; see lazyblk\n"
	"                          initramfs) to mount /dev/vda and run CMD\n"
	"      --modules DIR       the kernel's modules directory for the built initramfs\n"
	"                          (default: ../lib/modules/VERSION next to the kernel, or\n"
	"                          /lib/modules/VERSION); 'none' if the drivers are built in\n"
	"      --append ARGS       kernel command line (virtio_mmio.device= entries for the\n"
	"                          disks are added)\n"
	"      --cpus N            vCPUs, 1..64 (default 1); one virtio queue per vCPU\n"
	"      --mem SIZE          guest RAM, 4M to 1T in whole MiB (default 256M); a number\n"
	"                          without K, M, G or T counts MiB (--mem 512 is 512M)\n"
	"      --disk FILE[,ro]    an extra raw disk (repeatable; ,ro: read-only)\n"
	"      --hugepages         back RAM with 2 MiB huge pages (reserved beforehand in\n"
	"                          /proc/sys/vm/nr_hugepages)\n"
	"      --populate          fault all of RAM in at start (MAP_POPULATE)\n"
	"      --boot linux64|pvh  entry: the 64-bit Linux boot protocol (default), or PVH\n"
	"                          (32-bit, for ELF kernels with a XEN_ELFNOTE_PHYS32_ENTRY)\n"
	"      --cache-dir DIR     where decompressed kernels are cached (default\n"
	"                          $XDG_CACHE_HOME/lazyblk/vmlinux or ~/.cache/lazyblk/vmlinux;\n"
	"                          only if yours and nobody else may write it: made 0700)\n"
	"      --manifest FILE     the image's manifest (lazyblk import): without CMD, the\n"
	"                          built initramfs runs its Entrypoint + Cmd with its Env,\n"
	"                          WorkingDir and User; traces name files through it\n"
	"                          (default for traces: IMAGE.manifest beside IMAGE.layout)\n"
	"      --stats-json FILE   write the image disk's statistics (as lazyblk serve's) to\n"
	"                          FILE at exit\n"
	"      --no-check          boot without checking that the image's first chunks are in\n"
	"                          the store (with --remote: that the remote answers for one,\n"
	"                          and that an oci:// tag exists)\n"
	"      --restore SNAPDIR   resume the VM snapshot in SNAPDIR instead of booting: its\n"
	"                          RAM is mapped copy-on-write from SNAPDIR/ram, every vCPU\n"
	"                          and device goes on where it was; give the same image and\n"
	"                          disks, and --overlay NEW (a new file) for its disk delta;\n"
	"                          --kernel, --mem, --cpus, if given, must be the snapshot's\n"
	"                          (docs/run.md, \"Snapshots and restore\"); a snapshot in a\n"
	"                          store (SNAPDIR/snapshot.json, lazyblk snapshot --vm ...\n"
	"                          --store) or by reference (oci://HOST/REPO:TAG, http(s)://\n"
	"                          .../images/NAME) names its image: its RAM is brought in\n"
	"                          from --store (and the remote) as the guest touches it;\n"
	"                          --trace-record and --prefetch are then of its RAM\n"
	"                          (docs/run.md, \"Snapshots in a store\")\n"
	"      --ram-cache DIR     a restore from a store: where the RAM shared by the\n"
	"                          restores of one snapshot lives (a tmpfs; default\n"
	"                          /dev/shm/lazyblk-UID)\n"
	CLI_CONFINE_HELP("once the VM is set up, before the first vCPU runs,")
	"      --control SOCK      answer requests on the unix socket SOCK while the VM runs:\n"
	"                          pause, resume, stats (JSON: vCPU exits, disk statistics),\n"
	"                          snapshot DIR, upgrade [BINARY] (live upgrade: the VM goes\n"
	"                          on in BINARY, same process), snapshot-disk DELTA_PATH,\n"
	"                          flush (one line each; see docs/run.md, \"Controlling a\n"
	"                          running VM\")\n"
	"  -- CMD ...              the command the built initramfs runs in the image\n"
	"%s"
	"%s"
	"  -h, --help              this text\n"
	"\n"
	"Guest ports: 0x440 boot timer (logged with the milliseconds since start), 0x441 exit\n"
	"status, 0x64 <- 0xfe reset (ends the VM: reboot=k).\n";

struct run_args {
	struct disk_spec ds;        /* the image disk (disk_open) */
	struct cli_remote rem;
	struct cli_image img;       /* IMAGE by reference: fetched */
	struct cli_trace tr;
	struct vmm_opts vo;
	const char *layout;
	const char *disk_arg[VMM_MAX_DISKS];
	unsigned ndisk_arg;
	char **cmd;
	int cmd_n;
	const char *manifest;   /* the image's manifest: its OCI config for the initramfs */
	const char *modules;    /* the kernel's modules directory for the initramfs */
	const char *stats_json; /* the image disk's statistics at exit */
	struct cli_confine cf;  /* --user, --seccomp */
	const char *restore;    /* --restore SNAPDIR|REF */
	struct run_restore rr;
	struct disk *disks;         /* open while the VM runs (run_lazy_abandon flushes) */
	unsigned ndisks;
	bool mem_set, cpus_set;
	const char *upgrade_arg;     /* --upgrade-fds (hidden): a live upgrade's new process */
	struct vmm_handover resume;
	char upgrade_fds[64];
};

/*
 * vmm_opts.before_start: everything is open and the vCPUs are made: become --user (who must
 * be able to write the store with --remote, and where the files of the exit go), then the
 * seccomp filter with KVM's ioctls. 0, or 1 (said why).
 */
static int run_confine(void *arg)
{
	struct run_args *a = arg;
	char d1[PATH_MAX], d2[PATH_MAX];
	const struct cli_confine_dir dirs[] = {
		{ a->rem.url ? a->ds.tiers.store_dir : NULL, CLI_CONFINE_STORE_DEPTH },
		{ a->stats_json ? cli_confine_parent(a->stats_json, d1, sizeof(d1)) : NULL, 0 },
		{ a->tr.record ? cli_confine_parent(a->tr.record, d2, sizeof(d2)) : NULL, 0 },
	};

	if (cli_confine_drop(&a->cf, dirs, 3))
		return 1;
	return cli_confine_filter(&a->cf, CONFINE_KVM);
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* Opens the disks (disk_open): the image (when there is one), then every --disk. */
static int run_open_disks(struct run_args *a, struct disk *disks, unsigned *n)
{
	char why[PATH_MAX + 256];
	int ret;

	*n = 0;
	if (a->layout) {
		a->ds.layout_path = a->layout;
		a->ds.notes = CLI_NOTES;
		if (disk_open(&a->ds, &disks[0], why, sizeof(why)))
			return cli_fail(-EIO, why);
		(*n)++;
	}
	for (unsigned i = 0; i < a->ndisk_arg; i++) {
		char path[PATH_MAX];
		const char *s = a->disk_arg[i];
		size_t len = strlen(s);
		bool ro = len > 3 && !strcmp(s + len - 3, ",ro");
		struct disk_spec raw = { .raw_path = path, .read_only = ro };

		snprintf(path, sizeof(path), "%.*s", (int)(ro ? len - 3 : len), s);
		ret = disk_open(&raw, &disks[*n], why, sizeof(why));
		if (ret) {
			log_error("--disk %s: %s", path, strerror(-ret));
			return ret;
		}
		(*n)++;
	}
	return 0;
}

/*
 * After the VM: the --disk files closed, then the image disk flushed, its trace written, its
 * statistics (--stats-json) and closed. ret: the run's result so far; the first failure.
 */
static int run_close_disks(struct run_args *a, struct disk *disks, unsigned n, int ret)
{
	unsigned first = a->layout && n ? 1 : 0;  /* disks[0] is the image */
	int f;

	for (unsigned i = first; i < n; i++)
		disk_close(&disks[i]);
	if (!first)
		return ret;
	f = disk_flush(&disks[0]);
	if (f && !ret) {
		log_error("flush: %s", strerror(-f));
		ret = f;
	}
	if (cli_trace_finish(&a->tr, &disks[0]) && !ret)
		ret = -EIO;
	if (a->stats_json && cli_write_stats_json(&disks[0], a->stats_json) && !ret)
		ret = -EIO;
	disk_close(&disks[0]);
	return ret;
}

/*
 * The initramfs for an image without --initrd: built (or taken from the cache) by
 * vmm-glue/initramfs, running CMD (or the image's entrypoint) from /dev/vda.
 */
static int run_initramfs(struct run_args *a, char *path, size_t len, int *uncached_fd)
{
	char err[PATH_MAX + 128] = "";
	struct initramfs_opts io = {
		.kernel = a->vo.kernel,
		.modules_dir = a->modules,
		.argv = (const char *const *)a->cmd,
		.argc = (size_t)a->cmd_n,
		.uncached_fd = uncached_fd,
		.notes = CLI_NOTES,
		.err = err,
		.err_len = sizeof(err),
	};
	struct oci_config img = { 0 };
	bool found = false;
	int ret;

	if (a->manifest) {
		ret = cli_image_config_load(a->manifest, &img, &found);
		if (ret)
			return ret; /* it said why */
		if (found)
			io.image = &img;
	}
	ret = initramfs_build(&io, path, len);
	if (ret)
		log_error("initramfs: %s", err[0] ? err : strerror(-ret));
	else
		log_info("initramfs %s (ready at %.1f ms)", path, clock_ms_since(&a->vo.t0));
	oci_config_free(&img);
	return ret;
}

/* --upgrade-fds STATE,RAM,LISTEN,CLIENT: the fds a live upgrade handed over. */
static int run_upgrade_fds(struct run_args *a, const char *arg)
{
	struct vmm_handover *h = &a->resume;
	char end;

	if (sscanf(arg, "%d,%d,%d,%d%c", &h->state_fd, &h->ram_fd, &h->listen_fd, &h->client_fd,
		   &end) != 4 || h->state_fd < 0 || h->ram_fd < 0 || h->listen_fd < 0 ||
	    h->client_fd < 0)
		return cli_usage_error("bad --upgrade-fds '%s'", arg);
	a->vo.resume = h;
	return 0;
}

/* /proc/self/cmdline (its size is 0 to stat: read to the end). */
static int run_cmdline(uint8_t **out, size_t *len)
{
	FILE *f = fopen("/proc/self/cmdline", "re");
	uint8_t *b = f ? malloc(1u << 20) : NULL;

	*len = b ? fread(b, 1, 1u << 20, f) : 0;
	if (f)
		fclose(f);
	if (!*len || *len == 1u << 20) {
		free(b);
		return -EIO;
	}
	*out = b;
	return 0;
}

/*
 * vmm_opts.upgrade_exec: this process's command line (/proc/self/cmdline) with
 * --upgrade-fds S,R,L,C after "run" (a previous one dropped), executed as binary.
 * Returns only when the exec failed.
 */
static int run_upgrade_exec(void *arg, const char *binary, const struct vmm_handover *h,
			    char *why, size_t why_len)
{
	struct run_args *a = arg;
	bool skip = false, placed = false, guest = false;
	uint8_t *buf = NULL;
	char **argv;
	size_t len, n = 0, cnt = 0;
	int ret = run_cmdline(&buf, &len);

	if (ret)
		return why_set(why, why_len, ret, "upgrade: /proc/self/cmdline: %s", strerror(-ret));
	for (size_t i = 0; i < len; i++)
		cnt += !buf[i];
	argv = calloc(cnt + 3, sizeof(*argv));
	if (!argv) {
		free(buf);
		return why_set(why, why_len, -ENOMEM, "upgrade: out of memory");
	}
	snprintf(a->upgrade_fds, sizeof(a->upgrade_fds), "%d,%d,%d,%d", h->state_fd, h->ram_fd,
		 h->listen_fd, h->client_fd);
	for (size_t i = 0; i < len; i += strlen((char *)buf + i) + 1) {
		char *w = (char *)buf + i;

		if (skip) {
			skip = false;
			continue;
		}
		if (!guest && !strcmp(w, "--upgrade-fds")) {
			skip = true;
			continue;
		}
		guest |= placed && !strcmp(w, "--");
		argv[n++] = w;
		if (!placed && i && !strcmp(w, "run")) {
			argv[n++] = "--upgrade-fds";
			argv[n++] = a->upgrade_fds;
			placed = true;
		}
	}
	execv(binary, argv);
	ret = -errno;
	free(argv);
	free(buf);
	return why_set(why, why_len, ret, "upgrade: exec %s: %s", binary, strerror(-ret));
}

/*
 * A page of the lazily restored RAM could not be had: the VM stopped, a thread may stay
 * blocked on that page for good. Say why, flush the image's overlay and leave the rest
 * to the process's end (vmm.h).
 */
static int run_abandon(struct run_args *a, struct disk *disks, unsigned n, const char *why)
{
	log_error("%s", why);
	if (a->layout && n && disk_flush(&disks[0]))
		log_error("flush: the overlay's last writes may not be durable");
	return 1;
}

/* vmm_opts.lazy_abandon: as run_abandon, then the end of the process, from lazyram's thread. */
static void run_lazy_abandon(void *arg, const char *why)
{
	struct run_args *a = arg;

	run_abandon(a, a->disks, a->ndisks, why);
	fflush(NULL);
	_exit(1);
}

static int run_vm(struct run_args *a)
{
	struct disk disks[VMM_MAX_DISKS];
	char initrd[PATH_MAX];
	unsigned n = 0;
	int ret, status = 0, initrd_fd = -1;

	/* a restore refused (its guest never let out) leaves no overlay: the one it made goes */
	bool ov_new = a->restore && a->ds.overlay_path && access(a->ds.overlay_path, F_OK);

	signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the VM's disk writes */
	if (a->vo.resume) {
		/* the processes before this exec forked KVM reapers (kvm.h): no zombies */
		signal(SIGCHLD, SIG_IGN);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	if (a->restore && run_restore_open(&a->rr, &a->rem, a->ds.tiers.store_dir, a->layout,
					   a->ds.layout_fetched, a->ds.overlay_path, &a->tr)) {
		run_restore_close(&a->rr);
		if (ov_new)
			overlay_remove(a->ds.overlay_path);
		return 1;
	}
	run_restore_to_vmm(&a->rr, &a->vo);
	if (a->layout && !a->vo.initrd && !a->restore && !a->vo.resume) {
		if (run_initramfs(a, initrd, sizeof(initrd), &initrd_fd))
			return 1;
		a->vo.initrd = initrd;
	}
	ret = run_open_disks(a, disks, &n);
	if (!ret) {
		char why[PATH_MAX + 256];

		a->vo.disks = disks;
		a->vo.ndisks = n;
		a->disks = disks;
		a->ndisks = n;
		a->vo.lazy_abandon = run_lazy_abandon;
		a->vo.lazy_abandon_arg = a;
		a->vo.notes = CLI_NOTES;
		if (a->cf.drop || a->cf.seccomp) {
			a->vo.before_start = run_confine;
			a->vo.before_start_arg = a;
		} else if (a->vo.control && !a->tr.record) {
			a->vo.upgrade_exec = run_upgrade_exec;   /* the new one sets all up again */
			a->vo.upgrade_arg = a;
		}
		ret = vmm_run(&a->vo, &status, why, sizeof(why));
		if (ret == -ENOTRECOVERABLE)
			return run_abandon(a, disks, n, why);
		ret = cli_fail(ret, why);
	}
	if (initrd_fd >= 0)
		close(initrd_fd); /* an initramfs built without a cache */
	ret = run_close_disks(a, disks, n, ret);
	if (ret && ov_new && !vm_snapshot_ram_ok(a->vo.restore))
		overlay_remove(a->ds.overlay_path);
	run_restore_close(&a->rr);
	return ret ? 1 : status;
}

/*
 * The options taken together, after parsing: 0, or EXIT_USAGE with the error said; an image
 * by reference is fetched here (1: it failed, said why).
 */
static int run_check(struct run_args *a, unsigned mib)
{
	if (a->upgrade_arg && run_upgrade_fds(a, a->upgrade_arg))
		return EXIT_USAGE;
	if (!a->vo.kernel && !a->restore)
		return cli_usage_error("missing --kernel FILE (see lazyblk run --help)");
	if (a->restore && (a->vo.initrd || a->vo.append || a->cmd_n || a->vo.hugepages ||
			   a->vo.populate || a->modules))
		return cli_usage_error("--restore resumes the VM as it was: no --initrd, "
				       "--append, --modules, --hugepages, --populate or -- CMD");
	if (a->vo.resume && (!a->vo.control || a->restore))
		return cli_usage_error("--upgrade-fds is lazyblk's own (a live upgrade of a run "
				       "with --control)");
	if (a->layout && !a->ds.tiers.store_dir)
		return cli_usage_error("missing --store DIR");
	a->rr.arg = a->restore;
	if (a->restore && run_restore_resolve(&a->rr, a->ds.tiers.store_dir, &a->rem, &a->layout))
		return 1;
	if (a->layout && !a->rr.in_store &&
	    cli_image_resolve(a->layout, a->ds.tiers.store_dir, &a->rem, &a->img, &a->layout))
		return 1;
	if (a->rr.ram_cache && !a->rr.in_store)
		return cli_usage_error("--ram-cache is for a restore of a snapshot in a store");
	a->ds.layout_fetched = a->img.f != NULL || a->rr.in_store;
	if (!a->layout && !a->rr.in_store &&
	    (a->ds.tiers.store_dir || a->ds.overlay_path || a->rem.url ||
	     a->stats_json || a->manifest || a->modules || a->tr.record ||
	     a->tr.prefetch || a->tr.prefetch_all))
		return cli_usage_error("--store, --overlay, --remote, --manifest, --modules, "
				       "--stats-json, --trace-record and --prefetch need "
				       "IMAGE.layout");
	if (!a->layout && a->cmd_n)
		return cli_usage_error("-- CMD needs IMAGE.layout (the command runs in the image)");
	if (a->layout && a->vo.initrd && a->cmd_n)
		return cli_usage_error("-- CMD needs the built initramfs: drop --initrd");
	if (a->vo.initrd && a->modules)
		return cli_usage_error("--modules is for the built initramfs: drop --initrd");
	if (cli_remote_check(&a->rem))
		return EXIT_USAGE;
	if (a->vo.hugepages && mib % 2)
		return cli_usage_error("--hugepages needs --mem in whole 2 MiB pages");
	return 0;
}

/* Everything after "--" is the guest's command, never options of ours: where it starts. */
static int run_split_cmd(struct run_args *a, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--")) {
			a->cmd = argv + i + 1;
			a->cmd_n = argc - i - 1;
			return i;
		}
	}
	return argc;
}

enum { O_OVERLAY = 256, O_INITRD, O_APPEND, O_CPUS, O_MEM, O_DISK, O_HUGE, O_POP,
       O_BOOT, O_CACHE, O_MANIFEST, O_JSON, O_MODULES, O_NO_CHECK, O_USER, O_SECCOMP,
       O_CONTROL, O_RESTORE, O_UPGRADE_FDS, O_RAM_CACHE };
static const struct option run_options[] = {
	{ "store", required_argument, NULL, 's' },
	{ "overlay", required_argument, NULL, O_OVERLAY },
	{ "kernel", required_argument, NULL, 'k' },
	{ "initrd", required_argument, NULL, O_INITRD },
	{ "append", required_argument, NULL, O_APPEND },
	{ "cpus", required_argument, NULL, O_CPUS },
	{ "mem", required_argument, NULL, O_MEM },
	{ "disk", required_argument, NULL, O_DISK },
	{ "hugepages", no_argument, NULL, O_HUGE },
	{ "populate", no_argument, NULL, O_POP },
	{ "boot", required_argument, NULL, O_BOOT },
	{ "cache-dir", required_argument, NULL, O_CACHE },
	{ "manifest", required_argument, NULL, O_MANIFEST },
	{ "modules", required_argument, NULL, O_MODULES },
	{ "stats-json", required_argument, NULL, O_JSON },
	{ "no-check", no_argument, NULL, O_NO_CHECK },
	{ "user", required_argument, NULL, O_USER },
	{ "seccomp", no_argument, NULL, O_SECCOMP },
	{ "control", required_argument, NULL, O_CONTROL },
	{ "restore", required_argument, NULL, O_RESTORE },
	{ "ram-cache", required_argument, NULL, O_RAM_CACHE },
	{ "upgrade-fds", required_argument, NULL, O_UPGRADE_FDS }, /* hidden: vm_upgrade.h */
	CLI_REMOTE_OPTIONS,
	CLI_TRACE_OPTIONS,
	CLI_LOG_OPTIONS,
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* --cpus, --mem, --disk, --boot (c) with its value arg into a: 0, or EXIT_USAGE (said). */
static int run_value(struct run_args *a, int c, const char *arg, unsigned *mib)
{
	uint64_t mem;

	switch (c) {
	case O_CPUS:
		if (parse_uint(arg, 1, CPU_MAX, &a->vo.ncpus))
			return cli_usage_error("bad --cpus '%s' (want 1..%u)", arg, CPU_MAX);
		a->cpus_set = true;
		return 0;
	case O_MEM:
		if (cli_parse_size("--mem", arg, 1u << 20, (uint64_t)RUN_MEM_MIN_MIB << 20,
				   (uint64_t)RUN_MEM_MAX_MIB << 20, &mem))
			return EXIT_USAGE;
		if (mem & ((1u << 20) - 1))
			return cli_usage_error("--mem: '%s' is not a whole number of MiB", arg);
		*mib = (unsigned)(mem >> 20);
		a->mem_set = true;
		return 0;
	case O_DISK:
		if (a->ndisk_arg >= VMM_MAX_DISKS - 1)
			return cli_usage_error("too many --disk (at most %u)", VMM_MAX_DISKS - 1);
		if (!arg[0] || !strcmp(arg, ",ro"))
			return cli_usage_error("bad --disk '%s' (want FILE[,ro])", arg);
		a->disk_arg[a->ndisk_arg++] = arg;
		return 0;
	default: /* O_BOOT */
		if (!strcmp(arg, "linux64"))
			a->vo.boot = BOOT_LINUX64;
		else if (!strcmp(arg, "pvh"))
			a->vo.boot = BOOT_PVH;
		else
			return cli_usage_error("bad --boot '%s' (want linux64 or pvh)", arg);
		return 0;
	}
}

int cmd_run(int argc, char **argv)
{
	struct run_args a = { .ds.check = true, .vo = { .ncpus = 1, .boot = BOOT_LINUX64,
				.in_fd = STDIN_FILENO, .out_fd = STDOUT_FILENO } };
	unsigned mib = RUN_MEM_DEFAULT_MIB;
	int c, r, nopt;

	clock_gettime(CLOCK_MONOTONIC, &a.vo.t0);
	nopt = run_split_cmd(&a, argc, argv);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(nopt, argv, ":s:k:hvqp", run_options, NULL)) != -1) {
		switch (c) {
		case 's': a.ds.tiers.store_dir = optarg; break;
		case O_OVERLAY: a.ds.overlay_path = optarg; break;
		case 'k': a.vo.kernel = optarg; break;
		case O_INITRD: a.vo.initrd = optarg; break;
		case O_APPEND: a.vo.append = optarg; break;
		case O_CPUS:
		case O_MEM:
		case O_DISK:
		case O_BOOT:
			if (run_value(&a, c, optarg, &mib))
				return EXIT_USAGE;
			break;
		case O_HUGE: a.vo.hugepages = true; break;
		case O_POP: a.vo.populate = true; break;
		case O_CACHE: a.vo.cache_dir = optarg; break;
		case O_MANIFEST: a.manifest = optarg; break;
		case O_MODULES: a.modules = optarg; break;
		case O_JSON: a.stats_json = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case O_NO_CHECK: a.ds.check = false; break;
		case O_USER:
			if (cli_confine_user(&a.cf, optarg))
				return EXIT_USAGE;
			break;
		case O_SECCOMP: a.cf.seccomp = true; break;
		case O_CONTROL: a.vo.control = optarg; break;
		case O_RESTORE: a.restore = optarg; break;
		case O_RAM_CACHE: a.rr.ram_cache = optarg; break;
		case O_UPGRADE_FDS: a.upgrade_arg = optarg; break;
		case 'h': printf(run_usage, cli_remote_help, cli_trace_help); return 0;
		default:
			if (cli_serving_option("run", argv, &a.tr, &a.rem, c, optarg) <= 0)
				return EXIT_USAGE;
		}
	}
	if (optind < nopt)
		a.layout = argv[optind];
	if (optind + 1 < nopt)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if ((r = run_check(&a, mib)))
		return r;
	/* with --restore and no --mem or --cpus: the snapshot's */
	a.vo.mem = a.restore && !a.mem_set ? 0 : (uint64_t)mib << 20;
	a.vo.ncpus = a.restore && !a.cpus_set ? 0 : a.vo.ncpus;
	cli_remote_to_source(&a.rem, &a.ds.tiers);
	a.tr.manifest = a.manifest;
	/* a snapshot in a store: the traces are of its RAM (lazyram), not of its disk */
	if (a.layout && !a.rr.in_store && cli_trace_to_spec(&a.tr, a.layout, &a.ds))
		return EXIT_USAGE;
	r = run_vm(&a);
	cli_trace_free(&a.tr);
	cli_image_free(&a.img);
	return r;
}
