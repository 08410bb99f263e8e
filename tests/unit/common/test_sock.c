/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for common/sock.c: the unix sockets the servers listen on (NBD, vhost-user, the
 * control socket), set up in a directory others may write (issue 24). An attacker who swaps
 * the path between two of sock_listen_unix's calls is played by this file's bind() and
 * connect(), which the library's calls reach (the test binary's own definitions win) and
 * which make the system call, then, when armed, do the swap.
 */
#include "../helpers.h"

#include <sys/syscall.h>
#include <sys/un.h>

#include "../../../common/sock.h"

static enum { NONE, AFTER_BIND, AFTER_CONNECT } attack;
static char victim[PATH_MAX], moved[PATH_MAX];

/* The socket file just made is moved away, and a link to victim put in its place. */
int bind(int fd, const struct sockaddr *a, socklen_t len)
{
	long r = syscall(SYS_bind, fd, a, len);
	const char *path = ((const struct sockaddr_un *)a)->sun_path;

	if (r == 0 && attack == AFTER_BIND) {
		attack = NONE;
		assert_int_equal(rename(path, moved), 0);
		assert_int_equal(symlink(victim, path), 0);
	}
	return (int)r;
}

/* The stale socket just checked is moved away, and victim (a regular file) put there. */
int connect(int fd, const struct sockaddr *a, socklen_t len)
{
	long r = syscall(SYS_connect, fd, a, len);
	const char *path = ((const struct sockaddr_un *)a)->sun_path;
	int e = errno;

	if (attack == AFTER_CONNECT) {
		attack = NONE;
		assert_int_equal(rename(path, moved), 0);
		assert_int_equal(rename(victim, path), 0);
	}
	errno = e;
	return (int)r;
}

struct fx {
	char dir[PATH_MAX], path[PATH_MAX];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	tmpdir_make(f->dir);
	path_fmt(f->path, "%s/ctl.sock", f->dir);
	path_fmt(victim, "%s/victim", f->dir);
	path_fmt(moved, "%s/moved.sock", f->dir);
	attack = NONE;
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

static void write_victim(mode_t mode)
{
	int fd = open(victim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "precious", 8), 8);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* A socket file nothing listens on any more, made at path (by the real bind). */
static void make_stale(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(a.sun_path, path);
	assert_true(fd >= 0);
	assert_int_equal(syscall(SYS_bind, fd, &a, sizeof(a)), 0);
	close(fd);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode;
}

/* The socket file has its mode from its creation, whatever the umask lets through. */
static void test_mode(void **state)
{
	struct fx *f = *state;
	struct sock_file file;
	mode_t old = umask(022);
	int fd;

	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), 0);
	assert_true(S_ISSOCK(mode_of(f->path)));
	assert_int_equal(mode_of(f->path) & 07777, 0600);
	close(fd);
	umask(077);
	sock_unlink_unix(f->path, &file);
	assert_int_equal(sock_listen_unix(f->path, 0, 8, "test", &fd, &file), 0);
	assert_int_equal(mode_of(f->path) & 07777, 0700); /* mode 0: the umask's */
	close(fd);
	sock_unlink_unix(f->path, &file);
	umask(old);
	assert_int_equal(access(f->path, F_OK), -1);
}

/*
 * The path swapped for a link right after bind: the mode was the socket's from its
 * creation, and nothing is changed through the link (a chmod by path made the link's
 * target 0600).
 */
static void test_swap_after_bind(void **state)
{
	struct fx *f = *state;
	struct sock_file file;
	int fd;

	write_victim(0644);
	attack = AFTER_BIND;
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), 0);
	assert_int_equal(attack, NONE);
	assert_int_equal(mode_of(victim) & 07777, 0644);
	assert_true(S_ISSOCK(mode_of(moved)));
	assert_int_equal(mode_of(moved) & 07777, 0600);
	close(fd);
}

