/* SPDX-License-Identifier: MIT */
/* POSIX ACLs of tar members: their xattrs, and the mode bits they give (see tar_acl.c). */
#ifndef LZ_CAS_TAR_ACL_H
#define LZ_CAS_TAR_ACL_H

#include "../../common/dl_archive.h"
#include "tree.h"

/* How many xattrs tar_acl_apply() may add for e (0..2): room to leave in ino->xattrs. */
int tar_acl_count(struct archive_entry *e);
/*
 * After the member's attributes and xattrs are in ino: add e's text ACLs as the
 * system.posix_acl_* xattrs ino lacks, and set ino's permission bits from its access
 * ACL, as the kernel does. 0 or -ENOMEM; an ACL that cannot be used (a name this machine
 * does not know, no user::) is left out, with *warn saying why.
 */
int tar_acl_apply(struct tree *t, struct archive_entry *e, struct tree_inode *ino,
		  const char **warn);

#endif
