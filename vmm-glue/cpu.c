/* SPDX-License-Identifier: MIT */
#include "cpu.h"

#include <errno.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/why.h"

#define CPU_KICK_SIGNAL (SIGRTMIN + 1)

#define CPUID_HV_BASE 0x40000000u
#define CPUID_HV_FEATURES 0x40000001u
#define CPUID_HV_TIMING 0x40000010u
#define CPUID_APIC_BUS_KHZ 1000000u  /* KVM's local APIC timer runs at 1 GHz */

#define MSR_IA32_TSC 0x10
#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102

#define X86_CR0_PE 0x1ull
#define X86_CR0_ET 0x10ull
#define X86_CR0_PG 0x80000000ull
#define X86_CR4_PAE 0x20ull
#define EFER_LME 0x100ull
#define EFER_LMA 0x400ull
#define X86_EFLAGS_IF 0x200ull

#define APIC_LVT0 0x350
#define APIC_LVT1 0x360
#define APIC_MODE_NMI 0x4
#define APIC_MODE_EXTINT 0x7

static struct kvm_cpuid_entry2 *cpuid_find(struct kvm_cpuid2 *c, uint32_t fn, uint32_t idx)
{
	for (uint32_t i = 0; i < c->nent; i++)
		if (c->entries[i].function == fn &&
		    (!(c->entries[i].flags & KVM_CPUID_FLAG_SIGNIFCANT_INDEX) ||
		     c->entries[i].index == idx))
			return &c->entries[i];
	return NULL;
}

static struct kvm_cpuid_entry2 *cpuid_add(struct kvm_cpuid2 *c, uint32_t cap, uint32_t fn)
{
	struct kvm_cpuid_entry2 *e = cpuid_find(c, fn, 0);

	if (e || c->nent >= cap)
		return e;
	e = &c->entries[c->nent++];
	memset(e, 0, sizeof(*e));
	e->function = fn;
	return e;
}

/* A failed ioctl of vCPU c: "vCPU N: WHAT: strerror(errno)", -errno. */
static int cpu_fail(const struct vcpu *c, const char *what, char *why, size_t why_len)
{
	int e = errno;

	return why_set(why, why_len, -e, "vCPU %u: %s: %s", c->id, what, strerror(e));
}

static int cpu_set_cpuid(struct kvm_vm *vm, struct vcpu *c, unsigned ncpus, char *why,
			 size_t why_len)
{
	static const char sig[12] = "KVMKVMKVM\0\0\0";
	uint32_t cap = vm->cpuid->nent + 4;   /* room for the hypervisor leaves */
	struct kvm_cpuid2 *cp;
	struct kvm_cpuid_entry2 *e;
	int khz, ret = 0;

	cp = calloc(1, sizeof(*cp) + cap * sizeof(cp->entries[0]));
	if (!cp)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	memcpy(cp, vm->cpuid, sizeof(*cp) + vm->cpuid->nent * sizeof(cp->entries[0]));
	for (uint32_t i = 0; i < cp->nent; i++) {
		e = &cp->entries[i];
		switch (e->function) {
		case 1:
			/* initial APIC id, logical processor count, "running under a hypervisor" */
			e->ebx = (e->ebx & 0xffff) | (c->id << 24) | ((ncpus & 0xff) << 16);
			e->ecx |= 1u << 31;
			break;
		case 0xb:
		case 0x1f:
			e->edx = c->id; /* x2APIC id */
			break;
		default:
			break;
		}
	}
	khz = ioctl(c->fd, KVM_GET_TSC_KHZ, 0);
	e = cpuid_add(cp, cap, CPUID_HV_BASE);
	/* KVM's signature: the guest then uses kvmclock and KVM's paravirt features */
	memcpy(&e->ebx, sig, 4);
	memcpy(&e->ecx, sig + 4, 4);
	memcpy(&e->edx, sig + 8, 4);
	e->eax = khz > 0 ? CPUID_HV_TIMING : CPUID_HV_FEATURES;
	cpuid_add(cp, cap, CPUID_HV_FEATURES); /* KVM's features, kept as they are */
	if (khz > 0) {
		e = cpuid_add(cp, cap, CPUID_HV_TIMING);
		e->eax = (uint32_t)khz;
		e->ebx = CPUID_APIC_BUS_KHZ;
		e->ecx = e->edx = 0;
	}
	if (ioctl(c->fd, KVM_SET_CPUID2, cp) < 0)
		ret = cpu_fail(c, "KVM_SET_CPUID2", why, why_len);
	free(cp);
	return ret;
}

