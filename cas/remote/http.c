/* SPDX-License-Identifier: MIT */
/* HTTP requests through one curl multi handle driven by one thread. */
#include "http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../../common/dl_curl.h"
#include "../../common/grow.h"

#define CONNECT_TIMEOUT_MS_MAX 10000
#define EASY_POOL_MAX 64
#define RECV_BUFFER (512L << 10)  /* libcurl's largest receive buffer */

/* A request on its way: the caller's http_req plus what the loop needs. */
struct job {
	struct http_req *rq;
	struct job *next;
	CURL *easy;
	struct curl_slist *hdrs;
	size_t cap;                /* of rq->body_out */
	bool too_big;
	bool done;
	bool bg;                   /* started as a background request */
	pthread_cond_t cond;
	struct timespec start;
};

struct http {
	CURLM *multi;              /* made by the loop thread before it sets ready */
	pthread_t thread;
	unsigned concurrency;
	unsigned timeout_ms;
	pthread_mutex_t lock;      /* queue, active, stop, ready, easy pool */
	pthread_cond_t ready_cond;
	bool ready;                /* the loop thread has loaded libcurl (or failed: init_err) */
	int init_err;
	struct job *q_head, *q_tail;
	unsigned active;
	unsigned active_bg;        /* of them background requests (at most bg_max) */
	unsigned bg_max;
	bool stop;
	CURL *pool[EASY_POOL_MAX]; /* easy handles kept for reuse (loop thread only) */
	unsigned n_pool;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = sym_curl_global_init(CURL_GLOBAL_DEFAULT);
}

static uint64_t usec_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(t.tv_sec - t0->tv_sec) * 1000000u +
	       (uint64_t)((t.tv_nsec - t0->tv_nsec) / 1000);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct job *j = arg;
	struct http_req *rq = j->rq;
	size_t len = size * n;

	if (rq->sink) {
		long status = 0;

		sym_curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && status <= 299)
			return rq->sink(rq->sink_arg, p, len) ? 0 : len;
	}
	if (len > rq->max_body - rq->body_out_len) {
		j->too_big = true;
		return 0; /* aborts the transfer */
	}
	if (rq->body_out_len + len > j->cap) {
		curl_off_t cl = -1;
		size_t first = 64 << 10;   /* or the whole body, when its length is known */

		if (!j->cap && sym_curl_easy_getinfo(j->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) ==
				       CURLE_OK && cl > 0 && (uint64_t)cl <= rq->max_body)
			first = (size_t)cl;
		if (!grow_from((void **)&rq->body_out, &j->cap, rq->body_out_len + len, 1, first))
			return 0;
	}
	memcpy(rq->body_out + rq->body_out_len, p, len);
	rq->body_out_len += len;
	return len;
}

/* Progress of a transfer with a cancel flag: non-zero aborts it. */
static int on_xfer(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	const struct job *j = arg;

	(void)dt, (void)dn, (void)ut, (void)un;
	return __atomic_load_n(j->rq->cancel, __ATOMIC_RELAXED) != 0;
}

/* Keep a header value (trimmed) if its name matches. */
static void header_take(const char *line, size_t len, const char *name, char **dst)
{
	size_t nl = strlen(name);
	char *v;

	if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return;
	line += nl + 1;
	len -= nl + 1;
	while (len && (*line == ' ' || *line == '\t')) {
		line++;
		len--;
	}
	while (len && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' '))
		len--;
	v = strndup(line, len);
	if (!v)
		return;
	free(*dst);
	*dst = v;
}

/* Every header of that name, joined by ", " (one list, as RFC 8288 reads several Links). */
static void header_join(const char *line, size_t len, const char *name, char **dst)
{
	char *v = NULL, *all = NULL;

	header_take(line, len, name, &v);
	if (!v || !*dst) {
		*dst = *dst ? *dst : v;
		return;
	}
	if (asprintf(&all, "%s, %s", *dst, v) >= 0) {
		free(*dst);
		*dst = all;
	}
	free(v);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct job *j = arg;
	size_t len = size * n;

	/* a new response (after a redirect or 100-continue) starts afresh */
	if (len > 5 && !strncmp(p, "HTTP/", 5)) {
		free(j->rq->www_authenticate);
		j->rq->www_authenticate = NULL;
		free(j->rq->location);
		j->rq->location = NULL;
		free(j->rq->date);
		j->rq->date = NULL;
		free(j->rq->link);
		j->rq->link = NULL;
	}
	header_take(p, len, "WWW-Authenticate", &j->rq->www_authenticate);
	header_take(p, len, "Location", &j->rq->location);
	header_take(p, len, "Date", &j->rq->date);
	header_join(p, len, "Link", &j->rq->link);
	return len;
}

