/* SPDX-License-Identifier: MIT */
#include "vmm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/clock.h"
#include "../common/why.h"
#include "acpi.h"
#include "cpu.h"
#include "kvm.h"
#include "pio.h"
#include "serial.h"
#include "virtio_mmio.h"
#include "vm_snapshot.h"

#define VMM_IOAPIC_ADDR 0xfec00000u
#define VMM_LAPIC_ADDR 0xfee00000u
#define VMM_TICK_NS 10000000L       /* halt check while the guest runs */
#define VMM_TICK_FAST_NS 1000000L   /* after the guest wrote its exit status */
#define VMM_PARK_MS 2000u           /* a vCPU that does not pause within it: no snapshot */

struct vmm {
	const struct vmm_opts *o;
	struct kvm_vm vm;
	struct gmem ram_view;       /* vm.ram as the virtio devices see it (vm_ram_view) */
	struct boot_kernel kernel;
	struct serial *serial;
	struct pio_devs pio;
	struct virtio_mmio *vdev[VMM_MAX_DISKS];
	unsigned ndev;
	struct vcpu cpus[CPU_MAX];
	unsigned ncpus;
	struct cpu_bus bus;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ended;
	enum cpu_end why;
	bool halted;                /* every vCPU halted with interrupts off */
	int status;                 /* from port 0x441; -1: none */
	char *reason;               /* vmm_run's why (reason_len bytes) */
	size_t reason_len;
};

static void vmm_end(struct vmm *v, enum cpu_end why)
{
	pthread_mutex_lock(&v->lock);
	if (!v->ended) {
		v->ended = true;
		v->why = why;
	}
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
}

static void vmm_cpu_end(void *ctx, unsigned cpu, enum cpu_end why)
{
	(void)cpu;
	vmm_end(ctx, why);
}

static void vmm_cpu_report(void *ctx)
{
	struct vmm *v = ctx;

	pthread_mutex_lock(&v->lock);
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
}

static void vmm_reset(void *ctx)
{
	vmm_end(ctx, CPU_END_RESET);
}

static void vmm_status(void *ctx, int st)
{
	struct vmm *v = ctx;

	pthread_mutex_lock(&v->lock);
	v->status = st;
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
}

static void vmm_serial_irq(void *ctx, int level)
{
	struct vmm *v = ctx;

	kvm_irq_line(v->vm.vm_fd, SERIAL_COM1_IRQ, level);
}

static void vmm_pio(void *ctx, uint16_t port, uint8_t *data, uint32_t size, bool is_write)
{
	struct vmm *v = ctx;

	if (port >= SERIAL_COM1_BASE && port < SERIAL_COM1_BASE + 8) {
		for (uint32_t i = 0; i < size; i++) {
			if (port + i < SERIAL_COM1_BASE + 8)
				serial_access(v->serial, port + i - SERIAL_COM1_BASE, data + i,
					      is_write);
			else if (!is_write)
				data[i] = 0xff;
		}
		return;
	}
	if (pio_access(&v->pio, port, data, size, is_write))
		return;
	if (!is_write)
		memset(data, 0xff, size); /* nothing there */
}

static void vmm_mmio(void *ctx, uint64_t addr, uint8_t *data, uint32_t len, bool is_write)
{
	struct vmm *v = ctx;
	uint64_t off = addr - BOOT_VIRTIO_BASE;

	if (addr >= BOOT_VIRTIO_BASE && off / VIRTIO_MMIO_WINDOW < v->ndev &&
	    off % VIRTIO_MMIO_WINDOW + len <= VIRTIO_MMIO_WINDOW) {
		virtio_mmio_access(v->vdev[off / VIRTIO_MMIO_WINDOW], off % VIRTIO_MMIO_WINDOW,
				   data, len, is_write);
		return;
	}
	if (!is_write)
		memset(data, 0xff, len > 8 ? 8 : len);
}

