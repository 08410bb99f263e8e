/* SPDX-License-Identifier: MIT */
/*
 * --user USER[:GROUP] and --seccomp of lazyblk serve and run (common/confine.h): the options,
 * and the two steps each command takes once everything it needs is open (the library's,
 * blkd/serve/serve.h: serve_confine_drop, serve_confine_filter). Each failure prints one
 * line.
 */
#ifndef LZ_CLI_CONFINE_OPTS_H
#define LZ_CLI_CONFINE_OPTS_H

#include <stdbool.h>

#include "../common/confine.h"

struct cli_confine {
	bool drop;               /* --user given */
	bool seccomp;            /* --seccomp */
	struct confine_user user;
};

/* --help's lines; when: the rest of --user's first line, saying when (<= 56 columns) */
#define CLI_CONFINE_HELP(when) \
	"      --user USER[:GROUP] " when "\n" \
	"                          become USER (a name or a number) with GROUP (default:\n" \
	"                          USER's primary group), no supplementary groups, no\n" \
	"                          capabilities; needs root. USER must be able to write the\n" \
	"                          store (with --remote) and where --stats-json and\n" \
	"                          --trace-record go (checked then)\n" \
	"      --seccomp           then allow only the system calls it needs (a seccomp\n" \
	"                          filter in every thread): exec, fork, new listening\n" \
	"                          sockets, ptrace, namespaces... fail with EPERM\n"

/* --user's argument: 0, or EXIT_USAGE (said why). */
int cli_confine_user(struct cli_confine *c, const char *spec);

/*
 * How deep under the store --user's writability is checked: STORE, STORE/chunks (tmp,
 * plain), STORE/chunks/XX (cas/store.c's fan-out). docs/security.md.
 */
#define CLI_CONFINE_STORE_DEPTH 2

/* A directory the command writes after the switch, and how deep its subdirectories go. */
struct cli_confine_dir {
	const char *path;        /* NULL: none */
	unsigned depth;
};

/*
 * Step 1: become --user (if given), then check that it can write into each of the n dirs
 * and their subdirectories. 0, or 1 (said why).
 */
int cli_confine_drop(const struct cli_confine *c, const struct cli_confine_dir *dirs,
		     unsigned n);

/* Step 2: the seccomp filter (if --seccomp; needs: enum confine_needs). 0, or 1 (said why). */
int cli_confine_filter(const struct cli_confine *c, unsigned needs);

/* The directory holding path, into buf (for the files a command writes at exit). */
const char *cli_confine_parent(const char *path, char *buf, unsigned len);

#endif