static int job_setup(struct http *h, struct job *j, CURL *e)
{
	struct http_req *rq = j->rq;
	char hb[4096];
	struct curl_slist *l = NULL, *t;

	j->easy = e;
	sym_curl_easy_setopt(e, CURLOPT_URL, rq->url);
	sym_curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	/* http and https only, redirects too (dl_curl_load refused a libcurl without them) */
	if (sym_curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
	    sym_curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK)
		return -ENOTSUP;
	sym_curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	sym_curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)h->timeout_ms);
	sym_curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(h->timeout_ms < CONNECT_TIMEOUT_MS_MAX ? h->timeout_ms
								       : CONNECT_TIMEOUT_MS_MAX));
	sym_curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	sym_curl_easy_setopt(e, CURLOPT_BUFFERSIZE, RECV_BUFFER); /* fewer, larger reads */
	sym_curl_easy_setopt(e, CURLOPT_USERAGENT, "lazyblk/0.1");
	sym_curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	sym_curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
	sym_curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	sym_curl_easy_setopt(e, CURLOPT_HEADERDATA, j);
	sym_curl_easy_setopt(e, CURLOPT_ERRORBUFFER, rq->err);
	sym_curl_easy_setopt(e, CURLOPT_PRIVATE, j);
	if (rq->cancel) {
		sym_curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_xfer);
		sym_curl_easy_setopt(e, CURLOPT_XFERINFODATA, j);
		sym_curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
	}
	/* libcurl keeps credentials (basic and a custom Authorization header) with the first
	 * host when it follows a redirect, unless told otherwise: never tell it */
	sym_curl_easy_setopt(e, CURLOPT_UNRESTRICTED_AUTH, 0L);
	sym_curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, rq->follow ? 1L : 0L);
	sym_curl_easy_setopt(e, CURLOPT_MAXREDIRS, 8L);
	if (rq->user) {
		sym_curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		sym_curl_easy_setopt(e, CURLOPT_USERNAME, rq->user);
		sym_curl_easy_setopt(e, CURLOPT_PASSWORD, rq->password ? rq->password : "");
	}
	if (!strcmp(rq->method, "HEAD")) {
		sym_curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(rq->method, "PUT") || !strcmp(rq->method, "POST")) {
		sym_curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		sym_curl_easy_setopt(e, CURLOPT_POSTFIELDS, rq->body_len ? rq->body : "");
		sym_curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, rq->method);
		snprintf(hb, sizeof(hb), "Content-Type: %s",
			 rq->content_type ? rq->content_type : "application/octet-stream");
		if (!(t = sym_curl_slist_append(l, hb)))
			goto nomem;
		l = t;
		if (!(t = sym_curl_slist_append(l, "Expect:")))
			goto nomem;
		l = t;
	} else if (!strcmp(rq->method, "DELETE")) {
		sym_curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
	} else {
		sym_curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
	}
	if (rq->accept) {
		snprintf(hb, sizeof(hb), "Accept: %s", rq->accept);
		if (!(t = sym_curl_slist_append(l, hb)))
			goto nomem;
		l = t;
	}
	if (rq->bearer) {
		snprintf(hb, sizeof(hb), "Authorization: Bearer %s", rq->bearer);
		if (!(t = sym_curl_slist_append(l, hb)))
			goto nomem;
		l = t;
	}
	j->hdrs = l;
	sym_curl_easy_setopt(e, CURLOPT_HTTPHEADER, l);
	return 0;
nomem:
	sym_curl_slist_free_all(l);
	return -ENOMEM;
}

static CURL *easy_get(struct http *h)
{
	CURL *e = NULL;

	pthread_mutex_lock(&h->lock);
	if (h->n_pool)
		e = h->pool[--h->n_pool];
	pthread_mutex_unlock(&h->lock);
	if (e)
		sym_curl_easy_reset(e);
	else
		e = sym_curl_easy_init();
	return e;
}

static void easy_put(struct http *h, CURL *e)
{
	pthread_mutex_lock(&h->lock);
	if (h->n_pool < EASY_POOL_MAX) {
		h->pool[h->n_pool++] = e;
		e = NULL;
	}
	pthread_mutex_unlock(&h->lock);
	if (e)
		sym_curl_easy_cleanup(e);
}

