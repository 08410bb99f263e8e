/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for ext4gen/xattr.c.
 *
 * The kernel vectors below were written by Linux 6.18's ext4 (setfattr/setfacl on a
 * loop-mounted `mke2fs -t ext4 -b 4096 -I 256 -O metadata_csum
 * -U 01234567-89ab-cdef-0123-456789abcdef` image, read back with dd at the offsets
 * debugfs's imap and "File ACL" gave). Where the kernel's placement is the same as
 * ours, xattr_build() must reproduce its bytes exactly, checksum included.
 *
 * Everything else is checked by an independent reader (ref_parse: bounds, overlaps,
 * order, hashes, zero padding, the way e2fsck's pass 1 walks an xattr area), with the
 * hash reimplemented here and the bitwise crc32c of ext4_test.h, rather than taken from the
 * code under test.
 */
#include "../helpers.h"
#include "../ext4_test.h"

#include "../../../common/le.h"
#include "../../../ext4gen/xattr.h"

#define BLK 4096u
#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

/* ------------------------------------------------------------------ references */

static uint32_t ref_hash(const uint8_t *name, size_t name_len, const uint8_t *value,
			 size_t value_len, bool signed_chars)
{
	uint32_t h = 0;

	for (size_t i = 0; i < name_len; i++) {
		uint32_t c = signed_chars ? (uint32_t)(int32_t)(int8_t)name[i] : name[i];

		h = (h << 5) ^ (h >> 27) ^ c;
	}
	for (size_t i = 0; i < (value_len + 3) / 4; i++) {
		uint8_t w[4] = { 0 };

		memcpy(w, value + 4 * i, value_len - 4 * i < 4 ? value_len - 4 * i : 4);
		h = (h << 16) ^ (h >> 16) ^ le32_get(w);
	}
	return h;
}

static uint32_t fs_seed(void)
{
	static const uint8_t uuid[16] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
					  0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };

	return ref_crc32c(~0u, uuid, 16);
}

static uint32_t ref_block_csum(const uint8_t *block, uint64_t blocknr, uint32_t seed)
{
	uint8_t nr[8], copy[BLK];

	for (int i = 0; i < 8; i++)
		nr[i] = (uint8_t)(blocknr >> (8 * i));
	memcpy(copy, block, BLK);
	memset(copy + 16, 0, 4);
	return ref_crc32c(ref_crc32c(seed, nr, 8), copy, BLK);
}

struct ref_x {
	uint8_t index, name_len;
	const uint8_t *name;
	uint32_t size;
	const uint8_t *value;
};

/*
 * Walk one xattr area the way e2fsck and the kernel do and check everything they
 * check, plus what we promise: sorted entries (block; ibody too when sorted is set),
 * e_hash 0 in the inode body, zero padding and no stray bytes. Returns the entries.
 */
static int ref_parse(const uint8_t *area, size_t size, bool block, bool sorted,
		     struct ref_x *out, int max)
{
	uint8_t used[BLK] = { 0 };
	size_t first = block ? 32 : 4, base = block ? 0 : 4, off = first, min_val = size;
	uint32_t bhash = 0;
	bool zero_hash = false;
	int n = 0;

	assert_int_equal(le32_get(area), 0xEA020000u);
	if (block) {
		assert_int_equal(le32_get(area + 4), 1);   /* h_refcount */
		assert_int_equal(le32_get(area + 8), 1);   /* h_blocks */
	}
	memset(used, 1, first);
	while (le32_get(area + off)) {
		const uint8_t *e = area + off;
		struct ref_x *x = &out[n];
		size_t elen = (16 + e[0] + 3) & ~3u;

		assert_true(n < max);
		assert_true(off + elen + 4 <= size);
		x->name_len = e[0];
		x->index = e[1];
		x->name = e + 16;
		x->size = le32_get(e + 8);
		assert_int_equal(le32_get(e + 4), 0);              /* e_value_inum */
		assert_null(memchr(x->name, 0, x->name_len));
		assert_true(x->index != 0);
		for (size_t i = 16 + x->name_len; i < elen; i++)
			assert_int_equal(e[i], 0);
		for (size_t i = 0; i < elen; i++)
			used[off + i] = 1;
		if (x->size) {
			size_t v = base + le16_get(e + 2), pad = (x->size + 3) & ~3u;

			assert_true(v + pad <= size);
			for (size_t i = 0; i < pad; i++) {
				assert_int_equal(used[v + i], 0);      /* no overlap */
				used[v + i] = 1;
			}
			for (size_t i = x->size; i < pad; i++)
				assert_int_equal(area[v + i], 0);
			x->value = area + v;
			if (v < min_val)
				min_val = v;
		} else {
			assert_int_equal(le16_get(e + 2), 0);
			x->value = area + size;
		}
		if (block) {
			uint32_t h = ref_hash(x->name, x->name_len, x->value, x->size, false);

			assert_int_equal(le32_get(e + 12), h);
			zero_hash |= h == 0;
			bhash = (bhash << 16) ^ (bhash >> 16) ^ h;
		} else {
			assert_int_equal(le32_get(e + 12), 0);
		}
		if (sorted && n) {
			const struct ref_x *p = &out[n - 1];
			int c = p->index != x->index ? p->index - x->index :
				p->name_len != x->name_len ? p->name_len - x->name_len :
				memcmp(p->name, x->name, x->name_len);

			assert_true(c < 0);
		}
		n++;
		off += elen;
	}
	assert_true(off + 4 <= min_val);                      /* values after the end marker */
	memset(used + off, 1, 4);
	if (block)
		assert_int_equal(le32_get(area + 12), zero_hash ? 0 : bhash);
	for (size_t i = 0; i < size; i++)
		if (!used[i] && !(block && i >= 16 && i < 20))  /* h_checksum is stamped later */
			assert_int_equal(area[i], 0);
	return n;
}

