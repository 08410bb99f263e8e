/* SPDX-License-Identifier: MIT */
#include "vmm.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../common/clock.h"
#include "../common/why.h"
#include "acpi.h"
#include "cpu.h"
#include "kvm.h"
#include "pio.h"
#include "serial.h"
#include "virtio_mmio.h"
#include "vm.h"
#include "vm_control.h"
#include "lazyram/lazyram.h"
#include "vm_snapshot.h"
#include "vm_state.h"
#include "vm_upgrade.h"

#define VMM_IOAPIC_ADDR 0xfec00000u
#define VMM_LAPIC_ADDR 0xfee00000u
#define VMM_TICK_NS 10000000L       /* halt check while the guest runs */
/*
 * After the guest wrote its exit status it is about to halt: asked after 20 us, then 40 us,
 * 80 us, ... up to every 1 ms (a guest that goes on is not slowed down for long).
 */
#define VMM_TICK_FIRST_NS 20000L
#define VMM_TICK_FAST_NS 1000000L

static void vmm_end(struct vm *v, enum cpu_end why)
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
	struct vm *v = ctx;

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
	struct vm *v = ctx;

	pthread_mutex_lock(&v->lock);
	v->status = st;
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
}

static void vmm_serial_irq(void *ctx, int level)
{
	struct vm *v = ctx;

	kvm_irq_line(v->vm.vm_fd, SERIAL_COM1_IRQ, level);
}

