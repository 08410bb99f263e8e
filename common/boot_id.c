/* SPDX-License-Identifier: MIT */
#include "boot_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "uuid.h"

static bool test_set;
static uint8_t test_id[BOOT_ID_LEN];

void boot_id_set_for_test(const uint8_t *id)
{
	test_set = id != NULL;
	if (id)
		memcpy(test_id, id, BOOT_ID_LEN);
}

int boot_id_read(uint8_t id[BOOT_ID_LEN])
{
	char buf[64];
	ssize_t n;
	int fd, err;

	if (test_set) {
		memcpy(id, test_id, BOOT_ID_LEN);
		return 0;
	}
	fd = open(BOOT_ID_PATH, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	do {
		n = read(fd, buf, sizeof(buf));
	} while (n < 0 && errno == EINTR);
	err = errno;
	close(fd);
	if (n < 0)
		return -err;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	return uuid_parse(buf, (size_t)n, id) ? -EBADMSG : 0;
}
