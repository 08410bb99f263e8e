/* SPDX-License-Identifier: MIT */
#include <getopt.h>
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

int cli_bad_option(const char *cmd, char **argv, int c)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		return cli_usage_error("option '%s' needs an argument (see lazyblk %s --help)", arg,
				       cmd);
	if (optopt && c == '?' && arg[0] == '-' && arg[1] != '-')
		return cli_usage_error("unknown option '-%c' (see lazyblk %s --help)", optopt, cmd);
	return cli_usage_error("unknown option '%s' (see lazyblk %s --help)", arg, cmd);
}
