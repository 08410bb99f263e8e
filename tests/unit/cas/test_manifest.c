/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for cas/manifest: writer -> serialize -> parse round trips of every field,
 * ordering, lookup, and the loader's rejection of every kind of malformed input.
 */
#include "../helpers.h"

#include "../../../cas/chunk.h"
#include "../../../cas/manifest.h"
#include "../../../common/fsutil.h"
#include "../../../common/sha256.h"

#define GiB (1ull << 30)

/* ------------------------------------------------------------------ helpers */

static struct mf_entry_in mk(const char *path, uint8_t type, uint32_t mode)
{
	struct mf_entry_in e;

	memset(&e, 0, sizeof(e));
	e.path = path;
	e.path_len = (uint32_t)strlen(path);
	e.type = type;
	e.mode = mode;
	return e;
}

static void add_ok(struct manifest_writer *w, const struct mf_entry_in *e)
{
	assert_int_equal(manifest_writer_add(w, e), 0);
}

static struct manifest *serialize_parse(struct manifest_writer *w, uint8_t **copy, size_t *copy_len)
{
	struct manifest *m = NULL;
	char why[WHY_MAX] = "";
	uint8_t *buf;
	size_t len;
	int ret;

	char wwhy[WHY_MAX] = "";

	ret = manifest_writer_serialize(w, &buf, &len, wwhy, sizeof(wwhy));
	if (ret)
		fail_msg("serialize: %d (%s)", ret, wwhy[0] ? wwhy : "-");
	if (copy) {
		*copy = malloc(len);
		assert_non_null(*copy);
		memcpy(*copy, buf, len);
		*copy_len = len;
	}
	ret = manifest_parse(buf, len, &m, why, sizeof(why));
	if (ret)
		fail_msg("parse: %d (%s)", ret, why[0] ? why : "-");
	assert_non_null(m);
	return m;
}

/* An independent statement of the entry order: '/' below every other byte. */
static int ref_path_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	for (size_t i = 0; i < alen && i < blen; i++) {
		int ka = a[i] == '/' ? 0 : (unsigned char)a[i] + 1;
		int kb = b[i] == '/' ? 0 : (unsigned char)b[i] + 1;

		if (ka != kb)
			return ka - kb;
	}
	return (alen > blen) - (alen < blen);
}

static void shuffle(size_t *idx, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(prng_next(&seed) % i), t = idx[i - 1];

		idx[i - 1] = idx[j];
		idx[j] = t;
	}
}

static void check_entry(const struct manifest *m, const struct mf_entry *e,
			const struct mf_entry_in *in)
{
	const char *p = manifest_path(m, e);

	assert_int_equal(e->path_len, in->path_len);
	assert_memory_equal(p, in->path, in->path_len);
	assert_int_equal(p[e->path_len], '\0');
	assert_int_equal(e->type, in->type);
	assert_int_equal(e->mode, in->mode & 07777);
	assert_int_equal(e->uid, in->uid);
	assert_int_equal(e->gid, in->gid);
	assert_int_equal(e->rdev_major, in->rdev_major);
	assert_int_equal(e->rdev_minor, in->rdev_minor);
	assert_true(e->atime == in->atime);
	assert_true(e->mtime == in->mtime);
	assert_true(e->ctime == in->ctime);
	assert_int_equal(e->atime_ns, in->atime_ns);
	assert_int_equal(e->mtime_ns, in->mtime_ns);
	assert_int_equal(e->ctime_ns, in->ctime_ns);
	assert_true(e->size == in->size);
	assert_int_equal(e->link_len, in->link_len);
	if (in->link_len) {
		const char *l = manifest_str(m, e->link_off);

		assert_memory_equal(l, in->link, in->link_len);
		assert_int_equal(l[in->link_len], '\0');
	}
	assert_int_equal(e->chunk_count, in->chunk_count);
	for (uint32_t k = 0; k < in->chunk_count; k++) {
		const struct mf_chunk *c = &m->chunks[e->chunk_first + k];

		assert_true(e->chunk_first + k < m->n_chunks);
		assert_memory_equal(c->digest, in->chunks[k].digest, SHA256_LEN);
		assert_int_equal(c->len, in->chunks[k].len);
		assert_int_equal(c->off, in->chunks[k].off);
	}
	assert_int_equal(e->hole_count, in->hole_count);
	for (uint32_t k = 0; k < in->hole_count; k++) {
		const struct mf_hole *h = &m->holes[e->hole_first + k];

		assert_true(h->off == in->holes[k].off);
		assert_true(h->len == in->holes[k].len);
	}
	assert_int_equal(e->xattr_count, in->xattr_count);
	for (uint32_t k = 0; k < in->xattr_count; k++) {
		const struct mf_xattr *x = &m->xattrs[e->xattr_first + k];
		const struct mf_xattr_in *xi = &in->xattrs[k];
		const char *name = manifest_str(m, x->name_off);
		const char *val = manifest_str(m, x->value_off);

		assert_int_equal(x->name_len, xi->name_len);
		assert_memory_equal(name, xi->name, xi->name_len);
		assert_int_equal(name[xi->name_len], '\0');
		assert_int_equal(x->value_len, xi->value_len);
		if (xi->value_len)
			assert_memory_equal(val, xi->value, xi->value_len);
		assert_int_equal(val[xi->value_len], '\0');
	}
}

/* ------------------------------------------------------------------ round trip */

#define RT_MAX 40

struct rt {
	struct mf_entry_in e[RT_MAX];
	size_t n;
	char target[4096];
	struct mf_chunk big_chunks[3];
	struct mf_chunk sparse_chunks[2];
	struct mf_chunk packed[3];
	struct mf_hole big_holes[1];
	struct mf_hole sparse_holes[3];
	struct mf_xattr_in xattrs[6];
	struct mf_xattr_in dir_xattrs[1];
};

static const uint8_t caps_value[20] = { 0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00,
					0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
					0x00, 0x00, 0x00, 0x00 };
static const uint8_t acl_value[12] = { 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x07, 0x00,
				       0xff, 0xff, 0xff, 0xff };

static struct mf_entry_in *rt_add(struct rt *r, const char *path, uint8_t type, uint32_t mode)
{
	assert_true(r->n < RT_MAX);
	r->e[r->n] = mk(path, type, mode);
	return &r->e[r->n++];
}

