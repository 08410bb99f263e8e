/* SPDX-License-Identifier: MIT */
/*
 * What the VMM hands the guest: boot_params (Linux 64-bit boot protocol) or hvm_start_info
 * (PVH), the e820 map, the command line, and the ACPI tables (RSDP -> XSDT -> FACP, APIC,
 * DSDT), from which the virtio-mmio devices (LNRO0005) are found.
 */
#include "guest.h"

struct bootinfo g_boot;

static uint8_t rd8(uint64_t a)
{
	return *(volatile uint8_t *)(uintptr_t)a;
}
static uint32_t rd32(uint64_t a)
{
	return *(volatile uint32_t *)(uintptr_t)a;
}
static uint64_t rd64(uint64_t a)
{
	return *(volatile uint64_t *)(uintptr_t)a;
}

/* boot_params offsets (Documentation/arch/x86/zero-page.rst) */
#define BP_ACPI_RSDP 0x070
#define BP_EXT_CMDLINE 0x0c8
#define BP_E820_ENTRIES 0x1e8
#define BP_CMDLINE 0x228
#define BP_E820_TABLE 0x2d0
/* hvm_start_info (xen/include/public/arch-x86/hvm/start_info.h) */
#define HVM_MAGIC 0x336ec578u

void boot_read(void *info, bool pvh)
{
	uint64_t p = (uintptr_t)info;
	struct bootinfo *b = &g_boot;
	b->pvh = pvh;
	b->info_addr = p;
	uint64_t cmd = 0;
	if (!pvh) {
		unsigned n = rd8(p + BP_E820_ENTRIES);
		check(n > 0 && n <= 128, "boot_params", "at 0x%lx, e820_entries %u", p, n);
		if (n > MAX_E820)
			n = MAX_E820;
		for (unsigned i = 0; i < n; i++) {
			uint64_t e = p + BP_E820_TABLE + 20 * i;
			b->e820[i].addr = rd64(e);
			b->e820[i].size = rd64(e + 8);
			b->e820[i].type = rd32(e + 16);
		}
		b->ne820 = n;
		b->rsdp = rd64(p + BP_ACPI_RSDP);
		cmd = rd32(p + BP_CMDLINE) | (uint64_t)rd32(p + BP_EXT_CMDLINE) << 32;
	} else {
		uint32_t magic = rd32(p), ver = rd32(p + 4);
		check(magic == HVM_MAGIC && ver >= 1, "hvm_start_info",
		      "at 0x%lx, magic 0x%x, version %u", p, magic, ver);
		cmd = rd64(p + 24);
		b->rsdp = rd64(p + 32);
		if (ver >= 1) {
			uint64_t mm = rd64(p + 40);
			unsigned n = rd32(p + 48);
			if (n > MAX_E820)
				n = MAX_E820;
			for (unsigned i = 0; mm && i < n; i++) {
				uint64_t e = mm + 24 * i;
				b->e820[i].addr = rd64(e);
				b->e820[i].size = rd64(e + 8);
				b->e820[i].type = rd32(e + 16);
			}
			b->ne820 = mm ? n : 0;
		}
	}
	b->cmdline = cmd ? (const char *)(uintptr_t)cmd : "";

	extern char __image_start[], __image_end[];
	uint64_t ram = 0;
	for (unsigned i = 0; i < b->ne820; i++) {
		if (!b->e820[i].size) {
			gprintf("guest: e820: [%016lx, empty] type %u\n", b->e820[i].addr,
				b->e820[i].type);
			continue;
		}
		gprintf("guest: e820: [%016lx-%016lx] %s\n", b->e820[i].addr,
			b->e820[i].addr + b->e820[i].size - 1,
			b->e820[i].type == 1 ? "usable" : b->e820[i].type == 2 ? "reserved"
			: b->e820[i].type == 3 ? "ACPI data" : "other");
		if (b->e820[i].type == 1)
			ram += b->e820[i].size;
	}
	b->ram_bytes = ram;
	uint64_t img = (uintptr_t)__image_start, imglen = (uintptr_t)(__image_end - __image_start);
	check(b->ne820 > 0 && ram >= (8u << 20) && ram_contains(img, imglen) &&
		      ram_contains(0x1000, 0x6000),
	      "e820", "%u entries, RAM %lu MiB, image [0x%lx-0x%lx) in RAM", b->ne820, ram >> 20,
	      img, img + imglen);
	gprintf("guest: cmdline: \"%s\"\n", b->cmdline);
}

