// SPDX-License-Identifier: MIT
/*
 * Unit tests for vmm-glue/acpi: the table structure (RSDP, XSDT, FADT, MADT, DSDT bytes and
 * checksums) for several configurations, determinism, refusals (-EINVAL, -ENOSPC for every
 * short length), and the tables read back by the real ACPICA tools: `iasl -d` disassembles
 * every table without a warning and shows the expected devices, flags and APIC entries;
 * `acpiexec` loads the DSDT into the interpreter Linux uses and evaluates _CRS. Both tools
 * come from acpica-tools; the tests that need them skip when they are missing.
 */
#include "../helpers.h"

#include "../../../common/le.h"
#include "../../../vmm-glue/acpi.h"

#define GPA		0xe0000u
#define IOAPIC		0xfec00000u
#define LAPIC		0xfee00000u
#define MMIO_BASE	0xd0000000u
#define BUF_LEN		65536

struct cfg {
	unsigned ncpus, ndevs;
	struct acpi_mmio_dev devs[ACPI_MAX_MMIO_DEVS];
	struct acpi_config c;
};

/* ndevs windows at MMIO_BASE + i * 0x1000, GSI 5 + i (wrapping around below pin 24). */
static void cfg_make(struct cfg *f, unsigned ncpus, unsigned ndevs, uint32_t size)
{
	memset(f, 0, sizeof(*f));
	f->ncpus = ncpus;
	f->ndevs = ndevs;
	for (unsigned i = 0; i < ndevs; i++) {
		f->devs[i].base = MMIO_BASE + i * 0x1000ull;
		f->devs[i].size = size;
		f->devs[i].gsi = 5 + i % (ACPI_IOAPIC_PINS - 5);
	}
	f->c.ncpus = ncpus;
	f->c.ioapic_addr = IOAPIC;
	f->c.lapic_addr = LAPIC;
	f->c.devs = f->devs;
	f->c.ndevs = ndevs;
}

static const struct {
	unsigned ncpus, ndevs;
	uint32_t size;
} configs[] = {
	{ 1, 1, 0x1000 },
	{ 4, 3, 0x200 },
	{ 255, ACPI_MAX_MMIO_DEVS, 0x1000 },
	{ 2, 0, 0 },
};

static uint8_t sum8(const uint8_t *p, size_t n)
{
	uint8_t s = 0;

	while (n--)
		s += *p++;
	return s;
}

/* The table at guest address addr, checked to lie inside the built bytes. */
static const uint8_t *table_at(const uint8_t *buf, size_t used, uint64_t addr, const char *sig)
{
	const uint8_t *t;
	uint32_t len;

	assert_true(addr >= GPA && addr - GPA + 36 <= used);
	t = buf + (addr - GPA);
	assert_memory_equal(t, sig, 4);
	len = le32_get(t + 4);
	assert_true(len >= 36 && addr - GPA + len <= used);
	assert_int_equal(sum8(t, len), 0);
	assert_memory_equal(t + 10, "LAZYBK", 6);
	assert_memory_equal(t + 16, "LAZYBLK ", 8);
	assert_int_not_equal(le32_get(t + 24), 0);	/* OEM revision */
	assert_int_not_equal(le32_get(t + 28), 0);	/* creator id */
	assert_int_not_equal(le32_get(t + 32), 0);	/* creator revision */
	return t;
}

struct tables {
	const uint8_t *xsdt, *fadt, *madt, *dsdt;
};

static void check_rsdp_xsdt(const uint8_t *buf, size_t used, struct tables *t)
{
	assert_memory_equal(buf, "RSD PTR ", 8);
	assert_int_equal(sum8(buf, 20), 0);
	assert_int_equal(sum8(buf, 36), 0);
	assert_memory_equal(buf + 9, "LAZYBK", 6);
	assert_int_equal(buf[15], 2);
	assert_int_equal(le32_get(buf + 20), 36);
	t->xsdt = table_at(buf, used, le64_get(buf + 24), "XSDT");
	assert_int_equal(le32_get(t->xsdt + 4), 36 + 2 * 8);
	t->fadt = table_at(buf, used, le64_get(t->xsdt + 36), "FACP");
	t->madt = table_at(buf, used, le64_get(t->xsdt + 44), "APIC");
}

