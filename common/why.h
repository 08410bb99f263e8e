/* SPDX-License-Identifier: MIT */
/*
 * What a one-shot call says besides its result (docs/conventions.md): why it failed, one line
 * in a buffer of the caller's, and its notes (warnings, details), each line handed to a
 * callback of the caller's. Neither prints: the CLI does (cli_note in cli/util.c).
 *
 * The one way a reason travels: the last two parameters `char *why, size_t why_len` (a
 * context struct may carry the same pair for the calls of one job, as import's and repack's
 * do), filled with why_set() or why_first() only. On failure the callee writes one line
 * there, or leaves it as it was; so the caller starts it empty (`char why[WHY_MAX] = ""`, or
 * the callee clears it on entry) and prints `why[0] ? why : strerror(-err)`. An empty reason
 * after a failure means a plain errno, or, only below the shared chunk layers
 * (docs/conventions.md), that the logger said why already. why_len 0 (why may then be NULL):
 * no reason is wanted. A reason is never a pointer to static text (scripts/check-lib.sh).
 */
#ifndef LZ_COMMON_WHY_H
#define LZ_COMMON_WHY_H

#include <stddef.h>

/* Room for one reason: a message with a path or two in it is cut at this length. */
#define WHY_MAX 512

/*
 * fmt, formatted, into why (why_len bytes, cut to fit; 0: nothing is written, why may be
 * NULL), over whatever it held. Returns err.
 */
int why_set(char *why, size_t why_len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* why_set, unless why holds a reason already: the first failure's, deepest, reason stays. */
int why_first(char *why, size_t why_len, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

enum note_kind {
	NOTE_WARN,    /* something went unlike what the user asked ("warning: ..."; log_warn) */
	NOTE_NOTICE,  /* worth a line at the normal verbosity, without a prefix */
	NOTE_INFO,    /* a detail, for -v (log_info) */
	NOTE_DEBUG,   /* for -vv (log_debug) */
};

/* Where a call's notes go; fn NULL: nowhere. Called on the caller's thread. */
struct note_sink {
	void (*fn)(void *arg, enum note_kind kind, const char *line);
	void *arg;
};

/* One note (a line, without the newline) to s; s or s->fn NULL: dropped. */
void note_emit(const struct note_sink *s, enum note_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