static int cpu_set_msrs(struct vcpu *c, const struct note_sink *notes, char *why,
			size_t why_len)
{
	static const uint32_t idx[] = {
		MSR_IA32_SYSENTER_CS, MSR_IA32_SYSENTER_ESP, MSR_IA32_SYSENTER_EIP, MSR_STAR,
		MSR_LSTAR, MSR_CSTAR, MSR_KERNEL_GS_BASE, MSR_SYSCALL_MASK, MSR_IA32_TSC,
		MSR_IA32_MISC_ENABLE, MSR_MTRR_DEF_TYPE,
	};
	const unsigned n = sizeof(idx) / sizeof(idx[0]);
	struct {
		struct kvm_msrs h;
		struct kvm_msr_entry e[sizeof(idx) / sizeof(idx[0])];
	} m = { 0 };
	int ret;

	m.h.nmsrs = n;
	for (unsigned i = 0; i < n; i++) {
		m.e[i].index = idx[i];
		if (idx[i] == MSR_IA32_MISC_ENABLE)
			m.e[i].data = 1;                /* fast strings */
		else if (idx[i] == MSR_MTRR_DEF_TYPE)
			m.e[i].data = (1u << 11) | 6;   /* MTRRs on, default write-back */
	}
	ret = ioctl(c->fd, KVM_SET_MSRS, &m);
	if (ret < 0)
		return cpu_fail(c, "KVM_SET_MSRS", why, why_len);
	if ((unsigned)ret < n) /* KVM stops at the first MSR it refuses: set the rest anyway */
		note_emit(notes, NOTE_DEBUG, "vCPU %u: KVM refused MSR 0x%x", c->id, idx[ret]);
	return 0;
}

static int cpu_set_lapic(struct vcpu *c, char *why, size_t why_len)
{
	struct kvm_lapic_state l;
	uint32_t v;

	if (ioctl(c->fd, KVM_GET_LAPIC, &l) < 0)
		return cpu_fail(c, "KVM_GET_LAPIC", why, why_len);
	memcpy(&v, l.regs + APIC_LVT0, 4);
	v = (v & ~0x700u) | APIC_MODE_EXTINT << 8;
	memcpy(l.regs + APIC_LVT0, &v, 4);
	memcpy(&v, l.regs + APIC_LVT1, 4);
	v = (v & ~0x700u) | APIC_MODE_NMI << 8;
	memcpy(l.regs + APIC_LVT1, &v, 4);
	if (ioctl(c->fd, KVM_SET_LAPIC, &l) < 0)
		return cpu_fail(c, "KVM_SET_LAPIC", why, why_len);
	return 0;
}

