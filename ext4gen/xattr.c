/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes in ext4's on-disk form (see xattr.h).
 *
 * Both storage areas share one format: a header (the 4-byte magic in the inode body, the
 * 32-byte struct ext4_xattr_header in a block), then entries (16 bytes + name, padded to
 * 4), then 4 zero bytes, free space, and the values (each padded to 4) packed against the
 * end of the area. In the inode body e_value_offs counts from the first entry, in a block
 * from the start of the block.
 *
 * Choices, checked against the kernel (fs/ext4/xattr.c) and e2fsck 1.47 (pass1.c):
 *   - entries are sorted by (e_name_index, e_name_len, e_name) in both areas: the
 *     kernel's lookup in a block stops at the first entry that sorts after the name
 *     it looks for, so block entries must be sorted; the inode body is scanned whole,
 *     any order works there and sorted is one of them.
 *   - e_hash is 0 for in-inode entries (what the kernel and libext2fs write; e2fsck
 *     accepts 0 or the right hash there), and ext4_xattr_hash_entry() with the name's
 *     bytes taken as unsigned for block entries (kernel >= 6.2; e2fsck >= 1.46.6
 *     accepts the unsigned and the old signed-char variant).
 *   - h_hash is the kernel's block rehash over the entries' e_hash (0 if one is 0).
 *   - the attributes are placed in sorted order, each into the inode body if it still
 *     fits there (first fit), else into the block.
 */
#include "xattr.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../common/le.h"
#include "../common/posix_acl.h"
#include "../common/why.h"
#include "csum.h"
#include "ext4_fs.h"

/* e_name_index values (the kernel's EXT4_XATTR_INDEX_*) */
#define XATTR_INDEX_USER 1
#define XATTR_INDEX_POSIX_ACL_ACCESS 2
#define XATTR_INDEX_POSIX_ACL_DEFAULT 3
#define XATTR_INDEX_TRUSTED 4
#define XATTR_INDEX_SECURITY 6
#define XATTR_INDEX_SYSTEM 7
#define XATTR_INDEX_HURD 10

#define XATTR_ROUND(n) (((size_t)(n) + 3) & ~(size_t)3)
#define XATTR_ENTRY_LEN(name_len) XATTR_ROUND(sizeof(struct ext4_xattr_entry) + (name_len))
#define XATTR_BLOCK_HDR_LEN sizeof(struct ext4_xattr_header)
#define XATTR_IBODY_HDR_LEN sizeof(struct ext4_xattr_ibody_header)
#define XATTR_END_LEN 4u      /* the zero word after the last entry */

/* getxattr(2)'s ACL format: common/posix_acl.h */
/* ext4's on-disk ACL format (fs/ext4/acl.h) */
#define EXT4_ACL_VERSION 1
#define EXT4_ACL_HDR_LEN 4u
#define EXT4_ACL_ENTRY_SHORT_LEN 4u   /* {tag, perm} */
#define EXT4_ACL_ENTRY_LEN 8u         /* {tag, perm, id} */


static_assert(sizeof(struct ext4_xattr_entry) == 16, "ext4_xattr_entry is 16 bytes");
static_assert(sizeof(struct ext4_xattr_header) == 32, "ext4_xattr_header is 32 bytes");

/* One attribute, resolved to its on-disk name and value size. */
struct xattr_item {
	const uint8_t *name;      /* the part after the prefix */
	const uint8_t *value;     /* the caller's value (getxattr format for ACLs) */
	uint32_t value_len;       /* the caller's length */
	uint32_t disk_len;        /* e_value_size: differs from value_len for ACLs */
	uint8_t name_len;
	uint8_t index;
	bool is_acl;
	bool in_ibody;
};

struct xattr_prefix {
	const char *prefix;
	uint8_t index;
	bool exact;               /* the whole name, stored with an empty e_name */
};

/* The kernel's handlers (ext4_xattr_handler_map); the exact ACL names before "system.". */
static const struct xattr_prefix xattr_prefixes[] = {
	{ "system.posix_acl_access", XATTR_INDEX_POSIX_ACL_ACCESS, true },
	{ "system.posix_acl_default", XATTR_INDEX_POSIX_ACL_DEFAULT, true },
	{ "user.", XATTR_INDEX_USER, false },
	{ "trusted.", XATTR_INDEX_TRUSTED, false },
	{ "security.", XATTR_INDEX_SECURITY, false },
	{ "system.", XATTR_INDEX_SYSTEM, false },
	{ "gnu.", XATTR_INDEX_HURD, false },
};

static int fail(char *why, size_t why_len, const char *msg, int err)
{
	return why_set(why, why_len, err, "%s", msg);
}