/* Hand a finished job back to its caller. */
static void job_finish(struct http *h, struct job *j, int curl_code)
{
	struct http_req *rq = j->rq;

	if (j->easy) {
		long redirects = 0;
		char *eff = NULL;

		sym_curl_easy_getinfo(j->easy, CURLINFO_RESPONSE_CODE, &rq->status);
		sym_curl_easy_getinfo(j->easy, CURLINFO_REDIRECT_COUNT, &redirects);
		if (redirects > 0 &&
		    sym_curl_easy_getinfo(j->easy, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff)
			rq->elsewhere = !http_same_origin(eff, rq->url);
		sym_curl_multi_remove_handle(h->multi, j->easy);
		easy_put(h, j->easy);
		j->easy = NULL;
	}
	sym_curl_slist_free_all(j->hdrs);
	j->hdrs = NULL;
	rq->curl_code = curl_code;
	if (j->too_big) {
		rq->curl_code = CURLE_FILESIZE_EXCEEDED;
		snprintf(rq->err, sizeof(rq->err), "response larger than %zu bytes", rq->max_body);
	} else if (curl_code && !rq->err[0]) {
		snprintf(rq->err, sizeof(rq->err), "%s", sym_curl_easy_strerror(curl_code));
	}
	rq->usec = usec_since(&j->start);
	pthread_mutex_lock(&h->lock);
	h->active--;
	if (j->bg)
		h->active_bg--;
	j->done = true;
	pthread_cond_signal(&j->cond);
	pthread_mutex_unlock(&h->lock);
}

static bool job_bg(const struct job *j)
{
	return j->rq->prio && __atomic_load_n(j->rq->prio, __ATOMIC_RELAXED) != HTTP_PRIO_NOW;
}

/*
 * The next job to start: the first foreground one, else the first background one while
 * background jobs hold fewer than bg_max connections. Unlinked from the queue. Under h->lock.
 */
static struct job *job_next(struct http *h)
{
	struct job **pp, **bg = NULL, *j;

	if (h->active >= h->concurrency)
		return NULL;
	for (pp = &h->q_head; *pp; pp = &(*pp)->next) {
		if (!job_bg(*pp))
			break;
		if (!bg)
			bg = pp;
	}
	if (!*pp) {
		if (!bg || h->active_bg >= h->bg_max)
			return NULL;
		pp = bg;
	}
	j = *pp;
	*pp = j->next;
	if (h->q_tail == j) {
		h->q_tail = NULL;
		for (struct job *k = h->q_head; k; k = k->next)
			h->q_tail = k;
	}
	j->next = NULL;
	j->bg = job_bg(j);
	h->active++;
	if (j->bg)
		h->active_bg++;
	return j;
}

/* Start queued jobs while under the concurrency limit. Loop thread. */
static void start_jobs(struct http *h)
{
	for (;;) {
		struct job *j;
		CURL *e;

		pthread_mutex_lock(&h->lock);
		j = job_next(h);
		pthread_mutex_unlock(&h->lock);
		if (!j)
			return;
		e = easy_get(h);
		if (!e || job_setup(h, j, e) ||
		    sym_curl_multi_add_handle(h->multi, e) != CURLM_OK) {
			if (e && !j->easy)
				sym_curl_easy_cleanup(e);
			snprintf(j->rq->err, sizeof(j->rq->err), "cannot start the request");
			job_finish(h, j, CURLE_OUT_OF_MEMORY);
		}
	}
}

/*
 * Load libcurl and make the multi handle. In the loop thread: the ~10 ms of loading it
 * overlap the rest of a server's start-up, and the first reads of a disk (its metadata) need
 * no remote at all.
 */
static int loop_init(struct http *h)
{
	int ret = dl_curl_load();

	if (ret)
		return ret;
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return -ENOMEM;
	h->multi = sym_curl_multi_init();
	if (!h->multi)
		return -ENOMEM;
	sym_curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
	sym_curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)h->concurrency);
	sym_curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->concurrency * 2);
	return 0;
}

static void *loop_main(void *arg)
{
	struct http *h = arg;
	int ret = loop_init(h);

	pthread_mutex_lock(&h->lock);
	h->init_err = ret;
	h->ready = true;
	pthread_cond_broadcast(&h->ready_cond);
	pthread_mutex_unlock(&h->lock);
	if (ret)
		return NULL;
	for (;;) {
		CURLMsg *msg;
		int running, left;
		bool stop;

		start_jobs(h);
		sym_curl_multi_perform(h->multi, &running);
		while ((msg = sym_curl_multi_info_read(h->multi, &left))) {
			struct job *j = NULL;

			if (msg->msg != CURLMSG_DONE)
				continue;
			sym_curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
			job_finish(h, j, msg->data.result);
		}
		pthread_mutex_lock(&h->lock);
		stop = h->stop && !h->active && !h->q_head;
		pthread_mutex_unlock(&h->lock);
		if (stop)
			return NULL;
		sym_curl_multi_poll(h->multi, NULL, 0, 1000, NULL);
	}
}

