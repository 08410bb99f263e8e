/* SPDX-License-Identifier: MIT */
#include "size.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int size_parse_unit(const char *s, uint64_t unit, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)*s) || !unit)
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: return -EINVAL;
	}
	/* "Ki", "KiB": the binary unit spelt out; "KB" (a power of 1000 elsewhere) is refused */
	if (shift && (*end == 'i' || *end == 'I')) {
		end++;
		if (*end == 'b' || *end == 'B')
			end++;
	}
	if (*end != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	if (!shift) {
		if (v > UINT64_MAX / unit)
			return -EINVAL;
		v *= unit;
	}
	*out = (uint64_t)v << shift;
	return 0;
}

int size_parse(const char *s, uint64_t *out)
{
	return size_parse_unit(s, 1, out);
}

const char *size_human(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}
