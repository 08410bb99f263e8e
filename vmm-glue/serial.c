/* SPDX-License-Identifier: MIT */
#include "serial.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"

#define UART_RX 0      /* DLAB=0 read */
#define UART_TX 0      /* DLAB=0 write */
#define UART_DLL 0     /* DLAB=1 */
#define UART_IER 1
#define UART_DLM 1     /* DLAB=1 */
#define UART_IIR 2     /* read */
#define UART_FCR 2     /* write */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define IER_RDI 0x01
#define IER_THRI 0x02
#define IER_RLSI 0x04
#define IER_MSI 0x08

#define IIR_NO_INT 0x01
#define IIR_MSI 0x00
#define IIR_THRI 0x02
#define IIR_RDI 0x04
#define IIR_RLSI 0x06
#define IIR_FIFO_ENABLED 0xc0

#define FCR_ENABLE 0x01
#define FCR_CLEAR_RCVR 0x02
#define FCR_CLEAR_XMIT 0x04

#define LCR_DLAB 0x80
#define MCR_DTR 0x01
#define MCR_RTS 0x02
#define MCR_OUT1 0x04
#define MCR_OUT2 0x08
#define MCR_LOOP 0x10

#define LSR_DR 0x01
#define LSR_OE 0x02
#define LSR_THRE 0x20
#define LSR_TEMT 0x40

#define MSR_CTS 0x10
#define MSR_DSR 0x20
#define MSR_RI 0x40
#define MSR_DCD 0x80

#define RX_FIFO 16
#define OUT_TICK_NS 5000000L    /* the flusher's period: the longest a byte waits in out */
#define OUT_IDLE_TICKS 20       /* ticks with nothing to write before the flusher sleeps */

struct serial {
	pthread_mutex_t lock;
	pthread_cond_t space;    /* the RX FIFO has room, or stop */
	struct serial_opts o;
	uint8_t ier, fcr, lcr, mcr, scr, dll, dlm;
	bool overrun, thr_ipending;
	int irq_level;
	uint8_t rx[RX_FIFO];
	unsigned rx_head, rx_count;
	bool stop;
	bool paused;             /* serial_pause(): input waits */
	enum serial_out_mode out_mode;
	bool said_first;         /* o.first_output called */
	unsigned out_len;        /* bytes in out: held (SERIAL_OUT_HOLD) or not written yet */
	uint8_t out[SERIAL_OUT_MAX];
	pthread_cond_t out_wake; /* the flusher: wake up (output came while it slept), or stop */
	bool flusher_ticking;    /* the flusher writes out every OUT_TICK_NS (not asleep) */
	bool flusher_started;
	pthread_t flusher;
	int stop_fd;             /* eventfd: wakes the input thread's poll */
	bool thread_started;
	pthread_t thread;
};

static unsigned serial_rx_cap(const struct serial *s)
{
	return s->fcr & FCR_ENABLE ? RX_FIFO : 1;
}

static uint8_t serial_iir(const struct serial *s)
{
	if ((s->ier & IER_RLSI) && s->overrun)
		return IIR_RLSI;
	if ((s->ier & IER_RDI) && s->rx_count)
		return IIR_RDI;
	if ((s->ier & IER_THRI) && s->thr_ipending)
		return IIR_THRI;
	return IIR_NO_INT; /* modem status never changes outside loopback: no MSI source */
}

/* Called with the lock held after every state change. */
static void serial_update_irq(struct serial *s)
{
	int level = serial_iir(s) != IIR_NO_INT;

	if (level != s->irq_level) {
		s->irq_level = level;
		if (s->o.set_irq)
			s->o.set_irq(s->o.irq_ctx, level);
	}
}

static void serial_rx_clear(struct serial *s)
{
	s->rx_head = s->rx_count = 0;
	s->overrun = false;
	pthread_cond_broadcast(&s->space);
}