static void rt_build(struct rt *r)
{
	struct mf_entry_in *e;
	uint64_t seed = 42;

	memset(r, 0, sizeof(*r));
	e = rt_add(r, "/", MF_DIR, 0755);
	e->atime = 1;
	e->mtime = 2;
	e->ctime = 3;

	/* every mode bit, extreme ids, negative and post-2038 times */
	e = rt_add(r, "/dir", MF_DIR, 07777);
	e->uid = UINT32_MAX;
	e->gid = UINT32_MAX - 1;
	e->atime = -1;
	e->atime_ns = 999999999;
	e->mtime = 1ll << 33;
	e->mtime_ns = 1;
	e->ctime = -2208988800ll; /* 1900-01-01 */
	e->ctime_ns = 500000000;
	r->dir_xattrs[0] = (struct mf_xattr_in){ "user.d", "\0", 6, 1 };
	e->xattrs = r->dir_xattrs;
	e->xattr_count = 1;

	/* > 4 GiB with several chunks (the writer raises the header's chunk size) and a hole */
	e = rt_add(r, "/dir/big", MF_REG, 04755);
	for (int i = 0; i < 3; i++) {
		prng_fill(&seed, r->big_chunks[i].digest, SHA256_LEN);
		r->big_chunks[i].len = 2u << 30;
	}
	r->big_holes[0] = (struct mf_hole){ 6 * GiB, 4 * GiB };
	e->chunks = r->big_chunks;
	e->chunk_count = 3;
	e->holes = r->big_holes;
	e->hole_count = 1;
	e->size = 10 * GiB;
	e->uid = 1000;
	e->gid = 1000;
	e->mtime = INT64_MAX;
	e->atime = INT64_MIN;

	/* sparse: hole, data, hole, data, 8 GiB hole */
	e = rt_add(r, "/dir/sparse", MF_REG, 02755);
	for (int i = 0; i < 2; i++) {
		prng_fill(&seed, r->sparse_chunks[i].digest, SHA256_LEN);
		r->sparse_chunks[i].len = 4096;
	}
	r->sparse_holes[0] = (struct mf_hole){ 0, 8192 };
	r->sparse_holes[1] = (struct mf_hole){ 12288, 4096 };
	r->sparse_holes[2] = (struct mf_hole){ 20480, 1ull << 33 };
	e->chunks = r->sparse_chunks;
	e->chunk_count = 2;
	e->holes = r->sparse_holes;
	e->hole_count = 3;
	e->size = 20480 + (1ull << 33);

	rt_add(r, "/dir/empty", MF_REG, 0);

	/* small files packed into one chunk: pieces at offsets */
	prng_fill(&seed, r->packed[0].digest, SHA256_LEN);
	for (int i = 0; i < 3; i++) {
		memcpy(r->packed[i].digest, r->packed[0].digest, SHA256_LEN);
		r->packed[i].off = (uint32_t)(i * 100);
		r->packed[i].len = (uint32_t)(100 - i * 30);
		e = rt_add(r, i == 0 ? "/dir/p0" : i == 1 ? "/dir/p1" : "/dir/p2", MF_REG, 0644);
		e->chunks = &r->packed[i];
		e->chunk_count = 1;
		e->size = r->packed[i].len;
	}

	/* a 4095-byte symlink target made of every non-NUL byte */
	for (int i = 0; i < 4095; i++)
		r->target[i] = (char)(1 + i % 255);
	e = rt_add(r, "/dir/link", MF_SYMLINK, 0777);
	e->link = r->target;
	e->link_len = 4095;
	e->size = 4095;

	e = rt_add(r, "/dir/hard", MF_HARDLINK, 04755);
	e->link = "/dir/big";
	e->link_len = 8;

	rt_add(r, "/dev", MF_DIR, 0755);
	e = rt_add(r, "/dev/null", MF_CHR, 0666);
	e->rdev_major = 1;
	e->rdev_minor = 3;
	e = rt_add(r, "/dev/sda", MF_BLK, 0660);
	e->rdev_major = 8;
	e->rdev_minor = 0;
	e->gid = 6;
	e = rt_add(r, "/dev/wide", MF_CHR, 0600);
	e->rdev_major = 4095;
	e->rdev_minor = 1048575;
	e = rt_add(r, "/dev/huge", MF_BLK, 0600);
	e->rdev_major = UINT32_MAX;
	e->rdev_minor = UINT32_MAX;
	rt_add(r, "/dev/fifo", MF_FIFO, 0620);
	rt_add(r, "/dev/sock", MF_SOCK, 0755);

	/* xattrs in several namespaces, binary values with NUL bytes, an empty value */
	r->xattrs[0] = (struct mf_xattr_in){ "security.capability", caps_value, 19, 20 };
	r->xattrs[1] = (struct mf_xattr_in){ "system.posix_acl_access", acl_value, 23, 12 };
	r->xattrs[2] = (struct mf_xattr_in){ "trusted.overlay.opaque", "y", 22, 1 };
	r->xattrs[3] = (struct mf_xattr_in){ "user.empty", "", 10, 0 };
	r->xattrs[4] = (struct mf_xattr_in){ "user.mime", "a\0b\0\0", 9, 5 };
	r->xattrs[5] = (struct mf_xattr_in){ "user.\xff\xfe", "\xff", 7, 1 };
	e = rt_add(r, "/x", MF_REG, 0644);
	e->xattrs = r->xattrs;
	e->xattr_count = 6;

	/* names that are not UTF-8, with control characters and quotes */
	rt_add(r, "/\xff\xfe\x80", MF_DIR, 0700);
	rt_add(r, "/\xff\xfe\x80/\x01\x02 \n\t\\\"", MF_REG, 0400);
	rt_add(r, "/\xc0\x80", MF_FIFO, 0);
	rt_add(r, "/a b", MF_SOCK, 0);
}

static const struct mf_entry_in *rt_find(const struct rt *r, const char *path, size_t len)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->e[i].path_len == len && !memcmp(r->e[i].path, path, len))
			return &r->e[i];
	return NULL;
}

static void check_rt_manifest(const struct rt *r, const struct manifest *m)
{
	assert_int_equal(m->n_entries, r->n);
	assert_int_equal(m->hdr->chunk_size, 2u << 30);
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *e = &m->entries[i];
		const struct mf_entry_in *in = rt_find(r, manifest_path(m, e), e->path_len);

		assert_non_null(in);
		check_entry(m, e, in);
		if (i)
			assert_true(ref_path_cmp(manifest_path(m, e - 1), e[-1].path_len,
						 manifest_path(m, e), e->path_len) < 0);
		assert_ptr_equal(manifest_find(m, manifest_path(m, e)), e);
	}
	assert_int_equal(m->entries[0].path_len, 1);
	assert_string_equal(manifest_path(m, &m->entries[0]), "/");
}

static void test_round_trip_all_fields(void **state)
{
	static struct rt r;
	uint8_t digest[SHA256_LEN];

	(void)state;
	rt_build(&r);
	for (uint64_t seed = 1; seed <= 8; seed++) {
		struct manifest_writer *w = manifest_writer_new(CHUNK_SIZE_DEFAULT);
		size_t idx[RT_MAX];
		struct manifest *m;
		uint8_t *copy;
		size_t len;

		assert_non_null(w);
		shuffle(idx, r.n, seed);
		for (size_t i = 0; i < r.n; i++)
			add_ok(w, &r.e[idx[i]]);
		assert_int_equal(manifest_writer_set_config(w, "{\"config\":{}}", 13), 0);
		m = serialize_parse(w, &copy, &len);
		check_rt_manifest(&r, m);
		/* the config string */
		assert_int_equal(m->hdr->config_len, 13);
		assert_string_equal(manifest_str(m, m->hdr->config_off), "{\"config\":{}}");
		/* the digest is the trailing sha256 of everything before it */
		assert_int_equal(m->buf_len, len);
		assert_memory_equal(m->digest, copy + len - SHA256_LEN, SHA256_LEN);
		assert_int_equal(sha256_buf(copy, len - SHA256_LEN, digest), 0);
		assert_memory_equal(digest, m->digest, SHA256_LEN);
		assert_int_equal(memcmp(m->hdr->magic, MF_MAGIC, 8), 0);
		assert_int_equal(m->hdr->version, MF_VERSION);
		assert_int_equal(m->hdr->header_size, sizeof(struct mf_header));
		assert_int_equal(m->n_chunks, 8);
		assert_int_equal(m->n_holes, 4);
		assert_int_equal(m->n_xattrs, 7);
		manifest_free(m);
		free(copy);
		manifest_writer_free(w);
	}
}

static void test_write_and_load(void **state)
{
	static struct rt r;
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t digest[SHA256_LEN], *ser, *file;
	struct manifest_writer *w;
	struct manifest *m = NULL;
	char why[WHY_MAX] = "";
	size_t ser_len, file_len;

	(void)state;
	rt_build(&r);
	tmpdir_make(dir);
	path_fmt(path, "%s/image.manifest", dir);
	w = manifest_writer_new(CHUNK_SIZE_DEFAULT);
	assert_non_null(w);
	for (size_t i = r.n; i-- > 0;)
		add_ok(w, &r.e[i]);
	assert_int_equal(manifest_writer_write(w, path, digest, NULL, 0), 0);
	assert_int_equal(manifest_writer_serialize(w, &ser, &ser_len, NULL, 0), 0);
	assert_int_equal(fs_read_file(path, &file, &file_len), 0);
	assert_int_equal(file_len, ser_len);
	assert_memory_equal(file, ser, ser_len);
	assert_memory_equal(digest, ser + ser_len - SHA256_LEN, SHA256_LEN);
	free(file);
	free(ser);
	manifest_writer_free(w);

	assert_int_equal(manifest_load(path, &m, why, sizeof(why)), 0);
	check_rt_manifest(&r, m);
	assert_memory_equal(m->digest, digest, SHA256_LEN);
	assert_int_equal(m->hdr->config_len, 0);
	manifest_free(m);
	manifest_free(NULL);

	/* I/O errors are -errno and leave why NULL */
	path_fmt(path, "%s/missing", dir);
	snprintf(why, sizeof(why), "%s", "unset");
	assert_int_equal(manifest_load(path, &m, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "");
	snprintf(why, sizeof(why), "%s", "unset");
	assert_int_equal(manifest_load(dir, &m, why, sizeof(why)), -EISDIR);
	assert_string_equal(why, "");
	/* an empty file is a format error */
	path_fmt(path, "%s/empty", dir);
	write_file(path, "", 0);
	assert_int_equal(manifest_load(path, &m, why, sizeof(why)), -EBADMSG);
	assert_true(why[0]);
	rm_rf(dir);
}

static void test_writer_normalizes(void **state)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	struct mf_entry_in e = mk("/", MF_DIR, 040755); /* S_IFDIR bits are dropped */
	struct mf_chunk c = { .len = 100, .off = 3996 };
	struct manifest *m;

	(void)state;
	assert_non_null(w);
	add_ok(w, &e);
	e = mk("/f", MF_REG, 0104644);
	e.chunks = &c;
	e.chunk_count = 1;
	e.size = 100;
	e.link = "x";           /* a link target on a file is dropped */
	e.link_len = 1;
	add_ok(w, &e);
	m = serialize_parse(w, NULL, NULL);
	assert_int_equal(m->entries[0].mode, 0755);
	assert_int_equal(m->entries[1].mode, 04644);
	assert_int_equal(m->entries[1].link_len, 0);
	assert_int_equal(m->chunks[0].off, 3996);
	/* pieces inside the given chunk size keep it */
	assert_int_equal(m->hdr->chunk_size, 4096);
	manifest_free(m);
	manifest_writer_free(w);

	/* a piece reaching past it raises it to off + len */
	w = manifest_writer_new(4096);
	e = mk("/", MF_DIR, 0755);
	add_ok(w, &e);
	c.off = 4000;
	c.len = 200;
	e = mk("/f", MF_REG, 0644);
	e.chunks = &c;
	e.chunk_count = 1;
	e.size = 200;
	add_ok(w, &e);
	m = serialize_parse(w, NULL, NULL);
	assert_int_equal(m->hdr->chunk_size, 4200);
	assert_int_equal(m->chunks[0].off, 4000);
	manifest_free(m);
	manifest_writer_free(w);
}