static void check_fadt(const uint8_t *buf, size_t used, struct tables *t)
{
	const uint8_t *f = t->fadt;
	uint32_t flags = le32_get(f + 112);

	assert_int_equal(le32_get(f + 4), 276);
	assert_int_equal(f[8], 6);			/* major */
	assert_int_equal(f[131], 5);			/* minor: 6.5, whose length is 276 */
	assert_true(flags & 1u << 20);			/* HW_REDUCED_ACPI */
	assert_true(flags & 1u << 4);			/* no fixed power button */
	assert_true(flags & 1u << 5);			/* no fixed sleep button */
	assert_true(flags & 1u << 10);			/* reset register */
	assert_false(flags & 1u << 15);			/* no platform (PM) timer */
	assert_int_equal(le32_get(f + 76), 0);		/* PM_TMR_BLK */
	assert_int_equal(f[91], 0);			/* PM_TMR_LEN */
	assert_int_equal(le64_get(f + 208 + 4), 0);		/* X_PM_TMR_BLK */
	assert_false(le16_get(f + 109) & 3);		/* no legacy devices, no 8042 */
	assert_int_equal(f[116], 1);			/* reset reg in system I/O */
	assert_int_equal(le64_get(f + 120), 0x64);
	assert_int_equal(f[128], 0xfe);
	assert_memory_equal(f + 268, "LAZYBLK ", 8);	/* hypervisor vendor identity */
	assert_int_equal(le64_get(f + 140), le32_get(f + 40));	/* X_DSDT == DSDT */
	t->dsdt = table_at(buf, used, le64_get(f + 140), "DSDT");
	assert_int_equal(t->dsdt[8], 2);
}

static void check_madt(const struct cfg *cf, const uint8_t *m)
{
	uint32_t len = le32_get(m + 4);
	unsigned lapics = 0, ioapics = 0, isos = 0, nmis = 0;
	uint32_t off = 44;

	assert_int_equal(le32_get(m + 36), LAPIC);
	assert_int_equal(le32_get(m + 40), 1);		/* PCAT_COMPAT */
	while (off < len) {
		const uint8_t *e = m + off;

		assert_true(off + 2 <= len && e[1] >= 2 && off + e[1] <= len);
		switch (e[0]) {
		case 0:
			assert_int_equal(e[1], 8);
			assert_int_equal(e[2], lapics);	/* processor UID */
			assert_int_equal(e[3], lapics);	/* APIC id */
			assert_int_equal(le32_get(e + 4), 1);	/* enabled */
			lapics++;
			break;
		case 1:
			assert_int_equal(e[1], 12);
			assert_int_equal(le32_get(e + 4), IOAPIC);
			assert_int_equal(le32_get(e + 8), 0);	/* GSI base */
			ioapics++;
			break;
		case 2:
			assert_int_equal(e[1], 10);
			assert_int_equal(e[2], 0);
			assert_int_equal(e[3], 0);		/* IRQ 0 (the PIT) ... */
			assert_int_equal(le32_get(e + 4), 0);	/* ... -> GSI 0: KVM's routing */
			assert_int_equal(le16_get(e + 8), 5);	/* edge, active high */
			isos++;
			break;
		case 4:
			assert_int_equal(e[1], 6);
			assert_int_equal(e[5], 1);		/* LINT1 */
			nmis++;
			break;
		default:
			fail_msg("unexpected MADT entry type %u", e[0]);
		}
		off += e[1];
	}
	assert_int_equal(off, len);
	assert_int_equal(lapics, cf->ncpus);
	assert_int_equal(ioapics, 1);
	assert_int_equal(isos, 1);
	assert_int_equal(nmis, 1);
}

static const uint8_t *memfind(const uint8_t *h, size_t hn, const void *n, size_t nn)
{
	for (size_t i = 0; i + nn <= hn; i++)
		if (!memcmp(h + i, n, nn))
			return h + i;
	return NULL;
}

static unsigned memcount(const uint8_t *h, size_t hn, const void *n, size_t nn)
{
	unsigned c = 0;
	const uint8_t *p;

	while ((p = memfind(h, hn, n, nn))) {
		c++;
		hn -= p + nn - h;
		h = p + nn;
	}
	return c;
}

/* Every device's _CRS bytes: Memory32Fixed, Extended Interrupt, EndTag with checksum. */
static void check_dsdt(const struct cfg *cf, const uint8_t *d)
{
	uint32_t len = le32_get(d + 4);
	uint8_t com1[] = { 0x47, 1, 0xf8, 3, 0xf8, 3, 0, 8, 0x22, 0x10, 0, 0x79 };
	const uint8_t *p;

	assert_int_equal(memcount(d, len, "LNRO0005", 9), cf->ndevs);
	assert_int_equal(memcount(d, len, "\\_SB_", 5), 1);
	p = memfind(d, len, com1, sizeof(com1));
	assert_non_null(p);
	assert_int_equal(sum8(p, sizeof(com1) + 1), 0);
	for (unsigned i = 0; i < cf->ndevs; i++) {
		uint8_t res[21] = { 0x86, 9, 0, 1 };
		char name[16];
		bool shared = false;

		for (unsigned j = 0; j < cf->ndevs; j++)
			shared |= j != i && cf->devs[j].gsi == cf->devs[i].gsi;
		memcpy(res + 4, &(uint32_t){ cf->devs[i].base }, 4);
		memcpy(res + 8, &cf->devs[i].size, 4);
		res[12] = 0x89;
		res[13] = 6;
		res[15] = shared ? 0x0b : 0x03;	/* consumer, edge, high, (shared) */
		res[16] = 1;
		memcpy(res + 17, &cf->devs[i].gsi, 4);
		p = memfind(d, len, res, sizeof(res));
		assert_non_null(p);
		assert_int_equal(p[21], 0x79);
		assert_int_equal(sum8(p, 23), 0);
		snprintf(name, sizeof(name), "V%03u", i);
		assert_non_null(memfind(d, len, name, 4));
	}
}

