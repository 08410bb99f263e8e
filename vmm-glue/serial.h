/* SPDX-License-Identifier: MIT */
/*
 * A 16550A UART (COM1: ports 0x3f8–0x3ff, IRQ 4): THR/RBR, IER, IIR (interrupt priority
 * line status > received data > THR empty > modem status; 0xC0 when the FIFO is enabled),
 * FCR (enable, clear RX/TX), LCR (DLAB: DLL/DLM), MCR (loopback), LSR, MSR, SCR.
 * Output goes to out_fd as the guest writes THR, buffered: written at each newline, when
 * SERIAL_OUT_MAX bytes wait, when the VM pauses or ends, else within 5 ms (a thread). The
 * transmitter is always empty again at once, so the THR-empty interrupt is raised on every
 * write and whenever IER's THRI bit goes 0 → 1: the FreeBSD "broken TX FIFO" bug is
 * avoided. Input
 * comes from in_fd through a thread into the RX FIFO (16 bytes, 1 with the FIFO disabled;
 * FCR clears it, so a guest that filled it in loopback can empty it). The interrupt line
 * follows "an interrupt is pending" and is driven through set_irq on every change.
 */
#ifndef LZ_VMM_SERIAL_H
#define LZ_VMM_SERIAL_H

#include <stdbool.h>
#include <stdint.h>
#include "../common/test_hook.h"

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ 4

struct serial;

struct serial_opts {
	int in_fd;     /* -1: no input */
	int out_fd;
	void (*set_irq)(void *ctx, int level);
	void *irq_ctx;
	/* Called once, on the thread writing it, as the guest's first byte is written out. */
	void (*first_output)(void *ctx);
};

/* -errno. */
int serial_new(const struct serial_opts *o, struct serial **out);
/* Writes what the guest's output left waiting, stops the threads. */
void serial_free(struct serial *s);
/*
 * Paused: input stays in in_fd (or the input thread's buffer) and nothing enters the RX
 * FIFO until unpaused; returns once no byte is being received, the output written.
 */
void serial_pause(struct serial *s, bool paused);
/*
 * The output while a restore's RAM is checked (vmm.c): SERIAL_OUT_HOLD buffers what the
 * guest writes (up to SERIAL_OUT_MAX bytes; a vCPU writing more waits), SERIAL_OUT_ON
 * writes the buffer out and then the output as it comes (the default), SERIAL_OUT_DROP
 * discards the buffer and everything written later.
 */
#define SERIAL_OUT_MAX 4096u
enum serial_out_mode { SERIAL_OUT_ON, SERIAL_OUT_HOLD, SERIAL_OUT_DROP };
void serial_output(struct serial *s, enum serial_out_mode mode);
/* A 1-byte access at register off (0..7). Thread-safe. */
void serial_access(struct serial *s, unsigned off, uint8_t *data, bool is_write);
/*
 * The registers and the RX FIFO, for VM snapshots (vm_state.c): what the guest can observe.
 * serial_state_load refuses (-EINVAL) a state no guest access could have produced (IER or
 * FIFO count out of range) and drives the interrupt line to what the state says.
 */
struct serial_state {
	uint8_t ier, fcr, lcr, mcr, scr, dll, dlm;
	uint8_t overrun, thr_ipending, rx_count, rx_head;
	uint8_t reserved[5];
	uint8_t rx[16];
};
void serial_state_save(struct serial *s, struct serial_state *st);
int serial_state_load(struct serial *s, const struct serial_state *st);
/* Queue received bytes as if they came from in_fd (what fits; returns the count). */
TEST_HOOK
unsigned serial_receive(struct serial *s, const uint8_t *buf, unsigned len);

#endif