/*
 * Entries added in any order: the writer lays their pieces out in entry order, as the reader
 * requires (each file's pieces follow the previous file's; issue 24, item 1).
 */
static void test_writer_orders_pieces(void **state)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	struct mf_chunk c[4];
	struct mf_entry_in e;
	struct manifest *m;
	const struct mf_entry *f;

	(void)state;
	memset(c, 0, sizeof(c));
	for (int i = 0; i < 4; i++) {
		c[i].digest[0] = (uint8_t)(i + 1);
		c[i].len = 100;
	}
	e = mk("/z", MF_REG, 0644);       /* pieces 0 and 1 as added, 2 and 3 as written */
	e.chunks = c;
	e.chunk_count = 2;
	e.size = 200;
	add_ok(w, &e);
	e = mk("/d/b", MF_REG, 0644);     /* piece 2 as added, 1 as written */
	e.chunks = &c[2];
	e.chunk_count = 1;
	e.size = 100;
	add_ok(w, &e);
	e = mk("/d", MF_DIR, 0755);
	add_ok(w, &e);
	e = mk("/d/a", MF_REG, 0644);     /* piece 3 as added, 0 as written */
	e.chunks = &c[3];
	e.chunk_count = 1;
	e.size = 100;
	add_ok(w, &e);
	e = mk("/", MF_DIR, 0755);
	add_ok(w, &e);
	m = serialize_parse(w, NULL, NULL);
	f = manifest_find(m, "/d/a");
	assert_int_equal(f->chunk_first, 0);
	assert_int_equal(m->chunks[0].digest[0], 4);
	f = manifest_find(m, "/d/b");
	assert_int_equal(f->chunk_first, 1);
	assert_int_equal(m->chunks[1].digest[0], 3);
	f = manifest_find(m, "/z");
	assert_int_equal(f->chunk_first, 2);
	assert_int_equal(m->chunks[2].digest[0], 1);
	assert_int_equal(m->chunks[3].digest[0], 2);
	manifest_free(m);
	manifest_writer_free(w);
}

static void test_root_only(void **state)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	struct mf_entry_in e = mk("/", MF_DIR, 0755);
	struct manifest *m;

	(void)state;
	add_ok(w, &e);
	m = serialize_parse(w, NULL, NULL);
	assert_int_equal(m->n_entries, 1);
	assert_int_equal(m->n_chunks, 0);
	assert_ptr_equal(manifest_find(m, "/"), &m->entries[0]);
	assert_null(manifest_find(m, "/a"));
	assert_null(manifest_find(m, ""));
	manifest_free(m);
	manifest_writer_free(w);
}

/* ------------------------------------------------------------------ order, find, dups */

static const char *const sorted_paths[] = {
	"/", "/\x01", "/a", "/a/b", "/a/b/c", "/a/c", "/a-b", "/a.b", "/a0",
	"/b", "/b/a", "/\x7f", "/\x80", "/\xff", "/\xff/x",
};
#define N_SORTED (sizeof(sorted_paths) / sizeof(sorted_paths[0]))

static bool is_dir_path(const char *p)
{
	return !strcmp(p, "/") || !strcmp(p, "/a") || !strcmp(p, "/a/b") || !strcmp(p, "/b") ||
	       !strcmp(p, "/\xff");
}

static void test_sorted_depth_first(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 30; seed++) {
		struct manifest_writer *w = manifest_writer_new(4096);
		size_t idx[N_SORTED];
		struct manifest *m;

		shuffle(idx, N_SORTED, seed);
		for (size_t i = 0; i < N_SORTED; i++) {
			const char *p = sorted_paths[idx[i]];
			struct mf_entry_in e = mk(p, is_dir_path(p) ? MF_DIR : MF_REG, 0644);

			add_ok(w, &e);
		}
		m = serialize_parse(w, NULL, NULL);
		assert_int_equal(m->n_entries, N_SORTED);
		for (size_t i = 0; i < N_SORTED; i++)
			assert_string_equal(manifest_path(m, &m->entries[i]), sorted_paths[i]);
		manifest_free(m);
		manifest_writer_free(w);
	}
}

static void test_path_cmp(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_SORTED; i++) {
		for (size_t j = 0; j < N_SORTED; j++) {
			const char *a = sorted_paths[i], *b = sorted_paths[j];
			int c = manifest_path_cmp(a, strlen(a), b, strlen(b));

			if (i < j)
				assert_true(c < 0);
			else if (i > j)
				assert_true(c > 0);
			else
				assert_int_equal(c, 0);
		}
	}
	/* lengths, not NULs, delimit */
	assert_true(manifest_path_cmp("/ab", 2, "/ab", 3) < 0);
	assert_true(manifest_path_cmp("/ab", 3, "/ab", 2) > 0);
	assert_int_equal(manifest_path_cmp("/ab", 2, "/ax", 2), 0);
	assert_int_equal(manifest_path_cmp("", 0, "", 0), 0);
	/* '/' below 0x01 and 0x00 below everything else too */
	assert_true(manifest_path_cmp("/", 1, "\x01", 1) < 0);
	assert_true(manifest_path_cmp("a/", 2, "a\x00", 2) < 0);
	assert_true(manifest_path_cmp("a\x00", 2, "a\x01", 2) < 0);
	assert_true(manifest_path_cmp("\xff", 1, "\xfe", 1) > 0);
}

static void test_type_names(void **state)
{
	(void)state;
	assert_string_equal(manifest_type_name(MF_REG), "file");
	assert_string_equal(manifest_type_name(MF_DIR), "dir");
	assert_string_equal(manifest_type_name(MF_SYMLINK), "symlink");
	assert_string_equal(manifest_type_name(MF_HARDLINK), "hardlink");
	assert_string_equal(manifest_type_name(MF_CHR), "char");
	assert_string_equal(manifest_type_name(MF_BLK), "block");
	assert_string_equal(manifest_type_name(MF_FIFO), "fifo");
	assert_string_equal(manifest_type_name(MF_SOCK), "socket");
	assert_string_equal(manifest_type_name(0), "unknown");
	assert_string_equal(manifest_type_name(9), "unknown");
	assert_string_equal(manifest_type_name(255), "unknown");
}

static void test_find(void **state)
{
	static const char *const absent[] = {
		"", "//", "/a/", "/a/b/", "/a/b/c/d", "/a/d", "/nope", "/c", "/a.", "/a.bb",
		"/\xfe", "/\xff/y", "/\xff/", "/0", "a", "/A",
	};
	struct manifest_writer *w = manifest_writer_new(4096);
	struct manifest *m;

	(void)state;
	for (size_t i = N_SORTED; i-- > 0;) {
		struct mf_entry_in e = mk(sorted_paths[i],
					  is_dir_path(sorted_paths[i]) ? MF_DIR : MF_REG, 0);

		add_ok(w, &e);
	}
	m = serialize_parse(w, NULL, NULL);
	for (size_t i = 0; i < N_SORTED; i++) {
		const struct mf_entry *e = manifest_find(m, sorted_paths[i]);

		assert_ptr_equal(e, &m->entries[i]);
	}
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (manifest_find(m, absent[i]))
			fail_msg("manifest_find found absent path \"%s\"", absent[i]);
	manifest_free(m);
	manifest_writer_free(w);
}

static void expect_duplicate(const char *const *paths, size_t n)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct manifest_writer *w = manifest_writer_new(4096);
	uint8_t *buf = NULL;
	char why[WHY_MAX] = "";
	size_t len = 0;

	for (size_t i = 0; i < n; i++) {
		struct mf_entry_in e = mk(paths[i], MF_DIR, 0755);

		add_ok(w, &e);
	}
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, why, sizeof(why)), -EEXIST);
	assert_string_equal(why, "duplicate path");
	assert_null(buf);
	why[0] = '\0';
	tmpdir_make(dir);
	path_fmt(path, "%s/m", dir);
	assert_int_equal(manifest_writer_write(w, path, NULL, why, sizeof(why)), -EEXIST);
	assert_string_equal(why, "duplicate path");
	assert_false(path_exists(path));
	rm_rf(dir);
	manifest_writer_free(w);
}

static void test_duplicates_rejected(void **state)
{
	static const char *const a[] = { "/", "/a", "/b", "/a" };
	static const char *const b[] = { "/", "/" };
	static const char *const c[] = { "/x/y", "/", "/x", "/x/y", "/x/z" };

	(void)state;
	expect_duplicate(a, 4);
	expect_duplicate(b, 2);
	expect_duplicate(c, 5);
}