/* Lock held. false: full (overrun in loopback). */
static bool serial_rx_push(struct serial *s, uint8_t c)
{
	if (s->rx_count >= serial_rx_cap(s))
		return false;
	s->rx[(s->rx_head + s->rx_count) % RX_FIFO] = c;
	s->rx_count++;
	return true;
}

/* Lock held. What waits in out, written (SERIAL_OUT_ON). */
/* Lock held. len bytes of output written out (the first ones told). */
static void serial_emit(struct serial *s, const uint8_t *p, size_t len)
{
	if (!s->said_first && len) {
		s->said_first = true;
		if (s->o.first_output)
			s->o.first_output(s->o.irq_ctx);
	}
	(void)fs_write_full(s->o.out_fd, p, len);
}

static void serial_flush(struct serial *s)
{
	if (s->out_mode != SERIAL_OUT_ON || !s->out_len)
		return;
	serial_emit(s, s->out, s->out_len);
	s->out_len = 0;
}

/*
 * Lock held. A byte the guest sent: into out, written at a newline or when out is full, else
 * by the flusher within a tick (woken if it sleeps: once per burst of output, not per line).
 * A write per byte cost a boot with console=ttyS0 a third of its time where system calls
 * are dear (nested: docs/run.md).
 */
static void serial_out(struct serial *s, uint8_t c)
{
	while (s->out_mode == SERIAL_OUT_HOLD && s->out_len == SERIAL_OUT_MAX)
		pthread_cond_wait(&s->space, &s->lock);   /* the guest waits for serial_output */
	if (s->out_mode == SERIAL_OUT_DROP)
		return;
	s->out[s->out_len++] = c;
	if (s->out_mode != SERIAL_OUT_ON)
		return;
	if (c == '\n' || s->out_len == SERIAL_OUT_MAX) {
		serial_flush(s);
	} else if (!s->flusher_ticking) {
		s->flusher_ticking = true;
		pthread_cond_signal(&s->out_wake);
	}
}

/*
 * The flusher: asleep until output comes, then every OUT_TICK_NS writes what waits in out
 * (a prompt, a line not ended yet); after OUT_IDLE_TICKS ticks with nothing, asleep again.
 */
