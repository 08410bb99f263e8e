/* SPDX-License-Identifier: MIT */
/*
 * Subcommands whose engines are not built yet (vmm-glue).
 * They document their contract in --help and fail with one clear line otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "cli.h"

struct pending {
	const char *name;
	const char *usage;
};

static const struct pending pending_cmds[] = {
	{ "run", "usage: lazyblk run IMAGE.layout --store DIR [--remote URL] [--overlay FILE]\n"
		 "            --kernel FILE [--initrd FILE] [--append ARGS] [--cpus N] [--mem MiB]"
		 " [-- CMD ...]\n\nBoot a micro-VM whose root disk is the lazy image.\n" },
};

static int pending_run(const char *name, int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(pending_cmds) / sizeof(pending_cmds[0]); i++) {
		if (strcmp(pending_cmds[i].name, name))
			continue;
		for (int k = 1; k < argc; k++) {
			if (!strcmp(argv[k], "-h") || !strcmp(argv[k], "--help")) {
				fputs(pending_cmds[i].usage, stdout);
				fputs("\n(not available in this version yet)\n", stdout);
				return 0;
			}
		}
		log_error("not available in this version yet");
		return 1;
	}
	return 1;
}

int cmd_run(int argc, char **argv) { return pending_run("run", argc, argv); }
