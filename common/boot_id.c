/* SPDX-License-Identifier: MIT */
#include "boot_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "sha256.h"

static bool test_set;
static uint8_t test_id[BOOT_ID_LEN];

void boot_id_set_for_test(const uint8_t *id)
{
	test_set = id != NULL;
	if (id)
		memcpy(test_id, id, BOOT_ID_LEN);
}

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (then a newline or the end) into 16 bytes. */
static int uuid_parse(const char *s, size_t len, uint8_t id[BOOT_ID_LEN])
{
	size_t i = 0, n = 0;

	for (; i < len && n < 2 * BOOT_ID_LEN; i++) {
		int v;

		if (s[i] == '-' && (i == 8 || i == 13 || i == 18 || i == 23))
			continue;
		v = hex_nibble(s[i]);
		if (v < 0)
			return -EBADMSG;
		if (n % 2 == 0)
			id[n / 2] = (uint8_t)(v << 4);
		else
			id[n / 2] |= (uint8_t)v;
		n++;
	}
	if (n != 2 * BOOT_ID_LEN || i != 36 || (len > 36 && s[36] != '\n'))
		return -EBADMSG;
	return 0;
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
	return uuid_parse(buf, (size_t)n, id);
}
