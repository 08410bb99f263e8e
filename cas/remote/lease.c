/* SPDX-License-Identifier: MIT */
/* Leases of pushes and gc on an http(s) store (lease.h): written, kept, checked, dropped. */
#include "lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/why.h"
#include "remote_int.h"

static const char *const kind_names[] = { [LEASE_PUSH] = "push", [LEASE_GC] = "gc" };

struct lease {
	struct remote *r;
	enum lease_kind kind;
	char rel[64];          /* "leases/push.<16 hex>" */
	char body[160];
	int64_t ttl_ms;        /* the lifetime this holder counts with (LEASE_TTL_SECS) */
	pthread_t writer;      /* writes it again every ttl_ms / 10 */
	bool writer_started;
	pthread_mutex_t lock;  /* everything below */
	pthread_cond_t wake;   /* lease_drop: stop */
	bool stop;
	int64_t sent_ms;       /* CLOCK_MONOTONIC ms when the last successful write was sent */
	bool lost;             /* once true, for good */
	char failure[400];     /* the last failed write's reason, "" when the last one succeeded */
	char lost_why[700];    /* how it was lost */
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool lease_lost_at(int64_t sent_ms, int64_t now_ms, int64_t ttl_ms)
{
	/* another reads our lease as expired once the server's clock says ttl since its last
	 * write landed, which is no earlier than it was sent: a quarter of ttl is the margin
	 * for a request (ours, or the other's listing) still on its way */
	return now_ms - sent_ms >= ttl_ms - ttl_ms / 4;
}

/* Take l as lost (its lock held): it went gap_ms without a successful write. */
static void lease_lose(struct lease *l, int64_t gap_ms)
{
	if (l->lost)
		return;
	l->lost = true;
	snprintf(l->lost_why, sizeof(l->lost_why), "%s went %llds without being written%s%s%s, "
		 "more than the %llds a lease is trusted", l->rel, (long long)(gap_ms / 1000),
		 l->failure[0] ? " (writing it again: " : "", l->failure, l->failure[0] ? ")" : "",
		 (long long)((l->ttl_ms - l->ttl_ms / 4) / 1000));
}

/* LEASE_TTL_SECS, or the test hook's value when it is set and in range (lease.h). */
static int64_t lease_ttl_ms(void)
{
	const char *s = getenv(LEASE_TTL_ENV);
	char *end;
	long v;

	if (!s || !*s)
		return (int64_t)LEASE_TTL_SECS * 1000;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 8 || v > LEASE_TTL_SECS)
		return (int64_t)LEASE_TTL_SECS * 1000;
	return (int64_t)v * 1000;
}

/* PUT the lease; the time it was sent is the one that counts (lease.h). 0, or -errno. */
static int lease_write(struct lease *l)
{
	struct http_req rq = { 0 };
	char aw[WHY_MAX] = "";
	char *url = remote_obj_url(l->r, l->rel), fail[sizeof(l->failure)] = "";
	int64_t sent = mono_ms(), got;
	int ret;

	if (!url)
		return -ENOMEM;
	rq.method = "PUT";
	rq.url = url;
	rq.body = l->body;
	rq.body_len = strlen(l->body);
	rq.content_type = "application/json";
	rq.max_body = 1u << 20;
	ret = remote_do(l->r, &rq, l->r->retries, aw, sizeof(aw));
	if (ret == -EACCES)
		snprintf(fail, sizeof(fail), "PUT %s: %s", url, aw[0] ? aw : "access refused");
	else if (ret)
		snprintf(fail, sizeof(fail), "PUT %s: %s", url, rq.err[0] ? rq.err : strerror(-ret));
	else if (rq.status < 200 || rq.status > 299)
		snprintf(fail, sizeof(fail), "PUT %s: HTTP status %ld", url, rq.status);
	if (!ret && fail[0])
		ret = -EIO;
	got = mono_ms();
	pthread_mutex_lock(&l->lock);
	if (!ret) {
		/* a write that took so long that the one before had lapsed meanwhile: lost */
		if (l->sent_ms && lease_lost_at(l->sent_ms, got, l->ttl_ms))
			lease_lose(l, got - l->sent_ms);
		l->sent_ms = sent;
	}
	snprintf(l->failure, sizeof(l->failure), "%s", fail);
	pthread_mutex_unlock(&l->lock);
	http_req_clear(&rq);
	free(url);
	return ret;
}