/* ------------------------------------------------------------------ vectors */

struct span {
	uint16_t off, len;   /* len > 0: len bytes of fill; else hex */
	uint8_t fill;
	const char *hex;     /* spaces ignored */
};

static void spans_build(uint8_t *buf, size_t size, const struct span *s, size_t n)
{
	memset(buf, 0, size);
	for (size_t i = 0; i < n; i++) {
		size_t o = s[i].off;

		if (s[i].len) {
			assert_true(o + s[i].len <= size);
			memset(buf + o, s[i].fill, s[i].len);
			continue;
		}
		for (const char *h = s[i].hex; *h; h++) {
			unsigned int b;

			if (*h == ' ')
				continue;
			assert_int_equal(sscanf(h, "%2x", &b), 1);
			assert_true(o < size);
			buf[o++] = (uint8_t)b;
			h++;
		}
	}
}

#define SPANS(buf, size, ...) do { \
	const struct span s_[] = { __VA_ARGS__ }; \
	spans_build(buf, size, s_, sizeof(s_) / sizeof(s_[0])); \
} while (0)

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = 0;
	unsigned int b;

	for (; *h; h++) {
		if (*h == ' ')
			continue;
		assert_int_equal(sscanf(h, "%2x", &b), 1);
		out[n++] = (uint8_t)b;
		h++;
	}
	return n;
}

static char *filled(int c, size_t n)
{
	char *p = malloc(n ? n : 1);

	assert_non_null(p);
	memset(p, c, n);
	return p;
}

#define X(name, value, len) { name, value, (uint32_t)strlen(name), (uint32_t)(len) }

/* getxattr() values and the kernel's on-disk forms of the ACLs used below */
/* setfacl -m u:1000:rw,g:100:r (on a 0644 file) */
#define ACL_F2_XATTR "02000000 01000600ffffffff 02000600e8030000 04000400ffffffff " \
		     "0800040064000000 10000600ffffffff 20000400ffffffff"
#define ACL_F2_DISK "01000000 01000600 02000600e8030000 04000400 0800040064000000 " \
		    "10000600 20000400"
/* setfacl -m u:1001:r on a 0755 directory */
#define ACL_D_ACCESS_XATTR "02000000 01000700ffffffff 02000400e9030000 04000500ffffffff " \
			   "10000500ffffffff 20000500ffffffff"
#define ACL_D_ACCESS_DISK "01000000 01000700 02000400e9030000 04000500 10000500 20000500"
/* setfacl -d -m u:1001:rwx,g:2000:rx on the same directory */
#define ACL_D_DEFAULT_XATTR "02000000 01000700ffffffff 02000700e9030000 04000500ffffffff " \
			    "08000500d0070000 10000700ffffffff 20000500ffffffff"
#define ACL_D_DEFAULT_DISK "01000000 01000700 02000700e9030000 04000500 08000500d0070000 " \
			   "10000700 20000500"

static void build_ok(const struct mf_xattr_in *x, uint32_t n, struct xattr_layout *l)
{
	char why[WHY_MAX] = "";
	int ret = xattr_build(x, n, l, why, sizeof(why));

	if (ret)
		fail_msg("xattr_build = %d (%s)", ret, why[0] ? why : "no reason");
}

static void expect_err(const struct mf_xattr_in *x, uint32_t n, int want, const char *what)
{
	struct xattr_layout *l = malloc(sizeof(*l));
	char why[WHY_MAX] = "";
	int ret;

	assert_non_null(l);
	memset(l, 0xAA, sizeof(*l));
	ret = xattr_build(x, n, l, why, sizeof(why));
	if (ret != want)
		fail_msg("%s: xattr_build = %d, want %d (%s)", what, ret, want, why[0] ? why : "-");
	if (!why[0])
		fail_msg("%s: no reason given", what);
	assert_false(l->has_ibody);
	assert_false(l->has_block);
	/* no reason wanted: why NULL, why_len 0 */
	assert_int_equal(xattr_build(x, n, l, NULL, 0), want);
	free(l);
}

/* ------------------------------------------------------------------ kernel vectors */

/* setfattr -n user.a -v hello: one in-inode entry, e_hash 0, value at the end */
static void test_kernel_ibody_only(void **state)
{
	const struct mf_xattr_in x[] = { X("user.a", "hello", 5) };
	struct xattr_layout l;
	uint8_t want[XATTR_IBODY_SIZE];

	(void)state;
	SPANS(want, sizeof(want),
	      { 0x00, 0, 0, "000002ea 01015400 00000000 05000000 00000000 61000000" },
	      { 0x58, 0, 0, "68656c6c6f" });
	build_ok(x, 1, &l);
	assert_true(l.has_ibody);
	assert_false(l.has_block);
	assert_memory_equal(l.ibody, want, sizeof(want));
	for (size_t i = 0; i < sizeof(l.block); i++)
		assert_int_equal(l.block[i], 0);
}

