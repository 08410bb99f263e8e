/* SPDX-License-Identifier: MIT */
/*
 * Confinement (confine.h): the user drop and the seccomp filter. The allow-list is what
 * `strace -f -c` saw lazyblk serve (NBD, vhost-user, the control socket, a remote over HTTP)
 * and lazyblk run make, plus what glibc and libcurl may call on paths those sessions did not
 * take (the DNS resolver, a name lookup through NSS); docs/security.md lists it.
 */
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <grp.h>
#include <linux/sched.h>
#include <pwd.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "why.h"

/* A name or a decimal number. 0 and *id, or -ENOENT. */
static int id_parse(const char *s, bool group, unsigned *id, gid_t *primary, bool *has_primary)
{
	char *end;
	unsigned long v;

	*has_primary = false;
	if (group) {
		struct group *g = getgrnam(s);

		if (g) {
			*id = g->gr_gid;
			return 0;
		}
	} else {
		struct passwd *p = getpwnam(s);

		if (p) {
			*id = p->pw_uid;
			*primary = p->pw_gid;
			*has_primary = true;
			return 0;
		}
	}
	errno = 0;
	v = strtoul(s, &end, 10);
	if (!*s || *end || errno || s[0] == '-' || v >= (unsigned long)(uid_t)-1)
		return -ENOENT;
	*id = (unsigned)v;
	if (!group) {
		struct passwd *p = getpwuid((uid_t)v);

		if (p) {
			*primary = p->pw_gid;
			*has_primary = true;
		}
	}
	return 0;
}

int confine_user_parse(const char *spec, struct confine_user *u, char *why, size_t why_len)
{
	char user[64];
	const char *colon = strchr(spec, ':');
	size_t ulen = colon ? (size_t)(colon - spec) : strlen(spec);
	unsigned uid, gid;
	gid_t primary = 0;
	bool has_primary, dummy;

	if (!ulen || ulen >= sizeof(user) || strlen(spec) >= sizeof(u->name) ||
	    (colon && !colon[1]))
		return why_set(why, why_len, -EINVAL, "bad --user '%s' (want USER[:GROUP])", spec);
	memcpy(user, spec, ulen);
	user[ulen] = '\0';
	if (id_parse(user, false, &uid, &primary, &has_primary))
		return why_set(why, why_len, -ENOENT, "--user %s: no such user", spec);
	if (colon) {
		if (id_parse(colon + 1, true, &gid, &primary, &dummy))
			return why_set(why, why_len, -ENOENT, "--user %s: no such group '%s'", spec,
				       colon + 1);
	} else if (has_primary) {
		gid = primary;
	} else {
		return why_set(why, why_len, -ENOENT, "--user %s: uid %u has no passwd entry: "
			       "name its group (--user %s:GROUP)", spec, uid, spec);
	}
	if (uid == 0)
		return why_set(why, why_len, -EINVAL, "--user %s: that is root (uid 0): nothing "
			       "would be dropped", spec);
	u->uid = (uid_t)uid;
	u->gid = (gid_t)gid;
	snprintf(u->name, sizeof(u->name), "%s", spec);
	return 0;
}

