/* SPDX-License-Identifier: MIT */
/*
 * Small port-I/O devices: the i8042 (status reads 0; 0xfe written to 0x64 is a reset
 * request, which ends the VM: `reboot=k`), the boot timer (any write to 0x440 logs
 * "lazyblk: run: boot-timer: VALUE at N ms" since t0), the exit-status port (the byte
 * written to 0x441 is the status `lazyblk run` exits with) and POST port 0x80 (ignored).
 */
#ifndef LZ_VMM_PIO_H
#define LZ_VMM_PIO_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define PIO_I8042_DATA 0x60
#define PIO_I8042_CMD 0x64
#define PIO_BOOT_TIMER 0x440
#define PIO_EXIT_STATUS 0x441
#define PIO_POST 0x80

struct pio_devs {
	struct timespec t0;                /* "process start" for the boot timer */
	void (*reset)(void *ctx);          /* the guest asked for a reset */
	void (*status)(void *ctx, int st); /* the guest wrote its exit status */
	void *ctx;
};

/* true when port belongs to one of these devices; reads fill data. */
bool pio_access(struct pio_devs *p, uint16_t port, uint8_t *data, uint32_t size,
		bool is_write);

#endif