int http_open(unsigned concurrency, unsigned timeout_ms, struct http **out)
{
	struct http *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->concurrency = concurrency ? concurrency : 1;
	h->bg_max = h->concurrency > 1 ? h->concurrency / 2 : 1;
	h->timeout_ms = timeout_ms ? timeout_ms : 30000;
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->ready_cond, NULL);
	if (pthread_create(&h->thread, NULL, loop_main, h)) {
		pthread_cond_destroy(&h->ready_cond);
		pthread_mutex_destroy(&h->lock);
		free(h);
		return -EAGAIN;
	}
	*out = h;
	return 0;
}

/* Wait for the loop thread's start; its result. Under h->lock. */
static int ready_wait(struct http *h)
{
	while (!h->ready)
		pthread_cond_wait(&h->ready_cond, &h->lock);
	return h->init_err;
}

void http_close(struct http *h)
{
	int ret;

	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	ret = ready_wait(h);
	h->stop = true;
	pthread_mutex_unlock(&h->lock);
	if (!ret)
		sym_curl_multi_wakeup(h->multi);
	pthread_join(h->thread, NULL);
	for (unsigned i = 0; i < h->n_pool; i++)
		sym_curl_easy_cleanup(h->pool[i]);
	if (h->multi)
		sym_curl_multi_cleanup(h->multi);
	pthread_cond_destroy(&h->ready_cond);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

int http_do(struct http *h, struct http_req *rq)
{
	struct job j = { .rq = rq };
	int ret;

	rq->status = 0;
	rq->curl_code = 0;
	rq->err[0] = '\0';
	rq->body_out = NULL;
	rq->body_out_len = 0;
	rq->www_authenticate = rq->location = rq->date = NULL;
	rq->elsewhere = false;
	if (!rq->max_body)
		rq->max_body = 64u << 20;
	if (rq->sink_restart)
		rq->sink_restart(rq->sink_arg);
	pthread_mutex_lock(&h->lock);
	ret = ready_wait(h);
	if (ret) {
		pthread_mutex_unlock(&h->lock);
		snprintf(rq->err, sizeof(rq->err), "%s", ret == -ELIBACC ? "libcurl cannot be loaded"
									 : strerror(-ret));
		rq->curl_code = CURLE_FAILED_INIT;
		return ret == -ENOMEM ? ret : -EIO;
	}
	pthread_cond_init(&j.cond, NULL);
	clock_gettime(CLOCK_MONOTONIC, &j.start);
	if (h->q_tail)
		h->q_tail->next = &j;
	else
		h->q_head = &j;
	h->q_tail = &j;
	pthread_mutex_unlock(&h->lock);
	sym_curl_multi_wakeup(h->multi);
	pthread_mutex_lock(&h->lock);
	while (!j.done)
		pthread_cond_wait(&j.cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	pthread_cond_destroy(&j.cond);
	if (rq->curl_code == CURLE_OUT_OF_MEMORY)
		return -ENOMEM;
	return rq->curl_code ? -EIO : 0;
}

void http_kick(struct http *h)
{
	bool ready;

	pthread_mutex_lock(&h->lock);
	ready = h->ready && !h->init_err;
	pthread_mutex_unlock(&h->lock);
	if (ready)
		sym_curl_multi_wakeup(h->multi);
}

void http_req_clear(struct http_req *rq)
{
	free(rq->body_out);
	free(rq->www_authenticate);
	free(rq->location);
	free(rq->date);
	free(rq->link);
	rq->body_out = NULL;
	rq->body_out_len = 0;
	rq->www_authenticate = rq->location = rq->date = rq->link = NULL;
}

bool http_req_transient(const struct http_req *rq)
{
	if (rq->curl_code) {
		switch (rq->curl_code) {
		case CURLE_FILESIZE_EXCEEDED:
		case CURLE_OUT_OF_MEMORY:
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
		case CURLE_TOO_MANY_REDIRECTS:
		case CURLE_WRITE_ERROR: /* the sink refused the body */
		case CURLE_ABORTED_BY_CALLBACK: /* cancelled */
			return false;
		default:
			return true; /* timeouts, resets, refused, truncated, DNS, TLS hiccups */
		}
	}
	return rq->status == 408 || rq->status == 429 || rq->status >= 500;
}

bool http_req_timed_out(const struct http_req *rq)
{
	return rq->curl_code == CURLE_OPERATION_TIMEDOUT;
}