int confine_drop_user(const struct confine_user *u, char *why, size_t why_len)
{
	uid_t r, e, s;
	gid_t rg, eg, sg;

	if (getresuid(&r, &e, &s) || getresgid(&rg, &eg, &sg))
		return why_set(why, why_len, -errno, "getresuid: %s", strerror(errno));
	/* glibc applies each of these to every thread of the process (its setxid broadcast) */
	if (!(r == u->uid && e == u->uid && s == u->uid && rg == u->gid && eg == u->gid &&
	      sg == u->gid)) {
		if (setgroups(0, NULL) || setresgid(u->gid, u->gid, u->gid) ||
		    setresuid(u->uid, u->uid, u->uid))
			return why_set(why, why_len, -errno, "cannot switch to uid %u, gid %u: %s%s",
				       (unsigned)u->uid, (unsigned)u->gid, strerror(errno),
				       errno == EPERM ? " (needs root)" : "");
		if (getresuid(&r, &e, &s) || r != u->uid || e != u->uid || s != u->uid ||
		    setuid(0) == 0)
			return why_set(why, why_len, -EPERM, "uid %u: still privileged after the "
				       "switch", (unsigned)u->uid);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return why_set(why, why_len, -errno, "no_new_privs: %s", strerror(errno));
	return 0;
}

int confine_check_dir(const char *dir, unsigned depth, char *why, size_t why_len)
{
	struct dirent *e;
	DIR *d;
	int ret = 0;

	if (access(dir, W_OK | X_OK))
		return why_set(why, why_len, -errno, "%s: %s as uid %u", dir, strerror(errno),
			       (unsigned)geteuid());
	if (!depth)
		return 0;
	d = opendir(dir);
	if (!d)
		return why_set(why, why_len, -errno, "%s: %s as uid %u", dir, strerror(errno),
			       (unsigned)geteuid());
	while (!ret && (e = readdir(d))) {
		char sub[PATH_MAX];

		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) >= sizeof(sub))
			continue;
		ret = confine_check_dir(sub, depth - 1, why, why_len);
	}
	closedir(d);
	return ret;
}

/* The system calls every server makes; each allowed with any arguments. */
static const int allow_any[] = {
	/* memory */
	SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(mremap),
	SCMP_SYS(madvise), SCMP_SYS(memfd_create),
	/* threads, futexes, time, signals */
	SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(rseq), SCMP_SYS(set_tid_address),
	SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(gettid), SCMP_SYS(getpid),
	SCMP_SYS(getppid), SCMP_SYS(getuid), SCMP_SYS(geteuid), SCMP_SYS(getgid),
	SCMP_SYS(getegid), SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(tgkill),
	SCMP_SYS(kill), SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
	SCMP_SYS(rt_sigtimedwait), SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall),
	SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(clock_gettime),
	SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(wait4), SCMP_SYS(waitid),
	SCMP_SYS(getrandom), SCMP_SYS(uname), SCMP_SYS(sysinfo), SCMP_SYS(prlimit64),
	SCMP_SYS(getrlimit),
	/* files (the paths are the user's to grant: DAC) */
	SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
	SCMP_SYS(pwrite64), SCMP_SYS(preadv), SCMP_SYS(pwritev), SCMP_SYS(preadv2),
	SCMP_SYS(pwritev2), SCMP_SYS(lseek), SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(close),
	SCMP_SYS(fstat), SCMP_SYS(stat), SCMP_SYS(lstat), SCMP_SYS(newfstatat), SCMP_SYS(statx),
	SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(fsync),
	SCMP_SYS(fdatasync), SCMP_SYS(sync_file_range), SCMP_SYS(syncfs), SCMP_SYS(ftruncate),
	SCMP_SYS(fallocate), SCMP_SYS(fadvise64), SCMP_SYS(fchmod), SCMP_SYS(utimensat),
	SCMP_SYS(unlink), SCMP_SYS(unlinkat), SCMP_SYS(rmdir), SCMP_SYS(rename), SCMP_SYS(renameat),
	SCMP_SYS(renameat2), SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(link), SCMP_SYS(linkat),
	SCMP_SYS(getdents64), SCMP_SYS(fcntl), SCMP_SYS(flock), SCMP_SYS(dup), SCMP_SYS(dup2),
	SCMP_SYS(dup3), SCMP_SYS(pipe2), SCMP_SYS(readlink), SCMP_SYS(readlinkat),
	SCMP_SYS(getcwd), SCMP_SYS(statfs), SCMP_SYS(fstatfs), SCMP_SYS(eventfd2),
	/* waiting on descriptors */
	SCMP_SYS(poll), SCMP_SYS(ppoll), SCMP_SYS(select), SCMP_SYS(pselect6),
	SCMP_SYS(epoll_create1), SCMP_SYS(epoll_ctl), SCMP_SYS(epoll_wait),
	SCMP_SYS(epoll_pwait),
	/* connected sockets and outgoing connections (no bind, no listen: every socket that
	 * listens is open before the filter) */
	SCMP_SYS(connect), SCMP_SYS(accept), SCMP_SYS(accept4), SCMP_SYS(sendto),
	SCMP_SYS(recvfrom), SCMP_SYS(sendmsg), SCMP_SYS(recvmsg), SCMP_SYS(sendmmsg),
	SCMP_SYS(recvmmsg), SCMP_SYS(shutdown), SCMP_SYS(setsockopt), SCMP_SYS(getsockopt),
	SCMP_SYS(getsockname), SCMP_SYS(getpeername),
};

