/* SPDX-License-Identifier: MIT */
/*
 * Remote tier through cas_source: URL forms, and fetching from a scripted HTTP server in this
 * process (retries on 5xx and resets, timeouts, 404, corrupt bodies fetched again, a corrupt
 * local copy replaced from the remote). The real-server tests (nginx, docker-registry, a
 * fault-injecting proxy) are the integration tests t_remote_*.sh.
 */
#include "../helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "../../../cas/chunk.h"
#include "../../../cas/remote/http.h"
#include "../../../cas/remote/lease.h"
#include "../../../cas/remote/remote.h"
#include "../../../cas/source.h"
#include "../../../cas/store.h"
#include "../../../common/log.h"

/* ------------------------------------------------------------ a scripted HTTP server */

enum act { ACT_OK, ACT_500, ACT_404, ACT_RESET, ACT_FLIP, ACT_STALL };

struct srv {
	int lfd, port;
	pthread_mutex_t lock;
	enum act script[16];   /* what the n-th chunk GET gets; after the end: the last one */
	int n_script, gets;
	const uint8_t *body;   /* the chunk file served for every chunk path */
	size_t body_len;
	bool stop;
};

static struct srv S; /* connection threads are detached: the state outlives each test */

static enum act next_act(void)
{
	enum act a;

	pthread_mutex_lock(&S.lock);
	a = S.gets < S.n_script ? S.script[S.gets] : S.script[S.n_script - 1];
	S.gets++;
	pthread_mutex_unlock(&S.lock);
	return a;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req[8192];
	size_t have = 0;

	for (;;) {
		char hdr[256], *end;
		ssize_t n = recv(fd, req + have, sizeof(req) - have - 1, 0);
		enum act a;

		if (n <= 0)
			break;
		have += (size_t)n;
		req[have] = '\0';
		end = strstr(req, "\r\n\r\n");
		if (!end)
			continue;
		a = next_act();
		have -= (size_t)(end + 4 - req);
		memmove(req, end + 4, have);
		if (a == ACT_RESET) {
			snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
				 S.body_len);
			send_all(fd, hdr, strlen(hdr));
			send_all(fd, S.body, S.body_len / 2);
			break;
		}
		if (a == ACT_STALL) {
			sleep(3);
			break;
		}
		if (a == ACT_500 || a == ACT_404) {
			snprintf(hdr, sizeof(hdr), "HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n",
				 a == ACT_500 ? "500 Internal Server Error" : "404 Not Found");
			send_all(fd, hdr, strlen(hdr));
			continue;
		}
		snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
			 S.body_len);
		send_all(fd, hdr, strlen(hdr));
		if (a == ACT_FLIP) {
			uint8_t *copy = malloc(S.body_len);

			memcpy(copy, S.body, S.body_len);
			copy[S.body_len / 2] ^= 0x40;
			send_all(fd, copy, S.body_len);
			free(copy);
		} else {
			send_all(fd, S.body, S.body_len);
		}
	}
	close(fd);
	return NULL;
}

static void srv_start(void)
{
	if (S.lfd > 0)
		return;
	pthread_mutex_init(&S.lock, NULL);
	test_srv_start(&S.lfd, &S.port, conn_main);
}

static void srv_script(int n, const enum act *acts)
{
	pthread_mutex_lock(&S.lock);
	memcpy(S.script, acts, (size_t)n * sizeof(*acts));
	S.n_script = n;
	S.gets = 0;
	pthread_mutex_unlock(&S.lock);
}

/* ------------------------------------------------------------ fixture */

#define RAW_LEN 200000

struct fx {
	char dir[PATH_MAX], store[PATH_MAX], url[64];
	uint8_t raw[RAW_LEN];
	uint8_t *frame;
	size_t frame_len;
	uint8_t digest[SHA256_LEN];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct chunk_codec *c = chunk_codec_new(3);
	uint64_t seed = 7;
	size_t cap;

