/* SPDX-License-Identifier: MIT */
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "cli.h"

#ifndef LAZYBLK_VERSION
#define LAZYBLK_VERSION "0.1.0"
#endif

static const struct cli_cmd commands[] = {
	{ "import", "turn a container image into chunks in a store and a manifest", cmd_import },
	{ "manifest", "inspect a manifest (manifest show FILE)", cmd_manifest },
	{ "cas", "check and maintain a chunk store (verify, stats, gc)", cmd_cas },
	{ "mkfs", "synthesize the ext4 layout of a manifest", cmd_mkfs },
	{ "export", "materialize a layout into a raw disk image", cmd_export },
	{ "serve", "serve a layout as a disk over NBD or vhost-user-blk", cmd_serve },
	{ "run", "boot a micro-VM with the image as its root disk", cmd_run },
	{ "initramfs", "build the initramfs that runs a command in the image (run, QEMU)", cmd_initramfs },
	{ "snapshot", "write the dirty blocks of an overlay as a delta", cmd_snapshot },
	{ "overlay", "inspect an overlay, or start one from a delta (show, apply)", cmd_overlay },
	{ "commit", "turn an overlay's or a delta's blocks into a new layout over its base", cmd_commit },
	{ "push", "publish a store's chunks, or an image by name, to a remote", cmd_push },
	{ "images", "list the images published on a remote (images ls)", cmd_images },
	{ "trace", "inspect a boot trace (trace show FILE)", cmd_trace },
	{ "repack", "pack the boot set a trace read into chunks of its own (a new manifest)", cmd_repack },
	{ "warm", "fetch an image's boot set (a trace) or all of it into the cache", cmd_warm },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lazyblk [-v|-q] [-p|--no-progress] SUBCOMMAND [ARGS...]\n"
		   "       lazyblk help [SUBCOMMAND]\n\n"
		   "Boot sandboxes from container images without downloading them.\n\n"
		   "subcommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'lazyblk help SUBCOMMAND' (or 'lazyblk SUBCOMMAND --help') describes each"
		   " one.\n\n"
		   "options:\n"
		   "  -v, --verbose  more messages (-vv: debug messages too); also after the\n"
		   "                 subcommand, among its options\n"
		   "  -q, --quiet    errors only; also after the subcommand\n"
		   "  -p, --progress show progress lines even when stderr is no terminal\n"
		   "                 (one plain line a second); also after the subcommand\n"
		   "  --no-progress  no progress lines, even on a terminal; also after it\n"
		   "  --version      print the version\n");
}

static const struct cli_cmd *command_find(const char *name)
{
	for (size_t k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
		if (!strcmp(name, commands[k].name))
			return &commands[k];
	return NULL;
}

/* lazyblk help [SUBCOMMAND]: lazyblk --help, or lazyblk SUBCOMMAND --help. */
static int help(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	char *hargv[] = { NULL, "--help", NULL };

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (argc > 2) {
		fprintf(stderr, "lazyblk: help: unexpected argument '%s' (want: lazyblk help "
			"[SUBCOMMAND])\n", argv[2]);
		return EXIT_USAGE;
	}
	cmd = command_find(argv[1]);
	if (!cmd) {
		fprintf(stderr, "lazyblk: help: unknown subcommand '%s' (see lazyblk --help)\n",
			argv[1]);
		return EXIT_USAGE;
	}
	hargv[0] = (char *)cmd->name;
	log_set_context(cmd->name);
	return cmd->run(2, hargv);
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	int i = 1;

	/*
	 * Names are bytes; a UTF-8 character type lets libarchive take pax (UTF-8) names as
	 * they are instead of warning that the C locale cannot hold them.
	 */
	if (!setlocale(LC_CTYPE, "C.UTF-8"))
		setlocale(LC_CTYPE, "");

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			log_set_level(log_get_level() + 1);
		} else if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
			log_set_level(0);
		} else if (!strcmp(argv[i], "-p") || !strcmp(argv[i], "--progress")) {
			log_set_progress(1);
		} else if (!strcmp(argv[i], "--no-progress")) {
			log_set_progress(0);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--version")) {
			printf("lazyblk %s\n", LAZYBLK_VERSION);
			return 0;
		} else {
			fprintf(stderr, "lazyblk: unknown option '%s' (see lazyblk --help)\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[i], "help"))
		return help(argc - i, argv + i);
	cmd = command_find(argv[i]);
	if (cmd) {
		log_set_context(cmd->name);
		return cmd->run(argc - i, argv + i);
	}
	fprintf(stderr, "lazyblk: unknown subcommand '%s' (see lazyblk --help)\n", argv[i]);
	return EXIT_USAGE;
}