/* Decodes the PkgLength at *off, advances past it; returns the offset where the package ends. */
static uint32_t pkg_end(const uint8_t *d, uint32_t *off)
{
	uint32_t start = *off, b0 = d[start], n = b0 >> 6, len;

	if (!n) {
		len = b0 & 0x3f;
	} else {
		assert_int_equal(b0 & 0x30, 0);
		len = b0 & 0xf;
		for (uint32_t i = 0; i < n; i++)
			len |= (uint32_t)d[start + 1 + i] << (4 + 8 * i);
		/* the shortest encoding: one byte fewer could not have held it */
		assert_true(len - 1 >= (n == 1 ? 0x40u : 1u << (4 + 8 * (n - 1))));
	}
	*off = start + 1 + n;
	return start + len;
}

/*
 * Walks the AML: Scope (\_SB_) spans the rest of the table, and holds exactly the Devices
 * (COM1, V000, ...) back to back, each ending with its Name (_CRS, Buffer) package.
 */
static void check_aml_packages(const struct cfg *cf, const uint8_t *d)
{
	uint32_t len = le32_get(d + 4), off = 36, scope_end, ndev = 0;

	assert_int_equal(d[off++], 0x10);
	scope_end = pkg_end(d, &off);
	assert_int_equal(scope_end, len);
	assert_memory_equal(d + off, "\\_SB_", 5);
	off += 5;
	while (off < scope_end) {
		uint32_t dev_end, crs, buf_end;
		char name[16];

		assert_int_equal(d[off], 0x5b);
		assert_int_equal(d[off + 1], 0x82);
		off += 2;
		dev_end = pkg_end(d, &off);
		assert_true(dev_end <= scope_end);
		if (ndev)
			snprintf(name, sizeof(name), "V%03u", ndev - 1);
		else
			memcpy(name, "COM1", 5);
		assert_memory_equal(d + off, name, 4);
		crs = off;
		while (crs < dev_end && memcmp(d + crs, "\x08_CRS\x11", 6))
			crs++;
		assert_true(crs < dev_end);
		off = crs + 6;
		buf_end = pkg_end(d, &off);
		assert_int_equal(buf_end, dev_end);
		off = dev_end;
		ndev++;
	}
	assert_int_equal(off, scope_end);
	assert_int_equal(ndev, cf->ndevs + 1);
}

static size_t build_ok(const struct cfg *cf, uint8_t *buf, size_t len)
{
	uint64_t rsdp = 0;
	size_t used = 0;

	assert_int_equal(acpi_build(&cf->c, buf, GPA, len, &rsdp, &used), 0);
	assert_int_equal(rsdp, GPA);
	assert_true(used > 0 && used <= len);
	return used;
}

static void check_all(const struct cfg *cf, const uint8_t *buf, size_t used, struct tables *t)
{
	check_rsdp_xsdt(buf, used, t);
	check_fadt(buf, used, t);
	check_madt(cf, t->madt);
	check_dsdt(cf, t->dsdt);
	check_aml_packages(cf, t->dsdt);
}

static void test_structure(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
		struct cfg cf;
		struct tables t;
		uint8_t *buf = malloc(BUF_LEN);
		size_t used;

		assert_non_null(buf);
		cfg_make(&cf, configs[k].ncpus, configs[k].ndevs, configs[k].size);
		used = build_ok(&cf, buf, BUF_LEN);
		check_all(&cf, buf, used, &t);
		free(buf);
	}
}

/* Every device count and a spread of CPU counts: every PkgLength size the DSDT can need. */
static void test_sweep(void **state)
{
	static const unsigned cpus[] = { 1, 2, 7, 8, 64, 128, 254, 255 };
	uint8_t *buf = malloc(BUF_LEN);

	(void)state;
	assert_non_null(buf);
	for (unsigned n = 0; n <= ACPI_MAX_MMIO_DEVS; n++) {
		for (size_t k = 0; k < sizeof(cpus) / sizeof(cpus[0]); k++) {
			struct cfg cf;
			struct tables t;
			size_t used;

			cfg_make(&cf, cpus[k], n, n % 2 ? 0x200 : 0x1000);
			used = build_ok(&cf, buf, BUF_LEN);
			check_all(&cf, buf, used, &t);
		}
	}
	free(buf);
}

