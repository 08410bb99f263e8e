/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for cas/import/oci_blob.c and cas/oci_json.c: digest and media type parsing,
 * strict JSON, archive path normalization, verified small-blob reads, and layer application
 * with on-the-fly digest and diff_id checks (layers made here with libarchive's writer).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <json-c/json.h>

#include "../../../cas/chunk.h"
#include "../../../cas/chunker.h"
#include "../../../cas/import/import.h"
#include "../../../cas/import/oci_blob.h"
#include "../../../cas/import/oci_files.h"
#include "../../../cas/store.h"
#include "../../../cas/import/tree.h"
#include "../../../common/sha256.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_digest_parse(void **state)
{
	uint8_t d[SHA256_LEN];

	(void)state;
	assert_int_equal(oci_digest_parse("sha256:" HEX64, d), 0);
	assert_int_equal(d[0], 0x01);
	assert_int_equal(d[31], 0xef);
	assert_int_equal(oci_digest_parse(NULL, d), -EINVAL);
	assert_int_equal(oci_digest_parse("", d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:", d), -EINVAL);
	assert_int_equal(oci_digest_parse(HEX64, d), -EINVAL);
	assert_int_equal(oci_digest_parse("SHA256:" HEX64, d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha512:" HEX64 HEX64, d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:" HEX64 "0", d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:" HEX64 "/", d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:../../etc", d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:0123456789ABCDEF0123456789abcdef"
					  "0123456789abcdef0123456789abcdef", d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:0123456789abcdef0123456789abcdef"
					  "0123456789abcdef0123456789abcde", d), -EINVAL);
	assert_int_equal(oci_digest_parse("sha256:../0123456789abcdef0123456789abcdef"
					  "0123456789abcdef0123456789abc", d), -EINVAL);
}

static void test_media_types(void **state)
{
	enum oci_compression c;

	(void)state;
	assert_int_equal(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar", &c), 0);
	assert_int_equal(c, OCI_COMP_NONE);
	assert_int_equal(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar+gzip", &c),
			 0);
	assert_int_equal(c, OCI_COMP_GZIP);
	assert_int_equal(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar+zstd", &c),
			 0);
	assert_int_equal(c, OCI_COMP_ZSTD);
	assert_int_equal(oci_layer_media_type("application/vnd.docker.image.rootfs.diff.tar.gzip",
					      &c), 0);
	assert_int_equal(c, OCI_COMP_GZIP);
	assert_int_equal(oci_layer_media_type("application/vnd.docker.image.rootfs.diff.tar", &c),
			 0);
	assert_int_equal(c, OCI_COMP_NONE);
	assert_int_equal(oci_layer_media_type("application/vnd.oci.image.layer.v1.tar+bzip2", &c),
			 -ENOTSUP);
	assert_int_equal(oci_layer_media_type("application/vnd.oci.image.manifest.v1+json", &c),
			 -ENOTSUP);
	assert_int_equal(oci_layer_media_type("", &c), -ENOTSUP);
	assert_int_equal(oci_layer_media_type(NULL, &c), -ENOTSUP);
}

static void expect_json(const char *text, size_t len, bool ok)
{
	char why[WHY_MAX] = "";
	struct json_object *o;
	int ret = oci_json_parse(text, len, OCI_JSON_MANIFEST, &o, why, sizeof(why));

	if (ok && ret)
		fail_msg("'%s' rejected: %s", text, why);
	if (!ok && !ret)
		fail_msg("'%s' accepted", text);
	if (!ok) {
		assert_int_equal(ret, -EBADMSG); /* not JSON: no limit of kind is near */
		assert_true(why[0]);
		assert_null(o);
	}
	json_object_put(o);
}

static void test_json_parse(void **state)
{
	(void)state;
	expect_json("{\"a\":1}", 7, true);
	expect_json("{\"a\":1}\n \t\r\n", 12, true);
	expect_json("[1,2]", 5, true);
	expect_json("", 0, false);
	expect_json("   ", 3, false);
	expect_json("{\"a\":", 5, false);
	expect_json("{\"a\":1}x", 8, false);
	expect_json("{\"a\":1}{}", 9, false);
	expect_json("{\"a\":1}\0", 8, false);
	expect_json("{\"a\":1,}", 8, false);
	expect_json("not json", 8, false);
}

/* A document of n copies of item joined by commas inside pre ... post. */
static char *json_repeat(const char *pre, const char *item, size_t n, const char *post,
			 size_t *len)
{
	size_t il = strlen(item), pl = strlen(pre), ql = strlen(post);
	char *b = malloc(pl + n * (il + 1) + ql + 1), *p = b;

	assert_non_null(b);
	memcpy(p, pre, pl);
	p += pl;
	for (size_t i = 0; i < n; i++) {
		if (i)
			*p++ = ',';
		memcpy(p, item, il);
		p += il;
	}
	memcpy(p, post, ql + 1);
	*len = (size_t)(p - b) + ql;
	return b;
}

/* [{},{},...] and [[[[...]]]] bombs are refused before json-c spends memory on them. */
static void test_json_limits(void **state)
{
	const struct oci_json_limits *l = oci_json_limits(OCI_JSON_MANIFEST);
	struct json_object *o;
	char why[WHY_MAX] = "";
	size_t len;
	char *b;

	(void)state;
	/* values are counted as the '{', '[' and ',' outside strings, plus one */
	b = json_repeat("[", "1", l->max_values - 1, "]", &len);
	assert_int_equal(oci_json_parse(b, len, OCI_JSON_MANIFEST, &o, why, sizeof(why)), 0);
	assert_non_null(o); /* at the limit */
	json_object_put(o);
	free(b);
	b = json_repeat("{\"layers\":[", "{}", l->max_values / 2, "]}", &len);
	assert_int_equal(oci_json_parse(b, len, OCI_JSON_MANIFEST, &o, why, sizeof(why)), -EFBIG);
	assert_null(o);
	assert_string_equal(why, l->too_many);
	assert_non_null(strstr(why, "65536"));
	free(b);
	/* commas inside strings are not values */
	b = json_repeat("[\"", ",,,,,,,,,,,,,,,,", 8192, "\"]", &len);
	assert_int_equal(oci_json_parse(b, len, OCI_JSON_MANIFEST, &o, why, sizeof(why)), 0);
	assert_non_null(o);
	json_object_put(o);
	free(b);
	/* an escaped quote does not end a string */
	assert_int_equal(oci_json_parse("[\"\\\",[\"]", 8, OCI_JSON_TOKEN, &o, why, sizeof(why)),
			 0);
	assert_non_null(o);
	json_object_put(o);
	/* nesting */
	b = calloc(1, 2 * OCI_JSON_DEPTH_MAX + 3);
	assert_non_null(b);
	memset(b, '[', OCI_JSON_DEPTH_MAX);
	memset(b + OCI_JSON_DEPTH_MAX, ']', OCI_JSON_DEPTH_MAX);
	assert_int_equal(oci_json_parse(b, 2 * OCI_JSON_DEPTH_MAX, OCI_JSON_MANIFEST, &o, why,
					 sizeof(why)), 0);
	assert_non_null(o);
	json_object_put(o);
	memset(b, '[', OCI_JSON_DEPTH_MAX + 1);
	memset(b + OCI_JSON_DEPTH_MAX + 1, ']', OCI_JSON_DEPTH_MAX + 1);
	assert_int_equal(oci_json_parse(b, 2 * OCI_JSON_DEPTH_MAX + 2, OCI_JSON_MANIFEST, &o, why,
					 sizeof(why)), -EFBIG);
	assert_string_equal(why, l->too_deep);
	free(b);
	/* size: white space only, so nothing else trips first */
	len = OCI_JSON_TOKEN_MAX + 1;
	b = malloc(len);
	assert_non_null(b);
	memset(b, ' ', len);
	b[0] = '1';
	assert_int_equal(oci_json_parse(b, len, OCI_JSON_TOKEN, &o, why, sizeof(why)), -EFBIG);
	assert_string_equal(why, oci_json_limits(OCI_JSON_TOKEN)->too_big);
	assert_non_null(strstr(why, "1 MiB"));
	/* a syntax error is -EBADMSG, not a limit */
	assert_int_equal(oci_json_parse("[1,", 3, OCI_JSON_TOKEN, &o, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "not JSON (empty or truncated)");
	assert_int_equal(oci_json_parse("[1] x", 5, OCI_JSON_TOKEN, &o, why, sizeof(why)),
			 -EBADMSG);
	assert_non_null(strstr(why, "not JSON"));
	free(b);
}

static void expect_norm(const char *base, const char *path, const char *want)
{
	char out[64];
	int ret = oci_path_normalize(base, path, out, sizeof(out));

	if (ret || strcmp(out, want))
		fail_msg("normalize(%s, %s) = %d '%s', want '%s'", base ? base : "NULL", path, ret,
			 ret ? "" : out, want);
}

static void test_path_normalize(void **state)
{
	char out[8];

	(void)state;
	expect_norm(NULL, "a/b", "a/b");
	expect_norm(NULL, "./a//b/", "a/b");
	expect_norm(NULL, "/a/./b", "a/b");
	expect_norm(NULL, ".", "");
	expect_norm(NULL, "a/../b", "b");
	expect_norm("", "x.tar", "x.tar");
	expect_norm("id", "../x.tar", "x.tar");
	expect_norm("a/b", "../../c", "c");
	expect_norm("a/b", "c/../d", "a/b/d");
	expect_norm("a/b", "/abs/x", "abs/x");
	assert_int_equal(oci_path_normalize(NULL, "../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(oci_path_normalize("a", "../../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(oci_path_normalize(NULL, "a/../../x", out, sizeof(out)), -EINVAL);
	assert_int_equal(oci_path_normalize(NULL, "abcdefgh", out, sizeof(out)), -ENAMETOOLONG);
	assert_int_equal(oci_path_normalize(NULL, "abcdefg", out, sizeof(out)), 0);
	assert_string_equal(out, "abcdefg");
}

/* ---------------------------------------------------------------- blob reads */

struct tmp {
	char dir[PATH_MAX];
};

static int tmp_setup(void **state)
{
	struct tmp *t = calloc(1, sizeof(*t));
	const char *base = getenv("TMPDIR");

	if (!t)
		return -1;
	snprintf(t->dir, sizeof(t->dir), "%s/lazyblk-test-oci.XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(t->dir)) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int tmp_teardown(void **state)
{
	struct tmp *t = *state;
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
	if (system(cmd) != 0)
		return -1;
	free(t);
	return 0;
}

static int tmp_file(struct tmp *t, const char *name, const void *data, size_t len)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%.60s", t->dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	return fd;
}

static void test_blob_read(void **state)
{
	static const char text[] = "{\"schemaVersion\":2}";
	struct tmp *t = *state;
	uint8_t d[SHA256_LEN], bad[SHA256_LEN] = { 0 };
	size_t len = strlen(text), n = 0;
	char *buf = NULL, why[256] = "";
	struct import_ctx ic = { .why = why, .why_len = sizeof(why) };
	int fd = tmp_file(t, "blob", text, len);

	assert_int_equal(sha256_buf(text, len, d), 0);
	assert_int_equal(oci_blob_read(&ic, fd, len, d, 1024, &buf, &n, "blob"), 0);
	assert_int_equal(n, len);
	assert_string_equal(buf, text);
	free(buf);
	buf = NULL;
	assert_int_equal(oci_blob_read(&ic, fd, OCI_SIZE_UNKNOWN, NULL, 1024, &buf, &n, "blob"),
			 0);
	free(buf);
	buf = NULL;
	assert_string_equal(why, "");
	assert_int_equal(oci_blob_read(&ic, fd, len, bad, 1024, &buf, &n, "blob"), -EBADMSG);
	assert_null(buf);
	assert_true(!strncmp(why, "blob: digest mismatch: content is sha256:", 41));
	why[0] = '\0';
	assert_int_equal(oci_blob_read(&ic, fd, len + 1, d, 1024, &buf, &n, "blob"), -EBADMSG);
	assert_true(!strncmp(why, "blob: size mismatch: blob is ", 29));
	why[0] = '\0';
	assert_int_equal(oci_blob_read(&ic, fd, len, d, len - 1, &buf, &n, "blob"), -EFBIG);
	assert_null(buf);
	assert_true(!strncmp(why, "blob: 19 bytes, more than the 18 allowed", 40));
	close(fd);
}

/* ---------------------------------------------------------------- layers */

/* A pax tar (optionally gzip/zstd) with the given entries ("name=content", "dir/"). */
static size_t make_layer(enum oci_compression comp, uint8_t *out, size_t cap, size_t *tar_len,
			 uint8_t diff_id[SHA256_LEN], const char *const *entries)
{
	struct archive *a;
	size_t used = 0;

	for (int pass = 0; pass < 2; pass++) {
		/* pass 0: the plain tar, for the diff_id; pass 1: the blob */
		a = archive_write_new();
		assert_non_null(a);
		assert_int_equal(archive_write_set_format_pax(a), ARCHIVE_OK);
		if (pass == 1 && comp == OCI_COMP_GZIP)
			assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
		if (pass == 1 && comp == OCI_COMP_ZSTD)
			assert_true(archive_write_add_filter_zstd(a) >= ARCHIVE_WARN);
		assert_int_equal(archive_write_open_memory(a, out, cap, &used), ARCHIVE_OK);
		for (const char *const *e = entries; *e; e++) {
			struct archive_entry *ae = archive_entry_new();
			const char *eq = strchr(*e, '=');
			char name[256];

			snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - *e) : (int)strlen(*e),
				 *e);
			archive_entry_set_pathname(ae, name);
			archive_entry_set_mtime(ae, 1000000000, 5);
			if (eq) {
				archive_entry_set_filetype(ae, AE_IFREG);
				archive_entry_set_perm(ae, 0644);
				archive_entry_set_size(ae, (la_int64_t)strlen(eq + 1));
			} else {
				archive_entry_set_filetype(ae, AE_IFDIR);
				archive_entry_set_perm(ae, 0755);
			}
			assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
			if (eq)
				assert_int_equal(archive_write_data(a, eq + 1, strlen(eq + 1)),
						 (la_ssize_t)strlen(eq + 1));
			archive_entry_free(ae);
		}
		assert_int_equal(archive_write_close(a), ARCHIVE_OK);
		archive_write_free(a);
		if (pass == 0) {
			*tar_len = used;
			assert_int_equal(sha256_buf(out, used, diff_id), 0);
		}
	}
	return used;
}

struct world {
	struct store *store;
	struct import_ctx ic;
};

static void world_open(struct world *w, struct tmp *t)
{
	struct chunker_opts o = { 1, 64 << 10, CHUNK_LEVEL_DEFAULT };
	char dir[PATH_MAX + 8];

	memset(w, 0, sizeof(*w));
	snprintf(dir, sizeof(dir), "%s/store", t->dir);
	assert_int_equal(store_open(dir, true, &w->store), 0);
	w->ic.tree = tree_new();
	assert_non_null(w->ic.tree);
	assert_int_equal(chunker_new(w->store, &o, &w->ic.chunker), 0);
	w->ic.src_label = "unit";
}

static void world_close(struct world *w)
{
	chunker_finish(w->ic.chunker);
	chunker_free(w->ic.chunker);
	tree_free(w->ic.tree);
	store_close(w->store);
}

static struct tree_node *find(struct world *w, const char *a, const char *b)
{
	struct tree_node *n = tree_lookup(w->ic.tree, tree_root(w->ic.tree), a, strlen(a));

	if (n && b)
		n = tree_lookup(w->ic.tree, n, b, strlen(b));
	return n;
}

static void layer_case(struct tmp *t, enum oci_compression comp)
{
	static const char *const l1[] = { "etc/", "etc/a=alpha\n", "etc/b=beta\n", NULL };
	static const char *const l2[] = { "etc/", "etc/.wh.a=", "etc/c=gamma\n", NULL };
	static uint8_t blob1[1 << 16], blob2[1 << 16];
	uint8_t d1[SHA256_LEN], d2[SHA256_LEN], diff1[SHA256_LEN], diff2[SHA256_LEN];
	size_t n1, n2, t1, t2;
	struct world w;
	int fd1, fd2;

	n1 = make_layer(comp, blob1, sizeof(blob1), &t1, diff1, l1);
	n2 = make_layer(comp, blob2, sizeof(blob2), &t2, diff2, l2);
	assert_int_equal(sha256_buf(blob1, n1, d1), 0);
	assert_int_equal(sha256_buf(blob2, n2, d2), 0);
	fd1 = tmp_file(t, "l1", blob1, n1);
	fd2 = tmp_file(t, "l2", blob2, n2);

	/* both layers with every check: the whiteout removes a */
	world_open(&w, t);
	{
		struct oci_layer_src s1 = { fd1, n1, d1, diff1, comp };
		struct oci_layer_src s2 = { fd2, n2, d2, diff2, comp };

		assert_int_equal(oci_layer_apply(&w.ic, &s1, 1, "layer 1"), 0);
		assert_non_null(find(&w, "etc", "a"));
		assert_int_equal(oci_layer_apply(&w.ic, &s2, 2, "layer 2"), 0);
		assert_null(find(&w, "etc", "a"));
		assert_non_null(find(&w, "etc", "b"));
		assert_non_null(find(&w, "etc", "c"));
		assert_null(find(&w, "etc", ".wh.a"));
		assert_int_equal(find(&w, "etc", "c")->ino->size, 6);
		assert_int_equal(find(&w, "etc", "c")->ino->mtime_ns, 5);
	}
	world_close(&w);

	/* unknown size and no digests: still applies */
	world_open(&w, t);
	{
		struct oci_layer_src s = { fd1, OCI_SIZE_UNKNOWN, NULL, NULL,
					   comp == OCI_COMP_NONE ? comp : OCI_COMP_DETECT };

		assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "layer"), 0);
		assert_non_null(find(&w, "etc", "b"));
	}
	world_close(&w);

	/* wrong digest, wrong diff_id, wrong size */
	world_open(&w, t);
	{
		struct oci_layer_src s = { fd1, n1, d2, NULL, comp };
		char why[512] = "";

		w.ic.why = why;
		w.ic.why_len = sizeof(why);
		assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "bad digest"), -EBADMSG);
		assert_true(!strncmp(why, "bad digest: digest mismatch: content is sha256:", 47));
		why[0] = '\0';
		s.digest = d1;
		s.diff_id = diff2;
		assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "bad diff_id"), -EBADMSG);
		assert_true(!strncmp(why, "bad diff_id: uncompressed content is sha256:", 44));
		assert_non_null(strstr(why, ", the config's diff_id says sha256:"));
		why[0] = '\0';
		s.diff_id = NULL;
		s.size = n1 - 1;
		assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "bad size"), -EBADMSG);
		assert_true(!strncmp(why, "bad size: size mismatch: blob is ", 33));
	}
	world_close(&w);

	/* bytes appended after the tar's end are still covered by the digest */
	{
		static const char junk[] = "trailing bytes after the archive";
		uint8_t dj[SHA256_LEN];
		int fdj;

		memcpy(blob1 + n1, junk, sizeof(junk));
		assert_int_equal(sha256_buf(blob1, n1 + sizeof(junk), dj), 0);
		fdj = tmp_file(t, "lj", blob1, n1 + sizeof(junk));
		world_open(&w, t);
		if (comp == OCI_COMP_NONE) {
			struct oci_layer_src s = { fdj, n1 + sizeof(junk), d1, NULL, comp };

			/* the tar stops at its end marker: only the digest sees the junk */
			assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "junk"), -EBADMSG);
			s.digest = dj;
			assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "junk"), 0);
		}
		world_close(&w);
		close(fdj);
	}
	close(fd1);
	close(fd2);
}