/* user.big (2000 bytes) goes to the block, user.small stays in the inode; block 2066 */
static void test_kernel_mixed(void **state)
{
	char *big = filled('B', 2000);
	const struct mf_xattr_in x[] = { X("user.small", "s", 1), X("user.big", big, 2000) };
	struct xattr_layout l;
	uint8_t ib[XATTR_IBODY_SIZE], blk[BLK];

	(void)state;
	SPANS(ib, sizeof(ib),
	      { 0x00, 0, 0, "000002ea 05015800 00000000 01000000 00000000 736d616c 6c000000" },
	      { 0x5c, 0, 0, "73" });
	SPANS(blk, sizeof(blk),
	      { 0x00, 0, 0, "000002ea 01000000 01000000 47850100 70a8e66f" },
	      { 0x20, 0, 0, "03013008 00000000 d0070000 47850100 62696700" },
	      { 0x830, 2000, 'B', NULL });
	build_ok(x, 2, &l);
	assert_true(l.has_ibody);
	assert_true(l.has_block);
	assert_memory_equal(l.ibody, ib, sizeof(ib));
	assert_int_equal(le32_get(l.block + 16), 0);
	xattr_block_csum(l.block, 2066, fs_seed());
	assert_memory_equal(l.block, blk, sizeof(blk));
	free(big);
}

/*
 * A name with bytes >= 0x80 ("user.été"): kernels since 6.2 hash them as unsigned
 * chars, and this block (2069) was written that way; the old signed-char hash differs.
 */
static void test_kernel_non_ascii_hash(void **state)
{
	char *val = filled('C', 1500);
	const struct mf_xattr_in x[] = { X("user.\xc3\xa9t\xc3\xa9", val, 1500) };
	const uint8_t name[] = { 0xc3, 0xa9, 't', 0xc3, 0xa9 };
	struct xattr_layout l;
	uint8_t blk[BLK];

	(void)state;
	SPANS(blk, sizeof(blk),
	      { 0x00, 0, 0, "000002ea 01000000 01000000 264f8a0b e245c8ed" },
	      { 0x20, 0, 0, "0501240a 00000000 dc050000 264f8a0b c3a974c3 a9000000" },
	      { 0xa24, 1500, 'C', NULL });
	assert_int_equal(ref_hash(name, 5, (const uint8_t *)val, 1500, false), 0x0b8a4f26u);
	assert_int_not_equal(ref_hash(name, 5, (const uint8_t *)val, 1500, true), 0x0b8a4f26u);
	build_ok(x, 1, &l);
	assert_false(l.has_ibody);
	assert_true(l.has_block);
	for (size_t i = 0; i < sizeof(l.ibody); i++)
		assert_int_equal(l.ibody[i], 0);
	xattr_block_csum(l.block, 2069, fs_seed());
	assert_memory_equal(l.block, blk, sizeof(blk));
	free(val);
}

/* three user.* attributes: a (40) in the inode, b (3000) and c (10) in block 2070 */
static void test_kernel_two_in_block(void **state)
{
	char *a = filled('a', 40), *b = filled('b', 3000);
	const struct mf_xattr_in x[] = {
		X("user.c", "cccccccccc", 10), X("user.b", b, 3000), X("user.a", a, 40),
	};
	struct xattr_layout l;
	uint8_t ib[XATTR_IBODY_SIZE], blk[BLK];

	(void)state;
	SPANS(ib, sizeof(ib),
	      { 0x00, 0, 0, "000002ea 01013400 00000000 28000000 00000000 61000000" },
	      { 0x38, 40, 'a', NULL });
	SPANS(blk, sizeof(blk),
	      { 0x00, 0, 0, "000002ea 01000000 01000000 63630100 56bace88" },
	      { 0x20, 0, 0, "01014804 00000000 b80b0000 62000000 62000000"
			    "01013c04 00000000 0a000000 63636300 63000000" },
	      { 0x43c, 10, 'c', NULL },
	      { 0x448, 3000, 'b', NULL });
	build_ok(x, 3, &l);
	assert_memory_equal(l.ibody, ib, sizeof(ib));
	xattr_block_csum(l.block, 2070, fs_seed());
	assert_memory_equal(l.block, blk, sizeof(blk));
	free(a);
	free(b);
}

/* user., trusted., security. in one block (2071): sorted by name index */
static void test_kernel_namespaces_in_block(void **state)
{
	char *s = filled('s', 1000), *t = filled('t', 2000), *u = filled('u', 900);
	const struct mf_xattr_in x[] = {
		X("security.s", s, 1000), X("trusted.t", t, 2000), X("user.u", u, 900),
	};
	struct xattr_layout l;
	uint8_t blk[BLK];

	(void)state;
	SPANS(blk, sizeof(blk),
	      { 0x00, 0, 0, "000002ea 01000000 01000000 06757475 5faa5631" },
	      { 0x20, 0, 0, "01017c0c 00000000 84030000 75750075 75000000"
			    "0104ac04 00000000 d0070000 74000000 74000000"
			    "0106c400 00000000 e8030000 73000000 73000000" },
	      { 0xc4, 1000, 's', NULL },
	      { 0x4ac, 2000, 't', NULL },
	      { 0xc7c, 900, 'u', NULL });
	build_ok(x, 3, &l);
	assert_false(l.has_ibody);
	xattr_block_csum(l.block, 2071, fs_seed());
	assert_memory_equal(l.block, blk, sizeof(blk));
	free(s);
	free(t);
	free(u);
}

