/* SPDX-License-Identifier: MIT */
#include "json_out.h"

#include <stdint.h>
#include <string.h>

bool json_utf8_valid(const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s, *end = p + len;

	while (p < end) {
		uint8_t c = *p;
		size_t n;
		uint32_t cp;

		if (c == 0)
			return false;
		if (c < 0x80) {
			p++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if ((size_t)(end - p) <= n)
			return false;
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		p += n + 1;
	}
	return true;
}

void json_write_str(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\t': fputs("\\t", f); break;
		case '\r': fputs("\\r", f); break;
		default:
			if (c < 0x20 || c == 0x7f)
				fprintf(f, "\\u%04x", c);
			else
				fputc(c, f);
		}
	}
	fputc('"', f);
}

void json_write_field_bytes(FILE *f, const char *key, const void *v, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	const uint8_t *p = v;

	if (json_utf8_valid(v, len)) {
		fprintf(f, "\"%s\":", key);
		json_write_str(f, v, len);
		return;
	}
	fprintf(f, "\"%s_hex\":\"", key);
	for (size_t i = 0; i < len; i++) {
		fputc(digits[p[i] >> 4], f);
		fputc(digits[p[i] & 15], f);
	}
	fputc('"', f);
}
