/* SPDX-License-Identifier: MIT */
/*
 * POSIX ACLs of tar members. GNU tar --acls and bsdtar write them as text (pax
 * SCHILY.acl.access and SCHILY.acl.default), which libarchive parses into entries and,
 * for the access ACL, into the mode: it sets the mode's group bits from group::. The
 * kernel, and tar -x with it, keep the mask there (the mode's group bits are the mask
 * entry when the ACL has one), so the mode is taken from the access ACL here as the kernel
 * would leave it after setting it. Text ACLs become the system.posix_acl_access and
 * system.posix_acl_default xattrs the kernel would store, unless the member carries those
 * xattrs itself (GNU tar --xattrs writes them too, with numeric ids): then they are kept
 * as they are.
 */
#include "tar_acl.h"

#include <errno.h>
#include <pwd.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/le.h"
#include "../../common/posix_acl.h"

#define ACL_MAX_ENTRIES 512

struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

static uint16_t kernel_tag(int tag)
{
	switch (tag) {
	case ARCHIVE_ENTRY_ACL_USER_OBJ: return ACL_USER_OBJ;
	case ARCHIVE_ENTRY_ACL_USER: return ACL_USER;
	case ARCHIVE_ENTRY_ACL_GROUP_OBJ: return ACL_GROUP_OBJ;
	case ARCHIVE_ENTRY_ACL_GROUP: return ACL_GROUP;
	case ARCHIVE_ENTRY_ACL_MASK: return ACL_MASK;
	case ARCHIVE_ENTRY_ACL_OTHER: return ACL_OTHER;
	}
	return 0;
}

/*
 * A user or group name (GNU tar writes names where the archiving machine had them) to its
 * id in this machine's /etc/passwd or /etc/group, as tar -x resolves it. 0 or -ENOENT.
 */