static int vmm_acpi(struct vmm *v, uint64_t *rsdp)
{
	struct acpi_mmio_dev devs[VMM_MAX_DISKS];
	struct acpi_config c = {
		.ncpus = v->ncpus,
		.ioapic_addr = VMM_IOAPIC_ADDR,
		.lapic_addr = VMM_LAPIC_ADDR,
		.devs = devs,
		.ndevs = v->o->ndisks,
	};
	uint8_t *buf = vm_ram_ptr(&v->vm.ram, BOOT_ACPI_ADDR, BOOT_ACPI_MAX);
	size_t used;
	int ret;

	for (unsigned i = 0; i < v->o->ndisks; i++) {
		devs[i].base = BOOT_VIRTIO_BASE + i * VIRTIO_MMIO_WINDOW;
		devs[i].size = VIRTIO_MMIO_WINDOW;
		devs[i].gsi = BOOT_VIRTIO_GSI + i;
	}
	ret = buf ? acpi_build(&c, buf, BOOT_ACPI_ADDR, BOOT_ACPI_MAX, rsdp, &used) : -EFAULT;
	if (ret)
		why_set(v->reason, v->reason_len, ret, "ACPI tables: %s", strerror(-ret));
	return ret;
}

/* Kernel, initrd, command line, ACPI, boot_params / PVH info, GDT and page tables. */
static int vmm_load(struct vmm *v)
{
	const struct vmm_opts *o = v->o;
	struct boot_kernel_opts ko = { .proto = o->boot, .cache_dir = o->cache_dir,
					.map_segments = !o->hugepages, .notes = o->notes };
	struct boot_layout l = { .mem_size = o->mem, .cmdline_addr = BOOT_CMDLINE_ADDR };
	char cmdline[BOOT_CMDLINE_MAX];
	size_t max = BOOT_CMDLINE_MAX;
	int ret;

	ret = boot_kernel_load(o->kernel, &ko, &v->vm.ram, &v->kernel, v->reason, v->reason_len);
	if (ret)
		return ret;
	note_emit(&o->notes, NOTE_INFO, "kernel %s: %s, entry 0x%llx (loaded at %.1f ms)",
		  o->kernel, v->kernel.how, (unsigned long long)v->kernel.entry,
		  clock_ms_since(&o->t0));
	if (o->initrd) {
		ret = boot_initrd_load(o->initrd, &v->vm.ram, &v->kernel, &l.initrd_addr,
				       &l.initrd_size, v->reason, v->reason_len);
		if (ret)
			return ret;
	}
	if (v->kernel.cmdline_size && v->kernel.cmdline_size < max - 1)
		max = v->kernel.cmdline_size + 1;
	ret = boot_cmdline_build(o->append, o->ndisks, cmdline, max);
	if (ret)
		return why_set(v->reason, v->reason_len, ret,
			       "kernel command line longer than %zu bytes", max - 1);
	l.cmdline_len = strlen(cmdline);
	ret = vmm_acpi(v, &l.rsdp_addr);
	if (ret)
		return ret;
	ret = boot_memory_setup(&v->vm.ram, &v->kernel, &l, cmdline);
	if (ret)
		why_set(v->reason, v->reason_len, ret, "boot tables: %s", strerror(-ret));
	return ret;
}

