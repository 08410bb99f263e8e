/* SPDX-License-Identifier: MIT */
/* --user and --seccomp (confine_opts.h): the steps are blkd/serve/serve.h's. */
#include "confine_opts.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../blkd/serve/serve.h"
#include "cli.h"

int cli_confine_user(struct cli_confine *c, const char *spec)
{
	char why[256];

	if (confine_user_parse(spec, &c->user, why, sizeof(why)))
		return cli_usage_error("%s", why);
	c->drop = true;
	return 0;
}

/* The library's steps (blkd/serve/serve.h) from the options. */
static void confine_fill(const struct cli_confine *c, const struct cli_confine_dir *dirs,
			 unsigned n, struct serve_confine *sc)
{
	*sc = (struct serve_confine){ .user = c->drop ? &c->user : NULL, .seccomp = c->seccomp };
	for (unsigned i = 0; i < n && i < SERVE_CONFINE_DIRS; i++)
		sc->dirs[i] = (struct serve_dir){ dirs[i].path, dirs[i].depth };
}

int cli_confine_drop(const struct cli_confine *c, const struct cli_confine_dir *dirs,
		     unsigned n)
{
	char why[PATH_MAX + 256];
	struct serve_confine sc;

	confine_fill(c, dirs, n, &sc);
	return serve_confine_drop(&sc, why, sizeof(why)) ? cli_fail(1, why) : 0;
}

int cli_confine_filter(const struct cli_confine *c, unsigned needs)
{
	char why[512];
	struct serve_confine sc;

	confine_fill(c, NULL, 0, &sc);
	return serve_confine_filter(&sc, needs, why, sizeof(why)) ? cli_fail(1, why) : 0;
}

const char *cli_confine_parent(const char *path, char *buf, unsigned len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, len, ".");
	else if (slash == path)
		snprintf(buf, len, "/");
	else
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
	return buf;
}