static int xattr_resolve_name(const struct mf_xattr_in *x, struct xattr_item *it,
			      char *why, size_t why_len)
{
	const char *name = x->name;
	size_t len = x->name_len;

	if (!name || !len)
		return fail(why, why_len, "xattr with an empty name", -EINVAL);
	if (memchr(name, '\0', len))
		return fail(why, why_len, "xattr name contains a NUL byte", -EINVAL);

	for (size_t i = 0; i < sizeof(xattr_prefixes) / sizeof(xattr_prefixes[0]); i++) {
		const struct xattr_prefix *p = &xattr_prefixes[i];
		size_t plen = strlen(p->prefix);

		if (len < plen || memcmp(name, p->prefix, plen) != 0)
			continue;
		if (p->exact && len != plen)
			continue;
		if (!p->exact && len == plen)
			return fail(why, why_len, "xattr name is only a namespace prefix", -EINVAL);
		if (len - plen > EXT4_NAME_LEN)
			return fail(why, why_len,
				    "xattr name longer than 255 bytes after its prefix",
				    -EINVAL);
		it->index = p->index;
		it->name = (const uint8_t *)name + plen;
		it->name_len = (uint8_t)(len - plen);
		it->is_acl = p->exact;
		return 0;
	}
	/*
	 * e_name_index 0 (no prefix) would be invisible to the kernel, and e2fsck clears
	 * an xattr block holding such an entry ("invalid name"), so refuse it here.
	 */
	return fail(why, why_len, "xattr name is in no namespace ext4 knows "
		    "(user., trusted., security., system., gnu.)", -EINVAL);
}

/*
 * Check a getxattr(2)-format ACL the way the kernel's posix_acl_from_xattr() and
 * posix_acl_valid() would (ext4's compact format can only be read back from a valid
 * ACL: it relies on exactly three or four short entries), and size its ext4 form.
 */
static int acl_check(const uint8_t *v, uint32_t len, uint32_t *disk_len, char *why, size_t why_len)
{
	uint32_t count, shorts = 0, longs = 0;
	unsigned int state = ACL_USER_OBJ;
	bool needs_mask = false;

	if (!v || len < POSIX_ACL_XATTR_HDR_LEN)
		return fail(why, why_len, "ACL xattr shorter than its 4-byte header", -EINVAL);
	if (le32_get(v) != POSIX_ACL_XATTR_VERSION)
		return fail(why, why_len, "ACL xattr has an unknown version (want 2)", -EINVAL);
	if ((len - POSIX_ACL_XATTR_HDR_LEN) % POSIX_ACL_XATTR_ENTRY_LEN)
		return fail(why, why_len, "ACL xattr size is not 4 + 8 * entries", -EINVAL);
	count = (len - POSIX_ACL_XATTR_HDR_LEN) / POSIX_ACL_XATTR_ENTRY_LEN;
	if (!count)
		return fail(why, why_len, "ACL xattr has no entries", -EINVAL);

	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = v + POSIX_ACL_XATTR_HDR_LEN + i * POSIX_ACL_XATTR_ENTRY_LEN;
		uint16_t tag = le16_get(e), perm = le16_get(e + 2);

		if (perm & ~ACL_PERM_MASK)
			return fail(why, why_len, "ACL entry has permission bits other than rwx",
				    -EINVAL);
		switch (tag) {
		case ACL_USER_OBJ:
			if (state != ACL_USER_OBJ)
				goto bad_order;
			state = ACL_USER;
			shorts++;
			break;
		case ACL_USER:
			if (state != ACL_USER)
				goto bad_order;
			needs_mask = true;
			longs++;
			break;
		case ACL_GROUP_OBJ:
			if (state != ACL_USER)
				goto bad_order;
			state = ACL_GROUP;
			shorts++;
			break;
		case ACL_GROUP:
			if (state != ACL_GROUP)
				goto bad_order;
			needs_mask = true;
			longs++;
			break;
		case ACL_MASK:
			if (state != ACL_GROUP)
				goto bad_order;
			state = ACL_OTHER;
			shorts++;
			break;
		case ACL_OTHER:
			if (state != ACL_OTHER && !(state == ACL_GROUP && !needs_mask))
				goto bad_order;
			state = 0;
			shorts++;
			break;
		default:
			return fail(why, why_len, "ACL entry has an unknown tag", -EINVAL);
		}
	}
	if (state != 0)
		goto bad_order;
	*disk_len = EXT4_ACL_HDR_LEN + shorts * EXT4_ACL_ENTRY_SHORT_LEN +
		    longs * EXT4_ACL_ENTRY_LEN;
	return 0;

