/* SPDX-License-Identifier: MIT */
/*
 * Error and progress reporting: one clear line on stderr, "lazyblk: CTX: msg". The only
 * code of the library that writes to stderr (docs/conventions.md; scripts/check-lib.sh).
 */
#ifndef LZ_COMMON_LOG_H
#define LZ_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>

/* Set the context shown after "lazyblk: " (normally the subcommand). */
void log_set_context(const char *ctx);
/* Verbosity: 0 quiet (errors only), 1 normal (warnings), 2 verbose (info), 3 debug. */
void log_set_level(int level);
int log_get_level(void);
/*
 * For commands that stop at the first failure while several threads work (export, push):
 * only the first error line is printed, so the command still ends with one clear line;
 * warnings are not printed (the command's summary counts what they would have said).
 */
void log_first_error_only(bool on);

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/*
 * A line that is neither an error nor a warning, shown at every verbosity (also -q) and
 * without a "warning: " prefix: what the user asked to see (run's boot-timer marks).
 */
void log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Progress line on a terminal: redrawn in place with \r; silent when stderr is no tty.
 * log_set_progress: -1 that default, 0 never (--no-progress), 1 always (-p, --progress:
 * where stderr is no terminal, one plain line per second, each ending with \n).
 */
void log_set_progress(int mode);
bool log_progress_enabled(void);
/*
 * True when a progress line is shown and the last one was drawn at least 100 ms ago (at most
 * one caller, from any thread, gets true per period): check it before formatting a line.
 */
bool log_progress_due(void);
void log_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_progress_done(void);

#endif