static int vmm_devices(struct vmm *v)
{
	const struct vmm_opts *o = v->o;
	struct serial_opts so = {
		.in_fd = o->in_fd, .out_fd = o->out_fd, .set_irq = vmm_serial_irq, .irq_ctx = v,
	};
	int ret;

	v->pio.t0 = o->t0;
	v->pio.reset = vmm_reset;
	v->pio.status = vmm_status;
	v->pio.ctx = v;
	ret = serial_new(&so, &v->serial);
	if (ret)
		return why_set(v->reason, v->reason_len, ret, "serial console: %s",
			       strerror(-ret));
	vm_ram_view(&v->vm.ram, &v->ram_view);
	for (unsigned i = 0; i < o->ndisks; i++) {
		struct virtio_mmio_opts vo = {
			.vm_fd = v->vm.vm_fd,
			.mem = &v->ram_view,
			.base = BOOT_VIRTIO_BASE + i * VIRTIO_MMIO_WINDOW,
			.gsi = BOOT_VIRTIO_GSI + i,
			.disk = &o->disks[i],
			.num_queues = v->ncpus,
		};

		ret = virtio_mmio_blk_new(&vo, &v->vdev[i]);
		if (ret)
			return why_set(v->reason, v->reason_len, ret, "virtio-blk disk %u: %s", i,
				       strerror(-ret));
		v->ndev++;
	}
	return 0;
}

static void vmm_parts(struct vmm *v, struct vm_parts *p)
{
	*p = (struct vm_parts){
		.kvm = &v->vm, .cpus = v->cpus, .ncpus = v->ncpus, .vdev = v->vdev,
		.ndev = v->ndev, .serial = v->serial, .exit_status = &v->status,
		.kernel = v->o->kernel, .image = v->o->image, .notes = &v->o->notes,
		.kernel_sha = v->o->restore ? vm_snapshot_info(v->o->restore)->kernel_sha : NULL,
	};
}

static int vmm_cpus(struct vmm *v, bool hw_virt)
{
	struct vm_parts p;
	int ret;

	for (unsigned i = 0; i < v->ncpus; i++) {
		ret = cpu_create(&v->vm, i, v->ncpus, hw_virt, &v->cpus[i], &v->o->notes,
				 v->reason, v->reason_len);
		if (ret)
			return ret;
	}
	if (v->o->restore) {
		vmm_parts(v, &p);
		/*
		 * TODO(issue 17, VMGENID): once the VMGENID device is here, write a new random
		 * GUID into its guest buffer after the apply (and notify), so that a clone's
		 * kernel reseeds its RNG (docs/run.md, "What clones share").
		 */
		return vm_snapshot_apply(v->o->restore, &p, v->reason, v->reason_len);
	}
	return cpu_boot_regs(&v->cpus[0], v->kernel.proto, v->kernel.entry, v->reason,
			     v->reason_len);
}

static void vmm_deadline(struct timespec *t, long ns)
{
	clock_gettime(CLOCK_MONOTONIC, t);
	t->tv_nsec += ns;
	if (t->tv_nsec >= 1000000000L) {
		t->tv_sec++;
		t->tv_nsec -= 1000000000L;
	}
}

static bool vmm_past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/*
 * Write a snapshot of v, paused by the caller (every vCPU parked, the virtio queues
 * quiesced), into dir (which must not exist). 0, or -errno with one line in why. The
 * control socket's `snapshot DIR` (issue 17) calls this once it is joined; until then the
 * test hook below is its only caller.
 */
static int vm_snapshot_save(struct vmm *v, const char *dir, char *why, size_t why_len)
{
	struct vm_parts p;

	vmm_parts(v, &p);
	return vm_snapshot_write(&p, dir, why, why_len);
}

/* The test hook (vmm_opts.snapshot_req): pause, save, resume; the outcome as a note. */
static void vmm_snapshot_hook(struct vmm *v)
{
	struct timespec t0;
	char why[512];
	int ret = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < v->ncpus && !ret; i++)
		if (cpu_park(&v->cpus[i], VMM_PARK_MS))
			ret = why_set(why, sizeof(why), -ETIMEDOUT, "vCPU %u did not pause within "
				      "%u ms (blocked in a device: console output nobody reads?)",
				      i, VMM_PARK_MS);
	if (!ret) {
		for (unsigned i = 0; i < v->ndev; i++)
			virtio_mmio_quiesce(v->vdev[i]);
		ret = vm_snapshot_save(v, v->o->snapshot_dir, why, sizeof(why));
		for (unsigned i = 0; i < v->ndev; i++)
			virtio_mmio_release(v->vdev[i]);
	}
	for (unsigned i = 0; i < v->ncpus; i++)
		cpu_unpark(&v->cpus[i]);
	if (ret)
		note_emit(&v->o->notes, NOTE_WARN, "snapshot: %s", why[0] ? why :
			  strerror(-ret));
	else
		note_emit(&v->o->notes, NOTE_NOTICE, "snapshot %s written (VM paused %.1f ms)",
			  v->o->snapshot_dir, clock_ms_since(&t0));
}