	srv_start();
	tmpdir_make(f->dir);
	path_fmt(f->store, "%s/cache", f->dir);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/", S.port);
	for (size_t i = 0; i < RAW_LEN; i++)
		f->raw[i] = (uint8_t)(i % 97 == 0 ? prng_next(&seed) : i / 1000);
	assert_int_equal(sha256_buf(f->raw, RAW_LEN, f->digest), 0);
	cap = chunk_compress_bound(RAW_LEN);
	f->frame = malloc(cap);
	assert_int_equal(chunk_compress(c, f->raw, RAW_LEN, f->frame, cap, &f->frame_len), 0);
	chunk_codec_free(c);
	/*
	 * The server's copy lives as long as the program: a detached connection thread of an
	 * earlier test may still be sending it to a client that has gone (the test's own frame
	 * is freed at teardown; ASan caught such a send on a loaded machine). Every test
	 * serves the same bytes (same seed), so one copy does.
	 */
	if (!S.body) {
		uint8_t *copy = malloc(f->frame_len);

		assert_non_null(copy);
		memcpy(copy, f->frame, f->frame_len);
		S.body_len = f->frame_len;
		__atomic_store_n(&S.body, copy, __ATOMIC_RELEASE);
	}
	assert_int_equal(S.body_len, f->frame_len);
	assert_memory_equal(S.body, f->frame, f->frame_len);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	rm_rf(f->dir);
	free(f->frame);
	free(f);
	return 0;
}

static struct cas_source *open_src(struct fx *f, unsigned timeout_ms, int retries)
{
	struct cas_source_opts o = {
		.store_dir = f->store,
		.remote_url = f->url,
		.timeout_ms = timeout_ms,
		.retries = retries,
	};
	struct cas_source *s = NULL;

	assert_int_equal(cas_source_open(&o, &s, NULL, 0), 0);
	return s;
}

/* Get the chunk; on success check the bytes. */
static int get(struct fx *f, struct cas_source *s)
{
	void *block = NULL;
	size_t len = 0, flen = 0;
	int ret = cas_source_get(s, f->digest, 1u << 20, 16, &block, &len, &flen);

	if (!ret) {
		assert_int_equal(len, RAW_LEN);
		assert_memory_equal((uint8_t *)block + 16, f->raw, RAW_LEN);
		assert_int_equal(flen, f->frame_len);
		free(block);
	}
	return ret;
}

/* ------------------------------------------------------------ tests */

static void test_url_forms(void **state)
{
	static const char *bad[] = {
		"ftp://host/x", "http://", "http:///path", "https://h/p?q=1", "oci://host",
		"oci://host/", "oci:///repo", "oci://host/Upper", "oci://host/repo:bad tag",
		"oci://host/a//b", "oci://host/repo:", "oci://user@host/repo", "", "chunks/",
	};
	struct remote_opts o = { 0 };
	struct remote *r;
	char why[WHY_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.url = bad[i];
		why[0] = '\0';
		r = NULL;
		assert_int_equal(remote_open(&o, &r, why, sizeof(why)), -EINVAL);
		assert_true(why[0]);
		assert_null(r);
	}
	o.url = "http://127.0.0.1:1/store";
	assert_int_equal(remote_open(&o, &r, why, sizeof(why)), 0);
	assert_false(remote_is_oci(r));
	assert_string_equal(remote_url(r), "http://127.0.0.1:1/store");
	remote_close(r);
	/* an OCI remote loads its index at once: a closed port fails cleanly */
	o.url = "oci://127.0.0.1:1/lazyblk/test:v1";
	o.retries = -1;
	o.timeout_ms = 2000;
	why[0] = '\0';
	assert_int_not_equal(remote_open(&o, &r, why, sizeof(why)), 0);
	assert_true(why[0]);
}

