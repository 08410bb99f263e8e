/* SPDX-License-Identifier: MIT */
/*
 * cas/remote/push: a store's chunks pushed to a small WebDAV-like HTTP server in this process
 * (HEAD, PUT): all of them or a set, with several uploaders and with one; a second push that
 * finds everything there; a corrupt chunk never pushed; a chunk or a store that is missing;
 * a server that refuses uploads. The real servers (nginx WebDAV, a docker registry) are the
 * integration tests t_remote_http.sh and t_remote_oci.sh.
 */
#include "../helpers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>

#include "../../../cas/chunk.h"
#include "../../../cas/remote/push.h"
#include "../../../cas/store.h"

#define N_CHUNKS 24
#define MAX_FILES 64

/* ------------------------------------------------------------ a WebDAV-like server */

struct file {
	char path[160];
	uint8_t *body;
	size_t len;
};

static struct {
	int lfd, port;
	pthread_mutex_t lock;
	struct file files[MAX_FILES];
	int n_files;
	int heads, puts;
	bool fail_puts;        /* answer every PUT with a 500 */
} S = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static struct file *file_find(const char *path)
{
	for (int i = 0; i < S.n_files; i++)
		if (!strcmp(S.files[i].path, path))
			return &S.files[i];
	return NULL;
}

/* Answer one request; the body (PUT) is in body. */
static void answer(int fd, const char *method, const char *path, uint8_t *body, size_t len)
{
	const char *status = "404 Not Found";
	struct file *f;

	pthread_mutex_lock(&S.lock);
	f = file_find(path);
	if (!strcmp(method, "HEAD")) {
		S.heads++;
		status = f ? "200 OK" : "404 Not Found";
	} else if (!strcmp(method, "PUT") && S.fail_puts) {
		S.puts++;
		status = "500 Internal Server Error";
	} else if (!strcmp(method, "PUT") && (f || S.n_files < MAX_FILES)) {
		S.puts++;
		if (!f) {
			f = &S.files[S.n_files++];
			snprintf(f->path, sizeof(f->path), "%s", path);
		}
		free(f->body);
		f->body = body;
		f->len = len;
		body = NULL;
		status = "201 Created";
	}
	pthread_mutex_unlock(&S.lock);
	free(body);
	{
		char hdr[128];

		snprintf(hdr, sizeof(hdr), "HTTP/1.1 %s\r\nContent-Length: 0\r\n\r\n", status);
		send_all(fd, hdr, strlen(hdr));
	}
}

static void *conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char req[8192];
	size_t have = 0;

	for (;;) {
		char method[16], path[160], *end, *cl;
		size_t hlen, len = 0, got;
		uint8_t *body = NULL;
		ssize_t n;

		end = have ? strstr(req, "\r\n\r\n") : NULL;
		if (!end) {
			n = recv(fd, req + have, sizeof(req) - have - 1, 0);
			if (n <= 0)
				break;
			have += (size_t)n;
			req[have] = '\0';
			continue;
		}
		if (sscanf(req, "%15s %159s", method, path) != 2)
			break;
		cl = strcasestr(req, "\r\ncontent-length:");
		if (cl && cl < end)
			len = strtoul(cl + 17, NULL, 10);
		hlen = (size_t)(end + 4 - req);
		body = malloc(len ? len : 1);
		if (!body)
			break;
		got = have - hlen < len ? have - hlen : len;
		memcpy(body, req + hlen, got);
		memmove(req, req + hlen + got, have - hlen - got);
		have -= hlen + got;
		req[have] = '\0';
		while (got < len && (n = recv(fd, body + got, len - got, 0)) > 0)
			got += (size_t)n;
		answer(fd, method, path, body, got);
	}
	close(fd);
	return NULL;
}

static void srv_start(void)
{
	test_srv_start(&S.lfd, &S.port, conn_main);
}

static void srv_reset(void)
{
	pthread_mutex_lock(&S.lock);
	for (int i = 0; i < S.n_files; i++) {
		free(S.files[i].body);
		S.files[i] = (struct file){ .body = NULL };
	}
	S.n_files = S.heads = S.puts = 0;
	S.fail_puts = false;
	pthread_mutex_unlock(&S.lock);
}

/* ------------------------------------------------------------ fixture */