bad_order:
	return fail(why, why_len, "ACL entries are not user::, user:*, group::, group:*, mask::, "
		    "other:: (mask required with named entries)", -EINVAL);
}

/* Write the ext4 form of an ACL that acl_check() accepted. */
static void acl_to_disk(const uint8_t *v, uint32_t len, uint8_t *out)
{
	uint32_t count = (len - POSIX_ACL_XATTR_HDR_LEN) / POSIX_ACL_XATTR_ENTRY_LEN;
	uint8_t *p = out;

	le32_put(p, EXT4_ACL_VERSION);
	p += EXT4_ACL_HDR_LEN;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *e = v + POSIX_ACL_XATTR_HDR_LEN + i * POSIX_ACL_XATTR_ENTRY_LEN;
		uint16_t tag = le16_get(e);

		le16_put(p, tag);
		le16_put(p + 2, le16_get(e + 2));
		if (tag == ACL_USER || tag == ACL_GROUP) {
			le32_put(p + 4, le32_get(e + 4));
			p += EXT4_ACL_ENTRY_LEN;
		} else {
			p += EXT4_ACL_ENTRY_SHORT_LEN;
		}
	}
}

static int xattr_item_cmp(const void *a, const void *b)
{
	const struct xattr_item *x = a, *y = b;

	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	return memcmp(x->name, y->name, x->name_len);
}

/* ext4_xattr_hash_entry(): name bytes as unsigned char, then the padded value's words. */
static uint32_t xattr_entry_hash(const uint8_t *name, size_t name_len, const uint8_t *value,
				 size_t padded_len)
{
	uint32_t hash = 0;

	for (size_t i = 0; i < name_len; i++)
		hash = (hash << 5) ^ (hash >> 27) ^ name[i];
	for (size_t i = 0; i < padded_len; i += 4)
		hash = (hash << 16) ^ (hash >> 16) ^ le32_get(value + i);
	return hash;
}

/* Space one attribute takes in an area: its entry and its padded value. */
static size_t xattr_item_space(const struct xattr_item *it)
{
	return XATTR_ENTRY_LEN(it->name_len) + XATTR_ROUND(it->disk_len);
}

/*
 * Write the entries of items[] with in_ibody == ibody into area (size bytes, zeroed),
 * entries from first_off, values from the end down. e_value_offs counts from base_off.
 * Returns the block hash (ext4_xattr_rehash) of what was written.
 */
static uint32_t xattr_render(const struct xattr_item *items, uint32_t n, bool ibody,
			     uint8_t *area, size_t size, size_t first_off, size_t base_off)
{
	size_t eoff = first_off, voff = size;
	uint32_t block_hash = 0;
	bool hash_zero = false;

	for (uint32_t i = 0; i < n; i++) {
		const struct xattr_item *it = &items[i];
		uint8_t *e = area + eoff;
		size_t padded = XATTR_ROUND(it->disk_len);
		uint32_t hash = 0;

		if (it->in_ibody != ibody)
			continue;
		e[offsetof(struct ext4_xattr_entry, e_name_len)] = it->name_len;
		e[offsetof(struct ext4_xattr_entry, e_name_index)] = it->index;
		memcpy(e + offsetof(struct ext4_xattr_entry, e_name), it->name, it->name_len);
		if (it->disk_len) {
			voff -= padded;
			if (it->is_acl)
				acl_to_disk(it->value, it->value_len, area + voff);
			else
				memcpy(area + voff, it->value, it->disk_len);
			le16_put(e + offsetof(struct ext4_xattr_entry, e_value_offs),
				 (uint16_t)(voff - base_off));
		}
		le32_put(e + offsetof(struct ext4_xattr_entry, e_value_size), it->disk_len);
		if (!ibody) {
			hash = xattr_entry_hash(it->name, it->name_len, area + voff,
						it->disk_len ? padded : 0);
			le32_put(e + offsetof(struct ext4_xattr_entry, e_hash), hash);
			if (!hash)
				hash_zero = true;
			block_hash = (block_hash << 16) ^ (block_hash >> 16) ^ hash;
		}
		eoff += XATTR_ENTRY_LEN(it->name_len);
	}
	/* the area was zeroed: the 4-byte end marker at eoff is already there */
	return hash_zero ? 0 : block_hash;
}