static void *serial_flusher_main(void *arg)
{
	struct serial *s = arg;
	struct timespec due;
	unsigned idle = 0;

	pthread_mutex_lock(&s->lock);
	while (!s->stop) {
		if (!s->flusher_ticking) {
			pthread_cond_wait(&s->out_wake, &s->lock);
			idle = 0;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &due);
		due.tv_nsec += OUT_TICK_NS;
		if (due.tv_nsec >= 1000000000L) {
			due.tv_sec++;
			due.tv_nsec -= 1000000000L;
		}
		while (!s->stop && pthread_cond_timedwait(&s->out_wake, &s->lock, &due) != ETIMEDOUT)
			;
		if (s->out_len && s->out_mode == SERIAL_OUT_ON) {
			serial_flush(s);
			idle = 0;
		} else if (++idle >= OUT_IDLE_TICKS) {
			s->flusher_ticking = false;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

void serial_output(struct serial *s, enum serial_out_mode mode)
{
	pthread_mutex_lock(&s->lock);
	serial_flush(s);   /* ON before: what came then goes out now; HOLD before: a no-op */
	if (mode == SERIAL_OUT_ON && s->out_len)
		serial_emit(s, s->out, s->out_len);   /* what was held */
	if (mode != SERIAL_OUT_HOLD)
		s->out_len = 0;
	s->out_mode = mode;
	pthread_cond_broadcast(&s->space);
	pthread_mutex_unlock(&s->lock);
}

static uint8_t serial_read(struct serial *s, unsigned off)
{
	uint8_t v = 0, iir;

	switch (off) {
	case UART_RX:
		if (s->lcr & LCR_DLAB)
			return s->dll;
		if (s->rx_count) {
			v = s->rx[s->rx_head];
			s->rx_head = (s->rx_head + 1) % RX_FIFO;
			s->rx_count--;
			pthread_cond_broadcast(&s->space);
		}
		return v;
	case UART_IER:
		return s->lcr & LCR_DLAB ? s->dlm : s->ier;
	case UART_IIR:
		iir = serial_iir(s);
		if (iir == IIR_THRI)
			s->thr_ipending = false; /* reading IIR that reports THRE clears it */
		return iir | (s->fcr & FCR_ENABLE ? IIR_FIFO_ENABLED : 0);
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		v = LSR_THRE | LSR_TEMT | (s->rx_count ? LSR_DR : 0) | (s->overrun ? LSR_OE : 0);
		s->overrun = false;
		return v;
	case UART_MSR:
		if (!(s->mcr & MCR_LOOP))
			return MSR_DCD | MSR_DSR | MSR_CTS;
		return (s->mcr & MCR_RTS ? MSR_CTS : 0) | (s->mcr & MCR_DTR ? MSR_DSR : 0) |
		       (s->mcr & MCR_OUT1 ? MSR_RI : 0) | (s->mcr & MCR_OUT2 ? MSR_DCD : 0);
	default:
		return s->scr;
	}
}

static void serial_write(struct serial *s, unsigned off, uint8_t v)
{
	uint8_t old;

	switch (off) {
	case UART_TX:
		if (s->lcr & LCR_DLAB) {
			s->dll = v;
			break;
		}
		if (s->mcr & MCR_LOOP) {
			if (!serial_rx_push(s, v))
				s->overrun = true;
		} else {
			serial_out(s, v);
		}
		/* the byte left at once: THR (and the shift register) are empty again */
		s->thr_ipending = true;
		break;
	case UART_IER:
		if (s->lcr & LCR_DLAB) {
			s->dlm = v;
			break;
		}
		old = s->ier;
		s->ier = v & 0x0f;
		if ((old ^ s->ier) & IER_THRI)
			s->thr_ipending = s->ier & IER_THRI; /* THR is always empty */
		break;
	case UART_FCR:
		if ((v ^ s->fcr) & FCR_ENABLE || v & FCR_CLEAR_RCVR)
			serial_rx_clear(s);
		if ((v ^ s->fcr) & FCR_ENABLE || v & FCR_CLEAR_XMIT)
			s->thr_ipending = true;
		s->fcr = v & 0xc9; /* enable, DMA mode, trigger level */
		pthread_cond_broadcast(&s->space);
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		break;
	case UART_SCR:
		s->scr = v;
		break;
	default:
		break; /* LSR, MSR: read-only */
	}
}

void serial_access(struct serial *s, unsigned off, uint8_t *data, bool is_write)
{
	pthread_mutex_lock(&s->lock);
	if (is_write)
		serial_write(s, off & 7, *data);
	else
		*data = serial_read(s, off & 7);
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

void serial_state_save(struct serial *s, struct serial_state *st)
{
	_Static_assert(sizeof(st->rx) == RX_FIFO, "the FIFO fits");
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&s->lock);
	*st = (struct serial_state){
		.ier = s->ier, .fcr = s->fcr, .lcr = s->lcr, .mcr = s->mcr, .scr = s->scr,
		.dll = s->dll, .dlm = s->dlm, .overrun = s->overrun,
		.thr_ipending = s->thr_ipending, .rx_count = (uint8_t)s->rx_count,
		.rx_head = (uint8_t)s->rx_head,
	};
	memcpy(st->rx, s->rx, RX_FIFO);
	pthread_mutex_unlock(&s->lock);
}

int serial_state_load(struct serial *s, const struct serial_state *st)
{
	if (st->ier > 0x0f || st->rx_head >= RX_FIFO || st->rx_count > RX_FIFO ||
	    st->overrun > 1 || st->thr_ipending > 1)
		return -EINVAL;
	pthread_mutex_lock(&s->lock);
	s->ier = st->ier;
	s->fcr = st->fcr;
	s->lcr = st->lcr;
	s->mcr = st->mcr;
	s->scr = st->scr;
	s->dll = st->dll;
	s->dlm = st->dlm;
	s->overrun = st->overrun;
	s->thr_ipending = st->thr_ipending;
	s->rx_head = st->rx_head;
	s->rx_count = st->rx_count > serial_rx_cap(s) ? serial_rx_cap(s) : st->rx_count;
	memcpy(s->rx, st->rx, RX_FIFO);
	s->irq_level = -1;   /* drive the line to what the state says */
	serial_update_irq(s);
	pthread_cond_broadcast(&s->space);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

unsigned serial_receive(struct serial *s, const uint8_t *buf, unsigned len)
{
	unsigned n = 0;

	pthread_mutex_lock(&s->lock);
	while (n < len && !s->paused && !(s->mcr & MCR_LOOP) && serial_rx_push(s, buf[n]))
		n++;
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Reads in_fd into a local buffer, and hands it to the FIFO as the guest makes room. */
static void *serial_input_main(void *arg)
{
	struct serial *s = arg;
	struct pollfd p[2] = { { .fd = s->o.in_fd, .events = POLLIN },
			       { .fd = s->stop_fd, .events = POLLIN } };
	uint8_t buf[256];
	ssize_t n;
	unsigned done;

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		n = read(s->o.in_fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break; /* EOF: no more input */
		for (done = 0; done < (unsigned)n;) {
			done += serial_receive(s, buf + done, (unsigned)n - done);
			pthread_mutex_lock(&s->lock);
			while (!s->stop && done < (unsigned)n &&
			       (s->paused || s->rx_count >= serial_rx_cap(s) ||
				s->mcr & MCR_LOOP))
				pthread_cond_wait(&s->space, &s->lock);
			if (s->stop) {
				pthread_mutex_unlock(&s->lock);
				return NULL;
			}
			pthread_mutex_unlock(&s->lock);
		}
	}
	return NULL;
}

int serial_new(const struct serial_opts *o, struct serial **out)
{
	struct serial *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	int ret;

	if (!s)
		return -ENOMEM;
	s->o = *o;
	s->stop_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->space, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* the flusher's ticks */
	pthread_cond_init(&s->out_wake, &ca);
	pthread_condattr_destroy(&ca);
	ret = -pthread_create(&s->flusher, NULL, serial_flusher_main, s);
	if (ret) {
		serial_free(s);
		return ret;
	}
	s->flusher_started = true;
	if (o->in_fd >= 0) {
		s->stop_fd = eventfd(0, EFD_CLOEXEC);
		if (s->stop_fd < 0) {
			ret = -errno;
			serial_free(s);
			return ret;
		}
		ret = -pthread_create(&s->thread, NULL, serial_input_main, s);
		if (ret) {
			serial_free(s);
			return ret;
		}
		s->thread_started = true;
	}
	*out = s;
	return 0;
}

void serial_pause(struct serial *s, bool paused)
{
	pthread_mutex_lock(&s->lock);
	s->paused = paused;
	if (paused)
		serial_flush(s);   /* the guest's output up to the pause, out now */
	pthread_cond_broadcast(&s->space);
	pthread_mutex_unlock(&s->lock);
}

void serial_free(struct serial *s)
{
	uint64_t one = 1;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	serial_flush(s);
	s->stop = true;
	pthread_cond_broadcast(&s->space);
	pthread_cond_signal(&s->out_wake);
	pthread_mutex_unlock(&s->lock);
	if (s->flusher_started)
		pthread_join(s->flusher, NULL);
	if (s->thread_started) {
		(void)!write(s->stop_fd, &one, sizeof(one)); /* cannot fail on an eventfd */
		pthread_join(s->thread, NULL);
	}
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->space);
	pthread_cond_destroy(&s->out_wake);
	free(s);
}