/* The dates of nginx's Date header and JSON listings; anything else is not known (-1). */
static void test_http_date(void **state)
{
	static const char *bad[] = {
		"", "Sun, 06 Nov 1994 08:49:37 UTC", "Sunday, 06-Nov-94 08:49:37 GMT",
		"Sun Nov  6 08:49:37 1994", "Sun, 06 Nox 1994 08:49:37 GMT",
		"Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT trailing",
		"Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1969 08:49:37 GMT",
	};

	(void)state;
	assert_int_equal(http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
	assert_int_equal(http_date_parse("Mon, 07 Dec 2026 03:42:21 GMT"), 1796614941);
	assert_int_equal(http_date_parse("Thu, 01 Jan 1970 00:00:00 GMT"), 0);
	assert_int_equal(http_date_parse(NULL), -1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(http_date_parse(bad[i]), -1);
}

/* The next page of a registry's list, from its Link header (RFC 8288). */
static void test_link_next(void **state)
{
	static const struct { const char *h, *want; int ret; } cases[] = {
		{ "</v2/r/tags/list?n=1&last=a>; rel=\"next\"", "/v2/r/tags/list?n=1&last=a", 0 },
		{ "<https://h/v2/r/tags/list?last=b>;rel=next", "https://h/v2/r/tags/list?last=b", 0 },
		{ "</p?x=1>; rel=\"prev\", </n?x=2>; rel=\"next\"", "/n?x=2", 0 },
		{ "</a>; rel=\"prev first\", </b>; title=\"x;, y\"; REL=\"last NEXT\"", "/b", 0 },
		{ "</a,b>; rel=\"next\"", "/a,b", 0 },
		{ "</p>; rel=\"prev\"", NULL, -ENOENT },
		{ "", NULL, -ENOENT },
		{ "</p>; rel=\"nextpage\"", NULL, -ENOENT },
		{ "/n; rel=next", NULL, -EBADMSG },
		{ "</n; rel=next", NULL, -EBADMSG },
		{ "</n>; rel=\"next", NULL, -EBADMSG },
		{ "</n> junk; rel=next", NULL, -EBADMSG },
	};
	char *ref;

	(void)state;
	assert_int_equal(http_link_next(NULL, &ref), -ENOENT);
	assert_null(ref);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(http_link_next(cases[i].h, &ref), cases[i].ret);
		if (cases[i].want)
			assert_string_equal(ref, cases[i].want);
		else
			assert_null(ref);
		free(ref);
	}
}

/* A lease is lost once its last successful write was sent 3/4 of its lifetime ago. */
static void test_lease_lost(void **state)
{
	(void)state;
	assert_false(lease_lost_at(1000, 1000, 600000));
	assert_false(lease_lost_at(1000, 1000 + 449999, 600000));
	assert_true(lease_lost_at(1000, 1000 + 450000, 600000));
	assert_true(lease_lost_at(1000, 1000 + 600000, 600000));
	assert_false(lease_lost_at(0, 5999, 8000));
	assert_true(lease_lost_at(0, 6000, 8000));
}

static void test_fetch_ok_and_cached(void **state)
{
	struct fx *f = *state;
	static const enum act ok[] = { ACT_OK };
	struct cas_source_stats st;
	struct cas_source *s;

	srv_script(1, ok);
	s = open_src(f, 30000, 0);
	assert_int_equal(get(f, s), 0);
	assert_int_equal(store_has(cas_source_store(s), f->digest), 1);
	assert_int_equal(get(f, s), 0); /* from the store now */
	cas_source_get_stats(s, &st);
	assert_int_equal(st.remote_fetches, 1);
	assert_int_equal(st.disk_hits, 1);
	assert_int_equal(st.remote.requests, 1);
	assert_int_equal(st.remote.fetched_bytes, f->frame_len);
	assert_true(st.remote.lat_max_us > 0);
	assert_int_equal(S.gets, 1);
	cas_source_close(s);
}

static void test_retry_5xx_and_reset(void **state)
{
	struct fx *f = *state;
	static const enum act acts[] = { ACT_500, ACT_RESET, ACT_500, ACT_OK };
	struct cas_source_stats st;
	struct cas_source *s;

	srv_script(4, acts);
	s = open_src(f, 30000, 3);
	assert_int_equal(get(f, s), 0);
	cas_source_get_stats(s, &st);
	assert_int_equal(st.remote.retries, 3);
	assert_int_equal(st.remote.requests, 4);
	assert_int_equal(st.remote.failures, 0);
	cas_source_close(s);
}

static void test_retries_exhausted(void **state)
{
	struct fx *f = *state;
	static const enum act acts[] = { ACT_500 };
	struct cas_source_stats st;
	struct cas_source *s;

	srv_script(1, acts);
	s = open_src(f, 30000, 2);
	assert_int_equal(get(f, s), -EIO);
	assert_int_equal(store_has(cas_source_store(s), f->digest), 0);
	cas_source_get_stats(s, &st);
	assert_int_equal(st.remote.requests, 3);
	assert_int_equal(st.remote.failures, 1);
	cas_source_close(s);
}

static void test_not_found(void **state)
{
	struct fx *f = *state;
	static const enum act acts[] = { ACT_404 };
	struct cas_source_stats st;
	struct cas_source *s;

	srv_script(1, acts);
	s = open_src(f, 30000, 3);
	assert_int_equal(get(f, s), -ENOENT);
	cas_source_get_stats(s, &st);
	assert_int_equal(st.remote.requests, 1); /* a 404 is not retried */
	assert_int_equal(st.remote.not_found, 1);
	cas_source_close(s);
}

static void test_corrupt_refetched_once(void **state)
{
	struct fx *f = *state;
	static const enum act once[] = { ACT_FLIP, ACT_OK };
	static const enum act always[] = { ACT_FLIP };
	struct cas_source_stats st;
	struct cas_source *s;

	srv_script(2, once);
	s = open_src(f, 30000, 0);
	assert_int_equal(get(f, s), 0);
	cas_source_get_stats(s, &st);
	assert_int_equal(st.verify_failures, 1);
	assert_int_equal(st.remote_fetches, 1);
	cas_source_close(s);
	rm_rf(f->store);

	srv_script(1, always);
	s = open_src(f, 30000, 0);
	assert_int_equal(get(f, s), -EIO);
	cas_source_get_stats(s, &st);
	assert_int_equal(st.verify_failures, 2);
	assert_int_equal(S.gets, 2); /* fetched once more, then given up */
	assert_int_equal(store_has(cas_source_store(s), f->digest), 0); /* never cached */
	cas_source_close(s);
}

static void test_timeout_bounded(void **state)
{
	struct fx *f = *state;
	static const enum act acts[] = { ACT_STALL };
	struct cas_source *s;
	time_t t0 = time(NULL);

	srv_script(1, acts);
	s = open_src(f, 1000, 1);
	assert_int_equal(get(f, s), -EIO);
	/* two attempts of 1 s and one backoff (< 0.2 s): well under 10 s on any machine */
	assert_true(time(NULL) - t0 < 10);
	cas_source_close(s);
}

static void test_corrupt_local_copy_replaced(void **state)
{
	struct fx *f = *state;
	static const enum act ok[] = { ACT_OK };
	struct cas_source_stats st;
	struct cas_source *s;
	struct store *st0;
	uint8_t *bad = malloc(f->frame_len);

	memcpy(bad, f->frame, f->frame_len);
	bad[f->frame_len - 5] ^= 1;
	assert_int_equal(store_open(f->store, true, &st0), 0);
	assert_int_equal(store_put(st0, f->digest, bad, f->frame_len), 0);
	store_close(st0);
	free(bad);

	srv_script(1, ok);
	s = open_src(f, 30000, 0);
	assert_int_equal(get(f, s), 0);
	cas_source_get_stats(s, &st);
	assert_int_equal(st.verify_failures, 1);
	assert_int_equal(st.remote_fetches, 1);
	assert_int_equal(get(f, s), 0); /* the store holds the good copy now */
	cas_source_get_stats(s, &st);
	assert_int_equal(st.disk_hits, 1);
	cas_source_close(s);
}

static void test_cache_size_needs_remote(void **state)
{
	struct fx *f = *state;
	struct cas_source_opts o = { .store_dir = f->store, .cache_size = 1 << 20 };
	struct cas_source *s = NULL;
	char why[128];

	assert_int_equal(cas_source_open(&o, &s, why, sizeof(why)), -EINVAL);
	assert_null(s);
	assert_string_equal(why, "--cache-size needs --remote (the store is a cache of a remote)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_forms),
		cmocka_unit_test(test_http_date),
		cmocka_unit_test(test_link_next),
		cmocka_unit_test(test_lease_lost),
		cmocka_unit_test_setup_teardown(test_fetch_ok_and_cached, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retry_5xx_and_reset, setup, teardown),
		cmocka_unit_test_setup_teardown(test_retries_exhausted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_found, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_refetched_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_timeout_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_local_copy_replaced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_size_needs_remote, setup, teardown),
	};

	log_set_level(-1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