bool ram_contains(uint64_t addr, uint64_t len)
{
	for (unsigned i = 0; i < g_boot.ne820; i++) {
		const struct e820 *e = &g_boot.e820[i];
		if (e->type == 1 && addr >= e->addr && addr + len <= e->addr + e->size)
			return true;
	}
	return false;
}

/* ---- command line */
static const char *find_word(const char *s, const char *key, const char **after)
{
	size_t kl = strlen(key);
	for (const char *p = s; *p;) {
		while (*p == ' ')
			p++;
		if (!strncmp(p, key, kl)) {
			*after = p + kl;
			return p;
		}
		while (*p && *p != ' ')
			p++;
	}
	return NULL;
}

const char *cmdline_get(const char *key, char *buf, size_t len)
{
	const char *v;
	char k[64];
	size_t kl = strlen(key);
	if (kl + 2 > sizeof(k))
		return NULL;
	memcpy(k, key, kl);
	k[kl] = '=';
	k[kl + 1] = 0;
	if (!find_word(g_boot.cmdline, k, &v))
		return NULL;
	size_t n = 0;
	while (v[n] && v[n] != ' ' && n + 1 < len) {
		buf[n] = v[n];
		n++;
	}
	buf[n] = 0;
	return buf;
}

bool cmdline_flag(const char *key)
{
	char b[8];
	return cmdline_get(key, b, sizeof(b)) && b[0] == '1';
}

uint64_t parse_u64(const char *s, const char **end)
{
	uint64_t v = 0;
	unsigned base = 10;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	for (;; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		v = v * base + d;
	}
	if (end)
		*end = s;
	return v;
}

/* virtio_mmio.device=<size>[KMG]@<base>:<irq>[:<id>] */
unsigned cmdline_mmio(uint64_t base, uint32_t irq, bool *match)
{
	unsigned n = 0;
	const char *p = g_boot.cmdline, *v;
	*match = false;
	while (find_word(p, "virtio_mmio.device=", &v)) {
		const char *e;
		uint64_t size = parse_u64(v, &e);
		if (*e == 'K' || *e == 'k')
			size <<= 10, e++;
		else if (*e == 'M' || *e == 'm')
			size <<= 20, e++;
		else if (*e == 'G' || *e == 'g')
			size <<= 30, e++;
		uint64_t b = 0, i = 0;
		if (*e == '@') {
			b = parse_u64(e + 1, &e);
			if (*e == ':')
				i = parse_u64(e + 1, &e);
		}
		gprintf("guest: cmdline: virtio_mmio.device: size 0x%lx base 0x%lx irq %lu\n", size,
			b, i);
		if (b == base && i == irq && size >= 0x200)
			*match = true;
		n++;
		p = e;
	}
	return n;
}

/* ---- ACPI */
static bool sum_ok(uint64_t a, uint32_t len)
{
	uint8_t s = 0;
	for (uint32_t i = 0; i < len; i++)
		s += rd8(a + i);
	return s == 0;
}

static bool sig_is(uint64_t a, const char *sig)
{
	return !memcmp((const void *)(uintptr_t)a, sig, 4);
}

/* a table header: signature, length in RAM-ish range, checksum */
static bool table_ok(uint64_t a, const char *sig, uint32_t minlen)
{
	if (!a || a >= (1ull << 32))
		return false;
	uint32_t len = rd32(a + 4);
	return sig_is(a, sig) && len >= minlen && len < (1u << 20) && sum_ok(a, len);
}

static uint64_t rsdp_scan(void)
{
	for (uint64_t a = 0xe0000; a < 0x100000; a += 16)
		if (!memcmp((const void *)(uintptr_t)a, "RSD PTR ", 8))
			return a;
	return 0;
}