struct fixture {
	char dir[PATH_MAX], store[PATH_MAX], url[64];
	uint8_t d[N_CHUNKS][SHA256_LEN];
	uint8_t *frame[N_CHUNKS];
	size_t len[N_CHUNKS];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct chunk_codec *codec = chunk_codec_new(1);
	struct store *s;

	assert_true(f && codec);
	if (!S.port)
		srv_start();
	srv_reset();
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d/dav/", S.port);
	assert_int_equal(store_tmp_open(f->dir, f->store, &s), 0);
	for (int i = 0; i < N_CHUNKS; i++) {
		size_t len = 1000 + (size_t)i * 700, cap = chunk_compress_bound(len);
		uint8_t *raw = malloc(len);

		f->frame[i] = malloc(cap);
		assert_true(raw && f->frame[i]);
		content_make(raw, len, 100 + (uint64_t)i, i % 2, f->d[i]);
		assert_int_equal(chunk_compress(codec, raw, len, f->frame[i], cap, &f->len[i]), 0);
		assert_int_equal(store_put(s, f->d[i], f->frame[i], f->len[i]), 0);
		free(raw);
	}
	assert_int_equal(store_commit(s), 0);
	store_close(s);
	chunk_codec_free(codec);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < N_CHUNKS; i++)
		free(f->frame[i]);
	rm_rf(f->dir);
	free(f);
	return 0;
}

/* The server holds chunk i's frame, byte for byte, under dav/chunks/xx/<hex>. */
static bool srv_has(const struct fixture *f, int i)
{
	char hex[SHA256_HEX_LEN + 1], path[160];
	struct file *file;
	bool ok;

	sha256_to_hex(f->d[i], hex);
	snprintf(path, sizeof(path), "/dav/chunks/%.2s/%s", hex, hex);
	pthread_mutex_lock(&S.lock);
	file = file_find(path);
	ok = file && file->len == f->len[i] && !memcmp(file->body, f->frame[i], f->len[i]);
	pthread_mutex_unlock(&S.lock);
	return ok;
}

static void opts_init(struct fixture *f, struct cas_push_opts *o, unsigned concurrency)
{
	*o = (struct cas_push_opts){ .store_dir = f->store,
				     .remote = { .url = f->url, .concurrency = concurrency,
						 .retries = -1, .timeout_ms = 30000 } };
}

/* ------------------------------------------------------------ tests */

static void test_push_all_then_again(void **state)
{
	struct fixture *f = *state;
	struct test_progress p = { .lock = PTHREAD_MUTEX_INITIALIZER };
	struct cas_push_opts o;
	struct cas_push_stats st;
	char why[256] = "untouched";
	uint64_t bytes = 0;

	opts_init(f, &o, 4);
	o.progress = test_progress_cb;
	o.progress_arg = &p;
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	for (int i = 0; i < N_CHUNKS; i++) {
		assert_true(srv_has(f, i));
		bytes += f->len[i];
	}
	assert_int_equal(st.chunks, N_CHUNKS);
	assert_int_equal(st.uploaded, N_CHUNKS);
	assert_int_equal(st.uploaded_bytes, bytes);
	assert_int_equal(st.present, 0);
	assert_int_equal(S.puts, N_CHUNKS);
	assert_int_equal(p.calls, N_CHUNKS);
	assert_int_equal(p.max_done, N_CHUNKS);
	assert_int_equal(p.total, N_CHUNKS);
	/* a second push finds every chunk there: HEADs only */
	opts_init(f, &o, 1);
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), 0);
	assert_int_equal(st.chunks, N_CHUNKS);
	assert_int_equal(st.uploaded, 0);
	assert_int_equal(st.present, N_CHUNKS);
	assert_int_equal(S.puts, N_CHUNKS);
	assert_int_equal(S.heads, 2 * N_CHUNKS);
}

/* A set of chunks (as lazyblk push IMAGE.layout gives): only those go up. */
static void test_push_set(void **state)
{
	struct fixture *f = *state;
	uint8_t set[3][SHA256_LEN];
	struct cas_push_opts o;
	struct cas_push_stats st;
	char why[256];

	memcpy(set[0], f->d[2], SHA256_LEN);
	memcpy(set[1], f->d[5], SHA256_LEN);
	memcpy(set[2], f->d[11], SHA256_LEN);
	opts_init(f, &o, 2);
	o.chunks = (const uint8_t (*)[SHA256_LEN])set;
	o.n_chunks = 3;
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), 0);
	assert_int_equal(st.chunks, 3);
	assert_int_equal(st.uploaded, 3);
	assert_int_equal(S.n_files, 3);
	assert_true(srv_has(f, 2) && srv_has(f, 5) && srv_has(f, 11));
	/* an empty set: nothing to do, not an error */
	o.n_chunks = 0;
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), 0);
	assert_int_equal(st.chunks, 0);
}