/* A stale socket of ours is replaced; a live one, a file, a link are not. */
static void test_stale(void **state)
{
	struct fx *f = *state;
	struct sock_file file;
	int fd, fd2;

	make_stale(f->path);
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), 0);
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd2, &file), -EADDRINUSE);
	assert_true(S_ISSOCK(mode_of(f->path)));
	close(fd);
	sock_unlink_unix(f->path, &file);

	write_victim(0644);
	assert_int_equal(symlink(victim, f->path), 0);
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), -EADDRINUSE);
	assert_true(S_ISLNK(mode_of(f->path)));
	sock_unlink_unix(f->path, &file); /* not a socket: left */
	assert_true(S_ISLNK(mode_of(f->path)));
	assert_int_equal(unlink(f->path), 0);
	assert_int_equal(rename(victim, f->path), 0);
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), -EADDRINUSE);
	sock_unlink_unix(f->path, &file);
	assert_true(S_ISREG(mode_of(f->path)));
}

/* A stale socket of another user is not ours to replace. */
static void test_stale_other_user(void **state)
{
	struct fx *f = *state;
	struct sock_file file;
	int fd;

	if (geteuid() != 0)
		skip(); /* chown needs root */
	make_stale(f->path);
	assert_int_equal(chown(f->path, 65534, 65534), 0);
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), -EADDRINUSE);
	assert_true(S_ISSOCK(mode_of(f->path)));
}

/* The stale socket swapped for a regular file after it was checked: that file stays. */
static void test_swap_after_stale_check(void **state)
{
	struct fx *f = *state;
	struct sock_file file;
	char buf[16] = "";
	int fd;

	make_stale(f->path);
	write_victim(0644);
	attack = AFTER_CONNECT;
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), -EADDRINUSE);
	assert_int_equal(attack, NONE);
	assert_true(S_ISREG(mode_of(f->path)));
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(read(fd, buf, sizeof(buf)), 8);
	assert_string_equal(buf, "precious");
	close(fd);
}

/* A live server on path with a full backlog: listen(0) and one connection not accepted. */
static int live_full(const char *path, int *client)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(a.sun_path, path);
	assert_true(fd >= 0);
	assert_int_equal(syscall(SYS_bind, fd, &a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 0), 0);
	*client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(*client >= 0);
	assert_int_equal(syscall(SYS_connect, *client, &a, sizeof(a)), 0);
	/* the backlog is full now: a blocking connect would wait until the server accepts */
	return fd;
}

/*
 * A live server (of the same user) that does not accept: the stale check's connect must not
 * wait for it (issue 24 follow-up, item 6: a blocking connect hung start-up for good). The
 * alarm is only a hang guard: a hang fails the test, never slowly passes it.
 */
static void test_live_full_backlog(void **state)
{
	struct fx *f = *state;
	struct sock_file file;
	int srv, cl, fd;

	srv = live_full(f->path, &cl);
	alarm(60);
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &fd, &file), -EADDRINUSE);
	alarm(0);
	assert_true(S_ISSOCK(mode_of(f->path))); /* the live one's file is left */
	close(cl);
	close(srv);
}

/*
 * A server stopping (its listener closed) and a newer one started on the same path before
 * the first removed its file: the newer one replaces the stale file, and the first one's
 * removal at its end leaves the newer one's socket (issue 24 follow-up, item 6).
 */
static void test_unlink_newer(void **state)
{
	struct fx *f = *state;
	struct sock_file old_file, new_file;
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int old_fd, new_fd, c;

	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &old_fd, &old_file), 0);
	assert_true(old_file.ino != 0);
	close(old_fd);   /* the first server stops accepting... */
	assert_int_equal(sock_listen_unix(f->path, 0600, 8, "test", &new_fd, &new_file), 0);
	assert_true(new_file.ino != old_file.ino);
	sock_unlink_unix(f->path, &old_file);   /* ...and removes its socket file at its end */
	assert_true(S_ISSOCK(mode_of(f->path)));
	strcpy(a.sun_path, f->path);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(c >= 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0); /* the newer one */
	close(c);
	sock_unlink_unix(f->path, &new_file);
	assert_int_equal(access(f->path, F_OK), -1);
	close(new_fd);
	/* a file not known (0, 0: the socket was swapped away after bind) removes nothing */
	make_stale(f->path);
	new_file.dev = new_file.ino = 0;
	sock_unlink_unix(f->path, &new_file);
	assert_true(S_ISSOCK(mode_of(f->path)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_swap_after_bind, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_other_user, setup, teardown),
		cmocka_unit_test_setup_teardown(test_swap_after_stale_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live_full_backlog, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unlink_newer, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