int cpu_create(struct kvm_vm *vm, unsigned id, unsigned ncpus, bool hw_virt, bool state_follows,
	       struct vcpu *c, const struct note_sink *notes, char *why, size_t why_len)
{
	struct kvm_fpu fpu = { .fcw = 0x37f, .mxcsr = 0x1f80 };
	int ret;

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->park_lock, NULL);
	pthread_cond_init(&c->park_cond, NULL);
	c->id = id;
	c->hw_virt = hw_virt;
	c->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)id);
	if (c->fd < 0)
		return cpu_fail(c, "KVM_CREATE_VCPU", why, why_len);
	c->run_size = vm->vcpu_mmap_size;
	c->run = mmap(NULL, (size_t)c->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->run == MAP_FAILED) {
		c->run = NULL;
		return cpu_fail(c, "mmap of kvm_run", why, why_len);
	}
	ret = cpu_set_cpuid(vm, c, ncpus, why, why_len);
	if (state_follows)
		return ret;   /* the restored state sets MSRs, FPU and LAPIC */
	if (!ret)
		ret = cpu_set_msrs(c, notes, why, why_len);
	if (!ret && ioctl(c->fd, KVM_SET_FPU, &fpu) < 0)
		ret = cpu_fail(c, "KVM_SET_FPU", why, why_len);
	if (!ret)
		ret = cpu_set_lapic(c, why, why_len);
	return ret;
}

static void cpu_flat_seg(struct kvm_segment *s, uint16_t sel, uint8_t type, bool code64,
			 bool db)
{
	memset(s, 0, sizeof(*s));
	s->base = 0;
	s->limit = 0xffffffff;
	s->selector = sel;
	s->type = type;
	s->present = 1;
	s->s = 1;
	s->l = code64;
	s->db = db;
	s->g = 1;
}

int cpu_boot_regs(struct vcpu *c, enum boot_proto proto, uint64_t entry, char *why,
		  size_t why_len)
{
	struct kvm_sregs s;
	struct kvm_regs r = { 0 };
	bool lm = proto == BOOT_LINUX64;

	if (ioctl(c->fd, KVM_GET_SREGS, &s) < 0)
		return cpu_fail(c, "KVM_GET_SREGS", why, why_len);
	/* the GDT boot_tables_setup() wrote: 0x8 code, 0x10 data, 0x18 TSS */
	cpu_flat_seg(&s.cs, 0x8, 0xb, lm, !lm);
	cpu_flat_seg(&s.ds, 0x10, 0x3, false, true);
	s.es = s.fs = s.gs = s.ss = s.ds;
	cpu_flat_seg(&s.tr, 0x18, 0xb, false, false);
	s.tr.s = 0;
	s.gdt.base = BOOT_GDT_ADDR;
	s.gdt.limit = 4 * 8 - 1;
	s.idt.base = BOOT_IDT_ADDR;
	s.idt.limit = 7;
	if (lm) {
		s.cr0 = X86_CR0_PE | X86_CR0_ET | X86_CR0_PG;
		s.cr3 = BOOT_PML4_ADDR;
		s.cr4 = X86_CR4_PAE;
		s.efer = EFER_LME | EFER_LMA;
		r.rsi = BOOT_ZERO_PAGE_ADDR;
	} else {
		s.cr0 = X86_CR0_PE | X86_CR0_ET;
		s.cr3 = s.cr4 = 0;
		s.efer = 0;
		r.rbx = BOOT_PVH_INFO_ADDR;
	}
	r.rip = entry;
	r.rsp = r.rbp = CPU_BOOT_STACK;
	r.rflags = 0x2;
	if (ioctl(c->fd, KVM_SET_SREGS, &s) < 0 || ioctl(c->fd, KVM_SET_REGS, &r) < 0)
		return cpu_fail(c, "KVM_SET_SREGS/REGS", why, why_len);
	return 0;
}

static const char *cpu_suberror_name(uint32_t s)
{
	switch (s) {
	case KVM_INTERNAL_ERROR_EMULATION: return "emulation failure";
	case KVM_INTERNAL_ERROR_SIMUL_EX: return "simultaneous exceptions";
	case KVM_INTERNAL_ERROR_DELIVERY_EV: return "event delivery failure";
	case KVM_INTERNAL_ERROR_UNEXPECTED_EXIT_REASON: return "unexpected exit reason";
	default: return "unknown suberror";
	}
}

