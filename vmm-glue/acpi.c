// SPDX-License-Identifier: MIT
/*
 * ACPI tables for a firmware-less x86 guest (ACPI 6.5 layouts): RSDP -> XSDT -> FADT
 * (hardware-reduced, X_DSDT) + MADT, and a DSDT whose AML is produced by the small
 * emitter below. See acpi.h for the contract.
 *
 * Layout in the caller's buffer, each table 16-byte aligned, gaps zeroed:
 *   RSDP (36) | XSDT (36 + 2 * 8) | FADT (276) | MADT | DSDT
 *
 * Interrupt model: the in-kernel KVM irqchip (dual 8259 + one 24-pin IOAPIC at GSI base
 * 0) with KVM's default GSI routing, which connects GSI n to IOAPIC pin n (and, below 16,
 * to 8259 input n % 8). So the PIT (KVM raises GSI 0) arrives on pin 0, not on pin 2 as on
 * a PC: QEMU and kvmtool publish "IRQ 0 -> GSI 2" only because they install their own
 * routing (GSI 0 -> pin 2); Firecracker, with the default routing, publishes no override.
 * The MADT therefore says PCAT_COMPAT (the 8259 pair exists) and overrides ISA IRQ 0 to
 * GSI 0, edge, active high (PIT_GSI below: change it together with the VMM's routing).
 * A Linux guest in hardware-reduced mode uses neither the PIT nor the 8259 anyway. COM1
 * keeps the ISA identity IRQ 4 -> GSI 4 (edge, active high) and needs no override.
 * Virtio-mmio interrupts are edge-triggered: the VMM pulses them through irqfds.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "../common/le.h"
#include "acpi.h"

#define OEM_ID		"LAZYBK"	/* 6 bytes */
#define OEM_TABLE_ID	"LAZYBLK "	/* 8 bytes */
#define OEM_REVISION	1
#define CREATOR_ID	"LZBK"		/* 4 bytes */
#define CREATOR_REV	1
#define HV_VENDOR_ID	"LAZYBLK "	/* FADT Hypervisor Vendor Identity, 8 bytes */

#define HDR_LEN		36
#define RSDP_LEN	36
#define RSDP_V1_LEN	20
#define XSDT_LEN	(HDR_LEN + 2 * 8)
#define FADT_LEN	276		/* ACPI 6.0+: ends with the Hypervisor Vendor Identity */
#define MADT_HDR_LEN	44
#define TABLE_ALIGN	16

/* FADT fixed feature flags (ACPI 6.5 table 5.10) */
#define FADT_F_WBINVD		(1u << 0)
#define FADT_F_PWR_BUTTON	(1u << 4)	/* set: no fixed-feature power button */
#define FADT_F_SLP_BUTTON	(1u << 5)	/* set: no fixed-feature sleep button */
#define FADT_F_RESET_REG_SUP	(1u << 10)
#define FADT_F_HW_REDUCED_ACPI	(1u << 20)

/* FADT IA-PC boot architecture flags (table 5.11); LEGACY_DEVICES and 8042 stay clear */
#define IAPC_VGA_NOT_PRESENT	(1u << 2)
#define IAPC_MSI_NOT_SUPPORTED	(1u << 3)
#define IAPC_PCIE_ASPM_CONTROLS	(1u << 4)
#define IAPC_CMOS_RTC_NOT_PRESENT (1u << 5)

/* The i8042 reset the VMM implements doubles as the FADT reset register. */
#define RESET_PORT		0x64
#define RESET_VALUE		0xfe

#define MADT_PCAT_COMPAT	(1u << 0)
#define MADT_LAPIC_ENABLED	(1u << 0)
#define MADT_T_LAPIC		0
#define MADT_T_IOAPIC		1
#define MADT_T_ISO		2
#define MADT_T_LAPIC_NMI	4
#define MADT_LAPIC_LEN		8
#define MADT_IOAPIC_LEN		12
#define MADT_ISO_LEN		10
#define MADT_LAPIC_NMI_LEN	6

#define PIT_IRQ			0
#define PIT_GSI			0	/* KVM default routing: GSI 0 -> IOAPIC pin 0 */
#define PIC_CASCADE_GSI		2
#define COM1_IRQ		4
#define COM1_PORT		0x3f8
#define COM1_PORTS		8

