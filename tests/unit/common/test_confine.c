/* SPDX-License-Identifier: MIT */
/*
 * common/confine: --user's USER[:GROUP], the user drop (as root), and the seccomp filter,
 * each installed in a forked child (a filter cannot be removed): the calls a server makes
 * work (threads, sockets of its families, reads and writes, io_uring's fallback), the ones
 * an intruder would make fail with EPERM (a new process, exec, a new listening socket,
 * netlink, unshare, ptrace, TIOCSTI, KVM without CONFINE_KVM), io_uring with ENOSYS.
 */
#include <linux/kvm.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "../helpers.h"

#include "../../../common/confine.h"
#include "../../../common/uring.h"

static void test_user_parse(void **state)
{
	struct confine_user u;
	char why[256];

	(void)state;
	assert_int_equal(confine_user_parse("nobody", &u, why, sizeof(why)), 0);
	assert_int_equal(u.uid, 65534);
	assert_string_equal(u.name, "nobody");
	assert_int_equal(confine_user_parse("65534:12345", &u, why, sizeof(why)), 0);
	assert_int_equal(u.uid, 65534);
	assert_int_equal(u.gid, 12345);
	assert_int_equal(confine_user_parse("root", &u, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "root (uid 0)"));
	assert_int_equal(confine_user_parse("0:0", &u, why, sizeof(why)), -EINVAL);
	assert_int_equal(confine_user_parse("no-such-user-lz", &u, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "--user no-such-user-lz: no such user");
	assert_int_equal(confine_user_parse("nobody:no-such-group-lz", &u, why, sizeof(why)),
			 -ENOENT);
	assert_int_equal(confine_user_parse("", &u, why, sizeof(why)), -EINVAL);
	assert_int_equal(confine_user_parse(":1", &u, why, sizeof(why)), -EINVAL);
	assert_int_equal(confine_user_parse("nobody:", &u, why, sizeof(why)), -EINVAL);
	/* a uid without a passwd entry needs its group named */
	assert_int_equal(confine_user_parse("54321", &u, why, sizeof(why)), -ENOENT);
	assert_non_null(strstr(why, "--user 54321:GROUP"));
	assert_int_equal(confine_user_parse("54321:54321", &u, why, sizeof(why)), 0);
}

/* Runs fn in a forked child; its exit status must be 0 (a failed assertion exits 1). */
static void in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(fn());
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* In the child: cmocka's asserts longjmp to the parent's state, so plain checks. */
#define CHECK(cond)                                                                        \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: %s failed (errno %d)\n", __FILE__, __LINE__,    \
				#cond, errno);                                             \
			return 1;                                                          \
		}                                                                          \
	} while (0)
/* the call fails with err */
#define REFUSED(call, err) CHECK((call) < 0 && errno == (err))

static void *thread_fn(void *arg)
{
	return arg;
}

/* What a server does after the filter: all of it works. */
static int allowed_calls(int fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/nonexistent-lz" };
	pthread_t t;
	void *ret = NULL;
	char buf[16];
	int sv[2], s;

	CHECK(pthread_create(&t, NULL, thread_fn, buf) == 0); /* clone3 refused: clone */
	CHECK(pthread_join(t, &ret) == 0 && ret == buf);
	CHECK(uring_pread_full(fd, buf, 4, 0) == 0 && !memcmp(buf, "abcd", 4));
	CHECK(uring_pwrite_full(fd, "wxyz", 4, 4) == 0 && uring_fdatasync(fd) == 0);
	CHECK(pread(fd, buf, 8, 0) == 8 && !memcmp(buf, "abcdwxyz", 8));
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(write(sv[0], "x", 1) == 1 && read(sv[1], buf, 1) == 1);
	s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	close(s);
	s = socket(AF_UNIX, SOCK_DGRAM, 0);
	CHECK(s >= 0);
	REFUSED(connect(s, (struct sockaddr *)&sa, sizeof(sa)), ENOENT); /* allowed: no path */
	close(s);
	CHECK(prctl(PR_SET_NAME, "lz-test", 0, 0, 0) == 0);
	CHECK(getpid() > 0);
	return 0;
}