/* the DSDT's LNRO0005 devices: the resource template after each _HID string */
static unsigned dsdt_devices(uint64_t dsdt, uint32_t len, struct mmio_dev *devs, unsigned max)
{
	const uint8_t *p = (const uint8_t *)(uintptr_t)dsdt;
	unsigned n = 0;
	for (uint32_t i = 36; i + 8 <= len; i++) {
		if (memcmp(p + i, "LNRO0005", 8))
			continue;
		/* this device's bytes: up to the next LNRO0005 (or 512 bytes, or the end) */
		uint32_t end = i + 8 + 512 < len ? i + 8 + 512 : len;
		for (uint32_t j = i + 8; j + 8 <= end; j++)
			if (!memcmp(p + j, "LNRO0005", 8)) {
				end = j;
				break;
			}
		struct mmio_dev d = { 0, 0, ~0u };
		for (uint32_t j = i + 8; j + 9 <= end; j++) {
			if (!d.base && p[j] == 0x86 && p[j + 1] == 9 && p[j + 2] == 0 &&
			    j + 12 <= end) {
				d.base = rd32(dsdt + j + 4);
				d.size = rd32(dsdt + j + 8);
				j += 11;
			} else if (d.irq == ~0u && p[j] == 0x89 && p[j + 2] == 0 && p[j + 1] >= 6 &&
				   p[j + 4] >= 1 && j + 9 <= end) {
				d.irq = rd32(dsdt + j + 5);
				j += 8;
			}
		}
		if (d.base && d.irq != ~0u && n < max)
			devs[n++] = d;
		else
			check(false, "acpi: DSDT", "LNRO0005 at offset %u without Memory32Fixed + "
			      "Interrupt in its resources", i);
		i = end - 1;
	}
	return n;
}

/* An AML integer (ZeroOp, OneOp, Byte/Word/DWord/QWordConst) at p[*i]; false if none. */
static bool aml_int(const uint8_t *p, uint32_t *i, uint32_t end, uint64_t *v)
{
	static const uint8_t size[] = { [0x0a] = 1, [0x0b] = 2, [0x0c] = 4, [0x0e] = 8 };
	uint8_t op = p[*i];
	if (op <= 1) {
		*v = op;
		*i += 1;
		return true;
	}
	if (op > 0x0e || !size[op] || *i + 1 + size[op] > end)
		return false;
	*v = 0;
	for (unsigned k = 0; k < size[op]; k++)
		*v |= (uint64_t)p[*i + 1 + k] << (8 * k);
	*i += 1 + size[op];
	return true;
}

/*
 * The VM generation ID device (_HID "QEMUVGID"): its ADDR method, as the VMM writes it
 * (Method (ADDR) { Return (Package (2) { low, high }) }). 0 when there is none.
 */
static uint64_t dsdt_vmgenid(uint64_t dsdt, uint32_t len)
{
	const uint8_t *p = (const uint8_t *)(uintptr_t)dsdt;
	for (uint32_t i = 36; i + 8 <= len; i++) {
		if (memcmp(p + i, "QEMUVGID", 8))
			continue;
		for (uint32_t j = i + 8; j + 10 <= len && j < i + 256; j++) {
			uint64_t lo, hi;
			uint32_t k = j + 8;
			if (memcmp(p + j, "ADDR\0\xa4\x12", 7) || p[j + 7] >= 0x40 || p[k] != 2)
				continue;
			k++;
			if (aml_int(p, &k, len, &lo) && aml_int(p, &k, len, &hi) && lo < (1ull << 32) &&
			    hi < (1ull << 32))
				return lo | hi << 32;
		}
	}
	return 0;
}

static uint8_t vmgenid_seen[16];

bool vmgenid_show(bool always)
{
	const volatile uint8_t *id = (const volatile uint8_t *)(uintptr_t)g_boot.vmgenid;
	bool same = true;
	if (!g_boot.vmgenid) {
		if (always)
			gprintf("guest: vmgenid: none\n");
		return false;
	}
	for (unsigned i = 0; i < 16; i++) {
		same &= vmgenid_seen[i] == id[i];
		vmgenid_seen[i] = id[i];
	}
	if (same && !always)
		return false;
	gprintf("guest: vmgenid: ");
	for (unsigned i = 0; i < 16; i++)
		gprintf("%02x", vmgenid_seen[i]);
	gprintf(" at 0x%lx\n", g_boot.vmgenid);
	return true;
}