/* Apply the plain tar of `entries`, cut after `cut` bytes (0: whole), as layer 1. */
static int apply_names(struct tmp *t, struct world *w, const char *const *entries, size_t cut,
		       char *why, size_t why_len)
{
	static uint8_t blob[1 << 16];
	uint8_t diff[SHA256_LEN];
	size_t n, tl;
	int fd, ret;

	n = make_layer(OCI_COMP_NONE, blob, sizeof(blob), &tl, diff, entries);
	if (cut)
		n = cut;
	fd = tmp_file(t, "names", blob, n);
	world_open(w, t);
	w->ic.why = why;
	w->ic.why_len = why_len;
	{
		struct oci_layer_src s = { fd, OCI_SIZE_UNKNOWN, NULL, NULL, OCI_COMP_NONE };

		ret = oci_layer_apply(&w->ic, &s, 1, "layer");
	}
	close(fd);
	return ret;
}

/*
 * Member names are relative to the root, whatever they start with, as docker and
 * containerd take them (umoci insert IMG DIR / writes "/"); ".." may not climb out.
 */
static void test_layer_names(void **state)
{
	static const char *const ok[] = { "/", "/etc/", "//etc/x=one\n", "./y=two\n",
					  "etc/../z=three\n", "etc/./sub/../w=four\n", NULL };
	static const char *const out1[] = { "/../x=no\n", NULL };
	static const char *const out2[] = { "etc/", "etc/../../x=no\n", NULL };
	struct tmp *t = *state;
	char why[512] = "";
	struct world w;

	assert_int_equal(apply_names(t, &w, ok, 0, why, sizeof(why)), 0);
	/* "/" is the root directory: its attributes go to the root */
	assert_int_equal(tree_root(w.ic.tree)->ino->mtime, 1000000000);
	assert_int_equal(tree_root(w.ic.tree)->ino->mtime_ns, 5);
	assert_non_null(find(&w, "etc", "x"));
	assert_non_null(find(&w, "y", NULL));
	assert_non_null(find(&w, "z", NULL));
	assert_non_null(find(&w, "etc", "w"));
	assert_null(find(&w, "etc", "sub"));
	assert_int_equal(tree_node_count(w.ic.tree), 6); /* /, etc, x, y, z, w */
	world_close(&w);
	assert_int_equal(apply_names(t, &w, out1, 0, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "layer: /../x: '..' climbs out of the root");
	world_close(&w);
	why[0] = '\0';
	assert_int_equal(apply_names(t, &w, out2, 0, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "layer: etc/../../x: '..' climbs out of the root");
	world_close(&w);
}

/*
 * A tar that ends right after its last member's data, without the padding and the
 * end-of-archive blocks (umoci 0.4's insert writes them): the end, as for Go's
 * archive/tar. Cut inside the data, it is still an error.
 */
static void test_layer_no_padding(void **state)
{
	static const char *const ents[] = { "/", "d/", "d/f=the last data\n", NULL };
	static uint8_t blob[1 << 16];
	uint8_t diff[SHA256_LEN];
	struct tmp *t = *state;
	char why[512] = "";
	struct world w;
	size_t n, tl, end;
	const uint8_t *p;

	n = make_layer(OCI_COMP_NONE, blob, sizeof(blob), &tl, diff, ents);
	p = memmem(blob, n, "the last data\n", 14);
	assert_non_null(p);
	end = (size_t)(p - blob) + 14;
	assert_int_equal(apply_names(t, &w, ents, end, why, sizeof(why)), 0);
	assert_int_equal(find(&w, "d", "f")->ino->size, 14);
	world_close(&w);
	assert_int_equal(apply_names(t, &w, ents, end + 100, why, sizeof(why)), 0);
	world_close(&w);
	assert_int_not_equal(apply_names(t, &w, ents, end - 1, why, sizeof(why)), 0);
	world_close(&w);
}

static const struct mf_xattr_in *xattr_of(struct tree_node *n, const char *name)
{
	for (uint32_t i = 0; i < n->ino->xattr_count; i++)
		if (!strcmp(n->ino->xattrs[i].name, name))
			return &n->ino->xattrs[i];
	return NULL;
}

/* One pax member with text ACLs (as GNU tar --acls and bsdtar write them). */
static void acl_member(struct archive *a, const char *name, int type, unsigned int perm,
		       const char *access, const char *dflt, const void *xattr, size_t xlen)
{
	struct archive_entry *ae = archive_entry_new();

	if (xattr)
		archive_entry_xattr_add_entry(ae, "system.posix_acl_access", xattr, xlen);
	archive_entry_set_pathname(ae, name);
	archive_entry_set_filetype(ae, (unsigned int)type);
	archive_entry_set_perm(ae, perm);
	archive_entry_set_size(ae, 0);
	if (access)
		assert_int_equal(archive_entry_acl_from_text(ae, access,
							     ARCHIVE_ENTRY_ACL_TYPE_ACCESS), ARCHIVE_OK);
	if (dflt)
		assert_int_equal(archive_entry_acl_from_text(ae, dflt,
							     ARCHIVE_ENTRY_ACL_TYPE_DEFAULT), ARCHIVE_OK);
	assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
	archive_entry_free(ae);
}

/*
 * Text ACLs become the system.posix_acl_* xattrs the kernel would store (its order, a
 * mask where named entries need one), and the mode's group bits are the mask, not group::
 * (libarchive puts group:: there).
 */
static void test_layer_acls(void **state)
{
	static const uint8_t f_acl[] = { 2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
					 2, 0, 6, 0, 0xd2, 4, 0, 0, 4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
					 0x10, 0, 6, 0, 0xff, 0xff, 0xff, 0xff,
					 0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
	static const uint8_t d_dflt[] = { 2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
					  2, 0, 7, 0, 0xd2, 4, 0, 0, 2, 0, 5, 0, 0xd3, 4, 0, 0,
					  4, 0, 5, 0, 0xff, 0xff, 0xff, 0xff,
					  0x10, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
					  0x20, 0, 5, 0, 0xff, 0xff, 0xff, 0xff };
	static uint8_t blob[1 << 16];
	struct tmp *t = *state;
	const struct mf_xattr_in *x;
	struct archive *a = archive_write_new();
	size_t used = 0;
	struct world w;
	int fd;

	assert_int_equal(archive_write_set_format_pax(a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_memory(a, blob, sizeof(blob), &used), ARCHIVE_OK);
	/* 0660 with group::r-- and mask::rw-; ids out of order, as text may have them */
	acl_member(a, "f", AE_IFREG, 0660,
		   "user::rw-\ngroup::r--\nmask::rw-\nother::---\nuser:1234:rw-\n", NULL, NULL, 0);
	/* a default ACL without a mask: setfacl's mask (rwx | r-x | r-x) is added */
	acl_member(a, "d", AE_IFDIR, 0755, NULL,
		   "user::rwx\nuser:1235:r-x\nuser:1234:rwx\ngroup::r-x\nother::r-x\n", NULL, 0);
	/* a name this machine does not know: the ACL is left out, the mask still in the mode */
	acl_member(a, "u", AE_IFREG, 0600,
		   "user::rw-\nuser:no-such-user-here-xyz:r--\ngroup::---\nmask::r--\nother::---\n",
		   NULL, NULL, 0);
	/* the member's own xattr (tar --xattrs) wins over its text ACL, and gives the mode */
	acl_member(a, "x", AE_IFREG, 0700, "user::rwx\nuser:1:r--\ngroup::r--\nmask::r--\nother::---\n",
		   NULL, f_acl, sizeof(f_acl));
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	fd = tmp_file(t, "acls", blob, used);
	world_open(&w, t);
	{
		struct oci_layer_src s = { fd, OCI_SIZE_UNKNOWN, NULL, NULL, OCI_COMP_NONE };

		assert_int_equal(oci_layer_apply(&w.ic, &s, 1, "layer"), 0);
	}
	assert_int_equal(find(&w, "f", NULL)->ino->mode, 0660);
	x = xattr_of(find(&w, "f", NULL), "system.posix_acl_access");
	assert_non_null(x);
	assert_int_equal(x->value_len, sizeof(f_acl));
	assert_memory_equal(x->value, f_acl, sizeof(f_acl));
	assert_null(xattr_of(find(&w, "f", NULL), "system.posix_acl_default"));
	assert_int_equal(find(&w, "d", NULL)->ino->mode, 0755);
	assert_null(xattr_of(find(&w, "d", NULL), "system.posix_acl_access"));
	x = xattr_of(find(&w, "d", NULL), "system.posix_acl_default");
	assert_non_null(x);
	assert_int_equal(x->value_len, sizeof(d_dflt));
	assert_memory_equal(x->value, d_dflt, sizeof(d_dflt));
	assert_int_equal(find(&w, "u", NULL)->ino->xattr_count, 0);
	assert_int_equal(find(&w, "u", NULL)->ino->mode, 0640);
	assert_int_equal(find(&w, "x", NULL)->ino->mode, 0660);
	assert_int_equal(find(&w, "x", NULL)->ino->xattr_count, 1);
	x = xattr_of(find(&w, "x", NULL), "system.posix_acl_access");
	assert_non_null(x);
	assert_int_equal(x->value_len, sizeof(f_acl));
	assert_memory_equal(x->value, f_acl, sizeof(f_acl));
	world_close(&w);
	close(fd);
}

static void test_layer_plain(void **state)
{
	layer_case(*state, OCI_COMP_NONE);
}

static void test_layer_gzip(void **state)
{
	layer_case(*state, OCI_COMP_GZIP);
}

static void test_layer_zstd(void **state)
{
	layer_case(*state, OCI_COMP_ZSTD);
}

/* --platform: its parsing, and which image of an index it picks (issue 16). */
static void test_platform(void **state)
{
	static const char list_json[] =
		"[{\"digest\":\"a\",\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
		"{\"digest\":\"b\",\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\","
		"\"variant\":\"v8\"}},"
		"{\"digest\":\"c\",\"platform\":{\"os\":\"linux\",\"architecture\":\"arm\","
		"\"variant\":\"v7\"}}]";
	struct json_object *list = json_tokener_parse(list_json), *one, *pick;
	struct oci_platform p;
	char buf[256];

	(void)state;
	assert_int_equal(oci_platform_parse("linux/arm64/v8", &p), 0);
	assert_string_equal(p.os, "linux");
	assert_string_equal(p.arch, "arm64");
	assert_string_equal(p.variant, "v8");
	assert_true(p.given);
	assert_int_equal(oci_platform_parse("linux/amd64", &p), 0);
	assert_string_equal(p.variant, "");
	assert_int_equal(oci_platform_parse("linux", &p), -EINVAL);
	assert_int_equal(oci_platform_parse("linux/", &p), -EINVAL);
	assert_int_equal(oci_platform_parse("/amd64", &p), -EINVAL);
	assert_int_equal(oci_platform_parse("linux/amd64/v1/x", &p), -EINVAL);
	assert_int_equal(oci_platform_parse("Linux/amd64", &p), -EINVAL);
	assert_int_equal(oci_platform_parse(NULL, &p), 0); /* the host's */
	assert_false(p.given);
	assert_string_equal(p.os, "linux");

	oci_platform_parse("linux/arm64", &p); /* no variant asked: any */
	pick = oci_platform_pick(list, &p);
	assert_non_null(pick);
	assert_string_equal(json_object_get_string(json_object_object_get(pick, "digest")), "b");
	oci_platform_parse("linux/arm/v7", &p);
	pick = oci_platform_pick(list, &p);
	assert_string_equal(json_object_get_string(json_object_object_get(pick, "digest")), "c");
	oci_platform_parse("linux/arm/v6", &p);
	assert_null(oci_platform_pick(list, &p));
	oci_platform_parse("linux/s390x", &p);
	assert_null(oci_platform_pick(list, &p));
	assert_string_equal(oci_platform_list(list, buf, sizeof(buf)),
			    "linux/amd64, linux/arm64/v8, linux/arm/v7");

	/* one image: taken unless it says it is for another platform than the one asked */
	one = json_tokener_parse("[{\"digest\":\"x\",\"platform\":{\"os\":\"linux\","
				 "\"architecture\":\"ppc64le\"}}]");
	assert_null(oci_platform_pick(one, &p));
	oci_platform_parse(NULL, &p);
	assert_non_null(oci_platform_pick(one, &p));
	json_object_put(one);
	one = json_tokener_parse("[{\"digest\":\"x\"}]");
	oci_platform_parse("linux/s390x", &p);
	assert_non_null(oci_platform_pick(one, &p));
	json_object_put(one);
	json_object_put(list);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_digest_parse),
		cmocka_unit_test(test_platform),
		cmocka_unit_test(test_media_types),
		cmocka_unit_test(test_json_parse),
		cmocka_unit_test(test_json_limits),
		cmocka_unit_test(test_path_normalize),
		cmocka_unit_test_setup_teardown(test_blob_read, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_layer_plain, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_layer_gzip, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_layer_zstd, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_layer_names, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_layer_no_padding, tmp_setup, tmp_teardown),
		cmocka_unit_test_setup_teardown(test_layer_acls, tmp_setup, tmp_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
