/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>

#include "../common/log.h"
#include "cli.h"

int cli_usage_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	return EXIT_USAGE;
}