/* Same bytes whatever the buffer held before; the exact length fits (ASan sees overruns). */
static void test_deterministic_exact_fit(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
		struct cfg cf;
		struct tables t;
		uint8_t *a = malloc(BUF_LEN), *b = malloc(BUF_LEN), *exact;
		size_t ua, ub, ue;

		assert_non_null(a);
		assert_non_null(b);
		cfg_make(&cf, configs[k].ncpus, configs[k].ndevs, configs[k].size);
		memset(a, 0xaa, BUF_LEN);
		memset(b, 0x55, BUF_LEN);
		ua = build_ok(&cf, a, BUF_LEN);
		ub = build_ok(&cf, b, BUF_LEN);
		assert_int_equal(ua, ub);
		assert_memory_equal(a, b, ua);
		exact = malloc(ua);
		assert_non_null(exact);
		ue = build_ok(&cf, exact, ua);
		assert_int_equal(ue, ua);
		assert_memory_equal(exact, a, ua);
		check_all(&cf, exact, ue, &t);
		free(exact);
		free(a);
		free(b);
	}
}

/* -ENOSPC for every length below the needed one, with the buffer left untouched. */
static void test_enospc_every_short_len(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
		struct cfg cf;
		uint8_t *big = malloc(BUF_LEN);
		size_t need;

		assert_non_null(big);
		cfg_make(&cf, configs[k].ncpus, configs[k].ndevs, configs[k].size);
		need = build_ok(&cf, big, BUF_LEN);
		for (size_t len = 0; len < need; len++) {
			uint8_t *buf = malloc(len ? len : 1);
			uint64_t rsdp = 7;
			size_t used = 7;

			assert_non_null(buf);
			memset(buf, 0xcc, len);
			assert_int_equal(acpi_build(&cf.c, buf, GPA, len, &rsdp, &used), -ENOSPC);
			assert_int_equal(rsdp, 7);
			assert_int_equal(used, 7);
			for (size_t i = 0; i < len; i++)
				if (buf[i] != 0xcc)
					fail_msg("len %zu: byte %zu written", len, i);
			free(buf);
		}
		free(big);
	}
}

static void expect_einval(const struct cfg *cf, uint64_t gpa)
{
	static uint8_t buf[BUF_LEN];

	assert_int_equal(acpi_build(&cf->c, buf, gpa, sizeof(buf), NULL, NULL), -EINVAL);
}

static void test_bad_configs(void **state)
{
	static uint8_t buf[BUF_LEN];
	struct cfg cf;

	(void)state;
	cfg_make(&cf, 0, 1, 0x1000);
	expect_einval(&cf, GPA);
	cfg_make(&cf, 256, 1, 0x1000);
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1000, 1, 0x1000);
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 1, 0x1000);
	cf.c.ndevs = ACPI_MAX_MMIO_DEVS + 1;
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 1, 0x1000);
	cf.c.devs = NULL;
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 1, 0x1000);
	cf.devs[0].base = 1ull << 32;				/* >= 4 GiB */
	expect_einval(&cf, GPA);
	cf.devs[0].base = (1ull << 32) - 0x1000;		/* ends past 4 GiB */
	cf.devs[0].size = 0x2000;
	expect_einval(&cf, GPA);
	cf.devs[0].size = 0x1000;				/* ends at 4 GiB: fine */
	assert_int_equal(acpi_build(&cf.c, buf, GPA, sizeof(buf), NULL, NULL), 0);
	cfg_make(&cf, 1, 1, 0);					/* empty window */
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 2, 0x1000);
	for (uint32_t gsi = 0; gsi < 64; gsi++) {
		int want = gsi >= ACPI_IOAPIC_PINS || gsi == 0 || gsi == 2 || gsi == 4 ?
			   -EINVAL : 0;

		cf.devs[1].gsi = gsi;
		assert_int_equal(acpi_build(&cf.c, buf, GPA, sizeof(buf), NULL, NULL), want);
	}
	cf.devs[1].gsi = 0xffffffff;
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 1, 0x1000);
	cf.c.ioapic_addr = 1ull << 32;
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 1, 0x1000);
	cf.c.lapic_addr = ~0ull;
	expect_einval(&cf, GPA);
	cfg_make(&cf, 1, 1, 0x1000);
	expect_einval(&cf, GPA + 8);				/* not 16-byte aligned */
	expect_einval(&cf, 1ull << 32);				/* 32-bit DSDT pointer */
	expect_einval(&cf, (1ull << 32) - 0x100);		/* tables would cross 4 GiB */
	assert_int_equal(acpi_build(NULL, buf, GPA, sizeof(buf), NULL, NULL), -EINVAL);
	assert_int_equal(acpi_build(&cf.c, NULL, GPA, sizeof(buf), NULL, NULL), -EINVAL);
	/* refusals of a bad config win over a short buffer */
	cfg_make(&cf, 0, 1, 0x1000);
	assert_int_equal(acpi_build(&cf.c, buf, GPA, 1, NULL, NULL), -EINVAL);
}