static uint8_t sum8(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

/* The common 36-byte header; the checksum (offset 9) is set by table_seal(). */
static void table_header(uint8_t *t, const char sig[4], uint32_t len, uint8_t rev)
{
	memcpy(t, sig, 4);
	le32_put(t + 4, len);
	t[8] = rev;
	memcpy(t + 10, OEM_ID, 6);
	memcpy(t + 16, OEM_TABLE_ID, 8);
	le32_put(t + 24, OEM_REVISION);
	memcpy(t + 28, CREATOR_ID, 4);
	le32_put(t + 32, CREATOR_REV);
}

static void table_seal(uint8_t *t, size_t len)
{
	t[9] = 0;
	t[9] = -sum8(t, len);
}

/* Generic Address Structure (12 bytes) */
static void gas(uint8_t *p, uint8_t space, uint8_t bits, uint8_t access, uint64_t addr)
{
	p[0] = space;
	p[1] = bits;
	p[2] = 0;
	p[3] = access;
	le64_put(p + 4, addr);
}

/*
 * AML emitter. With p == NULL it only counts, so every construct is measured with the same
 * code that later writes it: a PkgLength needs the length of what follows it.
 */
struct aml {
	uint8_t *p;
	size_t n;
};

#define AML_ZERO	0x00
#define AML_ONE		0x01
#define AML_NAME	0x08
#define AML_BYTE	0x0a
#define AML_WORD	0x0b
#define AML_DWORD	0x0c
#define AML_STRING	0x0d
#define AML_QWORD	0x0e
#define AML_SCOPE	0x10
#define AML_PACKAGE	0x12
#define AML_METHOD	0x14
#define AML_RETURN	0xa4
#define AML_BUFFER	0x11
#define AML_EXT		0x5b
#define AML_DEVICE	0x82	/* after AML_EXT */
#define AML_ROOT	0x5c	/* '\' */

static void aml_bytes(struct aml *a, const void *src, size_t len)
{
	if (a->p)
		memcpy(a->p + a->n, src, len);
	a->n += len;
}

static void aml_byte(struct aml *a, uint8_t b)
{
	aml_bytes(a, &b, 1);
}

/* PkgLength (ACPI 6.5 20.2.4) for body bytes following it; it counts its own bytes. */
static void aml_pkglen(struct aml *a, size_t body)
{
	size_t total;
	unsigned extra;

	if (body + 1 < 0x40) {
		aml_byte(a, body + 1);
		return;
	}
	for (extra = 1; extra <= 3; extra++) {
		total = body + 1 + extra;
		if (total < (size_t)1 << (4 + 8 * extra))
			break;
	}
	/* callers keep bodies far below the 2^28 limit (extra <= 3 always breaks) */
	aml_byte(a, extra << 6 | (total & 0xf));
	for (unsigned i = 0; i < extra; i++)
		aml_byte(a, total >> (4 + 8 * i));
}

static void aml_int(struct aml *a, uint64_t v)
{
	uint8_t le[8];
	size_t n;
	uint8_t op;

	if (v <= 1) {
		aml_byte(a, v ? AML_ONE : AML_ZERO);
		return;
	}
	if (v <= 0xff) {
		op = AML_BYTE;
		n = 1;
	} else if (v <= 0xffff) {
		op = AML_WORD;
		n = 2;
	} else if (v <= 0xffffffff) {
		op = AML_DWORD;
		n = 4;
	} else {
		op = AML_QWORD;
		n = 8;
	}
	le64_put(le, v);
	aml_byte(a, op);
	aml_bytes(a, le, n);
}

static void aml_name_int(struct aml *a, const char seg[4], uint64_t v)
{
	aml_byte(a, AML_NAME);
	aml_bytes(a, seg, 4);
	aml_int(a, v);
}

static void aml_name_str(struct aml *a, const char seg[4], const char *s)
{
	aml_byte(a, AML_NAME);
	aml_bytes(a, seg, 4);
	aml_byte(a, AML_STRING);
	aml_bytes(a, s, strlen(s) + 1);
}

/* Name (seg, Buffer () { res }) for a resource template whose EndTag is already in res. */
static void aml_name_buf(struct aml *a, const char seg[4], const uint8_t *res, size_t len)
{
	struct aml m = { NULL, 0 };

	aml_int(&m, len);
	aml_byte(a, AML_NAME);
	aml_bytes(a, seg, 4);
	aml_byte(a, AML_BUFFER);
	aml_pkglen(a, m.n + len);
	aml_int(a, len);
	aml_bytes(a, res, len);
}

/* Resource descriptors (ACPI 6.5 6.4); res_end() appends the EndTag with its checksum. */
struct res {
	uint8_t b[32];
	size_t n;
};

static void res_mem32fixed(struct res *r, uint32_t base, uint32_t size)
{
	uint8_t *p = r->b + r->n;

	p[0] = 0x86;		/* large item 0x06 */
	le16_put(p + 1, 9);
	p[3] = 1;		/* read-write */
	le32_put(p + 4, base);
	le32_put(p + 8, size);
	r->n += 12;
}

static void res_ext_irq(struct res *r, uint32_t gsi, bool shared)
{
	uint8_t *p = r->b + r->n;

	p[0] = 0x89;		/* large item 0x09 */
	le16_put(p + 1, 6);
	/* consumer (bit 0), edge (bit 1), active high (bit 2 = 0), shared (bit 3) */
	p[3] = 0x01 | 0x02 | (shared ? 0x08 : 0);
	p[4] = 1;		/* one interrupt */
	le32_put(p + 5, gsi);
	r->n += 9;
}

static void res_io16(struct res *r, uint16_t port, uint8_t count)
{
	uint8_t *p = r->b + r->n;

	p[0] = 0x47;		/* small item 0x08, length 7 */
	p[1] = 1;		/* 16-bit decode */
	le16_put(p + 2, port);
	le16_put(p + 4, port);
	p[6] = 0;		/* alignment */
	p[7] = count;
	r->n += 8;
}

static void res_irq_noflags(struct res *r, unsigned irq)
{
	uint8_t *p = r->b + r->n;

	p[0] = 0x22;		/* small item 0x04, length 2: edge, active high, exclusive */
	le16_put(p + 1, 1u << irq);
	r->n += 3;
}

static void res_end(struct res *r)
{
	r->b[r->n] = 0x79;	/* small item 0x0f, length 1 */
	r->b[r->n + 1] = 0;
	r->b[r->n + 1] = -sum8(r->b, r->n + 1);
	r->n += 2;
}

static void dev_name(char seg[5], unsigned i)
{
	seg[0] = 'V';
	seg[1] = '0' + i / 100 % 10;
	seg[2] = '0' + i / 10 % 10;
	seg[3] = '0' + i % 10;
	seg[4] = 0;
}

static bool gsi_shared(const struct acpi_config *c, unsigned i)
{
	for (unsigned j = 0; j < c->ndevs; j++)
		if (j != i && c->devs[j].gsi == c->devs[i].gsi)
			return true;
	return false;
}

static void virtio_body(struct aml *a, const struct acpi_config *c, unsigned i)
{
	const struct acpi_mmio_dev *d = &c->devs[i];
	struct res r = { .n = 0 };
	char seg[5];

	dev_name(seg, i);
	aml_bytes(a, seg, 4);
	aml_name_str(a, "_HID", "LNRO0005");
	aml_name_int(a, "_UID", i);
	res_mem32fixed(&r, d->base, d->size);
	res_ext_irq(&r, d->gsi, gsi_shared(c, i));
	res_end(&r);
	aml_name_buf(a, "_CRS", r.b, r.n);
}

/* PNP0501 as a compressed EISA id: "PNP" in 5-bit letters, then 0x0501, big-endian. */
#define EISA_PNP0501	0x0105d041u

static void com1_body(struct aml *a)
{
	struct res r = { .n = 0 };

	aml_bytes(a, "COM1", 4);
	aml_name_int(a, "_HID", EISA_PNP0501);
	aml_name_int(a, "_UID", 0);
	res_io16(&r, COM1_PORT, COM1_PORTS);
	res_irq_noflags(&r, COM1_IRQ);
	res_end(&r);
	aml_name_buf(a, "_CRS", r.b, r.n);
}

static void aml_dword(struct aml *a, uint32_t v)
{
	uint8_t le[4];

	le32_put(le, v);
	aml_byte(a, AML_DWORD);
	aml_bytes(a, le, 4);
}

/* Method (ADDR, 0, NotSerialized) { Return (Package (0x02) { lo, hi }) } */
static void vmgenid_addr(struct aml *a, uint64_t gpa)
{
	const size_t pkg = 1 + 1 + 5 + 5, body = 4 + 1 + 1 + 1 + pkg; /* pkglen bytes: 1 */

	aml_byte(a, AML_METHOD);
	aml_pkglen(a, body);
	aml_bytes(a, "ADDR", 4);
	aml_byte(a, 0);			/* no arguments, not serialized */
	aml_byte(a, AML_RETURN);
	aml_byte(a, AML_PACKAGE);
	aml_pkglen(a, pkg - 1);
	aml_byte(a, 2);
	aml_dword(a, (uint32_t)gpa);
	aml_dword(a, (uint32_t)(gpa >> 32));
}

/* The VM generation ID (Microsoft's "Virtual Machine Generation ID", as QEMU's vmgenid). */
static void vmgenid_body(struct aml *a, const struct acpi_config *c)
{
	aml_bytes(a, "VGEN", 4);
	aml_name_str(a, "_HID", "QEMUVGID");
	aml_name_str(a, "_CID", "VM_Gen_Counter");
	aml_name_str(a, "_DDN", "VM_Gen_Counter");
	vmgenid_addr(a, c->vmgenid_addr);
}

#define AML_IF		0xa0
#define AML_LEQUAL	0x93
#define AML_ARG0	0x68
#define AML_NOTIFY	0x86
#define AML_DUAL_NAME	0x2e

/* If (LEqual (Arg0, gsi)) { Notify (\_SB.VGEN, 0x80) } */
static void ged_evt_if(struct aml *a, uint32_t gsi)
{
	aml_byte(a, AML_LEQUAL);
	aml_byte(a, AML_ARG0);
	aml_int(a, gsi);
	aml_byte(a, AML_NOTIFY);
	aml_byte(a, AML_ROOT);
	aml_byte(a, AML_DUAL_NAME);
	aml_bytes(a, "_SB_VGEN", 8);
	aml_int(a, 0x80);
}

/* Method (_EVT, 1, NotSerialized) { If (...) {...} } */
static void ged_evt(struct aml *a, uint32_t gsi)
{
	struct aml m = { NULL, 0 }, f = { NULL, 0 };

	ged_evt_if(&m, gsi);
	aml_byte(&f, AML_IF);
	aml_pkglen(&f, m.n);
	ged_evt_if(&f, gsi);
	aml_byte(a, AML_METHOD);
	aml_pkglen(a, 4 + 1 + f.n);
	aml_bytes(a, "_EVT", 4);
	aml_byte(a, 1);			/* one argument, not serialized */
	aml_byte(a, AML_IF);
	aml_pkglen(a, m.n);
	ged_evt_if(a, gsi);
}

/*
 * The Generic Event Device (ACPI0013) that tells the guest a new VM generation ID is there:
 * an edge on vmgenid_gsi runs _EVT, which notifies VGEN (0x80), as the specification asks.
 */
static void ged_body(struct aml *a, const struct acpi_config *c)
{
	struct res r = { .n = 0 };

	aml_bytes(a, "GED0", 4);
	aml_name_str(a, "_HID", "ACPI0013");
	res_ext_irq(&r, c->vmgenid_gsi, false);
	res_end(&r);
	aml_name_buf(a, "_CRS", r.b, r.n);
	ged_evt(a, c->vmgenid_gsi);
}

/* i: a virtio-mmio window; -1: COM1; -2: the VM generation ID; -3: its event device. */
static void device_body(struct aml *a, const struct acpi_config *c, int i)
{
	if (i == -1)
		com1_body(a);
	else if (i == -2)
		vmgenid_body(a, c);
	else if (i == -3)
		ged_body(a, c);
	else
		virtio_body(a, c, i);
}

static void aml_device(struct aml *a, const struct acpi_config *c, int i)
{
	struct aml m = { NULL, 0 };

	device_body(&m, c, i);
	aml_byte(a, AML_EXT);
	aml_byte(a, AML_DEVICE);
	aml_pkglen(a, m.n);
	device_body(a, c, i);
}

static void sb_body(struct aml *a, const struct acpi_config *c)
{
	aml_byte(a, AML_ROOT);
	aml_bytes(a, "_SB_", 4);
	aml_device(a, c, -1);
	for (unsigned i = 0; i < c->ndevs; i++)
		aml_device(a, c, i);
	if (c->vmgenid_addr)
		aml_device(a, c, -2);
	if (c->vmgenid_addr && c->vmgenid_gsi)
		aml_device(a, c, -3);
}

/* Scope (\_SB_) { Device (COM1) {...} Device (V000) {...} ... } */
static size_t dsdt_aml(uint8_t *p, const struct acpi_config *c)
{
	struct aml m = { NULL, 0 };
	struct aml a = { p, 0 };

	sb_body(&m, c);
	aml_byte(&a, AML_SCOPE);
	aml_pkglen(&a, m.n);
	sb_body(&a, c);
	return a.n;
}

static size_t madt_len(const struct acpi_config *c)
{
	return MADT_HDR_LEN + c->ncpus * MADT_LAPIC_LEN + MADT_IOAPIC_LEN + MADT_ISO_LEN +
	       MADT_LAPIC_NMI_LEN;
}

static void build_rsdp(uint8_t *t, uint64_t xsdt)
{
	memcpy(t, "RSD PTR ", 8);
	memcpy(t + 9, OEM_ID, 6);
	t[15] = 2;			/* revision: ACPI 2.0+ (XSDT) */
	le32_put(t + 16, 0);		/* no RSDT */
	le32_put(t + 20, RSDP_LEN);
	le64_put(t + 24, xsdt);
	t[8] = -sum8(t, RSDP_V1_LEN);
	t[32] = -sum8(t, RSDP_LEN);
}

static void build_xsdt(uint8_t *t, uint64_t fadt, uint64_t madt)
{
	table_header(t, "XSDT", XSDT_LEN, 1);
	le64_put(t + HDR_LEN, fadt);
	le64_put(t + HDR_LEN + 8, madt);
	table_seal(t, XSDT_LEN);
}

static void build_fadt(uint8_t *t, uint64_t dsdt)
{
	table_header(t, "FACP", FADT_LEN, 6);
	le32_put(t + 40, dsdt);		/* DSDT (32-bit copy of X_DSDT) */
	le16_put(t + 109, IAPC_VGA_NOT_PRESENT | IAPC_MSI_NOT_SUPPORTED |
		       IAPC_PCIE_ASPM_CONTROLS | IAPC_CMOS_RTC_NOT_PRESENT);
	le32_put(t + 112, FADT_F_WBINVD | FADT_F_PWR_BUTTON | FADT_F_SLP_BUTTON |
		       FADT_F_RESET_REG_SUP | FADT_F_HW_REDUCED_ACPI);
	gas(t + 116, 1, 8, 1, RESET_PORT);	/* RESET_REG: system I/O, 8 bits, byte access */
	t[128] = RESET_VALUE;
	t[131] = 5;			/* FADT minor version: ACPI 6.5 */
	le64_put(t + 140, dsdt);		/* X_DSDT */
	memcpy(t + 268, HV_VENDOR_ID, 8);
	table_seal(t, FADT_LEN);
}

static void build_madt(uint8_t *t, const struct acpi_config *c)
{
	size_t len = madt_len(c);
	uint8_t *p = t + MADT_HDR_LEN;

	table_header(t, "APIC", len, 5);
	le32_put(t + 36, c->lapic_addr);
	le32_put(t + 40, MADT_PCAT_COMPAT);
	for (unsigned i = 0; i < c->ncpus; i++, p += MADT_LAPIC_LEN) {
		p[0] = MADT_T_LAPIC;
		p[1] = MADT_LAPIC_LEN;
		p[2] = i;		/* ACPI processor UID */
		p[3] = i;		/* APIC id */
		le32_put(p + 4, MADT_LAPIC_ENABLED);
	}
	p[0] = MADT_T_IOAPIC;
	p[1] = MADT_IOAPIC_LEN;
	p[2] = 0;			/* IOAPIC id: what KVM's IOAPIC reports after reset */
	p[3] = 0;
	le32_put(p + 4, c->ioapic_addr);
	le32_put(p + 8, 0);		/* GSI base */
	p += MADT_IOAPIC_LEN;
	p[0] = MADT_T_ISO;
	p[1] = MADT_ISO_LEN;
	p[2] = 0;			/* bus: ISA */
	p[3] = PIT_IRQ;
	le32_put(p + 4, PIT_GSI);
	le16_put(p + 8, 1 << 2 | 1);	/* edge (trigger 01), active high (polarity 01) */
	p += MADT_ISO_LEN;
	p[0] = MADT_T_LAPIC_NMI;	/* LINT1 = NMI on every processor, as the VMM sets it */
	p[1] = MADT_LAPIC_NMI_LEN;
	p[2] = 0xff;			/* all processors */
	le16_put(p + 3, 0);		/* conforming */
	p[5] = 1;			/* LINT1 */
	table_seal(t, len);
}

static bool gsi_ok(uint32_t gsi)
{
	/* IOAPIC pins only: not the PIT's, the 8259 cascade's (KVM wires GSI 2 to it) or COM1's */
	return gsi < ACPI_IOAPIC_PINS && gsi != PIT_GSI && gsi != PIC_CASCADE_GSI &&
	       gsi != COM1_IRQ;
}

static int check_config(const struct acpi_config *c)
{
	const uint64_t g4 = (uint64_t)1 << 32;

	if (!c->ncpus || c->ncpus > 255)
		return -EINVAL;
	if (c->ndevs > ACPI_MAX_MMIO_DEVS || (c->ndevs && !c->devs))
		return -EINVAL;
	if (c->ioapic_addr >= g4 || c->lapic_addr >= g4 || c->vmgenid_addr % 8)
		return -EINVAL;
	if (c->vmgenid_gsi && !gsi_ok(c->vmgenid_gsi))
		return -EINVAL;
	for (unsigned i = 0; i < c->ndevs && c->vmgenid_gsi; i++)
		if (c->devs[i].gsi == c->vmgenid_gsi)
			return -EINVAL;   /* its own line: _EVT runs on every edge */
	for (unsigned i = 0; i < c->ndevs; i++) {
		const struct acpi_mmio_dev *d = &c->devs[i];

		if (!d->size || d->base >= g4 || d->base + d->size > g4 || !gsi_ok(d->gsi))
			return -EINVAL;
	}
	return 0;
}

static size_t align_up(size_t v)
{
	return (v + TABLE_ALIGN - 1) & ~(size_t)(TABLE_ALIGN - 1);
}

int acpi_build(const struct acpi_config *c, uint8_t *buf, uint64_t gpa, size_t len,
	       uint64_t *rsdp, size_t *used)
{
	size_t xsdt, fadt, madt, dsdt, dsdt_len, end;
	int ret;

	if (!c || !buf || gpa % TABLE_ALIGN)
		return -EINVAL;
	ret = check_config(c);
	if (ret)
		return ret;

	xsdt = align_up(RSDP_LEN);
	fadt = align_up(xsdt + XSDT_LEN);
	madt = align_up(fadt + FADT_LEN);
	dsdt = align_up(madt + madt_len(c));
	dsdt_len = HDR_LEN + dsdt_aml(NULL, c);
	end = dsdt + dsdt_len;
	/* 32-bit copies (DSDT in the FADT) must hold every address */
	if (gpa >= (uint64_t)1 << 32 || end > ((uint64_t)1 << 32) - gpa)
		return -EINVAL;
	if (len < end)
		return -ENOSPC;

	memset(buf, 0, end);
	build_rsdp(buf, gpa + xsdt);
	build_xsdt(buf + xsdt, gpa + fadt, gpa + madt);
	build_fadt(buf + fadt, gpa + dsdt);
	build_madt(buf + madt, c);
	table_header(buf + dsdt, "DSDT", dsdt_len, 2);
	dsdt_aml(buf + dsdt + HDR_LEN, c);
	table_seal(buf + dsdt, dsdt_len);

	if (rsdp)
		*rsdp = gpa;
	if (used)
		*used = end;
	return 0;
}