/* A corrupt chunk in the store is never pushed, and stops the push with its reason. */
static void test_push_corrupt(void **state)
{
	struct fixture *f = *state;
	char hex[SHA256_HEX_LEN + 1], path[PATH_MAX], want[256], why[256];
	struct cas_push_opts o;
	struct cas_push_stats st;
	uint8_t *bad = malloc(f->len[7]);

	assert_non_null(bad);
	memcpy(bad, f->frame[7], f->len[7]);
	bad[f->len[7] / 2] ^= 0x5a;
	sha256_to_hex(f->d[7], hex);
	path_fmt(path, "%s/chunks/%.2s/%s", f->store, hex, hex);
	write_file(path, bad, f->len[7]);
	free(bad);
	opts_init(f, &o, 1);
	o.chunks = (const uint8_t (*)[SHA256_LEN])&f->d[7];
	o.n_chunks = 1;
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), -EBADMSG);
	snprintf(want, sizeof(want), "chunk %s is corrupt in the store (", hex);
	assert_memory_equal(why, want, strlen(want));
	assert_non_null(strstr(why, "): not pushed"));
	assert_false(srv_has(f, 7));
	assert_int_equal(S.puts, 0);
}

static void test_push_missing(void **state)
{
	struct fixture *f = *state;
	char hex[SHA256_HEX_LEN + 1], want[PATH_MAX + 64], why[PATH_MAX + 64], nostore[PATH_MAX];
	uint8_t other[SHA256_LEN];
	struct cas_push_opts o;
	struct cas_push_stats st;

	/* a chunk the store does not have */
	memset(other, 0xab, sizeof(other));
	sha256_to_hex(other, hex);
	opts_init(f, &o, 2);
	o.chunks = (const uint8_t (*)[SHA256_LEN])&other;
	o.n_chunks = 1;
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "chunk %s is not in the store", hex);
	assert_string_equal(why, want);
	/* no store at all */
	path_fmt(nostore, "%s/nothing", f->dir);
	o.store_dir = nostore;
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), -ENOENT);
	snprintf(want, sizeof(want), "%s: not a lazyblk store (no chunks/ directory)", nostore);
	assert_string_equal(why, want);
	/* a URL the remote layer refuses: its reason */
	opts_init(f, &o, 1);
	o.remote.url = "http:///nohost";
	assert_int_equal(cas_push(&o, &st, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "http:///nohost: no host in the remote URL");
}

/*
 * Uploads refused (a 500 for every PUT, no retry), by several uploaders at once: the push
 * fails with the first failure's reason in the caller's buffer, the chunk and the request
 * named, and nothing printed (the remote's writes return their reason, common/why.h).
 */
static void test_push_refused(void **state)
{
	struct fixture *f = *state;
	struct cas_push_opts o;
	struct cas_push_stats st;
	char why[512], want[256], hex[SHA256_HEX_LEN + 1], err[PATH_MAX + 16];
	int saved, efd, i, ret;
	off_t printed;

	S.fail_puts = true;
	opts_init(f, &o, 3);
	snprintf(err, sizeof(err), "%s/stderr", f->dir);
	efd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(efd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(efd, 2);
	ret = cas_push(&o, &st, why, sizeof(why));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	printed = lseek(efd, 0, SEEK_END);
	close(efd);
	assert_int_equal(ret, -EIO);
	assert_int_equal(printed, 0);
	/* "chunk HEX: PUT URLchunks/xx/HEX: HTTP 500", HEX one of the store's chunks */
	for (i = 0; i < N_CHUNKS; i++) {
		sha256_to_hex(f->d[i], hex);
		snprintf(want, sizeof(want), "chunk %s: PUT %schunks/%.2s/%s: HTTP 500", hex,
			 f->url, hex, hex);
		if (!strcmp(why, want))
			break;
	}
	if (i == N_CHUNKS)
		fail_msg("why: \"%s\"", why);
	assert_true(S.puts >= 1);
	assert_int_equal(S.n_files, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_push_all_then_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_set, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_push_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
