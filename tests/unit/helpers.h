/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for the cmocka unit tests: temporary directories, recursive removal,
 * a deterministic PRNG, small file helpers, and the fixtures more than one test builds (a
 * store in a temporary directory, chunk contents, a raw disk file, resealed digests).
 * Header-only (static inline) so that each test binary stays a single translation unit.
 */
#ifndef LZ_TESTS_UNIT_HELPERS_H
#define LZ_TESTS_UNIT_HELPERS_H

#include <arpa/inet.h>
#include <errno.h>
#include <glob.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include "../../cas/store.h"
#include "../../common/sha256.h"

/*
 * A fresh directory under $TMPDIR, else /dev/shm, else /tmp; aborts the test on failure.
 * tmpfs by default: the store's syncfs(2)/fsync calls then cost nothing, so the unit tests
 * do not slow down with whatever else is writing to the disk.
 */
static inline void tmpdir_make(char buf[PATH_MAX])
{
	const char *base = getenv("TMPDIR");

	if (!base || !*base)
		base = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(buf, PATH_MAX, "%s/lazyblk-unit.XXXXXX", base);
	assert_non_null(mkdtemp(buf));
}

static inline int rm_rf_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

/* rm -rf; directories made unreadable are not expected here. */
static inline void rm_rf(const char *path)
{
	nftw(path, rm_rf_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* "%s/%s"-style path building that fails the test on truncation. */
static inline void path_fmt(char buf[PATH_MAX], const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void path_fmt(char buf[PATH_MAX], const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, PATH_MAX, fmt, ap);
	va_end(ap);
	assert_true(n > 0 && n < PATH_MAX);
}

/* xorshift64*: deterministic, so every failure is reproducible. */
static inline uint64_t prng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static inline void prng_fill(uint64_t *s, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		uint64_t v = prng_next(s);
		size_t n = len < 8 ? len : 8;

		memcpy(p, &v, n);
		p += n;
		len -= n;
	}
}

static inline void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

static inline bool path_exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Whether any path matches the glob pattern (a writer's temporary DIR/NAME.tmp.XXXXXX). */
static inline bool path_glob_exists(const char *pattern)
{
	glob_t g;
	bool any = glob(pattern, GLOB_NOSORT, NULL, &g) == 0 && g.gl_pathc > 0;

	globfree(&g);
	return any;
}

static inline double now_monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ shared fixtures */

/* dir: a fresh temporary directory; store: dir/store, opened (created) into *s. */
static inline int store_tmp_open(char dir[PATH_MAX], char store[PATH_MAX], struct store **s)
{
	tmpdir_make(dir);
	path_fmt(store, "%s/store", dir);
	return store_open(store, true, s);
}

/*
 * len bytes of chunk content from seed into raw, and their sha256 into digest.
 * compressible: letters from a 4-letter alphabet (zstd shrinks them); else random bytes.
 */
static inline void content_make(uint8_t *raw, size_t len, uint64_t seed, bool compressible,
				uint8_t digest[SHA256_LEN])
{
	prng_fill(&seed, raw, len);
	if (compressible)
		for (size_t i = 0; i < len; i++)
			raw[i] = (uint8_t)(raw[i] % 4 + 'a');
	assert_int_equal(sha256_buf(raw, len, digest), 0);
}

/*
 * A file whose last SHA256_LEN bytes are the sha256 of the rest (manifests, traces): make
 * them match again after a test edited the body.
 */
static inline void sha256_reseal(uint8_t *buf, size_t len)
{
	assert_int_equal(sha256_buf(buf, len - SHA256_LEN, buf + len - SHA256_LEN), 0);
}

/* dir: a fresh temporary directory; path: dir/disk.raw, the len bytes from seed left in img. */
static inline void disk_file_make(char dir[PATH_MAX], char path[PATH_MAX], uint8_t *img,
				  size_t len, uint64_t seed)
{
	tmpdir_make(dir);
	path_fmt(path, "%s/disk.raw", dir);
	prng_fill(&seed, img, len);
	write_file(path, img, len);
}

/* ---- a loopback TCP server for protocol tests */

struct test_srv_accept {
	int lfd;
	void *(*conn)(void *);     /* runs on a detached thread per connection, arg: the fd */
};

static inline void *test_srv_accept_main(void *arg)
{
	struct test_srv_accept *a = arg;

	for (;;) {
		int fd = accept(a->lfd, NULL, NULL);
		pthread_t t;

		if (fd < 0)
			return NULL;
		if (pthread_create(&t, NULL, a->conn, (void *)(intptr_t)fd) == 0)
			pthread_detach(t);
		else
			close(fd);
	}
}

/*
 * Listen on 127.0.0.1, a free port (*port), and run conn(fd) on a thread of its own for each
 * connection accepted, for the rest of the test program (*lfd: the listening socket).
 */
static inline void test_srv_start(int *lfd, int *port, void *(*conn)(void *))
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct test_srv_accept *acc = malloc(sizeof(*acc));
	socklen_t al = sizeof(a);
	pthread_t t;

	assert_non_null(acc);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(*lfd >= 0);
	assert_int_equal(bind(*lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(*lfd, 64), 0);
	assert_int_equal(getsockname(*lfd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	*acc = (struct test_srv_accept){ .lfd = *lfd, .conn = conn };
	assert_int_equal(pthread_create(&t, NULL, test_srv_accept_main, acc), 0);
	pthread_detach(t);
}

/* ---- a progress callback that remembers what it was told (thread-safe) */

struct test_progress {
	pthread_mutex_t lock;
	uint64_t calls, max_done, total;
};

static inline void test_progress_cb(void *arg, uint64_t done, uint64_t total)
{
	struct test_progress *p = arg;

	pthread_mutex_lock(&p->lock);
	p->calls++;
	if (done > p->max_done)
		p->max_done = done;
	p->total = total;
	pthread_mutex_unlock(&p->lock);
}

#endif