/*
 * Two kernel blocks holding one ACL each (2065: a file's access ACL with a named user
 * and group; 2068: a directory's access ACL): our checksum and hash reproduce the
 * kernel's, and our conversion of getxattr()'s value gives the kernel's on-disk value.
 */
static void test_kernel_acl_blocks(void **state)
{
	uint8_t blk[BLK], in[128], disk[128];
	struct xattr_layout l;
	size_t n, dn;

	(void)state;
	SPANS(blk, sizeof(blk),
	      { 0x00, 0, 0, "000002ea 01000000 01000000 4700f703 bbae9ba3" },
	      { 0x20, 0, 0, "0002dc0f 00000000 24000000 4700f703" },
	      { 0xfdc, 0, 0, ACL_F2_DISK });
	assert_int_equal(le32_get(blk + 16), ref_block_csum(blk, 2065, fs_seed()));
	xattr_block_csum(blk, 2065, fs_seed());
	assert_int_equal(le32_get(blk + 16), 0xa39baebbu);
	dn = unhex(ACL_F2_DISK, disk);
	assert_int_equal(ref_hash(NULL, 0, disk, dn, false), 0x03f70047u);

	n = unhex(ACL_F2_XATTR, in);
	{
		const struct mf_xattr_in x[] = { { ACL_ACCESS, in, 23, (uint32_t)n } };

		build_ok(x, 1, &l);
	}
	/* alone it fits in the inode: entry at 4, value at the end */
	assert_true(l.has_ibody);
	assert_false(l.has_block);
	assert_int_equal(l.ibody[4], 0);               /* e_name_len */
	assert_int_equal(l.ibody[5], 2);               /* e_name_index */
	assert_int_equal(le32_get(l.ibody + 12), dn);
	assert_int_equal(le16_get(l.ibody + 6) + 4, XATTR_IBODY_SIZE - dn);
	assert_memory_equal(l.ibody + XATTR_IBODY_SIZE - dn, disk, dn);

	dn = unhex(ACL_D_ACCESS_DISK, disk);
	SPANS(blk, sizeof(blk),
	      { 0x00, 0, 0, "000002ea 01000000 01000000 2500fc03 00000000" },
	      { 0x20, 0, 0, "0002e40f 00000000 1c000000 2500fc03" },
	      { 0xfe4, 0, 0, ACL_D_ACCESS_DISK });
	xattr_block_csum(blk, 2068, fs_seed());
	assert_int_equal(le32_get(blk + 16), 0x29908283u);
	assert_int_equal(le32_get(blk + 16), ref_block_csum(blk, 2068, fs_seed()));
	assert_int_equal(ref_hash(NULL, 0, disk, dn, false), 0x03fc0025u);
}

/*
 * The kernel keeps in-inode entries in insertion order (here user.x, trusted.t,
 * security.s) with e_hash 0; the reader accepts that, and ours holds the same set.
 */
static void test_kernel_unsorted_ibody(void **state)
{
	const struct mf_xattr_in x[] = {
		X("user.x", "\x01\x02", 2), X("trusted.t", "tval", 4), X("security.s", "sec", 3),
	};
	uint8_t kern[XATTR_IBODY_SIZE];
	struct ref_x a[8], b[8];
	struct xattr_layout l;
	int na, nb;

	(void)state;
	SPANS(kern, sizeof(kern),
	      { 0x00, 0, 0, "000002ea 01015800 00000000 02000000 00000000 78000000"
			    "01045400 00000000 04000000 00000000 74000000"
			    "01065000 00000000 03000000 00000000 73000000" },
	      { 0x54, 0, 0, "73656300 7476616c 0102" });
	na = ref_parse(kern, sizeof(kern), false, false, a, 8);
	build_ok(x, 3, &l);
	assert_false(l.has_block);
	nb = ref_parse(l.ibody, sizeof(l.ibody), false, true, b, 8);
	assert_int_equal(na, 3);
	assert_int_equal(nb, 3);
	/* ours is sorted by index: user (1), trusted (4), security (6): same order here */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(a[i].index, b[i].index);
		assert_int_equal(a[i].size, b[i].size);
		assert_memory_equal(a[i].name, b[i].name, a[i].name_len);
		assert_memory_equal(a[i].value, b[i].value, a[i].size);
	}
}

/* ------------------------------------------------------------------ layout */

static void test_empty(void **state)
{
	struct xattr_layout l;

	(void)state;
	memset(&l, 0x55, sizeof(l));
	build_ok(NULL, 0, &l);
	assert_false(l.has_ibody);
	assert_false(l.has_block);
	for (size_t i = 0; i < sizeof(l.ibody); i++)
		assert_int_equal(l.ibody[i], 0);
	for (size_t i = 0; i < sizeof(l.block); i++)
		assert_int_equal(l.block[i], 0);
}