/* What an intruder would do: all refused. */
static int refused_calls(void)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	char *argv[] = { "true", NULL };
	int s;
	long r;

	REFUSED(execve("/bin/true", argv, argv + 1), EPERM);
	r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0); /* fork */
	if (r == 0)
		_exit(3);
	CHECK(r < 0 && errno == EPERM);
	REFUSED(socket(AF_NETLINK, SOCK_RAW, 0), EPERM);
	REFUSED(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
	s = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	REFUSED(bind(s, (struct sockaddr *)&in, sizeof(in)), EPERM);
	REFUSED(listen(s, 1), EPERM);
	close(s);
	REFUSED(unshare(CLONE_NEWUSER), EPERM);
	REFUSED(ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM);
	REFUSED(ioctl(0, TIOCSTI, "x"), EPERM);
	REFUSED(ioctl(-1, KVM_GET_API_VERSION, 0), EPERM); /* not without CONFINE_KVM */
	REFUSED(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), EPERM);
	REFUSED(syscall(SYS_io_uring_setup, 4, NULL), ENOSYS);
	REFUSED(setuid(getuid()), EPERM);
	return 0;
}

static int seccomp_child(void)
{
	char path[] = "/tmp/lazyblk-confine-XXXXXX", why[256], buf[4];
	int fd = mkstemp(path), ret;

	CHECK(fd >= 0);
	unlink(path);
	CHECK(pwrite(fd, "abcdefgh", 8, 0) == 8);
	CHECK(uring_pread_full(fd, buf, 4, 0) == 0); /* this thread's ring, made before */
	ret = confine_seccomp(0, why, sizeof(why));
	if (ret)
		fprintf(stderr, "%s\n", why);
	CHECK(ret == 0);
	if (allowed_calls(fd) || refused_calls())
		return 1;
	return 0;
}

static void test_seccomp(void **state)
{
	(void)state;
	in_child(seccomp_child);
}

/* KVM's ioctls with CONFINE_KVM: they reach the kernel (EBADF on no descriptor). */
static int seccomp_kvm_child(void)
{
	char why[256];

	CHECK(confine_seccomp(CONFINE_KVM, why, sizeof(why)) == 0);
	REFUSED(ioctl(-1, KVM_GET_API_VERSION, 0), EBADF);
	REFUSED(ioctl(-1, KVM_RUN, 0), EBADF);
	REFUSED(ioctl(0, TIOCSTI, "x"), EPERM);
	return 0;
}

static void test_seccomp_kvm(void **state)
{
	(void)state;
	in_child(seccomp_kvm_child);
}

/* As root: every thread becomes the user, no capabilities, no way back. */
static pthread_mutex_t drop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drop_cond = PTHREAD_COND_INITIALIZER;
static int drop_phase;

static void *drop_thread(void *arg)
{
	uid_t r, e, s;

	pthread_mutex_lock(&drop_lock);
	while (drop_phase == 0)
		pthread_cond_wait(&drop_cond, &drop_lock);
	pthread_mutex_unlock(&drop_lock);
	getresuid(&r, &e, &s);
	*(int *)arg = r == 65534 && e == 65534 && s == 65534;
	return NULL;
}

static int drop_child(void)
{
	struct confine_user u;
	char why[256];
	pthread_t t;
	int same = 0;
	gid_t g[4];

	CHECK(confine_user_parse("65534:65533", &u, why, sizeof(why)) == 0);
	CHECK(pthread_create(&t, NULL, drop_thread, &same) == 0); /* a thread from before */
	CHECK(confine_drop_user(&u, why, sizeof(why)) == 0);
	pthread_mutex_lock(&drop_lock);
	drop_phase = 1;
	pthread_cond_broadcast(&drop_cond);
	pthread_mutex_unlock(&drop_lock);
	pthread_join(t, NULL);
	CHECK(same);
	CHECK(getuid() == 65534 && geteuid() == 65534 && getgid() == 65533 &&
	      getegid() == 65533);
	CHECK(getgroups(4, g) == 0);
	CHECK(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
	REFUSED(setuid(0), EPERM);
	CHECK(confine_check_dir("/", 0, why, sizeof(why)) == -EACCES);
	CHECK(strstr(why, "as uid 65534") != NULL);
	/* already that user: nothing to switch, no error */
	CHECK(confine_drop_user(&u, why, sizeof(why)) == 0);
	return 0;
}

static int drop_unprivileged_child(void)
{
	struct confine_user u;
	char why[256];

	CHECK(confine_user_parse("65534:65534", &u, why, sizeof(why)) == 0);
	if (getuid() == 0)
		CHECK(setresuid(65533, 65533, 65533) == 0);
	CHECK(confine_drop_user(&u, why, sizeof(why)) == -EPERM);
	CHECK(strstr(why, "(needs root)") != NULL);
	return 0;
}

static void test_drop_user(void **state)
{
	(void)state;
	in_child(drop_unprivileged_child);
	if (geteuid() != 0) {
		print_message("drop to uid 65534 not tested (not root)\n");
		return;
	}
	in_child(drop_child);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_parse),
		cmocka_unit_test(test_seccomp),
		cmocka_unit_test(test_seccomp_kvm),
		cmocka_unit_test(test_drop_user),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