/* ------------------------------------------------------------------ corruption */

/*
 * The base manifest every corruption test starts from. Indices after sorting:
 */
enum { E_ROOT, E_D, E_F, E_G, E_H, E_L, E_X, E_Z, E_COUNT };
static const char *const base_paths[E_COUNT] = {
	"/", "/d", "/d/f", "/d/g", "/d/h", "/d/l", "/d/x", "/zzzzzz",
};

static uint8_t *base_buf;
static size_t base_len;

static int base_setup(void **state)
{
	static const struct mf_hole holes[2] = { { 0, 4096 }, { 8192, 4096 } };
	static const struct mf_xattr_in xattrs[2] = {
		{ "security.s", "\x01\x00", 10, 2 },
		{ "user.k", "v\0v", 6, 3 },
	};
	struct manifest_writer *w = manifest_writer_new(4096);
	struct mf_chunk fchunks[2], gchunk[1];
	struct mf_entry_in e;
	uint64_t seed = 99;

	(void)state;
	if (!w)
		return -1;
	memset(fchunks, 0, sizeof(fchunks));
	memset(gchunk, 0, sizeof(gchunk));
	prng_fill(&seed, fchunks[0].digest, SHA256_LEN);
	prng_fill(&seed, fchunks[1].digest, SHA256_LEN);
	prng_fill(&seed, gchunk[0].digest, SHA256_LEN);
	fchunks[0].len = fchunks[1].len = gchunk[0].len = 4096;
	/* added out of order on purpose */
	e = mk("/zzzzzz", MF_REG, 0644);
	manifest_writer_add(w, &e);
	e = mk("/d/x", MF_FIFO, 0600);
	e.xattrs = xattrs;
	e.xattr_count = 2;
	manifest_writer_add(w, &e);
	e = mk("/d/f", MF_REG, 0644);
	e.chunks = fchunks;
	e.chunk_count = 2;
	e.holes = holes;
	e.hole_count = 2;
	e.size = 16384;
	manifest_writer_add(w, &e);
	e = mk("/d/g", MF_REG, 0644);
	e.chunks = gchunk;
	e.chunk_count = 1;
	e.size = 4096;
	manifest_writer_add(w, &e);
	e = mk("/d/h", MF_HARDLINK, 0644);
	e.link = "/d/f";
	e.link_len = 4;
	manifest_writer_add(w, &e);
	e = mk("/d/l", MF_SYMLINK, 0777);
	e.link = "target";
	e.link_len = 6;
	e.size = 6;
	manifest_writer_add(w, &e);
	e = mk("/d", MF_DIR, 0755);
	manifest_writer_add(w, &e);
	e = mk("/", MF_DIR, 0755);
	manifest_writer_add(w, &e);
	manifest_writer_set_config(w, "{\"a\":1}", 7);
	if (manifest_writer_serialize(w, &base_buf, &base_len, NULL, 0))
		return -1;
	manifest_writer_free(w);
	return 0;
}

static int base_teardown(void **state)
{
	(void)state;
	free(base_buf);
	base_buf = NULL;
	return 0;
}

/* A writable view of a serialized manifest, computed from its (intact) header. */
struct mv {
	uint8_t *buf;
	size_t len;
	struct mf_header *h;
	struct mf_entry *e;
	struct mf_chunk *c;
	struct mf_hole *ho;
	struct mf_xattr *x;
	char *s;
};

static void mv_init(struct mv *v, uint8_t *buf, size_t len)
{
	v->buf = buf;
	v->len = len;
	v->h = (struct mf_header *)buf;
	v->e = (struct mf_entry *)(buf + sizeof(struct mf_header));
	v->c = (struct mf_chunk *)(v->e + v->h->entry_count);
	v->ho = (struct mf_hole *)(v->c + v->h->chunk_count);
	v->x = (struct mf_xattr *)(v->ho + v->h->hole_count);
	v->s = (char *)(v->x + v->h->xattr_count);
}

/* Overwrite the 7-byte path "/zzzzzz" in place (same length, so every offset holds). */
static void set_z_path(struct mv *v, const char *p7)
{
	memcpy(v->s + v->e[E_Z].path_off, p7, 7);
}

/* Parse a copy of buf; returns the result, and why in why (empty on success). */
static int parse_copy(const uint8_t *buf, size_t len, char *why, size_t why_len)
{
	uint8_t *b = malloc(len ? len : 1);
	struct manifest *m = NULL;
	int ret;

	assert_non_null(b);
	if (len)
		memcpy(b, buf, len);
	why[0] = '\0';
	ret = manifest_parse(b, len, &m, why, why_len);
	if (ret == 0) {
		assert_non_null(m);
		manifest_free(m);
	} else {
		assert_null(m);
	}
	return ret;
}

static void test_base_is_valid(void **state)
{
	struct manifest *m;
	char why[WHY_MAX] = "";
	uint8_t *b;
	struct mv v;

	(void)state;
	b = malloc(base_len);
	memcpy(b, base_buf, base_len);
	assert_int_equal(manifest_parse(b, base_len, &m, why, sizeof(why)), 0);
	assert_int_equal(m->n_entries, E_COUNT);
	for (int i = 0; i < E_COUNT; i++)
		assert_string_equal(manifest_path(m, &m->entries[i]), base_paths[i]);
	assert_int_equal(m->n_chunks, 3);
	assert_int_equal(m->n_holes, 2);
	assert_int_equal(m->n_xattrs, 2);
	assert_int_equal(m->entries[E_F].chunk_first, 0);
	assert_int_equal(m->entries[E_G].chunk_first, 2);
	assert_int_equal(m->entries[E_X].xattr_first, 0);
	assert_int_equal(m->hdr->chunk_size, 4096);
	manifest_free(m);

	/* the view used by the corruption tests sees the same layout */
	b = malloc(base_len);
	memcpy(b, base_buf, base_len);
	mv_init(&v, b, base_len);
	assert_string_equal(v.s + v.e[E_Z].path_off, "/zzzzzz");
	assert_string_equal(v.s + v.e[E_L].link_off, "target");
	assert_string_equal(v.s + v.h->config_off, "{\"a\":1}");
	/* resealing an untouched copy keeps it valid */
	sha256_reseal(b, base_len);
	assert_int_equal(parse_copy(b, base_len, why, sizeof(why)), 0);
	free(b);
}

static void test_bad_magic(void **state)
{
	char why[WHY_MAX] = "";
	uint8_t *b = malloc(base_len);

	(void)state;
	for (int i = 0; i < 8; i++) {
		for (int x = 1; x < 256; x <<= 1) {
			memcpy(b, base_buf, base_len);
			b[i] ^= (uint8_t)x;
			assert_int_equal(parse_copy(b, base_len, why, sizeof(why)), -EBADMSG);
			assert_true(why[0]);
			assert_non_null(strstr(why, "magic"));
		}
	}
	memset(b, 0, base_len);
	assert_int_equal(parse_copy(b, base_len, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "magic"));
	free(b);
}

static void test_truncated(void **state)
{
	char why[WHY_MAX] = "";

	(void)state;
	/* every length short of the full file */
	for (size_t len = 0; len < base_len; len++) {
		int ret = parse_copy(base_buf, len, why, sizeof(why));

		if (ret != -EBADMSG || !why[0])
			fail_msg("truncated to %zu: ret %d why %s", len, ret, why[0] ? why : "NULL");
		if (len < 8)
			assert_non_null(strstr(why, "short"));
		else if (len >= sizeof(struct mf_header))
			assert_non_null(strstr(why, "truncated"));
	}
	/* the header alone is intact but promises more */
	assert_int_equal(parse_copy(base_buf, sizeof(struct mf_header), why, sizeof(why)), -EBADMSG);
	/* NULL why is allowed */
	{
		uint8_t *b = malloc(base_len - 1);
		struct manifest *m = NULL;

		memcpy(b, base_buf, base_len - 1);
		assert_int_equal(manifest_parse(b, base_len - 1, &m, NULL, 0), -EBADMSG);
		assert_null(m);
	}
}

static void test_trailing_garbage(void **state)
{
	static const size_t extra[] = { 1, 7, 8, 32, 136, 1000 };
	char why[WHY_MAX] = "";

	(void)state;
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		size_t len = base_len + extra[i];
		uint8_t *b = calloc(1, len);

		memcpy(b, base_buf, base_len);
		assert_int_equal(parse_copy(b, len, why, sizeof(why)), -EBADMSG);
		assert_non_null(strstr(why, "trailing"));
		/* a valid-looking checksum at the new end does not help */
		sha256_reseal(b, len);
		assert_int_equal(parse_copy(b, len, why, sizeof(why)), -EBADMSG);
		assert_non_null(strstr(why, "trailing"));
		free(b);
	}
}

