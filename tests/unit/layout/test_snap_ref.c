/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for a VM snapshot's files and references: vmsnap/snapfile.c (the document as
 * STORE/snapshots/<hex>.json and DIR/snapshot.json, read back against its name, a corrupt
 * or oversized one refused) and layout/snap_ref.c (a snapshot's disk found by digest, a
 * missing one named; a --keep of a snapshot without --store; snap_fetch of a name the
 * remote does not have, one line). Publishing and fetching against a real registry and
 * nginx store: tests/integration/t_snapshot_publish.sh.
 */
#include "../helpers.h"

#include <sys/socket.h>

#include "../../../layout/gc_http.h"
#include "../../../layout/layout.h"
#include "../../../layout/snap_ref.h"
#include "../../../vmsnap/rammap.h"
#include "../../../vmsnap/snapfile.h"

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

static void doc_fill(struct snapdoc *d, bool disk)
{
	memset(d, 0, sizeof(*d));
	d->created = 1796724000;
	d->mem_size = 8u << 20;
	d->ncpus = 1;
	memset(d->kernel, 0x11, SHA256_LEN);
	memset(d->state.digest, 0x22, SHA256_LEN);
	d->state.size = 4096;
	d->nmap = 1;
	memset(d->map[0].digest, 0x33, SHA256_LEN);
	d->map[0].size = RAMMAP_HEADER + RAMMAP_CHUNK_REC + (8u << 20) / 4096 * RAMMAP_PAGE_REC;
	d->ram_pages = 1;
	d->ram_chunks = 1;
	d->ram_bytes = 4096;
	if (disk) {
		d->has_disk = true;
		memset(d->layout, 0x44, SHA256_LEN);
		d->disk_size = 1u << 30;
	}
}

/* Written twice (store, dir), the same bytes; read back by dir, by file, by id. */
static void test_snapfile_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct snapdoc d;
	struct snapfile sf;
	char *json, path[PATH_MAX], snap[PATH_MAX], hex[SHA256_HEX_LEN + 1], why[WHY_MAX];
	uint8_t id[SHA256_LEN];
	size_t len;

	doc_fill(&d, true);
	assert_int_equal(snapdoc_build(&d, &json, &len), 0);
	path_fmt(snap, "%s/snap", f->dir);
	assert_int_equal(mkdir(snap, 0755), 0);
	assert_int_equal(snapfile_write(f->store, snap, json, len, id, why, sizeof(why)), 0);
	sha256_to_hex(id, hex);
	path_fmt(path, "%s/snapshots/%s.json", f->store, hex);
	assert_int_equal(snapfile_read(path, &sf, why, sizeof(why)), 0);
	assert_int_equal(sf.len, len);
	assert_memory_equal(sf.json, json, len);
	assert_memory_equal(sf.id, id, SHA256_LEN);
	assert_true(sf.d.has_disk);
	snapfile_free(&sf);
	assert_int_equal(snapfile_read(snap, &sf, why, sizeof(why)), 0);
	assert_memory_equal(sf.id, id, SHA256_LEN);
	snapfile_free(&sf);
	assert_int_equal(snapfile_load(f->store, id, &sf, why, sizeof(why)), 0);
	snapfile_free(&sf);
	assert_true(snapfile_is(snap));
	assert_true(snapfile_is(path));
	assert_false(snapfile_is("x.layout"));

	/* a file named by a digest that is not its own: refused */
	json[len - 2] = json[len - 2] == '1' ? '2' : '1';
	write_file(path, json, len);
	assert_int_equal(snapfile_read(path, &sf, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "not its name"));
	/* larger than a document, and not one at all */
	path_fmt(path, "%s/big.json", f->dir);
	write_file(path, json, 0);
	truncate(path, SNAPDOC_MAX + 1);
	assert_int_equal(snapfile_read(path, &sf, why, sizeof(why)), -EFBIG);
	path_fmt(path, "%s/junk.json", f->dir);
	write_file(path, "{}", 2);
	assert_int_equal(snapfile_read(path, &sf, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "junk.json: "));
	free(json);
}

/* The disk's top layout: by digest in STORE/layouts/, else beside; a missing one named. */
static void test_snap_layout(void **state)
{
	struct fixture *f = *state;
	struct layout_writer *w;
	struct layout *l;
	struct snapdoc d;
	uint8_t meta[DISK_BLOCK] = { 1 }, c1[SHA256_LEN] = { 1 };
	char path[PATH_MAX + 80], dest[PATH_MAX + 80], hex[SHA256_HEX_LEN + 1], why[WHY_MAX];
	char *found;

	doc_fill(&d, false);
	assert_int_equal(snap_ref_layout(f->store, f->dir, &d, &found, why, sizeof(why)), 0);
	assert_null(found);
	doc_fill(&d, true);
	assert_int_equal(snap_ref_layout(f->store, f->dir, &d, &found, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "is not in the store (looked for "));
	snprintf(path, sizeof(path), "%s/img.layout", f->dir);
	assert_int_equal(layout_writer_new(path, 16, &w), 0);
	assert_int_equal(layout_add_meta(w, 0, meta, 1), 0);
	assert_int_equal(layout_add_data(w, 2 * DISK_BLOCK, DISK_BLOCK, c1, 0), 0);
	assert_int_equal(layout_writer_finish(w, NULL, NULL, 65536, NULL), 0);
	layout_writer_free(w);
	assert_int_equal(layout_open(path, &l, why, sizeof(why)), 0);
	memcpy(d.layout, l->digest, SHA256_LEN);
	layout_close(l);
	sha256_to_hex(d.layout, hex);
	snprintf(dest, sizeof(dest), "%s/%s.layout", f->dir, hex);
	assert_int_equal(rename(path, dest), 0);
	assert_int_equal(snap_ref_layout(f->store, f->dir, &d, &found, why, sizeof(why)), 0);
	assert_string_equal(found, dest);
	free(found);
	/* a file under the name that is another layout: refused */
	memset(d.layout, 0x44, SHA256_LEN);
	sha256_to_hex(d.layout, hex);
	snprintf(path, sizeof(path), "%s/%s.layout", f->dir, hex);
	assert_int_equal(rename(dest, path), 0);
	assert_int_equal(snap_ref_layout(f->store, f->dir, &d, &found, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "not the snapshot's disk layout"));
}

/* A --keep of a snapshot needs the store its chunks are in. */
static void test_keep_needs_store(void **state)
{
	struct fixture *f = *state;
	struct chunk_refs r = { 0 };
	char why[PATH_MAX + 512];

	assert_int_equal(chunk_refs_add_keep(&r, f->dir, NULL, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "needs --store"));
	chunk_refs_free(&r);
}

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

/* A fetch by reference: a name the store lacks and a URL that is no reference, one line. */
static void test_fetch_refused(void **state)
{
	struct fixture *f = *state;
	struct remote_opts ro = { .retries = -1 };
	struct snap_fetched sf;
	char url[128], why[PATH_MAX + 512];
	int lfd = -1, port;

	test_srv_start(&lfd, &port, conn_404);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/store/images/vm1", port);
	ro.url = url;
	assert_int_equal(snap_fetch(&ro, f->store, &sf, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "no image vm1"));
	assert_null(strchr(why, '\n'));
	ro.url = "/not/a/reference";
	assert_int_equal(snap_fetch(&ro, f->store, &sf, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not an image reference"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_snapfile_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snap_layout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_needs_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fetch_refused, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