/* ---- the real ACPICA tools ---- */

static bool have_tool(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	s = malloc(n + 1);
	assert_non_null(s);
	assert_int_equal(fread(s, 1, n, f), (size_t)n);
	s[n] = 0;
	fclose(f);
	return s;
}

static unsigned strcount(const char *h, const char *n)
{
	unsigned c = 0;

	while ((h = strstr(h, n))) {
		c++;
		h += strlen(n);
	}
	return c;
}

static void write_table(const char *dir, const char *name, const uint8_t *t)
{
	char path[PATH_MAX];

	path_fmt(path, "%s/%s", dir, name);
	write_file(path, t, le32_get(t + 4));
}

/*
 * `iasl -d NAME.dat` in dir: exit status 0, nothing it flags (a wrong checksum, an invalid
 * field or subtable) in its messages or in NAME.dsl; returns the disassembly. NULL (and no
 * test failure) when flagged and allow_flags: for the test that corrupts a table.
 */
static char *iasl_d(const char *dir, const char *name, bool allow_flags)
{
	static const char *const bad[] = {
		"Warning", "Error", "Invalid", "ncorrect", "checksum", "****", "Unknown",
	};
	char cmd[PATH_MAX * 2], path[PATH_MAX];
	char *log, *dsl;
	bool flagged = false;

	snprintf(cmd, sizeof(cmd), "cd '%s' && iasl -d %s.dat >%s.log 2>&1", dir, name, name);
	assert_int_equal(system(cmd), 0);
	path_fmt(path, "%s/%s.log", dir, name);
	log = slurp(path);
	path_fmt(path, "%s/%s.dsl", dir, name);
	dsl = slurp(path);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (strstr(log, bad[i]) || strstr(dsl, bad[i])) {
			if (!allow_flags)
				fail_msg("iasl -d %s.dat: \"%s\" in:\n%s", name, bad[i], log);
			flagged = true;
		}
	}
	free(log);
	if (flagged) {
		free(dsl);
		return NULL;
	}
	return dsl;
}

static void expect_in(const char *text, const char *what)
{
	if (!strstr(text, what))
		fail_msg("\"%s\" not in the disassembly", what);
}

/* The text of Device (NAME) up to the next Device, in the DSDT's disassembly. */
static char *device_block(const char *dsl, const char *name)
{
	char head[32];
	const char *s, *e;
	char *b;

	snprintf(head, sizeof(head), "Device (%s)", name);
	s = strstr(dsl, head);
	assert_non_null(s);
	assert_null(strstr(s + 1, head));
	e = strstr(s + 1, "Device (");
	if (!e)
		e = s + strlen(s);
	b = strndup(s, e - s);
	assert_non_null(b);
	return b;
}

static void iasl_check_dsdt(const struct cfg *cf, const char *dsl)
{
	char want[256], name[16];
	char *b;

	expect_in(dsl, "DefinitionBlock (\"\", \"DSDT\", 2, \"LAZYBK\", \"LAZYBLK \"");
	expect_in(dsl, "Scope (\\_SB)");
	assert_int_equal(strcount(dsl, "\"LNRO0005\""), cf->ndevs);
	assert_int_equal(strcount(dsl, "Device ("), cf->ndevs + 1);
	b = device_block(dsl, "COM1");
	expect_in(b, "EisaId (\"PNP0501\")");
	expect_in(b, "Name (_UID, Zero)");
	expect_in(b, "IO (Decode16,\n                    0x03F8,             // Range Minimum\n"
		     "                    0x03F8,             // Range Maximum\n"
		     "                    0x00,               // Alignment\n"
		     "                    0x08,               // Length");
	expect_in(b, "IRQNoFlags ()\n                    {4}");
	free(b);
	for (unsigned i = 0; i < cf->ndevs; i++) {
		bool shared = false;

		for (unsigned j = 0; j < cf->ndevs; j++)
			shared |= j != i && cf->devs[j].gsi == cf->devs[i].gsi;
		snprintf(name, sizeof(name), "V%03u", i);
		b = device_block(dsl, name);
		expect_in(b, "Name (_HID, \"LNRO0005\")");
		if (i <= 1)
			snprintf(want, sizeof(want), "Name (_UID, %s)", i ? "One" : "Zero");
		else
			snprintf(want, sizeof(want), "Name (_UID, 0x%02X)", i);
		expect_in(b, want);
		snprintf(want, sizeof(want), "Memory32Fixed (ReadWrite,\n"
			 "                    0x%08X,         // Address Base\n"
			 "                    0x%08X,         // Address Length",
			 (uint32_t)cf->devs[i].base, cf->devs[i].size);
		expect_in(b, want);
		snprintf(want, sizeof(want), "Interrupt (ResourceConsumer, Edge, ActiveHigh, %s, ,, )"
			 "\n                {\n                    0x%08X,\n                }",
			 shared ? "Shared" : "Exclusive", cf->devs[i].gsi);
		expect_in(b, want);
		free(b);
	}
}

