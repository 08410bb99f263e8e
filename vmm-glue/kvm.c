/* SPDX-License-Identifier: MIT */
#include "kvm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <linux/memfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/why.h"

#define HUGEPAGE_SIZE (2ull << 20)

static const struct {
	int cap;
	const char *name;
} kvm_required_caps[] = {
	{ KVM_CAP_IRQCHIP, "KVM_CAP_IRQCHIP (in-kernel interrupt controllers)" },
	{ KVM_CAP_USER_MEMORY, "KVM_CAP_USER_MEMORY (guest RAM)" },
	{ KVM_CAP_SET_TSS_ADDR, "KVM_CAP_SET_TSS_ADDR" },
	{ KVM_CAP_PIT2, "KVM_CAP_PIT2 (in-kernel timer)" },
	{ KVM_CAP_EXT_CPUID, "KVM_CAP_EXT_CPUID (KVM_GET_SUPPORTED_CPUID)" },
	{ KVM_CAP_IOEVENTFD, "KVM_CAP_IOEVENTFD (virtio notifications)" },
	{ KVM_CAP_IRQFD, "KVM_CAP_IRQFD (virtio interrupts)" },
	{ KVM_CAP_MP_STATE, "KVM_CAP_MP_STATE" },
};

static int kvm_check_caps(struct kvm_vm *vm, char *why, size_t why_len)
{
	for (size_t i = 0; i < sizeof(kvm_required_caps) / sizeof(kvm_required_caps[0]); i++) {
		if (ioctl(vm->sys_fd, KVM_CHECK_EXTENSION, kvm_required_caps[i].cap) <= 0)
			return why_set(why, why_len, -ENOTSUP, "/dev/kvm lacks %s",
				       kvm_required_caps[i].name);
	}
	vm->immediate_exit = ioctl(vm->sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) > 0;
	return 0;
}

static int kvm_ram_setup(struct kvm_vm *vm, const struct kvm_ram_opts *o, char *why,
			 size_t why_len);

/* A failed ioctl: "WHAT: strerror(errno)", -errno. */
static int kvm_fail(char *why, size_t why_len, const char *what)
{
	int e = errno;

	return why_set(why, why_len, -e, "%s: %s", what, strerror(e));
}

/* The in-kernel PIC, IOAPIC and LAPICs, and the PIT. */
static int kvm_chips_create(struct kvm_vm *vm, char *why, size_t why_len)
{
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };

	if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
		return kvm_fail(why, why_len, "KVM_CREATE_IRQCHIP");
	if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return kvm_fail(why, why_len, "KVM_CREATE_PIT2");
	return 0;
}

/* KVM_GET_SUPPORTED_CPUID into a buffer as big as it needs (E2BIG: a bigger one). */
int kvm_cpuid_supported(int sys_fd, struct kvm_cpuid2 **out, char *why, size_t why_len)
{
	uint32_t cap = 256;
	int e;

	for (;;) {
		free(*out);
		*out = calloc(1, kvm_cpuid_size(cap));
		if (!*out)
			return why_set(why, why_len, -ENOMEM, "out of memory");
		(*out)->nent = cap;
		if (!ioctl(sys_fd, KVM_GET_SUPPORTED_CPUID, *out))
			return 0;
		e = errno;
		if (e != E2BIG || cap >= KVM_CPUID_MAX / 2)
			return why_set(why, why_len, -e, "KVM_GET_SUPPORTED_CPUID: %s",
				       strerror(e));
		cap *= 2;
	}
}

size_t kvm_cpuid_size(uint32_t nent)
{
	return sizeof(struct kvm_cpuid2) + nent * sizeof(struct kvm_cpuid_entry2);
}