/* zero-length values: e_value_size 0, e_value_offs 0, nothing in the value area */
static void test_zero_length(void **state)
{
	const struct mf_xattr_in x[] = { X("user.empty", "", 0), { "user.e2", NULL, 7, 0 } };
	struct xattr_layout l;
	uint8_t want[XATTR_IBODY_SIZE];

	(void)state;
	SPANS(want, sizeof(want),
	      { 0x00, 0, 0, "000002ea 02010000 00000000 00000000 00000000 65320000"
			    "05010000 00000000 00000000 00000000 656d7074 79000000" });
	build_ok(x, 2, &l);
	assert_false(l.has_block);
	assert_memory_equal(l.ibody, want, sizeof(want));

	/* in a block the hash covers the name only */
	{
		char *big = filled('z', 3000), *a = filled('a', 60);
		const struct mf_xattr_in y[] = { X("user.big", big, 3000), X("trusted.nil", "", 0),
						 X("user.a", a, 60) };
		struct ref_x r[4];

		build_ok(y, 3, &l);
		assert_true(l.has_ibody && l.has_block);
		assert_int_equal(ref_parse(l.block, BLK, true, true, r, 4), 2);
		assert_int_equal(r[1].index, 4);
		assert_int_equal(r[1].size, 0);
		assert_int_equal(le32_get(l.block + 32 + 20 + 12),
				 ref_hash((const uint8_t *)"nil", 3, NULL, 0, false));
		free(big);
		free(a);
	}
}

/* every name index the kernel knows */
static void test_name_indexes(void **state)
{
	static const struct { const char *full; uint8_t index; const char *suffix; } t[] = {
		{ "user.u", 1, "u" },
		{ "trusted.overlay.opaque", 4, "overlay.opaque" },
		{ "security.capability", 6, "capability" },
		{ "system.data", 7, "data" },
		{ "system.posix_acl_accessX", 7, "posix_acl_accessX" },
		{ "gnu.translator", 10, "translator" },
	};
	struct xattr_layout l;
	struct ref_x r[2];

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		const struct mf_xattr_in x[] = { X(t[i].full, "v", 1) };

		build_ok(x, 1, &l);
		assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 2), 1);
		assert_int_equal(r[0].index, t[i].index);
		assert_int_equal(r[0].name_len, strlen(t[i].suffix));
		assert_memory_equal(r[0].name, t[i].suffix, r[0].name_len);
	}
}

/* sorted by (index, name length, name bytes), whatever the input order */
static void test_block_sorted(void **state)
{
	static const char *names[] = {
		"user.bb", "security.a", "user.a", "trusted.zz", "user.ab", "user.\xff",
		"trusted.a", "user.b", "user.aaa",
	};
	static const struct { uint8_t index; const char *name; } want[] = {
		{ 1, "a" }, { 1, "b" }, { 1, "\xff" }, { 1, "ab" }, { 1, "bb" }, { 1, "aaa" },
		{ 4, "a" }, { 4, "zz" }, { 6, "a" },
	};
	struct mf_xattr_in x[9];
	char *v = filled('v', 300);
	struct xattr_layout l;
	struct ref_x r[9];

	(void)state;
	for (int i = 0; i < 9; i++)
		x[i] = (struct mf_xattr_in){ names[i], v, (uint32_t)strlen(names[i]), 300 };
	build_ok(x, 9, &l);
	assert_false(l.has_ibody);       /* 300-byte values never fit in the inode */
	assert_int_equal(ref_parse(l.block, BLK, true, true, r, 9), 9);
	for (int i = 0; i < 9; i++) {
		assert_int_equal(r[i].index, want[i].index);
		assert_int_equal(r[i].name_len, strlen(want[i].name));
		assert_memory_equal(r[i].name, want[i].name, r[i].name_len);
	}
	free(v);
}

/* an entry whose hash is 0 makes h_hash 0 ("never share"), as ext4_xattr_rehash does */
static void test_zero_entry_hash(void **state)
{
	char *fill = filled('f', 68), *big = filled('b', 1000);
	/* "a" = 0x61, then the word 0x00610000 cancels it: hash 0 */
	const struct mf_xattr_in x[] = {
		X("user.fill", fill, 68 - 4), X("trusted.a", "\0\0a\0", 4),
		X("trusted.big", big, 1000),
	};
	struct xattr_layout l;
	struct ref_x r[3];

	(void)state;
	assert_int_equal(ref_hash((const uint8_t *)"a", 1, (const uint8_t *)"\0\0a\0", 4, false),
			 0);
	build_ok(x, 3, &l);
	assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 3), 1);
	assert_int_equal(ref_parse(l.block, BLK, true, true, r, 3), 2);
	assert_int_equal(le32_get(l.block + 32 + 12), 0);
	assert_int_equal(le32_get(l.block + 12), 0);
	free(fill);
	free(big);
}

/* first fit in sorted order: a later small attribute still goes into the inode */
static void test_first_fit(void **state)
{
	char *big = filled('b', 100), *fill = filled('f', 60);
	const struct mf_xattr_in x[] = {
		X("user.a", big, 100),      /* too big for the inode */
		X("user.b", fill, 60),      /* 20 + 60: inode now 88 of 96 */
		X("user.c", "c", 1),        /* 20 + 4 more: no longer fits */
		X("trusted.d", "", 0),      /* 20: no room either */
	};
	struct xattr_layout l;
	struct ref_x r[4];

	(void)state;
	build_ok(x, 4, &l);
	assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 4), 1);
	assert_int_equal(r[0].name[0], 'b');
	assert_int_equal(ref_parse(l.block, BLK, true, true, r, 4), 3);
	assert_int_equal(r[0].name[0], 'a');
	assert_int_equal(r[1].name[0], 'c');
	assert_int_equal(r[2].name[0], 'd');
	free(big);
	free(fill);
}