static void test_flipped_bytes(void **state)
{
	static const uint8_t flips[] = { 0x01, 0x80, 0xff };
	uint8_t *b = malloc(base_len);
	char why[WHY_MAX] = "";

	(void)state;
	for (size_t pos = 0; pos < base_len; pos++) {
		for (size_t f = 0; f < sizeof(flips); f++) {
			int ret;

			memcpy(b, base_buf, base_len);
			b[pos] ^= flips[f];
			ret = parse_copy(b, base_len, why, sizeof(why));
			if (ret != -EBADMSG || !why[0])
				fail_msg("flip 0x%02x at %zu: ret %d", flips[f], pos, ret);
			/* past the header, only the checksum can notice */
			if (pos >= sizeof(struct mf_header) && !strstr(why, "checksum"))
				fail_msg("flip 0x%02x at %zu: %s", flips[f], pos, why);
		}
	}
	free(b);
}

/* ---- tampering with the checksum recomputed: validation itself must object ---- */

struct tamper {
	const char *name;
	void (*fn)(struct mv *v);
	const char *why; /* substring of the expected message; NULL: must be accepted */
};

#define T(name_, body) \
	static void t_##name_(struct mv *v) { body; }
#define TE(name_, why_) { #name_, t_##name_, why_ }

/* header */
T(version0, v->h->version = 0)
T(version2, v->h->version = 2)
T(version_max, v->h->version = UINT32_MAX)
T(hsize_small, v->h->header_size = sizeof(struct mf_header) - 1)
T(hsize_big, v->h->header_size = sizeof(struct mf_header) + 8)
T(hsize_zero, v->h->header_size = 0)
T(entries_huge, v->h->entry_count = UINT64_MAX)
T(entries_over, v->h->entry_count = v->len / sizeof(struct mf_entry) + 1)
T(chunks_huge, v->h->chunk_count = UINT64_MAX / 2)
T(chunks_over, v->h->chunk_count = v->len / sizeof(struct mf_chunk) + 1)
T(holes_huge, v->h->hole_count = 1ull << 60)
T(holes_over, v->h->hole_count = v->len / sizeof(struct mf_hole) + 1)
T(xattrs_huge, v->h->xattr_count = UINT64_MAX)
T(xattrs_over, v->h->xattr_count = v->len / sizeof(struct mf_xattr) + 1)
T(strings_huge, v->h->strings_size = UINT64_MAX)
T(strings_over, v->h->strings_size = v->len + 1)
T(entries_plus1, v->h->entry_count++)
T(entries_minus1, v->h->entry_count--)
T(chunks_plus1, v->h->chunk_count++)
T(chunks_minus1, v->h->chunk_count--)
T(holes_plus1, v->h->hole_count++)
T(holes_minus1, v->h->hole_count--)
T(xattrs_plus1, v->h->xattr_count++)
T(xattrs_minus1, v->h->xattr_count--)
T(strings_plus1, v->h->strings_size++)
T(strings_minus1, v->h->strings_size--)
T(config_off_end, v->h->config_off = v->h->strings_size)
T(config_off_huge, v->h->config_off = UINT64_MAX - 2)
T(config_len_big, v->h->config_len = (uint32_t)v->h->strings_size)
T(config_len_plus1, v->h->config_len++)
T(config_no_nul, v->h->config_len--)
T(config_len_zero_off_junk, { v->h->config_len = 0; v->h->config_off = UINT64_MAX; })
T(no_entries_zeroed, v->h->entry_count = 0)
/* root */
T(root_type_reg, v->e[E_ROOT].type = MF_REG)
T(root_type_bad, v->e[E_ROOT].type = 0)
T(root_path_d, { v->e[E_ROOT].path_off = v->e[E_D].path_off;
			 v->e[E_ROOT].path_len = v->e[E_D].path_len; })
/* paths */
T(path_off_end, v->e[E_G].path_off = v->h->strings_size)
T(path_off_huge, v->e[E_G].path_off = UINT64_MAX)
T(path_off_wrap, v->e[E_G].path_off = UINT64_MAX - 1)
T(path_len_big, v->e[E_G].path_len = (uint32_t)v->h->strings_size)
T(path_len_max, v->e[E_G].path_len = UINT32_MAX)
T(path_len_zero, v->e[E_G].path_len = 0)
T(path_no_nul, v->e[E_Z].path_len--)
T(path_dotdot_mid, set_z_path(v, "/z/../z"))
T(path_dotdot_end, set_z_path(v, "/zzz/.."))
T(path_dotdot_start, set_z_path(v, "/../zzz"))
T(path_dot_mid, set_z_path(v, "/z/./zz"))
T(path_dot_end, set_z_path(v, "/zzzz/."))
T(path_dot_start, set_z_path(v, "/./zzzz"))
T(path_double_slash, set_z_path(v, "/zz//zz"))
T(path_double_slash_start, set_z_path(v, "//zzzzz"))
T(path_double_slash_end, set_z_path(v, "/zzzz//"))
T(path_trailing_slash, set_z_path(v, "/zzzzz/"))
T(path_relative, set_z_path(v, "zzzzzzz"))
T(path_nul_inside, set_z_path(v, "/zz\0zzz"))
T(path_ok_dots_in_name, set_z_path(v, "/z..zzz"))
T(path_ok_trailing_dots, set_z_path(v, "/zzzz.."))
T(path_ok_three_dots, set_z_path(v, "/zzz..."))
/* order */
T(unsorted_swap, { struct mf_entry t = v->e[E_F]; v->e[E_F] = v->e[E_G];
			     v->e[E_G] = t; })
T(unsorted_path, set_z_path(v, "/aaaaaa"))
T(duplicate_path, { v->e[E_G].path_off = v->e[E_F].path_off; })
T(duplicate_last, { v->e[E_Z].path_off = v->e[E_X].path_off;
				  v->e[E_Z].path_len = v->e[E_X].path_len; })
T(duplicate_root, { v->e[E_D].path_off = v->e[E_ROOT].path_off;
			v->e[E_D].path_len = 1; })
/* type, mode */
T(type_zero, v->e[E_D].type = 0)
T(type_nine, v->e[E_D].type = 9)
T(type_max, v->e[E_D].type = 255)
T(mode_010000, v->e[E_D].mode = 010000)
T(mode_ifdir, v->e[E_D].mode = 040755)
T(mode_top_bit, v->e[E_D].mode = 0x80000000u)
T(mode_07777_ok, v->e[E_D].mode = 07777)
/* ranges */
T(chunk_first_end, v->e[E_G].chunk_first = 3)
T(chunk_first_span, v->e[E_G].chunk_count = 2)
T(chunk_first_huge, v->e[E_G].chunk_first = UINT64_MAX)
T(chunk_count_huge, v->e[E_G].chunk_count = UINT32_MAX)
T(hole_first_end, v->e[E_F].hole_first = 1)
T(hole_first_huge, v->e[E_F].hole_first = UINT64_MAX - 1)
T(hole_count_huge, v->e[E_F].hole_count = UINT32_MAX)
T(xattr_first_end, v->e[E_X].xattr_first = 1)
T(xattr_first_huge, v->e[E_X].xattr_first = UINT64_MAX)
T(xattr_count_root, v->e[E_ROOT].xattr_count = 3)
/*
 * the files' pieces tile chunks[] in entry order (f: 0 and 1, g: 2), so nothing sized by
 * chunk_count can be overfilled by files that share pieces (issue 24, item 1)
 */
T(pieces_shared, v->e[E_G].chunk_first = 1)
T(pieces_shared_all, { v->e[E_G].chunk_first = 0; v->e[E_G].chunk_count = 2;
			     v->e[E_G].size = 8192; })
T(pieces_swapped, { v->e[E_F].chunk_first = 1; v->e[E_G].chunk_first = 0; })
T(pieces_gap_first, { v->e[E_F].chunk_first = 1; v->e[E_F].hole_count = 1;
			    v->e[E_F].size = 12288; })
T(pieces_unused_last, { v->e[E_G].chunk_count = 0; v->e[E_G].size = 0; })
T(pieces_empty_file_anywhere_ok, v->e[E_Z].chunk_first = 3)
T(pieces_dir_anywhere_ok, v->e[E_D].chunk_first = 2)
/* nanoseconds */
T(atime_ns, v->e[E_D].atime_ns = 1000000000u)
T(mtime_ns, v->e[E_D].mtime_ns = 1000000000u)
T(ctime_ns, v->e[E_D].ctime_ns = 1000000000u)
T(ctime_ns_max, v->e[E_G].ctime_ns = UINT32_MAX)
T(ns_max_ok, { v->e[E_D].atime_ns = v->e[E_D].mtime_ns =
			     v->e[E_D].ctime_ns = 999999999u; })
