/* SPDX-License-Identifier: MIT */
/*
 * lazyblk run --control: the VM's requests (pause, resume, stats, snapshot DIR) as an
 * extension of serve --control's socket (blkd/transport/control.c), which keeps the rest:
 * the line rules, the clients, snapshot-disk, flush.
 */
#include "vm_control.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../blkd/transport/control.h"
#include "../common/clock.h"
#include "../common/log.h"
#include "../common/why.h"
#include "vm.h"
#include "vm_upgrade.h"

struct vm_control {
	struct vm *vm;
	struct blkd_control_ext ext;
	struct blkd_control *ctl;
};

static void vmc_stats(struct vm_control *c, int fd)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int ret = f ? vmm_stats_json(c->vm, f) : -errno;

	if (f && fclose(f) && !ret)
		ret = -EIO;
	if (ret || !len)
		blkd_control_reply(fd, "error stats: %s", strerror(ret ? -ret : EIO));
	else
		blkd_control_reply(fd, "%.*s", (int)(len - (buf[len - 1] == '\n')), buf);
	free(buf);
}

/* "DIR" or "DIR --store STORE", both absolute: 0, or -EINVAL (the reply sent). */
static int vmc_snapshot_args(int fd, const char *arg, char *dir, size_t dlen, char *store,
			     size_t slen)
{
	const char *opt = strstr(arg, " --store ");
	size_t n = opt ? (size_t)(opt - arg) : strlen(arg);

	store[0] = '\0';
	if (!n) {
		blkd_control_reply(fd, "error snapshot needs a DIR");
		return -EINVAL;
	}
	if (n >= dlen || (opt && strlen(opt + 9) >= slen)) {
		blkd_control_reply(fd, "error snapshot: path too long");
		return -EINVAL;
	}
	memcpy(dir, arg, n);
	dir[n] = '\0';
	if (opt)
		snprintf(store, slen, "%s", opt + 9);
	if (dir[0] != '/' || (opt && store[0] != '/')) {
		blkd_control_reply(fd, "error DIR and STORE must be absolute: %s", arg);
		return -EINVAL;
	}
	return 0;
}

/* The snapshot itself, the VM paused (a store's: its first step; *job the second's). */
static int vmc_snapshot_take(struct vm_control *c, const char *dir, const char *store,
			     struct vm_snapstore_job **job, char *why, size_t why_len)
{
	*job = NULL;
	if (!store[0])
		return vm_snapshot_save(c->vm, dir, why, why_len);
	return vm_snapshot_store_take(c->vm, dir, store, job, why, why_len);
}

static void vmc_snapshot(struct vm_control *c, int fd, const char *arg)
{
	char why[512] = "", dir[PATH_MAX], store[PATH_MAX], id[SHA256_HEX_LEN + 1] = "";
	struct vm_snapstore_result res = { 0 };
	struct vm_snapstore_job *job = NULL;
	struct timespec t0;
	double paused_ms;
	bool was_paused;
	int ret;

	if (vmc_snapshot_args(fd, arg, dir, sizeof(dir), store, sizeof(store)))
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = vmm_pause(c->vm);
	if (ret == -EAGAIN) {
		blkd_control_reply(fd, "error the VM is starting (try again)");
		return;
	}
	was_paused = ret == -EALREADY;
	ret = vmc_snapshot_take(c, dir, store, &job, why, sizeof(why));
	if (!was_paused)
		vmm_resume(c->vm);
	paused_ms = clock_ms_since(&t0);
	if (!ret && job)
		ret = vm_snapshot_store_finish(c->vm, job, &res, why, sizeof(why));
	if (ret) {
		log_warn("control: snapshot %s: %s", dir, *why ? why : strerror(-ret));
		blkd_control_reply(fd, "error %s: %s", dir, *why ? why : strerror(-ret));
		return;
	}
	if (store[0])
		sha256_to_hex(res.id, id);
	if (was_paused)
		log_info("control: VM snapshot written to %s%s%s", dir, id[0] ? " sha256:" : "", id);
	else
		log_info("control: VM snapshot written to %s%s%s (VM paused %.1f ms)", dir,
			 id[0] ? " sha256:" : "", id, paused_ms);
	if (store[0])
		blkd_control_reply(fd, "ok %s sha256:%s (RAM: %llu pages stored, %llu kept; "
				   "disk: %llu blocks)", dir, id,
				   (unsigned long long)res.ram.pages_new,
				   (unsigned long long)res.ram.pages_kept,
				   (unsigned long long)res.disk_blocks);
	else
		blkd_control_reply(fd, "ok %s", dir);
}

static void vmc_upgrade(struct vm_control *c, int fd, const char *binary)
{
	char why[512] = "";
	int ret;

	if (!*binary)
		binary = "/proc/self/exe";
	if (binary[0] != '/') {
		blkd_control_reply(fd, "error BINARY must be absolute: %s", binary);
		return;
	}
	ret = vm_upgrade(c->vm, binary, fd, blkd_control_listen_fd(c->ctl), why, sizeof(why));
	/* only on failure: the new process answers a success */
	log_warn("control: %s", *why ? why : strerror(-ret));
	blkd_control_reply(fd, "error %s", *why ? why : strerror(-ret));
}

static bool vmc_request(void *ctx, int fd, const char *line)
{
	struct vm_control *c = ctx;

	if (!strcmp(line, "pause")) {
		int ret = vmm_pause(c->vm);

		if (ret == -EAGAIN)
			blkd_control_reply(fd, "error the VM is starting (try again)");
		else if (ret)
			blkd_control_reply(fd, "error already paused");
		else
			blkd_control_reply(fd, "ok paused");
	} else if (!strcmp(line, "resume")) {
		if (vmm_resume(c->vm))
			blkd_control_reply(fd, "error not paused");
		else
			blkd_control_reply(fd, "ok running");
	} else if (!strcmp(line, "stats")) {
		vmc_stats(c, fd);
	} else if (!strcmp(line, "upgrade") || !strncmp(line, "upgrade ", 8)) {
		vmc_upgrade(c, fd, line[7] ? line + 8 : "");
	} else if (!strcmp(line, "snapshot") || !strncmp(line, "snapshot ", 9)) {
		vmc_snapshot(c, fd, line[8] ? line + 9 : "");
	} else {
		return false;
	}
	return true;
}

int vm_control_start(struct vm *vm, const char *path, struct vm_control **out)
{
	struct vm_control *c = calloc(1, sizeof(*c));
	int ret;

	*out = NULL;
	if (!c) {
		log_error("--control %s: %s", path, strerror(ENOMEM));
		return -ENOMEM;
	}
	c->vm = vm;
	c->ext = (struct blkd_control_ext){
		.request = vmc_request, .ctx = c, .names = "pause, resume, stats, snapshot DIR [--store STORE], "
		"upgrade [BINARY], snapshot-disk DELTA_PATH, flush or trace stop",
		.no_trace = true,
	};
	if (vm->o->resume)
		ret = blkd_control_adopt(vm->o->ndisks ? &vm->o->disks[0] : NULL, &c->ext,
					 path, vm->o->resume->listen_fd, &c->ctl);
	else
		ret = blkd_control_start(vm->o->ndisks ? &vm->o->disks[0] : NULL, &c->ext,
					 path, &c->ctl);
	if (ret) {
		free(c);
		return ret;
	}
	*out = c;
	return 0;
}

void vm_control_stop(struct vm_control *c)
{
	if (!c)
		return;
	blkd_control_stop(c->ctl);
	free(c);
}