static void vmm_pio(void *ctx, uint16_t port, uint8_t *data, uint32_t size, bool is_write)
{
	struct vm *v = ctx;

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
	struct vm *v = ctx;
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

/* A new random VM generation ID at BOOT_VMGENID_ADDR (the DSDT's VGEN device names it). */
static int vmm_vmgenid(struct vm *v)
{
	uint8_t *id = vm_ram_ptr(&v->vm.ram, BOOT_VMGENID_ADDR, 16);
	char hex[33];
	ssize_t n;

	if (!id)
		return why_set(v->reason, v->reason_len, -EFAULT, "VM generation ID: no RAM at "
			       "0x%x", BOOT_VMGENID_ADDR);
	do
		n = getrandom(id, 16, 0);
	while (n < 0 && errno == EINTR);
	if (n != 16)
		return why_set(v->reason, v->reason_len, n < 0 ? -errno : -EIO,
			       "VM generation ID: getrandom: %s", strerror(n < 0 ? errno : EIO));
	for (unsigned i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	note_emit(&v->o->notes, NOTE_INFO, "VM generation ID %s at 0x%x", hex,
		  BOOT_VMGENID_ADDR);
	return 0;
}

static int vmm_acpi(struct vm *v, uint64_t *rsdp)
{
	struct acpi_mmio_dev devs[VMM_MAX_DISKS];
	struct acpi_config c = {
		.ncpus = v->ncpus,
		.ioapic_addr = VMM_IOAPIC_ADDR,
		.lapic_addr = VMM_LAPIC_ADDR,
		.devs = devs,
		.ndevs = v->o->ndisks,
		.vmgenid_addr = BOOT_VMGENID_ADDR,
		.vmgenid_gsi = BOOT_VMGENID_GSI,
	};
	uint8_t *buf = vm_ram_ptr(&v->vm.ram, BOOT_ACPI_ADDR, BOOT_ACPI_MAX);
	size_t used;
	int ret;

	ret = vmm_vmgenid(v);
	if (ret)
		return ret;

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
static int vmm_load(struct vm *v)
{
	const struct vmm_opts *o = v->o;
	/*
	 * With a control socket no cached vmlinux segments are mapped over RAM: every guest
	 * page must then live in the RAM memfd (a snapshot reads it, a live upgrade passes it on).
	 */
	struct boot_kernel_opts ko = { .proto = o->boot, .cache_dir = o->cache_dir,
					.map_segments = !o->hugepages && !o->control,
					.notes = o->notes };
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

/* serial_opts.first_output: when, and what the lazy RAM had fetched by then (stats). */
static void vmm_first_output(void *ctx)
{
	struct vm *v = ctx;
	struct timespec now;
	struct lazyram_stats st;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (v->o->lazy) {
		lazyram_get_stats(v->o->lazy, &st);
		/* the prefetch's chunks are among bytes_frame (it loads each one it fetched) */
		__atomic_store_n(&v->first_output_ram_bytes, st.bytes_frame,
				 __ATOMIC_RELAXED);
	}
	__atomic_store_n(&v->first_output_ns, (uint64_t)now.tv_sec * 1000000000u +
			 (uint64_t)now.tv_nsec, __ATOMIC_RELAXED);
}

static int vmm_devices(struct vm *v)
{
	const struct vmm_opts *o = v->o;
	struct serial_opts so = {
		.in_fd = o->in_fd, .out_fd = o->out_fd, .set_irq = vmm_serial_irq, .irq_ctx = v,
		.first_output = vmm_first_output,
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

static int vmm_cpus(struct vm *v, bool hw_virt)
{
	struct vm_parts p;
	int ret = 0;

	for (unsigned i = 0; !ret && i < v->ncpus; i++)
		ret = cpu_create(&v->vm, i, v->ncpus, hw_virt, v->up || v->o->restore,
				 &v->cpus[i], &v->o->notes, v->reason, v->reason_len);
	if (!ret && v->up) {   /* a live upgrade: the same VM goes on */
		vmm_parts(v, &p);
		return vm_snapshot_state_load(v->up->state, v->up->state_len, &p, "upgrade state",
					      v->reason, v->reason_len);
	}
	if (v->o->restore) {
		if (!ret) {
			vmm_parts(v, &p);
			ret = vm_snapshot_apply(v->o->restore, &p, v->reason, v->reason_len);
		}
		/* KVM refused the snapshot's CPUID or part of its state: another CPU says why */
		if (ret) {
			vm_snapshot_cpu_explain(v->o->restore, &v->vm, v->reason, v->reason_len);
			return ret;
		}
		/* a clone is a new generation: a new ID, and the GED's edge tells the guest */
		ret = vmm_vmgenid(v);
		if (!ret && (kvm_irq_line(v->vm.vm_fd, BOOT_VMGENID_GSI, 1) ||
			     kvm_irq_line(v->vm.vm_fd, BOOT_VMGENID_GSI, 0)))
			ret = why_set(v->reason, v->reason_len, -EIO, "VM generation ID: "
				      "KVM_IRQ_LINE %u failed", BOOT_VMGENID_GSI);
		return ret;
	}
	return ret ? ret : cpu_boot_regs(&v->cpus[0], v->kernel.proto, v->kernel.entry,
					 v->reason, v->reason_len);
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

/* Waits for the end; asks the vCPUs every tick whether they are all halted for good. */
static void vmm_wait(struct vm *v)
{
	struct timespec deadline;
	unsigned gen = 0;
	long step = VMM_TICK_NS;
	bool all, fast = false;

	pthread_mutex_lock(&v->lock);
	vmm_deadline(&deadline, VMM_TICK_NS);
	while (!v->ended) {
		pthread_cond_timedwait(&v->cond, &v->lock, &deadline);
		if (v->ended)
			break;
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
			/* not at once: the vCPU is still in the exit of that write */
			step = 2 * VMM_TICK_FIRST_NS;
			vmm_deadline(&deadline, VMM_TICK_FIRST_NS);
		}
		if (!vmm_past(&deadline))
			continue;
		if (vmm_paused(v)) { /* a parked vCPU answers no kick */
			vmm_deadline(&deadline, VMM_TICK_NS);
			continue;
		}
		gen++;
		for (unsigned i = 0; i < v->ncpus; i++)
			cpu_kick(&v->cpus[i], gen);
		vmm_deadline(&deadline, step);
		if (fast && step < VMM_TICK_FAST_NS)
			step = step * 2 < VMM_TICK_FAST_NS ? step * 2 : VMM_TICK_FAST_NS;
	}
	pthread_mutex_unlock(&v->lock);
}

/* The run's result from how it ended. */
static int vmm_result(struct vm *v, int *status)
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

static void vmm_teardown(struct vm *v)
{
	vm_snapstore_release(&v->snapstore);
	for (unsigned i = 0; i < v->ncpus; i++)
		cpu_destroy(&v->cpus[i]);
	for (unsigned i = 0; i < v->ndev; i++)
		virtio_mmio_free(v->vdev[i]);
	/* nothing touches guest RAM any more: no fault is served on RAM about to go */
	if (v->o->lazy)
		lazyram_stop(v->o->lazy);
	serial_free(v->serial);
	kvm_vm_destroy(&v->vm);
	pthread_mutex_destroy(&v->lock);
	pthread_cond_destroy(&v->cond);
	pthread_mutex_destroy(&v->pause_lock);
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
	if (si->in_store != !!o->lazy)
		return why_set(why, why_len, -EINVAL, "a snapshot in a store restores with its "
			       "RAM brought in lazily, a directory's from its ram file");
	ro->size = si->mem_size;
	ro->map_file = true;
	ro->fd = o->lazy ? lazyram_fd(o->lazy) : vm_snapshot_ram_fd(o->restore);
	*ncpus = si->ncpus;
	return 0;
}

/* A live upgrade's new process: the machine the hand-over names, RAM its memfd. */
static int vmm_resume_machine(const struct vmm_opts *o, struct kvm_ram_opts *ro,
			      unsigned *ncpus, struct vm_upgrade_in *up, char *why,
			      size_t why_len)
{
	int ret = vm_upgrade_open(o->resume, up, why, why_len);

	if (ret)
		return ret;
	if (up->ndisks != o->ndisks || (o->mem && o->mem != up->mem_size) ||
	    (o->ncpus && o->ncpus != up->ncpus))
		return why_set(why, why_len, -EINVAL, "upgrade: the VM has %u disks, %u vCPUs and "
			       "%llu MiB; this run %u, %u and %llu MiB", up->ndisks, up->ncpus,
			       (unsigned long long)(up->mem_size >> 20), o->ndisks, o->ncpus,
			       (unsigned long long)(o->mem >> 20));
	ro->size = up->mem_size;
	ro->adopt_fd = true;
	ro->fd = o->resume->ram_fd;
	ro->populate = false;
	*ncpus = up->ncpus;
	return 0;
}

/* vm_snapstore.written: the pages the guest (or a device) wrote since the restore. */
static int vmm_lazy_written(void *arg, uint64_t *bits, uint64_t npages)
{
	struct vm *v = arg;
	uint64_t n = 0;

	(void)npages;
	return lazyram_written(v->o->lazy, bits, &n, NULL, 0);
}

/*
 * A page of a lazily restored RAM cannot be had (lazyram.h, on its thread): the VM stops
 * with reason, and nothing more the guest does gets out (its console output is dropped;
 * a thread blocked on that page stays blocked: vmm_run gives up on the teardown).
 */
static void vmm_lazy_fatal(void *arg, const char *reason)
{
	struct vm *v = arg;

	pthread_mutex_lock(&v->lock);
	if (!v->lazy_failed) {
		v->lazy_failed = true;
		why_set(v->reason, v->reason_len, -EIO, "guest RAM: %s", reason);
	}
	pthread_mutex_unlock(&v->lock);
	if (v->serial)
		serial_output(v->serial, SERIAL_OUT_DROP);
	if (v->o->lazy_abandon)
		v->o->lazy_abandon(v->o->lazy_abandon_arg, v->reason);
	vmm_end(v, CPU_END_ERROR);
}

/* The lazy RAM's faults served from now on; the next snapshot to a store leans on its map. */
static int vmm_lazy_start(struct vm *v)
{
	int ret;

	lazyram_set_fatal(v->o->lazy, vmm_lazy_fatal, v);
	ret = lazyram_start(v->o->lazy, v->vm.ram.map, v->vm.ram.size, v->reason,
			    v->reason_len);
	if (ret)
		return ret;
	v->snapstore.base_map = v->o->lazy_map;
	v->snapstore.written = vmm_lazy_written;
	v->snapstore.written_arg = v;
	if (v->o->lazy_id) {
		v->snapstore.has_parent = true;
		memcpy(v->snapstore.parent, v->o->lazy_id, sizeof(v->snapstore.parent));
	}
	return 0;
}

/*
 * RAM, the boot (kernel and tables), devices, vCPUs. A restore's devices are held before
 * their state is loaded (vmm_restore_release lets them go): no disk request is served and
 * the console's output is buffered.
 */
static int vmm_setup(struct vm *v, const struct kvm_ram_opts *ro, bool hw_virt)
{
	struct kvm_cpuid2 *up_cpuid = NULL;
	int ret = 0;

	/*
	 * The CPUID table, asked of KVM before (a millisecond on some hosts): a restore's is
	 * checked against this host's once the guest runs held (vmm_restore_release); a live
	 * upgrade's comes from the same KVM, in the state handed over.
	 */
	if (v->up) {
		struct vm_state_rd r = { .p = v->up->state, .len = v->up->state_len };

		ret = vm_state_cpuid_take(&r, &up_cpuid, v->reason, v->reason_len);
	}
	if (!ret)
		ret = kvm_vm_create(&v->vm, ro, v->o->restore ? vm_snapshot_cpuid(v->o->restore) :
				    up_cpuid, v->reason, v->reason_len);
	free(up_cpuid);
	if (!ret && v->o->lazy)
		ret = vmm_lazy_start(v);

	if (!ret && !v->o->restore && !v->up)
		ret = vmm_load(v);
	if (!ret)
		ret = vmm_devices(v);
	if (!ret && v->o->restore) {
		for (unsigned i = 0; i < v->ndev; i++)
			virtio_mmio_pause(v->vdev[i]);
		serial_output(v->serial, SERIAL_OUT_HOLD);
	}
	if (!ret)
		ret = vmm_cpus(v, hw_virt);
	return ret;
}

/*
 * A restore's checks that need not delay the guest's first instruction, done while it runs
 * held: its disk requests wait, its console output is buffered, and its end (exit status,
 * reset, halt) is only looked at by vmm_wait, after this. The CPU (the CPUID this host's KVM
 * offers against the one the vCPUs were given, the snapshot's), then the RAM digest (the
 * ram file read on threads). Matched: the output is written and the queues served. Not, or
 * ret (the start failed): the output is dropped (a vCPU waiting to write goes on) and the
 * caller stops the vCPUs and fails, as a refusal before the start does.
 */
static int vmm_restore_release(struct vm *v, int ret)
{
	if (!ret)
		ret = vm_snapshot_cpu_verify(v->o->restore, &v->vm, v->reason, v->reason_len);
	if (!ret)
		ret = vm_snapshot_ram_verify(v->o->restore, v->reason, v->reason_len);
	if (!ret)
		note_emit(&v->o->notes, NOTE_INFO, "snapshot RAM checked at %.1f ms: output and "
			  "disk requests let go", clock_ms_since(&v->o->t0));
	if (v->serial)
		serial_output(v->serial, ret ? SERIAL_OUT_DROP : SERIAL_OUT_ON);
	for (unsigned i = 0; !ret && i < v->ndev; i++)
		virtio_mmio_resume(v->vdev[i]);
	return ret;
}

static void vmm_note_soft(const struct vmm_opts *o)
{
	note_emit(&o->notes, NOTE_NOTICE, "no hardware virtualization (no vmx/svm in "
		  "/proc/cpuinfo): KVM here is a software implementation; a Linux guest "
		  "will be very slow (minutes; console=ttyS0 shows its progress)");
}

int vmm_run(const struct vmm_opts *o, int *status, char *why, size_t why_len)
{
	struct kvm_ram_opts ro = { .size = o->mem, .hugepages = o->hugepages,
				   .populate = o->populate };
	struct vm_upgrade_in up = { 0 };
	struct vm *v;
	pthread_condattr_t ca;
	bool hw_virt = kvm_hw_virt_present();
	unsigned ncpus = o->ncpus;
	int ret;

	if (why_len)
		why[0] = '\0';
	if (o->restore && (ret = vmm_restore_machine(o, &ro, &ncpus, why, why_len)))
		return ret;
	if (o->resume && (ret = vmm_resume_machine(o, &ro, &ncpus, &up, why, why_len))) {
		vm_upgrade_done(o->resume, &up, ret, why, &o->notes);
		return ret;
	}
	if (!ncpus || ncpus > CPU_MAX || o->ndisks > VMM_MAX_DISKS)
		return why_set(why, why_len, -EINVAL, "%u vCPUs and %u disks: at most %u and %u",
			       ncpus, o->ndisks, CPU_MAX, VMM_MAX_DISKS);
	/* the user's files before the machine's KVM: a typo is told first, KVM or not */
	if (!o->restore && !o->resume && o->kernel &&
	    ((ret = boot_kernel_check(o->kernel, why, why_len)) ||
	     (o->initrd && (ret = boot_initrd_check(o->initrd, why, why_len)))))
		return ret;
	v = calloc(1, sizeof(*v));
	if (!v)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	v->o = o;
	v->reason = why;
	v->reason_len = why_len;
	v->ncpus = ncpus;
	v->up = o->resume ? &up : NULL;
	v->status = -1;
	v->vm.vm_fd = v->vm.sys_fd = v->vm.reaper_fd = -1;
	pthread_mutex_init(&v->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* vmm_deadline's clock */
	pthread_cond_init(&v->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&v->pause_lock, NULL);
	v->bus = (struct cpu_bus){ .ctx = v, .pio = vmm_pio, .mmio = vmm_mmio,
				   .end = vmm_cpu_end, .report = vmm_cpu_report };

	ret = vmm_setup(v, &ro, hw_virt);
	if (!ret && !hw_virt && !o->resume && !o->restore)
		vmm_note_soft(o);
	if (!ret)
		kvm_vm_reaper(&v->vm); /* without it the teardown is only slower */
	/* listening before --seccomp (no new listening sockets then) and the first vCPU */
	if (!ret && o->control && vm_control_start(v, o->control, &v->ctl))
		ret = -EIO; /* it logged why (a server) */
	if (!ret && o->before_start && o->before_start(o->before_start_arg))
		ret = -EPERM; /* it said why */
	if (!ret)
		note_emit(&o->notes, NOTE_INFO, "%s %u vCPU%s at %.1f ms",
			  o->restore || o->resume ? "resuming" : "starting", v->ncpus, v->ncpus == 1 ? "" : "s",
			  clock_ms_since(&o->t0));
	for (unsigned i = 0; !ret && i < v->ncpus; i++)
		ret = cpu_start(&v->cpus[i], &v->bus, why, why_len);
	if (o->restore)
		ret = vmm_restore_release(v, ret);
	if (!ret && !hw_virt && o->restore)   /* only now: a refused restore says only why */
		vmm_note_soft(o);
	if (!ret)
		__atomic_store_n(&v->running, true, __ATOMIC_SEQ_CST); /* vmm_pause may park them */
	if (o->resume)
		vm_upgrade_done(o->resume, &up, ret, why, &o->notes);
	if (ret) {
		vmm_end(v, CPU_END_ERROR);
	} else {
		vmm_wait(v);
		ret = vmm_result(v, status);
	}
	vm_control_stop(v->ctl);
	if (v->lazy_failed) {
		/*
		 * A thread may be blocked for good on the page that failed (KVM's wait for a
		 * userfaultfd is not interruptible): no teardown; the caller ends the process.
		 */
		return -ENOTRECOVERABLE;
	}
	vmm_teardown(v);
	free(v);
	return ret;
}
