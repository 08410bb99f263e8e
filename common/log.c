/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "esc.h"

#define PROGRESS_EVERY_MS 100
#define PROGRESS_PLAIN_EVERY_MS 1000 /* forced on where stderr is no terminal */

/* The process-wide logging state; the only mutable global in common/. */
static struct {
	const char *ctx;
	int level;
	int progress; /* -1 unknown, 0 off, 1 on */
	int progress_mode; /* log_set_progress: -1 auto, 0 never, 1 always */
	bool progress_plain; /* on, but stderr is no terminal: lines end with \n */
	bool progress_shown;
	bool first_error_only;
	unsigned long errors;
	uint64_t progress_next_ms;  /* when the next progress line is due (atomic) */
	pthread_mutex_t lock;
} g_log = { NULL, 1, -1, -1, false, false, false, 0, 0, PTHREAD_MUTEX_INITIALIZER };

void log_set_context(const char *ctx) { g_log.ctx = ctx; }
void log_set_level(int level) { g_log.level = level; }
void log_first_error_only(bool on) { g_log.first_error_only = on; }
int log_get_level(void) { return g_log.level; }

static void log_emit(const char *kind, const char *fmt, va_list ap, bool error)
{
	char raw[4096], msg[4096];

	/* what a remote or an image said may be in it: no control byte reaches the terminal */
	vsnprintf(raw, sizeof(raw), fmt, ap);
	esc_line(raw, msg, sizeof(msg));
	pthread_mutex_lock(&g_log.lock);
	if (error && g_log.first_error_only && g_log.errors++) {
		pthread_mutex_unlock(&g_log.lock);
		return;
	}
	if (g_log.progress_shown) {
		fputs("\r\033[K", stderr);
		g_log.progress_shown = false;
	}
	fprintf(stderr, "lazyblk: %s%s%s%s\n", g_log.ctx ? g_log.ctx : "",
		g_log.ctx ? ": " : "", kind, msg);
	pthread_mutex_unlock(&g_log.lock);
}

void log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit("", fmt, ap, true);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	if (g_log.level < 1 || g_log.first_error_only)
		return;
	va_start(ap, fmt);
	log_emit("warning: ", fmt, ap, false);
	va_end(ap);
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	if (g_log.level < 2)
		return;
	va_start(ap, fmt);
	log_emit("", fmt, ap, false);
	va_end(ap);
}

void log_debug(const char *fmt, ...)
{
	va_list ap;

	if (g_log.level < 3)
		return;
	va_start(ap, fmt);
	log_emit("debug: ", fmt, ap, false);
	va_end(ap);
}

void log_notice(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit("", fmt, ap, false);
	va_end(ap);
}

void log_set_progress(int mode)
{
	g_log.progress_mode = mode;
	g_log.progress = -1;
}

bool log_progress_enabled(void)
{
	if (g_log.progress < 0) {
		bool tty = isatty(STDERR_FILENO);

		g_log.progress = g_log.progress_mode < 0 ? tty && g_log.level >= 1
							 : g_log.progress_mode;
		g_log.progress_plain = g_log.progress && !tty;
	}
	return g_log.progress == 1;
}

bool log_progress_due(void)
{
	struct timespec ts;
	uint64_t now, due;

	if (!log_progress_enabled())
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	due = __atomic_load_n(&g_log.progress_next_ms, __ATOMIC_RELAXED);
	return now >= due &&
	       __atomic_compare_exchange_n(&g_log.progress_next_ms, &due, now +
					   (g_log.progress_plain ? PROGRESS_PLAIN_EVERY_MS
								 : PROGRESS_EVERY_MS),
					   false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void log_progress(const char *fmt, ...)
{
	char raw[512], msg[512];
	va_list ap;

	if (!log_progress_enabled())
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	esc_line(raw, msg, sizeof(msg));
	pthread_mutex_lock(&g_log.lock);
	if (g_log.progress_plain) {
		fprintf(stderr, "%s\n", msg);
		pthread_mutex_unlock(&g_log.lock);
		return;
	}
	fprintf(stderr, "\r\033[K%s", msg);
	fflush(stderr);
	g_log.progress_shown = true;
	pthread_mutex_unlock(&g_log.lock);
}

void log_progress_done(void)
{
	if (!log_progress_enabled())
		return;
	pthread_mutex_lock(&g_log.lock);
	if (g_log.progress_shown)
		fputs("\r\033[K", stderr);
	g_log.progress_shown = false;
	pthread_mutex_unlock(&g_log.lock);
}