T(negative_times_ok, { v->e[E_D].atime = INT64_MIN; v->e[E_D].mtime = -1; })
/* links */
T(symlink_len_zero, v->e[E_L].link_len = 0)
T(symlink_off_end, v->e[E_L].link_off = v->h->strings_size)
T(symlink_off_huge, v->e[E_L].link_off = UINT64_MAX - 3)
T(symlink_len_big, v->e[E_L].link_len = (uint32_t)v->h->strings_size)
T(symlink_no_nul, v->e[E_L].link_len = 5)
T(hardlink_len_zero, v->e[E_H].link_len = 0)
/* empty targets that point at a NUL, so only the length check can object */
T(symlink_empty, { v->e[E_L].link_off += 6; v->e[E_L].link_len = 0; v->e[E_L].size = 0; })
T(hardlink_empty, { v->e[E_H].link_off += 4; v->e[E_H].link_len = 0; })
T(hardlink_off_end, v->e[E_H].link_off = v->h->strings_size + 10)
T(hardlink_no_nul, v->e[E_H].link_len = 3)
/* a link target on an entry that is no link: never checked, and repack copied it (fuzz) */
T(file_with_link, { v->e[E_G].link_off = 0; v->e[E_G].link_len = 32768; })
T(dir_with_link, { v->e[E_D].link_off = v->e[E_L].link_off;
			 v->e[E_D].link_len = v->e[E_L].link_len; })
/* data on non-regular entries */
T(dir_with_chunk, { v->e[E_D].chunk_first = 0; v->e[E_D].chunk_count = 1; })
T(dir_with_hole, { v->e[E_D].hole_first = 0; v->e[E_D].hole_count = 1; })
T(fifo_with_chunk, { v->e[E_X].chunk_first = 0; v->e[E_X].chunk_count = 1; })
T(symlink_with_hole, { v->e[E_L].hole_first = 0; v->e[E_L].hole_count = 2; })
T(hardlink_with_chunk, { v->e[E_H].chunk_first = 2;
					v->e[E_H].chunk_count = 1; })
/* chunk lengths, holes, sizes */
T(chunk_len_zero, v->c[2].len = 0)
T(chunk_len_over, { v->c[2].len = 4097; v->e[E_G].size = 4097; })
T(chunk_size_hdr_small, v->h->chunk_size = 4095)
T(chunk_size_hdr_zero, v->h->chunk_size = 0)
T(chunk_size_hdr_big_ok, v->h->chunk_size = UINT32_MAX)
T(piece_off_over, v->c[2].off = 1)
T(piece_off_huge, v->c[0].off = UINT32_MAX)
T(piece_off_len_wrap, { v->c[0].off = UINT32_MAX - 100; v->h->chunk_size = UINT32_MAX; })
T(piece_off_ok, { v->c[2].len = 2048; v->c[2].off = 2048; v->e[E_G].size = 2048; })
T(hole_len_zero, { v->ho[1].len = 0; v->e[E_F].size -= 4096; })
T(hole_overlap, v->ho[1].off = 2048)
T(hole_overlap_by_one, v->ho[1].off = 4095)
T(hole_unsorted, { struct mf_hole t = v->ho[0]; v->ho[0] = v->ho[1];
			   v->ho[1] = t; })
T(hole_past_size, v->ho[1].off = 16384 - 2048)
T(hole_wrap, v->ho[1].off = UINT64_MAX - 100)
T(size_plus1, v->e[E_F].size++)
T(size_minus1, v->e[E_F].size--)
T(size_g_zero, v->e[E_G].size = 0)
T(size_empty_one, v->e[E_Z].size = 1)
T(size_wrap, v->e[E_G].size = UINT64_MAX)
/* xattrs */
T(xattr_name_len_zero, v->x[0].name_len = 0)
T(xattr_name_empty, { v->x[1].name_off += v->x[1].name_len; v->x[1].name_len = 0; })
T(xattr_name_off_end, v->x[0].name_off = v->h->strings_size)
T(xattr_name_off_huge, v->x[1].name_off = UINT64_MAX)
T(xattr_name_no_nul, v->x[0].name_len--)
/* the second name far out of range: it was compared with the first before it was checked */
T(xattr_name_off_far, v->x[1].name_off = 1ull << 40)
T(xattr_name_off_far_first, v->x[0].name_off = 1ull << 40)
/* "security.s\0\x01": in range, NUL-terminated, a NUL inside */
T(xattr_name_nul_inside, v->x[0].name_len = 12)
T(xattr_name_len_big, v->x[0].name_len = (uint32_t)v->h->strings_size)
T(xattr_value_off_end, v->x[0].value_off = v->h->strings_size)
T(xattr_value_off_huge, v->x[1].value_off = UINT64_MAX - 1)
T(xattr_value_len_big, v->x[0].value_len = (uint32_t)v->h->strings_size)
T(xattr_value_no_nul, v->x[1].value_len = 2)
T(xattr_value_len_max, v->x[1].value_len = UINT32_MAX)
T(xattr_value_empty_ok, { v->x[0].value_off = v->x[0].value_off + 1;
				v->x[0].value_len = 0; })

static const struct tamper tampers[] = {
	TE(version0, "version"), TE(version2, "version"), TE(version_max, "version"),
	TE(hsize_small, "header size"), TE(hsize_big, "header size"),
	TE(hsize_zero, "header size"),
	TE(entries_huge, "counts exceed"), TE(entries_over, "counts exceed"),
	TE(chunks_huge, "counts exceed"), TE(chunks_over, "counts exceed"),
	TE(holes_huge, "counts exceed"), TE(holes_over, "counts exceed"),
	TE(xattrs_huge, "counts exceed"), TE(xattrs_over, "counts exceed"),
	TE(strings_huge, "counts exceed"), TE(strings_over, "counts exceed"),
	TE(entries_plus1, "truncated"), TE(entries_minus1, "trailing"),
	TE(chunks_plus1, "truncated"), TE(chunks_minus1, "trailing"),
	TE(holes_plus1, "truncated"), TE(holes_minus1, "trailing"),
	TE(xattrs_plus1, "truncated"), TE(xattrs_minus1, "trailing"),
	TE(strings_plus1, "truncated"), TE(strings_minus1, "trailing"),
	TE(config_off_end, "config"), TE(config_off_huge, "config"),
	TE(config_len_big, "config"), TE(config_len_plus1, "config"),
	TE(config_no_nul, "config"), TE(config_len_zero_off_junk, NULL),
	TE(no_entries_zeroed, "trailing"),
	TE(root_type_reg, "root"), TE(root_type_bad, "root"), TE(root_path_d, "root"),
	TE(path_off_end, "path"), TE(path_off_huge, "path"), TE(path_off_wrap, "path"),
	TE(path_len_big, "path"), TE(path_len_max, "path"), TE(path_len_zero, "path"),
	TE(path_no_nul, "path"),
	TE(path_dotdot_mid, "path"), TE(path_dotdot_end, "path"),
	TE(path_dotdot_start, "path"), TE(path_dot_mid, "path"), TE(path_dot_end, "path"),
	TE(path_dot_start, "path"), TE(path_double_slash, "path"),
	TE(path_double_slash_start, "path"), TE(path_double_slash_end, "path"),
	TE(path_trailing_slash, "path"), TE(path_relative, "path"),
	TE(path_nul_inside, "path"),
	TE(path_ok_dots_in_name, NULL), TE(path_ok_trailing_dots, NULL),
	TE(path_ok_three_dots, NULL),
	TE(unsorted_swap, "sorted"), TE(unsorted_path, "sorted"),
	TE(duplicate_path, "duplicated"), TE(duplicate_last, "duplicated"),
	TE(duplicate_root, "duplicated"),
	TE(type_zero, "type"), TE(type_nine, "type"), TE(type_max, "type"),
	TE(mode_010000, "mode"), TE(mode_ifdir, "mode"), TE(mode_top_bit, "mode"),
	TE(mode_07777_ok, NULL),
	TE(chunk_first_end, "range"), TE(chunk_first_span, "range"),
	TE(chunk_first_huge, "range"), TE(chunk_count_huge, "range"),
	TE(hole_first_end, "range"), TE(hole_first_huge, "range"),
	TE(hole_count_huge, "range"), TE(xattr_first_end, "range"),
	TE(xattr_first_huge, "range"), TE(xattr_count_root, "range"),
	TE(pieces_shared, "overlap or are out of order"),
	TE(pieces_shared_all, "overlap or are out of order"),
	TE(pieces_swapped, "overlap or are out of order"),
	TE(pieces_gap_first, "overlap or are out of order"),
	TE(pieces_unused_last, "no file names"),
	TE(pieces_empty_file_anywhere_ok, NULL), TE(pieces_dir_anywhere_ok, NULL),
	TE(atime_ns, "nanoseconds"), TE(mtime_ns, "nanoseconds"),
	TE(ctime_ns, "nanoseconds"), TE(ctime_ns_max, "nanoseconds"),
	TE(ns_max_ok, NULL), TE(negative_times_ok, NULL),
	TE(symlink_len_zero, "link"), TE(symlink_off_end, "link"),
	TE(symlink_off_huge, "link"), TE(symlink_len_big, "link"),
	TE(symlink_no_nul, "link"), TE(hardlink_len_zero, "link"),
	TE(hardlink_off_end, "link"), TE(symlink_empty, "link"), TE(hardlink_empty, "link"),
	TE(hardlink_no_nul, "link"),
	TE(file_with_link, "not a link"), TE(dir_with_link, "not a link"),
	TE(dir_with_chunk, "non-regular"), TE(dir_with_hole, "non-regular"),
	TE(fifo_with_chunk, "non-regular"), TE(symlink_with_hole, "non-regular"),
	TE(hardlink_with_chunk, "non-regular"),
	TE(chunk_len_zero, "chunk length"), TE(chunk_len_over, "chunk length"),
	TE(chunk_size_hdr_small, "chunk length"), TE(chunk_size_hdr_zero, "chunk length"),
	TE(chunk_size_hdr_big_ok, NULL),
	TE(piece_off_over, "chunk length"), TE(piece_off_huge, "chunk length"),
	TE(piece_off_len_wrap, "chunk length"), TE(piece_off_ok, NULL),
	TE(hole_len_zero, "hole"), TE(hole_overlap, "hole"),
	TE(hole_overlap_by_one, "hole"), TE(hole_unsorted, "hole"),
	TE(hole_past_size, "hole"), TE(hole_wrap, "hole"),
	TE(size_plus1, "add up"), TE(size_minus1, "add up"), TE(size_g_zero, "add up"),
	TE(size_empty_one, "add up"), TE(size_wrap, "add up"),
	TE(xattr_name_len_zero, "xattr"), TE(xattr_name_empty, "xattr"),
	TE(xattr_name_off_end, "xattr"),
	TE(xattr_name_off_huge, "xattr"), TE(xattr_name_no_nul, "xattr"),
	TE(xattr_name_off_far, "xattr name"), TE(xattr_name_off_far_first, "xattr name"),
	TE(xattr_name_nul_inside, "xattr name"),
	TE(xattr_name_len_big, "xattr"), TE(xattr_value_off_end, "xattr"),
	TE(xattr_value_off_huge, "xattr"), TE(xattr_value_len_big, "xattr"),
	TE(xattr_value_no_nul, "xattr"), TE(xattr_value_len_max, "xattr"),
	TE(xattr_value_empty_ok, NULL),
};

