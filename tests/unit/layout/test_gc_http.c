/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for layout/gc_http.c: a --keep resolved (a layout file, a damaged one, an
 * image reference without a store), and gc_http refusing, with one line and nothing
 * removed, a server that lists nothing (no place for leases; no image list). The sweep
 * against a real nginx store is tests/integration/t_images.sh and t_remote_lease.sh.
 */
#include "../helpers.h"

#include <sys/socket.h>

#include "../../../layout/gc_http.h"
#include "../../../layout/layout.h"

#define BLK DISK_BLOCK

struct fixture {
	char dir[PATH_MAX];
	char store[PATH_MAX];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	tmpdir_make(f->dir);
	path_fmt(f->store, "%s/store", f->dir);
	assert_int_equal(mkdir(f->store, 0755), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rm_rf(f->dir);
	free(f);
	return 0;
}

/* An HTTP server that answers every request 404 (an empty store that lists nothing). */
static void *conn_404(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static const char resp[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
				   "Connection: close\r\n\r\n";
	char buf[4096];
	size_t have = 0;
	ssize_t n;

	while (have < sizeof(buf) - 1 && (n = recv(fd, buf + have, sizeof(buf) - 1 - have, 0)) > 0) {
		have += (size_t)n;
		buf[have] = 0;
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	if (send(fd, resp, sizeof(resp) - 1, MSG_NOSIGNAL) < 0)
		(void)0;
	close(fd);
	return NULL;
}

static int srv_port;

static const char *srv_url(char url[64])
{
	static int lfd = -1;

	if (lfd < 0)
		test_srv_start(&lfd, &srv_port, conn_404);
	snprintf(url, 64, "http://127.0.0.1:%d/store/", srv_port);
	return url;
}

static void test_keep_file(void **state)
{
	struct fixture *f = *state;
	struct chunk_refs r = { 0 };
	struct layout_writer *w;
	uint8_t meta[BLK] = { 1 }, c1[SHA256_LEN] = { 1 }, c2[SHA256_LEN] = { 2 };
	char path[PATH_MAX], why[PATH_MAX + 512];

	path_fmt(path, "%s/img.layout", f->dir);
	assert_int_equal(layout_writer_new(path, 16, &w), 0);
	assert_int_equal(layout_add_meta(w, 0, meta, 1), 0);
	assert_int_equal(layout_add_data(w, 2 * BLK, BLK, c1, 0), 0);
	assert_int_equal(layout_add_data(w, 4 * BLK, BLK, c2, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	why[0] = 'x';
	assert_int_equal(chunk_refs_add_keep(&r, path, NULL, why, sizeof(why)), 0);
	assert_int_equal(r.n, 2);
	assert_int_equal(r.n_layouts, 1);
	chunk_refs_free(&r);

	/* not an image file: its name and why, and that nothing is removed */
	path_fmt(path, "%s/junk", f->dir);
	write_file(path, "junk", 4);
	assert_int_equal(chunk_refs_add_keep(&r, path, NULL, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "/junk: "));
	assert_non_null(strstr(why, "; nothing removed"));
	path_fmt(path, "%s/missing", f->dir);
	assert_int_equal(chunk_refs_add_keep(&r, path, NULL, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "; nothing removed"));
	chunk_refs_free(&r);
}

static void test_keep_ref_needs_store(void **state)
{
	struct chunk_refs r = { 0 };
	char why[PATH_MAX + 512], url[64];

	(void)state;
	snprintf(url, sizeof(url), "http://127.0.0.1:1/store/images/x");
	assert_int_equal(chunk_refs_add_keep(&r, url, NULL, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "an image by reference needs --store DIR"));
	assert_int_equal(r.n, 0);
	chunk_refs_free(&r);
}

/* A store the server does not list: no lease could be seen by a push, so nothing is done. */
static void test_gc_no_lease_place(void **state)
{
	struct fixture *f = *state;
	char url[64], why[PATH_MAX + 512];
	struct gc_http_opts o = { .url = srv_url(url), .store_dir = f->store };
	struct gc_http_result res;

	assert_int_equal(gc_http(&o, &res, why, sizeof(why)), -EOPNOTSUPP);
	assert_non_null(strstr(why, "neither leases/ nor the store itself is listed as JSON"));
	assert_non_null(strstr(why, "nothing removed"));
}

/* A dry run takes no lease; the image list it cannot read stops it, one line. */
static void test_gc_dry_run_no_list(void **state)
{
	struct fixture *f = *state;
	char url[64], why[PATH_MAX + 512];
	struct gc_http_opts o = { .url = srv_url(url), .store_dir = f->store, .dry_run = true };
	struct gc_http_result res;

	assert_true(gc_http(&o, &res, why, sizeof(why)) < 0);
	assert_non_null(strstr(why, "; nothing removed"));
	assert_null(strchr(why, '\n'));
	assert_int_equal(res.sweep.deleted, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_keep_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_ref_needs_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_no_lease_place, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_dry_run_no_list, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
