/* SPDX-License-Identifier: MIT */
/*
 * testguest.mode=count: the guest counts in RAM, about one step a millisecond, and every
 * testguest.count_every steps (default 100) writes the count to the disk and says so:
 *   "guest: count N acked sector S" once the device completed the write of sector
 *   S = testguest.scratch (default 2048) + N / count_every, whose 64 little-endian u64
 *   all hold N.
 * At testguest.count_to=N (default 0: never) it prints "guest: count done N", writes 0
 * to port 0x441 and resets. Used by the snapshot tests (t_vm_snapshot.sh): a restored
 * guest goes on counting from where the snapshot was taken, and every acknowledged write
 * is on the disk.
 */
#include "guest.h"

static volatile uint64_t g_count;   /* in RAM: a snapshot carries it */
static uint64_t sector[64] __attribute__((aligned(512)));

static uint64_t count_opt(const char *key, uint64_t def)
{
	char b[32];

	return cmdline_get(key, b, sizeof(b)) ? parse_u64(b, NULL) : def;
}

void count_run(const struct mmio_dev *d)
{
	uint64_t every = count_opt("testguest.count_every", 100);
	uint64_t to = count_opt("testguest.count_to", 0);
	uint64_t scr = count_opt("testguest.scratch", 2048);

	if (!every)
		every = 100;
	if (!vblk_open(d))
		finish();
	gprintf("guest: count mode, every %lu, to %lu\n", every, to);
	for (;;) {
		uint64_t n = ++g_count, t = now_us();

		while (now_us() - t < 1000)
			__asm__ volatile("pause");
		if (n % every == 0) {
			for (unsigned i = 0; i < 64; i++)
				sector[i] = n;
			int st = vblk_write_sector(scr + n / every, sector);
			if (st != 0) {
				check(false, "count: write", "status %d at count %lu", st, n);
				finish();
			}
			gprintf("guest: count %lu acked sector %lu\n", n, scr + n / every);
		}
		if (to && n >= to) {
			gprintf("guest: count done %lu\n", n);
			outb(0x441, 0);
			outb(0x64, 0xfe);
			for (;;)
				__asm__ volatile("cli; hlt");
		}
	}
}