int kvm_vm_create(struct kvm_vm *vm, const struct kvm_ram_opts *ram,
		  const struct kvm_cpuid2 *cpuid, char *why, size_t why_len)
{
	int ret, e;

	memset(vm, 0, sizeof(*vm));
	vm->vm_fd = vm->ram.fd = vm->reaper_fd = -1;
	vm->sys_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (vm->sys_fd < 0) {
		e = errno;
		return why_set(why, why_len, -e, "/dev/kvm: %s%s", strerror(e),
			       e == ENOENT ? " (no KVM on this machine)" :
			       e == EACCES ? " (add yourself to the kvm group)" : "");
	}
	ret = ioctl(vm->sys_fd, KVM_GET_API_VERSION, 0);
	if (ret != KVM_API_VERSION)
		return why_set(why, why_len, -ENOTSUP, "/dev/kvm: API version %d, want %d", ret,
			       KVM_API_VERSION);
	ret = kvm_check_caps(vm, why, why_len);
	if (!ret && !cpuid)
		ret = kvm_cpuid_supported(vm->sys_fd, &vm->cpuid, why, why_len);
	if (!ret && cpuid && !(vm->cpuid = malloc(kvm_cpuid_size(cpuid->nent))))
		ret = why_set(why, why_len, -ENOMEM, "out of memory");
	if (ret)
		return ret;
	if (cpuid)
		memcpy(vm->cpuid, cpuid, kvm_cpuid_size(cpuid->nent));
	vm->vcpu_mmap_size = ioctl(vm->sys_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (vm->vcpu_mmap_size < (int)sizeof(struct kvm_run))
		return why_set(why, why_len, -EIO, "/dev/kvm: KVM_GET_VCPU_MMAP_SIZE: %s",
			       strerror(errno));
	vm->vm_fd = ioctl(vm->sys_fd, KVM_CREATE_VM, 0);
	if (vm->vm_fd < 0)
		return kvm_fail(why, why_len, "KVM_CREATE_VM");
	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_ADDR) < 0)
		return kvm_fail(why, why_len, "KVM_SET_TSS_ADDR");
	/*
	 * RAM before the interrupt controllers: a memory slot added after
	 * KVM_CREATE_IRQCHIP waits for an SRCU grace period in the kernel (5-6 ms
	 * measured here, a third of the whole start-up); added first, it is immediate.
	 */
	ret = kvm_ram_setup(vm, ram, why, why_len);
	if (ret)
		return ret;
	return kvm_chips_create(vm, why, why_len);
}

/* Free 2 MiB pages in the pool, from /proc/meminfo; -1 when unknown. */
static long kvm_hugepages_free(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static int kvm_slot_add(struct kvm_vm *vm, uint32_t slot, uint64_t gpa, uint64_t size,
			uint8_t *host, char *why, size_t why_len)
{
	struct kvm_userspace_memory_region r = {
		.slot = slot,
		.guest_phys_addr = gpa,
		.memory_size = size,
		.userspace_addr = (uintptr_t)host,
	};
	int e;

	if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &r) < 0) {
		e = errno;
		return why_set(why, why_len, -e, "KVM_SET_USER_MEMORY_REGION (slot %u, %llu MiB at "
			       "0x%llx): %s", slot, (unsigned long long)(size >> 20),
			       (unsigned long long)gpa, strerror(e));
	}
	vm->ram.slot[vm->ram.nslots++] = (struct vm_ram_slot){
		.gpa = gpa, .size = size, .host = host,
	};
	return 0;
}

/* The memfd behind guest RAM (2 MiB pages from the pool with hugepages), sized. */
static int kvm_ram_memfd(const struct kvm_ram_opts *o, char *why, size_t why_len)
{
	unsigned flags = MFD_CLOEXEC;
	int fd, e;

	if (o->hugepages)
		flags |= MFD_HUGETLB | MFD_HUGE_2MB;
	fd = memfd_create("lazyblk-guest-ram", flags);
	if (fd >= 0 && ftruncate(fd, (off_t)o->size) == 0)
		return fd;
	e = errno;
	if (fd >= 0)
		close(fd);
	if (o->hugepages)
		return why_set(why, why_len, -e, "--hugepages: cannot make %llu MiB of 2 MiB pages: "
			       "%s (none reserved? see /proc/sys/vm/nr_hugepages)",
			       (unsigned long long)(o->size >> 20), strerror(e));
	return why_set(why, why_len, -e, "guest RAM: memfd of %llu MiB: %s",
		       (unsigned long long)(o->size >> 20), strerror(e));
}