/* Waits for the end; asks the vCPUs every tick whether they are all halted for good. */
static void vmm_wait(struct vmm *v)
{
	struct timespec deadline;
	unsigned gen = 0;
	bool all, fast = false;

	pthread_mutex_lock(&v->lock);
	vmm_deadline(&deadline, VMM_TICK_NS);
	while (!v->ended) {
		pthread_cond_timedwait(&v->cond, &v->lock, &deadline);
		if (v->ended)
			break;
		if (v->o->snapshot_req &&
		    __atomic_exchange_n(v->o->snapshot_req, 0, __ATOMIC_ACQ_REL)) {
			pthread_mutex_unlock(&v->lock);
			vmm_snapshot_hook(v);
			pthread_mutex_lock(&v->lock);
			continue;
		}
		all = gen != 0;
		for (unsigned i = 0; all && i < v->ncpus; i++)
			all = cpu_dead(&v->cpus[i], gen);
		if (all) {
			v->ended = true;
			v->halted = true;
			break;
		}
		if (v->status >= 0 && !fast) {
			/* the guest is finishing: ask now, and then often */
			fast = true;
			vmm_deadline(&deadline, 0);
		}
		if (!vmm_past(&deadline))
			continue;
		gen++;
		for (unsigned i = 0; i < v->ncpus; i++)
			cpu_kick(&v->cpus[i], gen);
		vmm_deadline(&deadline, fast ? VMM_TICK_FAST_NS : VMM_TICK_NS);
	}
	pthread_mutex_unlock(&v->lock);
}

/* The run's result from how it ended. */
static int vmm_result(struct vmm *v, int *status)
{
	*status = v->status >= 0 ? v->status : 0;
	if (v->halted)
		return 0;
	switch (v->why) {
	case CPU_END_RESET:
	case CPU_END_POWEROFF:
		return 0;
	case CPU_END_TRIPLE:
		if (v->status >= 0)
			return 0;
		return why_set(v->reason, v->reason_len, -EFAULT, "the guest reset itself with a "
			       "triple fault (no exit status written)");
	case CPU_END_CRASH:
		return why_set(v->reason, v->reason_len, -EFAULT,
			       "the guest reported a crash (KVM_SYSTEM_EVENT_CRASH)");
	default:
		return -EIO; /* the vCPU logged why: the reason stays empty */
	}
}

static void vmm_teardown(struct vmm *v)
{
	for (unsigned i = 0; i < v->ncpus; i++)
		cpu_destroy(&v->cpus[i]);
	for (unsigned i = 0; i < v->ndev; i++)
		virtio_mmio_free(v->vdev[i]);
	serial_free(v->serial);
	kvm_vm_destroy(&v->vm);
	pthread_mutex_destroy(&v->lock);
	pthread_cond_destroy(&v->cond);
}

