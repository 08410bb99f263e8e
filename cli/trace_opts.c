/* SPDX-License-Identifier: MIT */
/* The trace and prefetch options shared by serve and run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../blkd/disk/disk.h"
#include "../common/log.h"
#include "cli.h"

const char cli_trace_help[] =
	"      --trace-record FILE record what the guest reads first, in order, into FILE\n"
	"                          (written at exit, or on the control request 'trace stop';\n"
	"                          see lazyblk trace show)\n"
	"      --prefetch TRACE    fetch the chunks a recorded trace read, in its order, in the\n"
	"                          background while the guest runs (demand reads go first)\n"
	"      --prefetch-all      after the trace (or without one), prefetch every other chunk\n"
	"      --readahead N       chunks loaded ahead of sequential reads (default 16, or the\n"
	"                          --fetch-concurrency; none with --prefetch TRACE); 0: none\n";

int cli_trace_option(struct cli_trace *t, int c, const char *arg)
{
	switch (c) {
	case CLI_O_TRACE_RECORD: t->record = arg; return 1;
	case CLI_O_PREFETCH: t->prefetch = arg; return 1;
	case CLI_O_PREFETCH_ALL: t->prefetch_all = true; return 1;
	case CLI_O_READAHEAD: {
		char *end;
		long v;

		errno = 0;
		v = strtol(arg, &end, 10);
		if (errno || end == arg || *end || v < 0 || v > 256) {
			cli_usage_error("bad --readahead '%s' (want 0..256 chunks)", arg);
			return -1;
		}
		t->readahead = v ? (int)v : -1;
		return 1;
	}
	default: return 0;
	}
}

/* IMAGE.manifest for IMAGE.layout, if it exists: malloc'ed, or NULL. */
static char *manifest_beside(const char *layout)
{
	size_t n = strlen(layout);
	char *p;

	if (n > 7 && !strcmp(layout + n - 7, ".layout"))
		n -= 7;
	p = malloc(n + sizeof(".manifest"));
	if (!p)
		return NULL;
	memcpy(p, layout, n);
	strcpy(p + n, ".manifest");
	if (access(p, F_OK)) {
		free(p);
		return NULL;
	}
	return p;
}

int cli_trace_manifest(struct cli_trace *t, const char *layout, const char **path)
{
	if (t->manifest) {
		*path = t->manifest;
		return 0;
	}
	if (!t->found)
		t->found = manifest_beside(layout);
	if (!t->found)
		return cli_usage_error("a trace needs the image's manifest: --manifest FILE (none "
				       "beside %s)", layout);
	*path = t->found;
	return 0;
}

int cli_trace_to_spec(struct cli_trace *t, const char *layout, struct disk_spec *ds)
{
	ds->prefetch_all = t->prefetch_all;
	ds->readahead = t->readahead;
	if (!t->record && !t->prefetch)
		return 0; /* --prefetch-all alone needs no manifest */
	if (t->record && t->prefetch && !strcmp(t->record, t->prefetch))
		return cli_usage_error("--trace-record and --prefetch name the same file");
	if (cli_trace_manifest(t, layout, &ds->manifest_path))
		return EXIT_USAGE;
	ds->trace_record = t->record;
	ds->prefetch_trace = t->prefetch;
	return 0;
}

int cli_trace_finish(struct cli_trace *t, const struct disk *d)
{
	char why[WHY_MAX] = "";
	uint64_t n = 0;
	int ret;

	if (!t->record)
		return 0;
	ret = disk_trace_finish(d, NULL, &n, why, sizeof(why));
	if (ret == -EALREADY || ret == -ENOENT)
		return 0; /* written through the control socket */
	if (ret) {
		log_error("trace %s: %s", t->record, why[0] ? why : strerror(-ret));
		return 1;
	}
	printf("trace: %llu records written to %s\n", (unsigned long long)n, t->record);
	return 0;
}

void cli_trace_free(struct cli_trace *t)
{
	free(t->found);
	t->found = NULL;
}

int cli_serving_option(const char *cmd, char **argv, struct cli_trace *t, struct cli_remote *r,
		       int c, const char *arg)
{
	int ret = cli_trace_option(t, c, arg);

	if (!ret)
		ret = cli_remote_option(r, c, arg);
	if (!ret)
		cli_bad_option(cmd, argv, c);
	return ret;
}
