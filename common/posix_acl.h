/* SPDX-License-Identifier: MIT */
/*
 * The POSIX ACL as getxattr(2) gives it in system.posix_acl_access / _default (the kernel's
 * struct posix_acl_xattr_header and _entry, little-endian), shared by import (which makes
 * them from tar ACLs) and ext4 synthesis (which turns them into ext4's on-disk form).
 */
#ifndef LZ_COMMON_POSIX_ACL_H
#define LZ_COMMON_POSIX_ACL_H

#define POSIX_ACL_XATTR_ACCESS "system.posix_acl_access"
#define POSIX_ACL_XATTR_DEFAULT "system.posix_acl_default"

#define POSIX_ACL_XATTR_VERSION 2
#define POSIX_ACL_XATTR_HDR_LEN 4u    /* {version} */
#define POSIX_ACL_XATTR_ENTRY_LEN 8u  /* {tag, perm, id} */

/* entry tags (include/uapi/linux/posix_acl.h) */
#define ACL_USER_OBJ 0x01
#define ACL_USER 0x02
#define ACL_GROUP_OBJ 0x04
#define ACL_GROUP 0x08
#define ACL_MASK 0x10
#define ACL_OTHER 0x20
#define ACL_UNDEFINED_ID 0xffffffffu  /* the id of an entry that names no user or group */
#define ACL_PERM_MASK 0x07            /* read, write, execute */

#endif