static void iasl_check_fadt(const char *dsl, uint64_t dsdt)
{
	char want[96];

	expect_in(dsl, "Signature : \"FACP\"");
	expect_in(dsl, "Revision : 06");
	expect_in(dsl, "FADT Minor Revision : 05");
	expect_in(dsl, "Hardware Reduced (V5) : 1");
	expect_in(dsl, "8042 Present on ports 60/64 (V2) : 0");
	expect_in(dsl, "Legacy Devices Supported (V2) : 0");
	expect_in(dsl, "CMOS RTC Not Present (V5) : 1");
	expect_in(dsl, "Reset Register Supported (V2) : 1");
	expect_in(dsl, "Use Platform Timer (V4) : 0");
	expect_in(dsl, "PM Timer Block Length : 00");
	expect_in(dsl, "Value to cause reset : FE");
	snprintf(want, sizeof(want), "DSDT Address : %016llX", (unsigned long long)dsdt);
	expect_in(dsl, want);
	snprintf(want, sizeof(want), "DSDT Address : %08llX", (unsigned long long)dsdt);
	expect_in(dsl, want);
	/* "LAZYBLK " as the 64-bit little-endian number iasl prints */
	expect_in(dsl, "Hypervisor ID : 204B4C42595A414C");
}

static void iasl_check_madt(const struct cfg *cf, const char *dsl)
{
	char want[64], *iso;

	expect_in(dsl, "Local Apic Address : FEE00000");
	expect_in(dsl, "PC-AT Compatibility : 1");
	assert_int_equal(strcount(dsl, "[Processor Local APIC]"), cf->ncpus);
	assert_int_equal(strcount(dsl, "Processor Enabled : 1"), cf->ncpus);
	assert_int_equal(strcount(dsl, "[I/O APIC]"), 1);
	assert_int_equal(strcount(dsl, "[Interrupt Source Override]"), 1);
	assert_int_equal(strcount(dsl, "[Local APIC NMI]"), 1);
	expect_in(dsl, "Address : FEC00000");
	iso = strstr(dsl, "[Interrupt Source Override]");
	assert_non_null(iso);
	iso = strndup(iso, strstr(iso, "\n\n") ? (size_t)(strstr(iso, "\n\n") - iso) : strlen(iso));
	assert_non_null(iso);
	expect_in(iso, "Source : 00\n");
	expect_in(iso, "Interrupt : 00000000\n");
	expect_in(iso, "Polarity : 1\n");
	expect_in(iso, "Trigger Mode : 1");
	free(iso);
	snprintf(want, sizeof(want), "Local Apic ID : %02X\n", cf->ncpus - 1);
	expect_in(dsl, want);
}

static void test_iasl(void **state)
{
	(void)state;
	if (!have_tool("iasl")) {
		print_message("iasl not installed (acpica-tools): skipped\n");
		skip();
	}
	for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
		char dir[PATH_MAX];
		struct cfg cf;
		struct tables t;
		uint8_t *buf = malloc(BUF_LEN);
		size_t used;
		char *dsl;

		assert_non_null(buf);
		tmpdir_make(dir);
		cfg_make(&cf, configs[k].ncpus, configs[k].ndevs, configs[k].size);
		used = build_ok(&cf, buf, BUF_LEN);
		check_all(&cf, buf, used, &t);
		write_table(dir, "xsdt.dat", t.xsdt);
		write_table(dir, "facp.dat", t.fadt);
		write_table(dir, "apic.dat", t.madt);
		write_table(dir, "dsdt.dat", t.dsdt);

		dsl = iasl_d(dir, "xsdt", false);
		expect_in(dsl, "Signature : \"XSDT\"");
		free(dsl);
		dsl = iasl_d(dir, "facp", false);
		iasl_check_fadt(dsl, le64_get(t.fadt + 140));
		free(dsl);
		dsl = iasl_d(dir, "apic", false);
		iasl_check_madt(&cf, dsl);
		free(dsl);
		dsl = iasl_d(dir, "dsdt", false);
		iasl_check_dsdt(&cf, dsl);
		free(dsl);
		rm_rf(dir);
		free(buf);
	}
}

