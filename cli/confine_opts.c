/* SPDX-License-Identifier: MIT */
/* --user and --seccomp (confine_opts.h). */
#include "confine_opts.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "../common/log.h"
#include "cli.h"

int cli_confine_user(struct cli_confine *c, const char *spec)
{
	char why[256];

	if (confine_user_parse(spec, &c->user, why, sizeof(why)))
		return cli_usage_error("%s", why);
	c->drop = true;
	return 0;
}

int cli_confine_drop(const struct cli_confine *c, const struct cli_confine_dir *dirs,
		     unsigned n)
{
	char why[PATH_MAX + 128];

	if (!c->drop)
		return 0;
	if (confine_drop_user(&c->user, why, sizeof(why))) {
		log_error("--user %s: %s", c->user.name, why);
		return 1;
	}
	for (unsigned i = 0; i < n; i++) {
		if (dirs[i].path && confine_check_dir(dirs[i].path, dirs[i].depth, why,
						       sizeof(why))) {
			log_error("--user %s: %s (it must be writable by that user)", c->user.name,
				  why);
			return 1;
		}
	}
	return 0;
}

int cli_confine_filter(const struct cli_confine *c, unsigned needs)
{
	char why[256];

	if (!c->seccomp)
		return 0;
	if (confine_seccomp(needs, why, sizeof(why))) {
		log_error("--%s", why);
		return 1;
	}
	return 0;
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
