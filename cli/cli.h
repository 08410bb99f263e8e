/* SPDX-License-Identifier: MIT */
/* The lazyblk command line: a thin layer over the modules' APIs. */
#ifndef LZ_CLI_H
#define LZ_CLI_H

struct cli_cmd {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);  /* argv[0] is the subcommand name */
};

int cmd_import(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_cas(int argc, char **argv);
int cmd_mkfs(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_overlay(int argc, char **argv);
int cmd_push(int argc, char **argv);

/* Exit codes: 0 ok, 1 failure, 2 usage error. */
#define EXIT_USAGE 2

/* "lazyblk: CMD: unknown option ... (see lazyblk CMD --help)" and EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For getopt_long's '?' / ':' returns (optstring starts with ':', opterr = 0). */
int cli_bad_option(const char *cmd, char **argv, int c);

#endif
