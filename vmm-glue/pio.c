/* SPDX-License-Identifier: MIT */
#include "pio.h"

#include <string.h>

#include "../common/clock.h"
#include "../common/log.h"

#define I8042_CMD_RESET 0xfe

static void pio_boot_timer(const struct pio_devs *p, uint32_t v)
{
	log_notice("boot-timer: %u at %.3f ms", v, clock_ms_since(&p->t0));
}

bool pio_access(struct pio_devs *p, uint16_t port, uint8_t *data, uint32_t size,
		bool is_write)
{
	uint32_t v = 0;

	switch (port) {
	case PIO_I8042_DATA:
	case PIO_I8042_CMD:
		if (!is_write)
			memset(data, 0, size); /* no data, input buffer empty */
		else if (port == PIO_I8042_CMD && data[0] == I8042_CMD_RESET && p->reset)
			p->reset(p->ctx);
		return true;
	case PIO_BOOT_TIMER:
		if (is_write) {
			memcpy(&v, data, size < 4 ? size : 4);
			pio_boot_timer(p, v);
		} else {
			memset(data, 0, size);
		}
		return true;
	case PIO_EXIT_STATUS:
		if (is_write && p->status)
			p->status(p->ctx, data[0]);
		else if (!is_write)
			memset(data, 0, size);
		return true;
	case PIO_POST:
		if (!is_write)
			memset(data, 0xff, size);
		return true;
	default:
		return false;
	}
}
