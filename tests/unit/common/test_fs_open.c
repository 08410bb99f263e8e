/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for fs_open_regular (common/fsutil.c) against a local user who can write the
 * directory of the file it opens, and swaps another file in once the name has been looked
 * at (issue 24 follow-up, item 4). The attacker is played by this file's fstatat() and
 * openat(), which the library's calls reach (the test binary's own definitions win): each
 * makes the system call, then, when armed, renames a FIFO over the name. openat() also
 * records every descriptor it returns that is not a regular file: one opened by name after
 * the check (on a device, the open itself may act: a watchdog arms, a tape rewinds).
 */
#include "../helpers.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "../../../common/fsutil.h"

static bool armed;
static unsigned swaps, opened_other;
static char target[PATH_MAX], swap_in[PATH_MAX];

/* After the first look at target: the FIFO takes its name. */
static void attack(const char *name)
{
	if (armed && !strcmp(name, target)) {
		armed = false;
		assert_int_equal(rename(swap_in, target), 0);
		swaps++;
	}
}

int fstatat(int dfd, const char *name, struct stat *st, int flags)
{
	long r = syscall(SYS_newfstatat, dfd, name, st, flags);
	int e = errno;

	attack(name);
	errno = e;
	return (int)r;
}

int openat(int dfd, const char *name, int flags, ...)
{
	mode_t mode = 0;
	long r;
	int e;

	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	r = syscall(SYS_openat, dfd, name, flags, mode);
	e = errno;
	if (r >= 0 && !(flags & O_PATH)) {
		struct stat st;

		if (!syscall(SYS_fstat, (int)r, &st) && !S_ISREG(st.st_mode))
			opened_other++;
	}
	attack(name);
	errno = e;
	return (int)r;
}

struct fx {
	char dir[PATH_MAX];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	tmpdir_make(f->dir);
	path_fmt(target, "%s/file", f->dir);
	path_fmt(swap_in, "%s/fifo", f->dir);
	write_file(target, "checked", 7);
	assert_int_equal(mkfifo(swap_in, 0600), 0);
	armed = false;
	swaps = opened_other = 0;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	rm_rf(f->dir);
	free(f);
	return 0;
}

/* The name becomes a FIFO after it was looked at: what was checked is what is opened. */
static void swap_once(int flags)
{
	char buf[16] = "";
	struct stat st;
	int fd;

	armed = true;
	alarm(60); /* a blocking open of the FIFO would hang here */
	fd = fs_open_regular(AT_FDCWD, target, flags, &st);
	alarm(0);
	assert_int_equal(swaps, 1);
	assert_int_equal(opened_other, 0); /* nothing but a regular file was ever opened */
	assert_true(fd >= 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 7);
	assert_int_equal(read(fd, buf, sizeof(buf)), 7);
	assert_string_equal(buf, "checked");
	assert_int_equal(fcntl(fd, F_GETFL) & (O_NONBLOCK | O_ACCMODE), O_RDONLY);
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	close(fd);
	/* the FIFO that is there now is refused, and not opened */
	assert_int_equal(fs_open_regular(AT_FDCWD, target, flags, NULL), -EINVAL);
	assert_int_equal(opened_other, 0);
}

static void test_swap_after_look(void **state)
{
	(void)state;
	swap_once(0);
}

static void test_swap_after_look_nofollow(void **state)
{
	(void)state;
	swap_once(O_NOFOLLOW);
}

/* Read-write (the pid file): the same, and the descriptor is writable. */
static void test_read_write(void **state)
{
	int fd;

	(void)state;
	fd = fs_open_regular(AT_FDCWD, target, O_RDWR | O_NOFOLLOW, NULL);
	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	assert_int_equal(pwrite(fd, "X", 1, 0), 1);
	close(fd);
	assert_int_equal(fs_open_regular(AT_FDCWD, swap_in, O_RDWR, NULL), -EINVAL);
	assert_int_equal(opened_other, 0);
}

/*
 * Without /proc (a mount namespace of a child, /proc detached): the name is opened again,
 * and the API is the same: a regular file opens, a FIFO, a directory and a link with
 * O_NOFOLLOW are refused, without blocking.
 */
static int no_proc_child(const char *dir)
{
	char link[PATH_MAX];
	int fd;

	if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    umount2("/proc", MNT_DETACH))
		return 77;
	if (!access("/proc/self/fd", F_OK))
		return 77;
	snprintf(link, sizeof(link), "%s/link", dir);
	if (symlink(target, link))
		return 2;
	alarm(60);
	fd = fs_open_regular(AT_FDCWD, target, O_NOFOLLOW, NULL);
	if (fd < 0 || fcntl(fd, F_GETFL) & O_NONBLOCK)
		return 3;
	close(fd);
	if (fs_open_regular(AT_FDCWD, swap_in, 0, NULL) != -EINVAL ||
	    fs_open_regular(AT_FDCWD, dir, 0, NULL) != -EISDIR ||
	    fs_open_regular(AT_FDCWD, link, O_NOFOLLOW, NULL) != -ELOOP ||
	    opened_other)
		return 4;
	fd = fs_open_regular(AT_FDCWD, link, 0, NULL);
	return fd >= 0 ? 0 : 5;
}

static void test_no_proc(void **state)
{
	struct fx *f = *state;
	int status;
	pid_t pid;

	if (geteuid() != 0)
		skip(); /* a mount namespace needs root */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(no_proc_child(f->dir));
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_swap_after_look, setup, teardown),
		cmocka_unit_test_setup_teardown(test_swap_after_look_nofollow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_write, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_proc, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
