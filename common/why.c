/* SPDX-License-Identifier: MIT */
#include "why.h"

#include <stdarg.h>
#include <stdio.h>

static int why_vset(char *why, size_t why_len, int err, const char *fmt, va_list ap)
{
	if (why && why_len)
		vsnprintf(why, why_len, fmt, ap);
	return err;
}

int why_set(char *why, size_t why_len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	why_vset(why, why_len, err, fmt, ap);
	va_end(ap);
	return err;
}

int why_first(char *why, size_t why_len, int err, const char *fmt, ...)
{
	va_list ap;

	if (!why || !why_len || why[0])
		return err;
	va_start(ap, fmt);
	why_vset(why, why_len, err, fmt, ap);
	va_end(ap);
	return err;
}

void note_emit(const struct note_sink *s, enum note_kind kind, const char *fmt, ...)
{
	char line[4096]; /* as the logger's */
	va_list ap;

	if (!s || !s->fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	s->fn(s->arg, kind, line);
}