/* Two devices on one GSI: both Interrupt descriptors say Shared. */
static void test_iasl_shared_gsi(void **state)
{
	char dir[PATH_MAX];
	struct cfg cf;
	struct tables t;
	uint8_t *buf = malloc(BUF_LEN);
	size_t used;
	char *dsl;

	(void)state;
	assert_non_null(buf);
	cfg_make(&cf, 2, 3, 0x1000);
	cf.devs[2].gsi = cf.devs[0].gsi;
	used = build_ok(&cf, buf, BUF_LEN);
	check_all(&cf, buf, used, &t);
	if (!have_tool("iasl")) {
		free(buf);
		skip();
	}
	tmpdir_make(dir);
	write_table(dir, "dsdt.dat", t.dsdt);
	dsl = iasl_d(dir, "dsdt", false);
	assert_int_equal(strcount(dsl, "Shared"), 2);
	assert_int_equal(strcount(dsl, "Exclusive"), 1);
	iasl_check_dsdt(&cf, dsl);
	free(dsl);
	rm_rf(dir);
	free(buf);
}

/* The checks above can fail: a table with one byte changed is flagged by iasl. */
static void test_iasl_flags_corruption(void **state)
{
	static const char *const names[] = { "facp", "apic", "dsdt" };
	char dir[PATH_MAX];
	struct cfg cf;
	struct tables t;
	uint8_t *buf = malloc(BUF_LEN);

	(void)state;
	assert_non_null(buf);
	if (!have_tool("iasl")) {
		free(buf);
		skip();
	}
	tmpdir_make(dir);
	cfg_make(&cf, 4, 3, 0x1000);
	build_ok(&cf, buf, BUF_LEN);
	check_all(&cf, buf, BUF_LEN, &t);
	((uint8_t *)t.fadt)[200]++;
	((uint8_t *)t.madt)[50]++;
	((uint8_t *)t.dsdt)[60]++;
	write_table(dir, "facp.dat", t.fadt);
	write_table(dir, "apic.dat", t.madt);
	write_table(dir, "dsdt.dat", t.dsdt);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_null(iasl_d(dir, names[i], true));
	rm_rf(dir);
	free(buf);
}

/* ACPICA's interpreter (what Linux runs) loads the tables and evaluates the objects. */
static void test_acpiexec(void **state)
{
	char dir[PATH_MAX], cmd[PATH_MAX * 2], path[PATH_MAX];
	struct cfg cf;
	struct tables t;
	uint8_t *buf = malloc(BUF_LEN);
	char *out;

	(void)state;
	assert_non_null(buf);
	if (!have_tool("acpiexec")) {
		free(buf);
		skip();
	}
	tmpdir_make(dir);
	cfg_make(&cf, 4, 3, 0x200);
	build_ok(&cf, buf, BUF_LEN);
	check_all(&cf, buf, BUF_LEN, &t);
	write_table(dir, "facp.dat", t.fadt);
	write_table(dir, "apic.dat", t.madt);
	write_table(dir, "dsdt.dat", t.dsdt);
	snprintf(cmd, sizeof(cmd), "cd '%s' && timeout 60 acpiexec -b "
		 "'Evaluate \\_SB.V002._CRS; Evaluate \\_SB.V002._HID; Evaluate \\_SB.COM1._HID' "
		 "dsdt.dat facp.dat apic.dat </dev/null >out.txt 2>&1", dir);
	assert_int_equal(system(cmd), 0);
	path_fmt(path, "%s/out.txt", dir);
	out = slurp(path);
	if (!strstr(out, "1 ACPI AML tables successfully acquired and loaded") ||
	    strstr(out, "Error") || strstr(out, "Warning") ||
	    strstr(out, "ncorrect") || !strstr(out, "No outstanding allocations"))
		fail_msg("acpiexec:\n%s", out);
	expect_in(out, "4 Devices");
	/* V002's _CRS: Memory32Fixed at 0xd0002000 (0x200 bytes), Interrupt 7, EndTag */
	expect_in(out, "86 09 00 01 00 20 00 D0 00 02 00 00 89 06 00 03");
	expect_in(out, "01 07 00 00 00 79");
	expect_in(out, "[String] Length 08 = \"LNRO0005\"");
	expect_in(out, "[Integer] = 000000000105D041");
	free(out);
	rm_rf(dir);
	free(buf);
}

/*
 * The VM generation ID device: iasl -d shows Device (VGEN) with QEMU's ids and the ADDR
 * method, and its event device GED0 (ACPI0013, an edge-triggered GSI of its own, _EVT
 * notifying VGEN with 0x80); acpiexec evaluates ADDR to the address and _EVT (its GSI) to
 * the notification; an unaligned address, a GSI a virtio device has or an ISA line the VMM
 * uses are refused.
 */