/* Apply one tamper to a fresh copy, reseal, parse; returns true if the outcome matches. */
static bool run_tamper(const struct tamper *t)
{
	uint8_t *b = malloc(base_len);
	char why[WHY_MAX] = "";
	struct mv v;
	int ret;

	assert_non_null(b);
	memcpy(b, base_buf, base_len);
	mv_init(&v, b, base_len);
	t->fn(&v);
	sha256_reseal(b, base_len);
	ret = parse_copy(b, base_len, why, sizeof(why));
	free(b);
	if (!t->why) {
		if (ret == 0)
			return true;
		print_error("tamper %s: must be accepted, got %d (%s)\n", t->name, ret,
			    why[0] ? why : "NULL");
		return false;
	}
	if (ret == -EBADMSG && why[0] && strstr(why, t->why))
		return true;
	print_error("tamper %s: want -EBADMSG (\"%s\"), got %d (%s)\n", t->name, t->why, ret,
		    why[0] ? why : "NULL");
	return false;
}

static void test_tampered_validation(void **state)
{
	size_t bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(tampers) / sizeof(tampers[0]); i++)
		if (!run_tamper(&tampers[i]))
			bad++;
	if (bad)
		fail_msg("%zu of %zu tamper cases failed", bad,
			 sizeof(tampers) / sizeof(tampers[0]));
}

/*
 * A string may not end at the very end of the strings section: its terminator would be the
 * first byte of the checksum. The config (the last string) is stretched over its own NUL,
 * and an unvalidated header field is varied until the resealed checksum starts with 0x00,
 * so that only the bounds check, not the NUL check, can object.
 */
static void test_string_at_section_end(void **state)
{
	uint8_t *b = malloc(base_len);
	char why[WHY_MAX] = "";
	struct mv v;
	uint32_t k;

	(void)state;
	memcpy(b, base_buf, base_len);
	mv_init(&v, b, base_len);
	assert_true(v.h->config_off + v.h->config_len + 1 == v.h->strings_size);
	v.h->config_len++;
	for (k = 0; k < 1000000; k++) {
		v.h->reserved[0] = k;
		sha256_reseal(b, base_len);
		if (b[base_len - SHA256_LEN] == 0)
			break;
	}
	assert_true(k < 1000000);
	assert_int_equal(parse_copy(b, base_len, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "config"));
	free(b);
}

static void test_no_entries(void **state)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	char why[WHY_MAX] = "";
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, NULL, 0), 0);
	assert_int_equal(parse_copy(buf, len, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "root"));
	free(buf);
	/* and with only a config (no entries) */
	assert_int_equal(manifest_writer_set_config(w, "{}", 2), 0);
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, NULL, 0), 0);
	assert_int_equal(parse_copy(buf, len, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "root"));
	free(buf);
	manifest_writer_free(w);
}

static void expect_missing_root(const struct mf_entry_in *ents, size_t n)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	char why[WHY_MAX] = "";
	uint8_t *buf;
	size_t len;

	for (size_t i = 0; i < n; i++)
		add_ok(w, &ents[i]);
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, NULL, 0), 0);
	assert_int_equal(parse_copy(buf, len, why, sizeof(why)), -EBADMSG);
	assert_true(why[0]);
	assert_non_null(strstr(why, "root"));
	free(buf);
	manifest_writer_free(w);
}

static void test_missing_root(void **state)
{
	struct mf_entry_in a[2] = { mk("/a", MF_DIR, 0755), mk("/a/b", MF_REG, 0644) };
	struct mf_entry_in b[1] = { mk("/", MF_REG, 0644) };        /* root is not a dir */
	struct mf_entry_in c[1] = { mk("/", MF_SYMLINK, 0777) };

	(void)state;
	c[0].link = "/";
	c[0].link_len = 1;
	c[0].size = 1;
	expect_missing_root(a, 2);
	expect_missing_root(b, 1);
	expect_missing_root(c, 1);
}

/*
 * Structural rules stated in manifest.h that the validator should also enforce
 * ("every parent precedes its children", "link names the path of an earlier MF_REG (or
 * other non-dir) entry", "symlink: size is the target length"). One test per rule, so a
 * missing check shows up by name.
 */
static void expect_tamper_rejected(void (*fn)(struct mv *v), const char *name)
{
	struct tamper t = { name, fn, "" };

	if (!run_tamper(&t))
		fail_msg("%s: accepted by manifest_parse", name);
}

static void t_parent_missing(struct mv *v) { set_z_path(v, "/zz/zzz"); }
static void t_parent_not_dir(struct mv *v) { set_z_path(v, "/d/x/zz"); }
static void t_hardlink_to_missing(struct mv *v)
{
	v->e[E_H].link_off = v->e[E_L].link_off; /* "target": no such entry */
	v->e[E_H].link_len = 6;
}
static void t_hardlink_to_dir(struct mv *v)
{
	v->e[E_H].link_off = v->e[E_D].path_off; /* "/d" */
	v->e[E_H].link_len = 2;
}
static void t_hardlink_to_later(struct mv *v)
{
	v->e[E_H].link_off = v->e[E_Z].path_off; /* "/zzzzzz" comes after /d/h */
	v->e[E_H].link_len = 7;
}
static void t_hardlink_to_self(struct mv *v)
{
	v->e[E_H].link_off = v->e[E_H].path_off;
	v->e[E_H].link_len = 4;
}
static void t_symlink_size(struct mv *v) { v->e[E_L].size = 7; }
static void t_holes_adjacent(struct mv *v) { v->ho[1].off = 4096; }
static void t_xattrs_unsorted(struct mv *v)
{
	struct mf_xattr t = v->x[0];

	v->x[0] = v->x[1];
	v->x[1] = t;
}
static void t_xattrs_duplicate(struct mv *v)
{
	v->x[1].name_off = v->x[0].name_off;
	v->x[1].name_len = v->x[0].name_len;
}

static void test_reject_missing_parent(void **state)
{
	(void)state;
	expect_tamper_rejected(t_parent_missing, "parent_missing (/zz/zzz without /zz)");
}

static void test_reject_parent_not_dir(void **state)
{
	(void)state;
	expect_tamper_rejected(t_parent_not_dir, "parent_not_dir (/d/x/zz under a fifo)");
}

static void test_reject_bad_hardlink_target(void **state)
{
	bool ok = true;

	(void)state;
	ok &= run_tamper(&(struct tamper){ "hardlink_to_missing", t_hardlink_to_missing, "" });
	ok &= run_tamper(&(struct tamper){ "hardlink_to_dir", t_hardlink_to_dir, "" });
	ok &= run_tamper(&(struct tamper){ "hardlink_to_later", t_hardlink_to_later, "" });
	ok &= run_tamper(&(struct tamper){ "hardlink_to_self", t_hardlink_to_self, "" });
	if (!ok)
		fail_msg("hardlink targets are not validated");
}

static void test_reject_symlink_size_mismatch(void **state)
{
	(void)state;
	expect_tamper_rejected(t_symlink_size, "symlink_size (size 7, target length 6)");
}