/* One line: the suberror, where, the instruction bytes if KVM gave them, and why. */
static void cpu_internal_error(struct vcpu *c)
{
	struct kvm_run *run = c->run;
	struct kvm_regs r;
	char rip[40] = "", bytes[3 * 15 + 32] = "";
	size_t n = 0;

	if (!ioctl(c->fd, KVM_GET_REGS, &r))
		snprintf(rip, sizeof(rip), " at rip 0x%llx", (unsigned long long)r.rip);
	if (run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION &&
	    run->emulation_failure.ndata >= 3 &&
	    (run->emulation_failure.flags & KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES)) {
		unsigned len = run->emulation_failure.insn_size;

		n = (size_t)snprintf(bytes, sizeof(bytes), " (instruction bytes");
		for (unsigned i = 0; i < len && i < 15; i++)
			n += (size_t)snprintf(bytes + n, sizeof(bytes) - n, " %02x",
					      run->emulation_failure.insn_bytes[i]);
		snprintf(bytes + n, sizeof(bytes) - n, ")");
	}
	log_error("vCPU %u: KVM internal error: %s%s%s: %s", c->id,
		  cpu_suberror_name(run->internal.suberror), rip, bytes,
		  c->hw_virt ? "this KVM cannot run this guest" :
			       "KVM here is a software implementation (no vmx/svm in /proc/cpuinfo) "
			       "and cannot run this guest");
}

/* After an interrupted KVM_RUN: answer the latest kick. */
static void cpu_answer_kick(struct vcpu *c)
{
	unsigned gen = __atomic_load_n(&c->kick_gen, __ATOMIC_ACQUIRE);
	struct kvm_mp_state mp = { 0 };
	struct kvm_regs r;
	bool dead = false;

	if (!gen || __atomic_load_n(&c->dead_gen, __ATOMIC_RELAXED) == gen)
		return;
	if (!ioctl(c->fd, KVM_GET_MP_STATE, &mp)) {
		if (mp.mp_state == KVM_MP_STATE_UNINITIALIZED ||
		    mp.mp_state == KVM_MP_STATE_INIT_RECEIVED)
			dead = true; /* an AP nobody started */
		else if (mp.mp_state == KVM_MP_STATE_HALTED && !ioctl(c->fd, KVM_GET_REGS, &r))
			dead = !(r.rflags & X86_EFLAGS_IF);
	}
	__atomic_store_n(&c->dead_gen, dead ? gen : 0, __ATOMIC_RELEASE);
	if (log_get_level() >= 3 && gen % 100 == 0 && !ioctl(c->fd, KVM_GET_REGS, &r))
		log_debug("vCPU %u: rip 0x%llx (mp_state %u)", c->id, (unsigned long long)r.rip,
			  mp.mp_state); /* about once a second: where a slow guest is */
	if (dead && c->bus->report) /* "still running" is told by not answering */
		c->bus->report(c->bus->ctx);
}

static void cpu_count_exit(struct vcpu *c, uint32_t reason)
{
	enum cpu_exit e;

	switch (reason) {
	case KVM_EXIT_IO: e = CPU_EXIT_IO; break;
	case KVM_EXIT_MMIO: e = CPU_EXIT_MMIO; break;
	case KVM_EXIT_INTR: e = CPU_EXIT_INTR; break;
	case KVM_EXIT_HLT: e = CPU_EXIT_HLT; break;
	case KVM_EXIT_SHUTDOWN: e = CPU_EXIT_SHUTDOWN; break;
	case KVM_EXIT_SYSTEM_EVENT: e = CPU_EXIT_SYSTEM_EVENT; break;
	default: e = CPU_EXIT_OTHER; break;
	}
	__atomic_fetch_add(&c->exits[e], 1, __ATOMIC_RELAXED);
}

const char *cpu_exit_name(enum cpu_exit e)
{
	static const char *const names[CPU_EXIT_NR] = {
		[CPU_EXIT_IO] = "io", [CPU_EXIT_MMIO] = "mmio", [CPU_EXIT_INTR] = "intr",
		[CPU_EXIT_KICK] = "kick", [CPU_EXIT_HLT] = "hlt", [CPU_EXIT_SHUTDOWN] = "shutdown",
		[CPU_EXIT_SYSTEM_EVENT] = "system_event", [CPU_EXIT_OTHER] = "other",
	};

	return e < CPU_EXIT_NR ? names[e] : "?";
}