/* the inode body and the block both filled to the last byte */
static void test_exact_fit(void **state)
{
	char *v = filled('x', 4040);
	struct xattr_layout l;
	struct ref_x r[2];

	(void)state;
	{
		/* 4 magic + 20 entry + 68 value + 4 end = 96 */
		const struct mf_xattr_in x[] = { X("user.v", v, 68) };

		build_ok(x, 1, &l);
		assert_true(l.has_ibody);
		assert_false(l.has_block);
		assert_int_equal(le16_get(l.ibody + 6), 4 + 20 + 4 - 4); /* value right after end */
		ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 2);
	}
	{
		const struct mf_xattr_in x[] = { X("user.v", v, 69) };

		build_ok(x, 1, &l);
		assert_false(l.has_ibody);
		assert_true(l.has_block);
	}
	{
		/* 32 header + 20 entry + 4040 value + 4 end = 4096 */
		const struct mf_xattr_in x[] = { X("user.v", v, 4040) };

		build_ok(x, 1, &l);
		assert_int_equal(le16_get(l.block + 32 + 2), 56);
		ref_parse(l.block, BLK, true, true, r, 2);
	}
	{
		const struct mf_xattr_in x[] = { X("user.v", v, 4037) };

		build_ok(x, 1, &l);
		ref_parse(l.block, BLK, true, true, r, 2);
	}
	free(v);
}

/* a 255-byte name after the prefix is the longest allowed */
static void test_long_name(void **state)
{
	char name[5 + 256 + 1];
	struct xattr_layout l;
	struct ref_x r[1];

	(void)state;
	memcpy(name, "user.", 5);
	memset(name + 5, 'n', 256);
	name[5 + 256] = 0;
	{
		const struct mf_xattr_in x[] = { { name, "v", 5 + 255, 1 } };

		build_ok(x, 1, &l);
		assert_false(l.has_ibody);
		assert_int_equal(ref_parse(l.block, BLK, true, true, r, 1), 1);
		assert_int_equal(r[0].name_len, 255);
	}
	{
		const struct mf_xattr_in x[] = { { name, "v", 5 + 256, 1 } };

		expect_err(x, 1, -EINVAL, "256-byte name");
	}
}

/* ------------------------------------------------------------------ ACLs */

static void test_acl_access_and_default(void **state)
{
	uint8_t acc[128], def[128], acc_disk[128], def_disk[128];
	size_t an = unhex(ACL_D_ACCESS_XATTR, acc), dn = unhex(ACL_D_DEFAULT_XATTR, def);
	size_t adn = unhex(ACL_D_ACCESS_DISK, acc_disk), ddn = unhex(ACL_D_DEFAULT_DISK, def_disk);
	const struct mf_xattr_in x[] = {
		{ ACL_DEFAULT, def, 24, (uint32_t)dn }, { ACL_ACCESS, acc, 23, (uint32_t)an },
	};
	struct xattr_layout l;
	struct ref_x r[2];

	(void)state;
	assert_int_equal(adn, 28);
	assert_int_equal(ddn, 36);
	build_ok(x, 2, &l);
	/* access (16 + 28) fits the inode; default (16 + 36) then does not */
	assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 2), 1);
	assert_int_equal(r[0].index, 2);
	assert_int_equal(r[0].name_len, 0);
	assert_int_equal(r[0].size, adn);
	assert_memory_equal(r[0].value, acc_disk, adn);
	assert_int_equal(ref_parse(l.block, BLK, true, true, r, 2), 1);
	assert_int_equal(r[0].index, 3);
	assert_int_equal(r[0].name_len, 0);
	assert_int_equal(r[0].size, ddn);
	assert_memory_equal(r[0].value, def_disk, ddn);
}

/* the minimal ACL (user::, group::, other::) and one with only a mask */
static void test_acl_short_forms(void **state)
{
	uint8_t in[64], want[64];
	size_t n = unhex("02000000 01000600ffffffff 04000400ffffffff 20000000ffffffff", in);
	size_t wn = unhex("01000000 01000600 04000400 20000000", want);
	struct xattr_layout l;
	struct ref_x r[1];

	(void)state;
	{
		const struct mf_xattr_in x[] = { { ACL_ACCESS, in, 23, (uint32_t)n } };

		build_ok(x, 1, &l);
		assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 1), 1);
		assert_int_equal(r[0].size, wn);
		assert_memory_equal(r[0].value, want, wn);
	}
	n = unhex("02000000 01000700ffffffff 04000500ffffffff 10000100ffffffff "
		  "20000000ffffffff", in);
	wn = unhex("01000000 01000700 04000500 10000100 20000000", want);
	{
		const struct mf_xattr_in x[] = { { ACL_DEFAULT, in, 24, (uint32_t)n } };

		build_ok(x, 1, &l);
		assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 1), 1);
		assert_int_equal(r[0].index, 3);
		assert_memory_equal(r[0].value, want, wn);
	}
}