/* The writer thread: the lease written again every tenth of its lifetime, until stopped. */
static void *lease_writer(void *arg)
{
	struct lease *l = arg;
	int64_t every = l->ttl_ms / 10;
	struct timespec at;

	pthread_mutex_lock(&l->lock);
	while (!l->stop) {
		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += every / 1000;
		at.tv_nsec += (every % 1000) * 1000000L;
		if (at.tv_nsec >= 1000000000L) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000L;
		}
		while (!l->stop && pthread_cond_timedwait(&l->wake, &l->lock, &at) != ETIMEDOUT)
			;
		if (l->stop)
			break;
		pthread_mutex_unlock(&l->lock);
		lease_write(l); /* a failure is kept for lease_check; the next turn tries again */
		pthread_mutex_lock(&l->lock);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
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

/* A new lease's name and body (not written yet). */
static int lease_name(struct lease *l, char *why, size_t why_len)
{
	uint8_t rnd[8];
	char host[64] = "";

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return why_set(why, why_len, -errno, "getrandom: %s", strerror(errno));
	snprintf(l->rel, sizeof(l->rel), "leases/%s.", kind_names[l->kind]);
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(l->rel + strlen(l->rel), 3, "%02x", rnd[i]);
	gethostname(host, sizeof(host) - 1);
	for (char *p = host; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	snprintf(l->body, sizeof(l->body), "{\"kind\":\"%s\",\"host\":\"%s\",\"pid\":%ld}\n",
		 kind_names[l->kind], host, (long)getpid());
	return 0;
}

static void lease_free(struct lease *l)
{
	remote_close(l->r);
	pthread_cond_destroy(&l->wake);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

#define LEASE_OURS "the lease of this command on the store"

/*
 * Remove a lease object. A failure is said here (log_error: the command goes on, the lease
 * is left to expire or reaped next time, and no caller is told) and returned.
 */
static int lease_delete(struct remote *r, const char *rel, const char *what)
{
	char why[WHY_MAX] = "";
	int ret = remote_obj_delete(r, rel, what, why, sizeof(why));

	if (ret && why[0])
		log_error("%s", why);
	return ret;
}

int lease_take(const struct remote_opts *o, enum lease_kind kind, struct lease **out,
	       char *why, size_t why_len)
{
	struct remote_opts ro = *o;
	pthread_condattr_t ca;
	struct lease *l;
	char w[WHY_MAX] = "";
	int ret;

	*out = NULL;
	if (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->kind = kind;
	l->ttl_ms = lease_ttl_ms();
	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->wake, &ca);
	pthread_condattr_destroy(&ca);
	ro.push = true;
	ret = remote_open(&ro, &l->r, w, sizeof(w));
	if (ret) {
		snprintf(why, why_len, "%s: %s", o->url, w[0] ? w : strerror(-ret));
		pthread_cond_destroy(&l->wake);
		pthread_mutex_destroy(&l->lock);
		free(l);
		return ret;
	}
	ret = store_listed(l->r, why, why_len);
	if (ret <= 0)
		goto fail;
	ret = lease_name(l, why, why_len);
	if (!ret && (ret = lease_write(l)))
		snprintf(why, why_len, "the lease of this command on the store: %s",
			 l->failure[0] ? l->failure : strerror(-ret));
	if (!ret && (ret = -pthread_create(&l->writer, NULL, lease_writer, l)))
		snprintf(why, why_len, "cannot start the lease's writer: %s", strerror(-ret));
	if (ret) {
		if (l->sent_ms)
			lease_delete(l->r, l->rel, LEASE_OURS); /* left to expire */
		goto fail;
	}
	l->writer_started = true;
	*out = l;
	return 0;
fail:
	lease_free(l);
	return ret < 0 ? ret : 0;
}

int lease_check(struct lease *l, char *why, size_t why_len)
{
	int64_t now = mono_ms();
	int ret = 0;

	if (!l)
		return 0;
	pthread_mutex_lock(&l->lock);
	if (lease_lost_at(l->sent_ms, now, l->ttl_ms))
		lease_lose(l, now - l->sent_ms);
	if (l->lost) {
		snprintf(why, why_len, "%s", l->lost_why);
		ret = -ETIMEDOUT;
	}
	pthread_mutex_unlock(&l->lock);
	return ret;
}

void lease_drop(struct lease *l)
{
	if (!l)
		return;
	if (l->writer_started) {
		pthread_mutex_lock(&l->lock);
		l->stop = true;
		pthread_cond_signal(&l->wake);
		pthread_mutex_unlock(&l->lock);
		pthread_join(l->writer, NULL); /* after a write under way: none lands later */
	}
	lease_delete(l->r, l->rel, LEASE_OURS); /* a failure: left to expire */
	lease_free(l);
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
		if (!lease_delete(l->r, rel, "an expired lease")) /* else: tried again next time */
			seen->reaped++;
	}
	free(s.dead);
	return ret;
}