/* 1: keep running, 0: the VM ends (bus->end was called). */
static int cpu_handle_exit(struct vcpu *c)
{
	struct kvm_run *run = c->run;
	const struct cpu_bus *b = c->bus;
	uint8_t *d;

	cpu_count_exit(c, run->exit_reason);
	switch (run->exit_reason) {
	case KVM_EXIT_IO:
		d = (uint8_t *)run + run->io.data_offset;
		for (uint32_t i = 0; i < run->io.count; i++, d += run->io.size)
			b->pio(b->ctx, run->io.port, d, run->io.size,
			       run->io.direction == KVM_EXIT_IO_OUT);
		return 1;
	case KVM_EXIT_MMIO:
		b->mmio(b->ctx, run->mmio.phys_addr, run->mmio.data, run->mmio.len,
			run->mmio.is_write);
		return 1;
	case KVM_EXIT_INTR:
		return 1;
	case KVM_EXIT_HLT: /* only without an in-kernel LAPIC: nothing can wake it */
		b->end(b->ctx, c->id, CPU_END_POWEROFF);
		return 0;
	case KVM_EXIT_SHUTDOWN:
		b->end(b->ctx, c->id, CPU_END_TRIPLE);
		return 0;
	case KVM_EXIT_SYSTEM_EVENT:
		switch (run->system_event.type) {
		case KVM_SYSTEM_EVENT_SHUTDOWN:
			b->end(b->ctx, c->id, CPU_END_POWEROFF);
			return 0;
		case KVM_SYSTEM_EVENT_RESET:
			b->end(b->ctx, c->id, CPU_END_RESET);
			return 0;
		case KVM_SYSTEM_EVENT_CRASH:
			b->end(b->ctx, c->id, CPU_END_CRASH);
			return 0;
		default:
			return 1;
		}
	case KVM_EXIT_FAIL_ENTRY:
		log_error("vCPU %u: KVM could not enter the guest (hardware entry failure reason "
			  "0x%llx)", c->id,
			  (unsigned long long)run->fail_entry.hardware_entry_failure_reason);
		break;
	case KVM_EXIT_INTERNAL_ERROR:
		cpu_internal_error(c);
		break;
	default:
		log_error("vCPU %u: unexpected KVM exit reason %u", c->id, run->exit_reason);
		break;
	}
	b->end(b->ctx, c->id, CPU_END_ERROR);
	return 0;
}

/*
 * Out of KVM_RUN after a kick: park while paused (cpu_pause waits for it). The pause flag is
 * read after immediate_exit was cleared (both sequentially consistent, and cpu_pause sets
 * them the other way round), so a pause is never missed: seen here, or immediate_exit stays
 * set and the next KVM_RUN returns at once.
 */
