/* SPDX-License-Identifier: MIT */
#include "uuid.h"

#include <errno.h>
#include <stdbool.h>

#include "sha256.h"

static bool uuid_dash_at(size_t i)
{
	return i == 8 || i == 13 || i == 18 || i == 23;
}

int uuid_parse(const char *s, size_t len, uint8_t out[UUID_LEN])
{
	bool dashed = len == 36;
	size_t n = 0;

	if (len != 36 && len != 2 * UUID_LEN)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int v;

		if (dashed && uuid_dash_at(i)) {
			if (s[i] != '-')
				return -EINVAL;
			continue;
		}
		v = hex_nibble(s[i]);
		if (v < 0)
			return -EINVAL;
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return 0;
}