/* A restore: the machine the snapshot names, against what the caller asked for. */
static int vmm_restore_machine(const struct vmm_opts *o, struct kvm_ram_opts *ro,
			       unsigned *ncpus, char *why, size_t why_len)
{
	const struct vm_snapshot_info *si = vm_snapshot_info(o->restore);

	if (o->mem && o->mem != si->mem_size)
		return why_set(why, why_len, -EINVAL, "RAM size mismatch: %llu MiB asked for, "
			       "the snapshot's VM has %llu MiB", (unsigned long long)(o->mem >> 20),
			       (unsigned long long)(si->mem_size >> 20));
	if (o->ncpus && o->ncpus != si->ncpus)
		return why_set(why, why_len, -EINVAL, "%u vCPUs asked for, the snapshot's VM has "
			       "%u", o->ncpus, si->ncpus);
	if (o->ndisks != si->ndisks)
		return why_set(why, why_len, -EINVAL, "%u disks, the snapshot's VM has %u",
			       o->ndisks, si->ndisks);
	if (o->hugepages || o->populate)
		return why_set(why, why_len, -EINVAL, "a restore maps RAM from the snapshot: no "
			       "hugepages, no populate");
	ro->size = si->mem_size;
	ro->map_file = true;
	ro->fd = vm_snapshot_ram_fd(o->restore);
	*ncpus = si->ncpus;
	return 0;
}

/* RAM, then the boot (kernel and tables) or the snapshot's RAM checked, devices, vCPUs. */
static int vmm_setup(struct vmm *v, const struct kvm_ram_opts *ro, bool hw_virt)
{
	int ret = kvm_vm_create(&v->vm, ro, v->reason, v->reason_len);

	if (!ret && v->o->restore)
		ret = vm_snapshot_ram_verify(v->o->restore, v->vm.ram.map, v->reason,
					     v->reason_len);
	else if (!ret)
		ret = vmm_load(v);
	if (!ret)
		ret = vmm_devices(v);
	if (!ret)
		ret = vmm_cpus(v, hw_virt);
	return ret;
}

int vmm_run(const struct vmm_opts *o, int *status, char *why, size_t why_len)
{
	struct kvm_ram_opts ro = { .size = o->mem, .hugepages = o->hugepages,
				   .populate = o->populate };
	struct vmm *v;
	bool hw_virt = kvm_hw_virt_present();
	unsigned ncpus = o->ncpus;
	int ret;

	if (why_len)
		why[0] = '\0';
	if (o->restore && (ret = vmm_restore_machine(o, &ro, &ncpus, why, why_len)))
		return ret;
	if (!ncpus || ncpus > CPU_MAX || o->ndisks > VMM_MAX_DISKS)
		return why_set(why, why_len, -EINVAL, "%u vCPUs and %u disks: at most %u and %u",
			       ncpus, o->ndisks, CPU_MAX, VMM_MAX_DISKS);
	v = calloc(1, sizeof(*v));
	if (!v)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	v->o = o;
	v->reason = why;
	v->reason_len = why_len;
	v->ncpus = ncpus;
	v->status = -1;
	v->vm.vm_fd = v->vm.sys_fd = -1;
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->cond, NULL);
	v->bus = (struct cpu_bus){ .ctx = v, .pio = vmm_pio, .mmio = vmm_mmio,
				   .end = vmm_cpu_end, .report = vmm_cpu_report };

	ret = vmm_setup(v, &ro, hw_virt);
	if (!ret && !hw_virt)
		note_emit(&o->notes, NOTE_NOTICE, "no hardware virtualization (no vmx/svm in "
			  "/proc/cpuinfo): KVM here is a software implementation; a Linux guest "
			  "will be very slow (minutes; console=ttyS0 shows its progress)");
	if (!ret && o->before_start && o->before_start(o->before_start_arg))
		ret = -EPERM; /* it said why */
	if (!ret)
		note_emit(&o->notes, NOTE_INFO, "%s %u vCPU%s at %.1f ms",
			  o->restore ? "resuming" : "starting", v->ncpus, v->ncpus == 1 ? "" : "s",
			  clock_ms_since(&o->t0));
	for (unsigned i = 0; !ret && i < v->ncpus; i++)
		ret = cpu_start(&v->cpus[i], &v->bus, why, why_len);
	if (ret) {
		vmm_end(v, CPU_END_ERROR);
	} else {
		vmm_wait(v);
		ret = vmm_result(v, status);
	}
	vmm_teardown(v);
	free(v);
	return ret;
}