static int kvm_ram_setup(struct kvm_vm *vm, const struct kvm_ram_opts *o, char *why,
			 size_t why_len)
{
	int flags = MAP_SHARED;
	uint64_t lo;
	long free_pages;
	void *p;
	int e, ret;

	if (o->map_file) {
		if (o->hugepages)
			return why_set(why, why_len, -EINVAL, "guest RAM from a file: no hugepages");
		flags = MAP_PRIVATE | MAP_NORESERVE;
	}
	if (!o->size || o->size & 0xfff || (o->hugepages && o->size % HUGEPAGE_SIZE))
		return why_set(why, why_len, -EINVAL, "guest RAM: bad size %llu (want a multiple "
			       "of %s)", (unsigned long long)o->size,
			       o->hugepages ? "2 MiB" : "4 KiB");
	if (o->hugepages && !o->adopt_fd) { /* an adopted memfd has its pages */
		free_pages = kvm_hugepages_free();
		if (free_pages >= 0 && (uint64_t)free_pages < o->size / HUGEPAGE_SIZE)
			return why_set(why, why_len, -ENOMEM, "--hugepages: %ld free 2 MiB pages, "
				       "%llu needed (reserve them in /proc/sys/vm/nr_hugepages)",
				       free_pages, (unsigned long long)(o->size / HUGEPAGE_SIZE));
	} else {
		/* the guest touches what it uses; nothing is reserved up front */
		flags |= MAP_NORESERVE;
	}
	if (o->populate)
		flags |= MAP_POPULATE;
	if (o->map_file || o->adopt_fd) {
		vm->ram.fd = o->adopt_fd ? o->fd : -1; /* the snapshot's ram file is not ours */
	} else {
		vm->ram.fd = kvm_ram_memfd(o, why, why_len);
		if (vm->ram.fd < 0)
			return vm->ram.fd;
	}
	p = mmap(NULL, o->size, PROT_READ | PROT_WRITE, flags, o->map_file ? o->fd : vm->ram.fd,
		 0);
	if (p == MAP_FAILED) {
		e = errno;
		if (o->hugepages)
			return why_set(why, why_len, -e, "--hugepages: cannot map %llu MiB of 2 MiB "
				       "pages: %s (none reserved? see /proc/sys/vm/nr_hugepages)",
				       (unsigned long long)(o->size >> 20), strerror(e));
		return why_set(why, why_len, -e, "guest RAM: cannot map %llu MiB: %s",
			       (unsigned long long)(o->size >> 20), strerror(e));
	}
	vm->ram.map = p;
	vm->ram.size = o->size;
	/* a fork (the reaper) copies none of it */
	(void)madvise(p, o->size, MADV_DONTFORK);
	lo = o->size < KVM_MMIO_HOLE_START ? o->size : KVM_MMIO_HOLE_START;
	ret = kvm_slot_add(vm, 0, 0, lo, vm->ram.map, why, why_len);
	if (ret)
		return ret;
	if (o->size > lo)
		ret = kvm_slot_add(vm, 1, KVM_MMIO_HOLE_END, o->size - lo, vm->ram.map + lo, why,
				   why_len);
	return ret;
}

/*
 * The reaper: a child holding only the VM fd and the read end of a pipe whose write end
 * only this process holds. KVM tears a VM down when its fd is closed for the last time —
 * the in-kernel irqchip and PIT each wait for SRCU grace periods, 2 to 60 ms measured on
 * the 2-CPU benchmark machine — so that last close happens in the reaper, which sees EOF on
 * the pipe when this process closed it or exited, instead of on this process's way out.
 * Only async-signal-safe calls in the child (it is forked from a threaded process).
 */
static void kvm_reaper_main(int vm_fd, int rd)
{
	int lo = vm_fd < rd ? vm_fd : rd, hi = vm_fd < rd ? rd : vm_fd;
	char c;

	close_range(0, (unsigned)lo - 1, 0);
	close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
	close_range((unsigned)hi + 1, ~0u, 0);
	signal(SIGINT, SIG_IGN); /* a Ctrl-C for the terminal's process group is not for it */
	while (read(rd, &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);
}

int kvm_vm_reaper(struct kvm_vm *vm)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid == 0)
		kvm_reaper_main(vm->vm_fd, p[0]);
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return -errno;
	}
	vm->reaper_fd = p[1];
	return 0;
}

void kvm_vm_destroy(struct kvm_vm *vm)
{
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->sys_fd >= 0)
		close(vm->sys_fd);
	if (vm->ram.map)
		munmap(vm->ram.map, vm->ram.size);
	if (vm->ram.fd >= 0)
		close(vm->ram.fd);
	if (vm->reaper_fd >= 0)
		close(vm->reaper_fd); /* the reaper closes the VM's last fd and exits */
	free(vm->cpuid);
	vm->cpuid = NULL;
	vm->vm_fd = vm->sys_fd = vm->reaper_fd = -1;
	memset(&vm->ram, 0, sizeof(vm->ram));
	vm->ram.fd = -1;
}

int kvm_irq_line(int vm_fd, uint32_t gsi, int level)
{
	struct kvm_irq_level l = { .irq = gsi, .level = (uint32_t)level };

	return ioctl(vm_fd, KVM_IRQ_LINE, &l) < 0 ? -errno : 0;
}

bool kvm_hw_virt_present(void)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/cpuinfo", "re");

	if (!f)
		return true; /* unknown: do not claim otherwise */
	while (!found && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		found = strstr(line, " vmx ") || strstr(line, " vmx\n") ||
			strstr(line, " svm ") || strstr(line, " svm\n");
		break;
	}
	fclose(f);
	return found;
}
