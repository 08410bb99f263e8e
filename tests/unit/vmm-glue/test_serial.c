/* SPDX-License-Identifier: MIT */
/*
 * The 16550A: THR-empty interrupts (raised on every THR write and when IER's THRI goes
 * 0 -> 1, cleared by the IIR read that reports them), interrupt priority (RX data before
 * THRE), FIFO bits in IIR, FCR clearing an RX FIFO a guest filled in loopback (the
 * FreeBSD-on-Firecracker bugs), LSR, DLAB, scratch register, output to a pipe: held during
 * a restore's check, buffered (out at a newline, a full buffer, a pause, the end, or by
 * the flusher thread for a line not ended).
 */
#include <poll.h>

#include "../helpers.h"
#include "../../../vmm-glue/serial.h"

struct irq_rec {
	int level, changes;
};

static void rec_irq(void *ctx, int level)
{
	struct irq_rec *r = ctx;

	r->level = level;
	r->changes++;
}

static uint8_t rd(struct serial *s, unsigned off)
{
	uint8_t v = 0;

	serial_access(s, off, &v, false);
	return v;
}

static void wr(struct serial *s, unsigned off, uint8_t v)
{
	serial_access(s, off, &v, true);
}

static struct serial *mk(int out_fd, struct irq_rec *r)
{
	struct serial_opts o = { .in_fd = -1, .out_fd = out_fd, .set_irq = rec_irq, .irq_ctx = r };
	struct serial *s = NULL;

	assert_int_equal(serial_new(&o, &s), 0);
	return s;
}

static void test_thre(void **state)
{
	int p[2];
	struct irq_rec r = { 0 };
	struct serial *s;
	char buf[8];

	(void)state;
	assert_int_equal(pipe(p), 0);
	s = mk(p[1], &r);
	assert_int_equal(rd(s, 2), 0x01);                 /* no interrupt */
	assert_int_equal(rd(s, 5) & 0x60, 0x60);          /* THRE, TEMT */
	wr(s, 0, 'A');                                    /* THRI off: no interrupt */
	assert_int_equal(r.level, 0);
	wr(s, 1, 0x02);                                   /* THRI on, THR empty: raised now */
	assert_int_equal(r.level, 1);
	assert_int_equal(rd(s, 2), 0x02);
	assert_int_equal(r.level, 0);                     /* the IIR read cleared it */
	assert_int_equal(rd(s, 2), 0x01);
	wr(s, 0, 'B');                                    /* sent at once: THRE again */
	assert_int_equal(r.level, 1);
	wr(s, 1, 0x00);                                   /* THRI off: line drops */
	assert_int_equal(r.level, 0);
	wr(s, 1, 0x02);
	assert_int_equal(r.level, 1);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 2);
	assert_memory_equal(buf, "AB", 2);
	serial_free(s);
	close(p[0]);
	close(p[1]);
}

static void test_rx_priority_fifo(void **state)
{
	struct irq_rec r = { 0 };
	struct serial *s = mk(-1, &r);

	(void)state;
	wr(s, 2, 0x01);                                   /* FIFO on */
	assert_int_equal(rd(s, 2), 0xc1);
	assert_int_equal(serial_receive(s, (const uint8_t *)"xyz", 3), 3);
	assert_int_equal(r.level, 0);                     /* IER off */
	wr(s, 1, 0x03);                                   /* RDI + THRI */
	assert_int_equal(r.level, 1);
	assert_int_equal(rd(s, 2), 0xc4);                 /* RX data first */
	assert_int_equal(rd(s, 5) & 0x01, 0x01);
	assert_int_equal(rd(s, 0), 'x');
	assert_int_equal(rd(s, 0), 'y');
	assert_int_equal(rd(s, 0), 'z');
	assert_int_equal(rd(s, 5) & 0x01, 0);
	assert_int_equal(rd(s, 2), 0xc2);                 /* then THRE */
	assert_int_equal(rd(s, 2), 0xc1);
	assert_int_equal(r.level, 0);
	/* 16 bytes fit with the FIFO on, 1 with it off */
	uint8_t many[20] = { 0 };
	assert_int_equal(serial_receive(s, many, 20), 16);
	wr(s, 2, 0x00);                                   /* FIFO off: cleared */
	assert_int_equal(rd(s, 5) & 0x01, 0);
	assert_int_equal(serial_receive(s, many, 20), 1);
	serial_free(s);
}

