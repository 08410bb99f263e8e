/* SPDX-License-Identifier: MIT */
#include "vm_state.h"

#include <cpuid.h>
#include <errno.h>
#include <linux/kvm.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#define VMST_XSAVE_MIN_BUF (64u << 10)   /* larger than any KVM_CAP_XSAVE2 size */

struct vmst_rec {
	uint32_t tag, index, len, zero;
};

int vm_state_put(struct vm_state_buf *b, uint32_t tag, uint32_t index, const void *data,
		 size_t len)
{
	struct vmst_rec h = { .tag = tag, .index = index, .len = (uint32_t)len };
	size_t need = sizeof(h) + ((len + 7) & ~(size_t)7);

	if (len > VMST_RECORD_MAX)
		return -E2BIG;
	if (b->len + need > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		uint8_t *p;

		while (cap < b->len + need)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, &h, sizeof(h));
	if (len)
		memcpy(b->p + b->len + sizeof(h), data, len);
	memset(b->p + b->len + sizeof(h) + len, 0, need - sizeof(h) - len);
	b->len += need;
	return 0;
}

int vm_state_take(struct vm_state_rd *r, uint32_t tag, uint32_t index, size_t min,
		  size_t max, const void **data, size_t *len, const char *what, char *why,
		  size_t why_len)
{
	struct vmst_rec h;
	size_t pad;

	if (r->len - r->off < sizeof(h))
		return why_set(why, why_len, -EINVAL, "vm.state: ends before the %s record",
			       what);
	memcpy(&h, r->p + r->off, sizeof(h));
	if (h.tag != tag || h.index != index || h.zero)
		return why_set(why, why_len, -EINVAL, "vm.state: record at byte %zu is %u/%u, "
			       "not the %s record (%u/%u)", r->off, h.tag, h.index, what, tag,
			       index);
	pad = ((size_t)h.len + 7) & ~(size_t)7;
	if (h.len < min || h.len > max || pad > r->len - r->off - sizeof(h))
		return why_set(why, why_len, -EINVAL, "vm.state: the %s record has %u bytes "
			       "(want %zu..%zu, %zu left)", what, h.len, min, max,
			       r->len - r->off - sizeof(h));
	*data = r->p + r->off + sizeof(h);
	*len = h.len;
	r->off += sizeof(h) + pad;
	return 0;
}

/* A failed ioctl: "vCPU N: WHAT: strerror". */
static int vmst_fail(int cpu, const char *what, char *why, size_t why_len)
{
	int e = errno;

	if (cpu < 0)
		return why_set(why, why_len, -e, "%s: %s", what, strerror(e));
	return why_set(why, why_len, -e, "vCPU %d: %s: %s", cpu, what, strerror(e));
}

/* ioctl get into a fixed-size struct, then a record. */
static int vmst_get(int fd, unsigned long req, void *buf, size_t len, uint32_t tag,
		    uint32_t index, struct vm_state_buf *b, int cpu, const char *what, char *why,
		    size_t why_len)
{
	int ret;

	memset(buf, 0, len);
	if (ioctl(fd, req, buf) < 0)
		return vmst_fail(cpu, what, why, why_len);
	ret = vm_state_put(b, tag, index, buf, len);
	return ret ? why_set(why, why_len, ret, "out of memory") : 0;
}