static int name_id(const char *name, bool group, uint32_t *id)
{
	FILE *f = fopen(group ? "/etc/group" : "/etc/passwd", "re");
	char buf[4096];
	int ret = -ENOENT;

	if (!f)
		return -ENOENT;
	for (;;) {
		struct passwd pw, *pp;
		struct group gr, *gp;

		if (group ? fgetgrent_r(f, &gr, buf, sizeof(buf), &gp)
			  : fgetpwent_r(f, &pw, buf, sizeof(buf), &pp))
			break;
		if (!strcmp(group ? gr.gr_name : pw.pw_name, name)) {
			*id = group ? gr.gr_gid : pw.pw_uid;
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/*
 * The entries of one ACL type (*n = 0: none). False when the ACL cannot be stored as it
 * is (*warn says why); its entries are still there for the mode.
 */
static bool acl_collect(struct archive_entry *e, int type, struct acl_ent *out, uint32_t *n,
			const char **warn)
{
	int t, perm, tag, id;
	const char *name;
	bool ok = true;

	*n = 0;
	if (sym_archive_entry_acl_reset(e, type) <= 0)
		return true;
	while (sym_archive_entry_acl_next(e, type, &t, &perm, &tag, &id, &name) == ARCHIVE_OK) {
		struct acl_ent a = { kernel_tag(tag), (uint16_t)(perm & 7), ACL_UNDEFINED_ID };

		if (!a.tag)
			continue; /* not a POSIX.1e tag */
		if (a.tag == ACL_USER || a.tag == ACL_GROUP) {
			if (id >= 0) {
				a.id = (uint32_t)id;
			} else if (!name || name_id(name, a.tag == ACL_GROUP, &a.id)) {
				*warn = "its ACL names a user or group unknown to this machine's "
					"/etc/passwd or /etc/group: ACL left out";
				ok = false;
			}
		}
		if (*n == ACL_MAX_ENTRIES) {
			*warn = "its ACL has more than 512 entries: ACL left out";
			return false;
		}
		out[(*n)++] = a;
	}
	return ok;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct acl_ent *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * In the kernel's order (tags, then ids), with a mask where named entries need one (as
 * setfacl computes it: the union of group:: and the named entries). False when the ACL
 * lacks user::, group:: or other::.
 */
static bool acl_complete(struct acl_ent *a, uint32_t *n)
{
	uint16_t seen = 0, mask = 0;

	for (uint32_t i = 0; i < *n; i++) {
		seen |= a[i].tag;
		if (a[i].tag & (ACL_USER | ACL_GROUP_OBJ | ACL_GROUP))
			mask |= a[i].perm;
	}
	if ((seen & (ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_OTHER)) !=
	    (ACL_USER_OBJ | ACL_GROUP_OBJ | ACL_OTHER))
		return false;
	if ((seen & (ACL_USER | ACL_GROUP)) && !(seen & ACL_MASK))
		a[(*n)++] = (struct acl_ent){ ACL_MASK, mask, ACL_UNDEFINED_ID };
	qsort(a, *n, sizeof(*a), ent_cmp);
	return true;
}

/* The permission bits an access ACL gives: user::, mask:: (else group::), other::. */
static void acl_mode(const struct acl_ent *a, uint32_t n, uint32_t *mode)
{
	int u = -1, g = -1, m = -1, o = -1;

	for (uint32_t i = 0; i < n; i++) {
		switch (a[i].tag) {
		case ACL_USER_OBJ: u = a[i].perm; break;
		case ACL_GROUP_OBJ: g = a[i].perm; break;
		case ACL_MASK: m = a[i].perm; break;
		case ACL_OTHER: o = a[i].perm; break;
		}
	}
	if (u < 0 || g < 0 || o < 0)
		return;
	*mode = (*mode & ~0777u) | (uint32_t)u << 6 | (uint32_t)(m >= 0 ? m : g) << 3 | (uint32_t)o;
}

static const struct mf_xattr_in *xattr_find(const struct tree_inode *ino, const char *name)
{
	for (uint32_t i = 0; i < ino->xattr_count; i++)
		if (ino->xattrs[i].name_len == strlen(name) &&
		    !memcmp(ino->xattrs[i].name, name, ino->xattrs[i].name_len))
			return &ino->xattrs[i];
	return NULL;
}

/* An ACL xattr's entries; *n = 0 when it is malformed (mkfs says what is wrong). */
static void xattr_entries(const struct mf_xattr_in *x, struct acl_ent *a, uint32_t *n)
{
	const uint8_t *v = x->value;

	*n = 0;
	if (x->value_len < POSIX_ACL_XATTR_HDR_LEN ||
	    (x->value_len - POSIX_ACL_XATTR_HDR_LEN) % POSIX_ACL_XATTR_ENTRY_LEN ||
	    le32_get(v) != POSIX_ACL_XATTR_VERSION ||
	    (x->value_len - POSIX_ACL_XATTR_HDR_LEN) / POSIX_ACL_XATTR_ENTRY_LEN > ACL_MAX_ENTRIES)
		return;
	for (uint32_t off = 4; off < x->value_len; off += 8)
		a[(*n)++] = (struct acl_ent){ le16_get(v + off), le16_get(v + off + 2) & 7,
					      le32_get(v + off + 4) };
}

/*
 * One ACL type of e as its xattr on ino, unless ino has that xattr already. The access
 * ACL, stored or not, gives the permission bits.
 */
static int acl_add(struct tree *t, struct archive_entry *e, int type, const char *xname,
		   struct tree_inode *ino, const char **warn)
{
	struct acl_ent a[ACL_MAX_ENTRIES + 1];
	const struct mf_xattr_in *have = xattr_find(ino, xname);
	bool access = type == ARCHIVE_ENTRY_ACL_TYPE_ACCESS, ok;
	struct mf_xattr_in *x;
	uint8_t *v;
	uint32_t n;

	if (have) {
		if (access) {
			xattr_entries(have, a, &n);
			acl_mode(a, n, &ino->mode);
		}
		return 0;
	}
	ok = acl_collect(e, type, a, &n, warn);
	if (access)
		acl_mode(a, n, &ino->mode);
	if (!n || !ok)
		return 0;
	if (!acl_complete(a, &n)) {
		*warn = "its ACL lacks user::, group:: or other::: ACL left out";
		return 0;
	}
	v = tree_alloc(t, 4 + 8 * (size_t)n);
	x = &ino->xattrs[ino->xattr_count];
	x->name = tree_strdup(t, xname, strlen(xname));
	if (!v || !x->name)
		return -ENOMEM;
	le32_put(v, POSIX_ACL_XATTR_VERSION);
	for (uint32_t i = 0; i < n; i++) {
		le16_put(v + 4 + 8 * i, a[i].tag);
		le16_put(v + 6 + 8 * i, a[i].perm);
		le32_put(v + 8 + 8 * i, a[i].id);
	}
	x->value = v;
	x->name_len = (uint32_t)strlen(xname);
	x->value_len = 4 + 8 * n;
	ino->xattr_count++;
	return 0;
}

int tar_acl_count(struct archive_entry *e)
{
	return (sym_archive_entry_acl_reset(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS) > 0) +
	       (sym_archive_entry_acl_reset(e, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT) > 0);
}

int tar_acl_apply(struct tree *t, struct archive_entry *e, struct tree_inode *ino,
		  const char **warn)
{
	int ret = acl_add(t, e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS, POSIX_ACL_XATTR_ACCESS, ino, warn);

	return ret ? ret : acl_add(t, e, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT, POSIX_ACL_XATTR_DEFAULT,
				   ino, warn);
}
