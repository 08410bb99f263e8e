/* SPDX-License-Identifier: MIT */
/*
 * The lazyblk test guest: checks what the VMM hands over (boot_params or hvm_start_info,
 * e820, command line, ACPI), finds the virtio-mmio disk in the DSDT, then runs the
 * virtio-blk tests of vblk.c. One line per check on COM1, "guest: PASS" or "guest: FAIL: ..."
 * at the end, the result on port 0x441, then an i8042 reset.
 */
#include "guest.h"

void guest_main(void *info, unsigned long pvh);
void guest_exception(const uint64_t *f);

struct idt_entry {
	uint16_t off0, sel;
	uint8_t ist, attr;
	uint16_t off1;
	uint32_t off2, zero;
} __attribute__((packed));
static struct idt_entry idt[32] __attribute__((aligned(16)));

static void idt_init(void)
{
	extern char exc_base[];
	uint16_t cs;
	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	for (unsigned v = 0; v < 32; v++) {
		uint64_t a = (uintptr_t)exc_base + 16 * v;
		idt[v] = (struct idt_entry){ .off0 = (uint16_t)a, .sel = cs, .attr = 0x8e,
					     .off1 = (uint16_t)(a >> 16), .off2 = (uint32_t)(a >> 32) };
	}
	struct {
		uint16_t limit;
		uint64_t base;
	} __attribute__((packed)) d = { sizeof(idt) - 1, (uintptr_t)idt };
	__asm__ volatile("lidt %0" : : "m"(d));
}

void guest_exception(const uint64_t *f)
{
	uint64_t cr2;
	__asm__ volatile("mov %%cr2, %0" : "=r"(cr2));
	gprintf("guest: FAIL: exception %lu (error 0x%lx) at rip 0x%lx, rsp 0x%lx, cr2 0x%lx\n",
		f[0], f[1], f[2], f[5], cr2);
	outb(0x441, 3);
	outb(0x440, 3);
	outb(0x64, 0xfe);
	for (;;)
		__asm__ volatile("cli; hlt");
}

/* virtio-mmio registers used for probing */
#define VIRTIO_MAGIC 0x74726976u

void guest_main(void *info, unsigned long pvh)
{
	con_init();
	gprintf("\nguest: lazyblk test guest, entered via %s\n",
		pvh ? "PVH (32-bit protected mode, hvm_start_info)"
		    : "the Linux 64-bit boot protocol (boot_params)");
	idt_init();
	time_init();
	boot_read(info, pvh != 0);

	static struct mmio_dev devs[MAX_MMIO];
	unsigned n = acpi_scan(devs, MAX_MMIO);
	const struct mmio_dev *blk = NULL;
	unsigned nblk = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = devs[i].base;
		uint32_t magic = mmio_r32(b), ver = mmio_r32(b + 4), id = mmio_r32(b + 8);
		if (id == 0)
			continue; /* an empty transport (QEMU microvm has many) */
		gprintf("guest: virtio-mmio at 0x%lx size 0x%x irq %u: magic 0x%x version %u "
			"device %u vendor 0x%x\n",
			b, devs[i].size, devs[i].irq, magic, ver, id, mmio_r32(b + 12));
		if (magic == VIRTIO_MAGIC && id == 2) {
			nblk++;
			if (!blk)
				blk = &devs[i];
		}
	}
	if (!check(blk != NULL, "virtio-mmio", "%u LNRO0005 window(s), %u virtio-blk", n, nblk))
		finish();
	check(mmio_r32(blk->base + 4) == 2, "virtio-mmio version", "%u (want 2, modern)",
	      mmio_r32(blk->base + 4));
	gprintf("guest: virtio-mmio at 0x%lx irq %u (disk)\n", blk->base, blk->irq);
	bool match;
	unsigned ncmd = cmdline_mmio(blk->base, blk->irq, &match);
	if (cmdline_flag("testguest.no_cmdline_devices"))
		gprintf("guest: cmdline: virtio_mmio.device cross-check skipped\n");
	else
		check(match, "cmdline virtio_mmio.device", "%u entries, one for 0x%lx:%u", ncmd,
		      blk->base, blk->irq);
	char mode[16];
	if (cmdline_get("testguest.mode", mode, sizeof(mode)) && !strncmp(mode, "count", 6))
		count_run(blk);
	if (mmio_r32(blk->base + 4) == 2)
		vblk_tests(blk);
	finish();
}