static void test_vmgenid(void **state)
{
	char dir[PATH_MAX], cmd[PATH_MAX * 2], path[PATH_MAX];
	struct cfg cf;
	struct tables t;
	uint8_t *buf = malloc(BUF_LEN);
	char *dsl, *b, *out;

	(void)state;
	assert_non_null(buf);
	cfg_make(&cf, 2, 2, 0x1000);
	cf.c.vmgenid_addr = 0xff004;
	assert_int_equal(acpi_build(&cf.c, buf, GPA, BUF_LEN, NULL, NULL), -EINVAL);
	cf.c.vmgenid_addr = 0xff000;
	cf.c.vmgenid_gsi = cf.devs[1].gsi;
	assert_int_equal(acpi_build(&cf.c, buf, GPA, BUF_LEN, NULL, NULL), -EINVAL);
	cf.c.vmgenid_gsi = 4;
	assert_int_equal(acpi_build(&cf.c, buf, GPA, BUF_LEN, NULL, NULL), -EINVAL);
	cf.c.vmgenid_gsi = 3;
	build_ok(&cf, buf, BUF_LEN);
	check_rsdp_xsdt(buf, BUF_LEN, &t);
	check_fadt(buf, BUF_LEN, &t);
	check_madt(&cf, t.madt);
	check_dsdt(&cf, t.dsdt);
	if (!have_tool("iasl") || !have_tool("acpiexec")) {
		free(buf);
		skip();
	}
	tmpdir_make(dir);
	write_table(dir, "facp.dat", t.fadt);
	write_table(dir, "apic.dat", t.madt);
	write_table(dir, "dsdt.dat", t.dsdt);
	dsl = iasl_d(dir, "dsdt", false);
	assert_int_equal(strcount(dsl, "Device ("), cf.ndevs + 3);
	b = device_block(dsl, "GED0");
	expect_in(b, "Name (_HID, \"ACPI0013\" /* Generic Event Device */)");
	expect_in(b, "Interrupt (ResourceConsumer, Edge, ActiveHigh, Exclusive, ,, )"
		     "\n                {\n                    0x00000003,\n                }");
	expect_in(b, "Method (_EVT, 1, NotSerialized)");
	expect_in(b, "If ((Arg0 == 0x03))");
	expect_in(b, "Notify (\\_SB.VGEN, 0x80)");
	free(b);
	b = device_block(dsl, "VGEN");
	expect_in(b, "Name (_HID, \"QEMUVGID\")");
	expect_in(b, "Name (_CID, \"VM_Gen_Counter\")");
	expect_in(b, "Name (_DDN, \"VM_Gen_Counter\")");
	expect_in(b, "Method (ADDR, 0, NotSerialized)");
	expect_in(b, "Return (Package (0x02)");
	expect_in(b, "0x000FF000,");
	expect_in(b, "0x00000000");
	free(b);
	free(dsl);
	snprintf(cmd, sizeof(cmd), "cd '%s' && timeout 60 acpiexec -b 'Evaluate \\_SB.VGEN.ADDR' "
		 "dsdt.dat facp.dat apic.dat </dev/null >out.txt 2>&1", dir);
	assert_int_equal(system(cmd), 0);
	path_fmt(path, "%s/out.txt", dir);
	out = slurp(path);
	if (strstr(out, "Error") || strstr(out, "Warning") ||
	    !strstr(out, "[Package] Contains 2 Elements") ||
	    !strstr(out, "[Integer] = 00000000000FF000"))
		fail_msg("acpiexec:\n%s", out);
	free(out);
	snprintf(cmd, sizeof(cmd), "cd '%s' && timeout 60 acpiexec -b 'Evaluate \\_SB.GED0._EVT 3' "
		 "dsdt.dat facp.dat apic.dat </dev/null >out.txt 2>&1", dir);
	assert_int_equal(system(cmd), 0);
	out = slurp(path);
	if (strstr(out, "Error") || strstr(out, "Warning") ||
	    !strstr(out, "Received a Device Notify on [VGEN]") || !strstr(out, "Value 0x80"))
		fail_msg("acpiexec _EVT:\n%s", out);
	free(out);
	rm_rf(dir);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_sweep),
		cmocka_unit_test(test_deterministic_exact_fit),
		cmocka_unit_test(test_enospc_every_short_len),
		cmocka_unit_test(test_bad_configs),
		cmocka_unit_test(test_iasl),
		cmocka_unit_test(test_iasl_shared_gsi),
		cmocka_unit_test(test_iasl_flags_corruption),
		cmocka_unit_test(test_acpiexec),
		cmocka_unit_test(test_vmgenid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
