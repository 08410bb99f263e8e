/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection of an HTTP store's chunks, layouts, manifests and VM snapshot
 * documents (image_ref.h).
 */
#include "image_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease.h"
#include "../../common/why.h"

struct sweep {
	const struct image_sweep_opts *o;
	struct image_sweep_result *res;
	struct remote *r;
	char *why;
	size_t why_len;
};

static bool in_set(const uint8_t (*v)[SHA256_LEN], size_t n, const uint8_t d[SHA256_LEN])
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = memcmp(v[mid], d, SHA256_LEN);

		if (!c)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* "<64 hex><suffix>" into d. */
static bool name_parse(const char *name, const char *suffix, uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];

	if (strlen(name) != SHA256_HEX_LEN + strlen(suffix) || strcmp(name + SHA256_HEX_LEN, suffix))
		return false;
	memcpy(hex, name, SHA256_HEX_LEN);
	hex[SHA256_HEX_LEN] = '\0';
	if (strspn(hex, "0123456789abcdef") != SHA256_HEX_LEN)
		return false;
	return !sha256_from_hex(hex, d);
}

struct sweep_dir {
	struct sweep *x;
	const char *dir, *suffix;
	bool chunks;
	int64_t now;           /* the server's clock (set before the first entry) */
};

/* Before each DELETE: the gc's lease still held (lease.h), else why, and stop. */
static int sweep_held(struct sweep *x)
{
	char lw[768];
	int ret = lease_check(x->o->lease, lw, sizeof(lw));

	if (ret)
		snprintf(x->why, x->why_len, "%s: gc lost its lease on the store (%s): a push may "
			 "be using what is left; stopped before deleting more (%llu deleted): run "
			 "gc again", x->o->remote.url, lw, (unsigned long long)x->res->deleted);
	return ret;
}

static int sweep_one(void *arg, const struct remote_dirent *e)
{
	struct sweep_dir *sd = arg;
	struct sweep *x = sd->x;
	uint64_t size = e->size > 0 ? (uint64_t)e->size : 0;
	char rel[PATH_MAX];
	uint8_t d[SHA256_LEN];
	int ret = 0;

	if (e->dir || !name_parse(e->name, sd->suffix, d))
		return 0; /* not a name lazyblk writes: left alone */
	x->res->listed++;
	if (sd->chunks ? in_set(x->o->chunks, x->o->n_chunks, d)
		       : in_set(x->o->files, x->o->n_files, d)) {
		x->res->kept++;
		return 0;
	}
	if (e->mtime < 0 || (uint64_t)(sd->now - e->mtime) < x->o->grace_secs ||
	    e->mtime > sd->now) {
		/* uploaded within the grace period (or when, the server does not say) */
		x->res->young++;
		x->res->young_bytes += size;
		return 0;
	}
	snprintf(rel, sizeof(rel), "%s%s", sd->dir, e->name);
	if (!x->o->dry_run && (ret = sweep_held(x)))
		return ret;
	if (!x->o->dry_run)
		ret = remote_obj_delete(x->r, rel, "gc", x->why, x->why_len);
	if (!ret) {
		x->res->deleted++;
		x->res->deleted_bytes += size;
		if (x->o->deleted)
			x->o->deleted(x->o->arg, rel, size);
	}
	return ret;
}

/* One directory: its files through the JSON index; -ENOENT when it does not exist. */
static int sweep_dir(struct sweep *x, const char *dir, const char *suffix, bool chunks)
{
	struct sweep_dir sd = { .x = x, .dir = dir, .suffix = suffix, .chunks = chunks };

	return remote_list(x->r, dir, sweep_one, &sd, &sd.now, x->why, x->why_len);
}

int image_sweep_http(const struct image_sweep_opts *o, struct image_sweep_result *res,
		     char *why, size_t why_len)
{
	struct sweep x = { .o = o, .res = res, .why = why, .why_len = why_len };
	struct remote_opts ro = o->remote;
	char w[WHY_MAX] = "";
	unsigned found = 0;
	int ret;

	memset(res, 0, sizeof(*res));
	if (why_len)
		why[0] = '\0';
	ro.push = true;
	ret = remote_open(&ro, &x.r, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", ro.url, w[0] ? w : strerror(-ret));
		return ret;
	}
	if (remote_is_oci(x.r)) {
		snprintf(why, why_len, "%s: not an http(s) store", ro.url);
		ret = -EINVAL;
	} else if (!o->dry_run && !o->lease) {
		/* a push would not know to keep out of the way, nor we of its */
		snprintf(why, why_len, "%s: gc holds no lease on the store: nothing deleted", ro.url);
		ret = -EPERM;
	}
	for (unsigned i = 0; !ret && i < 256 + 3; i++) {
		static const char *const dirs[] = { "layouts/", "manifests/", "snapshots/" };
		static const char *const sfx[] = { ".layout", ".manifest", ".json" };
		char dir[32];

		if (i < 256)
			snprintf(dir, sizeof(dir), "chunks/%02x/", i);
		ret = sweep_dir(&x, i < 256 ? dir : dirs[i - 256], i < 256 ? "" : sfx[i - 256],
				i < 256);
		if (ret == -ENOENT)
			ret = 0; /* a fan-out directory nothing went to yet */
		else if (!ret && i < 256 + 2)
			found++;
	}
	if (!ret && !found) {
		snprintf(why, why_len, "%s: no chunks/xx/, layouts/ or manifests/ listed there (a "
			 "lazyblk store, with autoindex on; autoindex_format json;?)", ro.url);
		ret = -EOPNOTSUPP;
	}
	if (ret == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	remote_close(x.r);
	return ret;
}
