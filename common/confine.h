/* SPDX-License-Identifier: MIT */
/*
 * Confinement of a server once it has opened what it needs (lazyblk serve and run, --user and
 * --seccomp; docs/security.md): drop to an unprivileged user, then a seccomp filter that
 * allows only the system calls the servers make. Firecracker's jailer is the model. Nothing
 * here prints: -errno and one line in why.
 */
#ifndef LZ_COMMON_CONFINE_H
#define LZ_COMMON_CONFINE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The user to become: --user USER[:GROUP]. */
struct confine_user {
	uid_t uid;
	gid_t gid;
	char name[64];   /* USER[:GROUP] as given, for messages */
};

/*
 * "USER[:GROUP]", names or numbers, into u: USER's uid, and GROUP's gid or else USER's
 * primary group (a numeric USER without a passwd entry needs GROUP). root (uid 0) is refused:
 * there would be nothing to drop. 0, or -EINVAL / -ENOENT with why.
 */
int confine_user_parse(const char *spec, struct confine_user *u, char *why, size_t why_len);

/*
 * Become u in every thread of the process: no supplementary groups, then the group, then the
 * user (real, effective and saved: there is no way back; every capability goes with root),
 * and no_new_privs in the calling thread (so that nothing it starts can gain privileges by
 * exec; --seccomp's filter sets it in all threads). Already u: only no_new_privs. 0, or
 * -errno with why ("cannot switch to uid 65534, gid 65534: Operation not permitted").
 */
int confine_drop_user(const struct confine_user *u, char *why, size_t why_len);

/*
 * Can this process, as it is now, write into dir and its subdirectories down to depth
 * levels (create and remove entries: write and search permission)? 0, or -EACCES etc. with
 * why naming the first that is not ("DIR/chunks/0a: Permission denied as uid 65534").
 */
int confine_check_dir(const char *dir, unsigned depth, char *why, size_t why_len);

/* What the filter allows besides the calls every server makes (confine_seccomp). */
enum confine_needs {
	CONFINE_KVM = 1 << 0,   /* the built-in VMM: KVM's ioctls (lazyblk run) */
};

/*
 * Install the seccomp filter in every thread (SECCOMP_FILTER_FLAG_TSYNC; and no_new_privs
 * in every thread): the system calls of docs/security.md's list are allowed, clone only for
 * threads, clone3 and io_uring fail with ENOSYS (glibc and common/uring.c fall back to clone
 * and plain reads and writes), anything else fails with EPERM; a call of another ABI (i386,
 * x32) kills the process. needs: enum confine_needs. 0, or -errno with why.
 */
int confine_seccomp(unsigned needs, char *why, size_t why_len);

#endif
