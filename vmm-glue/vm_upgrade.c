/* SPDX-License-Identifier: MIT */
#include "vm_upgrade.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../blkd/disk/disk.h"
#include "../blkd/transport/control.h"
#include "../common/clock.h"
#include "../common/fsutil.h"
#include "../common/why.h"
#include "vm.h"
#include "vm_snapshot.h"
#include "vm_state.h"

#define VMUP_MAGIC "LZBKVMUP"
#define VMUP_VERSION 1u
#define VMUP_STATE_MAX (64u << 20)

struct vmup_header {
	char magic[8];          /* "LZBKVMUP" */
	uint32_t version;       /* 1 */
	uint32_t ncpus, ndisks, reserved;
	uint64_t mem_size;
	int64_t t0_sec, t0_nsec;
	uint64_t state_len;     /* bytes of records after the header */
};

static int fd_cloexec(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0)
		return -errno;
	fl = on ? fl | FD_CLOEXEC : fl & ~FD_CLOEXEC;
	return fcntl(fd, F_SETFD, fl) < 0 ? -errno : 0;
}

/* Refusals before anything is touched. */
static int up_check(struct vm *v, const char *binary, char *why, size_t why_len)
{
	struct stat st;

	if (!v->o->upgrade_exec || !v->ctl)
		return why_set(why, why_len, -ENOTSUP, "upgrade: not with --user or --seccomp "
			       "(the new process could not set the VM up again)");
	if (v->vm.ram.fd < 0)
		return why_set(why, why_len, -ENOTSUP, "upgrade: a restored VM's RAM is a private "
			       "mapping of its snapshot's ram file and cannot be handed over");
	if (stat(binary, &st) < 0)
		return why_set(why, why_len, -errno, "upgrade: %s: %s", binary, strerror(errno));
	if (!S_ISREG(st.st_mode) || access(binary, X_OK) < 0)
		return why_set(why, why_len, -EACCES, "upgrade: %s: not an executable file",
			       binary);
	return 0;
}

/* The header and the records of the paused VM into a new memfd, left open across exec. */
static int up_state(struct vm *v, const struct timespec *t0, int *out, char *why,
		    size_t why_len)
{
	struct vmup_header hdr = { .version = VMUP_VERSION, .ncpus = v->ncpus,
				   .ndisks = v->ndev, .mem_size = v->vm.ram.size,
				   .t0_sec = t0->tv_sec, .t0_nsec = t0->tv_nsec };
	struct vm_state_buf b = { 0 };
	struct vm_parts p;
	int fd, ret;

	memcpy(hdr.magic, VMUP_MAGIC, 8);
	vmm_parts(v, &p);
	ret = vm_snapshot_state_save(&p, &b, why, why_len);
	if (ret) {
		free(b.p);
		return ret;
	}
	hdr.state_len = b.len;
	fd = memfd_create("lazyblk-upgrade-state", 0);
	if (fd < 0)
		ret = -errno;
	else
		ret = fs_write_full(fd, &hdr, sizeof(hdr));
	if (!ret)
		ret = fs_write_full(fd, b.p, b.len);
	free(b.p);
	if (ret) {
		if (fd >= 0)
			close(fd);
		return why_set(why, why_len, ret, "upgrade: state memfd: %s", strerror(-ret));
	}
	*out = fd;
	return 0;
}

/* Flush every disk (the overlay's writes and map on their files for the new process). */
static int up_flush(struct vm *v, char *why, size_t why_len)
{
	for (unsigned i = 0; i < v->o->ndisks; i++) {
		int ret = disk_flush(&v->o->disks[i]);

		if (ret)
			return why_set(why, why_len, ret, "upgrade: disk %u: flush: %s", i,
				       strerror(-ret));
	}
	return 0;
}

int vm_upgrade(struct vm *v, const char *binary, int client_fd, int listen_fd, char *why,
	       size_t why_len)
{
	struct vmm_handover h = { .state_fd = -1, .ram_fd = v->vm.ram.fd, .listen_fd = listen_fd,
				  .client_fd = client_fd };
	struct timespec t0;
	int ret = up_check(v, binary, why, why_len);

	if (ret)
		return ret;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = vmm_pause(v);
	if (ret == -EAGAIN)
		return why_set(why, why_len, ret, "the VM is starting (try again)");
	if (ret)
		return why_set(why, why_len, ret, "upgrade: the VM is paused (resume it first)");
	ret = up_state(v, &t0, &h.state_fd, why, why_len);
	if (!ret)
		ret = up_flush(v, why, why_len);
	if (!ret && (fd_cloexec(h.ram_fd, false) || fd_cloexec(h.listen_fd, false) ||
		     fd_cloexec(client_fd, false)))
		ret = why_set(why, why_len, -errno, "upgrade: F_SETFD: %s", strerror(errno));
	if (!ret)
		ret = v->o->upgrade_exec(v->o->upgrade_arg, binary, &h, why, why_len);
	/* still here: the exec failed; this process goes on with the VM */
	fd_cloexec(h.ram_fd, true);
	fd_cloexec(h.listen_fd, true);
	fd_cloexec(client_fd, true);
	if (h.state_fd >= 0)
		close(h.state_fd);
	vmm_resume(v);
	return ret ? ret : -EIO;
}

int vm_upgrade_open(const struct vmm_handover *h, struct vm_upgrade_in *in, char *why,
		    size_t why_len)
{
	struct vmup_header hdr;
	int ret;

	memset(in, 0, sizeof(*in));
	ret = fs_pread_full(h->state_fd, &hdr, sizeof(hdr), 0);
	if (!ret && (memcmp(hdr.magic, VMUP_MAGIC, 8) || hdr.version != VMUP_VERSION ||
		     hdr.state_len > VMUP_STATE_MAX || !hdr.ncpus || hdr.ncpus > CPU_MAX ||
		     hdr.t0_nsec < 0 || hdr.t0_nsec >= 1000000000))
		ret = -EINVAL;
	if (!ret) {
		in->state = malloc(hdr.state_len ? hdr.state_len : 1);
		ret = in->state ? fs_pread_full(h->state_fd, in->state, hdr.state_len,
						sizeof(hdr)) : -ENOMEM;
	}
	close(h->state_fd);
	if (ret) {
		free(in->state);
		in->state = NULL;
		return why_set(why, why_len, ret, "upgrade: the hand-over state: %s",
			       ret == -EINVAL ? "not a lazyblk VM upgrade (version?)" :
			       strerror(-ret));
	}
	in->mem_size = hdr.mem_size;
	in->ncpus = hdr.ncpus;
	in->ndisks = hdr.ndisks;
	in->t0 = (struct timespec){ .tv_sec = hdr.t0_sec, .tv_nsec = hdr.t0_nsec };
	in->state_len = hdr.state_len;
	return 0;
}

void vm_upgrade_done(const struct vmm_handover *h, struct vm_upgrade_in *in, int ret,
		     const char *why, const struct note_sink *notes)
{
	double ms = clock_ms_since(&in->t0);

	if (h->client_fd >= 0) {
		if (ret)
			blkd_control_reply(h->client_fd, "error %s", *why ? why : strerror(-ret));
		else
			blkd_control_reply(h->client_fd, "ok upgraded: paused %.1f ms", ms);
		close(h->client_fd);
	}
	if (!ret)
		note_emit(notes, NOTE_NOTICE, "upgrade: paused %.1f ms", ms);
	free(in->state);
	in->state = NULL;
}