unsigned acpi_scan(struct mmio_dev *devs, unsigned max)
{
	uint64_t r = g_boot.rsdp;
	const char *how = g_boot.pvh ? "hvm_start_info.rsdp_paddr" : "boot_params.acpi_rsdp_addr";
	if (!r) {
		r = rsdp_scan();
		how = "scan of 0xe0000-0xfffff";
	}
	if (!check(r != 0, "acpi: RSDP", "found by %s at 0x%lx", how, r))
		return 0;
	uint8_t rev = rd8(r + 15);
	uint32_t rlen = rd32(r + 20);
	uint64_t xsdt = rd64(r + 24);
	bool ok = !memcmp((void *)(uintptr_t)r, "RSD PTR ", 8) && sum_ok(r, 20) && rev >= 2 &&
		  rlen >= 36 && rlen < 4096 && sum_ok(r, rlen);
	char oem[7];
	memcpy(oem, (void *)(uintptr_t)(r + 9), 6);
	oem[6] = 0;
	if (!check(ok, "acpi: RSDP", "rev %u, length %u, both checksums, OEM \"%s\"", rev, rlen,
		   oem))
		return 0;
	if (!check(table_ok(xsdt, "XSDT", 36), "acpi: XSDT", "at 0x%lx", xsdt))
		return 0;
	uint32_t xlen = rd32(xsdt + 4);
	unsigned nent = (xlen - 36) / 8;
	uint64_t facp = 0, apic = 0;
	gprintf("guest: acpi: XSDT: %u entries:", nent);
	bool all_ok = (xlen - 36) % 8 == 0;
	for (unsigned i = 0; i < nent; i++) {
		uint64_t t = rd64(xsdt + 36 + 8 * i);
		char sig[5] = "????";
		if (t && t < (1ull << 32))
			memcpy(sig, (void *)(uintptr_t)t, 4);
		bool tok = table_ok(t, sig, 36);
		all_ok &= tok;
		gprintf(" %s@0x%lx%s", sig, t, tok ? "" : "(BAD)");
		if (!memcmp(sig, "FACP", 4))
			facp = t;
		else if (!memcmp(sig, "APIC", 4))
			apic = t;
	}
	gprintf("\n");
	check(all_ok, "acpi: XSDT entries", "%u tables, checksums", nent);

	/* FADT: flags at 112 (HW_REDUCED_ACPI = bit 20), DSDT at 40, X_DSDT at 140 */
	uint64_t dsdt = 0;
	if (check(table_ok(facp, "FACP", 116), "acpi: FACP", "at 0x%lx, length %u, rev %u", facp,
		  facp ? rd32(facp + 4) : 0, facp ? rd8(facp + 8) : 0)) {
		uint32_t flen = rd32(facp + 4), flags = rd32(facp + 112);
		uint64_t x = flen >= 148 ? rd64(facp + 140) : 0;
		dsdt = x ? x : rd32(facp + 40);
		check(flags & (1u << 20), "acpi: FACP HW_REDUCED_ACPI", "flags 0x%x", flags);
		check(x != 0, "acpi: FACP X_DSDT", "0x%lx (DSDT 0x%x)", x, rd32(facp + 40));
	}
	/* MADT: entries from 44; type 0 local APIC (flags bit 0 enabled), 1 IOAPIC, 9 x2APIC */
	if (check(table_ok(apic, "APIC", 44), "acpi: APIC", "at 0x%lx", apic)) {
		uint32_t len = rd32(apic + 4);
		unsigned cpus = 0, ioapics = 0, other = 0;
		uint32_t ioapic = 0;
		bool ents_ok = true;
		for (uint32_t o = 44; o < len;) {
			uint8_t type = rd8(apic + o), l = rd8(apic + o + 1);
			if (l < 2 || o + l > len) {
				ents_ok = false;
				break;
			}
			if (type == 0 && l >= 8 && (rd32(apic + o + 4) & 1))
				cpus++;
			else if (type == 9 && l >= 16 && (rd32(apic + o + 8) & 1))
				cpus++;
			else if (type == 1 && l >= 12) {
				ioapics++;
				ioapic = rd32(apic + o + 4);
			} else
				other++;
			o += l;
		}
		check(ents_ok && cpus >= 1, "acpi: APIC entries",
		      "%u cpus, %u IOAPIC (0x%x), %u other entries, LAPIC 0x%x", cpus, ioapics,
		      ioapic, other, rd32(apic + 36));
	}
	if (!check(table_ok(dsdt, "DSDT", 36), "acpi: DSDT", "at 0x%lx, length %u", dsdt,
		   dsdt ? rd32(dsdt + 4) : 0))
		return 0;
	unsigned n = dsdt_devices(dsdt, rd32(dsdt + 4), devs, max);
	g_boot.vmgenid = dsdt_vmgenid(dsdt, rd32(dsdt + 4));
	bool in_e820 = false; /* RAM or reserved: memory the guest can read */
	for (unsigned i = 0; i < g_boot.ne820; i++)
		in_e820 |= g_boot.vmgenid >= g_boot.e820[i].addr &&
			   g_boot.vmgenid + 16 <= g_boot.e820[i].addr + g_boot.e820[i].size;
	if (!in_e820)
		g_boot.vmgenid = 0;
	vmgenid_show(true);
	check(n > 0, "acpi: DSDT LNRO0005", "%u virtio-mmio device(s)", n);
	return n;
}
