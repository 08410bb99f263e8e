/* SPDX-License-Identifier: MIT */
/* Leases of pushes and gc on an http(s) store (lease.h). */
#include "lease.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>


static const char *const kind_names[] = { [LEASE_PUSH] = "push", [LEASE_GC] = "gc" };

struct lease {
	struct remote *r;
	enum lease_kind kind;
	char rel[64];          /* "leases/push.<16 hex>" */
	char body[160];
	int64_t written;       /* CLOCK_MONOTONIC seconds of the last write (atomic) */
	int refreshing;        /* one refresher at a time (atomic) */
};

static int64_t mono_secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec;
}

static int lease_write(struct lease *l)
{
	int ret = remote_obj_put(l->r, l->rel, l->body, strlen(l->body), "application/json",
				 "the lease of this command on the store");

	if (!ret)
		__atomic_store_n(&l->written, mono_secs(), __ATOMIC_RELAXED);
	return ret;
}

static int count_any(void *arg, const struct remote_dirent *e)
{
	(void)e;
	++*(unsigned *)arg;
	return 0;
}

/* Whether the store is listed as JSON: 1 yes, 0 no, -errno with why. */
static int store_listed(struct remote *r, char *why, size_t why_len)
{
	unsigned n = 0;
	int ret = remote_list(r, "leases/", count_any, &n, NULL, why, why_len);

	if (ret == -ENOENT)
		ret = remote_list(r, "", count_any, &n, NULL, why, why_len);
	if (ret == -ENOENT || ret == -EOPNOTSUPP)
		return 0; /* nothing there yet, or no listing: no gc can run there */
	return ret ? ret : 1;
}

int lease_take(const struct remote_opts *o, enum lease_kind kind, struct lease **out,
	       char *why, size_t why_len)
{
	struct remote_opts ro = *o;
	struct lease *l;
	const char *w = NULL;
	uint8_t rnd[8];
	char host[64] = "";
	int ret;

	*out = NULL;
	if (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->kind = kind;
	ro.push = true;
	ret = remote_open(&ro, &l->r, &w);
	if (ret) {
		snprintf(why, why_len, "%s: %s", o->url, w ? w : strerror(-ret));
		free(l);
		return ret;
	}
	ret = store_listed(l->r, why, why_len);
	if (ret <= 0)
		goto fail;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		ret = -errno;
		snprintf(why, why_len, "getrandom: %s", strerror(errno));
		goto fail;
	}
	snprintf(l->rel, sizeof(l->rel), "leases/%s.", kind_names[kind]);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(l->rel + strlen(l->rel), 3, "%02x", rnd[i]);
	gethostname(host, sizeof(host) - 1);
	for (char *p = host; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	snprintf(l->body, sizeof(l->body), "{\"kind\":\"%s\",\"host\":\"%s\",\"pid\":%ld}\n",
		 kind_names[kind], host, (long)getpid());
	ret = lease_write(l);
	if (ret) {
		if (why_len)
			why[0] = '\0'; /* the PUT said why */
		goto fail;
	}
	*out = l;
	return 0;
fail:
	remote_close(l->r);
	free(l);
	return ret < 0 ? ret : 0;
}

void lease_refresh(struct lease *l)
{
	int busy = 0;

	if (!l || mono_secs() - __atomic_load_n(&l->written, __ATOMIC_RELAXED) < LEASE_REFRESH_SECS)
		return;
	if (!__atomic_compare_exchange_n(&l->refreshing, &busy, 1, false, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return; /* another thread is at it */
	if (mono_secs() - __atomic_load_n(&l->written, __ATOMIC_RELAXED) >= LEASE_REFRESH_SECS)
		lease_write(l); /* a failure was logged; the next call tries again */
	__atomic_store_n(&l->refreshing, 0, __ATOMIC_RELEASE);
}

void lease_drop(struct lease *l)
{
	if (!l)
		return;
	remote_obj_delete(l->r, l->rel, "the lease of this command on the store");
	remote_close(l->r);
	free(l);
}

struct scan {
	struct lease *l;
	enum lease_kind kind;
	bool reap;
	struct lease_seen *seen;
	int64_t now;
	char (*dead)[40];
	size_t n_dead;
};

/* "push.<16 hex>" or "gc.<16 hex>": its kind, or -1. */
static int lease_name_kind(const char *name)
{
	for (int k = 0; k < 2; k++) {
		size_t n = strlen(kind_names[k]);

		if (!strncmp(name, kind_names[k], n) && name[n] == '.' && strlen(name + n + 1) == 16 &&
		    strspn(name + n + 1, "0123456789abcdef") == 16)
			return k;
	}
	return -1;
}

static int scan_one(void *arg, const struct remote_dirent *e)
{
	struct scan *s = arg;
	int kind = e->dir ? -1 : lease_name_kind(e->name);
	int64_t age;

	if (kind < 0 || !strcmp(e->name, strchr(s->l->rel, '/') + 1))
		return 0;
	age = e->mtime < 0 ? 0 : s->now - e->mtime; /* no time: taken as live */
	if (age >= LEASE_TTL_SECS) {
		char (*v)[40];

		if (!s->reap)
			return 0;
		v = realloc(s->dead, (s->n_dead + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->dead = v;
		snprintf(s->dead[s->n_dead++], sizeof(*v), "%s", e->name);
		return 0;
	}
	if (kind != (int)s->kind)
		return 0;
	if (!s->seen->live++) {
		snprintf(s->seen->name, sizeof(s->seen->name), "%s", e->name);
		s->seen->age = age < 0 ? 0 : age;
	}
	return 0;
}

int lease_others(struct lease *l, enum lease_kind kind, bool reap, struct lease_seen *seen,
		 char *why, size_t why_len)
{
	struct scan s = { .l = l, .kind = kind, .reap = reap, .seen = seen };
	char rel[64];
	int ret;

	memset(seen, 0, sizeof(*seen));
	ret = remote_list(l->r, "leases/", scan_one, &s, &s.now, why, why_len);
	if (ret == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	for (size_t i = 0; !ret && i < s.n_dead; i++) {
		snprintf(rel, sizeof(rel), "leases/%s", s.dead[i]);
		if (!remote_obj_delete(l->r, rel, "an expired lease"))
			seen->reaped++;
	}
	free(s.dead);
	return ret;
}