/* ioctls of every server: non-blocking mode, bytes pending, isatty, the terminal's width */
static const unsigned long allow_ioctl[] = { FIONBIO, FIONREAD, TCGETS, TIOCGWINSZ };

/* The address families a server's sockets use: unix (control, notify, nscd), IPv4, IPv6. */
static const int allow_family[] = { AF_UNIX, AF_INET, AF_INET6 };

/* KVM's ioctls: all of type 0xAE (linux/kvm.h: KVMIO), on /dev/kvm, the VM and the vCPUs */
#define CONFINE_KVMIO 0xAEu
/*
 * userfaultfd's (type 0xAA, linux/userfaultfd.h: UFFDIO): a VM restored from a store has
 * its RAM faults served by vmm-glue/lazyram, whose descriptor is opened and registered
 * before the filter; its handlers resolve faults with UFFDIO_CONTINUE, ZEROPAGE and WAKE
 */
#define CONFINE_UFFDIO 0xAAu

/* The rules that look at arguments, and those that answer ENOSYS. 0, or -errno. */
static int seccomp_rules(scmp_filter_ctx f, unsigned needs)
{
	int ret = 0;

	/* threads only: a clone without CLONE_THREAD is a new process (fork, posix_spawn) */
	ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			       SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	/* clone3's flags are in memory a filter cannot read: ENOSYS, glibc then uses clone */
	if (!ret)
		ret = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	/* a ring's operations bypass the filter: no io_uring (common/uring.c falls back) */
	if (!ret)
		ret = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(io_uring_setup), 0);
	if (!ret)
		ret = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(io_uring_enter), 0);
	if (!ret)
		ret = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(io_uring_register), 0);
	/* pthread_setname_np on the calling thread */
	if (!ret)
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				       SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME, 0));
	for (size_t i = 0; !ret && i < sizeof(allow_family) / sizeof(allow_family[0]); i++)
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				       SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)allow_family[i], 0));
	if (!ret)
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				       SCMP_A0(SCMP_CMP_EQ, AF_UNIX, 0));
	for (size_t i = 0; !ret && i < sizeof(allow_ioctl) / sizeof(allow_ioctl[0]); i++)
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, allow_ioctl[i]));
	if (!ret && (needs & CONFINE_KVM))
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00u, CONFINE_KVMIO << 8));
	if (!ret && (needs & CONFINE_KVM))
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00u, CONFINE_UFFDIO << 8));
	return ret;
}

int confine_seccomp(unsigned needs, char *why, size_t why_len)
{
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int ret = 0;

	if (!f)
		return why_set(why, why_len, -ENOMEM, "seccomp: cannot make a filter");
	/* every thread, and no_new_privs in each (libseccomp sets it: SCMP_FLTATR_CTL_NNP) */
	ret = seccomp_attr_set(f, SCMP_FLTATR_CTL_TSYNC, 1);
	for (size_t i = 0; !ret && i < sizeof(allow_any) / sizeof(allow_any[0]); i++)
		ret = seccomp_rule_add(f, SCMP_ACT_ALLOW, allow_any[i], 0);
	if (!ret)
		ret = seccomp_rules(f, needs);
	if (!ret)
		ret = seccomp_load(f);
	seccomp_release(f);
	if (ret)
		return why_set(why, why_len, ret < 0 ? ret : -EIO, "seccomp: cannot install the "
			       "filter: %s", strerror(ret < 0 ? -ret : EIO));
	return 0;
}