static void cpu_park(struct vcpu *c)
{
	if (!__atomic_load_n(&c->pause, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&c->park_lock);
	c->parked = true;
	pthread_cond_broadcast(&c->park_cond);
	while (__atomic_load_n(&c->pause, __ATOMIC_SEQ_CST) &&
	       !__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
		pthread_cond_wait(&c->park_cond, &c->park_lock);
	c->parked = false;
	pthread_mutex_unlock(&c->park_lock);
}

static void cpu_ended(struct vcpu *c)
{
	pthread_mutex_lock(&c->park_lock);
	c->parked = true; /* for good: a pause does not wait for it */
	pthread_cond_broadcast(&c->park_cond);
	pthread_mutex_unlock(&c->park_lock);
}

/* When the guest first left KVM_RUN in this process: its first instruction had run by then. */
static void cpu_first_exit(struct vcpu *c)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	__atomic_store_n(&c->first_exit_ns, (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec,
			 __ATOMIC_RELAXED);
}

static void *cpu_main(void *arg)
{
	struct vcpu *c = arg;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, CPU_KICK_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		if (ioctl(c->fd, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				__atomic_fetch_add(&c->exits[CPU_EXIT_KICK], 1, __ATOMIC_RELAXED);
				__atomic_store_n(&c->run->immediate_exit, 0, __ATOMIC_SEQ_CST);
				cpu_park(c);
				cpu_answer_kick(c);
				continue;
			}
			log_error("vCPU %u: KVM_RUN: %s", c->id, strerror(errno));
			c->bus->end(c->bus->ctx, c->id, CPU_END_ERROR);
			break;
		}
		if (!__atomic_load_n(&c->first_exit_ns, __ATOMIC_RELAXED))
			cpu_first_exit(c);
		if (!cpu_handle_exit(c))
			break;
	}
	cpu_ended(c);
	return NULL;
}

static void cpu_kick_handler(int sig)
{
	(void)sig; /* only there to make KVM_RUN return EINTR */
}

int cpu_start(struct vcpu *c, const struct cpu_bus *bus, char *why, size_t why_len)
{
	struct sigaction sa = { .sa_handler = cpu_kick_handler };
	sigset_t set, old;
	int ret;

	c->bus = bus;
	sigemptyset(&sa.sa_mask);
	if (sigaction(CPU_KICK_SIGNAL, &sa, NULL) < 0)
		return cpu_fail(c, "sigaction", why, why_len);
	/* blocked everywhere but in the vCPU threads */
	sigemptyset(&set);
	sigaddset(&set, CPU_KICK_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	ret = pthread_create(&c->thread, NULL, cpu_main, c);
	if (ret)
		return why_set(why, why_len, -ret, "vCPU %u: cannot start its thread: %s", c->id,
			       strerror(ret));
	c->started = true;
	return 0;
}

void cpu_kick(struct vcpu *c, unsigned gen)
{
	if (!c->started)
		return;
	if (gen)
		__atomic_store_n(&c->kick_gen, gen, __ATOMIC_RELEASE);
	__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_RELEASE);
	pthread_kill(c->thread, CPU_KICK_SIGNAL);
}

void cpu_pause(struct vcpu *c)
{
	if (!c->started)
		return;
	__atomic_store_n(&c->pause, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&c->park_lock);
	while (!c->parked) {
		struct timespec t;

		/* the kick again until it parks: a signal may land between two KVM_RUNs */
		__atomic_store_n(&c->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
		pthread_kill(c->thread, CPU_KICK_SIGNAL);
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 1000000;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->park_cond, &c->park_lock, &t);
	}
	pthread_mutex_unlock(&c->park_lock);
}

void cpu_resume(struct vcpu *c)
{
	pthread_mutex_lock(&c->park_lock);
	__atomic_store_n(&c->pause, 0, __ATOMIC_SEQ_CST);
	pthread_cond_broadcast(&c->park_cond);
	pthread_mutex_unlock(&c->park_lock);
}

bool cpu_dead(const struct vcpu *c, unsigned gen)
{
	return __atomic_load_n(&c->dead_gen, __ATOMIC_ACQUIRE) == gen;
}

void cpu_destroy(struct vcpu *c)
{
	if (c->started) {
		__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
		pthread_mutex_lock(&c->park_lock);
		pthread_cond_broadcast(&c->park_cond); /* a parked thread sees stop */
		pthread_mutex_unlock(&c->park_lock);
		cpu_kick(c, 0);
		pthread_join(c->thread, NULL);
		c->started = false;
	}
	if (c->run)
		munmap(c->run, (size_t)c->run_size);
	if (c->fd > 0)
		close(c->fd);
	c->run = NULL;
	c->fd = -1;
	pthread_mutex_destroy(&c->park_lock);
	pthread_cond_destroy(&c->park_cond);
}