static void expect_acl_err(const char *hex, const char *what)
{
	uint8_t in[128];
	size_t n = unhex(hex, in);
	const struct mf_xattr_in x[] = { { ACL_ACCESS, in, 23, (uint32_t)n } };

	expect_err(x, 1, -EINVAL, what);
}

static void test_acl_errors(void **state)
{
	(void)state;
	expect_acl_err("", "empty");
	expect_acl_err("020000", "short header");
	expect_acl_err("02000000", "no entries");
	expect_acl_err("01000000 01000600ffffffff 04000400ffffffff 20000400ffffffff",
		       "version 1");
	expect_acl_err("02000000 01000600ffffffff 04000400ffffffff 20000400ffff",
		       "size not 4 + 8n");
	expect_acl_err("02000000 01000600ffffffff 04000400ffffffff 40000400ffffffff",
		       "unknown tag");
	expect_acl_err("02000000 01000600ffffffff 04000400ffffffff 20000800ffffffff",
		       "perm bit 8");
	expect_acl_err("02000000 04000400ffffffff 01000600ffffffff 20000400ffffffff",
		       "group:: before user::");
	expect_acl_err("02000000 01000600ffffffff 02000600e8030000 04000400ffffffff "
		       "20000400ffffffff", "named user without mask");
	expect_acl_err("02000000 01000600ffffffff 04000400ffffffff", "no other::");
	expect_acl_err("02000000 01000600ffffffff 01000600ffffffff 04000400ffffffff "
		       "20000400ffffffff", "two user::");
	expect_acl_err("02000000 01000600ffffffff 04000400ffffffff 20000400ffffffff "
		       "20000400ffffffff", "two other::");
	expect_acl_err("02000000 01000600ffffffff 04000400ffffffff 02000600e8030000 "
		       "10000600ffffffff 20000400ffffffff", "user: after group::");
}

/* ------------------------------------------------------------------ errors */

static void test_errors(void **state)
{
	char *big = filled('v', 4100);

	(void)state;
	{
		const struct mf_xattr_in x[] = { X("foo", "v", 1) };

		expect_err(x, 1, -EINVAL, "no namespace");
	}
	{
		const struct mf_xattr_in x[] = { X("USER.a", "v", 1) };

		expect_err(x, 1, -EINVAL, "upper-case namespace");
	}
	{
		const struct mf_xattr_in x[] = { X("user.", "v", 1) };

		expect_err(x, 1, -EINVAL, "prefix only");
	}
	{
		const struct mf_xattr_in x[] = { { "", "v", 0, 1 } };

		expect_err(x, 1, -EINVAL, "empty name");
	}
	{
		const struct mf_xattr_in x[] = { { "user.a\0b", "v", 8, 1 } };

		expect_err(x, 1, -EINVAL, "NUL in name");
	}
	{
		const struct mf_xattr_in x[] = { { "user.a", NULL, 6, 3 } };

		expect_err(x, 1, -EINVAL, "NULL value");
	}
	{
		const struct mf_xattr_in x[] = { X("user.a", "1", 1), X("user.b", "", 0),
						 X("user.a", "2", 1) };

		expect_err(x, 3, -EINVAL, "duplicate");
	}
	{
		const struct mf_xattr_in x[] = { X("user.v", big, 4041) };

		expect_err(x, 1, -EINVAL, "value one byte over a block");
	}
	{
		const struct mf_xattr_in x[] = { X("user.v", big, 4100) };

		expect_err(x, 1, -EINVAL, "value over 4096");
	}
	{
		/* each fits alone, together they need more than one block */
		const struct mf_xattr_in x[] = { X("user.a", big, 2100), X("user.b", big, 2100) };

		expect_err(x, 2, -E2BIG, "two halves");
	}
	{
		/*
		 * many 20-byte entries: 4 fit in the inode (8 + 4 * 20 = 88 of 96), 203 in
		 * the block (36 + 203 * 20 = 4096), so 207 fit and 208 do not
		 */
		static struct mf_xattr_in x[300];
		static char names[300][12];
		struct xattr_layout l;
		struct ref_x r[210];

		for (int i = 0; i < 300; i++) {
			snprintf(names[i], sizeof(names[i]), "user.%03d", i);
			x[i] = (struct mf_xattr_in){ names[i], "", 8, 0 };
		}
		build_ok(x, 207, &l);
		assert_int_equal(ref_parse(l.ibody, XATTR_IBODY_SIZE, false, true, r, 210), 4);
		assert_int_equal(ref_parse(l.block, BLK, true, true, r, 210), 203);
		expect_err(x, 208, -E2BIG, "208 entries");
		expect_err(x, 300, -E2BIG, "300 entries");
	}
	free(big);
}

/* ------------------------------------------------------------------ random */

/* prefix + e_name, from the index (the plain namespaces only) */
static size_t ref_full_name(const struct ref_x *r, char *out)
{
	const char *p = r->index == 1 ? "user." : r->index == 4 ? "trusted." :
			r->index == 6 ? "security." : r->index == 7 ? "system." :
			r->index == 10 ? "gnu." : NULL;
	size_t pl;

	assert_non_null(p);
	pl = strlen(p);
	memcpy(out, p, pl);
	memcpy(out + pl, r->name, r->name_len);
	return pl + r->name_len;
}

struct rx {
	char name[64];
	uint8_t value[600];
	uint32_t name_len, value_len;
};