static int xattr_prepare(const struct mf_xattr_in *x, uint32_t n, struct xattr_item *items,
			 char *why, size_t why_len)
{
	for (uint32_t i = 0; i < n; i++) {
		struct xattr_item *it = &items[i];
		int ret = xattr_resolve_name(&x[i], it, why, why_len);

		if (ret)
			return ret;
		if (!x[i].value && x[i].value_len)
			return fail(why, why_len, "xattr value is NULL with a non-zero length",
				    -EINVAL);
		it->value = x[i].value;
		it->value_len = x[i].value_len;
		it->disk_len = x[i].value_len;
		if (it->is_acl) {
			ret = acl_check(it->value, it->value_len, &it->disk_len, why, why_len);
			if (ret)
				return ret;
		}
		if (it->disk_len > DISK_BLOCK ||
		    XATTR_BLOCK_HDR_LEN + xattr_item_space(it) + XATTR_END_LEN >
		    DISK_BLOCK)
			return fail(why, why_len, "xattr too large for a 4 KiB xattr block "
				    "(ea_inode is not supported)", -EINVAL);
	}
	if (n > 1)
		qsort(items, n, sizeof(*items), xattr_item_cmp);
	for (uint32_t i = 1; i < n; i++)
		if (!xattr_item_cmp(&items[i - 1], &items[i]))
			return fail(why, why_len, "duplicate xattr name", -EINVAL);
	return 0;
}

/* First fit in sorted order: the inode body if there is room, else the block. */
static int xattr_place(struct xattr_item *items, uint32_t n, bool *has_ibody,
		       bool *has_block, char *why, size_t why_len)
{
	size_t ibody_used = XATTR_IBODY_HDR_LEN + XATTR_END_LEN;
	size_t block_used = XATTR_BLOCK_HDR_LEN + XATTR_END_LEN;

	*has_ibody = *has_block = false;
	for (uint32_t i = 0; i < n; i++) {
		size_t need = xattr_item_space(&items[i]);

		if (ibody_used + need <= XATTR_IBODY_SIZE) {
			ibody_used += need;
			items[i].in_ibody = true;
			*has_ibody = true;
			continue;
		}
		if (block_used + need > DISK_BLOCK)
			return fail(why, why_len,
				    "xattrs do not fit in the inode and one 4 KiB block",
				    -E2BIG);
		block_used += need;
		items[i].in_ibody = false;
		*has_block = true;
	}
	return 0;
}

int xattr_build(const struct mf_xattr_in *x, uint32_t n, struct xattr_layout *out,
		char *why, size_t why_len)
{
	struct xattr_item *items;
	uint32_t hash;
	int ret;

	memset(out, 0, sizeof(*out));
	if (!n)
		return 0;
	if (!x)
		return fail(why, why_len, "xattr list is NULL", -EINVAL);
	/* every entry takes at least 16 bytes of one 4 KiB block plus the inode body */
	if (n > (DISK_BLOCK + XATTR_IBODY_SIZE) / sizeof(struct ext4_xattr_entry))
		return fail(why, why_len, "too many xattrs for the inode and one 4 KiB block",
			    -E2BIG);
	items = calloc(n, sizeof(*items));
	if (!items)
		return fail(why, why_len, "out of memory", -ENOMEM);

	ret = xattr_prepare(x, n, items, why, why_len);
	if (!ret)
		ret = xattr_place(items, n, &out->has_ibody, &out->has_block, why, why_len);
	if (ret)
		goto out;

	if (out->has_ibody) {
		le32_put(out->ibody, EXT4_XATTR_MAGIC);
		xattr_render(items, n, true, out->ibody, XATTR_IBODY_SIZE,
			     XATTR_IBODY_HDR_LEN, XATTR_IBODY_HDR_LEN);
	}
	if (out->has_block) {
		uint8_t *b = out->block;

		le32_put(b + offsetof(struct ext4_xattr_header, h_magic), EXT4_XATTR_MAGIC);
		le32_put(b + offsetof(struct ext4_xattr_header, h_refcount), 1);
		le32_put(b + offsetof(struct ext4_xattr_header, h_blocks), 1);
		hash = xattr_render(items, n, false, b, DISK_BLOCK,
				    XATTR_BLOCK_HDR_LEN, 0);
		le32_put(b + offsetof(struct ext4_xattr_header, h_hash), hash);
	}
out:
	if (ret)
		memset(out, 0, sizeof(*out));
	free(items);
	return ret;
}

void xattr_block_csum(uint8_t *block, uint64_t blocknr, uint32_t csum_seed)
{
	uint8_t *field = block + offsetof(struct ext4_xattr_header, h_checksum);
	uint8_t nr[8];
	uint32_t crc;

	le32_put(nr, (uint32_t)blocknr);
	le32_put(nr + 4, (uint32_t)(blocknr >> 32));
	le32_put(field, 0);
	crc = crc32c(csum_seed, nr, sizeof(nr));
	crc = crc32c(crc, block, DISK_BLOCK);
	le32_put(field, crc);
}
