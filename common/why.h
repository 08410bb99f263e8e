/* SPDX-License-Identifier: MIT */
/*
 * What a one-shot call says besides its result (docs/conventions.md): why it failed, one line
 * in a buffer of the caller's, and its notes (warnings, details), each line handed to a
 * callback of the caller's. Neither prints: the CLI does (cli_note in cli/util.c).
 */
#ifndef LZ_COMMON_WHY_H
#define LZ_COMMON_WHY_H

#include <stddef.h>

/* fmt, formatted, into why (why_len bytes; 0: nothing is written). Returns err. */
int why_set(char *why, size_t why_len, int err, const char *fmt, ...)
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