static void test_loopback_fcr_clear(void **state)
{
	struct irq_rec r = { 0 };
	struct serial *s = mk(-1, &r);

	(void)state;
	wr(s, 2, 0x01);
	wr(s, 4, 0x10 | 0x02);                            /* loopback, RTS */
	assert_int_equal(rd(s, 6) & 0xf0, 0x10);          /* CTS follows RTS */
	for (int i = 0; i < 20; i++)
		wr(s, 0, (uint8_t)i);                     /* fills the RX FIFO, then overruns */
	assert_int_equal(rd(s, 5) & 0x03, 0x03);          /* DR, OE (read clears OE) */
	assert_int_equal(rd(s, 5) & 0x02, 0);
	wr(s, 2, 0x01 | 0x02);                            /* clear RX */
	assert_int_equal(rd(s, 5) & 0x01, 0);             /* empty: input can flow again */
	wr(s, 4, 0x00);
	assert_int_equal(rd(s, 6), 0xb0);                 /* DCD, DSR, CTS */
	assert_int_equal(serial_receive(s, (const uint8_t *)"k", 1), 1);
	assert_int_equal(rd(s, 0), 'k');
	/* DLAB: divisor latch instead of RBR/IER; scratch */
	wr(s, 3, 0x80);
	wr(s, 0, 0x0c);
	wr(s, 1, 0x00);
	assert_int_equal(rd(s, 0), 0x0c);
	wr(s, 3, 0x03);
	assert_int_equal(rd(s, 1), 0x00);                 /* IER untouched */
	wr(s, 7, 0x5a);
	assert_int_equal(rd(s, 7), 0x5a);
	serial_free(s);
}

static void test_input_thread(void **state)
{
	int p[2];
	struct irq_rec r = { 0 };
	struct serial_opts o = { .out_fd = -1, .set_irq = rec_irq, .irq_ctx = &r };
	struct serial *s = NULL;
	char got[64];
	size_t n = 0;

	(void)state;
	assert_int_equal(pipe(p), 0);
	o.in_fd = p[0];
	assert_int_equal(serial_new(&o, &s), 0);
	wr(s, 2, 0x01);
	wr(s, 1, 0x01);
	assert_int_equal(write(p[1], "hello, console: more than sixteen bytes\n", 40), 40);
	for (int spins = 0; n < 40 && spins < 60000; spins++) { /* up to 60 s */
		if (rd(s, 5) & 0x01)
			got[n++] = (char)rd(s, 0);
		else
			usleep(1000);
	}
	assert_int_equal(n, 40);
	assert_memory_equal(got, "hello, console: more than sixteen bytes\n", 40);
	close(p[1]);
	serial_free(s);
	close(p[0]);
}

/* A restore's held output (serial_output): kept, written on ON; dropped on DROP. */
static void test_output_hold(void **state)
{
	int p[2];
	struct irq_rec r = { 0 };
	struct serial *s;
	char buf[8];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	s = mk(p[1], &r);
	serial_output(s, SERIAL_OUT_HOLD);
	wr(s, 0, 'A');
	wr(s, 0, 'B');
	assert_int_equal(read(p[0], buf, sizeof(buf)), -1);   /* nothing out yet */
	assert_int_equal(rd(s, 5) & 0x60, 0x60);              /* the guest sees it sent */
	serial_output(s, SERIAL_OUT_ON);
	wr(s, 0, 'C');
	wr(s, 0, '\n');
	assert_int_equal(read(p[0], buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ABC\n", 4);
	serial_output(s, SERIAL_OUT_HOLD);
	wr(s, 0, 'D');
	serial_output(s, SERIAL_OUT_DROP);
	wr(s, 0, 'E');
	assert_int_equal(read(p[0], buf, sizeof(buf)), -1);   /* D and E never got out */
	serial_free(s);
	close(p[0]);
	close(p[1]);
}

/* Nonblocking p[0]: the bytes there now (0: none). */
static ssize_t avail(int fd, char *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);

	return n < 0 && errno == EAGAIN ? 0 : n;
}

static void test_output_buffered(void **state)
{
	static char big[5000];
	int p[2];
	struct irq_rec r = { 0 };
	struct serial *s;
	char buf[8192];
	struct pollfd pf;

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	s = mk(p[1], &r);
	/* a newline writes the line at once */
	wr(s, 0, 'o');
	wr(s, 0, 'k');
	wr(s, 0, '\n');
	assert_int_equal(avail(p[0], buf, sizeof(buf)), 3);
	assert_memory_equal(buf, "ok\n", 3);
	/* a prompt with no newline: the flusher writes it soon */
	wr(s, 0, '$');
	pf = (struct pollfd){ .fd = p[0], .events = POLLIN };
	assert_int_equal(poll(&pf, 1, 10000), 1);
	assert_int_equal(avail(p[0], buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], '$');
	/* a full buffer goes out at once, the rest waits for its newline */
	memset(big, 'x', sizeof(big));
	for (size_t i = 0; i < sizeof(big); i++)
		wr(s, 0, (uint8_t)big[i]);
	assert_true(avail(p[0], buf, sizeof(buf)) >= (ssize_t)SERIAL_OUT_MAX);
	wr(s, 0, '\n');
	while (avail(p[0], buf, sizeof(buf)) > 0)
		;
	/* a pause, then the end, write what waits */
	wr(s, 0, 'p');
	serial_pause(s, true);
	assert_int_equal(avail(p[0], buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'p');
	serial_pause(s, false);
	wr(s, 0, 'e');
	serial_free(s);
	assert_int_equal(avail(p[0], buf, sizeof(buf)), 1);
	assert_int_equal(buf[0], 'e');
	close(p[0]);
	close(p[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_thre),
		cmocka_unit_test(test_rx_priority_fifo),
		cmocka_unit_test(test_loopback_fcr_clear),
		cmocka_unit_test(test_input_thread),
		cmocka_unit_test(test_output_hold),
		cmocka_unit_test(test_output_buffered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
