/* SPDX-License-Identifier: MIT */
/*
 * lazyblk run --control: the VM's requests (pause, resume, stats, snapshot DIR) as an
 * extension of serve --control's socket (blkd/transport/control.c), which keeps the rest:
 * the line rules, the clients, snapshot-disk, flush.
 */
#include "vm_control.h"

#include <errno.h>
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

static void vmc_snapshot(struct vm_control *c, int fd, const char *dir)
{
	char why[512] = "";
	struct timespec t0;
	bool was_paused;
	int ret;

	if (!*dir) {
		blkd_control_reply(fd, "error snapshot needs a DIR");
		return;
	}
	if (dir[0] != '/') {
		blkd_control_reply(fd, "error DIR must be absolute: %s", dir);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = vmm_pause(c->vm);
	if (ret == -EAGAIN) {
		blkd_control_reply(fd, "error the VM is starting (try again)");
		return;
	}
	was_paused = ret == -EALREADY;
	ret = vm_snapshot_save(c->vm, dir, why, sizeof(why));
	if (!was_paused)
		vmm_resume(c->vm);
	if (ret) {
		log_warn("control: snapshot %s: %s", dir, *why ? why : strerror(-ret));
		blkd_control_reply(fd, "error %s: %s", dir, *why ? why : strerror(-ret));
		return;
	}
	if (was_paused)
		log_info("control: VM snapshot written to %s", dir);
	else
		log_info("control: VM snapshot written to %s (VM paused %.1f ms)", dir,
			 clock_ms_since(&t0));
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
		.request = vmc_request, .ctx = c, .names = "pause, resume, stats, snapshot DIR, "
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