/* Random sets that fit: parse back, same set; any input order gives the same bytes. */
static void test_random_roundtrip(void **state)
{
	static const char *ns[] = { "user.", "trusted.", "security.", "system.", "gnu." };
	uint64_t seed = 0x5eed;
	struct rx *rx = calloc(16, sizeof(*rx));
	struct xattr_layout *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	int built = 0, with_block = 0, with_both = 0;

	(void)state;
	assert_non_null(rx);
	assert_non_null(a);
	assert_non_null(b);
	for (int iter = 0; iter < 3000; iter++) {
		struct mf_xattr_in x[16], y[16];
		struct ref_x r[32];
		uint32_t n = 1 + prng_next(&seed) % 16, found = 0;
		char why[WHY_MAX] = "";
		int ret, ni = 0, nb = 0;

		for (uint32_t i = 0; i < n; i++) {
			uint32_t k = prng_next(&seed) % 5, len = 1 + prng_next(&seed) % 30;
			size_t pl = strlen(ns[k]);

			memcpy(rx[i].name, ns[k], pl);
			prng_fill(&seed, rx[i].name + pl, len);
			for (uint32_t j = 0; j < len; j++)
				if (!rx[i].name[pl + j])
					rx[i].name[pl + j] = 'z';
			/* a unique tail so the set has no duplicates */
			rx[i].name[pl + len] = (char)('A' + i);
			rx[i].name_len = (uint32_t)(pl + len + 1);
			rx[i].value_len = (uint32_t)(prng_next(&seed) % 4 ? prng_next(&seed) % 40 :
						     prng_next(&seed) % 600);
			prng_fill(&seed, rx[i].value, rx[i].value_len);
			x[i] = (struct mf_xattr_in){ rx[i].name, rx[i].value, rx[i].name_len,
						     rx[i].value_len };
		}
		ret = xattr_build(x, n, a, why, sizeof(why));
		if (ret == -E2BIG)
			continue;
		if (ret)
			fail_msg("iteration %d: %d (%s)", iter, ret, why);
		built++;
		with_block += a->has_block;
		with_both += a->has_block && a->has_ibody;
		if (a->has_ibody)
			ni = ref_parse(a->ibody, XATTR_IBODY_SIZE, false, true, r, 32);
		else
			for (size_t i = 0; i < XATTR_IBODY_SIZE; i++)
				assert_int_equal(a->ibody[i], 0);
		if (a->has_block)
			nb = ref_parse(a->block, BLK, true, true, r + ni, 32 - ni);
		assert_int_equal(ni + nb, n);
		/* every input is there, once, with its value */
		for (int j = 0; j < ni + nb; j++) {
			char full[320];
			size_t fl = ref_full_name(&r[j], full);

			for (uint32_t i = 0; i < n; i++) {
				if (fl != rx[i].name_len || memcmp(full, rx[i].name, fl))
					continue;
				assert_int_equal(r[j].size, rx[i].value_len);
				assert_memory_equal(r[j].value, rx[i].value, rx[i].value_len);
				found++;
			}
		}
		assert_int_equal(found, n);
		/* deterministic whatever the order */
		for (uint32_t i = 0; i < n; i++)
			y[i] = x[n - 1 - i];
		build_ok(y, n, b);
		assert_memory_equal(a, b, sizeof(*a));
	}
	assert_true(built > 1000);
	assert_true(with_block > 100);
	assert_true(with_both > 100);
	free(rx);
	free(a);
	free(b);
}

static void test_block_csum(void **state)
{
	uint64_t seed = 42;
	uint8_t *blk = malloc(BLK);
	static const uint64_t nrs[] = { 0, 1, 2066, 0xffffffffull, 0x123456789abull };

	(void)state;
	assert_non_null(blk);
	for (size_t i = 0; i < sizeof(nrs) / sizeof(nrs[0]); i++) {
		uint32_t s = (uint32_t)prng_next(&seed);

		prng_fill(&seed, blk, BLK);
		xattr_block_csum(blk, nrs[i], s);
		assert_int_equal(le32_get(blk + 16), ref_block_csum(blk, nrs[i], s));
		/* stamping again is idempotent: the old value does not leak in */
		xattr_block_csum(blk, nrs[i], s);
		assert_int_equal(le32_get(blk + 16), ref_block_csum(blk, nrs[i], s));
	}
	free(blk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_ibody_only),
		cmocka_unit_test(test_kernel_mixed),
		cmocka_unit_test(test_kernel_non_ascii_hash),
		cmocka_unit_test(test_kernel_two_in_block),
		cmocka_unit_test(test_kernel_namespaces_in_block),
		cmocka_unit_test(test_kernel_acl_blocks),
		cmocka_unit_test(test_kernel_unsorted_ibody),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_zero_length),
		cmocka_unit_test(test_name_indexes),
		cmocka_unit_test(test_block_sorted),
		cmocka_unit_test(test_zero_entry_hash),
		cmocka_unit_test(test_first_fit),
		cmocka_unit_test(test_exact_fit),
		cmocka_unit_test(test_long_name),
		cmocka_unit_test(test_acl_access_and_default),
		cmocka_unit_test(test_acl_short_forms),
		cmocka_unit_test(test_acl_errors),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_random_roundtrip),
		cmocka_unit_test(test_block_csum),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
