/* SPDX-License-Identifier: MIT */
/*
 * The two steps of a server's confinement once everything it needs is open (serve.h):
 * become --user and check what it must write, then the seccomp filter. lazyblk serve takes
 * them at readiness (serve.c), lazyblk run before its first vCPU runs.
 */
#include <limits.h>
#include <stdio.h>

#include "serve.h"

int serve_confine_drop(const struct serve_confine *c, char *why, size_t why_len)
{
	char w[PATH_MAX + 128];
	int ret;

	if (!c->user)
		return 0;
	ret = confine_drop_user(c->user, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "--user %s: %s", c->user->name, w);
	for (unsigned i = 0; i < SERVE_CONFINE_DIRS; i++) {
		const struct serve_dir *d = &c->dirs[i];

		if (!d->path)
			continue;
		ret = confine_check_dir(d->path, d->depth, w, sizeof(w));
		if (ret)
			return why_set(why, why_len, ret, "--user %s: %s (it must be writable by that "
				       "user)", c->user->name, w);
	}
	return 0;
}

int serve_confine_filter(const struct serve_confine *c, unsigned needs, char *why,
			 size_t why_len)
{
	char w[256];
	int ret;

	if (!c->seccomp)
		return 0;
	ret = confine_seccomp(needs, w, sizeof(w));
	return ret ? why_set(why, why_len, ret, "--%s", w) : 0;
}
