/* SPDX-License-Identifier: MIT */
/*
 * A VM snapshot's RAM (vmm-glue/vm_snapshot_ram.h): written from a memfd, the ram file has
 * the non-zero pages and holes elsewhere, the memfd's holes stay holes (never read), and
 * the threaded check gives the digest and page count the write gave; a byte changed in a
 * written page or a hole made non-zero changes them; a check abandoned at once frees
 * cleanly.
 */
#include "../helpers.h"
#include <sys/mman.h>
#include "../../../vmm-glue/vm_snapshot_ram.h"

#define RAM_SIZE (8u << 20)

struct ram_sum {
	uint8_t d[VMSNAP_XXH];
	uint64_t pages;
};

/* The check of the file at path. */
static void check_file(const char *path, struct ram_sum *s)
{
	struct ram_digest *c = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(vmsnap_ram_check_start(fd, RAM_SIZE, &c), 0);
	assert_int_equal(vmsnap_ram_check_end(c, false, s->d, &s->pages), 0);
	vmsnap_ram_check_free(c);
	close(fd);
}

static void poke(const char *path, off_t off, uint8_t xor)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	uint8_t b = 0;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, off), 1);
	b ^= xor;
	assert_int_equal(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static void test_write_check(void **state)
{
	struct vm_ram ram = { .size = RAM_SIZE };
	struct ram_sum w = { 0 }, c;
	struct ram_digest *d = NULL;
	char dir[PATH_MAX], path[PATH_MAX];
	struct stat st;
	int fd;

	(void)state;
	ram.fd = memfd_create("test-ram", MFD_CLOEXEC);
	assert_true(ram.fd >= 0);
	assert_int_equal(ftruncate(ram.fd, RAM_SIZE), 0);
	ram.map = mmap(NULL, RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, ram.fd, 0);
	assert_true(ram.map != MAP_FAILED);
	ram.map[0x1000] = 1;                     /* region 0 */
	memset(ram.map + 0x300000, 0, 4096);      /* touched, zero: not written */
	ram.map[0x500123] = 2;                   /* region 2 */
	ram.map[RAM_SIZE - 1] = 3;               /* the last page */
	tmpdir_make(dir);
	path_fmt(path, "%s/ram", dir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(vmsnap_ram_write(&ram, fd, w.d, &w.pages), 0);
	close(fd);
	assert_int_equal(w.pages, 3);
	assert_int_equal(fstat(ram.fd, &st), 0);   /* the holes were not read */
	assert_true(st.st_blocks * 512 <= 4 * 4096);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, RAM_SIZE);
	assert_true(st.st_blocks * 512 < RAM_SIZE / 4);

	check_file(path, &c);
	assert_int_equal(c.pages, 3);
	assert_memory_equal(c.d, w.d, VMSNAP_XXH);
	poke(path, 0x500123, 0x40);              /* a written page */
	check_file(path, &c);
	assert_memory_not_equal(c.d, w.d, VMSNAP_XXH);
	poke(path, 0x500123, 0x40);
	poke(path, 0x600000, 0x01);              /* a hole */
	check_file(path, &c);
	assert_int_equal(c.pages, 4);
	assert_memory_not_equal(c.d, w.d, VMSNAP_XXH);

	fd = open(path, O_RDONLY | O_CLOEXEC);   /* abandoned: stops and frees */
	assert_int_equal(vmsnap_ram_check_start(fd, RAM_SIZE, &d), 0);
	vmsnap_ram_check_free(d);
	close(fd);
	munmap(ram.map, RAM_SIZE);
	close(ram.fd);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