static int xsave_size(int sys_fd)
{
	int n = ioctl(sys_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	return n > (int)sizeof(struct kvm_xsave) ? n : (int)sizeof(struct kvm_xsave);
}

static int msr_list(int sys_fd, struct kvm_msr_list **out)
{
	struct kvm_msr_list probe = { .nmsrs = 0 }, *l;

	if (ioctl(sys_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
		return -errno;
	if (probe.nmsrs > VMST_MSRS_MAX)
		probe.nmsrs = VMST_MSRS_MAX;
	l = calloc(1, sizeof(*l) + probe.nmsrs * sizeof(l->indices[0]));
	if (!l)
		return -ENOMEM;
	l->nmsrs = probe.nmsrs;
	if (ioctl(sys_fd, KVM_GET_MSR_INDEX_LIST, l) < 0) {
		free(l);
		return -errno;
	}
	*out = l;
	return 0;
}

/* Every MSR of the list this vCPU reads (KVM stops a batch at the first it refuses). */
static int msrs_save(const struct vcpu *c, int sys_fd, struct vm_state_buf *b, char *why,
		     size_t why_len)
{
	struct kvm_msr_list *l = NULL;
	struct kvm_msr_entry *out;
	struct kvm_msrs *batch;
	uint32_t n = 0, i = 0;
	int ret = msr_list(sys_fd, &l);

	if (ret)
		return why_set(why, why_len, ret, "KVM_GET_MSR_INDEX_LIST: %s", strerror(-ret));
	out = calloc(l->nmsrs + 1, sizeof(*out));
	batch = calloc(1, sizeof(*batch) + (l->nmsrs + 1) * sizeof(batch->entries[0]));
	if (!out || !batch)
		ret = why_set(why, why_len, -ENOMEM, "out of memory");
	while (!ret && i < l->nmsrs) {
		int got;

		batch->nmsrs = l->nmsrs - i;
		for (uint32_t k = 0; k < batch->nmsrs; k++)
			batch->entries[k] = (struct kvm_msr_entry){ .index = l->indices[i + k] };
		got = ioctl(c->fd, KVM_GET_MSRS, batch);
		if (got < 0) {
			ret = vmst_fail((int)c->id, "KVM_GET_MSRS", why, why_len);
			break;
		}
		memcpy(&out[n], batch->entries, (size_t)got * sizeof(out[0]));
		n += (uint32_t)got;
		i += (uint32_t)got + 1;   /* skip the one refused */
	}
	if (!ret && vm_state_put(b, VMST_MSRS, c->id, out, n * sizeof(out[0])))
		ret = why_set(why, why_len, -ENOMEM, "out of memory");
	free(batch);
	free(out);
	free(l);
	return ret;
}

int vm_state_cpu_save(const struct vcpu *c, int sys_fd, struct vm_state_buf *b, char *why,
		      size_t why_len)
{
	union {
		struct kvm_regs regs;
		struct kvm_sregs sregs;
		struct kvm_xcrs xcrs;
		struct kvm_lapic_state lapic;
		struct kvm_debugregs dbg;
		struct kvm_mp_state mp;
		struct kvm_vcpu_events ev;
	} u;
	int fd = c->fd, id = (int)c->id, xs = xsave_size(sys_fd), ret;
	void *xsave;

#define GET(req, field, tag, what) \
	vmst_get(fd, req, &u.field, sizeof(u.field), tag, c->id, b, id, what, why, why_len)
	ret = GET(KVM_GET_REGS, regs, VMST_REGS, "KVM_GET_REGS");
	if (!ret)
		ret = GET(KVM_GET_SREGS, sregs, VMST_SREGS, "KVM_GET_SREGS");
	if (!ret) {
		xsave = calloc(1, (size_t)xs);
		if (!xsave)
			return why_set(why, why_len, -ENOMEM, "out of memory");
		ret = vmst_get(fd, xs > (int)sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 :
			       KVM_GET_XSAVE, xsave, (size_t)xs, VMST_XSAVE, c->id, b, id,
			       "KVM_GET_XSAVE", why, why_len);
		free(xsave);
	}
	if (!ret)
		ret = GET(KVM_GET_XCRS, xcrs, VMST_XCRS, "KVM_GET_XCRS");
	if (!ret)
		ret = GET(KVM_GET_LAPIC, lapic, VMST_LAPIC, "KVM_GET_LAPIC");
	if (!ret)
		ret = msrs_save(c, sys_fd, b, why, why_len);
	if (!ret)
		ret = GET(KVM_GET_DEBUGREGS, dbg, VMST_DEBUGREGS, "KVM_GET_DEBUGREGS");
	if (!ret)
		ret = GET(KVM_GET_MP_STATE, mp, VMST_MP_STATE, "KVM_GET_MP_STATE");
	if (!ret)
		ret = GET(KVM_GET_VCPU_EVENTS, ev, VMST_EVENTS, "KVM_GET_VCPU_EVENTS");
#undef GET
	return ret;
}

/* The next record, of exactly len bytes, into KVM with req. */
static int vmst_set(int fd, unsigned long req, struct vm_state_rd *r, uint32_t tag,
		    uint32_t index, size_t len, void *buf, int cpu, const char *what, char *why,
		    size_t why_len)
{
	const void *d;
	size_t got;
	int ret = vm_state_take(r, tag, index, len, len, &d, &got, what, why, why_len);

	if (ret)
		return ret;
	memcpy(buf, d, len);
	if (ioctl(fd, req, buf) < 0)
		return vmst_fail(cpu, what, why, why_len);
	return 0;
}

static int msrs_load(const struct vcpu *c, struct vm_state_rd *r, const struct note_sink *notes,
		     char *why, size_t why_len)
{
	struct kvm_msrs *m;
	const void *d;
	size_t len;
	uint32_t n, i = 0;
	int ret = vm_state_take(r, VMST_MSRS, c->id, 0,
				VMST_MSRS_MAX * sizeof(struct kvm_msr_entry), &d, &len, "MSR",
				why, why_len);

	if (ret)
		return ret;
	if (len % sizeof(struct kvm_msr_entry))
		return why_set(why, why_len, -EINVAL, "vm.state: vCPU %u: MSR record of %zu "
			       "bytes", c->id, len);
	n = (uint32_t)(len / sizeof(struct kvm_msr_entry));
	m = calloc(1, sizeof(*m) + len);
	if (!m)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	while (i < n) {
		int done;

		m->nmsrs = n - i;
		memcpy(m->entries, (const struct kvm_msr_entry *)d + i,
		       m->nmsrs * sizeof(m->entries[0]));
		done = ioctl(c->fd, KVM_SET_MSRS, m);
		if (done < 0) {
			ret = vmst_fail((int)c->id, "KVM_SET_MSRS", why, why_len);
			break;
		}
		if ((uint32_t)done < m->nmsrs)   /* refused: said, and the rest set anyway */
			note_emit(notes, NOTE_DEBUG, "vCPU %u: KVM refused MSR 0x%x = 0x%llx",
				  c->id, m->entries[done].index,
				  (unsigned long long)m->entries[done].data);
		i += (uint32_t)done + 1;
	}
	free(m);
	return ret;
}

/*
 * The host's virtualization is AMD's SVM (CPUID 0x80000001 ECX bit 2), not Intel's VMX.
 */
static bool host_svm(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 2));
}

/*
 * KVM_GET_SREGS on SVM reports TR with the busy bit set (type 11), as Intel's VM entry wants
 * it; an AMD CPU keeps it clear in the VMCB (type 9: "available"), and ignores it when it
 * runs the guest. An emulated SVM may not: QEMU's TCG checks for type 9 before it reads the
 * I/O bitmap, so a restored guest's user-space port I/O after ioperm() (the initramfs
 * writing the exit status) raised #GP in the nested VM the tests use. On SVM the state goes
 * back as the CPU keeps it; on VMX, as saved.
 */
static void sregs_for_host(struct kvm_sregs *s)
{
	if (!s->tr.s && s->tr.type == 11 && host_svm())
		s->tr.type = 9;
}

int vm_state_cpu_load(const struct vcpu *c, struct vm_state_rd *r, const struct note_sink *notes,
		      char *why, size_t why_len)
{
	union {
		struct kvm_regs regs;
		struct kvm_sregs sregs;
		struct kvm_xcrs xcrs;
		struct kvm_lapic_state lapic;
		struct kvm_debugregs dbg;
		struct kvm_mp_state mp;
		struct kvm_vcpu_events ev;
	} u;
	int fd = c->fd, id = (int)c->id, ret;
	const void *d;
	size_t len;
	void *xs;

#define SET(req, field, tag, what) \
	vmst_set(fd, req, r, tag, c->id, sizeof(u.field), &u.field, id, what, why, why_len)
	ret = SET(KVM_SET_REGS, regs, VMST_REGS, "KVM_SET_REGS");
	if (!ret)
		ret = vm_state_take(r, VMST_SREGS, c->id, sizeof(u.sregs), sizeof(u.sregs), &d,
				    &len, "KVM_SET_SREGS", why, why_len);
	if (!ret) {
		memcpy(&u.sregs, d, sizeof(u.sregs));
		sregs_for_host(&u.sregs);
		if (ioctl(fd, KVM_SET_SREGS, &u.sregs) < 0)
			ret = vmst_fail(id, "KVM_SET_SREGS", why, why_len);
	}
	if (!ret)
		ret = vm_state_take(r, VMST_XSAVE, c->id, sizeof(struct kvm_xsave),
				    VMST_RECORD_MAX, &d, &len, "XSAVE", why, why_len);
	if (!ret) {
		/* KVM reads as many bytes as its XSAVE area has: never past the buffer */
		xs = calloc(1, len > VMST_XSAVE_MIN_BUF ? len : VMST_XSAVE_MIN_BUF);
		if (!xs)
			return why_set(why, why_len, -ENOMEM, "out of memory");
		memcpy(xs, d, len);
		if (ioctl(fd, KVM_SET_XSAVE, xs) < 0)
			ret = vmst_fail(id, "KVM_SET_XSAVE", why, why_len);
		free(xs);
	}
	if (!ret)
		ret = SET(KVM_SET_XCRS, xcrs, VMST_XCRS, "KVM_SET_XCRS");
	if (!ret)
		ret = SET(KVM_SET_LAPIC, lapic, VMST_LAPIC, "KVM_SET_LAPIC");
	if (!ret)
		ret = msrs_load(c, r, notes, why, why_len);
	if (!ret)
		ret = SET(KVM_SET_DEBUGREGS, dbg, VMST_DEBUGREGS, "KVM_SET_DEBUGREGS");
	if (!ret)
		ret = SET(KVM_SET_MP_STATE, mp, VMST_MP_STATE, "KVM_SET_MP_STATE");
	if (!ret)
		ret = SET(KVM_SET_VCPU_EVENTS, ev, VMST_EVENTS, "KVM_SET_VCPU_EVENTS");
#undef SET
	return ret;
}

int vm_state_cpuid_save(const struct kvm_cpuid2 *cp, struct vm_state_buf *b, char *why,
			size_t why_len)
{
	int ret = vm_state_put(b, VMST_KVM_CPUID, 0, cp, kvm_cpuid_size(cp->nent));

	return ret ? why_set(why, why_len, ret, "out of memory") : 0;
}

int vm_state_cpuid_take(struct vm_state_rd *r, struct kvm_cpuid2 **out, char *why,
			size_t why_len)
{
	const void *d;
	size_t len;
	uint32_t nent;
	int ret = vm_state_take(r, VMST_KVM_CPUID, 0, kvm_cpuid_size(1),
				kvm_cpuid_size(KVM_CPUID_MAX), &d, &len, "CPUID", why, why_len);

	if (out)
		*out = NULL;
	if (ret)
		return ret;
	memcpy(&nent, d, sizeof(nent));   /* struct kvm_cpuid2's first field */
	if (len != kvm_cpuid_size(nent))
		return why_set(why, why_len, -EINVAL, "vm.state: the CPUID record has %zu bytes "
			       "for %u entries", len, nent);
	if (!out)
		return 0;
	*out = malloc(len);
	if (!*out)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	memcpy(*out, d, len);
	return 0;
}

int vm_state_vm_save(int vm_fd, struct vm_state_buf *b, char *why, size_t why_len)
{
	struct kvm_irqchip chip;
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clk;
	int ret = 0;

	for (uint32_t i = 0; !ret && i < 3; i++) {
		memset(&chip, 0, sizeof(chip));
		chip.chip_id = i;
		if (ioctl(vm_fd, KVM_GET_IRQCHIP, &chip) < 0)
			return vmst_fail(-1, "KVM_GET_IRQCHIP", why, why_len);
		ret = vm_state_put(b, VMST_IRQCHIP, i, &chip, sizeof(chip));
	}
	if (!ret)
		ret = vmst_get(vm_fd, KVM_GET_PIT2, &pit, sizeof(pit), VMST_PIT2, 0, b, -1,
			       "KVM_GET_PIT2", why, why_len);
	if (!ret && ioctl(vm_fd, KVM_GET_CLOCK, &clk) < 0)
		ret = vmst_fail(-1, "KVM_GET_CLOCK", why, why_len);
	if (!ret) {
		/* the clock goes on from this value: not advanced by the time in between */
		clk.flags = 0;
		memset(clk.pad, 0, sizeof(clk.pad));
		ret = vm_state_put(b, VMST_CLOCK, 0, &clk, sizeof(clk));
	}
	return ret == -ENOMEM ? why_set(why, why_len, ret, "out of memory") : ret;
}

int vm_state_vm_load(int vm_fd, struct vm_state_rd *r, char *why, size_t why_len)
{
	struct kvm_irqchip chip;
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clk;
	int ret = 0;

	for (uint32_t i = 0; !ret && i < 3; i++) {
		ret = vmst_set(vm_fd, KVM_SET_IRQCHIP, r, VMST_IRQCHIP, i, sizeof(chip), &chip, -1,
			       "KVM_SET_IRQCHIP", why, why_len);
		if (!ret && chip.chip_id != i)
			ret = why_set(why, why_len, -EINVAL, "vm.state: irqchip %u names chip %u",
				      i, chip.chip_id);
	}
	if (!ret)
		ret = vmst_set(vm_fd, KVM_SET_PIT2, r, VMST_PIT2, 0, sizeof(pit), &pit, -1,
			       "KVM_SET_PIT2", why, why_len);
	if (!ret)
		ret = vmst_set(vm_fd, KVM_SET_CLOCK, r, VMST_CLOCK, 0, sizeof(clk), &clk, -1,
			       "KVM_SET_CLOCK", why, why_len);
	return ret;
}
