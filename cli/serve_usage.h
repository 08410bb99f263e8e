/* SPDX-License-Identifier: MIT */
#ifndef LZ_CLI_SERVE_USAGE_H
#define LZ_CLI_SERVE_USAGE_H

/* lazyblk serve --help: printf(serve_usage, cli_remote_help, cli_trace_help). */
extern const char serve_usage[];

#endif
