/* SPDX-License-Identifier: MIT */
/*
 * The freestanding test guest for the built-in VMM (see README.md): no libc, interrupts off,
 * polled COM1 output, identity-mapped 0-4 GiB. Shared declarations.
 */
#ifndef LZ_TESTGUEST_H
#define LZ_TESTGUEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- ports and MMIO */
static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port) : "memory");
}
static inline uint8_t inb(uint16_t port)
{
	uint8_t v;
	__asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port) : "memory");
	return v;
}
static inline uint32_t mmio_r32(uint64_t a)
{
	return *(volatile uint32_t *)(uintptr_t)a;
}
static inline void mmio_w32(uint64_t a, uint32_t v)
{
	*(volatile uint32_t *)(uintptr_t)a = v;
}
static inline uint8_t mmio_r8(uint64_t a)
{
	return *(volatile uint8_t *)(uintptr_t)a;
}
static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#define barrier() __asm__ volatile("" ::: "memory")
#define mb() __asm__ volatile("mfence" ::: "memory")

/* ---- lib.c */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
void *memmove(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t strlen(const char *s);
int strncmp(const char *a, const char *b, size_t n);

void con_init(void);
void con_putc(char c);
void gprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gvprintf(const char *fmt, va_list ap);

/* "guest: NAME: ok ..." or "guest: NAME: FAIL ..." and counts failures. Returns ok. */
bool check(bool ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
extern unsigned g_failures;
extern char g_first_failure[64];
void finish(void) __attribute__((noreturn));

/* time: rdtsc scaled with the TSC frequency from CPUID (0x40000010, 0x15, 0x16) or a guess */
void time_init(void);
uint64_t now_us(void);

/* ---- boot.c: what the VMM told us */
#define MAX_E820 128
struct e820 {
	uint64_t addr, size;
	uint32_t type;
};
struct bootinfo {
	bool pvh;
	uint64_t info_addr;
	unsigned ne820;
	struct e820 e820[MAX_E820];
	uint64_t ram_bytes;
	uint64_t rsdp;
	const char *cmdline;
};
extern struct bootinfo g_boot;

/* a virtio-mmio device described in the DSDT */
#define MAX_MMIO 32
struct mmio_dev {
	uint64_t base;
	uint32_t size;
	uint32_t irq;
};

void boot_read(void *info, bool pvh);
bool ram_contains(uint64_t addr, uint64_t len);
/* ACPI: validates the tables, fills devs (LNRO0005 entries of the DSDT). Returns count. */
unsigned acpi_scan(struct mmio_dev *devs, unsigned max);
/* the value of "key=" on the command line (copied into buf), or NULL */
const char *cmdline_get(const char *key, char *buf, size_t len);
bool cmdline_flag(const char *key);
/* number of virtio_mmio.device= entries on the command line; *match set when one has
 * this base and irq */
unsigned cmdline_mmio(uint64_t base, uint32_t irq, bool *match);
uint64_t parse_u64(const char *s, const char **end);

/* ---- vblk.c */
void vblk_tests(const struct mmio_dev *d);
/* count mode: initialize the device quietly; one 512-byte write (the status byte) */
bool vblk_open(const struct mmio_dev *d);
int vblk_write_sector(uint64_t lba, const void *buf);

/* ---- count.c */
void count_run(const struct mmio_dev *d) __attribute__((noreturn));

#endif
