/* SPDX-License-Identifier: MIT */
/* common/uring: synchronous file I/O through a per-thread io_uring. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../common/fsutil.h"
#include "../../../common/uring.h"

static int tmpfile_fd(void)
{
	char path[] = "/tmp/lazyblk-uring-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	return fd;
}

static void test_roundtrip(void **state)
{
	uint8_t w[10000], r[10000];
	int fd = tmpfile_fd();

	(void)state;
	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 7);
	assert_int_equal(uring_pwrite_full(fd, w, sizeof(w), 4096), 0);
	assert_int_equal(uring_fdatasync(fd), 0);
	assert_int_equal(uring_pread_full(fd, r, sizeof(r), 4096), 0);
	assert_memory_equal(w, r, sizeof(w));
	/* the hole before the data reads as zeros; past the end is -EIO */
	assert_int_equal(uring_pread_full(fd, r, 4096, 0), 0);
	for (int i = 0; i < 4096; i++)
		assert_int_equal(r[i], 0);
	assert_int_equal(uring_pread_full(fd, r, 100, 4096 + sizeof(w) - 50), -EIO);
	assert_int_equal(uring_pread_full(-1, r, 10, 0), -EBADF);
	close(fd);
}

static void test_read_fd(void **state)
{
	int fd = tmpfile_fd();
	uint8_t *data;
	size_t len;

	(void)state;
	assert_int_equal(uring_pwrite_full(fd, "hello", 5, 0), 0);
	/* fs_read_fd reads through the ring, from offset 0 whatever the file position */
	assert_int_equal(fs_read_fd(fd, &data, &len), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(data, "hello", 6);
	free(data);
	close(fd);
}

static void *thread_io(void *arg)
{
	int fd = *(int *)arg;
	uint8_t b[512];

	memset(b, 0x5a, sizeof(b));
	if (uring_pwrite_full(fd, b, sizeof(b), 8192) || uring_pread_full(fd, b, sizeof(b), 8192))
		return (void *)1;
	return NULL;
}

static void test_threads_and_fork(void **state)
{
	int fd = tmpfile_fd(), status;
	pthread_t t[4];
	uint8_t b[4];
	pid_t pid;

	(void)state;
	assert_int_equal(uring_pwrite_full(fd, "abcd", 4, 0), 0); /* this thread's ring exists */
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, thread_io, &fd), 0);
	for (int i = 0; i < 4; i++) {
		void *ret;

		pthread_join(t[i], &ret);
		assert_null(ret);
	}
	/* a forked child gets a ring of its own and leaves the parent's intact */
	pid = fork();
	if (pid == 0) {
		uint8_t c[4];

		_exit(uring_pwrite_full(fd, "wxyz", 4, 100) || uring_pread_full(fd, c, 4, 0) ||
		      memcmp(c, "abcd", 4));
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(uring_pread_full(fd, b, 4, 100), 0);
	assert_memory_equal(b, "wxyz", 4);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_read_fd),
		cmocka_unit_test(test_threads_and_fork),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
