/* SPDX-License-Identifier: MIT */
/* The test guest's little libc: memory functions, polled COM1 output, printf, checks, exit. */
#include "guest.h"

/* rep stosb / movsb: one instruction each, which matters under an emulating KVM */
void *memset(void *d, int c, size_t n)
{
	void *p = d;
	__asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(c) : "memory");
	return d;
}

void *memcpy(void *d, const void *s, size_t n)
{
	void *p = d;
	__asm__ volatile("rep movsb" : "+D"(p), "+S"(s), "+c"(n) : : "memory");
	return d;
}

void *memmove(void *d, const void *s, size_t n)
{
	uint8_t *p = d;
	const uint8_t *q = s;
	if (p < q)
		return memcpy(d, s, n);
	while (n--)
		p[n] = q[n];
	return d;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const uint8_t *p = a, *q = b;
	for (; n; n--, p++, q++)
		if (*p != *q)
			return *p < *q ? -1 : 1;
	return 0;
}

size_t strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (uint8_t)*a - (uint8_t)*b;
		if (!*a)
			return 0;
	}
	return 0;
}

/* ---- COM1, polled */
#define COM1 0x3f8

void con_init(void)
{
	outb(COM1 + 1, 0x00); /* no interrupts */
	outb(COM1 + 3, 0x80); /* DLAB */
	outb(COM1 + 0, 0x01); /* 115200 */
	outb(COM1 + 1, 0x00);
	outb(COM1 + 3, 0x03); /* 8N1 */
	outb(COM1 + 2, 0x07); /* FIFO on, cleared */
}

void con_putc(char c)
{
	if (c == '\n')
		con_putc('\r');
	/* wait for THRE (bounded: a UART that never sets it must not hang the guest) */
	for (unsigned i = 0; i < 1000000 && !(inb(COM1 + 5) & 0x20); i++)
		;
	outb(COM1, (uint8_t)c);
}

static void put_num(uint64_t v, unsigned base, int width, bool zero, bool neg)
{
	char tmp[24];
	int n = 0;
	do {
		tmp[n++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	if (neg)
		tmp[n++] = '-';
	for (int i = n; i < width; i++)
		con_putc(zero ? '0' : ' ');
	while (n)
		con_putc(tmp[--n]);
}

void gvprintf(const char *fmt, va_list ap)
{
	for (; *fmt; fmt++) {
		if (*fmt != '%') {
			con_putc(*fmt);
			continue;
		}
		fmt++;
		bool zero = false;
		int width = 0, lng = 0;
		if (*fmt == '0') {
			zero = true;
			fmt++;
		}
		while (*fmt >= '0' && *fmt <= '9')
			width = width * 10 + (*fmt++ - '0');
		while (*fmt == 'l' || *fmt == 'z') {
			lng++;
			fmt++;
		}
		switch (*fmt) {
		case 'd': {
			int64_t v = lng ? va_arg(ap, int64_t) : va_arg(ap, int);
			put_num(v < 0 ? (uint64_t)-v : (uint64_t)v, 10, width, zero, v < 0);
			break;
		}
		case 'u':
			put_num(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 10, width, zero,
				false);
			break;
		case 'x':
			put_num(lng ? va_arg(ap, uint64_t) : va_arg(ap, unsigned), 16, width, zero,
				false);
			break;
		case 'p':
			con_putc('0');
			con_putc('x');
			put_num((uintptr_t)va_arg(ap, void *), 16, width, zero, false);
			break;
		case 's': {
			const char *s = va_arg(ap, const char *);
			for (s = s ? s : "(null)"; *s; s++)
				con_putc(*s);
			break;
		}
		case 'c':
			con_putc((char)va_arg(ap, int));
			break;
		case '%':
			con_putc('%');
			break;
		default:
			con_putc('%');
			con_putc(*fmt);
			if (!*fmt)
				return;
		}
	}
}

void gprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gvprintf(fmt, ap);
	va_end(ap);
}

/* ---- checks */
unsigned g_failures;
char g_first_failure[64];

bool check(bool ok, const char *name, const char *fmt, ...)
{
	va_list ap;
	gprintf("guest: %s: %s", name, ok ? "ok" : "FAIL");
	if (fmt && *fmt) {
		con_putc(' ');
		va_start(ap, fmt);
		gvprintf(fmt, ap);
		va_end(ap);
	}
	con_putc('\n');
	if (!ok && g_failures++ == 0) {
		size_t n = strlen(name);
		if (n >= sizeof(g_first_failure))
			n = sizeof(g_first_failure) - 1;
		memcpy(g_first_failure, name, n);
		g_first_failure[n] = 0;
	}
	return ok;
}

void finish(void)
{
	if (g_failures)
		gprintf("guest: FAIL: %u check(s) failed, first: %s\n", g_failures,
			g_first_failure);
	else
		gprintf("guest: PASS\n");
	outb(0x441, g_failures ? 1 : 0); /* exit status */
	outb(0x440, 2);                  /* boot timer: guest done */
	outb(0x64, 0xfe);                /* i8042 reset: the VM ends */
	for (;;)
		__asm__ volatile("cli; hlt");
}

/* ---- time */
static uint64_t tsc_khz;

static void cpuid(uint32_t leaf, uint32_t *a, uint32_t *b, uint32_t *c, uint32_t *d)
{
	__asm__ volatile("cpuid" : "=a"(*a), "=b"(*b), "=c"(*c), "=d"(*d) : "a"(leaf), "c"(0));
}

void time_init(void)
{
	uint32_t a, b, c, d, max;
	const char *src = "guess";
	cpuid(0, &max, &b, &c, &d);
	cpuid(1, &a, &b, &c, &d);
	if (c & (1u << 31)) { /* hypervisor present */
		cpuid(0x40000000, &a, &b, &c, &d);
		if (a >= 0x40000010) {
			cpuid(0x40000010, &a, &b, &c, &d);
			if (a) {
				tsc_khz = a;
				src = "cpuid 0x40000010";
			}
		}
	}
	if (!tsc_khz && max >= 0x15) {
		cpuid(0x15, &a, &b, &c, &d);
		if (a && b && c) {
			tsc_khz = (uint64_t)c * b / a / 1000;
			src = "cpuid 0x15";
		}
	}
	if (!tsc_khz && max >= 0x16) {
		cpuid(0x16, &a, &b, &c, &d);
		if (a & 0xffff) {
			tsc_khz = (uint64_t)(a & 0xffff) * 1000;
			src = "cpuid 0x16";
		}
	}
	if (!tsc_khz)
		tsc_khz = 2000000;
	gprintf("guest: tsc: %lu kHz (%s)\n", tsc_khz, src);
}

uint64_t now_us(void)
{
	uint64_t t = rdtsc();
	return t / tsc_khz * 1000 + t % tsc_khz * 1000 / tsc_khz;
}