/* docs/formats.md: holes are "sorted, disjoint, non-adjacent" */
static void test_reject_adjacent_holes(void **state)
{
	(void)state;
	expect_tamper_rejected(t_holes_adjacent, "holes_adjacent ({0,4096},{4096,4096})");
}

/* docs/formats.md: xattrs are "sorted by name within an entry" */
static void test_reject_unsorted_xattrs(void **state)
{
	bool ok = true;

	(void)state;
	ok &= run_tamper(&(struct tamper){ "xattrs_unsorted", t_xattrs_unsorted, "" });
	ok &= run_tamper(&(struct tamper){ "xattrs_duplicate", t_xattrs_duplicate, "" });
	if (!ok)
		fail_msg("xattr order is not validated");
}

/* docs/formats.md: a symlink target is 1...4095 bytes */
static void test_reject_symlink_target_too_long(void **state)
{
	struct manifest_writer *w = manifest_writer_new(4096);
	struct mf_entry_in e = mk("/", MF_DIR, 0755);
	char *target = malloc(4096);
	char why[WHY_MAX] = "";
	uint8_t *buf;
	size_t len;
	int ret;

	(void)state;
	memset(target, 'a', 4096);
	add_ok(w, &e);
	e = mk("/l", MF_SYMLINK, 0777);
	e.link = target;
	e.link_len = 4096;
	e.size = 4096;
	add_ok(w, &e);
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, NULL, 0), 0);
	ret = parse_copy(buf, len, why, sizeof(why));
	free(buf);
	free(target);
	manifest_writer_free(w);
	if (ret != -EBADMSG)
		fail_msg("4096-byte symlink target: manifest_parse returned %d", ret);
}

/* ------------------------------------------------------------------ 1M entries */

/* Every entry's path found again by lookup, and equal to the original buffer's. */
static void walk_all(const struct manifest *m, const uint8_t *orig, size_t orig_len)
{
	assert_int_equal(m->buf_len, orig_len);
	assert_memory_equal(m->buf, orig, orig_len);
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *e = &m->entries[i];

		assert_ptr_equal(manifest_find(m, manifest_path(m, e)), e);
		for (uint32_t k = 0; k < e->xattr_count; k++)
			assert_true(strlen(manifest_str(m, m->xattrs[e->xattr_first + k].name_off)) ==
				    m->xattrs[e->xattr_first + k].name_len);
	}
}

/*
 * A loaded manifest is private: a writer that rewrites or truncates the file afterwards
 * changes nothing the reader validated (a large manifest used to be mapped MAP_PRIVATE, which
 * shows later writes to the file, and a truncation made its next access SIGBUS).
 */
static void test_load_is_private(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct manifest_writer *w = manifest_writer_new(4096);
	struct manifest *m = NULL;
	char why[WHY_MAX] = "";
	size_t big = 3u << 20, len;
	char *config = malloc(big);
	uint8_t *buf, *evil;
	struct mv v;
	int fd;

	(void)state;
	assert_non_null(w);
	assert_non_null(config);
	memset(config, 'c', big);
	for (size_t i = 0; i < E_COUNT; i++) {
		struct mf_entry_in e = mk(base_paths[i], i < 2 ? MF_DIR : MF_FIFO, 0644);

		add_ok(w, &e);
	}
	assert_int_equal(manifest_writer_set_config(w, config, big), 0);
	free(config);
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, NULL, 0), 0);
	manifest_writer_free(w);
	assert_true(len > (2u << 20)); /* above the size the old loader mapped */
	tmpdir_make(dir);
	path_fmt(path, "%s/big.manifest", dir);
	write_file(path, buf, len);
	assert_int_equal(manifest_load(path, &m, why, sizeof(why)), 0);

	/* rewritten in place: every path out of range, and another checksum */
	evil = malloc(len);
	assert_non_null(evil);
	memcpy(evil, buf, len);
	mv_init(&v, evil, len);
	for (size_t i = 0; i < v.h->entry_count; i++)
		v.e[i].path_off = 1ull << 40;
	memset(evil + len - SHA256_LEN, 0xee, SHA256_LEN);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, evil, len, 0), (ssize_t)len);
	walk_all(m, buf, len);
	assert_memory_equal(m->digest, buf + len - SHA256_LEN, SHA256_LEN);

	/* truncated */
	assert_int_equal(ftruncate(fd, 0), 0);
	close(fd);
	walk_all(m, buf, len);
	manifest_free(m);
	free(evil);
	free(buf);
	rm_rf(dir);
}

static void test_million_entries_load(void **state)
{
	const uint32_t n_total = 1000000, per_dir = 1000;
	char dir[PATH_MAX], path[PATH_MAX], name[32];
	struct manifest_writer *w = manifest_writer_new(4096);
	struct manifest *m = NULL;
	char why[WHY_MAX] = "";
	uint32_t n = 0, n_dirs = 0, n_files = 0;
	double t0, t1, t2, t3;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(w);
	t0 = now_monotonic();
	{
		struct mf_entry_in e = mk("/", MF_DIR, 0755);

		add_ok(w, &e);
		n++;
	}
	/* files in reverse order within each directory, so the writer really has to sort */
	for (uint32_t d = 0; n < n_total; d++) {
		struct mf_entry_in e;

		snprintf(name, sizeof(name), "/d%05u", d);
		e = mk(name, MF_DIR, 0755);
		add_ok(w, &e);
		n++;
		n_dirs++;
		for (uint32_t f = per_dir - 1; f-- > 0 && n < n_total;) {
			struct mf_chunk c = { .len = 4096 };
			uint32_t id = d * per_dir + f;

			snprintf(name, sizeof(name), "/d%05u/f%04u", d, f);
			memcpy(c.digest, &id, sizeof(id));
			e = mk(name, MF_REG, 0644);
			e.chunks = &c;
			e.chunk_count = 1;
			e.size = 4096;
			e.mtime = id;
			add_ok(w, &e);
			n++;
			n_files++;
		}
	}
	assert_int_equal(n, n_total);
	t1 = now_monotonic();
	assert_int_equal(manifest_writer_serialize(w, &buf, &len, NULL, 0), 0);
	manifest_writer_free(w);
	tmpdir_make(dir);
	path_fmt(path, "%s/big.manifest", dir);
	write_file(path, buf, len);
	free(buf);
	t2 = now_monotonic();

	assert_int_equal(manifest_load(path, &m, why, sizeof(why)), 0);
	t3 = now_monotonic();
	print_message("1M-entry manifest (%u dirs, %u files, %.1f MiB): build %.2fs, "
		      "serialize+write %.2fs, manifest_load %.3fs\n",
		      n_dirs, n_files, (double)len / (1 << 20), t1 - t0, t2 - t1, t3 - t2);

	assert_int_equal(m->n_entries, n_total);
	assert_int_equal(m->n_chunks, n_files);
	assert_string_equal(manifest_path(m, &m->entries[0]), "/");
	assert_string_equal(manifest_path(m, &m->entries[1]), "/d00000");
	assert_string_equal(manifest_path(m, &m->entries[2]), "/d00000/f0000");
	{
		const struct mf_entry *e = manifest_find(m, "/d00500/f0123");
		uint32_t id = 500 * per_dir + 123, got;

		assert_non_null(e);
		assert_int_equal(e->type, MF_REG);
		assert_true(e->mtime == id);
		memcpy(&got, m->chunks[e->chunk_first].digest, sizeof(got));
		assert_int_equal(got, id);
		assert_non_null(manifest_find(m, "/d00999"));
		assert_null(manifest_find(m, "/d00500/f0999"));
		assert_null(manifest_find(m, "/d00500/f"));
	}
	manifest_free(m);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_all_fields),
		cmocka_unit_test(test_write_and_load),
		cmocka_unit_test(test_writer_normalizes),
		cmocka_unit_test(test_writer_orders_pieces),
		cmocka_unit_test(test_root_only),
		cmocka_unit_test(test_sorted_depth_first),
		cmocka_unit_test(test_path_cmp),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_duplicates_rejected),
		cmocka_unit_test(test_base_is_valid),
		cmocka_unit_test(test_bad_magic),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_trailing_garbage),
		cmocka_unit_test(test_flipped_bytes),
		cmocka_unit_test(test_tampered_validation),
		cmocka_unit_test(test_string_at_section_end),
		cmocka_unit_test(test_no_entries),
		cmocka_unit_test(test_missing_root),
		cmocka_unit_test(test_reject_missing_parent),
		cmocka_unit_test(test_reject_parent_not_dir),
		cmocka_unit_test(test_reject_bad_hardlink_target),
		cmocka_unit_test(test_reject_symlink_size_mismatch),
		cmocka_unit_test(test_reject_adjacent_holes),
		cmocka_unit_test(test_reject_unsorted_xattrs),
		cmocka_unit_test(test_reject_symlink_target_too_long),
		cmocka_unit_test(test_load_is_private),
		cmocka_unit_test(test_million_entries_load),
	};

	return cmocka_run_group_tests(tests, base_setup, base_teardown);
}
